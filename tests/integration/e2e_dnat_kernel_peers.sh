#!/usr/bin/env bash
# A client namespace curls a VIP; meshgate (two net_af_packet ports on veths) DNATs to a
# python3 http.server in a backend namespace and reverse-translates the replies. IPv4 and IPv6,
# ARP / NDP resolved live against the kernels (no static neighbors), ping to the VIP and to the
# gateway's own address. Ends with SIGTERM: exit 0, summary, --stats-json with the counters.
source "$(dirname "$0")/lib.sh"
require_root

CLI=mgc$ID BE=mgb$ID GWC=gwc$ID GWB=gwb$ID
add_host "$CLI" "$GWC" 192.0.2.2/24 192.0.2.1 2001:db8:2::2/64 2001:db8:2::1
add_host "$BE" "$GWB" 198.51.100.11/24 198.51.100.1 2001:db8:1::11/64 2001:db8:1::1

mkdir -p "$TMP/www"
echo "hello from the backend $ID" >"$TMP/www/hello.txt"
ip netns exec "$BE" python3 -m http.server 8080 --bind :: --directory "$TMP/www" >"$TMP/http.log" 2>&1 &
PIDS+=($!)

cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_c$ID,iface=$GWC"
addresses = ["192.0.2.1/24", "2001:db8:2::1/64"]
[[port]]
name = "backend"
device = "net_af_packet_b$ID,iface=$GWB"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "web6"
vip = "2001:db8:100::10"
port = 80
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
[admin]
listen = "$MG_ADMIN"
TOML
"$MG_BIN" --config "$TMP/gw.toml" --check | grep -qx "config ok" || fail "--check"
start_gateway "$TMP/gw.toml"
wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/127.0.0.1/8080" || fail "http.server did not start"

note "ping the gateway's address and the VIP"
ip netns exec "$CLI" ping -c 2 -W 2 192.0.2.1 >/dev/null || fail "ping 192.0.2.1"
ip netns exec "$CLI" ping -c 2 -W 2 203.0.113.10 >/dev/null || fail "ping VIP"
ip netns exec "$CLI" ping -6 -c 2 -W 2 2001:db8:100::10 >/dev/null || fail "ping6 VIP"

note "curl the VIP over IPv4 and IPv6"
for i in 1 2 3; do
  got=$(ip netns exec "$CLI" curl -sS --max-time 5 http://203.0.113.10/hello.txt) || fail "curl IPv4 #$i"
  [[ $got == "hello from the backend $ID" ]] || fail "IPv4 body: '$got'"
done
got=$(ip netns exec "$CLI" curl -sS --max-time 5 "http://[2001:db8:100::10]/hello.txt") || fail "curl IPv6"
[[ $got == "hello from the backend $ID" ]] || fail "IPv6 body: '$got'"
# The backend saw the client's own address (DNAT keeps the source).
grep -q "192.0.2.2" "$TMP/http.log" || fail "backend did not see the client address"

stop_gateway TERM
grep -q "meshgate summary" "$TMP/gateway.log" || fail "no summary printed"
S=$TMP/stats.json
(( $(json "$S" "d['services']['web']['backends']['198.51.100.11:8080']['flows']") >= 3 )) || fail "web flows"
(( $(json "$S" "d['services']['web6']['backends']['[2001:db8:1::11]:8080']['flows']") >= 1 )) || fail "web6 flows"
(( $(json "$S" "d['arp_replies']") >= 1 )) || fail "no ARP replies"
(( $(json "$S" "d['nd_adverts']") >= 1 )) || fail "no neighbor advertisements"
(( $(json "$S" "d['arp_requests']") >= 1 )) || fail "gateway never resolved a neighbor by ARP"
(( $(json "$S" "d['echo_replies']") >= 6 )) || fail "echo replies"
[[ $(json "$S" "d['packets_in'] + d['packets_generated'] == d['packets_out'] + d['packets_consumed'] + d['drops_total'] + d['packets_pending']") == True ]] \
  || fail "counters do not add up"
echo "PASS"
