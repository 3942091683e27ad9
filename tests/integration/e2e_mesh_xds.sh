#!/usr/bin/env bash
# meshgate with [mesh] source = "xds" against meshgate-meshserver: a VIP learned over xDS carries
# real traffic (curl from a client namespace to python3 http.server in a backend namespace).
# Editing the server's mesh file moves new flows to the other workload within 1 s while an
# established connection stays on its backend; killing the server leaves traffic flowing on the
# last snapshot.
source "$(dirname "$0")/lib.sh"
require_root
MG_MESHSERVER=${MG_MESHSERVER:?MG_MESHSERVER must point at meshgate-meshserver}

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

# mesh_file ADDRESS...: the service's endpoints are the workloads at these addresses.
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

"$MG_MESHSERVER" --mesh-file "$TMP/mesh.toml" --listen 127.0.0.1:0 >"$TMP/meshserver.log" 2>&1 &
MS_PID=$!
PIDS+=($MS_PID)
wait_for 10 grep -q "event=meshserver_listening" "$TMP/meshserver.log" || fail "meshserver did not start"
PORT=$(sed -n 's/.*event=meshserver_listening port=\([0-9]*\).*/\1/p' "$TMP/meshserver.log")

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
address = "127.0.0.1:$PORT"
tls = false
cluster_id = "cluster1"
TOML
"$MG_BIN" --config "$TMP/gw.toml" --check | grep -qx "config ok" || fail "--check"
start_gateway "$TMP/gw.toml"
wait_for 10 grep -q "event=mesh_applied.*synced=true" "$TMP/gateway.log" || fail "no synced mesh snapshot"
grep -q "event=meshserver_ack type=address" "$TMP/meshserver.log" || fail "server saw no ACK"
for b in 11 12; do
  wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/198.51.100.$b/8080" || fail "http.server $b"
done

get() { ip netns exec "$CLI" curl -sS --max-time 3 http://203.0.113.20/id.txt; }

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

stop_gateway TERM
S=$TMP/stats.json
name="demo/web.demo.svc.cluster.local:80"
# Stats list the backends of the live snapshot: workload 11 is no longer one of them.
[[ $(json "$S" "list(d['services']['$name']['backends'])") == "['198.51.100.12:8080']" ]] || fail "backends in stats"
(( $(json "$S" "d['services']['$name']['backends']['198.51.100.12:8080']['flows']") >= 8 )) || fail "flows to 12"
echo "PASS"
