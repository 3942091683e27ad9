#!/usr/bin/env bash
# mode = "proxy" against kernel TCP: a client namespace and two backend namespaces (on a bridge)
# around meshgate on net_af_packet veth ports. meshgate's TCP stack terminates the client,
# connects to a Maglev-chosen backend from the [fullnat] address and splices the bytes.
#   curl through the VIP (IPv4, IPv6), spread over backends, backends see 198.51.100.2;
#   a large download (http.server) and upload (sha256 sink) compared by sha256;
#   half-close both ways; backend refuses -> client RST; backend RST -> client RST; client
#   RST -> backend RST; idle timeout; PROXY protocol v2; N parallel connections; TIME-WAIT
#   held for [proxy] time_wait_s then freed; transfers under netem loss / reordering /
#   duplication / delay; the access log's line of a curl (addresses, bytes each way, end) and
#   its reopen on SIGUSR1 after a rename. (The SYN flood with legitimate clients is in reliability_tcp_stress.)
# Then the same gateway with two workers on two queue pairs: af_packet's fanout ignores our RSS
# key, so about half of the backends' segments reach the other worker and are handed over by
# their destination port; transfers and parallel connections must not notice.
# Sizes: MG_PROXY_MB (default 64) for the clean transfers, MG_PROXY_NETEM_MB (default 8) under
# 1% loss, MG_PROXY_NETEM5_MB (default 1) under 5% loss + 20 ms delay (about 1 Mbit/s there);
# MG_PROXY_MB=1024 is the long variant to run by hand.
source "$(dirname "$0")/lib.sh"
require_root

BIG_MB=${MG_PROXY_MB:-64}
NETEM_MB=${MG_PROXY_NETEM_MB:-8}
NETEM5_MB=${MG_PROXY_NETEM5_MB:-1}
PARALLEL=${MG_PROXY_PARALLEL:-1000}
PEERS="$(dirname "$0")/proxy/peers.py"
PY=/usr/bin/python3

CLI=mgpc$ID SW=mgps$ID WIRE=mgpw$ID GWC=gpc$ID GWB=gpb$ID
# The client link goes through a "wire" namespace: a bridge normally, a userspace netem
# (proxy/impair.py) for the impaired transfers (this kernel may have no sch_netem).
ip netns add "$CLI"; NETNS+=("$CLI")
ip netns add "$WIRE"; NETNS+=("$WIRE")
ip link add "$GWC" type veth peer name wg netns "$WIRE"; LINKS+=("$GWC")
sysctl -qw "net.ipv6.conf.$GWC.disable_ipv6=1"
ip link set "$GWC" up; offloads_off "$GWC"
ip netns exec "$WIRE" ip link add wc type veth peer name eth0 netns "$CLI"
ip netns exec "$WIRE" ip link add br0 type bridge
for d in wg wc; do
  ip netns exec "$WIRE" sysctl -qw "net.ipv6.conf.$d.disable_ipv6=1"
  ip netns exec "$WIRE" ip link set "$d" master br0 up
  offloads_off "$d" "$WIRE"
done
ip netns exec "$WIRE" ip link set br0 up
ip netns exec "$CLI" ip link set lo up
ip netns exec "$CLI" ip link set eth0 up
offloads_off eth0 "$CLI"
ip netns exec "$CLI" ip addr add 192.0.2.2/24 dev eth0
ip netns exec "$CLI" ip route add default via 192.0.2.1
ip netns exec "$CLI" ip -6 addr add 2001:db8:2::2/64 dev eth0 nodad
ip netns exec "$CLI" ip -6 route add default via 2001:db8:2::1
ip netns add "$SW"; NETNS+=("$SW")
ip netns exec "$SW" ip link add br0 type bridge
ip netns exec "$SW" ip link set br0 up
ip link add "$GWB" type veth peer name gw netns "$SW"; LINKS+=("$GWB")
sysctl -qw "net.ipv6.conf.$GWB.disable_ipv6=1"
ip link set "$GWB" up; offloads_off "$GWB"
ip netns exec "$SW" ip link set gw master br0 up
offloads_off gw "$SW"
mkdir -p "$TMP/www"
echo "hello through the proxy" >"$TMP/www/id.txt"
head -c "$((BIG_MB << 20))" /dev/urandom >"$TMP/www/big.bin"
head -c "$((NETEM_MB << 20))" /dev/urandom >"$TMP/www/netem.bin"
head -c "$((NETEM5_MB << 20))" /dev/urandom >"$TMP/www/netem5.bin"
for i in 1 2; do
  B=mgpb${i}_$ID
  ip netns add "$B"; NETNS+=("$B")
  ip link add eth0 netns "$B" type veth peer name b$i netns "$SW"
  ip netns exec "$SW" ip link set b$i master br0 up
  offloads_off b$i "$SW"
  ip netns exec "$B" ip link set lo up
  ip netns exec "$B" ip link set eth0 up
  offloads_off eth0 "$B"
  ip netns exec "$B" ip addr add 198.51.100.1$i/24 dev eth0
  ip netns exec "$B" ip -6 addr add 2001:db8:1::1$i/64 dev eth0 nodad
  ip netns exec "$B" ip route add default via 198.51.100.1
  ip netns exec "$B" ip -6 route add default via 2001:db8:1::1
  ip netns exec "$B" $PY -m http.server 8080 --bind :: --directory "$TMP/www" \
    >"$TMP/http$i.log" 2>&1 &
  PIDS+=($!)
  ip netns exec "$B" $PY "$PEERS" serve --sink 9000 --echo 7000 --rst 7100 --proxy-v2 7200 \
    --log "$TMP/peer$i.events" >"$TMP/peer$i.log" 2>&1 &
  PIDS+=($!)
done

svc() {  # svc NAME VIP PORT BACKEND_PORT [EXTRA] BACKEND...
  local name=$1 vip=$2 port=$3 bport=$4 extra=$5; shift 5
  printf '[[service]]\nname = "%s"\nvip = "%s"\nport = %s\nmode = "proxy"\n%s\n' \
    "$name" "$vip" "$port" "$extra"
  for b in "$@"; do printf '  [[service.backend]]\n  address = "%s"\n  port = %s\n' "$b" "$bport"; done
}
cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_pc$ID,iface=$GWC"
addresses = ["192.0.2.1/24", "2001:db8:2::1/64"]
[[port]]
name = "backend"
device = "net_af_packet_pb$ID,iface=$GWB"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
[fullnat]
local_addresses = ["198.51.100.2", "2001:db8:1::2"]
[proxy]
idle_timeout_s = 3
time_wait_s = 6
max_connections = 8192
memory_mb = 64
[conntrack]
max_flows = 65536
[access_log]
path = "$TMP/access.log"
$(svc web 203.0.113.20 80 8080 "" 198.51.100.11 198.51.100.12)
$(svc web6 2001:db8:100::20 80 8080 "" 2001:db8:1::11 2001:db8:1::12)
$(svc sink 203.0.113.21 9000 9000 "" 198.51.100.11)
$(svc echo 203.0.113.21 7000 7000 "" 198.51.100.11 198.51.100.12)
$(svc refused 203.0.113.21 7001 7999 "" 198.51.100.11)
$(svc rst 203.0.113.21 7100 7100 "" 198.51.100.12)
$(svc ppv2 203.0.113.21 7200 7200 'proxy_protocol = "v2"' 198.51.100.12)
[admin]
listen = "$MG_ADMIN"
TOML
start_gateway "$TMP/gw.toml"
for i in 1 2; do
  wait_for 10 ip netns exec mgpb${i}_$ID bash -c "echo >/dev/tcp/127.0.0.1/8080" || fail "http $i down"
  wait_for 10 grep -q ready "$TMP/peer$i.log" || fail "peers $i down"
done
C() { ip netns exec "$CLI" "$@"; }
metric() {  # metric NAME: the sample of a family without labels
  curl -s "http://$MG_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}

note "curl through the proxy VIP"
declare -A seen
for ((k = 0; k < 20; ++k)); do
  body=$(C curl -sS --max-time 5 http://203.0.113.20/id.txt) || fail "curl #$k"
  [[ $body == "hello through the proxy" ]] || fail "curl #$k: body '$body'"
done
body=$(C curl -sS --max-time 5 "http://[2001:db8:100::20]/id.txt") || fail "curl IPv6"
[[ $body == "hello through the proxy" ]] || fail "IPv6 body '$body'"
for i in 1 2; do
  n=$(grep -cE '(^|::ffff:)198\.51\.100\.2 .*GET /id.txt' "$TMP/http$i.log" || true)
  seen[$i]=$n
done
echo "spread: backend1=${seen[1]} backend2=${seen[2]} (from 198.51.100.2)"
(( seen[1] + seen[2] == 20 && seen[1] > 0 && seen[2] > 0 )) || fail "spread or source address wrong"
grep -q "2001:db8:1::2 " "$TMP"/http*.log || fail "IPv6 request not from 2001:db8:1::2"

note "access log: the record of one curl; SIGUSR1 after a rename starts a new file"
# access_record LOG PORT: the access-log line of the client port PORT (waits for it).
access_record() {
  wait_for 5 grep -q "\"client\":\"192.0.2.2:$2\"" "$1" || fail "no access-log record for :$2 in $1"
  grep "\"client\":\"192.0.2.2:$2\"" "$1"
}
sizes=$(C curl -sS --max-time 5 --local-port 45001 -o /dev/null \
  -w '%{size_request} %{size_header} %{size_download}' http://203.0.113.20/id.txt) || fail "curl"
read -r sent hdr body <<<"$sizes"
rec=$(access_record "$TMP/access.log" 45001)
echo "$rec"
python3 - "$rec" "$sent" "$((hdr + body))" <<'PY' || fail "access-log record: $rec"
import json, sys
r = json.loads(sys.argv[1])
assert r["kind"] == "proxy" and r["service"] == "web", r
assert r["vip"] == "203.0.113.20:80", r
assert r["backend"] in ("198.51.100.11:8080", "198.51.100.12:8080"), r
assert r["bytes_from_client"] == int(sys.argv[2]), (r, sys.argv[2])
assert r["bytes_to_client"] == int(sys.argv[3]), (r, sys.argv[3])
# http.server answers HTTP/1.0 and closes first.
assert r["end"] == "backend_fin", r
assert r["start"].endswith("Z") and r["duration_ms"] < 5000 and r["worker"] == 0, r
PY
mv "$TMP/access.log" "$TMP/access.log.1"
kill -USR1 "$GW_PID"
wait_for 5 grep -q "event=access_log_reopened trigger=sigusr1" "$TMP/gateway.log" || fail "no reopen"
C curl -sS --max-time 5 --local-port 45002 -o /dev/null http://203.0.113.20/id.txt || fail "curl"
access_record "$TMP/access.log" 45002 >/dev/null
! grep -q '"client":"192.0.2.2:45002"' "$TMP/access.log.1" || fail "record went to the rotated file"
(( $(metric meshgate_access_log_records_total) >= 23 )) || fail "records_total $(metric meshgate_access_log_records_total)"
[[ $(metric meshgate_access_log_dropped_total) == 0 ]] || fail "access-log records dropped"

note "download ${BIG_MB} MiB"
want=$(sha256sum <"$TMP/www/big.bin" | cut -d' ' -f1)
t0=$(date +%s.%N)
got=$(C curl -sS --max-time 120 http://203.0.113.20/big.bin | sha256sum | cut -d' ' -f1)
t1=$(date +%s.%N)
[[ $got == "$want" ]] || fail "download sha256 $got != $want"
echo "download ok: $(python3 -c "print(f'{$BIG_MB * 8 / ($t1 - $t0):.0f} Mbit/s')")"

note "upload ${BIG_MB} MiB (the client half-closes, the sha256 comes back)"
t0=$(date +%s.%N)
C timeout 120 $PY "$PEERS" upload 203.0.113.21 9000 "$TMP/www/big.bin" || fail "upload"
t1=$(date +%s.%N)
echo "upload: $(python3 -c "print(f'{$BIG_MB * 8 / ($t1 - $t0):.0f} Mbit/s')")"

note "Istio metrics and backend bytes both ways for the download and the upload"
# istio SERIES [LABEL=VALUE...]: the summed samples of istio_tcp_SERIES_total with those labels.
istio() {
  local s=$1; shift
  $PY "$(dirname "$0")/istio_metric.py" "http://$MG_ADMIN/metrics" "istio_tcp_${s}_total" \
    reporter=source connection_security_policy=unknown source_principal=unknown \
    request_protocol=tcp response_flags=- "$@"
}
big=$((BIG_MB << 20))
sink=(destination_service=sink destination_service_name=sink destination_workload=unknown)
for _ in $(seq 50); do [[ $(istio connections_closed "${sink[@]}") == 1 ]] && break; sleep 0.1; done
[[ $(istio connections_closed "${sink[@]}") == 1 ]] || fail "istio closed for sink != 1"
[[ $(istio connections_opened "${sink[@]}") == 1 ]] || fail "istio opened for sink != 1"
[[ $(istio received_bytes "${sink[@]}") == "$big" ]] || fail "istio received bytes for sink: $(istio received_bytes "${sink[@]}") != $big"
(( $(istio sent_bytes "${sink[@]}") > 0 )) || fail "istio sent bytes for sink (the sha256 back) are 0"
(( $(istio sent_bytes destination_service=web) >= big )) || fail "istio sent bytes for web < the download"
[[ $(metric 'meshgate_backend_bytes_total{service="sink",backend="198.51.100.11:9000"}') == "$big" ]] ||
  fail "meshgate_backend_bytes_total of sink != $big"
web_reply=0
for b in 11 12; do
  v=$(metric "meshgate_backend_reply_bytes_total{service=\"web\",backend=\"198.51.100.$b:8080\"}")
  web_reply=$((web_reply + v))
done
(( web_reply >= big )) || fail "meshgate_backend_reply_bytes_total of web ($web_reply) < the download"

note "half-close: client FIN, the echo still flows back"
C timeout 20 $PY "$PEERS" halfclose 203.0.113.21 7000 || fail "half-close"

note "backend refuses -> the client gets a RST"
C timeout 20 $PY "$PEERS" expect-reset 203.0.113.21 7001 || fail "refused backend"
note "backend resets -> the client gets a RST"
C timeout 20 $PY "$PEERS" expect-reset 203.0.113.21 7100 || fail "backend RST"
note "client resets -> the backend gets a RST"
before=$(cat "$TMP"/peer*.events | grep -c "^7000 .* reset$" || true)
C timeout 20 $PY "$PEERS" abort 203.0.113.21 7000 || fail "abort"
wait_for 5 bash -c "(( \$(cat $TMP/peer*.events | grep -c '^7000 .* reset\$') > $before ))" \
  || fail "the backend saw no reset after the client's"

note "PROXY protocol v2"
C timeout 20 $PY "$PEERS" halfclose 203.0.113.21 7200 || fail "proxy-v2 service"
grep -E "^7200 198\.51\.100\.2:[0-9]+ proxy 192\.0\.2\.2:[0-9]+ 203\.0\.113\.21:7200$" \
  "$TMP/peer2.events" || fail "no PROXY v2 header with the client's address"

note "idle timeout (idle_timeout_s = 3); the open session in /flows meanwhile"
ip netns exec "$CLI" timeout 20 $PY "$PEERS" idle 203.0.113.21 7000 3 >"$TMP/idle.out" 2>&1 &
IDLE=$!
PIDS+=("$IDLE")
sleep 1
flows=$(curl -s "http://$MG_ADMIN/flows?limit=100")
echo "$flows" | python3 -c '
import json, sys
f = [x for x in json.load(sys.stdin)["flows"] if x["mode"] == "proxy" and x["vip"] == "203.0.113.21:7000"]
assert len(f) == 1, f
x = f[0]
assert x["client"].startswith("192.0.2.2:") and x["local"].startswith("198.51.100.2:"), x
assert x["state"] == "ESTABLISHED" and 0 < x["expires_in_ms"] <= 3000, x
print("flows:", x["client"], "->", x["vip"], "via", x["local"], "->", x["backend"], x["state"])
' || fail "the open session is not in /flows: $flows"
wait "$IDLE" || fail "idle: $(cat "$TMP/idle.out")"
out=$(cat "$TMP/idle.out")
echo "$out"
python3 -c "import sys; w=float('$out'.split()[2]); sys.exit(0 if 2.5 <= w <= 6 else 1)" \
  || fail "idle close after the wrong time"

note "$PARALLEL parallel connections"
C timeout 90 $PY "$PEERS" many 203.0.113.21 7000 "$PARALLEL" || fail "parallel connections"

note "TIME-WAIT: held for time_wait_s = 6, then freed"
wait_for 10 bash -c "[[ \$(curl -s http://$MG_ADMIN/metrics | awk '\$1==\"meshgate_proxy_sessions\"{print \$2}') == 0 ]]" \
  || fail "sessions left open: $(metric meshgate_proxy_sessions)"
tw=$(metric meshgate_tcp_connections)
echo "connections right after the sessions closed: $tw"
(( tw >= PARALLEL )) || fail "expected >= $PARALLEL connections in TIME-WAIT, got $tw"
sleep 2
(( $(metric meshgate_tcp_connections) > 0 )) || fail "TIME-WAIT shorter than 2 s"
wait_for 10 bash -c "[[ \$(curl -s http://$MG_ADMIN/metrics | awk '\$1==\"meshgate_tcp_connections\"{print \$2}') == 0 ]]" \
  || fail "TIME-WAIT not freed: $(metric meshgate_tcp_connections)"

IMPAIR="$(dirname "$0")/proxy/impair.py"
netem() {  # netem ARGS...: impair.py between the gateway's client port and the client
  W() { ip netns exec "$WIRE" "$@"; }
  W ip link set wg nomaster; W ip link set wc nomaster
  W ip link set wg promisc on; W ip link set wc promisc on
  ip netns exec "$WIRE" $PY "$IMPAIR" wg wc --seconds 240 "$@" >"$TMP/impair.log" 2>&1 &
  IMPAIR_PID=$!
  PIDS+=("$IMPAIR_PID")
  wait_for 5 grep -q ready "$TMP/impair.log" || fail "impair.py did not start"
}
netem_off() {
  kill "$IMPAIR_PID"; wait "$IMPAIR_PID" || true
  echo "impair.py: $(tail -n 1 "$TMP/impair.log")"
  ip netns exec "$WIRE" ip link set wg master br0
  ip netns exec "$WIRE" ip link set wc master br0
}
netem_transfers() {  # netem_transfers FILE MB WHAT
  local want got t0 t1
  want=$(sha256sum <"$TMP/www/$1" | cut -d' ' -f1)
  t0=$(date +%s.%N)
  got=$(C curl -sS --max-time 120 "http://203.0.113.20/$1" | sha256sum | cut -d' ' -f1)
  t1=$(date +%s.%N)
  [[ $got == "$want" ]] || fail "download under $3: sha256 differs"
  echo "download under $3: $(python3 -c "print(f'{$2 * 8 / ($t1 - $t0):.1f} Mbit/s')")"
  C timeout 120 $PY "$PEERS" upload 203.0.113.21 9000 "$TMP/www/$1" || fail "upload under $3"
}
note "impaired client link: 1% loss, ${NETEM_MB} MiB both ways"
netem --loss 0.01 --seed 11
netem_transfers netem.bin "$NETEM_MB" "1% loss"
netem_off
note "impaired client link: 5% loss, 20 ms delay, 5% reordering, 1% duplication, ${NETEM5_MB} MiB both ways"
netem --loss 0.05 --delay-ms 20 --reorder 0.05 --dup 0.01 --seed 12
netem_transfers netem5.bin "$NETEM5_MB" "5% loss + 20 ms + reordering + duplication"
netem_off
retrans=$(metric meshgate_tcp_retrans_segs_total)
ooo=$(metric meshgate_tcp_ooo_segs_total)
echo "tcp: retransmitted=$retrans out-of-order=$ooo dup=$(metric meshgate_tcp_dup_segs_total)"
(( retrans > 0 && ooo > 0 )) || fail "netem left no trace in the TCP counters"

stop_gateway TERM
S=$TMP/stats.json
echo "proxy: $(json "$S" "d['proxy']")"
echo "access_log: $(json "$S" "d.get('access_log')")"
[[ $(json "$S" "d['access_log']['records'] >= 23 and d['access_log']['write_errors'] == 0 and d['access_log']['dropped'] == 0") == True ]] \
  || fail "--stats-json access_log: $(json "$S" "d.get('access_log')")"
[[ $(json "$S" "d['proxy']['backend_refused'] >= 1 and d['proxy']['backend_resets'] >= 1 and d['proxy']['client_resets'] >= 1 and d['proxy']['idle_timeouts'] >= 1 and d['proxy']['proxy_protocol_sent'] >= 1") == True ]] \
  || fail "proxy counters do not show every case"
[[ $(json "$S" "d['packets_in'] + d['packets_generated'] + d['handoff_in'] == d['packets_out'] + d['packets_consumed'] + d['drops_total'] + d['packets_pending'] + d['handoff_out']") == True ]] \
  || fail "counters do not add up"

note "two workers, two queue pairs per port"
sed -i -e 's/^workers = 1$/workers = 2/' -e "s/iface=$GWC\"/iface=$GWC,qpairs=2\"/" \
  -e "s/iface=$GWB\"/iface=$GWB,qpairs=2\"/" "$TMP/gw.toml"
grep -q "qpairs=2" "$TMP/gw.toml" || fail "could not switch the config to two queue pairs"
start_gateway "$TMP/gw.toml"
got=$(C curl -sS --max-time 120 http://203.0.113.20/netem.bin | sha256sum | cut -d' ' -f1)
[[ $got == "$(sha256sum <"$TMP/www/netem.bin" | cut -d' ' -f1)" ]] || fail "two workers: download"
C timeout 120 $PY "$PEERS" upload 203.0.113.21 9000 "$TMP/www/netem.bin" || fail "two workers: upload"
C timeout 90 $PY "$PEERS" many 203.0.113.21 7000 200 || fail "two workers: parallel connections"
stop_gateway TERM
echo "two workers: handed over $(json "$S" "d['handoff_out']"), accepted per worker" \
  "$(json "$S" "[w['packets_in'] for w in d['workers']]") packets in"
[[ $(json "$S" "d['handoff_out'] > 0 and d['handoff_out'] == d['handoff_in']") == True ]] \
  || fail "no handoff seen (or handoffs lost): fanout put every reply on its owner?"
[[ $(json "$S" "d['drops']['handoff_full'] + d['drops']['reply_no_flow']") == 0 ]] || fail "drops: $(json "$S" "d['drops']")"
[[ $(json "$S" "d['proxy']['accepted'] == 202 and d['proxy']['sessions_closed'] == 202") == True ]] \
  || fail "two workers: $(json "$S" "d['proxy']")"
echo "PASS"
