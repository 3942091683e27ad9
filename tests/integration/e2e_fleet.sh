#!/usr/bin/env bash
# Two gateways behind one router, as a bare-metal ingress fleet runs: the router namespace runs
# BIRD 2 with ECMP into its kernel (fib_multipath_hash_policy = 1: the 5-tuple picks the
# gateway); each gateway runs meshgate (one worker) in a namespace of its own, with a host
# interface on its port and [bgp] peering with the router through it (IPv4 sessions signed
# with TCP MD5, IPv6 sessions plain). Three backends on the gateways' segment decapsulate IPIP
# in userspace (fleet/dsr_decap.py) and answer the client directly (dsr-ipip). Checks, in order:
#   - every session comes up and the router installs each VIP (IPv4, IPv6) with two next hops;
#     requests to the IPv6 VIP succeed;
#   - 200 short connections all succeed, each gateway carrying more than 20% of them;
#   - a VIP whose backends all go (gateway 1's mesh file) is withdrawn at the router, and
#     announced again when one returns;
#   - a BGP daemon killed alone is restarted and the gateway announced again;
#   - failover: a 50 MB download through gateway X survives kill -9 of X (the router's hold
#     timer moves the flow, the other gateway picks it up mid-stream, same backend);
#   - rolling restart: SIGTERM, wait, start again, gateway by gateway, while a client makes
#     requests at >= 10/s: none fails.
# Figures printed: time from SIGTERM to the router's withdrawal, the failover gap, requests
# failed in the rolling restart.
source "$(dirname "$0")/lib.sh"
require_root
FLEET_DIR=$(dirname "$0")/fleet
command -v bird >/dev/null || fail "bird (Debian bird2) is not installed: tools/setup.sh installs it"

RT=fr$ID CLI=fc$ID
ns_add() { ip netns add "$1"; NETNS+=("$1"); ip netns exec "$1" ip link set lo up; }
# plug NS IF ADDR BRPORT: a veth from NS (named IF) into the router's bridge (as BRPORT).
plug() {
  local ns=$1 ifn=$2 addr=$3 brport=$4
  ip link add "$ifn" netns "$ns" type veth peer name "$brport" netns "$RT"
  ip netns exec "$RT" ip link set "$brport" master br0 up
  offloads_off "$brport" "$RT"
  ip netns exec "$ns" ip link set "$ifn" up
  offloads_off "$ifn" "$ns"
  [[ -n $addr ]] && ip netns exec "$ns" ip addr add "$addr" dev "$ifn"
  return 0
}

ns_add "$RT"
ip netns exec "$RT" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1 \
  net.ipv6.conf.all.forwarding=1 net.ipv6.fib_multipath_hash_policy=1
ip netns exec "$RT" ip link add br0 type bridge
ip netns exec "$RT" ip link set br0 up
ip netns exec "$RT" ip addr add 192.0.2.254/24 dev br0
ip netns exec "$RT" ip -6 addr add 2001:db8:2::fe/64 dev br0 nodad
# The client's segment.
ns_add "$CLI"
ip link add eth0 netns "$CLI" type veth peer name cli netns "$RT"
ip netns exec "$RT" ip link set cli up
ip netns exec "$RT" ip addr add 198.51.100.254/24 dev cli
ip netns exec "$CLI" ip link set eth0 up
ip netns exec "$CLI" ip addr add 198.51.100.2/24 dev eth0
ip netns exec "$CLI" ip route add default via 198.51.100.254
ip netns exec "$RT" ip -6 addr add 2001:db8:3::fe/64 dev cli nodad
ip netns exec "$CLI" ip -6 addr add 2001:db8:3::2/64 dev eth0 nodad
ip netns exec "$CLI" ip -6 route add default via 2001:db8:3::fe
offloads_off cli "$RT"; offloads_off eth0 "$CLI"

# Backends: the VIP on lo, IPIP decapsulated into a TUN, an HTTP server on port 80.
head -c $((50 * 1024 * 1024)) /dev/urandom >"$TMP/big.bin"
BIG_SHA=$(sha256sum "$TMP/big.bin" | cut -d' ' -f1)
for i in 1 2 3; do
  B=fb${i}_$ID
  ns_add "$B"
  plug "$B" eth0 "192.0.2.1$i/24" "be$i"
  ip netns exec "$B" ip route add default via 192.0.2.254
  ip netns exec "$B" ip addr add 203.0.113.10/32 dev lo
  ip netns exec "$B" ip -6 addr add "2001:db8:2::1$i/64" dev eth0 nodad
  ip netns exec "$B" ip -6 route add default via 2001:db8:2::fe
  ip netns exec "$B" ip -6 addr add 2001:db8:100::10/128 dev lo
  mkdir -p "$TMP/www$i"
  echo "backend $i" >"$TMP/www$i/id.txt"
  ln -s "$TMP/big.bin" "$TMP/www$i/big.bin"
  ip netns exec "$B" python3 "$FLEET_DIR/dsr_decap.py" --tun dsr0 >"$TMP/decap$i.log" 2>&1 &
  PIDS+=($!)
  ip netns exec "$B" python3 -m http.server 80 --bind :: --directory "$TMP/www$i" \
    >"$TMP/http$i.log" 2>&1 &
  PIDS+=($!)
done
for i in 1 2 3; do
  wait_for 10 grep -q ready "$TMP/decap$i.log" || fail "backend $i decapsulator did not start"
done

# The router: BGP with both gateways, their routes merged into one multipath kernel route.
cat >"$TMP/router.conf" <<CONF
router id 192.0.2.254;
protocol device { }
protocol kernel { ipv4 { import none; export all; }; merge paths on; }
protocol kernel { ipv6 { import none; export all; }; merge paths on; }
template bgp gateways {
  local 192.0.2.254 as 65000;
  password "fleet-md5";
  direct;
  hold time 3;
  keepalive time 1;
  connect retry time 1;
  error wait time 1, 5;
  ipv4 { import all; export none; };
}
template bgp gateways6 {
  local 2001:db8:2::fe as 65000;
  direct;
  hold time 3;
  keepalive time 1;
  connect retry time 1;
  error wait time 1, 5;
  ipv6 { import all; export none; };
}
protocol bgp gw1 from gateways { neighbor 192.0.2.1 as 65001; }
protocol bgp gw2 from gateways { neighbor 192.0.2.2 as 65001; }
protocol bgp gw1v6 from gateways6 { neighbor 2001:db8:2::1 as 65001; }
protocol bgp gw2v6 from gateways6 { neighbor 2001:db8:2::2 as 65001; }
CONF
ip netns exec "$RT" bird -f -c "$TMP/router.conf" -s "$TMP/router.ctl" >"$TMP/router-bird.log" 2>&1 &
PIDS+=($!)

# Gateway N: namespace, port, config (the mesh file holds a second VIP, for the withdrawal).
gw_ns() { echo "fg${1}_$ID"; }
gw_admin() { echo "127.0.0.1:15000"; }
mesh_file() {  # mesh_file WORKLOADS(0|1)
  cat <<TOML
[[mesh_service]]
namespace = "demo"
hostname = "api.demo.svc.cluster.local"
vips = ["203.0.113.30"]
ports = [{ service_port = 80, target_port = 8080 }]
TOML
  if [[ $1 == 1 ]]; then
    cat <<TOML
[[workload]]
uid = "cluster1//v1/Pod/demo/api"
namespace = "demo"
addresses = ["192.0.2.13"]
services = { "demo/api.demo.svc.cluster.local" = [] }
TOML
  fi
}
for n in 1 2; do
  G=$(gw_ns $n)
  ns_add "$G"
  plug "$G" "p$n" "" "gw$n"
  ip netns exec "$G" sysctl -qw "net.ipv6.conf.p$n.disable_ipv6=1"
  mesh_file 1 >"$TMP/mesh$n.toml"
  cat >"$TMP/gw$n.toml" <<TOML
[gateway]
workers = 1
drain_timeout_ms = 10000
[[port]]
name = "lan"
device = "net_af_packet_f${n}_$ID,iface=p$n"
addresses = ["192.0.2.$n/24", "2001:db8:2::$n/64"]
host_interface = "mgh"
[[route]]
prefix = "0.0.0.0/0"
via = "192.0.2.254"
[[route]]
prefix = "::/0"
via = "2001:db8:2::fe"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "dsr-ipip"
  [[service.backend]]
  address = "192.0.2.11"
  port = 80
  [[service.backend]]
  address = "192.0.2.12"
  port = 80
  [[service.backend]]
  address = "192.0.2.13"
  port = 80
[[service]]
name = "web6"
vip = "2001:db8:100::10"
port = 80
mode = "dsr-ipip"
  [[service.backend]]
  address = "2001:db8:2::11"
  port = 80
  [[service.backend]]
  address = "2001:db8:2::12"
  port = 80
  [[service.backend]]
  address = "2001:db8:2::13"
  port = 80
[mesh]
source = "file"
path = "$TMP/mesh$n.toml"
[bgp]
local_as = 65001
hold_time_s = 3
withdraw_wait_ms = 1000
runtime_dir = "$TMP/run$n"
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
  password = "fleet-md5"
  [[bgp.peer]]
  address = "2001:db8:2::fe"
  remote_as = 65000
[admin]
listen = "$(gw_admin)"
TOML
done
ip netns exec "$(gw_ns 1)" "$MG_BIN" --config "$TMP/gw1.toml" --check | grep -qx "config ok" \
  || fail "--check gw1"

declare -A GWPID
start_gw() {  # start_gw N: starts gateway N, waits for its workers
  local n=$1 log="$TMP/gw$n.$(date +%s%N).log"
  ip netns exec "$(gw_ns "$n")" "$MG_BIN" --config "$TMP/gw$n.toml" \
    >"$log" 2>&1 &
  GWPID[$n]=$!
  PIDS+=("${GWPID[$n]}")
  GWLOG[$n]=$log
  wait_for 60 grep -q "event=workers_started" "$log" || fail "gateway $n did not start"
}
declare -A GWLOG
gw_json() { ip netns exec "$(gw_ns "$1")" curl -sS --max-time 5 "http://$(gw_admin)$2"; }
birdc_rt() { ip netns exec "$RT" birdc -s "$TMP/router.ctl" "$@"; }
# The router's next hops for a VIP, one per line.
next_hops() { ip netns exec "$RT" ip -4 route show "$1" | grep -o 'via [0-9.]*' | awk '{print $2}' | sort; }
hops_are() { [[ "$(next_hops "$1" | tr '\n' ' ')" == "$2" ]]; }

start_gw 1
start_gw 2

note "both sessions come up; the router installs the VIP with two next hops"
wait_for 30 hops_are 203.0.113.10 "192.0.2.1 192.0.2.2 " \
  || { birdc_rt show protocols all; ip netns exec "$RT" ip route; fail "no ECMP route to the VIP"; }
# /bgp reads the daemon's sessions once a second.
session_up() {
  [[ $(gw_json "$1" /bgp | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(s["up"] for s in d["sessions"]))') == 2 ]]
}
for n in 1 2; do
  wait_for 5 session_up "$n" || { gw_json "$n" /bgp; fail "gateway $n: /bgp shows no session up"; }
done
ip netns exec "$(gw_ns 1)" env MESHGATE_ADMIN="$(gw_admin)" "$MG_CTL" bgp | tee "$TMP/ctl-bgp.txt"
# BIRD's own lines come as the gateway's events; its first reload, once it answers, is no failure.
for n in 1 2; do
  grep -q 'event=bgp_daemon_output msg="Started"' "${GWLOG[$n]}" \
    || fail "gateway $n: BIRD's start is not logged as event=bgp_daemon_output"
  ! grep -q 'bgp_reconfigure_failed' "${GWLOG[$n]}" || fail "gateway $n: bgp_reconfigure_failed at start"
  ! grep -q '<INFO>' "${GWLOG[$n]}" || fail "gateway $n: BIRD's raw stderr in the log"
done
grep -q "Established" "$TMP/ctl-bgp.txt" || fail "meshgate-ctl bgp: no Established session"
metrics=$(gw_json 1 /metrics)
grep -qx 'meshgate_bgp_session_up{peer="192.0.2.254"} 1' <<<"$metrics" || fail "session_up metric"
grep -qx 'meshgate_bgp_announced{vip="203.0.113.10"} 1' <<<"$metrics" || fail "announced metric"

note "IPv6: the VIP over the IPv6 sessions, two next hops, requests through it"
hops6() { ip netns exec "$RT" ip -6 route show 2001:db8:100::10 | grep -c "nexthop via"; }
wait_for 20 test "$(hops6)" = 2 || { ip netns exec "$RT" ip -6 route; fail "no IPv6 ECMP route"; }
for i in $(seq 20); do
  got=$(ip netns exec "$CLI" curl -sS --max-time 5 "http://[2001:db8:100::10]/id.txt") || fail "IPv6 request $i"
  [[ $got == backend* ]] || fail "IPv6 body: $got"
done

note "200 short connections, spread over both gateways"
flows_of() { gw_json "$1" /stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["flows_created"])'; }
f1=$(flows_of 1) f2=$(flows_of 2)
ok=0
for i in $(seq 200); do
  if ip netns exec "$CLI" curl -sS --max-time 5 -o /dev/null http://203.0.113.10/id.txt; then ok=$((ok + 1)); fi
done
d1=$(( $(flows_of 1) - f1 )) d2=$(( $(flows_of 2) - f2 ))
echo "connections ok: $ok/200; gateway 1: $d1 flows, gateway 2: $d2 flows"
(( ok == 200 )) || fail "$((200 - ok)) of 200 connections failed"
(( d1 > 40 && d2 > 40 )) || fail "not spread: $d1 / $d2"

note "a VIP whose backends all go is withdrawn by that gateway, and announced again"
wait_for 15 hops_are 203.0.113.30 "192.0.2.1 192.0.2.2 " || fail "mesh VIP not announced by both"
mesh_file 0 >"$TMP/mesh1.toml.new" && mv "$TMP/mesh1.toml.new" "$TMP/mesh1.toml"
t0=$(date +%s%N)
wait_for 3 hops_are 203.0.113.30 "192.0.2.2 " || fail "gateway 1 did not withdraw 203.0.113.30"
echo "withdrawn at the router $(( ($(date +%s%N) - t0) / 1000000 )) ms after the backends went"
hops_are 203.0.113.10 "192.0.2.1 192.0.2.2 " || fail "the other VIP moved"
mesh_file 1 >"$TMP/mesh1.toml.new" && mv "$TMP/mesh1.toml.new" "$TMP/mesh1.toml"
wait_for 5 hops_are 203.0.113.30 "192.0.2.1 192.0.2.2 " || fail "gateway 1 did not announce 203.0.113.30 again"

note "a BGP daemon that dies alone is restarted"
restarted() {
  gw_json 1 /bgp | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["daemon"]["restarts"] >= 1 and all(s["up"] for s in d["sessions"]) else 1)'
}
pkill -KILL -f "bird -f -c $TMP/run1/" || fail "gateway 1's BGP daemon is not running"
wait_for 20 restarted || { gw_json 1 /bgp; fail "the daemon was not restarted"; }
wait_for 10 hops_are 203.0.113.10 "192.0.2.1 192.0.2.2 " || fail "gateway 1 not announced after the restart"

note "failover: kill -9 of the gateway carrying a 50 MB dsr-ipip download"
# Slow enough (10 MB/s) to be in flight when the gateway dies; progress sampled every 0.1 s.
ip netns exec "$CLI" curl -sS --max-time 120 --limit-rate 10M -o "$TMP/big.out" \
  http://203.0.113.10/big.bin 2>"$TMP/curl-big.err" &
CURL_PID=$!
PIDS+=("$CURL_PID")
python3 - "$TMP/big.out" "$CURL_PID" >"$TMP/gap.txt" <<'PY' &
import os, sys, time
path, pid = sys.argv[1], int(sys.argv[2])
last_size, last_change, gap = -1, time.monotonic(), 0.0
deadline = time.monotonic() + 150
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    size = os.path.getsize(path) if os.path.exists(path) else 0
    now = time.monotonic()
    if size != last_size:
        if last_size > 0:
            gap = max(gap, now - last_change)
        last_size, last_change = size, now
    time.sleep(0.1)
print(f"{gap:.1f}")
PY
GAP_PID=$!
PIDS+=("$GAP_PID")
big_started() { [[ -f $TMP/big.out ]] && (( $(stat -c %s "$TMP/big.out") > 5 * 1024 * 1024 )); }
wait_for 30 big_started || fail "the download did not start"
active_of() { gw_json "$1" /stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["flows_active"])'; }
victim=""
for n in 1 2; do (( $(active_of "$n") > 0 )) && victim=$n; done
[[ -n $victim ]] || fail "no gateway carries the download"
other=$((3 - victim))
note "gateway $victim carries it: kill -9"
t0=$(date +%s%N)
kill -9 "${GWPID[$victim]}"
wait "${GWPID[$victim]}" 2>/dev/null || true
# Its EAL runtime directory is left behind (ip netns exec execs meshgate: same pid).
rm -rf "/var/run/dpdk/meshgate-${GWPID[$victim]}-"*
wait_for 15 hops_are 203.0.113.10 "192.0.2.$other " || fail "the router kept the dead gateway"
echo "the router dropped the dead gateway $(( ($(date +%s%N) - t0) / 1000000 )) ms after kill -9 (hold time 3 s)"
rc=0; wait "$CURL_PID" || rc=$?
wait "$GAP_PID" || true
[[ $rc == 0 ]] || { cat "$TMP/curl-big.err"; fail "download failed (curl exit $rc)"; }
got=$(sha256sum "$TMP/big.out" | cut -d' ' -f1)
[[ $got == "$BIG_SHA" ]] || fail "download corrupted: sha256 $got"
echo "failover: download complete, sha256 ok, longest stall $(cat "$TMP/gap.txt") s"
picked=$(gw_json "$other" /stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["flows_created"])')
(( picked > 0 )) || fail "gateway $other picked nothing up"
# The killed gateway's daemon died with it (PR_SET_PDEATHSIG) and its twin is gone.
ip netns exec "$(gw_ns "$victim")" ip link show mgh >/dev/null 2>&1 && fail "the dead gateway's twin is left"
pgrep -f "bird -f -c $TMP/run$victim/" >/dev/null && fail "the dead gateway's BGP daemon is left"
start_gw "$victim"
wait_for 30 hops_are 203.0.113.10 "192.0.2.1 192.0.2.2 " || fail "gateway $victim did not come back"

note "rolling restart with a client making requests at >= 10/s"
cat >"$TMP/loop.py" <<'PY'
import http.client, os, sys, time
stop, out = sys.argv[1], sys.argv[2]
ok = failed = 0
errors = []
start = time.monotonic()
while not os.path.exists(stop) and time.monotonic() - start < 300:
    t = time.monotonic()
    try:
        c = http.client.HTTPConnection("203.0.113.10", 80, timeout=5)
        c.request("GET", "/id.txt")
        body = c.getresponse().read()
        c.close()
        if body.startswith(b"backend "):
            ok += 1
        else:
            failed += 1
            errors.append(f"{t - start:.2f}s body {body[:40]!r}")
    except Exception as e:
        failed += 1
        errors.append(f"{t - start:.2f}s {e!r}")
    time.sleep(max(0.0, 0.05 - (time.monotonic() - t)))
elapsed = time.monotonic() - start
with open(out, "w") as f:
    f.write(f"{ok} {failed} {elapsed:.1f}\n" + "\n".join(errors[:20]) + "\n")
PY
ip netns exec "$CLI" python3 "$TMP/loop.py" "$TMP/loop.stop" "$TMP/loop.out" &
LOOP_PID=$!
PIDS+=("$LOOP_PID")
sleep 2
for n in 1 2; do
  other=$((3 - n))
  t0=$(date +%s%N)
  kill -TERM "${GWPID[$n]}"
  wait_for 10 hops_are 203.0.113.10 "192.0.2.$other " || fail "gateway $n was not withdrawn"
  echo "gateway $n: withdrawn at the router $(( ($(date +%s%N) - t0) / 1000000 )) ms after SIGTERM"
  rc=0; wait "${GWPID[$n]}" || rc=$?
  [[ $rc == 0 ]] || fail "gateway $n exited $rc after SIGTERM"
  grep -q "event=drain_withdraw" "${GWLOG[$n]}" || fail "gateway $n did not withdraw first"
  start_gw "$n"
  wait_for 30 hops_are 203.0.113.10 "192.0.2.1 192.0.2.2 " || fail "gateway $n did not come back"
  sleep 2
done
touch "$TMP/loop.stop"
wait "$LOOP_PID" || fail "request loop"
read -r ok failed elapsed <"$TMP/loop.out"
echo "rolling restart: $ok requests ok, $failed failed, in $elapsed s"
(( failed == 0 )) || { cat "$TMP/loop.out"; fail "$failed requests failed during the rolling restart"; }
python3 -c "import sys; sys.exit(0 if $ok / $elapsed >= 10 else 1)" || fail "fewer than 10 requests/s"

echo "PASS"
