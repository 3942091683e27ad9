#!/usr/bin/env bash
# meshgate's HBONE originator (meshgate-hbone client: the engine over kernel sockets) against
# nghttpx (nghttp2-proxy, --http2-proxy, TLS 1.3 with client-certificate verification against
# the mkpki root) → an HTTP/1.1 CONNECT parent proxy → an echo backend, on 127.0.0.1 only.
# 8 MiB each way on one connection and 8 concurrent connections sharing one pooled HBONE
# connection, all checked by sha256; a server identity outside --expect fails the handshake.
source "$(dirname "$0")/hbone/lib.sh"
command -v nghttpx >/dev/null || fail "nghttpx missing (tools/setup.sh installs nghttp2-proxy)"

BASE=$(port_block 10000)
ECHO=$BASE PROXY=$((BASE + 1)) NGHTTPX=$((BASE + 2)) LOCAL=$((BASE + 3)) LOCAL_BAD=$((BASE + 4))
make_pki

# nghttpx does not pass END_STREAM on to its HTTP/1 parent proxy as a half-close, so the echo
# backend ends idle connections after 2 s (else streams live until its 30 s timeout).
$PY "$H/backend.py" echo "$ECHO" --idle 2 2>"$TMP/echo.log" & PIDS+=($!)
$PY "$H/backend.py" connect-proxy "$PROXY" 2>"$TMP/connect-proxy.log" & PIDS+=($!)
nghttpx --conf=/dev/null --http2-proxy --frontend="127.0.0.1,$NGHTTPX" --backend="127.0.0.1,$PROXY" \
  --verify-client --verify-client-cacert="$P/root.pem" --backend-connections-per-host=64 \
  --tls-min-proto-version=TLSv1.3 --tls-max-proto-version=TLSv1.3 --workers=1 --no-ocsp \
  --errorlog-file="$TMP/nghttpx.log" --accesslog-file="$TMP/nghttpx-access.log" \
  "$P/demo.server-key.pem" "$P/demo.server.pem" & PIDS+=($!)
originator() {  # originator LISTEN_PORT EXPECTED_ID STATS
  "$HB" client --listen "127.0.0.1:$1" --peer "127.0.0.1:$NGHTTPX" --target "127.0.0.1:$ECHO" \
    --expect "$2" --cert "$P/demo.client.pem" --key "$P/demo.client-key.pem" \
    --bundle "$P/root.pem" --stats "$3" 2>>"$TMP/originator-$1.log" &
  PIDS+=($!)
}
originator "$LOCAL" spiffe://cluster.local/ns/demo/sa/server "$TMP/stats.json"; ORIG=$!
originator "$LOCAL_BAD" spiffe://cluster.local/ns/demo/sa/someone-else "$TMP/stats-bad.json"; BAD=$!
# Probe only the peers: a probe of an originator port would be a CONNECT of its own.
for port in $ECHO $PROXY $NGHTTPX; do
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done
for port in $LOCAL $LOCAL_BAD; do
  for _ in $(seq 50); do grep -q 'listening on' "$TMP/originator-$port.log" 2>/dev/null && break; sleep 0.1; done
done

note "8 MiB each way through one CONNECT stream"
timeout 120 $PY "$H/backend.py" roundtrip "$LOCAL" 1 8388608 || fail "large transfer"
note "8 concurrent connections, 1 MiB each way: one pooled HBONE connection"
timeout 120 $PY "$H/backend.py" roundtrip "$LOCAL" 8 1048576 || fail "concurrent transfers"
note "a server that is not the expected identity: the client connection is reset, no bytes"
timeout 60 $PY "$H/backend.py" roundtrip "$LOCAL_BAD" 1 1000 && fail "unexpected identity accepted"

grep -c "CONNECT 127.0.0.1:$ECHO HTTP/1.1" "$TMP/connect-proxy.log" | grep -qx 9 ||
  fail "nghttpx did not forward 9 CONNECTs: $(cat "$TMP/connect-proxy.log")"
note "drain: every stream ends (backend idle close), the originator exits"
for _ in $(seq 100); do
  [[ $(grep -c '"CONNECT 127.0.0.1:'"$ECHO"' HTTP/2" 200' "$TMP/nghttpx-access.log") == 9 ]] && break
  sleep 0.1
done
grep -q '"CONNECT 127.0.0.1:'"$ECHO"' HTTP/2" 200 8388608' "$TMP/nghttpx-access.log" ||
  fail "nghttpx did not log the 8 MiB CONNECT: $(cat "$TMP/nghttpx-access.log")"
kill -TERM "$ORIG" "$BAD"
wait "$ORIG" || true
wait "$BAD" || true
note "originator counters"
cat "$TMP/stats.json"
expect "$TMP/stats.json" streams_requested 9
expect "$TMP/stats.json" tls_handshakes 1
expect "$TMP/stats.json" client_non_200 0
expect "$TMP/stats-bad.json" tls_failed_unexpected_identity 1
expect "$TMP/stats-bad.json" streams_requested 0
echo "e2e_hbone_originator: ok"
