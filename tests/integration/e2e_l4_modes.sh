#!/usr/bin/env bash
# Three backend namespaces (python3 http.server on 8080, each serving its own name) on one L2
# segment behind meshgate, a client namespace on the other side. meshgate runs two workers on
# net_af_packet ports with two queue pairs each (the kernel's fanout spreads packets, so
# replies regularly reach the worker that does not own their flow). curl through every VIP:
# dnat and fullnat, IPv4 and IPv6. Every response must be complete and come from a backend;
# the spread over backends is reported; fullnat backends must see the gateway's local address.
# The fullnat steering rte_flow rules are listed as refused by af_packet (GET /flow_rules,
# meshgate-ctl flow-rules, /metrics, the start-up log).
source "$(dirname "$0")/lib.sh"
require_root
MG_CTL=${MG_CTL:?MG_CTL must point at meshgate-ctl}

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

backends() {  # backends ADDR_PREFIX PORT
  for i in 1 2 3; do printf '  [[service.backend]]\n  address = "%s%s"\n  port = %s\n' "$1" "$i" "$2"; done
}
cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 2
[[port]]
name = "client"
device = "net_af_packet_c$ID,iface=$GWC,qpairs=2"
addresses = ["192.0.2.1/24", "2001:db8:2::1/64"]
[[port]]
name = "backend"
device = "net_af_packet_b$ID,iface=$GWB,qpairs=2"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
[fullnat]
local_addresses = ["198.51.100.2", "2001:db8:1::2"]
[[service]]
name = "dnat4"
vip = "203.0.113.10"
port = 80
$(backends 198.51.100.1 8080)
[[service]]
name = "fullnat4"
vip = "203.0.113.11"
port = 80
mode = "fullnat"
$(backends 198.51.100.1 8080)
[[service]]
name = "dnat6"
vip = "2001:db8:100::10"
port = 80
$(backends 2001:db8:1::1 8080)
[[service]]
name = "fullnat6"
vip = "2001:db8:100::11"
port = 80
mode = "fullnat"
$(backends 2001:db8:1::1 8080)
[admin]
listen = "$MG_ADMIN"
TOML
start_gateway "$TMP/gw.toml"
for i in 1 2 3; do
  wait_for 10 ip netns exec mgb${i}_$ID bash -c "echo >/dev/tcp/127.0.0.1/8080" || fail "backend $i down"
done

N=30
declare -A spread
for url in http://203.0.113.10 http://203.0.113.11 "http://[2001:db8:100::10]" "http://[2001:db8:100::11]"; do
  for ((k = 0; k < N; ++k)); do
    body=$(ip netns exec "$CLI" curl -sS --max-time 5 "$url/id.txt") || fail "curl $url #$k"
    [[ $body =~ ^backend\ [123]$ ]] || fail "$url: unexpected body '$body'"
    spread["$url ${body#backend }"]=$(( ${spread["$url ${body#backend }"]:-0} + 1 ))
  done
  line="spread $url:"
  used=0
  for i in 1 2 3; do
    n=${spread["$url $i"]:-0}; line+=" backend$i=$n"; (( n > 0 )) && used=$((used + 1))
  done
  echo "$line"
  (( used >= 2 )) || fail "$url: $N connections all went to one backend"
done

# DNAT keeps the client's address; fullnat shows the gateway's local addresses to backends.
cat "$TMP"/http*.log >"$TMP/all_http.log"
grep -q "^192.0.2.2 " "$TMP/all_http.log" || grep -q "::ffff:192.0.2.2" "$TMP/all_http.log" \
  || fail "no dnat request from the client address"
grep -qE "(^|::ffff:)198.51.100.2 " "$TMP/all_http.log" || fail "no fullnat request from 198.51.100.2"
grep -q "2001:db8:1::2" "$TMP/all_http.log" || fail "no fullnat request from 2001:db8:1::2"
grep -q "2001:db8:2::2" "$TMP/all_http.log" || fail "no IPv6 dnat request from the client"

# The fullnat steering rules are wanted (two workers, a power of two) but af_packet has no
# rte_flow: /flow_rules, meshgate-ctl flow-rules, /metrics and the start-up log say they were
# refused with the PMD's reason and left to software.
note "rte_flow rules refused on af_packet, listed with the PMD's reason"
curl -sf "http://$MG_ADMIN/flow_rules" >"$TMP/flow_rules.json" || fail "GET /flow_rules"
python3 - "$TMP/flow_rules.json" <<'PY' || fail "/flow_rules: $(cat "$TMP/flow_rules.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert [p["port"] for p in d["ports"]] == ["client", "backend"], d["ports"]
for p in d["ports"]:
    assert p["installed"] == 0 and p["refused"] == 8, p  # 2 addresses x tcp/udp x 2 queues
    assert p["note"].startswith("fullnat steering in software: rte_flow_validate: "), p
rules = d["rules"]
assert len(rules) == 16, len(rules)
for r in rules:
    assert r["kind"] == "fullnat_steer" and r["state"] == "refused" and not r["handle"], r
    assert r["reason"].startswith("rte_flow_validate: ") and len(r["reason"]) > 19, r
assert {r["match"] for r in rules if r["port"] == "backend"} >= {
    "ipv4 dst 198.51.100.2 tcp dport 0/0x1", "ipv6 dst 2001:db8:1::2 udp dport 1/0x1"}, rules
assert d["counters"]["refusals"]["fullnat_steer"] == 16, d["counters"]
print("flow rule reason:", rules[0]["reason"])
PY
"$MG_CTL" --admin "$MG_ADMIN" flow-rules >"$TMP/ctl-flow-rules.txt" || fail "meshgate-ctl flow-rules"
grep -qE "^port backend \(id [0-9]+, 2 queues\): 0 installed, 8 refused$" "$TMP/ctl-flow-rules.txt" \
  || fail "meshgate-ctl flow-rules: $(cat "$TMP/ctl-flow-rules.txt")"
(( $(grep -c "fullnat_steer .* refused  *no  *rte_flow_validate: " "$TMP/ctl-flow-rules.txt") == 16 )) \
  || fail "meshgate-ctl flow-rules rows: $(cat "$TMP/ctl-flow-rules.txt")"
curl -sf "http://$MG_ADMIN/metrics" >"$TMP/metrics.txt" || fail "GET /metrics"
grep -qx 'meshgate_flow_rules{port="backend",kind="fullnat_steer",state="refused"} 8' "$TMP/metrics.txt" \
  || fail "meshgate_flow_rules: $(grep flow_rule "$TMP/metrics.txt")"
grep -qx 'meshgate_flow_rules{port="backend",kind="fullnat_steer",state="installed"} 0' "$TMP/metrics.txt" \
  || fail "meshgate_flow_rules installed"
grep -q 'event=flow_rules port=backend offloaded="none" software="fullnat_steer=8" reason="rte_flow_validate: ' \
  "$TMP/gateway.log" || fail "no flow_rules start-up log"

stop_gateway TERM
S=$TMP/stats.json
for svc in dnat4 fullnat4 dnat6 fullnat6; do
  (( $(json "$S" "d['services']['$svc']['flows']") >= N )) || fail "$svc: fewer than $N flows"
done
echo "handoffs: $(json "$S" "d['handoff_out']") out, $(json "$S" "d['handoff_in']") in;" \
     "workers: $(json "$S" "[w['packets_in'] for w in d['workers']]") packets in"
[[ $(json "$S" "d['handoff_out'] == d['handoff_in']") == True ]] || fail "handoffs lost"
# af_packet has no rte_flow: the software path steers (logged and in the stats).
[[ $(json "$S" "d['flow_steering']['backend']") == software ]] || fail "flow steering not reported"
grep -q 'event=flow_steering port=backend mode=software' "$TMP/gateway.log" || fail "no steering log"
[[ $(json "$S" "d['drops']['reply_no_flow'] + d['drops']['handoff_full']") == 0 ]] \
  || fail "replies that found no flow: $(json "$S" "d['drops']")"
[[ $(json "$S" "d['packets_in'] + d['packets_generated'] + d['handoff_in'] == d['packets_out'] + d['packets_consumed'] + d['drops_total'] + d['packets_pending'] + d['handoff_out']") == True ]] \
  || fail "counters do not add up"
echo "PASS"
