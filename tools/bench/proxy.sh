#!/usr/bin/env bash
# Proxy-mode figures for docs/PERFORMANCE.md: meshgate's mode = "proxy" (one worker) against the
# same client talking to the backend directly and through HAProxy (the kernel-socket proxy, one
# thread), on the same namespaces, in the same run.
#
#   tools/bench/proxy.sh [--repeat N] [--mb MB] [--requests N] [--sni [--sni-requests N]]
#                                                                  (as root, after a build)
#
# Topology (every namespace created here and removed at exit):
#   client ns: eth0 192.0.2.2 -> meshgate's port "client" (net_af_packet on a veth)
#              eth1 203.0.113.130/25 -> the HAProxy namespace (203.0.113.129)
#              eth2 198.51.100.50/24 -> the backend bridge (direct)
#   bridge ns: meshgate's port "backend" (198.51.100.1, fullnat 198.51.100.2), HAProxy's
#              198.51.100.3, the client's eth2, the backend 198.51.100.11 (nginx, port 8080)
# CPUs: the proxy under test (meshgate's worker lcore, or HAProxy) on CPU 1; client (curl) and
# backend (nginx) on CPU 0; meshgate's control thread on CPU 0 as well.
# A fourth path, meshgate fullnat (packet forwarding with NAT, no termination) through the same
# gateway, ports and vdevs, separates the cost of terminating TCP from the cost of the vdevs.
# Workloads: one download of --mb MiB (nginx sendfile -> curl, Mbit/s), and --requests
# HTTP/1.0 requests of an empty file by curl with 32 transfers in parallel, each on a new
# connection (connections/s). Every figure is the median of --repeat runs; ratios are against
# "direct" and against HAProxy. Writes build/bench/proxy/proxy.json.
#
# --sni adds TLS connection-rate rows (the rows above run unchanged): nginx serves HTTPS on
# 198.51.100.11:8443 (a self-signed ECDSA P-256 certificate made here; no session cache and no
# session tickets, so every connection is a full TLS 1.3 handshake), and curl makes
# --sni-requests HTTPS requests of the empty file, 32 in parallel, each on a new connection,
# for the name bench.example.com through: meshgate `proxy` mode on 203.0.113.22:443 (TLS
# passthrough, no name read); a meshgate [[listener]] with match = "sni" on 203.0.113.31:443
# whose exact route for the name picks that same service, among 41 other routes (30 exact, 11
# wildcards, *.example.com among them); HAProxy `mode tcp` on 203.0.113.129:443 reading
# req.ssl_sni, with the same other names as use_backend rules (the exact ones ahead of the
# benchmark's); and direct. The handshakes cost CPU on CPU 0 (curl and nginx): each row also
# gives curl's and nginx's CPU time per connection, and the proxy's time on CPU 1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MG_BIN=${MG_BIN:-$ROOT/build/apps/meshgate}
OUT=$ROOT/build/bench/proxy
REPEAT=3 MB=256 REQUESTS=20000 SNI=0 SNI_REQUESTS=6000
while (($#)); do
  case $1 in
    --repeat) REPEAT=$2; shift 2 ;;
    --mb) MB=$2; shift 2 ;;
    --requests) REQUESTS=$2; shift 2 ;;
    --sni) SNI=1; shift ;;
    --sni-requests) SNI_REQUESTS=$2; shift 2 ;;
    *) echo "usage: $0 [--repeat N] [--mb MB] [--requests N] [--sni [--sni-requests N]]" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "needs root (namespaces)" >&2; exit 2; }
[[ -x $MG_BIN ]] || { echo "no meshgate at $MG_BIN (build first)" >&2; exit 2; }
command -v haproxy >/dev/null || { echo "haproxy missing: run tools/setup.sh" >&2; exit 2; }
command -v nginx >/dev/null || { echo "nginx missing: run tools/setup.sh" >&2; exit 2; }
(( $(nproc) >= 2 )) || { echo "needs 2 CPUs (proxy on CPU 1, peers on CPU 0)" >&2; exit 2; }

ID=$(( $$ % 100000 ))
TMP=$(mktemp -d /tmp/mg-pxbench.XXXXXX)
CLI=pbc$ID SW=pbs$ID BE=pbb$ID KP=pbk$ID GWC=pbgc$ID GWB=pbgb$ID
NETNS=() LINKS=() PIDS=()
cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for l in "${LINKS[@]}"; do ip link del "$l" 2>/dev/null || true; done
  for n in "${NETNS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
off() { ip netns exec "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true; }
# Foreground commands only: a background `X ... &` would be a subshell, and killing it would
# leave the command running (background ones use `ip netns exec`, which execs the command).
X() { ip netns exec "$@"; }

for n in "$CLI" "$SW" "$BE" "$KP"; do ip netns add "$n"; NETNS+=("$n"); X "$n" ip link set lo up; done
X "$SW" ip link add br0 type bridge; X "$SW" ip link set br0 up
bridge_port() {  # bridge_port NS IF PEER_IF: veth NS/IF <-> SW/PEER_IF on br0
  X "$1" ip link add "$2" type veth peer name "$3" netns "$SW"
  X "$SW" ip link set "$3" master br0 up; off "$SW" "$3"
  X "$1" ip link set "$2" up; off "$1" "$2"
}
# meshgate's two ports: veths whose root-namespace ends it opens with net_af_packet.
ip link add "$GWC" type veth peer name eth0 netns "$CLI"; LINKS+=("$GWC")
ip link add "$GWB" type veth peer name gw netns "$SW"; LINKS+=("$GWB")
for d in "$GWC" "$GWB"; do
  sysctl -qw "net.ipv6.conf.$d.disable_ipv6=1"; ip link set "$d" up
  ethtool -K "$d" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
done
X "$SW" ip link set gw master br0 up; off "$SW" gw
X "$CLI" ip link set eth0 up; off "$CLI" eth0
X "$CLI" ip addr add 192.0.2.2/24 dev eth0
X "$CLI" ip route add default via 192.0.2.1
bridge_port "$CLI" eth2 c2
X "$CLI" ip addr add 198.51.100.50/24 dev eth2
bridge_port "$BE" eth0 be
X "$BE" ip addr add 198.51.100.11/24 dev eth0
X "$BE" ip route add default via 198.51.100.1
X "$KP" ip link add k0 type veth peer name eth1 netns "$CLI"
X "$KP" ip link set k0 up; off "$KP" k0
X "$CLI" ip link set eth1 up; off "$CLI" eth1
X "$KP" ip addr add 203.0.113.129/25 dev k0
X "$CLI" ip addr add 203.0.113.130/25 dev eth1
bridge_port "$KP" k1 kp
X "$KP" ip addr add 198.51.100.3/24 dev k1
# Short connections: the client may reuse ports its TIME-WAITs hold (timestamps make it safe).
for n in "$CLI" "$KP" "$BE"; do
  X "$n" sysctl -qw net.ipv4.tcp_tw_reuse=1 net.ipv4.ip_local_port_range="1024 65000" \
    net.core.somaxconn=8192 net.ipv4.tcp_max_syn_backlog=8192
done

mkdir -p "$TMP/www" "$TMP/nginx"
SNI_NAME=bench.example.com
# The SNI rows' other names: listener routes and HAProxy rules that do not match SNI_NAME but are
# in the table it is looked up in (a wildcard *.example.com does match it: the exact route wins).
OTHER_EXACT=() OTHER_WILD=()
for ((i = 1; i <= 30; ++i)); do OTHER_EXACT+=("app$i.example.com"); done
for ((i = 1; i <= 10; ++i)); do OTHER_WILD+=("t$i.example.net"); done
OTHER_WILD+=(example.com)
NGINX_TLS= HAPROXY_TLS= MG_TLS=
if ((SNI)); then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=$SNI_NAME" -addext "subjectAltName=DNS:$SNI_NAME" \
    -keyout "$TMP/tls.key" -out "$TMP/tls.crt" 2>/dev/null
  # No resumption: every connection a full handshake, the same work on every path whether or
  # not curl's parallel transfers share a session cache.
  NGINX_TLS="  server {
    listen 198.51.100.11:8443 ssl backlog=8192;
    ssl_certificate $TMP/tls.crt;
    ssl_certificate_key $TMP/tls.key;
    ssl_protocols TLSv1.3;
    ssl_session_cache off;
    ssl_session_tickets off;
    root $TMP/www;
  }"
  HAPROXY_TLS="frontend ft
  bind 203.0.113.129:443
  tcp-request inspect-delay 5s
  tcp-request content accept if { req_ssl_hello_type 1 }"
  for h in "${OTHER_EXACT[@]}"; do HAPROXY_TLS+=$'\n'"  use_backend bto if { req.ssl_sni -i $h }"; done
  HAPROXY_TLS+=$'\n'"  use_backend bt if { req.ssl_sni -i $SNI_NAME }"
  for h in "${OTHER_WILD[@]}"; do HAPROXY_TLS+=$'\n'"  use_backend bto if { req.ssl_sni -i -m end .$h }"; done
  HAPROXY_TLS+="
backend bt
  server s1 198.51.100.11:8443
backend bto
  server s1 198.51.100.11:8443"
  # Two proxy-mode services on the TLS backend: "tls" (the proxy row, and the listener's route
  # for SNI_NAME) and "tlsother" (every other route).
  for sv in tls:203.0.113.22 tlsother:203.0.113.23; do
    MG_TLS+="[[service]]
name = \"${sv%:*}\"
vip = \"${sv#*:}\"
port = 443
mode = \"proxy\"
  [[service.backend]]
  address = \"198.51.100.11\"
  port = 8443
"
  done
  MG_TLS+="[[listener]]
name = \"sni\"
vip = \"203.0.113.31\"
port = 443
match = \"sni\""
  route() { MG_TLS+=$'\n'"  [[listener.route]]"$'\n'"  hostnames = [\"$1\"]"$'\n'"  service = \"$2\""; }
  for h in "${OTHER_EXACT[@]}"; do route "$h" tlsother; done
  route "$SNI_NAME" tls
  for h in "${OTHER_WILD[@]}"; do route "*.$h" tlsother; done
fi
head -c "$((MB << 20))" /dev/zero >"$TMP/www/big"
printf x >"$TMP/www/x"
: >"$TMP/www/empty"  # the connection-rate requests: only the status codes reach stdout
cat >"$TMP/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $TMP/nginx.pid;
error_log stderr warn;
events { worker_connections 8192; }
http {
  access_log off;
  sendfile on;
  keepalive_timeout 0;
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
  server { listen 198.51.100.11:8080 backlog=8192; root $TMP/www; }
$NGINX_TLS
}
EOF
ip netns exec "$BE" taskset -c 0 nginx -p "$TMP/nginx" -c "$TMP/nginx.conf" -e stderr >"$TMP/nginx.log" 2>&1 &
PIDS+=($!)
cat >"$TMP/haproxy.cfg" <<EOF
global
  nbthread 1
  maxconn 9000
defaults
  mode tcp
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend f
  bind 203.0.113.129:80
  default_backend b
backend b
  server s1 198.51.100.11:8080
$HAPROXY_TLS
EOF
ip netns exec "$KP" taskset -c 1 haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
PIDS+=($!)
ADMIN="127.$(( 100 + ID / 65536 )).$(( (ID / 256) % 256 )).$(( ID % 256 )):15000"
cat >"$TMP/gw.toml" <<EOF
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_pbc$ID,iface=$GWC"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_pbb$ID,iface=$GWB"
addresses = ["198.51.100.1/24"]
[fullnat]
local_addresses = ["198.51.100.2"]
[proxy]
# Short connections: every session leaves one TIME-WAIT for time_wait_s.
time_wait_s = 2
max_connections = 65536
[conntrack]
max_flows = 65536
[[service]]
name = "px"
vip = "203.0.113.20"
port = 80
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "fn"
vip = "203.0.113.21"
port = 80
mode = "fullnat"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
$MG_TLS
[admin]
listen = "$ADMIN"
EOF
# The worker lcore on CPU 1, the control thread on CPU 0 (meshgate maps lcores to its affinity).
taskset -c 0,1 "$MG_BIN" --config "$TMP/gw.toml" --stats-json "$TMP/stats.json" >"$TMP/gw.log" 2>&1 &
MG_PID=$!
PIDS+=("$MG_PID")
deadline=$(( $(date +%s) + 20 ))
until grep -q event=workers_started "$TMP/gw.log"; do
  (( $(date +%s) < deadline )) || { cat "$TMP/gw.log"; echo "meshgate did not start" >&2; exit 1; }
  sleep 0.1
done
until X "$CLI" curl -s -o /dev/null --max-time 1 http://198.51.100.11:8080/x &&
      X "$CLI" curl -s -o /dev/null --max-time 1 http://203.0.113.129/x &&
      X "$CLI" curl -s -o /dev/null --max-time 1 http://203.0.113.20/x &&
      X "$CLI" curl -s -o /dev/null --max-time 1 http://203.0.113.21/x; do
  (( $(date +%s) < deadline + 10 )) || { echo "a path does not answer" >&2; cat "$TMP"/*.log; exit 1; }
  sleep 0.2
done
declare -A SNI_ADDR=([direct]=198.51.100.11:8443 [proxy]=203.0.113.22:443
                     [listener]=203.0.113.31:443 [haproxy]=203.0.113.129:443)
SNI_PATHS=(direct proxy listener haproxy)
sni_curl() {  # sni_curl PATH CURL_ARGS...: curl in the client namespace on CPU 0, to SNI_NAME
  local a=${SNI_ADDR[$1]}; shift
  X "$CLI" taskset -c 0 timeout 120 curl -sk --resolve "$SNI_NAME:${a#*:}:${a%:*}" "$@"
}
if ((SNI)); then
  for p in "${SNI_PATHS[@]}"; do
    a=${SNI_ADDR[$p]}
    until sni_curl "$p" -o /dev/null --max-time 1 "https://$SNI_NAME:${a#*:}/x"; do
      (( $(date +%s) < deadline + 20 )) || { echo "SNI path $p does not answer" >&2; cat "$TMP"/*.log; exit 1; }
      sleep 0.2
    done
  done
fi

declare -A URL=([direct]=http://198.51.100.11:8080 [meshgate]=http://203.0.113.20
                [haproxy]=http://203.0.113.129 [fullnat]=http://203.0.113.21)
PATHS=(direct meshgate haproxy fullnat)
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
download() {  # Mbit/s of one download
  X "$CLI" taskset -c 0 curl -s -o /dev/null --max-time 120 -w '%{speed_download} %{size_download}\n' \
    "${URL[$1]}/big" | awk -v want=$((MB << 20)) '$2 == want { printf "%.0f\n", $1 * 8 / 1e6 } $2 != want { print "FAIL" }'
}
cps() {  # connections/s of REQUESTS one-request connections, 32 in parallel
  local t0 t1 n
  t0=$(date +%s.%N)
  n=$(X "$CLI" taskset -c 0 timeout 120 curl -s --no-progress-meter -0 -Z --parallel-max 32 -w '%{http_code}\n' \
        "${URL[$1]}/empty?[1-$REQUESTS]" | grep -c '^200$' || true)
  t1=$(date +%s.%N)
  (( n == REQUESTS )) || { echo "FAIL"; return; }
  python3 -c "print(f'{$n / ($t1 - $t0):.0f}')"
}
# SNI rows: connections/s of SNI_REQUESTS HTTPS requests, each on a new TLS connection; the
# CPU time per connection of curl and of nginx (both on CPU 0) during the run, and the proxy's
# on CPU 1: HAProxy's CPU time, or the meshgate worker's busy cycles (cycles of loop iterations
# that received packets; the worker polls all the time) over the TSC rate.
NGINX_PID=${PIDS[0]} HAPROXY_PID=${PIDS[1]}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TICK_US=$(( 1000000 / $(getconf CLK_TCK) ))
worker_busy_us() {
  curl -s --max-time 5 "http://$ADMIN/stats" |
    python3 -c "import json, sys; j = json.load(sys.stdin); \
print(sum(w['busy_cycles'] for w in j['workers']) * 1e6 / j['tsc_hz'])"
}
proxy_cpu_us() {  # the proxy's CPU so far on path $1, in µs; 0 for direct
  case $1 in
    direct) echo 0 ;;
    haproxy) echo $(( $(cpu_ticks "$HAPROXY_PID") * TICK_US )) ;;
    *) worker_busy_us ;;
  esac
}
cps_sni() {  # prints "conn/s curl_us/conn nginx_us/conn proxy_us/conn"
  local p=$1 a=${SNI_ADDR[$1]} t0 t1 n g0 g1 x0 x1 TIMEFORMAT='%U %S'
  x0=$(proxy_cpu_us "$p"); g0=$(cpu_ticks "$NGINX_PID"); t0=$(date +%s.%N)
  { time sni_curl "$p" --no-progress-meter -0 -Z --parallel-max 32 -w '%{http_code}\n' \
      "https://$SNI_NAME:${a#*:}/empty?[1-$SNI_REQUESTS]" >"$TMP/sni.out" 2>/dev/null; } 2>"$TMP/sni.time" || true
  t1=$(date +%s.%N); g1=$(cpu_ticks "$NGINX_PID"); x1=$(proxy_cpu_us "$p")
  n=$(grep -c '^200$' "$TMP/sni.out" || true)
  (( n == SNI_REQUESTS )) || { echo "FAIL"; return; }
  python3 -c "u, s = map(float, '$(tail -1 "$TMP/sni.time")'.split()); \
print(f'{$n / ($t1 - $t0):.0f} {(u + s) * 1e6 / $n:.0f} {($g1 - $g0) * $TICK_US / $n:.0f} {($x1 - $x0) / $n:.0f}')"
}
declare -A TPUT CPS
for p in "${PATHS[@]}"; do
  : >"$TMP/tput.$p"; : >"$TMP/cps.$p"
done
for p in "${SNI_PATHS[@]}"; do : >"$TMP/sni.$p"; done
for ((r = 0; r < REPEAT; ++r)); do
  for p in "${PATHS[@]}"; do
    download "$p" >>"$TMP/tput.$p"
    cps "$p" >>"$TMP/cps.$p"
  done
  if ((SNI)); then
    for p in "${SNI_PATHS[@]}"; do cps_sni "$p" >>"$TMP/sni.$p"; done
  fi
done
for p in "${PATHS[@]}"; do
  if grep -q FAIL "$TMP/tput.$p" "$TMP/cps.$p"; then echo "$p: a run failed: $(cat "$TMP/tput.$p" "$TMP/cps.$p")" >&2; exit 1; fi
  TPUT[$p]=$(median <"$TMP/tput.$p")
  CPS[$p]=$(median <"$TMP/cps.$p")
done
declare -A SNI_CPS SNI_CURL_US SNI_NGINX_US SNI_PROXY_US
if ((SNI)); then
  for p in "${SNI_PATHS[@]}"; do
    if grep -q FAIL "$TMP/sni.$p"; then echo "SNI $p: a run failed: $(cat "$TMP/sni.$p")" >&2; exit 1; fi
    SNI_CPS[$p]=$(cut -d' ' -f1 "$TMP/sni.$p" | median)
    SNI_CURL_US[$p]=$(cut -d' ' -f2 "$TMP/sni.$p" | median)
    SNI_NGINX_US[$p]=$(cut -d' ' -f3 "$TMP/sni.$p" | median)
    SNI_PROXY_US[$p]=$(cut -d' ' -f4 "$TMP/sni.$p" | median)
  done
fi
kill -TERM "$MG_PID"; wait "$MG_PID" || true
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
mkdir -p "$OUT"
{
  printf '| path | download Mbit/s (%s MiB) | connections/s (%s requests, 32 parallel) |\n' "$MB" "$REQUESTS"
  printf '|---|---|---|\n'
  for p in "${PATHS[@]}"; do printf '| %s | %s | %s |\n' "$p" "${TPUT[$p]}" "${CPS[$p]}"; done
  printf '\nmeshgate / direct: throughput %s, connections/s %s\n' \
    "$(ratio "${TPUT[meshgate]}" "${TPUT[direct]}")" "$(ratio "${CPS[meshgate]}" "${CPS[direct]}")"
  printf 'meshgate / haproxy: throughput %s, connections/s %s\n' \
    "$(ratio "${TPUT[meshgate]}" "${TPUT[haproxy]}")" "$(ratio "${CPS[meshgate]}" "${CPS[haproxy]}")"
  printf 'meshgate proxy / meshgate fullnat: throughput %s, connections/s %s\n' \
    "$(ratio "${TPUT[meshgate]}" "${TPUT[fullnat]}")" "$(ratio "${CPS[meshgate]}" "${CPS[fullnat]}")"
  for p in "${PATHS[@]}"; do
    printf 'samples %s: Mbit/s %s; conn/s %s\n' "$p" "$(paste -sd, "$TMP/tput.$p")" "$(paste -sd, "$TMP/cps.$p")"
  done
  if ((SNI)); then
    printf '\n| TLS path (%s, %s requests, 32 parallel) | connections/s | samples | curl CPU µs/conn | nginx CPU µs/conn | proxy CPU µs/conn |\n' \
      "$SNI_NAME" "$SNI_REQUESTS"
    printf '|---|---|---|---|---|---|\n'
    for p in "${SNI_PATHS[@]}"; do
      printf '| %s | %s | %s | %s | %s | %s |\n' "$p" "${SNI_CPS[$p]}" "$(cut -d' ' -f1 "$TMP/sni.$p" | paste -sd,)" \
        "${SNI_CURL_US[$p]}" "${SNI_NGINX_US[$p]}" "${SNI_PROXY_US[$p]}"
    done
    printf '\nSNI listener / meshgate proxy: %s; SNI listener / haproxy: %s; listener / direct: %s\n' \
      "$(ratio "${SNI_CPS[listener]}" "${SNI_CPS[proxy]}")" "$(ratio "${SNI_CPS[listener]}" "${SNI_CPS[haproxy]}")" \
      "$(ratio "${SNI_CPS[listener]}" "${SNI_CPS[direct]}")"
  fi
  printf 'load average at the end: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/proxy.txt"
python3 - "$TMP/stats.json" "$OUT/proxy.json" <<EOF
import json, sys
s = json.load(open(sys.argv[1]))
out = {"mb": $MB, "requests": $REQUESTS, "repeat": $REPEAT,
       "download_mbit_s": {"direct": ${TPUT[direct]}, "meshgate": ${TPUT[meshgate]}, "haproxy": ${TPUT[haproxy]}, "meshgate_fullnat": ${TPUT[fullnat]}},
       "connections_per_s": {"direct": ${CPS[direct]}, "meshgate": ${CPS[meshgate]}, "haproxy": ${CPS[haproxy]}, "meshgate_fullnat": ${CPS[fullnat]}},
       "meshgate_proxy": s.get("proxy"), "meshgate_drops": {k: v for k, v in s["drops"].items() if v}}
if $SNI:
    paths = "${SNI_PATHS[*]}".split()
    rows = {p: [[float(x) for x in l.split()] for l in open(f"$TMP/sni.{p}")] for p in paths}
    def med(p, i): return sorted(r[i] for r in rows[p])[(len(rows[p]) - 1) // 2]
    out["sni"] = {"name": "$SNI_NAME", "requests": $SNI_REQUESTS,
                  "connections_per_s": {p: med(p, 0) for p in paths},
                  "curl_cpu_us_per_connection": {p: med(p, 1) for p in paths},
                  "nginx_cpu_us_per_connection": {p: med(p, 2) for p in paths},
                  "proxy_cpu_us_per_connection": {p: med(p, 3) for p in paths if p != "direct"},
                  "samples_connections_per_s": {p: [r[0] for r in rows[p]] for p in paths},
                  "meshgate_listener": s.get("listeners")}
json.dump(out, open(sys.argv[2], "w"), indent=2)
EOF
echo "meshgate drops: $(python3 -c "import json; print(json.load(open('$OUT/proxy.json'))['meshgate_drops'])")"
