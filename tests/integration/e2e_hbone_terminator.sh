#!/usr/bin/env bash
# meshgate's HBONE terminator (the engine over kernel sockets: meshgate-hbone server) against a
# client on another HTTP/2 implementation (python-h2 + Python's ssl), on 127.0.0.1 only:
# 100 concurrent CONNECT streams on one connection with per-stream checksums; a DENY policy →
# 401; a foreign trust domain → handshake failure (untrusted chain, and wrong trust domain with
# its root trusted); unknown authority → 400; non-CONNECT → 400; backend down → 503; no
# endpoint → 503; half-close both ways; drain → GOAWAY while a stream finishes. Counters from
# the server's --stats must match what the client saw.
source "$(dirname "$0")/hbone/lib.sh"
source "$(dirname "$0")/hbone/common.sh"  # deny_policy
$PY -c 'import h2' || fail "python3-h2 missing (tools/setup.sh installs it)"

BASE=$(port_block 20000)
ECHO=$BASE SHA=$((BASE + 1)) DOWN=$((BASE + 2)) HBONE=$((BASE + 3)) HBONE2=$((BASE + 4))
make_pki
cat "$P/root.pem" "$P/foreign-root.pem" >"$P/both-roots.pem"

cat >"$TMP/mesh.toml" <<TOML
[[workload]]
uid = "gw"
name = "gw"
namespace = "demo"
addresses = ["127.0.0.1"]
tunnel = "hbone"
TOML
deny_policy deny-blocked blocked >>"$TMP/mesh.toml"

$PY "$H/backend.py" echo "$ECHO" 2>"$TMP/echo.log" & PIDS+=($!)
$PY "$H/backend.py" sha "$SHA" 2>"$TMP/sha.log" & PIDS+=($!)
server() {  # server PORT BUNDLE STATS
  "$HB" server --listen "127.0.0.1:$1" --cert "$P/demo.server.pem" --key "$P/demo.server-key.pem" \
    --bundle "$P/$2" --serve 127.0.0.0/8 --name "echo.demo.svc.cluster.local:80=127.0.0.1:$ECHO" \
    --no-endpoint-port 9 --mesh "$TMP/mesh.toml" --workload gw --stats "$3" 2>>"$TMP/server-$1.log" &
  PIDS+=($!)
}
server "$HBONE" root.pem "$TMP/stats.json"; SRV=$!
server "$HBONE2" both-roots.pem "$TMP/stats2.json"; SRV2=$!
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$HBONE") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$ECHO") 2>/dev/null && break
  sleep 0.1
done

client() {  # client IDENT PORT ARGS...
  local id=$1 port=$2; shift 2
  timeout 90 $PY "$H/h2client.py" 127.0.0.1 "$port" --cert "$P/$id.pem" --key "$P/$id-key.pem" \
    --bundle "$P/root.pem" --timeout 60 "$@"
}
status_of() { client demo.client "$HBONE" status --timeout 10 "$@" | $PY -c 'import json,sys; print(json.load(sys.stdin)["status"])'; }

note "100 concurrent CONNECT streams on one connection, 256 KiB each way per stream"
out=$(client demo.client "$HBONE" streams --n 100 --bytes 262144 --authority "127.0.0.1:$ECHO") || fail "streams: $out"
echo "$out"
grep -q '"streams": 100' <<<"$out" || fail "not 100 streams: $out"
grep -q 'spiffe://cluster.local/ns/demo/sa/server' <<<"$out" || fail "server identity: $out"

note "the same through a service name authority"
out=$(client demo.client "$HBONE" streams --n 2 --bytes 1000 --authority echo.demo.svc.cluster.local:80) || fail "by name: $out"

note "status answers"
[[ $(status_of --authority "127.0.0.1:$DOWN") == 503 ]] || fail "backend down must be 503"
[[ $(status_of --authority 127.0.0.1:9) == 503 ]] || fail "no endpoint must be 503"
[[ $(status_of --authority 192.0.2.1:80) == 400 ]] || fail "authority not served must be 400"
[[ $(status_of --authority unknown.demo.svc.cluster.local:80) == 400 ]] || fail "unknown name must be 400"
[[ $(status_of --authority 127.0.0.1) == 400 ]] || fail "authority without port must be 400"
[[ $(status_of --method GET --authority "127.0.0.1:$ECHO") == 400 ]] || fail "GET must be 400"
st=$(client demo.blocked "$HBONE" status --timeout 10 --authority "127.0.0.1:$ECHO") || true
[[ $st == *'"status": 401'* ]] || fail "DENY policy must give 401: $st"

note "foreign trust domain: handshake failure (untrusted chain)"
set +e
out=$(client foreign.demo.client "$HBONE" status --timeout 10 --authority "127.0.0.1:$ECHO"); rc=$?
set -e
[[ $rc == 3 ]] || fail "foreign client must fail the handshake (rc $rc): $out"
note "foreign trust domain with its root trusted: still refused (wrong trust domain)"
set +e
out=$(timeout 30 $PY "$H/h2client.py" 127.0.0.1 "$HBONE2" --cert "$P/foreign.demo.client.pem" \
  --key "$P/foreign.demo.client-key.pem" --bundle "$P/root.pem" --timeout 10 status --authority "127.0.0.1:$ECHO"); rc=$?
set -e
[[ $rc == 3 ]] || fail "foreign trust domain must fail the handshake (rc $rc): $out"

note "half-close: our END_STREAM reaches the backend as FIN, its answer and FIN come back"
out=$(client demo.client "$HBONE" halfclose --bytes 3000000 --authority "127.0.0.1:$SHA") || fail "halfclose: $out"
echo "$out"

note "drain: GOAWAY, the open stream still finishes, then the connection closes"
out=$(client demo.client "$HBONE" drain --authority "127.0.0.1:$ECHO" --pid "$SRV") || fail "drain: $out"
echo "$out"
for _ in $(seq 100); do kill -0 "$SRV" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SRV" 2>/dev/null && fail "server did not exit after drain"
note "a policy change ends the live tunnels it now denies (SIGHUP: reload, re-check)"
# The file changes now; the server keeps the policies it loaded until SIGHUP.
deny_policy deny-client client >>"$TMP/mesh.toml"
out=$(client demo.client "$HBONE2" revoke --authority "127.0.0.1:$ECHO" --pid "$SRV2" --timeout 20) \
  || fail "revoke: $out"
echo "$out"
grep -q "policies reloaded: 2 policies, 1 tunnels revoked" "$TMP/server-$HBONE2.log" \
  || fail "server log: $(cat "$TMP/server-$HBONE2.log")"
st=$(client demo.client "$HBONE2" status --timeout 10 --authority "127.0.0.1:$ECHO") || true
[[ $st == *'"status": 401'* ]] || fail "a new CONNECT after the change must get 401: $st"
kill -TERM "$SRV2"; wait "$SRV2" || true

note "server counters"
cat "$TMP/stats.json"
expect "$TMP/stats.json" connect_200 104          # 100 + 2 by name + halfclose + drain
expect "$TMP/stats.json" connect_503_upstream_failed 1
expect "$TMP/stats.json" connect_503_no_endpoint 1
expect "$TMP/stats.json" connect_400_not_served 2
expect "$TMP/stats.json" connect_400_authority 1
expect "$TMP/stats.json" connect_400_method 1
expect "$TMP/stats.json" connect_401_denied 1
expect "$TMP/stats.json" tls_failed_chain_untrusted 1
expect "$TMP/stats.json" goaway_sent 1
expect "$TMP/stats2.json" tls_failed_wrong_trust_domain 1
expect "$TMP/stats2.json" policy_revoked 1
expect "$TMP/stats2.json" connect_401_denied 1
echo "e2e_hbone_terminator: ok"
