#!/usr/bin/env bash
# Hostile configs against the real `meshgate --check` (and the start-up checks that need no
# EAL): every numeric limit of the validator at its bounds (pass) and one past them (a
# positioned error), more ports and workers than the dataplane holds, files that are not
# files (a directory, /dev/zero, a FIFO, 50 MB, binary garbage), control characters, a
# megabyte key, unusable VIPs, referenced files and devices that cannot work. Every case must
# exit 2 with the error it names and never crash (exit >= 128) or hang (each run is bounded
# in time and memory).
source "$(dirname "$0")/lib.sh"

CASES=0
# run FILE [ARGS...]: meshgate --check on FILE, 10 s and 4 GiB of address space at most; sets
# RC and OUT.
run() {
  local f=$1; shift
  RC=0
  ( ulimit -v 4194304; exec timeout 10 "$MG_BIN" --config "$f" "$@" ) >"$TMP/out" 2>&1 || RC=$?
  OUT=$(head -c 4000 "$TMP/out")
  CASES=$((CASES + 1))
  (( RC < 124 )) || fail "$f $*: exit $RC (crash, timeout or killed): $OUT"
}
# good NAME: $TMP/NAME.toml passes --check: "config ok" and the memory it needs, nothing else.
good() {
  run "$TMP/$1.toml" --check
  [[ $RC -eq 0 && $(grep -v '^memory: needs about [0-9]* MiB ' "$TMP/out") == "config ok" ]] \
    || fail "$1: want config ok, got exit $RC: $OUT"
  grep -q '^memory: needs about [0-9]* MiB ' "$TMP/out" || fail "$1: no memory line: $OUT"
}
# bad NAME REGEX [ARGS...]: exit 2 and a line of the output matches REGEX (ARGS replace
# --check). FILE, when set, is the config instead of $TMP/NAME.toml.
bad() {
  local name=$1 want=$2; shift 2
  run "${FILE:-$TMP/$name.toml}" "${@:---check}"
  [[ $RC -eq 2 ]] || fail "$name: exit $RC (want 2): $OUT"
  grep -Eq -- "$want" "$TMP/out" || fail "$name: '$(head -c 300 "$TMP/out")' does not match /$want/"
}

PORT='[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]'
SERVICE='[[service]]
name = "web"
vip = "203.0.113.10"
port = 80'
BACKEND='backend = [{ address = "198.51.100.11", port = 8080 }]'

# ---- every numeric limit: both bounds pass, one past either bound is a positioned error ----
# TABLE KEY LO HI. TABLE "port" and "service" are the array tables above.
LIMITS=(
  "gateway workers 1 32"
  "gateway drain_timeout_ms 0 600000"
  "port rx_descriptors 64 16384"
  "port tx_descriptors 64 16384"
  "port mtu 576 9000"
  "service port 1 65535"
  "service gue_port 1 65535"
  "conntrack max_flows 1024 67108864"
  "conntrack tcp_syn 1 604800"
  "conntrack tcp_established 1 604800"
  "conntrack tcp_fin 1 604800"
  "conntrack tcp_time_wait 1 604800"
  "conntrack udp 1 604800"
  "conntrack icmp 1 604800"
  "proxy idle_timeout_s 0 604800"
  "proxy max_connections 64 4194304"
  "proxy buffer_bytes 16384 67108864"
  "proxy memory_mb 1 1048576"
  "proxy time_wait_s 1 240"
  "hbone port 1 65535"
  "hbone cert_ttl 60 31536000"
  "control build_threads 0 64"
)
# config KEYS...: "table key value" triples (one string each) -> a config on stdout. Keys of
# the same table share its header; port and service keys go into their table.
config() {
  local port_keys="" service_keys="" tables=""
  declare -A by_table=()
  for kv in "$@"; do
    read -r t k v <<<"$kv"
    case $t in
      port) port_keys+="$k = $v"$'\n' ;;
      service) service_keys+="$k = $v"$'\n' ;;
      *) by_table[$t]+="$k = $v"$'\n' ;;
    esac
  done
  for t in "${!by_table[@]}"; do tables+="[$t]"$'\n'"${by_table[$t]}"; done
  # The service's own port key replaces the default one.
  local service=$SERVICE
  [[ $'\n'$service_keys == *$'\n'"port = "* ]] && service=${SERVICE%$'\n'port = 80}
  printf '%s\n%s%s\n%s%s\n%s' "$PORT" "$port_keys" "$service" "$service_keys" "$BACKEND" "$tables"
}
lo=() hi=()
for l in "${LIMITS[@]}"; do
  read -r t k min max <<<"$l"
  lo+=("$t $k $min")
  hi+=("$t $k $max")
done
config "${lo[@]}" >"$TMP/limits_lo.toml"; good limits_lo
config "${hi[@]}" >"$TMP/limits_hi.toml"; good limits_hi
for l in "${LIMITS[@]}"; do
  read -r t k min max <<<"$l"
  case $t in port|service) key="$t\[0\]\.$k" ;; *) key="$t\.$k" ;; esac
  for v in $((min - 1)) $((max + 1)); do
    name="${t}_${k}_$v"
    config "$t $k $v" >"$TMP/$name.toml"
    bad "$name" "^$TMP/$name.toml:[0-9]+:[0-9]+: $key: expected an integer"
  done
done
# Backend port and weight, and the Maglev table sizes (a prime 7..4194301, or 0).
for kv in "port 0" "port 65536" "weight -1" "weight 65536"; do
  read -r k v <<<"$kv"
  name="backend_${k}_$v"
  printf '%s\n%s\nbackend = [{ address = "198.51.100.11", port = 8080, %s = %s }]\n' \
    "$PORT" "$SERVICE" "$k" "$v" | sed 's/port = 8080, port = /port = /' >"$TMP/$name.toml"
  bad "$name" "^$TMP/$name.toml:[0-9]+:[0-9]+: service\[0\]\.backend\[0\]\.$k: expected an integer"
done
for ts in 7 4194301; do
  printf '%s\n%s\ntable_size = %s\n%s\n[mesh]\ntable_size = %s\n' "$PORT" "$SERVICE" "$ts" "$BACKEND" "$ts" >"$TMP/table_$ts.toml"
  good "table_$ts"
done
for ts in 5 4194302 4194303; do
  printf '%s\n%s\ntable_size = %s\n%s\n' "$PORT" "$SERVICE" "$ts" "$BACKEND" >"$TMP/table_$ts.toml"
  bad "table_$ts" "^$TMP/table_$ts.toml:[0-9]+:[0-9]+: service\[0\]\.table_size: expected an integer"
  printf '%s\n[mesh]\ntable_size = %s\n' "$PORT" "$ts" >"$TMP/mesh_table_$ts.toml"
  bad "mesh_table_$ts" "^$TMP/mesh_table_$ts.toml:[0-9]+:[0-9]+: mesh\.table_size: expected an integer"
done

# ---- the dataplane's array limits, from the config and the command line ----
ports() { for i in $(seq 0 $(($1 - 1))); do printf '[[port]]\nname = "p%d"\ndevice = "net_null%d"\n' "$i" "$i"; done; }
ports 8 >"$TMP/ports_8.toml"; good ports_8
ports 9 >"$TMP/ports_9.toml"
bad ports_9 "^$TMP/ports_9.toml:25:1: port\[8\]: too many ports: 9 \(at most 8"
printf '[gateway]\nworkers = 65\n%s\n' "$PORT" >"$TMP/workers_65.toml"
bad workers_65 "^$TMP/workers_65.toml:2:11: gateway\.workers: expected an integer 1\.\.32, got 65"
run "$TMP/limits_lo.toml" --check --workers 32
[[ $RC -eq 0 ]] || fail "--workers 32: exit $RC: $OUT"
for w in 0 33 65; do
  run "$TMP/limits_lo.toml" --check --workers "$w"
  [[ $RC -eq 2 ]] || fail "--workers $w: exit $RC (want 2): $OUT"
done

# ---- files that are not config files ----
FILE=/dev/zero bad dev_zero "^/dev/zero: config file is not a regular file \(a character device\)"
mkfifo "$TMP/fifo.toml"
FILE=$TMP/fifo.toml bad fifo "^$TMP/fifo.toml: config file is not a regular file \(a FIFO\)"
mkdir "$TMP/dir.toml"
FILE=$TMP/dir.toml bad directory "^$TMP/dir.toml: config file is a directory"
truncate -s 50M "$TMP/huge.toml"
bad huge "^$TMP/huge.toml: config file is larger than 16777216 bytes"
# Binary garbage (fixed bytes, NULs and high bytes included): a TOML error with its position.
python3 -c "import random,sys; r=random.Random(7); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(65536)))" >"$TMP/garbage.toml"
bad garbage "^$TMP/garbage.toml:[0-9]+:[0-9]+: invalid TOML"
FILE=/nonexistent/meshgate.toml bad missing "^/nonexistent/meshgate.toml: config file cannot be opened: No such file"

# ---- text that is not what it should be ----
printf '%s\n[[service]]\nname = "we\\u0000b"\nvip = "203.0.113.10"\nport = 80\n%s\n' "$PORT" "$BACKEND" >"$TMP/nul_name.toml"
bad nul_name "^$TMP/nul_name.toml:6:8: service\[0\]\.name: control character 0x00 at byte 2"
python3 -c "print('k' * (1 << 20) + ' = 1')" >"$TMP/huge_key.toml"
printf '%s\n' "$PORT" >>"$TMP/huge_key.toml"
bad huge_key "^$TMP/huge_key.toml:1:1: k{64}…: unknown key"
(( $(wc -c <"$TMP/out") < 1000 )) || fail "huge_key: the error is $(wc -c <"$TMP/out") bytes"
for vip in 255.255.255.255 0.0.0.0 224.0.0.1 127.0.0.1 :: ff02::1 ::1 198.51.100.1; do
  name="vip_${vip//[.:]/_}"
  printf '%s\n[[service]]\nname = "web"\nvip = "%s"\nport = 80\nbackend = [{ address = "%s", port = 8080 }]\n' \
    "$PORT" "$vip" "$([[ $vip == *:* ]] && echo 2001:db8::11 || echo 198.51.100.11)" >"$TMP/$name.toml"
  bad "$name" "^$TMP/$name.toml:7:7: service\[0\]\.vip: (not a usable VIP|VIP 198\.51\.100\.1 is a local address)"
done

# ---- files the config names ----
FULLNAT='[fullnat]
local_addresses = ["198.51.100.2"]'
printf '%s\n%s\n[hbone]\ncert_chain = "/dev/zero"\nprivate_key = "/dev/zero"\n' "$PORT" "$FULLNAT" >"$TMP/cert_zero.toml"
bad cert_zero "^$TMP/cert_zero.toml:8:14: hbone\.cert_chain: \"/dev/zero\" is not a regular file"
truncate -s 2M "$TMP/big.pem"
printf '%s\n%s\n[hbone]\ncert_chain = "%s"\nprivate_key = "%s"\n' "$PORT" "$FULLNAT" "$TMP/big.pem" "$TMP/big.pem" >"$TMP/cert_big.toml"
bad cert_big "^$TMP/cert_big.toml:8:14: hbone\.cert_chain: \".*big.pem\" is larger than 1048576 bytes"
printf '%s\n[mesh]\nsource = "file"\npath = "%s"\n' "$PORT" "$TMP/fifo.toml" >"$TMP/mesh_fifo.toml"
bad mesh_fifo "^$TMP/mesh_fifo.toml:7:8: mesh\.path: \".*fifo.toml\" is not a regular file \(a FIFO\)"
printf '%s\n[mesh]\nsource = "file"\npath = "/dev/zero"\n' "$PORT" >"$TMP/mesh_zero.toml"
bad mesh_zero "^$TMP/mesh_zero.toml:7:8: mesh\.path: \"/dev/zero\" is not a regular file"

# ---- devices ----
device() { printf '[[port]]\nname = "net0"\ndevice = "%s"\n' "$1" >"$TMP/$2.toml"; }
device net_afpacket0,iface=lo typo; bad typo "^$TMP/typo.toml:3:10: port\[0\]\.device: unknown DPDK net driver in \"net_afpacket0\" \(did you mean 'net_af_packet'\?\)"
device eth0 eth0; bad eth0 "^$TMP/eth0.toml:3:10: port\[0\]\.device: unknown DPDK net driver in \"eth0\""
device 0000:ff:1f.7 pci; bad pci "^$TMP/pci.toml:3:10: port\[0\]\.device: PCI device 0000:ff:1f\.7 is absent"
device "net_af_packet0,iface=mgnope$ID" iface; bad iface "^$TMP/iface.toml:3:10: port\[0\]\.device: network interface \"mgnope$ID\" does not exist"
device net_af_packet0,iface=lo lo_ok; good lo_ok
# Without CAP_NET_RAW the probe fails at start (exit 1): the error names the capability.
printf '\n[admin]\nlisten = ""\n' >>"$TMP/lo_ok.toml"
RC=0
timeout 30 setpriv --inh-caps=-net_raw --bounding-set=-net_raw --ambient-caps=-net_raw \
  "$MG_BIN" --config "$TMP/lo_ok.toml" >"$TMP/out" 2>&1 || RC=$?
[[ $RC -eq 1 ]] || fail "af_packet without CAP_NET_RAW: exit $RC (want 1): $(head -c 500 "$TMP/out")"
grep -q "event=port_setup_failed .*net_af_packet opens a raw socket: run as root or grant CAP_NET_RAW" \
  "$TMP/out" || fail "af_packet without CAP_NET_RAW: $(grep error "$TMP/out")"

# ---- the admin API on a wildcard address: accepted, with a warning (it has no authentication) ----
for listen in "0.0.0.0:15000" "[::]:15000"; do
  printf '%s\n[admin]\nlisten = "%s"\n' "$PORT" "$listen" >"$TMP/admin_any.toml"
  run "$TMP/admin_any.toml" --check
  [[ $RC -eq 0 ]] || fail "admin on $listen: exit $RC: $OUT"
  grep -q "^config ok$" "$TMP/out" || fail "admin on $listen: no 'config ok': $OUT"
  grep -qF "level=warn event=admin_unauthenticated listen=\"$listen\"" "$TMP/out" \
    || fail "admin on $listen: no warning: $OUT"
done
good limits_lo  # admin on 127.0.0.1: no warning

# ---- the command line's output files: a usage error before anything starts ----
cp "$TMP/limits_lo.toml" "$TMP/cli.toml"
: >"$TMP/in.pcap"
FILE=$TMP/cli.toml bad pcap_out_dir "^meshgate: --pcap-out: directory \"/nonexistent\" does not exist" --pcap-in "$TMP/in.pcap" --pcap-out /nonexistent/out.pcap
FILE=$TMP/cli.toml bad pcap_out_is_dir "^meshgate: --pcap-out: \"$TMP\" is a directory" --pcap-in "$TMP/in.pcap" --pcap-out "$TMP"
FILE=$TMP/cli.toml bad stats_json_dir "^meshgate: --stats-json: directory \"/nonexistent\" does not exist" --stats-json /nonexistent/s.json

# ---- memory: a config whose Maglev tables cannot fit fails --check and its start (before the
# EAL), naming the figures ----
avail_mb=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
n=$(( avail_mb / 16 + 64 ))  # 16 MiB tables (4194301 slots), 1 GiB past what is available
{ printf '%s\n[admin]\nlisten = ""\n' "$PORT"
  for i in $(seq 1 "$n"); do
    printf '[[service]]\nname = "s%d"\nvip = "203.0.113.10"\nport = %d\ntable_size = 4194301\n%s\n' "$i" "$i" "$BACKEND"
  done; } >"$TMP/tables.toml"
FILE=$TMP/tables.toml bad tables_check "^$TMP/tables.toml:[0-9]+:[0-9]+: service\[[0-9]+\]\.table_size: memory: the config needs about [0-9]+ MiB \(.*Maglev tables of $n services [0-9]+ MiB\), host has [0-9]+ MiB available"
FILE=$TMP/tables.toml bad tables_start "event=memory_insufficient needed_mb=[0-9]+ available_mb=[0-9]+ .*maglev_tables_mb=[0-9]+ services=$n " --log-level info
grep -q "event=eal_ready" "$TMP/out" && fail "tables_start: the EAL started"
echo "PASS ($CASES runs)"
