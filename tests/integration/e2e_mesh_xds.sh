#!/usr/bin/env bash
# meshgate with [mesh] source = "xds" against meshgate-meshserver: a VIP learned over xDS carries
# real traffic (curl from a client namespace to python3 http.server in a backend namespace).
# meshgate starts first, with the server down: /ready answers 503 and the xDS metrics count the
# failed attempts until the server comes up; then /ready turns 200. /metrics (meshgate_xds_*),
# /config_dump (the learned services and endpoints with weight, health, tunnel, identity) and
# meshgate-ctl services (the same backends, active flows per backend) are checked before and
# after an edit of the server's mesh file, which moves new flows to the other workload within
# 1 s while an established connection stays on its backend; killing the server leaves traffic
# flowing on the last snapshot and /ready at 200.
source "$(dirname "$0")/lib.sh"
require_root
MG_MESHSERVER=${MG_MESHSERVER:?MG_MESHSERVER must point at meshgate-meshserver}
MG_CTL=${MG_CTL:?MG_CTL must point at meshgate-ctl}
A=$MG_ADMIN
# The xDS server's address is fixed before it runs (the gateway starts first): the loopback
# address of this run's admin API, another port.
MS_ADDR="${MG_ADMIN%:*}:15010"

CLI=mxc$ID BE=mxb$ID GWC=gxc$ID GWB=gxb$ID
add_host "$CLI" "$GWC" 192.0.2.2/24 192.0.2.1
add_host "$BE" "$GWB" 198.51.100.11/24 198.51.100.1
ip netns exec "$BE" ip addr add 198.51.100.12/24 dev eth0

# python3's http.server, HTTP/1.1 (keep-alive: one connection carries several requests, the
# "old flow"), without the reverse DNS lookup `-m http.server --bind ADDR` does at start (no DNS
# in a test namespace: it can stall for seconds).
cat >"$TMP/httpd.py" <<'PY'
import functools, http.server, socketserver, sys
class Server(http.server.ThreadingHTTPServer):
    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
Server((sys.argv[1], 8080), functools.partial(Handler, directory=sys.argv[2])).serve_forever()
PY
for b in 11 12; do
  mkdir -p "$TMP/www$b"
  echo "backend $b" >"$TMP/www$b/id.txt"
  ip netns exec "$BE" python3 "$TMP/httpd.py" 198.51.100.$b "$TMP/www$b" >"$TMP/http$b.log" 2>&1 &
  PIDS+=($!)
done

# mesh_file ADDRESS...: the service's endpoints are the workloads at these addresses. Workload
# 11 is a workload of service account web-v1 with capacity 3; workload 12 a plain one. (Both
# without HBONE: with the gateway's certificate from the CA, an endpoint with tunnel = hbone is
# reached over HBONE, which e2e_hbone_gateway covers; these backends are plain HTTP servers.)
mesh_file() {
  cat <<TOML
[[mesh_service]]
name = "web"
namespace = "demo"
hostname = "web.demo.svc.cluster.local"
vips = ["203.0.113.20"]
ports = [{ service_port = 80, target_port = 8080 }]
[[workload]]
uid = "cluster1//v1/Pod/demo/web-11"
namespace = "demo"
addresses = ["198.51.100.11"]
tunnel = "none"
service_account = "web-v1"
capacity = 3
TOML
  [[ " $* " == *" 198.51.100.11 "* ]] && echo 'services = { "demo/web.demo.svc.cluster.local" = [] }'
  cat <<TOML
[[workload]]
uid = "cluster1//v1/Pod/demo/web-12"
namespace = "demo"
addresses = ["198.51.100.12"]
TOML
  [[ " $* " == *" 198.51.100.12 "* ]] && echo 'services = { "demo/web.demo.svc.cluster.local" = [] }'
  return 0
}
# Written like an editor does: a new file renamed over the old one.
write_mesh() { mesh_file "$@" >"$TMP/mesh.toml.new" && mv "$TMP/mesh.toml.new" "$TMP/mesh.toml"; }
write_mesh 198.51.100.11

cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_c$ID,iface=$GWC"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_b$ID,iface=$GWB"
addresses = ["198.51.100.1/24"]
[mesh]
source = "xds"
address = "$MS_ADDR"
tls = false
cluster_id = "cluster1"
[fullnat]                   # HBONE opens its connections from here
local_addresses = ["198.51.100.2"]
[hbone]
ca_address = "$MS_ADDR"
identity = "spiffe://cluster.local/ns/istio-system/sa/meshgate"
cert_ttl = 3600
[admin]
listen = "$A"
TOML
"$MG_BIN" --config "$TMP/gw.toml" --check | grep -qx "config ok" || fail "--check"

code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" || true; }
aget() { curl -sS --fail-with-body --max-time 10 "http://$A$1"; }

note "meshgate first, the xDS server down: /ready is 503 until the first sync"
start_gateway "$TMP/gw.toml"
wait_for 10 grep -q "event=xds_connect_failed" "$TMP/gateway.log" || fail "no failed xDS attempt logged"
[[ $(code "http://$A/ready") == 503 ]] || fail "/ready must be 503 before the first sync"
[[ $(curl -s "http://$A/ready") == "not ready: waiting for the first full sync of the mesh source" ]] \
  || fail "/ready body: $(curl -s "http://$A/ready")"
[[ $(code "http://$A/healthz") == 200 ]] || fail "/healthz must be 200 while workers poll"
aget /metrics >"$TMP/m0.txt"
python3 - "$TMP/m0.txt" <<'PY' || fail "/metrics before the server: $(grep -E '^meshgate_(xds|ready)' "$TMP/m0.txt")"
import sys
v = {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in open(sys.argv[1]) if not l.startswith("#")}
assert v["meshgate_ready"] == 0 and v["meshgate_xds_synced"] == 0 and v["meshgate_xds_connected"] == 0, v
assert v["meshgate_xds_connect_failures_total"] >= 1 and v["meshgate_xds_connects_total"] == 0
assert v['meshgate_xds_resources{kind="workload"}'] == 0 and v["meshgate_xds_acks_total"] == 0
assert v["meshgate_xds_backoff_ms"] >= 10
assert v["meshgate_snapshot_version"] == 1
PY
sleep 1
[[ $(code "http://$A/ready") == 503 ]] || fail "/ready must stay 503 while the server is down"
note "observed /ready 503 for more than 1 s with the server down"

"$MG_SOURCE_DIR/tools/mkpki" "$TMP/pki" >/dev/null || fail "mkpki"
"$MG_MESHSERVER" --mesh-file "$TMP/mesh.toml" --listen "$MS_ADDR" --ca-cert "$TMP/pki/intermediate.pem" \
  --ca-key "$TMP/pki/intermediate-key.pem" --ca-roots "$TMP/pki/root.pem" >"$TMP/meshserver.log" 2>&1 &
MS_PID=$!
PIDS+=($MS_PID)
wait_for 10 grep -q "event=meshserver_listening" "$TMP/meshserver.log" || fail "meshserver did not start"
t0=$(date +%s%N)
wait_for 20 bash -c "[[ \$(curl -s http://$A/ready) == ready ]]" || fail "/ready not 200 after the server came up"
note "/ready 200 $(( ($(date +%s%N) - t0) / 1000000 )) ms after the server came up (reconnect backoff)"
grep -q "event=mesh_applied.*synced=true" "$TMP/gateway.log" || fail "no synced mesh snapshot"
grep -q "event=meshserver_ack type=address" "$TMP/meshserver.log" || fail "server saw no ACK"
for b in 11 12; do
  wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/198.51.100.$b/8080" || fail "http.server $b"
done

note "the gateway's certificate comes from the server's Istio CA (CreateCertificate)"
wait_for 20 grep -q "event=snapshot_published .*reason=certificate" "$TMP/gateway.log" \
  || fail "no snapshot with the CA's certificate: $(grep -E 'event=cert_' "$TMP/gateway.log")"
aget /config_dump >"$TMP/config-cert.json" || fail "/config_dump (certificate)"
aget /metrics >"$TMP/metrics-cert.txt" || fail "/metrics (certificate)"
python3 - "$TMP/config-cert.json" "$TMP/metrics-cert.txt" <<'PY' || fail "certificate: $(grep -E 'meshgate_cert' "$TMP/metrics-cert.txt")"
import json, sys, time
c = json.load(open(sys.argv[1]))["certificates"]
assert [x["role"] for x in c] == ["leaf", "intermediate", "trust_anchor"], c
leaf = c[0]
assert leaf["identity"] == "spiffe://cluster.local/ns/istio-system/sa/meshgate", leaf
assert 3500 < leaf["expires_in_s"] <= 3600, leaf
assert leaf["issuer"] == c[1]["subject"] and c[1]["issuer"] == c[2]["subject"], c
tls = json.load(open(sys.argv[1]))["tls"]
assert tls == {"contexts": 1, "identity": leaf["identity"]}, tls  # one per worker, of that cert
v = {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in open(sys.argv[2]) if not l.startswith("#")}
assert v["meshgate_cert_issued_total"] == 1, v["meshgate_cert_issued_total"]
assert v["meshgate_cert_failures_total"] >= 1  # the requests made while the server was down
assert abs(v["meshgate_cert_expiry_unix_seconds"] - (time.time() + 3600)) < 120
PY

get() { ip netns exec "$CLI" curl -sS --max-time 3 http://203.0.113.20/id.txt; }

# truth PHASE: /metrics, /config_dump, /flows and meshgate-ctl services agree with the mesh file
# the server serves: workload 11 (weight 3, web-v1) "before" the edit, workload 12
# (weight 1, no tunnel, default account) "after" it, with the keep-alive flow still on 11.
truth() {
  local phase=$1
  aget /metrics >"$TMP/metrics-$phase.txt" || fail "/metrics ($phase)"
  aget /config_dump >"$TMP/config-$phase.json" || fail "/config_dump ($phase)"
  aget "/flows?limit=1000" >"$TMP/flows-$phase.json" || fail "/flows ($phase)"
  "$MG_CTL" --admin "$A" services >"$TMP/services-$phase.txt" || fail "meshgate-ctl services ($phase)"
  cat "$TMP/services-$phase.txt"
  # meshgate-ctl workloads: both workloads of the mesh, whichever backs the service.
  "$MG_CTL" --admin "$A" -o json workloads >"$TMP/workloads-$phase.json" || fail "meshgate-ctl workloads ($phase)"
  python3 - "$TMP/workloads-$phase.json" <<'PY' || fail "meshgate-ctl workloads ($phase): $(cat "$TMP/workloads-$phase.json")"
import json, sys
w = {x["uid"]: x for x in json.load(open(sys.argv[1]))["workloads"]}
assert set(w) == {"cluster1//v1/Pod/demo/web-11", "cluster1//v1/Pod/demo/web-12"}, w
a = w["cluster1//v1/Pod/demo/web-11"]
assert a["namespace"] == "demo" and a["addresses"] == ["198.51.100.11"] and a["protocol"] == "TCP", a
assert a["identity"] == "spiffe://cluster.local/ns/demo/sa/web-v1" and a["waypoint"] is None, a
PY
  "$MG_CTL" --admin "$A" workloads | grep -Eq '^demo +[^ ]* *198\.51\.100\.12 ' || fail "workloads table ($phase)"
  python3 - "$phase" "$TMP" <<'PY' || fail "admin API does not show the truth ($phase)"
import json, sys, time
phase, tmp = sys.argv[1], sys.argv[2]
name = "demo/web.demo.svc.cluster.local:80"
v = {}
for l in open(f"{tmp}/metrics-{phase}.txt"):
    if not l.startswith("#"):
        k, x = l.rsplit(" ", 1)
        v[k] = float(x)
cfg = json.load(open(f"{tmp}/config-{phase}.json"))
flows = json.load(open(f"{tmp}/flows-{phase}.json"))
services = open(f"{tmp}/services-{phase}.txt").read().splitlines()

# meshgate_xds_*: one stream, every response ACKed, what the server holds.
assert v["meshgate_xds_connected"] == 1 and v["meshgate_xds_synced"] == 1, v
assert v["meshgate_xds_connects_total"] == 1 and v["meshgate_xds_connect_failures_total"] >= 1
assert v["meshgate_xds_nacks_total"] == 0 and v["meshgate_xds_resources_rejected_total"] == 0
resp = v['meshgate_xds_responses_total{type="address"}'] + v['meshgate_xds_responses_total{type="authorization"}']
assert v["meshgate_xds_acks_total"] == resp >= 2, (v["meshgate_xds_acks_total"], resp)
assert v['meshgate_xds_resources{kind="workload"}'] == 2
assert v['meshgate_xds_resources{kind="service"}'] == 1
assert v['meshgate_xds_resources{kind="authorization"}'] == 0
assert abs(v["meshgate_xds_last_sync_unix_ms"] / 1000 - time.time()) < 60
assert v["meshgate_ready"] == 1 and v["meshgate_snapshot_version"] == cfg["snapshot_version"] >= 2
if phase == "after":
    before = {}
    for l in open(f"{tmp}/metrics-before.txt"):
        if not l.startswith("#"):
            k, x = l.rsplit(" ", 1)
            before[k] = float(x)
    assert v['meshgate_xds_responses_total{type="address"}'] > before['meshgate_xds_responses_total{type="address"}']
    assert v["meshgate_snapshot_version"] > before["meshgate_snapshot_version"]

# /config_dump: the service learned over xDS and its endpoints as the file says.
svc = [s for s in cfg["services"] if s["name"] == name]
assert len(svc) == 1 and len(cfg["services"]) == 1, cfg["services"]
s = svc[0]
assert (s["vip"], s["port"], s["protocol"], s["mode"], s["source"], s["table_size"]) == \
    ("203.0.113.20", 80, "tcp", "dnat", "mesh", 1009), s
w11 = {"address": "198.51.100.11", "port": 8080, "weight": 3, "health": "healthy",
       "tunnel_protocol": "none", "identity": "spiffe://cluster.local/ns/demo/sa/web-v1",
       "uid": "cluster1//v1/Pod/demo/web-11"}
w12 = {"address": "198.51.100.12", "port": 8080, "weight": 1, "health": "healthy",
       "tunnel_protocol": "none", "identity": "spiffe://cluster.local/ns/demo/sa/default",
       "uid": "cluster1//v1/Pod/demo/web-12"}
live, gone = ("198.51.100.11", "198.51.100.12") if phase == "before" else ("198.51.100.12", "198.51.100.11")
assert s["endpoints"] == [w11 if phase == "before" else w12], s["endpoints"]

# /flows: the keep-alive connection is ESTABLISHED on workload 11 in both phases.
assert flows["complete"] and not flows["truncated"]
est = [f for f in flows["flows"] if f["state"] == "ESTABLISHED" and f["vip"] == "203.0.113.20:80"]
assert len(est) == 1 and est[0]["backend"] == "198.51.100.11:8080" and est[0]["service"] == name, est
active = sum(1 for f in flows["flows"] if f["backend"] == live + ":8080" and f["service"] == name)

# meshgate-ctl services: the same backend, with the flows /flows lists for it.
assert [l.split() for l in services if l.startswith("TCP ")] == [["TCP", "203.0.113.20:80", "dnat", name]], services
rows = [l.split() for l in services if l.startswith("  -> ") and "Backend:Port" not in l]
assert [r[1] for r in rows] == [live + ":8080"], rows
_, addr, weight, health, act, inact, created, packets = rows[0][:8]
# No health check probes a mesh endpoint: "-" (the mesh marks only unhealthy ones).
assert weight == str(s["endpoints"][0]["weight"]) and health == "-", rows
assert int(act) + int(inact) == active and active >= (2 if phase == "before" else 4), (act, inact, active)
assert int(packets) > 0 and int(created) >= active, rows
assert not any(gone in l for l in services), services
print(f"truth {phase}: {addr} weight {weight}, {act} active flows, snapshot {cfg['snapshot_version']}, "
      f"{int(v['meshgate_xds_acks_total'])} ACKs")
PY
}


note "the VIP learned over xDS reaches workload 11"
for i in 1 2 3; do
  got=$(get) || fail "curl #$i"
  [[ $got == "backend 11" ]] || fail "body: '$got'"
done

note "an established connection (HTTP keep-alive) to workload 11"
cat >"$TMP/oldflow.py" <<'PY'
import http.client, os, sys, time
c = http.client.HTTPConnection("203.0.113.20", 80, timeout=5)
c.request("GET", "/id.txt"); first = c.getresponse().read().decode().strip()
port = c.sock.getsockname()[1]
print("first", first, flush=True)
go = sys.argv[1]
while not os.path.exists(go): time.sleep(0.05)
c.request("GET", "/id.txt"); second = c.getresponse().read().decode().strip()
print("second", second, "same_connection", c.sock.getsockname()[1] == port, flush=True)
PY
ip netns exec "$CLI" python3 "$TMP/oldflow.py" "$TMP/go" >"$TMP/oldflow.out" 2>&1 &
OLD_PID=$!
PIDS+=($OLD_PID)
wait_for 5 grep -q "^first" "$TMP/oldflow.out" || fail "old flow did not start: $(cat "$TMP/oldflow.out")"
grep -q "^first backend 11" "$TMP/oldflow.out" || fail "old flow: $(cat "$TMP/oldflow.out")"

note "the admin API before the edit"
truth before

note "edit the server's file: the service moves to workload 12"
t0=$(date +%s%N)
write_mesh 198.51.100.12
moved=""
while (( ($(date +%s%N) - t0) / 1000000 < 3000 )); do
  got=$(get) || true
  if [[ $got == "backend 12" ]]; then moved=$(( ($(date +%s%N) - t0) / 1000000 )); break; fi
done
[[ -n $moved ]] || fail "new flows still go to workload 11 after 3 s"
note "new flows moved after ${moved} ms"
(( moved <= 1000 )) || fail "new flows moved after ${moved} ms (want <= 1000)"
for i in 1 2 3; do [[ $(get) == "backend 12" ]] || fail "new flow #$i not on workload 12"; done
grep -q "event=meshserver_push type=address nonce=3 resources=2 removed=0" "$TMP/meshserver.log" || fail "server pushed no change (both workloads changed)"

note "the admin API after the edit"
truth after

note "the established connection stays on workload 11"
touch "$TMP/go"
wait "$OLD_PID" || fail "old flow failed: $(cat "$TMP/oldflow.out")"
grep -q "^second backend 11 same_connection True" "$TMP/oldflow.out" || fail "old flow: $(cat "$TMP/oldflow.out")"

note "kill the xDS server: traffic keeps flowing on the last snapshot"
kill -9 "$MS_PID"
wait "$MS_PID" 2>/dev/null || true
wait_for 5 grep -q "event=xds_disconnected" "$TMP/gateway.log" || fail "gateway did not notice the server went away"
for i in 1 2 3 4 5; do
  got=$(get) || fail "curl after server loss #$i"
  [[ $got == "backend 12" ]] || fail "after server loss: '$got'"
  sleep 0.3
done
grep -q "event=xds_connect_failed" "$TMP/gateway.log" || fail "no reconnect attempts logged"
[[ $(code "http://$A/ready") == 200 ]] || fail "/ready must stay 200 once synced (the last snapshot serves)"
aget /metrics >"$TMP/metrics-lost.txt"
grep -qx "meshgate_xds_connected 0" "$TMP/metrics-lost.txt" || fail "meshgate_xds_connected after the server died"
grep -qx "meshgate_xds_disconnects_total 1" "$TMP/metrics-lost.txt" || fail "meshgate_xds_disconnects_total"
grep -qx "meshgate_xds_synced 1" "$TMP/metrics-lost.txt" || fail "meshgate_xds_synced must stay 1"

stop_gateway TERM
S=$TMP/stats.json
name="demo/web.demo.svc.cluster.local:80"
# Stats list the backends of the live snapshot: workload 11 is no longer one of them.
[[ $(json "$S" "list(d['services']['$name']['backends'])") == "['198.51.100.12:8080']" ]] || fail "backends in stats"
(( $(json "$S" "d['services']['$name']['backends']['198.51.100.12:8080']['flows']") >= 8 )) || fail "flows to 12"
echo "PASS"
