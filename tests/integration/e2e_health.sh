#!/usr/bin/env bash
# Backend health checks through the port's kernel twin. meshgate runs in a namespace of its own
# with a client port and a backend port (host_interface = the twin); three backend namespaces
# on a bridge serve HTTP on 8080 (python3), each answering its own name, and /healthz with 200,
# or 500 while a "sick" file exists. Service "web" has a tcp check, "api" an http check on
# /healthz, both on the same three backends.
#   - a stopped server is out within fall x interval: no new connections, backend_up 0,
#     meshgate-ctl services says unhealthy, backend_down logged; started again, back within
#     rise x interval and taking connections again;
#   - an http 500 takes the backend out of "api" only (its TCP port still answers "web");
#   - all of "api"'s backends down: new connections to it are dropped and counted.
source "$(dirname "$0")/lib.sh"
require_root
MG_CTL=${MG_CTL:?MG_CTL must point at meshgate-ctl}

CLI=mgc$ID SW=mgs$ID GW=mgg$ID HOSTIF=mgh$ID
INTERVAL_MS=500 TIMEOUT_MS=200 RISE=2 FALL=3

ip netns add "$GW"; NETNS+=("$GW")
ip netns exec "$GW" ip link set lo up
# Client side: a namespace of its own behind the gateway's client port.
ip netns add "$CLI"; NETNS+=("$CLI")
ip link add "c$ID" netns "$GW" type veth peer name eth0 netns "$CLI"
# Backend side: a bridge in its own namespace, the gateway's backend port plugged into it.
ip netns add "$SW"; NETNS+=("$SW")
ip netns exec "$SW" ip link add br0 type bridge
ip netns exec "$SW" ip link set br0 up
ip link add "b$ID" netns "$GW" type veth peer name gw netns "$SW"
ip netns exec "$SW" ip link set gw master br0 up
offloads_off gw "$SW"
for dev in "c$ID" "b$ID"; do
  ip netns exec "$GW" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
  ip netns exec "$GW" ip link set "$dev" up
  offloads_off "$dev" "$GW"
done
ip netns exec "$CLI" ip link set lo up
ip netns exec "$CLI" ip link set eth0 up
offloads_off eth0 "$CLI"
ip netns exec "$CLI" ip addr add 192.0.2.2/24 dev eth0
ip netns exec "$CLI" ip route add default via 192.0.2.1

cat >"$TMP/backend.py" <<'PY'
import http.server, os, socketserver, sys
name, addr, sick = sys.argv[1], sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        code = 500 if self.path == "/healthz" and os.path.exists(sick) else 200
        body = (name + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
# TCPServer, not HTTPServer: HTTPServer looks its address up in DNS (getfqdn), which hangs here.
socketserver.TCPServer.allow_reuse_address = True
socketserver.TCPServer((addr, 8080), H).serve_forever()
PY
declare -A SERVER
start_backend() {  # start_backend I
  ip netns exec "mgb$1_$ID" python3 "$TMP/backend.py" "backend $1" "198.51.100.1$1" "$TMP/sick$1" \
    >"$TMP/http$1.log" 2>&1 &
  SERVER[$1]=$!
  PIDS+=($!)
  wait_for 10 ip netns exec "mgb$1_$ID" bash -c "echo >/dev/tcp/198.51.100.1$1/8080" \
    || fail "backend $1 did not start: $(ip netns exec "mgb$1_$ID" ss -tlnp; ps -p ${SERVER[$1]} -o pid,stat,cmd; cat "$TMP/http$1.log")"
}
for i in 1 2 3; do
  B=mgb${i}_$ID
  ip netns add "$B"; NETNS+=("$B")
  ip link add eth0 netns "$B" type veth peer name b$i netns "$SW"
  ip netns exec "$SW" ip link set b$i master br0 up
  offloads_off b$i "$SW"
  ip netns exec "$B" ip link set lo up
  ip netns exec "$B" ip link set eth0 up
  offloads_off eth0 "$B"
  ip netns exec "$B" ip addr add 198.51.100.1$i/24 dev eth0
  ip netns exec "$B" ip route add default via 198.51.100.1
  start_backend $i
done

backends() {
  for i in 1 2 3; do printf '  [[service.backend]]\n  address = "198.51.100.1%s"\n  port = 8080\n' "$i"; done
}
cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_c$ID,iface=c$ID"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_b$ID,iface=b$ID"
addresses = ["198.51.100.1/24"]
host_interface = "$HOSTIF"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
health_check = { type = "tcp", interval_ms = $INTERVAL_MS, timeout_ms = $TIMEOUT_MS, rise = $RISE, fall = $FALL }
$(backends)
[[service]]
name = "api"
vip = "203.0.113.11"
port = 80
  [service.health_check]
  type = "http"
  path = "/healthz"
  interval_ms = $INTERVAL_MS
  timeout_ms = $TIMEOUT_MS
  rise = $RISE
  fall = $FALL
$(backends)
[admin]
listen = "$MG_ADMIN"
TOML
ip netns exec "$GW" "$MG_BIN" --config "$TMP/gw.toml" --check | grep -qx "config ok" || fail "--check"
ip netns exec "$GW" "$MG_BIN" --config "$TMP/gw.toml" --stats-json "$TMP/stats.json" \
  >"$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
wait_for 60 grep -q "event=workers_started" "$TMP/gateway.log" || fail "gateway did not start"

metrics() { ip netns exec "$GW" curl -sS --max-time 5 "http://$MG_ADMIN/metrics"; }
metric() { metrics | awk -v m="$1" '$1 == m {print $2}'; }
up_of() { metric "meshgate_backend_up{service=\"$1\",backend=\"198.51.100.1$2:8080\"}"; }
is_up() { [[ $(up_of "$1" "$2") == "$3" ]]; }
ms() { date +%s%3N; }
ctl() { ip netns exec "$GW" "$MG_CTL" --admin "$MG_ADMIN" "$@"; }

# curls N connections to VIP; prints how many each backend answered ("1:n 2:n 3:n").
spread() {
  local vip=$1 n=$2 c1=0 c2=0 c3=0 body
  for ((k = 0; k < n; ++k)); do
    body=$(ip netns exec "$CLI" curl -sS --max-time 5 "http://$vip/") || fail "curl $vip #$k"
    case $body in
      "backend 1") c1=$((c1 + 1)) ;; "backend 2") c2=$((c2 + 1)) ;; "backend 3") c3=$((c3 + 1)) ;;
      *) fail "$vip: unexpected body '$body'" ;;
    esac
  done
  echo "1:$c1 2:$c2 3:$c3"
}

note "probes pass through the twin: every backend up, probes counted ok, none failed"
wait_for 10 bash -c "(( \$(ip netns exec $GW curl -sS http://$MG_ADMIN/metrics | awk '\$1 == \"meshgate_health_checks_total{result=\\\"ok\\\"}\" {print \$2}') >= 12 ))" \
  || fail "health checks did not succeed: $(metrics | grep health_checks)"
for s in web api; do for i in 1 2 3; do is_up $s $i 1 || fail "$s backend $i not up"; done; done
[[ $(metric 'meshgate_health_checks_total{result="timeout"}') == 0 ]] || fail "probes timed out"
[[ $(metric 'meshgate_health_checks_total{result="refused"}') == 0 ]] || fail "probes refused"
s=$(spread 203.0.113.10 30); echo "web, all up: $s"
[[ " $s " != *" 2:0 "* ]] || fail "backend 2 got no connections while up"

note "backend 2's server stops: out of both services within fall x interval"
kill "${SERVER[2]}"; wait "${SERVER[2]}" 2>/dev/null || true
t0=$(ms)
# fall probes after the one in flight, each interval +10% apart, plus a tick and the scrape.
limit_ms=$(( (FALL + 1) * INTERVAL_MS * 11 / 10 + 1000 ))
wait_for 10 is_up web 2 0 || fail "web backend 2 still up"
took=$(( $(ms) - t0 ))
echo "web backend 2 down after ${took} ms (limit ${limit_ms} ms)"
(( took <= limit_ms )) || fail "down after $took ms, more than $limit_ms"
wait_for 5 is_up api 2 0 || fail "api backend 2 still up"
grep -q 'event=backend_down service=web backend=198.51.100.12:8080 check=tcp reason="refused" consecutive=3' \
  "$TMP/gateway.log" || fail "no backend_down log line"
is_up web 1 1 && is_up web 3 1 || fail "other backends went down"
ctl services >"$TMP/ctl-services.txt" || fail "meshgate-ctl services"
cat "$TMP/ctl-services.txt"
grep -Eq '198\.51\.100\.12:8080 +1 +unhealthy' "$TMP/ctl-services.txt" || fail "ctl: not unhealthy"
grep -Eq '198\.51\.100\.11:8080 +1 +healthy' "$TMP/ctl-services.txt" || fail "ctl: .11 not healthy"
ip netns exec "$GW" curl -sS "http://$MG_ADMIN/config_dump" >"$TMP/dump.json"
python3 - "$TMP/dump.json" <<'PY' || fail "config_dump health"
import json, sys
d = json.load(open(sys.argv[1]))
hc = {(h["service"], h["backend"]): h for h in d["health_checks"]}
assert hc[("web", "198.51.100.12:8080")]["state"] == "down", hc
assert hc[("web", "198.51.100.12:8080")]["last_result"] == "refused", hc
assert hc[("web", "198.51.100.11:8080")]["state"] == "up", hc
web = next(s for s in d["services"] if s["name"] == "web")
health = {e["address"]: e["health"] for e in web["endpoints"]}
assert health == {"198.51.100.11": "healthy", "198.51.100.12": "unhealthy",
                  "198.51.100.13": "healthy"}, health
PY
s=$(spread 203.0.113.10 30); echo "web, backend 2 down: $s"
[[ " $s " == *" 2:0 "* ]] || fail "backend 2 got new connections while down: $s"

note "started again: back within rise x interval, taking connections"
start_backend 2
t0=$(ms)
limit_ms=$(( (RISE + 1) * INTERVAL_MS * 11 / 10 + 1000 ))
wait_for 10 is_up web 2 1 || fail "web backend 2 not back"
took=$(( $(ms) - t0 ))
echo "web backend 2 up after ${took} ms (limit ${limit_ms} ms)"
(( took <= limit_ms )) || fail "up after $took ms, more than $limit_ms"
grep -q 'event=backend_up service=web backend=198.51.100.12:8080 check=tcp reason="ok" consecutive=2' \
  "$TMP/gateway.log" || fail "no backend_up log line"
wait_for 5 is_up api 2 1 || fail "api backend 2 not back"
s=$(spread 203.0.113.10 30); echo "web, backend 2 back: $s"
[[ " $s " != *" 2:0 "* ]] || fail "backend 2 got no connections after coming back"

note "an http 500 takes backend 1 out of api, not out of web"
touch "$TMP/sick1"
wait_for 10 is_up api 1 0 || fail "api backend 1 (500) still up"
grep -q 'event=backend_down service=api backend=198.51.100.11:8080 check=http reason="http_status_500"' \
  "$TMP/gateway.log" || fail "no http_status_500 log line"
is_up web 1 1 || fail "web backend 1 went down (its TCP port answers)"
(( $(metric 'meshgate_health_checks_total{result="http_status"}') >= FALL )) || fail "http_status not counted"
s=$(spread 203.0.113.11 30); echo "api, backend 1 at 500: $s"
[[ " $s " == *" 1:0 "* ]] || fail "api backend 1 got new connections: $s"

note "every backend of api down: new connections dropped and counted, web unaffected"
touch "$TMP/sick2" "$TMP/sick3"
wait_for 10 bash -c "[[ \$(ip netns exec $GW curl -sS http://$MG_ADMIN/metrics | grep -c '^meshgate_backend_up{service=\"api\".* 0\$') == 3 ]]" \
  || fail "api backends not all down"
drops() { metrics | awk '$1 ~ /^meshgate_drops_total\{reason="no_(healthy_)?backend"\}$/ {n += $2} END {print n + 0}'; }
before=$(drops)
rc=0; ip netns exec "$CLI" curl -sS --max-time 2 http://203.0.113.11/ >/dev/null 2>&1 || rc=$?
(( rc != 0 )) || fail "a connection to api succeeded with every backend down"
after=$(drops)
echo "no-backend drops: $before -> $after"
(( after > before )) || fail "the dropped SYNs were not counted"
s=$(spread 203.0.113.10 6); echo "web meanwhile: $s"
rm -f "$TMP/sick1" "$TMP/sick2" "$TMP/sick3"
wait_for 10 is_up api 3 1 || fail "api backend 3 not back"
ip netns exec "$CLI" curl -sS --max-time 5 http://203.0.113.11/ >/dev/null || fail "api not back"

kill -TERM "$GW_PID"
rc=0; wait "$GW_PID" || rc=$?
[[ $rc -eq 0 ]] || fail "gateway exited $rc"
S=$TMP/stats.json
[[ $(json "$S" "d['drops']['reply_no_flow']") == 0 ]] || fail "backend answers to the probes dropped as reply_no_flow"
[[ $(json "$S" "d['drops']['host_queue_full']") == 0 ]] || fail "host_queue_full drops"
(( $(json "$S" "d['packets_to_host']") > 0 )) || fail "nothing reached the twin"
echo "PASS"
