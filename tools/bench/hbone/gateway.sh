#!/usr/bin/env bash
# HBONE termination on a gateway worker (userspace TCP stack, net_af_packet veth ports), against
# the raw crypto of the same work measured in the same run (bench/hbone_bench):
#   client ns: backend.py roundtrip → meshgate-hbone client (originator, kernel sockets)
#     → meshgate worker :15008 (TLS 1.3 + HTTP/2 CONNECT, resolve, authorize, splice)
#     → backend ns: echo
# Figures per worker: carried Gbit/s, the worker's busy cycles (poll iterations that received
# packets; wall time, so preemption by the other processes of this run counts too) per GiB
# carried (both directions), for 1 and 16 concurrent streams, and per handshake (a python-h2
# client: a new mTLS + HTTP/2 connection and one CONNECT). Raw: AES-256-GCM seal or open of
# each carried byte once (the gateway opens what the client sends and seals what it returns),
# and the P-256 work of one handshake end (ECDHE key pair + shared secret + one signature +
# three verifications: the peer's leaf, intermediate and CertificateVerify; half of
# hbone_bench's both-ends figure).
# Needs root (network namespaces). Usage, after a build:
#   tools/bench/hbone/gateway.sh [MIB_PER_RUN] [HANDSHAKES]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${MG_BUILD:-$SRC/build}
export MG_BIN=${MG_BIN:-$BUILD/apps/meshgate}
HB=${MG_HBONE:-$BUILD/tools/hbone/meshgate-hbone}
BENCH=${MG_HBONE_BENCH:-$BUILD/bench/hbone_bench}
MIB=${1:-256}
HS=${2:-100}
source "$SRC/tests/integration/lib.sh"
source "$SRC/tests/integration/hbone/common.sh"
require_root
for f in "$MG_BIN" "$HB" "$BENCH"; do [[ -x $f ]] || fail "$f missing: build first"; done
PY=/usr/bin/python3
H=$SRC/tests/integration/hbone

hbone_topology b
# nghttpx-style clients do not half-close: the echo ends idle connections after 2 s.
ip netns exec "$BE" $PY "$H/backend.py" echo 7000 --bind 0.0.0.0 --idle 2 2>"$TMP/echo.log" & PIDS+=($!)
# The endpoint must be in the snapshot: a workload of a service.
echo_mesh >"$TMP/mesh.toml"
hbone_gateway_start
ip netns exec "$CLI" "$HB" client --listen 127.0.0.1:7100 --peer 192.0.2.1:15008 \
  --target 198.51.100.11:7000 --expect spiffe://cluster.local/ns/demo/sa/server \
  --cert "$P/demo.client.pem" --key "$P/demo.client-key.pem" --bundle "$P/root.pem" \
  2>"$TMP/originator.log" & PIDS+=($!)
wait_for 10 grep -q 'listening on' "$TMP/originator.log" || fail "originator down"

stats() { curl -s "http://$MG_ADMIN/stats"; }
# measure COMMAND...: "<busy cycles> <wall ms> <tsc hz>" of the worker while COMMAND runs.
measure() {
  local a b t0 t1
  a=$(stats); t0=$(date +%s%N)
  "$@" >/dev/null || fail "run failed: $*"
  t1=$(date +%s%N); b=$(stats)
  $PY - "$a" "$b" $(( (t1 - t0) / 1000000 )) <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(b["workers"][0]["busy_cycles"] - a["workers"][0]["busy_cycles"], sys.argv[3], b["tsc_hz"])
PY
}
bytes=$((MIB * 1048576))
bulk1() { ip netns exec "$CLI" timeout 600 $PY "$H/backend.py" roundtrip 7100 1 "$bytes"; }
bulk16() { ip netns exec "$CLI" timeout 600 $PY "$H/backend.py" roundtrip 7100 16 $((bytes / 16)); }
shakes() {
  local i
  for i in $(seq "$HS"); do
    ip netns exec "$CLI" timeout 10 $PY "$H/h2client.py" 192.0.2.1 15008 --cert "$P/demo.client.pem" \
      --key "$P/demo.client-key.pem" --bundle "$P/root.pem" --authority 198.51.100.11:7000 \
      status >/dev/null || return 1
  done
}
m1=$(measure bulk1)
m16=$(measure bulk16)
mh=$(measure shakes)
# The raw crypto, on this machine in this run (Google Benchmark JSON).
"$BENCH" --benchmark_filter='raw_' --benchmark_format=json --benchmark_min_time=0.5 \
  >"$TMP/raw.json" 2>/dev/null || fail "hbone_bench failed"
$PY - "$MIB" "$HS" "$m1" "$m16" "$mh" "$TMP/raw.json" <<'PY'
import json, sys
mib, hs = float(sys.argv[1]), float(sys.argv[2])
m1, m16, mh = ([float(x) for x in a.split()] for a in sys.argv[3:6])
raw = {b["name"]: b for b in json.load(open(sys.argv[6]))["benchmarks"]}
def ns(b):
    u = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
    return b["real_time"] * u
aes = raw["raw_aes256gcm_seal_open"]
# seal + open of every byte: one of the two per carried byte at the gateway.
raw_s_per_gib = 1 / aes["bytes_per_second"] * 2**30 / 2
# Both ends with the verifications (leaf + intermediate + CertificateVerify, per end): one end.
raw_hs_ms = ns(raw["raw_p256_handshake_crypto/1"]) / 1e6 / 2
gib = 2 * mib / 1024  # both directions carried
print(f"HBONE through a gateway worker ({mib:.0f} MiB each way per bulk run, {hs:.0f} handshakes)")
print(f"{'run':<26}{'Gbit/s':>9}{'worker s/GiB':>14}{'raw s/GiB':>11}{'ratio':>8}")
for label, m in (("bulk, 1 stream", m1), ("bulk, 16 streams", m16)):
    cyc, ms, hz = m
    s = cyc / hz / gib
    print(f"{label:<26}{gib * 8 * 2**30 / 1e9 / (ms / 1e3):9.2f}{s:14.3f}{raw_s_per_gib:11.3f}{s / raw_s_per_gib:8.1f}")
cyc, ms, hz = mh
per = cyc / hz / hs * 1e3
print(f"{'handshake (ms)':<26}{hs / (ms / 1e3):9.1f}/s{per:12.3f}{raw_hs_ms:11.3f}{per / raw_hs_ms:8.1f}")
PY
