#!/usr/bin/env bash
# HBONE termination on the gateway's workers, over the userspace TCP stack: a client namespace
# speaks HBONE (python-h2 + Python's ssl, not our code) to meshgate:15008 on a net_af_packet
# veth port; meshgate resolves the :authority on its snapshot (mesh file), authorizes the
# client's SPIFFE identity, connects to the backend namespace from its [fullnat] address and
# splices the stream to that TCP connection.
#   100 concurrent streams on one connection (256 KiB each way, per-stream check); a 32 MiB
#   stream each way; authority by pod ip:port, VIP:port and service FQDN; backend port closed
#   → 503; unknown authority → 400; DENY policy → 401; foreign trust domain → handshake
#   failure; half-close both ways; a policy change in the mesh file resets the live tunnel it
#   now denies (CONNECT_ERROR) and new CONNECTs get 401; drain → GOAWAY while the open stream
#   finishes, then the gateway exits. /metrics and /stats must agree with what the client saw.
source "$(dirname "$0")/lib.sh"
require_root
PY=/usr/bin/python3  # Debian's python: python3-h2 is installed for it
$PY -c 'import h2' || fail "python3-h2 missing (tools/setup.sh installs it)"
H=$MG_SOURCE_DIR/tests/integration/hbone
BIG=${MG_HBONE_GW_BYTES:-33554432}

CLI=mghc$ID BE=mghb$ID
add_host "$CLI" ghc$ID 192.0.2.2/24 192.0.2.1
add_host "$BE" ghb$ID 198.51.100.11/24 198.51.100.1
"$MG_SOURCE_DIR/tools/mkpki" "$TMP/pki" >/dev/null
P=$TMP/pki

ip netns exec "$BE" $PY "$H/backend.py" echo 7000 --bind 0.0.0.0 2>"$TMP/echo.log" & PIDS+=($!)
ip netns exec "$BE" $PY "$H/backend.py" sha 7001 --bind 0.0.0.0 2>"$TMP/sha.log" & PIDS+=($!)

deny_policy() {  # deny_policy NAME SA
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
cat >"$TMP/mesh.toml" <<TOML
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
deny_policy deny-blocked blocked >>"$TMP/mesh.toml"

cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_hc$ID,iface=ghc$ID"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_hb$ID,iface=ghb$ID"
addresses = ["198.51.100.1/24"]
[fullnat]
local_addresses = ["198.51.100.2"]
[mesh]
source = "file"
path = "$TMP/mesh.toml"
[hbone]
cert_chain = "$P/demo.server.pem"
private_key = "$P/demo.server-key.pem"
trust_bundle = "$P/root.pem"
[admin]
listen = "$MG_ADMIN"
TOML
start_gateway "$TMP/gw.toml"
wait_for 10 curl -sf "http://$MG_ADMIN/ready" || fail "not ready"
wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/127.0.0.1/7000" || fail "echo backend down"

client() {  # client IDENT ARGS...
  local id=$1; shift
  ip netns exec "$CLI" timeout 120 $PY "$H/h2client.py" 192.0.2.1 15008 --cert "$P/$id.pem" \
    --key "$P/$id-key.pem" --bundle "$P/root.pem" --timeout 90 "$@"
}
status_of() {  # status_of IDENT AUTHORITY
  client "$1" status --timeout 10 --authority "$2" |
    $PY -c 'import json,sys; print(json.load(sys.stdin)["status"])'
}
metric() { curl -s "http://$MG_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }

note "100 concurrent CONNECT streams on one connection to the pod address, 256 KiB each way"
out=$(client demo.client streams --n 100 --bytes 262144 --authority 198.51.100.11:7000) || fail "streams: $out"
echo "$out"
grep -q '"streams": 100' <<<"$out" || fail "not 100 streams: $out"
grep -q 'spiffe://cluster.local/ns/demo/sa/server' <<<"$out" || fail "gateway identity: $out"
grep -qE '198\.51\.100\.2' "$TMP/echo.log" || true  # (the echo backend does not log peers)

note "one $((BIG >> 20)) MiB stream each way"
t0=$(date +%s.%N)
out=$(client demo.client streams --n 1 --bytes "$BIG" --authority 198.51.100.11:7000) || fail "big: $out"
t1=$(date +%s.%N)
echo "$out"
echo "big stream: $($PY -c "print(f'{2 * $BIG * 8 / 1e6 / ($t1 - $t0):.0f} Mbit/s both ways')")"

note "authority by VIP:port and by service FQDN (Maglev pick, target port 7000)"
out=$(client demo.client streams --n 4 --bytes 10000 --authority 203.0.113.30:80) || fail "by VIP: $out"
out=$(client demo.client streams --n 4 --bytes 10000 --authority echo.demo.svc.cluster.local:80) || fail "by name: $out"

note "status answers"
[[ $(status_of demo.client 198.51.100.11:7999) == 503 ]] || fail "closed backend port must be 503"
[[ $(status_of demo.client 203.0.113.30:81) == 503 ]] || fail "no service on that VIP port must be 503"
[[ $(status_of demo.client 192.0.2.99:80) == 400 ]] || fail "authority not served must be 400"
[[ $(status_of demo.client nope.demo.svc.cluster.local:80) == 400 ]] || fail "unknown name must be 400"
[[ $(status_of demo.blocked 198.51.100.11:7000) == 401 ]] || fail "DENY policy must give 401"

note "foreign trust domain: handshake failure"
set +e
out=$(client foreign.demo.client status --timeout 10 --authority 198.51.100.11:7000); rc=$?
set -e
[[ $rc == 3 ]] || fail "foreign client must fail the handshake (rc $rc): $out"

note "half-close: our END_STREAM reaches the backend as FIN, its answer and FIN come back"
out=$(client demo.client halfclose --bytes 3000000 --authority 198.51.100.11:7001) || fail "halfclose: $out"
echo "$out"

note "a policy change in the mesh file ends the live tunnel it now denies"
# h2client signals --pid with SIGHUP once its tunnel carries data: this helper then edits the
# mesh file, which the gateway reloads (inotify) into a new snapshot.
bash -c "trap 'cat \"$TMP/deny.toml\" >>\"$TMP/mesh.toml\"; exit 0' HUP; for _ in \$(seq 600); do sleep 0.1; done" &
EDITOR_PID=$!; PIDS+=($EDITOR_PID)
deny_policy deny-client client >"$TMP/deny.toml"
sleep 0.2
out=$(client demo.client revoke --authority 198.51.100.11:7000 --pid "$EDITOR_PID" --timeout 20) \
  || fail "revoke: $out"
echo "$out"
[[ $(status_of demo.client 198.51.100.11:7000) == 401 ]] || fail "a new CONNECT after the change must get 401"
[[ $(status_of other.client 198.51.100.11:7000) == 200 ]] || fail "another identity must still get 200"

note "metrics and stats"
curl -s "http://$MG_ADMIN/metrics" | grep -E '^meshgate_hbone_' | grep -v ' 0$' || true
[[ $(metric meshgate_hbone_connect_200_total) == 112 ]] || fail "connect_200 != 112"  # 100+1+4+4+halfclose+revoke+other
[[ $(metric meshgate_hbone_connect_503_upstream_failed_total) == 1 ]] || fail "503 upstream"
[[ $(metric meshgate_hbone_connect_503_no_endpoint_total) == 1 ]] || fail "503 no endpoint"
[[ $(metric meshgate_hbone_connect_400_not_served_total) == 2 ]] || fail "400 not served"
[[ $(metric meshgate_hbone_connect_401_denied_total) == 2 ]] || fail "401"
[[ $(metric meshgate_hbone_tls_failed_chain_untrusted_total) == 1 ]] || fail "untrusted chain"
[[ $(metric meshgate_hbone_policy_revoked_total) == 1 ]] || fail "policy_revoked"
[[ $(metric meshgate_hbone_upstream_connected_total) == 112 ]] || fail "upstream_connected"
up=$(metric meshgate_hbone_bytes_to_upstream_total)
(( up >= 100 * 262144 + BIG + 8 * 10000 + 3000000 )) || fail "bytes_to_upstream $up"
[[ $(metric meshgate_hbone_tunnels) == 0 ]] || fail "tunnels left open: $(metric meshgate_hbone_tunnels)"

note "drain: GOAWAY, the open stream still finishes, then the gateway exits"
out=$(client other.client drain --authority 198.51.100.11:7000 --pid "$GW_PID") || fail "drain: $out"
echo "$out"
rc=0
timeout 20 tail --pid="$GW_PID" -f /dev/null || fail "gateway did not exit after the drain"
wait "$GW_PID" || rc=$?
[[ $rc == 0 ]] || fail "gateway exit $rc"
grep -q "event=drain_done" "$TMP/gateway.log" || fail "no drain_done"
[[ $(json "$TMP/stats.json" 'd["hbone"]["goaway_sent"]') -ge 1 ]] || fail "no GOAWAY counted"
[[ $(json "$TMP/stats.json" 'd["hbone"]["connect_200"]') == 113 ]] || fail "stats connect_200"
echo "e2e_hbone_gateway: ok"
