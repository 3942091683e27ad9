#!/usr/bin/env bash
# meshgate with [mesh] source = "file": the mesh file's VIP carries real traffic to a backend
# namespace; an edit of the file moves new flows to the other workload; an invalid edit is
# logged with its file:line:column and the running snapshot keeps forwarding.
source "$(dirname "$0")/lib.sh"
require_root

CLI=mfc$ID BE=mfb$ID GWC=gfc$ID GWB=gfb$ID
add_host "$CLI" "$GWC" 192.0.2.2/24 192.0.2.1
add_host "$BE" "$GWB" 198.51.100.11/24 198.51.100.1
ip netns exec "$BE" ip addr add 198.51.100.12/24 dev eth0

# python3's http.server without the reverse DNS lookup of `--bind ADDR` (no DNS here).
cat >"$TMP/httpd.py" <<'PY'
import functools, http.server, socketserver, sys
class Server(http.server.ThreadingHTTPServer):
    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
Server((sys.argv[1], 8080), functools.partial(http.server.SimpleHTTPRequestHandler,
                                               directory=sys.argv[2])).serve_forever()
PY
for b in 11 12; do
  mkdir -p "$TMP/www$b"
  echo "backend $b" >"$TMP/www$b/id.txt"
  ip netns exec "$BE" python3 "$TMP/httpd.py" 198.51.100.$b "$TMP/www$b" >"$TMP/http$b.log" 2>&1 &
  PIDS+=($!)
done

mesh_file() {  # mesh_file ADDRESS: one service, one workload at ADDRESS
  cat <<TOML
[[mesh_service]]
namespace = "demo"
hostname = "web.demo.svc.cluster.local"
vips = ["203.0.113.30"]
ports = [{ service_port = 80, target_port = 8080 }]
[[workload]]
uid = "cluster1//v1/Pod/demo/web"
namespace = "demo"
addresses = ["$1"]
services = { "demo/web.demo.svc.cluster.local" = [] }
TOML
}
mesh_file 198.51.100.11 >"$TMP/mesh.toml"

cat >"$TMP/gw.toml" <<TOML
[[port]]
name = "client"
device = "net_af_packet_c$ID,iface=$GWC"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_b$ID,iface=$GWB"
addresses = ["198.51.100.1/24"]
[mesh]
source = "file"
path = "$TMP/mesh.toml"
[admin]
listen = "$MG_ADMIN"
TOML
start_gateway "$TMP/gw.toml"
grep -q "event=snapshot_published version=1 reason=mesh" "$TMP/gateway.log" || fail "first snapshot not from the mesh file"
for b in 11 12; do
  wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/198.51.100.$b/8080" || fail "http.server $b"
done
get() { ip netns exec "$CLI" curl -sS --max-time 3 http://203.0.113.30/id.txt; }

note "the mesh file's VIP reaches its workload"
[[ $(get) == "backend 11" ]] || fail "first request"

note "in-place edit: the workload moves"
mesh_file 198.51.100.12 >"$TMP/mesh.toml"
wait_for 2 bash -c "[[ \$(ip netns exec $CLI curl -sS --max-time 1 http://203.0.113.30/id.txt) == 'backend 12' ]]" \
  || fail "new flows did not move after the edit"

note "an invalid edit keeps the running snapshot"
mesh_file 198.51.100.300 >"$TMP/mesh.toml"
wait_for 2 grep -q "event=mesh_file_invalid error=\"$TMP/mesh.toml:9:14: workload\[0\].addresses\[0\]" "$TMP/gateway.log" \
  || fail "no positioned error for the invalid edit"
for i in 1 2 3; do [[ $(get) == "backend 12" ]] || fail "traffic after the invalid edit"; done

stop_gateway TERM
echo "PASS"
