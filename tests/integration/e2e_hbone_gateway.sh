#!/usr/bin/env bash
# HBONE termination on the gateway's workers, over the userspace TCP stack: a client namespace
# speaks HBONE (python-h2 + Python's ssl, not our code) to meshgate:15008 on a net_af_packet
# veth port; meshgate resolves the :authority on its snapshot (mesh file), authorizes the
# client's SPIFFE identity, connects to the backend namespace from its [fullnat] address and
# splices the stream to that TCP connection.
#   100 concurrent streams on one connection (256 KiB each way, per-stream check); a 32 MiB
#   stream each way; authority by pod ip:port, VIP:port and service FQDN; backend port closed
#   → 503; unknown authority → 400; DENY policy → 401; foreign trust domain → handshake
#   failure; half-close both ways (and its access-log record); a policy change in the mesh file resets the live tunnel it
#   now denies (CONNECT_ERROR) and new CONNECTs get 401; drain → GOAWAY while the open stream
#   finishes, then the gateway exits. /metrics and /stats must agree with what the client saw.
# Origination: curl in the client namespace to a mesh VIP whose endpoint has tunnel = hbone;
# meshgate terminates the client's TCP and carries it in a CONNECT stream of a pooled HBONE
# connection to <pod IP>:15008, where nghttpx (nghttp2-proxy, TLS 1.3 with client-certificate
# verification; not our code) terminates it toward the pod's http.server: 20 requests on one
# pooled connection, 20 in parallel, a 32 MiB download by sha256, the CONNECT's headers in
# nghttpx's log; an endpoint whose certificate is not its workload identity → client reset.
# A [[listener]] (match = "host") routes a wildcard Host to the mesh service: its pick is the
# HBONE workload, so the request head the listener read goes first on the HBONE stream.
# Double hop: an HBONE client's CONNECT to a pod whose workload has tunnel = hbone goes on as a
# stream of the pooled connection to that pod's nghttpx (4 streams each checked; the impostor
# pod → 503).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hbone/common.sh"
require_root
hbone_python
# On failure the gateway's non-zero counters go to the log dump too.
fail() {
  metrics_at_failure
  ip netns exec "$BE" ss -tnio >"$TMP/backend-sockets-at-failure.log" 2>&1 || true
  echo "FAIL: $*" >&2
  exit 1
}
BIG=${MG_HBONE_GW_BYTES:-33554432}

hbone_topology h

ip netns exec "$BE" $PY "$H/backend.py" echo 7000 --bind 0.0.0.0 2>"$TMP/echo.log" & PIDS+=($!)
ip netns exec "$BE" $PY "$H/backend.py" sha 7001 --bind 0.0.0.0 2>"$TMP/sha.log" & PIDS+=($!)
# Two HBONE pods: 198.51.100.12 (identity default/default, as its certificate says) and
# 198.51.100.13 (the mesh says demo/echo, its certificate says default/default).
command -v nghttpx >/dev/null || fail "nghttpx missing (tools/setup.sh installs nghttp2-proxy)"
mkdir -p "$TMP/www"
echo "hello over hbone" >"$TMP/www/id.txt"
head -c "$BIG" /dev/urandom >"$TMP/www/big.bin"
ip netns exec "$BE" ip addr add 198.51.100.12/24 dev eth0
ip netns exec "$BE" ip addr add 198.51.100.13/24 dev eth0
ip netns exec "$BE" $PY -m http.server 8080 --bind 0.0.0.0 --directory "$TMP/www" >"$TMP/http.log" 2>&1 & PIDS+=($!)
ip netns exec "$BE" $PY "$H/backend.py" connect-proxy 3128 2>"$TMP/connect-proxy.log" & PIDS+=($!)
# nghttpx does not pass END_STREAM to its HTTP/1 parent as a half-close: this echo ends idle
# connections after 2 s (which ends their streams).
ip netns exec "$BE" $PY "$H/backend.py" echo 7002 --bind 0.0.0.0 --idle 2 2>"$TMP/echo-idle.log" & PIDS+=($!)
for pod in 12 13; do
  ip netns exec "$BE" nghttpx --conf=/dev/null --http2-proxy --frontend="198.51.100.$pod,15008" \
    --backend="127.0.0.1,3128" --verify-client --verify-client-cacert="$P/root.pem" \
    --tls-min-proto-version=TLSv1.3 --tls-max-proto-version=TLSv1.3 --workers=1 --no-ocsp \
    --accesslog-format='$request $status $http_forwarded | $http_baggage | $http_traceparent' \
    --errorlog-file="$TMP/nghttpx$pod.log" --accesslog-file="$TMP/nghttpx$pod-access.log" \
    "$P/default.default-key.pem" "$P/default.default.pem" & PIDS+=($!)
done

echo_mesh >"$TMP/mesh.toml"
cat >>"$TMP/mesh.toml" <<TOML

[[mesh_service]]
name = "web"
namespace = "default"
hostname = "web.default.svc.cluster.local"
vips = ["203.0.113.40"]
ports = [{ service_port = 80, target_port = 8080 }]

[[workload]]
uid = "default/web-1"
name = "web-1"
namespace = "default"
workload_name = "web"
canonical_name = "web"
canonical_revision = "v1"
addresses = ["198.51.100.12"]
tunnel = "hbone"
service_account = "default"
trust_domain = "cluster.local"
services = { "default/web.default.svc.cluster.local" = [{ service_port = 80, target_port = 8080 }], "default/dead.default.svc.cluster.local" = [{ service_port = 80, target_port = 8099 }] }

[[mesh_service]]
name = "dead"
namespace = "default"
hostname = "dead.default.svc.cluster.local"
vips = ["203.0.113.42"]
ports = [{ service_port = 80, target_port = 8099 }]

[[mesh_service]]
name = "impostor"
namespace = "demo"
hostname = "impostor.demo.svc.cluster.local"
vips = ["203.0.113.41"]
ports = [{ service_port = 80, target_port = 8080 }]

[[workload]]
uid = "demo/impostor-1"
name = "impostor-1"
namespace = "demo"
addresses = ["198.51.100.13"]
tunnel = "hbone"
service_account = "echo"
trust_domain = "cluster.local"
services = { "demo/impostor.demo.svc.cluster.local" = [{ service_port = 80, target_port = 8080 }] }
TOML
deny_policy deny-blocked blocked >>"$TMP/mesh.toml"

hbone_gateway_start "" '[[listener]]
name = "by-host"
vip = "203.0.113.45"
port = 80
match = "host"
  [[listener.route]]
  hostnames = ["*.web.example.test"]
  service = "web.default.svc.cluster.local"
[access_log]
path = "'"$TMP/access.log"'"'
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
note "access log: the half-closed tunnel's record (bytes each way, both principals, our END_STREAM first)"
# access_record KIND FIELD VALUE: waits for the access-log line of KIND whose FIELD is VALUE.
access_record() {
  wait_for 5 grep -q "\"kind\":\"$1\".*\"$2\":\"$3\"" "$TMP/access.log" ||
    fail "no $1 record with $2 $3: $(tail -n 3 "$TMP/access.log")"
  grep "\"kind\":\"$1\".*\"$2\":\"$3\"" "$TMP/access.log" | tail -n 1
}
rec=$(access_record hbone_inbound backend 198.51.100.11:7001)
echo "$rec"
$PY - "$rec" <<'PY' || fail "hbone_inbound record: $rec"
import json, sys
r = json.loads(sys.argv[1])
assert r["client"].startswith("192.0.2.2:") and r["vip"] == "192.0.2.1:15008", r
assert r["bytes_from_client"] == 3000000, r
assert r["bytes_to_client"] == 64 + len(" 3000000\n"), r  # "<sha256 hex> 3000000\n"
assert r["source_principal"] == "spiffe://cluster.local/ns/demo/sa/client", r
assert r["destination_principal"] == "spiffe://cluster.local/ns/demo/sa/server", r
assert r["end"] == "client_fin", r
PY

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

note "origination: 20 requests to a VIP whose endpoint is an HBONE workload, one pooled connection"
wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/198.51.100.12/15008" || fail "nghttpx down"
wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/127.0.0.1/8080" || fail "http.server down"
C() { ip netns exec "$CLI" "$@"; }
for ((k = 0; k < 20; ++k)); do
  body=$(C curl -sS --max-time 10 http://203.0.113.40/id.txt) || fail "curl #$k"
  [[ $body == "hello over hbone" ]] || fail "curl #$k: body '$body'"
done
[[ $(metric meshgate_hbone_origin_dials_total) == 1 ]] || fail "20 sequential requests must share one dial"
[[ $(metric meshgate_hbone_origin_established_total) == 20 ]] || fail "origin_established != 20"
# (nghttpx writes the quotes of Forwarded as \x22)
n=$(grep -c '^CONNECT 198.51.100.12:8080 HTTP/2 200 for=\\x22192.0.2.2:[0-9]*\\x22;host=web.default.svc.cluster.local | service.name=web.default.svc.cluster.local | 00-[0-9a-f]\{32\}-[0-9a-f]\{16\}-00$' \
  "$TMP/nghttpx12-access.log" || true)
[[ $n == 20 ]] || fail "nghttpx logged $n CONNECTs with our headers: $(tail -n 3 "$TMP/nghttpx12-access.log")"
note "access log: an originated tunnel's record"
sizes=$(C curl -sS --max-time 10 --local-port 45003 -o /dev/null \
  -w '%{size_request} %{size_header} %{size_download}' http://203.0.113.40/id.txt) || fail "curl"
read -r sent hdr body <<<"$sizes"
rec=$(access_record hbone_outbound client 192.0.2.2:45003)
echo "$rec"
$PY - "$rec" "$sent" "$((hdr + body))" <<'PY' || fail "hbone_outbound record: $rec"
import json, sys
r = json.loads(sys.argv[1])
assert r["vip"] == "203.0.113.40:80" and r["backend"] == "198.51.100.12:8080", r
assert r["bytes_from_client"] == int(sys.argv[2]) and r["bytes_to_client"] == int(sys.argv[3]), r
assert r["source_principal"] == "spiffe://cluster.local/ns/demo/sa/server", r
assert r["destination_principal"] == "spiffe://cluster.local/ns/default/sa/default", r
assert r["service"] == "default/web.default.svc.cluster.local:80", r  # the mesh service:port
PY
note "origination: 20 parallel requests, and a $((BIG >> 20)) MiB download by sha256"
for ((k = 0; k < 20; ++k)); do C curl -sS --max-time 20 -o "$TMP/par$k" http://203.0.113.40/id.txt & done
wait_for 25 bash -c "[[ \$(cat $TMP/par* 2>/dev/null | grep -c 'hello over hbone') == 20 ]]" || fail "parallel requests"
want=$(sha256sum <"$TMP/www/big.bin" | cut -d' ' -f1)
t0=$(date +%s.%N)
got=$(C curl -sS --max-time 120 http://203.0.113.40/big.bin | sha256sum | cut -d' ' -f1)
t1=$(date +%s.%N)
[[ $got == "$want" ]] || fail "download over HBONE: sha256 $got != $want"
echo "download over HBONE: $($PY -c "print(f'{$BIG * 8 / 1e6 / ($t1 - $t0):.0f} Mbit/s')")"
note "origination: the endpoint's certificate is not its workload identity → the client is reset"
set +e
out=$(C curl -sS --max-time 10 http://203.0.113.41/id.txt 2>&1); rc=$?
set -e
[[ $rc != 0 && $out != *hello* ]] || fail "impostor endpoint accepted: $out"
(( $(metric meshgate_hbone_tls_failed_unexpected_identity_total) >= 1 )) || fail "no unexpected-identity failure counted"
(( $(metric meshgate_hbone_origin_dial_failed_total) >= 1 )) || fail "no failed dial counted"
[[ $(grep -c CONNECT "$TMP/nghttpx13-access.log" 2>/dev/null || true) == 0 ]] || fail "the impostor got a CONNECT"
note "origination: the pod's terminator answers the CONNECT with an error (nothing on 8099) → the client is reset"
set +e
out=$(C curl -sS --max-time 10 http://203.0.113.42/ 2>&1); rc=$?
set -e
[[ $rc != 0 ]] || fail "a non-200 CONNECT answer must reset the client: $out"
(( $(metric meshgate_hbone_client_non_200_total) == 1 )) || fail "client_non_200 != 1"
[[ $(metric meshgate_hbone_originated_total) == 44 ]] || fail "originated != 44"  # 20 + the access-log curl + 20 + 1 + impostor + non-200
[[ $(metric meshgate_hbone_origin_streams_total) == 43 ]] || fail "origin_streams != 43"
[[ $(metric meshgate_hbone_origin_client_resets_total) == 2 ]] || fail "clients reset: $(metric meshgate_hbone_origin_client_resets_total), want 2 (the impostor's, the non-200)"

note "a listener routes by Host to the mesh service: over HBONE to its workload"
for ((k = 0; k < 5; ++k)); do
  body=$(C curl -sS --max-time 10 -H "Host: www$k.web.example.test" http://203.0.113.45/id.txt) ||
    fail "listener curl #$k"
  [[ $body == "hello over hbone" ]] || fail "listener curl #$k: body '$body'"
done
[[ $(metric meshgate_hbone_originated_total) == 49 ]] || fail "originated != 49 after the listener's 5"
[[ $(metric 'meshgate_listener_connections_total{listener="by-host",outcome="routed"}') == 5 ]] ||
  fail "listener routed != 5"
set +e
out=$(C curl -sS --max-time 10 -H "Host: web.example.test" http://203.0.113.45/id.txt 2>&1); rc=$?
set -e
[[ $rc != 0 ]] || fail "a Host no route matches must be reset: $out"
[[ $(metric 'meshgate_listener_rejected_total{listener="by-host",reason="no_route"}') == 1 ]] ||
  fail "listener no_route != 1"

note "double hop: CONNECT to an HBONE pod goes on over HBONE to its port 15008"
out=$(client demo.client streams --n 4 --bytes 100000 --authority 198.51.100.12:7002) || fail "double hop: $out"
echo "$out"
n=$(grep -c '^CONNECT 198.51.100.12:7002 HTTP/2 200 for=\\x22192.0.2.2:[0-9]*\\x22 ' "$TMP/nghttpx12-access.log" || true)
[[ $n == 4 ]] || fail "nghttpx logged $n double-hop CONNECTs: $(tail -n 4 "$TMP/nghttpx12-access.log")"
[[ $(metric meshgate_hbone_upstream_hbone_total) == 4 ]] || fail "upstream_hbone != 4"
st=$(status_of other.client 198.51.100.13:8080 2>&1) || true  # (demo.client is denied in demo now)
[[ $st == 503 ]] || fail "double hop to the impostor must be 503, got: $st"

note "metrics and stats"
curl -s "http://$MG_ADMIN/metrics" | grep -E '^meshgate_hbone_' | grep -v ' 0$' || true
[[ $(metric meshgate_hbone_connect_200_total) == 116 ]] || fail "connect_200 != 116"  # 100+1+4+4+halfclose+revoke+other+4 double hop
[[ $(metric meshgate_hbone_connect_503_upstream_failed_total) == 2 ]] || fail "503 upstream"
[[ $(metric meshgate_hbone_connect_503_no_endpoint_total) == 1 ]] || fail "503 no endpoint"
[[ $(metric meshgate_hbone_connect_400_not_served_total) == 2 ]] || fail "400 not served"
[[ $(metric meshgate_hbone_connect_401_denied_total) == 2 ]] || fail "401"
[[ $(metric meshgate_hbone_tls_failed_chain_untrusted_total) == 1 ]] || fail "untrusted chain"
[[ $(metric meshgate_hbone_policy_revoked_total) == 1 ]] || fail "policy_revoked"
[[ $(metric meshgate_hbone_upstream_connected_total) == 116 ]] || fail "upstream_connected"
up=$(metric meshgate_hbone_bytes_to_upstream_total)
(( up >= 100 * 262144 + BIG + 8 * 10000 + 3000000 )) || fail "bytes_to_upstream $up"
[[ $(metric meshgate_hbone_tunnels) == 0 ]] || fail "tunnels left open: $(metric meshgate_hbone_tunnels)"

note "Istio metrics: terminated tunnels report as the destination, originations as the source"
istio() {  # istio SERIES [LABEL=VALUE...]: summed istio_tcp_SERIES_total samples with those labels
  local s=$1; shift
  $PY "$(dirname "$0")/istio_metric.py" "http://$MG_ADMIN/metrics" "istio_tcp_${s}_total" \
    connection_security_policy=mutual_tls request_protocol=tcp response_flags=- "$@"
}
# demo.client's tunnels to echo-1:7000 (its mesh entry names no workload_name): 100 streams, the
# big one, 4 by VIP, 4 by name, revoke.
term=(reporter=destination source_principal=spiffe://cluster.local/ns/demo/sa/client
  source_workload=unknown destination_workload=unknown destination_workload_namespace=demo
  destination_principal=spiffe://cluster.local/ns/demo/sa/echo
  destination_service=echo.demo.svc.cluster.local destination_service_namespace=demo
  destination_service_name=echo)
opened=$(istio connections_opened "${term[@]}")
[[ $opened == 110 ]] || fail "istio opened for demo.client -> echo-1: $opened, want 110"
[[ $(istio connections_closed "${term[@]}") == "$opened" ]] || fail "istio closed != opened"
rx=$(istio received_bytes "${term[@]}") tx=$(istio sent_bytes "${term[@]}")
(( rx >= 100 * 262144 + BIG + 8 * 10000 )) || fail "istio received bytes $rx"
(( tx >= 100 * 262144 + BIG + 8 * 10000 )) || fail "istio sent bytes $tx (the echo)"
# The curl originations to web (20 + the access-log curl + 20 + the download + 5 through the
# listener): the gateway's own identity is the source principal over mTLS.
orig=(reporter=source source_principal=spiffe://cluster.local/ns/demo/sa/server
  source_workload=unknown destination_workload=web destination_canonical_service=web
  destination_version=v1 destination_principal=spiffe://cluster.local/ns/default/sa/default
  destination_service=web.default.svc.cluster.local destination_service_name=web)
[[ $(istio connections_opened "${orig[@]}") == 47 ]] ||
  fail "istio opened for originations to web: $(istio connections_opened "${orig[@]}"), want 47"
(( $(istio sent_bytes "${orig[@]}") >= BIG )) || fail "istio sent bytes to the curl clients < the download"

note "drain: GOAWAY, the open stream still finishes, then the gateway exits"
out=$(client other.client drain --authority 198.51.100.11:7000 --pid "$GW_PID") || fail "drain: $out"
echo "$out"
rc=0
timeout 20 tail --pid="$GW_PID" -f /dev/null || fail "gateway did not exit after the drain"
wait "$GW_PID" || rc=$?
[[ $rc == 0 ]] || fail "gateway exit $rc"
grep -q "event=drain_done" "$TMP/gateway.log" || fail "no drain_done"
[[ $(json "$TMP/stats.json" 'd["hbone"]["goaway_sent"]') -ge 1 ]] || fail "no GOAWAY counted"
[[ $(json "$TMP/stats.json" 'd["hbone"]["connect_200"]') == 117 ]] || fail "stats connect_200"
# Segments the stack builds must fit the ports' MTU (data segments beside SACK blocks too).
[[ $(json "$TMP/stats.json" 'd["drops"].get("mtu_exceeded", 0)') == 0 ]] || fail "mtu_exceeded drops"
echo "e2e_hbone_gateway: ok"
