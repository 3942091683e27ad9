#!/usr/bin/env bash
# HBONE termination cost, meshgate's engine against nghttpx, on the same traffic in one run:
#   client → meshgate-hbone client (the originator, the same for both) → TERMINATOR → echo
# TERMINATOR is `meshgate-hbone server` (our engine over kernel sockets: TLS 1.3 + HTTP/2
# CONNECT, then its own upstream TCP connection) or `nghttpx --http2-proxy` (TLS 1.3 with
# client-certificate verification, one worker; it hands each CONNECT to an HTTP/1.1 parent
# proxy, whose CPU is not counted). Figures: the terminator's CPU time (utime + stime from
# /proc) per GiB carried (both directions counted) for 1 and 16 concurrent streams, and per
# handshake (a new mTLS + HTTP/2 connection with one CONNECT, by a python-h2 client).
# All on 127.0.0.1. Usage (after a build):
#   MG_HBONE=build/tools/hbone/meshgate-hbone MG_SOURCE_DIR=$PWD tools/bench/hbone/vs_nghttpx.sh \
#       [MIB_PER_RUN] [HANDSHAKES]
source "${MG_SOURCE_DIR:?}/tests/integration/hbone/lib.sh"
command -v nghttpx >/dev/null || fail "nghttpx missing (tools/setup.sh installs nghttp2-proxy)"
MIB=${1:-256}
HS=${2:-200}

BASE=$(port_block 55000)
ECHO=$BASE PROXY=$((BASE + 1)) NGHTTPX=$((BASE + 2)) MG=$((BASE + 3)) L_NG=$((BASE + 4)) L_MG=$((BASE + 5))
make_pki
$PY "$H/backend.py" echo "$ECHO" --idle 2 2>"$TMP/echo.log" & PIDS+=($!)
$PY "$H/backend.py" connect-proxy "$PROXY" 2>"$TMP/connect-proxy.log" & PIDS+=($!)
nghttpx --conf=/dev/null --http2-proxy --frontend="127.0.0.1,$NGHTTPX" --backend="127.0.0.1,$PROXY" \
  --verify-client --verify-client-cacert="$P/root.pem" --backend-connections-per-host=64 \
  --tls-min-proto-version=TLSv1.3 --tls-max-proto-version=TLSv1.3 --workers=1 --no-ocsp \
  --errorlog-file="$TMP/nghttpx.log" --accesslog-file=/dev/null \
  "$P/demo.server-key.pem" "$P/demo.server.pem" 2>>"$TMP/nghttpx.log" & PIDS+=($!)
"$HB" server --listen "127.0.0.1:$MG" --serve 127.0.0.1/32 --cert "$P/demo.server.pem" \
  --key "$P/demo.server-key.pem" --bundle "$P/root.pem" 2>"$TMP/mg-server.log" & MG_PID=$!
PIDS+=($MG_PID)
for peer in "$L_NG:$NGHTTPX" "$L_MG:$MG"; do
  "$HB" client --listen "127.0.0.1:${peer%%:*}" --peer "127.0.0.1:${peer##*:}" \
    --target "127.0.0.1:$ECHO" --expect spiffe://cluster.local/ns/demo/sa/server \
    --cert "$P/demo.client.pem" --key "$P/demo.client-key.pem" --bundle "$P/root.pem" \
    2>"$TMP/originator-${peer%%:*}.log" & PIDS+=($!)
done
for port in $ECHO $PROXY $NGHTTPX $MG; do
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done
for port in $L_NG $L_MG; do
  for _ in $(seq 50); do grep -q 'listening on' "$TMP/originator-$port.log" 2>/dev/null && break; sleep 0.1; done
done
# nghttpx forks its worker: count the whole process group's children as well.
ng_pids() { pgrep -f "frontend=127.0.0.1,$NGHTTPX" | tr '\n' ' '; }
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
HZ=$(getconf CLK_TCK)

# measure PIDS COMMAND...: the CPU ticks of PIDS and the wall milliseconds while COMMAND runs.
measure() {
  local pids=$1; shift
  local c0 c1 t0 t1
  c0=$(cpu_ticks $pids); t0=$(date +%s%N)
  "$@" >/dev/null || fail "run failed: $*"
  c1=$(cpu_ticks $pids); t1=$(date +%s%N)
  echo "$(( c1 - c0 )) $(( (t1 - t0) / 1000000 ))"
}
bytes=$((MIB * 1048576))
echo "terminator CPU, $MIB MiB each way per run ($((2 * MIB)) MiB carried), $HS handshakes"
printf '%-34s %14s %14s %10s\n' "run" "meshgate-hbone" "nghttpx" "ratio"
row() {  # row LABEL DIVISOR FN: FN ORIGINATOR_PORT TERMINATOR_PORT runs the traffic
  local label=$1 div=$2 fn=$3 mg ng
  mg=$(measure "$MG_PID" $fn "$L_MG" "$MG")
  ng=$(measure "$(ng_pids)" $fn "$L_NG" "$NGHTTPX")
  python3 - "$label" "$div" "$HZ" $mg $ng <<'PY'
import sys
label, div, hz = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
mg_t, mg_ms, ng_t, ng_ms = map(float, sys.argv[4:8])
mg, ng = mg_t / hz / div, ng_t / hz / div
print(f"{label:<34} {mg:14.4f} {ng:14.4f} {mg / ng if ng else float('nan'):10.2f}   "
      f"(wall {mg_ms:.0f} / {ng_ms:.0f} ms)")
PY
}
bulk1() { timeout 300 $PY "$H/backend.py" roundtrip "$1" 1 "$bytes"; }
bulk16() { timeout 300 $PY "$H/backend.py" roundtrip "$1" 16 $((bytes / 16)); }
shakes() {
  local i
  for i in $(seq "$HS"); do
    timeout 10 $PY "$H/h2client.py" 127.0.0.1 "$2" --cert "$P/demo.client.pem" --key "$P/demo.client-key.pem" \
      --bundle "$P/root.pem" --authority "127.0.0.1:$ECHO" status >/dev/null || return 1
  done
}
gib=$(python3 -c "print(2 * $MIB / 1024)")
row "CPU s per GiB, 1 stream" "$gib" bulk1
row "CPU s per GiB, 16 streams" "$gib" bulk16
row "CPU ms per handshake" "$(python3 -c "print($HS / 1000)")" shakes
