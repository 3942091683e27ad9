#!/usr/bin/env bash
# Service options against kernel peers: three backend namespaces (python3 http.server, each
# serving its own name) behind meshgate with two workers on net_af_packet ports with two queue
# pairs (the kernel's fanout spreads connections over both workers), a client namespace with
# three addresses: an allowed one, one outside a service's source_ranges, one in the [[deny]]
# block list. Checked: session affinity (every connection of a client to one backend, across
# both workers, 200 connections with a third backend added by a reload half-way: nobody moves),
# NodePort (the service at the gateway's own address), source ranges and the block list
# enforced, with their drop counters, and the block list lifted by a reload.
source "$(dirname "$0")/lib.sh"
require_root

CLI=mgc$ID SW=mgs$ID GWC=gwc$ID GWB=gwb$ID
add_host "$CLI" "$GWC" 192.0.2.2/24 192.0.2.1 2001:db8:2::2/64 2001:db8:2::1

# The backend segment: three backends on a bridge, the gateway's port plugged into it.
add_backend_segment "$GWB" "$SW" mgb 3
for i in 1 2 3; do
  mkdir -p "$TMP/www$i"; echo "backend $i" >"$TMP/www$i/id.txt"
  ip netns exec mgb${i}_$ID python3 -m http.server 8080 --bind :: --directory "$TMP/www$i" \
    >"$TMP/http$i.log" 2>&1 &
  PIDS+=($!)
done

backends() {  # backends ADDR_PREFIX PORT [COUNT]
  for ((i = 1; i <= ${3:-3}; ++i)); do printf '  [[service.backend]]\n  address = "%s%s"\n  port = %s\n' "$1" "$i" "$2"; done
}
ip netns exec "$CLI" ip addr add 192.0.2.70/24 dev eth0    # outside the ranged service's /26
ip netns exec "$CLI" ip addr add 192.0.2.200/24 dev eth0   # blocked

write_config() {  # write_config STICKY_BACKENDS BLOCK_LIST(0|1)
cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 2
[[port]]
name = "client"
device = "net_af_packet_c$ID,iface=$GWC,qpairs=2"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_b$ID,iface=$GWB,qpairs=2"
addresses = ["198.51.100.1/24"]
$( (( $2 )) && printf '[[deny]]\nsource = "192.0.2.128/25"\n')
[[service]]
name = "sticky"
vip = "203.0.113.21"
port = 80
session_affinity = "client_ip"
node_port = 30080
$(backends 198.51.100.1 8080 "$1")
[[service]]
name = "ranged"
vip = "203.0.113.20"
port = 80
source_ranges = ["192.0.2.0/26"]
$(backends 198.51.100.1 8080)
[admin]
listen = "$MG_ADMIN"
TOML
}
write_config 2 1
"$MG_BIN" --config "$TMP/gw.toml" --check | grep -qx "config ok" || fail "--check"
start_gateway "$TMP/gw.toml"
for i in 1 2 3; do
  wait_for 10 ip netns exec mgb${i}_$ID bash -c "echo >/dev/tcp/127.0.0.1/8080" || fail "backend $i down"
done

get() {  # get SOURCE URL: the body, or fails
  ip netns exec "$CLI" curl -sS --max-time 3 --interface "$1" "$2/id.txt"
}

reloads_ok() {  # meshgate_config_reloads_total{result="ok"}
  curl -s --max-time 2 "http://$MG_ADMIN/metrics" \
    | awk '/^meshgate_config_reloads_total\{result="ok"\}/ {print $2}'
}
reloaded_past() { (( $(reloads_ok) > $1 )); }
reload_to() {  # reload_to STICKY_BACKENDS BLOCK_LIST: SIGHUP with the new file, waits for it
  local before; before=$(reloads_ok)
  [[ $before =~ ^[0-9]+$ ]] || fail "no meshgate_config_reloads_total in /metrics"
  write_config "$1" "$2"
  kill -HUP "$GW_PID"
  wait_for 10 reloaded_past "$before" \
    || fail "reload not applied: $(grep config_reload "$TMP/gateway.log" | tail -3)"
}

note "session affinity: 200 connections of one client, one backend, a backend added half-way"
declare -A seen
for ((k = 0; k < 200; ++k)); do
  if (( k == 100 )); then
    reload_to 3 1
    echo "affinity: backend 3 added by a reload after 100 connections"
  fi
  body=$(get 192.0.2.2 http://203.0.113.21) || fail "curl sticky #$k"
  [[ $body =~ ^backend\ [123]$ ]] || fail "sticky: unexpected body '$body'"
  seen[$body]=1
done
(( ${#seen[@]} == 1 )) || fail "one client reached ${#seen[@]} backends: ${!seen[*]}"
first=${!seen[*]}
echo "affinity: 200 connections to $first"

note "NodePort: the service at the gateway's address 192.0.2.1:30080"
for ((k = 0; k < 5; ++k)); do
  body=$(get 192.0.2.2 http://192.0.2.1:30080) || fail "curl node port #$k"
  [[ $body == "$first" ]] || fail "node port: '$body', the client's backend is '$first'"
done

note "source ranges: 192.0.2.2 in, 192.0.2.70 out"
get 192.0.2.2 http://203.0.113.20 >/dev/null || fail "ranged service refused an allowed source"
if get 192.0.2.70 http://203.0.113.20 >/dev/null 2>&1; then fail "source outside the ranges served"; fi
get 192.0.2.70 http://203.0.113.21 >/dev/null || fail "192.0.2.70 refused by a service without ranges"

note "block list: 192.0.2.200 reaches nothing"
if get 192.0.2.200 http://203.0.113.21 >/dev/null 2>&1; then fail "blocked source served"; fi
if ip netns exec "$CLI" ping -I 192.0.2.200 -c 1 -W 1 192.0.2.1 >/dev/null 2>&1; then
  fail "blocked source answered by ping"
fi
ip netns exec "$CLI" ping -I 192.0.2.2 -c 1 -W 2 192.0.2.1 >/dev/null || fail "ping from an allowed source"

note "the block list lifted by a reload: 192.0.2.200 served"
reload_to 3 0
get 192.0.2.200 http://203.0.113.21 >/dev/null || fail "192.0.2.200 still blocked after the reload"

stop_gateway TERM
S=$TMP/stats.json
echo "workers: $(json "$S" "[w['packets_in'] for w in d['workers']]") packets in;" \
     "drops: $(json "$S" "d['drops']")"
[[ $(json "$S" "all(w['packets_in'] > 0 for w in d['workers'])") == True ]] \
  || fail "one worker received nothing: affinity was not shared across workers"
(( $(json "$S" "d['drops']['source_denied']") >= 1 )) || fail "no source_denied drop"
(( $(json "$S" "d['drops']['source_blocked']") >= 2 )) || fail "no source_blocked drops"
(( $(json "$S" "d['services']['sticky']['flows']") >= 206 )) || fail "sticky flows (VIP + node port)"
[[ $(json "$S" "d['packets_in'] + d['packets_generated'] + d['handoff_in'] == d['packets_out'] + d['packets_consumed'] + d['drops_total'] + d['packets_pending'] + d['handoff_out']") == True ]] \
  || fail "counters do not add up"
echo "PASS"
