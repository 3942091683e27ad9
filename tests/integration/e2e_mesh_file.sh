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
[[policy]]
name = "deny-blocked"
namespace = "demo"
scope = "namespace"
action = "deny"
  [[policy.group]]
    [[policy.group.clause]]
      [[policy.group.clause.match]]
      principals = ["cluster.local/ns/demo/sa/blocked", "*/sa/evil"]
      destination_ports = [8080]
    [[policy.group.clause]]
      [[policy.group.clause.match]]
      source_ips = ["192.0.2.0/24"]
TOML
}
mesh_file 198.51.100.11 >"$TMP/mesh.toml"

# A gateway certificate as the Istio CA issues them (P-256, SPIFFE URI SAN) under a test root.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/O=test-root" \
  -keyout "$TMP/root-key.pem" -out "$TMP/root.pem" 2>/dev/null || fail "openssl root"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=cluster.local" \
  -keyout "$TMP/gw-key.pem" -out "$TMP/gw.csr" 2>/dev/null || fail "openssl csr"
printf 'subjectAltName=URI:spiffe://cluster.local/ns/istio-system/sa/meshgate\n' >"$TMP/ext.cnf"
openssl x509 -req -in "$TMP/gw.csr" -CA "$TMP/root.pem" -CAkey "$TMP/root-key.pem" -days 7 \
  -set_serial 0x1234 -extfile "$TMP/ext.cnf" -out "$TMP/gw.pem" 2>/dev/null || fail "openssl sign"

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
[fullnat]                   # HBONE opens its connections from here
local_addresses = ["198.51.100.2"]
[hbone]
cert_chain = "$TMP/gw.pem"
private_key = "$TMP/gw-key.pem"
trust_bundle = "$TMP/root.pem"
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

note "/config_dump: the mesh file's policy and the [hbone] certificates"
curl -sS --max-time 3 "http://$MG_ADMIN/config_dump" >"$TMP/config.json" || fail "/config_dump"
python3 - "$TMP/config.json" <<'PY' || fail "/config_dump: $(cat "$TMP/config.json")"
import json, sys, time
d = json.load(open(sys.argv[1]))
assert d["policies"] == [{
    "name": "deny-blocked", "namespace": "demo", "scope": "namespace", "action": "deny",
    "dry_run": False,
    "groups": [{"clauses": [
        {"matches": [{"principals": ["cluster.local/ns/demo/sa/blocked", "*/sa/evil"],
                      "destination_ports": [8080]}]},
        {"matches": [{"source_ips": ["192.0.2.0/24"]}]}]}]}], d["policies"]
c = d["certificates"]
assert [x["role"] for x in c] == ["leaf", "trust_anchor"], c
leaf, root = c
assert leaf["identity"] == "spiffe://cluster.local/ns/istio-system/sa/meshgate", leaf
assert leaf["uri_sans"] == [leaf["identity"]] and leaf["serial"] == "1234", leaf
assert leaf["issuer"] == "O=test-root" and root["subject"] == "O=test-root", c
assert 6 * 86400 < leaf["expires_in_s"] <= 7 * 86400, leaf
t = time.strptime(leaf["not_after"], "%Y-%m-%dT%H:%M:%SZ")
assert root["identity"] == "" and root["expires_in_s"] > 29 * 86400, root
assert d["tls"]["identity"] == leaf["identity"] and d["tls"]["contexts"] >= 1, d["tls"]
PY

note "in-place edit: the workload moves"
mesh_file 198.51.100.12 >"$TMP/mesh.toml"
wait_for 2 bash -c "[[ \$(ip netns exec $CLI curl -sS --max-time 1 http://203.0.113.30/id.txt) == 'backend 12' ]]" \
  || fail "new flows did not move after the edit"
# Policies and certificates travel in every snapshot: the new one still has them.
curl -sS --max-time 3 "http://$MG_ADMIN/config_dump" >"$TMP/config2.json" || fail "/config_dump"
python3 - "$TMP/config.json" "$TMP/config2.json" <<'PY' || fail "/config_dump after the edit: $(cat "$TMP/config2.json")"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b["snapshot_version"] > a["snapshot_version"], (a["snapshot_version"], b["snapshot_version"])
assert b["policies"] == a["policies"] and len(b["policies"]) == 1, b["policies"]
assert [c["serial"] for c in b["certificates"]] == [c["serial"] for c in a["certificates"]], b
PY

note "an invalid edit keeps the running snapshot"
mesh_file 198.51.100.300 >"$TMP/mesh.toml"
wait_for 2 grep -q "event=mesh_file_invalid error=\"$TMP/mesh.toml:9:14: workload\[0\].addresses\[0\]" "$TMP/gateway.log" \
  || fail "no positioned error for the invalid edit"
for i in 1 2 3; do [[ $(get) == "backend 12" ]] || fail "traffic after the invalid edit"; done

stop_gateway TERM
echo "PASS"
