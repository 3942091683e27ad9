# Shared pieces of the HBONE tests and benchmarks (bash, sourced; defines functions only).

# hbone_python: Debian's python (python3-h2 is installed for it) as $PY, the helpers' folder
# as $H; fails when python3-h2 is missing.
hbone_python() {
  PY=/usr/bin/python3
  $PY -c 'import h2' || fail "python3-h2 missing (tools/setup.sh installs it)"
  H=$MG_SOURCE_DIR/tests/integration/hbone
}

# metrics_at_failure: the gateway's non-zero HBONE / TCP / proxy counters into the log dump.
metrics_at_failure() {
  curl -s --max-time 2 "http://$MG_ADMIN/metrics" 2>/dev/null |
    grep -E '^meshgate_(hbone|tcp|proxy|drops)' | grep -v ' 0$' >"$TMP/metrics-at-failure.log" || true
}

# deny_policy NAME SA: a namespace DENY policy of demo for the principal of service account SA
# (mesh file TOML).
deny_policy() {
  cat <<TOML

[[policy]]
name = "$1"
namespace = "demo"
scope = "namespace"
action = "deny"
  [[policy.group]]
    [[policy.group.clause]]
      [[policy.group.clause.match]]
      principals = ["cluster.local/ns/demo/sa/$2"]
TOML
}

# echo_mesh: the mesh file TOML of service echo.demo (VIP 203.0.113.30:80) whose one plain
# endpoint is workload demo/echo-1 at 198.51.100.11:7000 (service account echo).
echo_mesh() {
  cat <<TOML
[[mesh_service]]
name = "echo"
namespace = "demo"
hostname = "echo.demo.svc.cluster.local"
vips = ["203.0.113.30"]
ports = [{ service_port = 80, target_port = 7000 }]

[[workload]]
uid = "demo/echo-1"
name = "echo-1"
namespace = "demo"
addresses = ["198.51.100.11"]
tunnel = "none"
service_account = "echo"
trust_domain = "cluster.local"
services = { "demo/echo.demo.svc.cluster.local" = [{ service_port = 80, target_port = 7000 }] }
TOML
}

# The gateway topology of the HBONE-on-the-workers runs (needs ../lib.sh): a client namespace
# $CLI (192.0.2.2) and a backend namespace $BE (198.51.100.11), each on a veth whose other end
# is a net_af_packet port of meshgate; the tools/mkpki PKI in $P.
# hbone_topology TAG: TAG (one letter) keeps the names apart from other tests'.
hbone_topology() {
  HBONE_TAG=$1
  CLI=mg${HBONE_TAG}c$ID BE=mg${HBONE_TAG}b$ID
  add_host "$CLI" "g${HBONE_TAG}c$ID" 192.0.2.2/24 192.0.2.1
  add_host "$BE" "g${HBONE_TAG}b$ID" 198.51.100.11/24 198.51.100.1
  "$(dirname "${BASH_SOURCE[0]}")/../../../tools/mkpki" "$TMP/pki" >/dev/null
  P=$TMP/pki
}

# hbone_gateway_start [MESH_KEYS [TABLES]]: meshgate with one worker on those veths, [fullnat]
# 198.51.100.2, the mesh file $TMP/mesh.toml (MESH_KEYS: more keys of [mesh], e.g.
# 'mode = "proxy"'), the demo/server certificate and TABLES (more TOML); returns once /ready
# answers 200. $HBONE_KEYS (TOML lines) goes into [hbone], $HBONE_TABLES (TOML tables)
# after the rest.
hbone_gateway_start() {
  cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_${HBONE_TAG}c$ID,iface=g${HBONE_TAG}c$ID"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_${HBONE_TAG}b$ID,iface=g${HBONE_TAG}b$ID"
addresses = ["198.51.100.1/24"]
[fullnat]
local_addresses = ["198.51.100.2"]
[mesh]
source = "file"
path = "$TMP/mesh.toml"
${1:-}
[hbone]
cert_chain = "$P/demo.server.pem"
private_key = "$P/demo.server-key.pem"
trust_bundle = "$P/root.pem"
${HBONE_KEYS:-}
[admin]
listen = "$MG_ADMIN"
${2:-}
${HBONE_TABLES:-}
TOML
  start_gateway "$TMP/gw.toml"
  wait_for 10 curl -sf "http://$MG_ADMIN/ready" || fail "gateway not ready"
}
