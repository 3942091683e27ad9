# Shared helpers for the integration tests (bash). Each test sources this file, creates its own
# namespaces / veths with names unique to its PID, and removes them on exit (trap).
set -euo pipefail

MG_BIN=${MG_BIN:?MG_BIN must point at the meshgate binary}
TMP=$(mktemp -d /tmp/mg-e2e.XXXXXX)
ID=$(( $$ % 100000 ))
# Admin API address of this run: a loopback address of its own (all of 127.0.0.0/8 is local),
# so parallel tests never share one. Every live test config sets [admin] listen to it.
MG_ADMIN="127.$(( 100 + ID / 65536 )).$(( (ID / 256) % 256 )).$(( ID % 256 )):15000"
NETNS=()
LINKS=()
PIDS=()

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "--- $*"; }

cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for l in "${LINKS[@]}"; do ip link del "$l" 2>/dev/null || true; done
  for n in "${NETNS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  if [[ $rc -ne 0 && -d $TMP ]]; then
    for f in "$TMP"/*.log; do [[ -f $f ]] && { echo "=== $f"; tail -n 40 "$f"; }; done
  fi
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT

require_root() { [[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces, raw sockets)"; }

# offloads_off DEV [NETNS]: kernel peers must hand us complete checksums and no GSO frames.
offloads_off() {
  local dev=$1 ns=${2:-}
  local pre=()
  [[ -n $ns ]] && pre=(ip netns exec "$ns")
  "${pre[@]}" ethtool -K "$dev" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
}

# add_host NAME GWSIDE ADDR4/LEN GW4 [ADDR6/LEN GW6]: a namespace NAME with veth "eth0", whose
# peer GWSIDE stays in the root namespace for the gateway's net_af_packet port.
add_host() {
  local ns=$1 gwside=$2 a4=$3 gw4=$4 a6=${5:-} gw6=${6:-}
  ip netns add "$ns"
  NETNS+=("$ns")
  ip link add "$gwside" type veth peer name eth0 netns "$ns"
  LINKS+=("$gwside")
  sysctl -qw "net.ipv6.conf.$gwside.disable_ipv6=1"
  ip link set "$gwside" up
  offloads_off "$gwside"
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set eth0 up
  offloads_off eth0 "$ns"
  ip netns exec "$ns" ip addr add "$a4" dev eth0
  ip netns exec "$ns" ip route add default via "$gw4"
  if [[ -n $a6 ]]; then
    ip netns exec "$ns" ip -6 addr add "$a6" dev eth0 nodad
    ip netns exec "$ns" ip -6 route add default via "$gw6"
  fi
}

# add_switch SW GWSIDE: a namespace SW holding bridge br0, with the gateway's port GWSIDE (root
# namespace, for net_af_packet) plugged into it: a segment for add_bridged_host's hosts.
add_switch() {
  local sw=$1 gwside=$2
  ip netns add "$sw"
  NETNS+=("$sw")
  ip netns exec "$sw" ip link add br0 type bridge
  ip netns exec "$sw" ip link set br0 up
  ip link add "$gwside" type veth peer name gw netns "$sw"
  LINKS+=("$gwside")
  sysctl -qw "net.ipv6.conf.$gwside.disable_ipv6=1"
  ip link set "$gwside" up
  offloads_off "$gwside"
  ip netns exec "$sw" ip link set gw master br0 up
  offloads_off gw "$sw"
}

# add_bridged_host NAME SW PORT ADDR4/LEN GW4: a namespace NAME whose "eth0" is plugged into
# add_switch's bridge in SW as PORT.
add_bridged_host() {
  local ns=$1 sw=$2 port=$3 a4=$4 gw4=$5
  ip netns add "$ns"
  NETNS+=("$ns")
  ip link add eth0 netns "$ns" type veth peer name "$port" netns "$sw"
  ip netns exec "$sw" ip link set "$port" master br0 up
  offloads_off "$port" "$sw"
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set eth0 up
  offloads_off eth0 "$ns"
  ip netns exec "$ns" ip addr add "$a4" dev eth0
  ip netns exec "$ns" ip route add default via "$gw4"
}

# add_backend_segment GWSIDE SWITCH PREFIX COUNT: an L2 segment (bridge br0 in namespace
# SWITCH) holding the gateway's port GWSIDE (left in the root namespace, IPv6 off) and COUNT
# backend namespaces PREFIX<i>_$ID (i = 1..COUNT) with 198.51.100.1<i>/24 and
# 2001:db8:1::1<i>/64 on eth0, routed through the gateway's 198.51.100.1 / 2001:db8:1::1.
add_backend_segment() {
  local gwside=$1 sw=$2 prefix=$3 count=$4 i b
  add_switch "$sw" "$gwside"
  for ((i = 1; i <= count; ++i)); do
    b=${prefix}${i}_$ID
    ip netns add "$b"; NETNS+=("$b")
    ip link add eth0 netns "$b" type veth peer name b$i netns "$sw"
    ip netns exec "$sw" ip link set b$i master br0 up
    offloads_off b$i "$sw"
    ip netns exec "$b" ip link set lo up
    ip netns exec "$b" ip link set eth0 up
    offloads_off eth0 "$b"
    ip netns exec "$b" ip addr add 198.51.100.1$i/24 dev eth0
    ip netns exec "$b" ip -6 addr add 2001:db8:1::1$i/64 dev eth0 nodad
    ip netns exec "$b" ip route add default via 198.51.100.1
    ip netns exec "$b" ip -6 route add default via 2001:db8:1::1
  done
}

# wait_for SECONDS CMD...: polls CMD every 0.1 s.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.1
  done
}

# json FILE EXPR: reads a value from a JSON file (python3, no extra packages).
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }

# start_gateway CONFIG [ARGS...]: runs meshgate in the background with --stats-json.
start_gateway() {
  local cfg=$1; shift
  # Parallel tests must never share the default admin address (127.0.0.1:15000): a config
  # without its own [admin] section gets this run's address.
  grep -q '^\[admin\]' "$cfg" || printf '\n[admin]\nlisten = "%s"\n' "$MG_ADMIN" >>"$cfg"
  "$MG_BIN" --config "$cfg" --stats-json "$TMP/stats.json" "$@" >"$TMP/gateway.log" 2>&1 &
  GW_PID=$!
  PIDS+=("$GW_PID")
  # A start took over 20 s on a loaded 2-core machine (other gateways busy-polling).
  wait_for "${MG_START_WAIT_S:-60}" grep -q "event=workers_started" "$TMP/gateway.log" || fail "gateway did not start"
}

# stop_gateway SIGNAL: sends the signal, expects exit 0 and the stats file.
stop_gateway() {
  kill -"${1:-TERM}" "$GW_PID"
  local rc=0
  wait "$GW_PID" || rc=$?
  [[ $rc -eq 0 ]] || fail "gateway exited $rc after SIG${1:-TERM}"
  [[ -s $TMP/stats.json ]] || fail "no --stats-json written"
}
