#!/usr/bin/env bash
# A port's kernel twin (host_interface): meshgate runs in a namespace of its own with one
# net_af_packet port toward a router namespace, and creates TAP "mgh<ID>" there with the port's
# MAC, addresses and MTU. The kernel behind it pings the router (its ARP / NDP go out by the
# port, the answers come back through the twin) and serves TCP on the port's address, IPv4 and
# IPv6, while the gateway itself still answers pings. The twin is gone after exit.
source "$(dirname "$0")/lib.sh"
require_root

RT=mgr$ID GW=mgg$ID HOSTIF=mgh$ID
ip netns add "$RT"; NETNS+=("$RT")
ip netns add "$GW"; NETNS+=("$GW")
ip link add "p$ID" netns "$GW" type veth peer name eth0 netns "$RT"
for ns in "$RT" "$GW"; do ip netns exec "$ns" ip link set lo up; done
ip netns exec "$GW" sysctl -qw "net.ipv6.conf.p$ID.disable_ipv6=1"
ip netns exec "$GW" ip link set "p$ID" up
ip netns exec "$RT" ip link set eth0 up
offloads_off "p$ID" "$GW"
offloads_off eth0 "$RT"
ip netns exec "$RT" ip addr add 192.0.2.254/24 dev eth0
ip netns exec "$RT" ip -6 addr add 2001:db8:2::fe/64 dev eth0 nodad

cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "uplink"
device = "net_af_packet_u$ID,iface=p$ID"
addresses = ["192.0.2.1/24", "2001:db8:2::1/64"]
mtu = 1400
host_interface = "$HOSTIF"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "192.0.2.200"
  port = 8080
[admin]
listen = "$MG_ADMIN"
TOML
ip netns exec "$GW" "$MG_BIN" --config "$TMP/gw.toml" --check | grep -qx "config ok" || fail "--check"
ip netns exec "$GW" "$MG_BIN" --config "$TMP/gw.toml" --stats-json "$TMP/stats.json" \
  >"$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
wait_for 60 grep -q "event=workers_started" "$TMP/gateway.log" || fail "gateway did not start"

note "the twin has the port's MAC, addresses and MTU"
port_mac=$(ip netns exec "$GW" cat "/sys/class/net/p$ID/address")
twin_mac=$(ip netns exec "$GW" cat "/sys/class/net/$HOSTIF/address")
[[ $port_mac == "$twin_mac" ]] || fail "twin MAC $twin_mac, port MAC $port_mac"
[[ $(ip netns exec "$GW" cat "/sys/class/net/$HOSTIF/mtu") == 1400 ]] || fail "twin MTU"
ip netns exec "$GW" ip -br addr show dev "$HOSTIF" | grep -q "192.0.2.1/24" || fail "no IPv4 address"
ip netns exec "$GW" ip -br addr show dev "$HOSTIF" | grep -q "2001:db8:2::1/64" || fail "no IPv6 address"

note "the kernel behind the twin pings the router (ARP and NDP through the port)"
ip netns exec "$GW" ping -c 2 -W 2 192.0.2.254 >/dev/null || fail "kernel ping 192.0.2.254"
ip netns exec "$GW" ping -6 -c 2 -W 2 2001:db8:2::fe >/dev/null || fail "kernel ping6 2001:db8:2::fe"

note "TCP from the router to a kernel listener on the port's addresses"
cat >"$TMP/echo.py" <<'PY'
import socket, sys, threading
def serve(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 2222)); s.listen(8)
    while True:
        c, _ = s.accept()
        with c:
            data = b""
            while not data.endswith(b"\n"):
                chunk = c.recv(65536)
                if not chunk: break
                data += chunk
            c.sendall(b"kernel twin: " + data)
threading.Thread(target=serve, args=(socket.AF_INET6, "2001:db8:2::1"), daemon=True).start()
serve(socket.AF_INET, "192.0.2.1")
PY
ip netns exec "$GW" python3 "$TMP/echo.py" >"$TMP/echo.log" 2>&1 &
PIDS+=($!)
cat >"$TMP/client.py" <<'PY'
import socket, sys
host = sys.argv[1]
payload = b"x" * 20000 + b"\n"  # more than one MTU each way
c = socket.create_connection((host, 2222), timeout=5)
c.sendall(payload)
got = b""
while len(got) < len(payload) + 13:
    chunk = c.recv(65536)
    if not chunk: break
    got += chunk
sys.exit(0 if got == b"kernel twin: " + payload else 1)
PY
wait_for 10 ip netns exec "$RT" python3 "$TMP/client.py" 192.0.2.1 || fail "TCP to 192.0.2.1:2222"
ip netns exec "$RT" python3 "$TMP/client.py" 2001:db8:2::1 || fail "TCP to [2001:db8:2::1]:2222"

note "the gateway still answers pings to its address itself"
ip netns exec "$RT" ping -c 2 -W 2 192.0.2.1 >/dev/null || fail "ping 192.0.2.1"

note "counted both ways"
metrics=$(ip netns exec "$GW" curl -sS --max-time 5 "http://$MG_ADMIN/metrics")
metric() { awk -v m="$1" '$1 == m {print $2}' <<<"$metrics"; }
to_kernel=$(metric 'meshgate_host_packets_total{port="uplink",direction="to_kernel"}')
from_kernel=$(metric 'meshgate_host_packets_total{port="uplink",direction="from_kernel"}')
(( ${to_kernel:-0} >= 20 )) || fail "to_kernel=$to_kernel"
(( ${from_kernel:-0} >= 20 )) || fail "from_kernel=$from_kernel"
[[ $(metric 'meshgate_host_drops_total{port="uplink",reason="tap_full"}') == 0 ]] || fail "tap_full drops"

kill -TERM "$GW_PID"
rc=0; wait "$GW_PID" || rc=$?
[[ $rc -eq 0 ]] || fail "gateway exited $rc"
S=$TMP/stats.json
(( $(json "$S" "d['packets_to_host']") >= to_kernel )) || fail "packets_to_host"
(( $(json "$S" "d['packets_from_host']") >= from_kernel )) || fail "packets_from_host"
(( $(json "$S" "d['echo_replies']") >= 2 )) || fail "echo replies"
[[ $(json "$S" "d['drops']['host_queue_full']") == 0 ]] || fail "host_queue_full drops"
[[ $(json "$S" "d['packets_in'] + d['packets_generated'] + d['packets_from_host'] == d['packets_out'] + d['packets_consumed'] + d['drops_total'] + d['packets_pending'] + d['packets_to_host']") == True ]] \
  || fail "counters do not add up"
if ip netns exec "$GW" ip link show "$HOSTIF" >/dev/null 2>&1; then fail "twin left behind"; fi
echo "PASS"
