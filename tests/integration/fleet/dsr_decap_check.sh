#!/usr/bin/env bash
# Checks dsr_decap.py, the userspace DSR backend: a client namespace sends ICMP echo requests to
# the VIP the way meshgate's dsr-ipip and dsr-gue modes would deliver them to the backend
# (IPv4-in-IPv4, IPv6-in-IPv6, GUE variant 1 over IPv4 and IPv6, GUE variant 0), and each echo
# reply must come straight back from the VIP within 3 s. Needs root. Self-contained: its own
# namespaces, removed on exit.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "FAIL: needs root (namespaces, raw sockets)" >&2; exit 1; }

C=dsrc-$$ B=dsrb-$$
C4=192.0.2.2 B4=192.0.2.11 VIP4=203.0.113.10
C6=2001:db8:2::2 B6=2001:db8:2::11 VIP6=2001:db8:100::10
GUE_PORT=6080
TMP=$(mktemp -d /tmp/dsr-decap.XXXXXX)
DPID=

stop_decap() {
  [[ -n $DPID ]] || return 0
  kill -TERM "$DPID" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$DPID" 2>/dev/null || true
  wait "$DPID" 2>/dev/null || true
  DPID=
}

cleanup() {
  local rc=$?
  stop_decap
  ip netns del "$C" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    for f in "$TMP"/decap.*; do [[ -s $f ]] && { echo "=== $f"; tail -n 20 "$f"; }; done
  fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- topology: C (client) -- veth -- B (backend, VIP on lo) ----------------------------------
ip netns add "$C"
ip netns add "$B"
ip -n "$C" link add eth0 type veth peer name eth0 netns "$B"
for ns in "$C" "$B"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  ip netns exec "$ns" ethtool -K eth0 tx off rx off tso off gso off gro off >/dev/null
done
ip -n "$C" addr add $C4/24 dev eth0
ip -n "$C" -6 addr add $C6/64 dev eth0 nodad
ip -n "$C" route add default via $B4
ip -n "$B" addr add $B4/24 dev eth0
ip -n "$B" -6 addr add $B6/64 dev eth0 nodad
ip -n "$B" addr add $VIP4/32 dev lo
ip -n "$B" -6 addr add $VIP6/128 dev lo nodad

# ---- the decapsulator in B --------------------------------------------------------------------
ip netns exec "$B" python3 -u "$HERE/dsr_decap.py" --tun dsr0 --gue-port $GUE_PORT \
  >"$TMP/decap.out" 2>"$TMP/decap.err" &
DPID=$!
for _ in $(seq 50); do grep -qx ready "$TMP/decap.out" && break; sleep 0.1; done
grep -qx ready "$TMP/decap.out" || fail "dsr_decap.py did not print ready within 5 s"

# ---- the client: one echo request, encapsulated as meshgate would, and its reply --------------
cat >"$TMP/client.py" <<'EOF'
import os, select, socket, struct, sys, time
mode, c, b, vip, gue_port, seq = sys.argv[1:7]
gue_port, seq, ident = int(gue_port), int(seq), os.getpid() & 0xFFFF
v6 = ':' in c

def csum(data):
    if len(data) % 2: data += b'\0'
    s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
    while s >> 16: s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF

def ipv4(src, dst, proto, payload, ttl, tos=0, df=0):
    h = struct.pack('!BBHHHBBH4s4s', 0x45, tos, 20 + len(payload), 0, df, ttl, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack('!H', csum(h)) + h[12:] + payload

body = b'dsr-decap-check' * 4
if v6:  # ICMPv6 echo request inside IPv6; the checksum covers the pseudo-header
    s6, d6 = socket.inet_pton(socket.AF_INET6, c), socket.inet_pton(socket.AF_INET6, vip)
    icmp = struct.pack('!BBHHH', 128, 0, 0, ident, seq) + body
    icmp = icmp[:2] + struct.pack('!H', csum(s6 + d6 + struct.pack('!I3xB', len(icmp), 58) + icmp)) + icmp[4:]
    inner = struct.pack('!IHBB', 0x60000000, len(icmp), 58, 63) + s6 + d6 + icmp
    rx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
else:  # ICMP echo request inside IPv4, TTL already decremented as the gateway does, DF set
    icmp = struct.pack('!BBHHH', 8, 0, 0, ident, seq) + body
    icmp = icmp[:2] + struct.pack('!H', csum(icmp)) + icmp[4:]
    inner = ipv4(c, vip, 1, icmp, ttl=63, df=0x4000)
    rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)

if mode == 'ipip' and not v6:  # outer IPv4 protocol 4, built whole (IP_HDRINCL)
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    tx.sendto(ipv4(c, b, 4, inner, ttl=64, df=0x4000), (b, 0))
elif mode == 'ipip':  # outer IPv6 next header 41: the kernel writes the outer header
    socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_IPV6).sendto(inner, (b, 0))
elif mode == 'gue' and not v6:  # meshgate's IPv4 GUE: UDP from 49152+ to gue_port, checksum 0
    udp = struct.pack('!HHHH', 49152 + seq, gue_port, 8 + len(inner), 0) + inner
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    tx.sendto(ipv4(c, b, 17, udp, ttl=64, df=0x4000), (b, 0))
else:  # GUE over IPv6 (kernel UDP, checksummed as meshgate does), or variant 0: 4-byte header
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    hdr = struct.pack('!BBH', 0, 41 if v6 else 4, 0) if mode == 'gue0' else b''
    socket.socket(fam, socket.SOCK_DGRAM).sendto(hdr + inner, (b, gue_port))

deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    if not select.select([rx], [], [], max(0, deadline - time.monotonic()))[0]: break
    data, addr = rx.recvfrom(65535)
    if not v6:
        if socket.inet_aton(addr[0]) != socket.inet_aton(vip): continue
        data = data[(data[0] & 15) * 4:]
    elif addr[0] != vip: continue
    if len(data) >= 8 and data[0] == (129 if v6 else 0) and struct.unpack('!HH', data[4:8]) == (ident, seq) \
            and data[8:] == body:
        print('%s %s: echo reply from %s' % (mode, 'IPv6' if v6 else 'IPv4', addr[0])); sys.exit(0)
print('%s %s: no echo reply from %s within 3 s' % (mode, 'IPv6' if v6 else 'IPv4', vip)); sys.exit(1)
EOF

check() {  # check MODE CLIENT BACKEND VIP SEQ
  timeout 10 ip netns exec "$C" python3 "$TMP/client.py" "$1" "$2" "$3" "$4" $GUE_PORT "$5" \
    || fail "$1 via $3 to $4"
}
check ipip $C4 $B4 $VIP4 1
check gue $C4 $B4 $VIP4 2
check gue0 $C4 $B4 $VIP4 3
check ipip $C6 $B6 $VIP6 4
check gue $C6 $B6 $VIP6 5

# A malformed datagram is counted and skipped; the decapsulator keeps running.
ip netns exec "$C" python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'\xff\x00', ('$B4', $GUE_PORT))"
sleep 0.2
kill -0 "$DPID" 2>/dev/null || fail "dsr_decap.py died on a malformed datagram"
stop_decap
counts=$(tail -n 1 "$TMP/decap.err")
echo "decap: $counts"
[[ $counts == "ipip=2 gue=3 bad=1" ]] || fail "unexpected counters: $counts"
echo PASS
