#!/usr/bin/env bash
# Kernel offloads on a net_af_packet port's link: with tx-checksumming (and TSO) on at the
# kernel side of a veth, the packet socket gets frames whose TCP checksum was left for a NIC
# that does not exist, and the gateway forwards them as they are. The start warns for each
# interface with offloads on (the port's own, its veth peer in this namespace or in a named
# one), with the ethtool command that turns them off; with them off it says nothing.
source "$(dirname "$0")/lib.sh"
require_root

NS=mgoff_$ID
A=mgo$ID   # port net0: its peer eth0 is in namespace $NS
B=mgp$ID   # port net1: its peer $C stays in this namespace
C=mgq$ID
ip netns add "$NS"; NETNS+=("$NS")
ip link add "$A" type veth peer name eth0 netns "$NS"; LINKS+=("$A")
ip link add "$B" type veth peer name "$C"; LINKS+=("$B")
for l in "$A" "$B" "$C"; do sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1"; ip link set "$l" up; done
ip netns exec "$NS" ip link set eth0 up
# A veth's defaults, stated: checksum offload and TSO on, GRO off.
for l in "$A" "$B" "$C"; do ethtool -K "$l" tx on tso on gro off >/dev/null; done
ip netns exec "$NS" ethtool -K eth0 tx on tso on gro off >/dev/null

cat >"$TMP/gw.toml" <<TOML
[gateway]
drain_timeout_ms = 0
[[port]]
name = "net0"
device = "net_af_packet0,iface=$A"
addresses = ["198.51.100.1/24"]
[[port]]
name = "net1"
device = "net_af_packet1,iface=$B"
addresses = ["203.0.113.1/24"]
TOML

note "offloads on: a warning per interface, with its fix"
start_gateway "$TMP/gw.toml" --workers 1
stop_gateway TERM
cp "$TMP/gateway.log" "$TMP/on.log"
want_line() {
  grep -F "event=port_offload_warning $1" "$TMP/on.log" | grep -qF "hint=\"$2\"" \
    || fail "no warning '$1' with hint '$2' in: $(grep event=port_offload "$TMP/on.log")"
}
want_line "port=net0 iface=eth0 netns=$NS role=peer feature=tx-checksumming,tcp-segmentation-offload" \
  "ip netns exec $NS ethtool -K eth0 tx off rx off tso off gso off gro off"
want_line "port=net0 iface=$A role=port feature=tx-checksumming,tcp-segmentation-offload" \
  "ethtool -K $A tx off rx off tso off gso off gro off"
want_line "port=net1 iface=$C role=peer feature=tx-checksumming,tcp-segmentation-offload" \
  "ethtool -K $C tx off rx off tso off gso off gro off"
n=$(grep -c "event=port_offload_warning" "$TMP/on.log")
[[ $n -eq 4 ]] || fail "want 4 offload warnings (both ends of both links), got $n: $(grep event=port_offload "$TMP/on.log")"
grep "event=port_offload_warning" "$TMP/on.log" | head -n 1

note "offloads off at both ends: no warning"
for l in "$A" "$B" "$C"; do offloads_off "$l"; done
offloads_off eth0 "$NS"
start_gateway "$TMP/gw.toml" --workers 1
stop_gateway TERM
if grep -q "event=port_offload_warning" "$TMP/gateway.log"; then
  fail "offloads off, still warned: $(grep event=port_offload "$TMP/gateway.log")"
fi
echo "PASS"
