#!/usr/bin/env bash
# The admin API and meshgate-ctl against a live gateway: a client namespace curls a VIP served
# by python3 http.server in a backend namespace (net_af_packet ports on veths, as in
# e2e_dnat_kernel_peers.sh), and every endpoint's answer is checked with curl + python3:
# /ready, /healthz, /stats (counters advancing), /metrics (every line parses), /config_dump
# (the services of the config), /flows (the real flows, one held open, and its filters),
# meshgate-ctl services (table and -o json: active / inactive connections, bytes, rates) / flows
# (filters) / stats / config / workloads / certificates / policies, usage errors. Then drain: POST /drain (via meshgate-ctl) keeps the
# established flow flowing, refuses new ones, /ready turns 503, and the gateway exits 0 as soon
# as the flow closes, with --stats-json; meshgate-ctl then exits 1. A second run drains on
# SIGTERM with a flow that never closes and stops at drain_timeout_ms.
source "$(dirname "$0")/lib.sh"
require_root
MG_CTL=${MG_CTL:?MG_CTL must point at meshgate-ctl}
A=$MG_ADMIN
ctl() { "$MG_CTL" --admin "$A" "$@"; }

CLI=mac$ID BE=mab$ID GWC=gac$ID GWB=gab$ID
add_host "$CLI" "$GWC" 192.0.2.2/24 192.0.2.1
add_host "$BE" "$GWB" 198.51.100.11/24 198.51.100.1

mkdir -p "$TMP/www"
echo "hello from the backend $ID" >"$TMP/www/hello.txt"
ip netns exec "$BE" python3 -m http.server 8080 --bind 0.0.0.0 --directory "$TMP/www" >"$TMP/http.log" 2>&1 &
PIDS+=($!)

# gateway_config DRAIN_TIMEOUT_MS
gateway_config() {
  cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
drain_timeout_ms = $1
[[port]]
name = "client"
device = "net_af_packet_c$ID,iface=$GWC"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_b$ID,iface=$GWB"
addresses = ["198.51.100.1/24"]
[[route]]
prefix = "10.99.0.0/16"
via = "198.51.100.254"
[[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:fe:01"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "dns"
vip = "203.0.113.10"
port = 53
protocol = "udp"
  [[service.backend]]
  address = "198.51.100.11"
  port = 53
  weight = 3
  [[service.backend]]
  address = "198.51.100.12"
  port = 53
  weight = 0
[admin]
listen = "$A"
TOML
}

# hold_connection TAG: a TCP connection to the VIP from the client namespace that stays open
# (established) until $TMP/TAG.go exists; it then sends a request over it, saves the answer in
# $TMP/TAG.reply and closes.
# hold_connection TAG [PATH [half-close]]: a connection to the VIP, open until $TMP/TAG.go
# exists; then it requests PATH (default /hello.txt), with "half-close" shuts its sending side
# down right after the request (its FIN), and writes the whole reply to $TMP/TAG.reply.
hold_connection() {
  local tag=$1 path=${2:-/hello.txt} half=${3:-}
  ip netns exec "$CLI" python3 - "$TMP/$tag" "$path" "$half" <<'PY' >"$TMP/$tag.log" 2>&1 &
import os, socket, sys, time
base, path, half = sys.argv[1], sys.argv[2], sys.argv[3] == "half-close"
s = socket.create_connection(("203.0.113.10", 80), timeout=60)
open(base + ".connected", "w").close()
while not os.path.exists(base + ".go"):
    time.sleep(0.05)
s.sendall(b"GET " + path.encode() + b" HTTP/1.0\r\nHost: web\r\n\r\n")
if half:
    s.shutdown(socket.SHUT_WR)
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
open(base + ".reply", "wb").write(data)
s.close()
PY
  PIDS+=($!)
  HOLD_PID=$!
  wait_for 10 test -e "$TMP/$tag.connected" || fail "held connection $tag did not connect"
}

code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" || true; }
get() { curl -sS --fail-with-body --max-time 10 "http://$A$1"; }

gateway_config 20000
"$MG_BIN" --config "$TMP/gw.toml" --check | grep -qx "config ok" || fail "--check"

note "start; poll /ready from the first moment"
"$MG_BIN" --config "$TMP/gw.toml" --stats-json "$TMP/stats.json" >"$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
seen=""
for _ in $(seq 1 400); do
  c=$(code "http://$A/ready")
  [[ $c != 000 && $seen != *" $c"* ]] && seen+=" $c"
  [[ $c == 200 ]] && break
  sleep 0.02
done
[[ $seen == *200 ]] || fail "/ready never answered 200 (codes seen:$seen)"
[[ $seen == *503* ]] && note "observed /ready 503 before the first snapshot" \
  || note "startup was faster than the poll: no 503 observed (the unit test covers it)"
grep -q "event=workers_started" "$TMP/gateway.log" || fail "/ready 200 before the workers started"
[[ $(get /ready) == ready ]] || fail "/ready body"
wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/127.0.0.1/8080" || fail "http.server did not start"

note "/healthz"
[[ $(code "http://$A/healthz") == 200 ]] || fail "/healthz not 200: $(get /healthz)"
get /healthz | grep -x "worker 0 ok: loops [0-9]*" >/dev/null || fail "/healthz body: $(get /healthz)"

note "/stats before traffic"
get /stats >"$TMP/s1.json"
python3 - "$TMP/s1.json" <<'PY' || fail "/stats keys"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ["packets_in", "packets_out", "bytes_in", "drops", "drops_total", "flows_created",
          "flows_active", "flows_established", "services", "workers", "snapshot_version"]:
    assert k in d, k
assert d["snapshot_version"] == 1
assert set(d["services"]) == {"web", "dns"}, d["services"].keys()
assert "198.51.100.11:8080" in d["services"]["web"]["backends"]
assert len(d["workers"]) == 1
PY

note "traffic: ping and curl through the VIP, one connection held open"
ip netns exec "$CLI" ping -c 2 -W 2 203.0.113.10 >/dev/null || fail "ping VIP"
for i in 1 2 3; do
  got=$(ip netns exec "$CLI" curl -sS --max-time 5 http://203.0.113.10/hello.txt) || fail "curl #$i"
  [[ $got == "hello from the backend $ID" ]] || fail "body: '$got'"
done
hold_connection held1
sleep 0.2

note "/stats after traffic: counters advanced"
get /stats >"$TMP/s2.json"
python3 - "$TMP/s1.json" "$TMP/s2.json" <<'PY' || fail "/stats counters did not advance"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert b["packets_in"] > a["packets_in"] and b["packets_out"] > a["packets_out"]
assert b["workers"][0]["loops"] > a["workers"][0]["loops"]
assert b["flows_created"] >= 4 and b["flows_established"] >= 1, b
assert b["services"]["web"]["backends"]["198.51.100.11:8080"]["flows"] >= 4
PY

note "/metrics"
ctype=$(curl -s -o "$TMP/metrics.txt" -w '%{content_type}' "http://$A/metrics")
[[ $ctype == "text/plain; version=0.0.4"* ]] || fail "/metrics content type '$ctype'"
python3 - "$TMP/metrics.txt" "$MG_SOURCE_DIR/dataplane/drop_reasons.def" <<'PY' || fail "/metrics"
import re, sys
text = open(sys.argv[1]).read()
reasons = re.findall(r'^MG_COUNTER\(\w+, "(\w+)"', open(sys.argv[2]).read(), re.M)
assert len(reasons) > 30
name = r'meshgate_[a-zA-Z0-9_:]*'
lv = r'"(?:[^"\\\n]|\\.)*"'
sample = re.compile(rf'^({name})(\{{[a-zA-Z_]\w*={lv}(,[a-zA-Z_]\w*={lv})*\}})? (\S+)$')
help_re = re.compile(rf'^# HELP ({name}) .+$')
type_re = re.compile(rf'^# TYPE ({name}) (counter|gauge)$')
family, values = None, {}
for line in text.splitlines():
    if m := help_re.match(line):
        continue
    if m := type_re.match(line):
        family = m.group(1)
        continue
    m = sample.match(line)
    assert m, f"not HELP/TYPE/sample: {line!r}"
    assert m.group(1) == family, f"sample outside its family: {line!r}"
    float(m.group(4))
    values[line.rsplit(" ", 1)[0]] = float(m.group(4))
for r in reasons:
    assert f'meshgate_drops_total{{reason="{r}"}}' in values, r
assert values['meshgate_packets_total{direction="in"}'] > 0
assert values['meshgate_backend_flows_total{service="web",backend="198.51.100.11:8080"}'] >= 4
assert values['meshgate_backend_packets_total{service="web",backend="198.51.100.11:8080"}'] > 0
assert 'meshgate_backend_flows_total{service="dns",backend="198.51.100.12:53"}' in values
assert values['meshgate_flows_established'] >= 1
assert values['meshgate_flows_active'] >= 4
assert values['meshgate_flows_created_total'] >= 4
assert 'meshgate_flows_expired_total' in values
assert values['meshgate_snapshot_version'] == 1
assert values['meshgate_ready'] == 1 and values['meshgate_draining'] == 0
assert values['meshgate_worker_loops_total{worker="0"}'] > 0
assert 'meshgate_worker_busy_cycles_total{worker="0"}' in values
PY

note "/config_dump"
get /config_dump >"$TMP/config.json"
python3 - "$TMP/config.json" <<'PY' || fail "/config_dump"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["snapshot_version"] == 1
svc = {s["name"]: s for s in d["services"]}
assert set(svc) == {"web", "dns"}
w = svc["web"]
assert (w["vip"], w["port"], w["protocol"], w["mode"]) == ("203.0.113.10", 80, "tcp", "dnat"), w
assert w["table_size"] == 65537
assert w["endpoints"] == [{"address": "198.51.100.11", "port": 8080, "weight": 1,
                           "health": "healthy", "tunnel_protocol": "none", "identity": "",
                           "uid": ""}], w["endpoints"]
assert [(e["address"], e["weight"]) for e in svc["dns"]["endpoints"]] == [("198.51.100.11", 3), ("198.51.100.12", 0)]
assert svc["dns"]["protocol"] == "udp"
assert d["routes"] == [{"prefix": "10.99.0.0/16", "via": "198.51.100.254", "port": "backend"}]
assert d["neighbors"] == [{"address": "198.51.100.254", "mac": "02:00:00:00:fe:01", "port": "backend"}]
assert {a["address"] for a in d["local_addresses"]} == {"192.0.2.1", "198.51.100.1"}
assert d["policies"] == [] and d["certificates"] == []
PY

note "/flows"
get "/flows?limit=100" >"$TMP/flows.json"
python3 - "$TMP/flows.json" <<'PY' || fail "/flows: $(cat "$TMP/flows.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["complete"] and d["workers"] == 1 and d["workers_answered"] == 1
assert not d["truncated"] and d["count"] == len(d["flows"]) >= 4, d
tcp = [f for f in d["flows"] if f["protocol"] == "tcp"]
est = [f for f in tcp if f["state"] == "ESTABLISHED"]
assert len(est) == 1, est
f = est[0]
assert f["vip"] == "203.0.113.10:80" and f["backend"] == "198.51.100.11:8080", f
assert f["client"].startswith("192.0.2.2:") and f["service"] == "web" and f["worker"] == 0, f
assert f["expires_in_ms"] > 0
# Age on the worker's clock: the connection was opened before the sleep and the queries above.
assert f["mode"] == "dnat" and f["local"] == "" and 200 <= f["age_ms"] < 60000, f
assert all(g["age_ms"] >= 0 for g in d["flows"])
assert len(tcp) >= 4
PY
get "/flows?limit=1" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['count']==1 and d['truncated'], d" \
  || fail "/flows?limit=1"
[[ $(code "http://$A/flows?limit=0") == 400 ]] || fail "/flows?limit=0 must be 400"
[[ $(code "http://$A/flows?limit=100001") == 400 ]] || fail "/flows?limit=100001 must be 400"

note "meshgate-ctl services / flows / stats / config"
ctl services >"$TMP/ctl-services.txt" || fail "meshgate-ctl services"
cat "$TMP/ctl-services.txt"
grep -Eq '^TCP  203\.0\.113\.10:80 +dnat +web$' "$TMP/ctl-services.txt" || fail "services: web line"
grep -Eq '^UDP  203\.0\.113\.10:53 +dnat +dns$' "$TMP/ctl-services.txt" || fail "services: dns line"
python3 - "$TMP/ctl-services.txt" <<'PY' || fail "services: backend line"
import sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[2].split() == ["->", "Backend:Port", "Weight", "Health", "ActiveConn", "InActConn",
                            "Conns", "Packets", "InBytes", "OutBytes", "CPS", "InBPS", "OutBPS"], lines[2]
be = [l.split() for l in lines if l.startswith("  -> 198.51.100.11:8080")]
assert len(be) == 1, lines
_, addr, weight, health, active, inactive, conns, packets, inbytes, outbytes, cps, inbps, outbps = be[0]
# No health check probes it: its health is not known.
assert weight == "1" and health == "-", be
# The held connection is established; the three curls are closing (TIME_WAIT).
assert int(active) >= 1 and int(inactive) >= 3, be
assert int(packets) > 0 and int(conns) >= 4 and int(inbytes) > 0, be
# Columns line up: every backend line has its numbers ending at the same offsets.
rows = [l for l in lines if l.startswith("  -> ")]
assert len({len(l) for l in rows}) == 1, rows
PY
note "meshgate-ctl -o json services: the same rows, rates once two samples were taken"
for _ in $(seq 1 50); do
  ctl -o json services >"$TMP/ctl-services.json" || fail "meshgate-ctl -o json services"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); b=d['services'][0]['backends'][0]; sys.exit(b['conns_per_s'] is None)" \
    "$TMP/ctl-services.json" && break
  sleep 0.1
done
python3 - "$TMP/ctl-services.json" <<'PY' || fail "-o json services: $(cat "$TMP/ctl-services.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["snapshot_version"] == 1 and d["rate_interval_s"] == 2, d
assert d["conns_counted"]["available"] and not d["conns_counted"]["more_exist"], d
svc = {s["name"]: s for s in d["services"]}
assert set(svc) == {"web", "dns"}
b = svc["web"]["backends"][0]
assert b["endpoint"] == "198.51.100.11:8080" and b["active_conns"] >= 1 and b["inactive_conns"] >= 3, b
assert b["conns"] >= 4 and b["packets"] > 0 and b["bytes_in"] > 0, b
assert isinstance(b["conns_per_s"], (int, float)) and isinstance(b["bytes_in_per_s"], (int, float)), b
assert [x["weight"] for x in svc["dns"]["backends"]] == [3, 0]
PY
ctl flows >"$TMP/ctl-flows.txt" || fail "meshgate-ctl flows"
cat "$TMP/ctl-flows.txt"
grep -Eq '^ +0  TCP +192\.0\.2\.2:[0-9]+ +203\.0\.113\.10:80 +198\.51\.100\.11:8080 +web +dnat +ESTABLISHED +[0-9]+ +[0-9]+$' \
  "$TMP/ctl-flows.txt" || fail "flows: no ESTABLISHED row"
ctl flows --limit 1 | tail -n 1 | grep -q "^1 flow (limit 1 reached" || fail "flows --limit 1"

note "meshgate-ctl flows filters (GET /flows query parameters, before the limit)"
ip netns exec "$CLI" bash -c 'echo probe >/dev/udp/203.0.113.10/53' || fail "udp to the dns VIP"
sleep 0.2
ctl -o json flows --service web >"$TMP/ctl-flows-web.json" || fail "flows --service web"
ctl -o json flows --service dns >"$TMP/ctl-flows-dns.json" || fail "flows --service dns"
ctl -o json flows --state established --limit 1 >"$TMP/ctl-flows-est.json" || fail "flows --state"
ctl -o json flows --backend 198.51.100.11:8080 --client 192.0.2.0/24 >"$TMP/ctl-flows-be.json" \
  || fail "flows --backend --client"
ctl -o json flows --client 192.0.2.128/25 >"$TMP/ctl-flows-none.json" || fail "flows --client"
python3 - "$TMP" <<'PY' || fail "flows filters"
import json, sys
t = sys.argv[1]
web, dns, est, be, none = (json.load(open(f"{t}/ctl-flows-{n}.json")) for n in ["web", "dns", "est", "be", "none"])
assert web["filter"] == {"service": "web"} and web["count"] >= 4, web
assert all(f["service"] == "web" for f in web["flows"]), web
assert dns["count"] >= 1 and all(f["service"] == "dns" and f["state"] == "UDP" for f in dns["flows"]), dns
# The limit counts matching flows: the one established flow, nothing left out.
assert est["count"] == 1 and not est["truncated"] and est["flows"][0]["state"] == "ESTABLISHED", est
assert be["count"] == web["count"] and all(f["backend"] == "198.51.100.11:8080" for f in be["flows"]), be
assert none["count"] == 0 and none["flows"] == [], none
PY
[[ $(code "http://$A/flows?state=open") == 400 ]] || fail "/flows?state=open must be 400"
curl -s "http://$A/flows?backend=web" | grep -q "^backend: expected IP, IP:PORT or \[IPv6\]:PORT" \
  || fail "/flows?backend=web message"
rc=0; ctl flows --state open 2>/dev/null || rc=$?
[[ $rc == 2 ]] || fail "flows --state open: exit $rc, expected 2"
rc=0; ctl servics 2>"$TMP/ctl-err.txt" || rc=$?
[[ $rc == 2 ]] || fail "misspelt command: exit $rc, expected 2"
grep -qx 'meshgate-ctl: unknown command "servics"; did you mean "services"?' "$TMP/ctl-err.txt" \
  || fail "misspelt command: $(cat "$TMP/ctl-err.txt")"

note "meshgate-ctl -o json on the other commands; workloads / certificates / policies without a mesh"
ctl -o json stats | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['packets_in'] > 0" \
  || fail "-o json stats"
ctl -o json flow-rules | python3 -c "import json,sys; d=json.load(sys.stdin); assert 'rules' in d" \
  || fail "-o json flow-rules"
[[ $(ctl -o json workloads | python3 -c "import json,sys; print(json.load(sys.stdin))") == "{'workloads': []}" ]] \
  || fail "-o json workloads"
[[ $(ctl workloads) == "NAMESPACE  POD NAME  ADDRESS  NODE  WAYPOINT  PROTOCOL" ]] || fail "workloads: $(ctl workloads)"
[[ $(ctl certificates) == "CERTIFICATE NAME  TYPE  VALID  SERIAL NUMBER  NOT AFTER  NOT BEFORE" ]] \
  || fail "certificates: $(ctl certificates)"
[[ $(ctl -o json certificates | python3 -c "import json,sys; print(json.load(sys.stdin))") == "{'certificates': []}" ]] \
  || fail "-o json certificates"
[[ $(ctl policies) == "NAMESPACE  POLICY NAME  ACTION  SCOPE" ]] || fail "policies: $(ctl policies)"
ctl stats >"$TMP/ctl-stats.txt" || fail "meshgate-ctl stats"
grep -Eq '^packets in +[1-9][0-9]*$' "$TMP/ctl-stats.txt" || fail "stats: packets in"
grep -Eq '^flows established +[1-9]' "$TMP/ctl-stats.txt" || fail "stats: flows established"
ctl config >"$TMP/ctl-config.json" || fail "meshgate-ctl config"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a==b" \
  "$TMP/ctl-config.json" "$TMP/config.json" || fail "config differs from /config_dump"
rc=0; ctl bogus 2>/dev/null || rc=$?
[[ $rc == 2 ]] || fail "unknown command: exit $rc, expected 2"
rc=0; ctl flows --limit 0 2>/dev/null || rc=$?
[[ $rc == 2 ]] || fail "flows --limit 0: exit $rc, expected 2"
rc=0; "$MG_CTL" --admin "no-port" stats 2>/dev/null || rc=$?
[[ $rc == 2 ]] || fail "--admin without port: exit $rc, expected 2"

note "drain: meshgate-ctl drain keeps the established flow, refuses new ones"
ctl drain | grep -q "^draining" || fail "meshgate-ctl drain"
drain_t0=$(date +%s%N)
wait_for 5 grep -q "event=drain_start trigger=admin established=1" "$TMP/gateway.log" || fail "no drain_start"
[[ $(code "http://$A/ready") == 503 ]] || fail "/ready must be 503 while draining"
[[ $(curl -s "http://$A/ready") == "not ready: draining" ]] || fail "/ready body while draining"
[[ $(code "http://$A/healthz") == 200 ]] || fail "/healthz while draining"
# A new connection is refused with a RST: the client fails at once with "Connection refused"
# (curl exit 7) and can try another gateway, instead of retrying its SYN until a timeout (28).
refuse_t0=$(date +%s%N)
rc=0; ip netns exec "$CLI" curl -sS --max-time 5 http://203.0.113.10/hello.txt >/dev/null 2>"$TMP/refused.err" || rc=$?
refuse_ms=$(( ($(date +%s%N) - refuse_t0) / 1000000 ))
[[ $rc != 0 ]] || fail "a new connection was accepted while draining"
[[ $rc == 7 ]] || fail "a new connection while draining: curl exit $rc ($(cat "$TMP/refused.err")), expected 7 (refused by a RST)"
(( refuse_ms < 1000 )) || fail "the refusal took ${refuse_ms} ms: expected at once"
(( $(get /stats | python3 -c "import json,sys; print(json.load(sys.stdin)['resets_sent'])") >= 1 )) \
  || fail "no resets_sent in /stats"
# grep reads the whole page: with -q it could exit before curl finished writing, and pipefail
# would fail the line on curl's "Failed writing body" although the sample was there.
get /metrics | grep -x "meshgate_draining 1" >/dev/null || fail "meshgate_draining"
(( $(get /stats | python3 -c "import json,sys; print(json.load(sys.stdin)['drops']['draining'])") >= 1 )) \
  || fail "no 'draining' drops"
kill -0 "$GW_PID" 2>/dev/null || fail "gateway exited while a flow was established"
touch "$TMP/held1.go"  # the held connection now requests and closes
rc=0; wait "$GW_PID" || rc=$?
elapsed_ms=$(( ($(date +%s%N) - drain_t0) / 1000000 ))
[[ $rc == 0 ]] || fail "gateway exited $rc after the drain"
(( elapsed_ms < 15000 )) || fail "drain took ${elapsed_ms} ms: it should end when the flow closes"
grep -q "hello from the backend $ID" "$TMP/held1.reply" || fail "the established flow did not keep flowing during the drain"
grep -q "event=drain_done reason=no_established_flows" "$TMP/gateway.log" || fail "drain_done"
grep -q "meshgate summary" "$TMP/gateway.log" || fail "no summary after the drain"
[[ -s $TMP/stats.json ]] || fail "no --stats-json after the drain"
(( $(json "$TMP/stats.json" "d['drops']['draining']") >= 1 )) || fail "stats.json: draining drops"
note "drained in ${elapsed_ms} ms"

note "meshgate-ctl against a stopped gateway"
rc=0; ctl stats 2>"$TMP/ctl-err.txt" || rc=$?
[[ $rc == 1 ]] || fail "meshgate-ctl stats on a stopped gateway: exit $rc, expected 1"
grep -q "admin API not reachable at $A (is meshgate running?" "$TMP/ctl-err.txt" || fail "message: $(cat "$TMP/ctl-err.txt")"

note "SIGTERM with a flow that never closes: stops at drain_timeout_ms"
rm -f "$TMP/stats.json"
gateway_config 1500
start_gateway "$TMP/gw.toml"
wait_for 10 bash -c "[[ \$(curl -s http://$A/ready) == ready ]]" || fail "second run not ready"
hold_connection held2
sleep 0.2
t0=$(date +%s%N)
stop_gateway TERM
elapsed_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
grep -q "event=drain_start trigger=sigterm established=1" "$TMP/gateway.log" || fail "drain_start on SIGTERM"
grep -q "event=drain_done reason=timeout elapsed_ms=1[5-9][0-9][0-9] established=1" "$TMP/gateway.log" \
  || fail "drain_done on timeout: $(grep drain_done "$TMP/gateway.log")"
(( elapsed_ms >= 1400 && elapsed_ms < 10000 )) || fail "SIGTERM drain took ${elapsed_ms} ms, expected ~1500"
kill "$HOLD_PID" 2>/dev/null || true

note "drain with a half-closed connection: the response to a request sent with its FIN arrives whole"
# The client's FIN takes the flow out of ESTABLISHED while 20 MB still flow toward it: the
# drain must wait for the connection to close (FIN_WAIT, CLOSE_WAIT, LAST_ACK count).
head -c 20000000 /dev/urandom >"$TMP/www/big.bin"
gateway_config 20000
start_gateway "$TMP/gw.toml"
wait_for 10 bash -c "[[ \$(curl -s http://$A/ready) == ready ]]" || fail "third run not ready"
hold_connection held3 /big.bin half-close
ctl drain | grep -q "^draining" || fail "meshgate-ctl drain (third run)"
wait_for 5 grep -q "event=drain_start trigger=admin established=1" "$TMP/gateway.log" \
  || fail "no drain_start (third run)"
touch "$TMP/held3.go"
rc=0; wait "$GW_PID" || rc=$?
[[ $rc == 0 ]] || fail "gateway exited $rc after the third drain"
rc=0; wait "$HOLD_PID" || rc=$?
[[ $rc == 0 ]] || fail "the half-closed download failed: $(cat "$TMP/held3.log")"
python3 - "$TMP/held3.reply" "$TMP/www/big.bin" <<'PY' || fail "the half-closed connection's response was cut"
import sys
reply, want = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
head, _, body = reply.partition(b"\r\n\r\n")
assert head.startswith(b"HTTP/1.0 200"), head[:40]
assert body == want, f"{len(body)} of {len(want)} bytes"
PY
grep -q "event=drain_done reason=no_established_flows" "$TMP/gateway.log" \
  || fail "drain_done: $(grep drain_done "$TMP/gateway.log")"
echo "PASS"
