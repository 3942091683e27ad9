#!/usr/bin/env bash
# [[listener]]s against real clients and servers: a client namespace (192.0.2.2, 2001:db8:2::2)
# and a backend namespace (198.51.100.11-16) around meshgate on net_af_packet veth ports.
# nginx serves TLS on 8443 with a certificate of its own per backend address (self-signed, with
# the names the test asks for) and plain HTTP on 8080, each answering its own name.
#   SNI listener with a default: curl --resolve (verifying the backend's own certificate) and
#   openssl s_client -servername reach the exact, wildcard (one and two labels), regex and
#   default routes; exact beats wildcard; names are case-insensitive; a regex matches the whole
#   name; no SNI goes to the default; a ClientHello sent 7 bytes per segment is routed; a route
#   to a mesh service whose workload is an HBONE pod (nghttpx) goes over HBONE (SNI and Host
#   listeners); an IPv6 client.
#   Strict SNI listener (no default): no route, no SNI, not TLS, silence past peek_timeout_ms, a
#   mesh service missing from the mesh and one without endpoints are reset, each counted.
#   Host listener on port 80: routing by Host (port dropped, case-insensitive); no route, no
#   Host, a request head over peek_bytes are reset; a deny signature sent a few bytes per
#   segment (in the head, and in a body after the connection reached its backend) resets the
#   connection before the backend has the signature (the backend keeps every byte it got);
#   the same for [[service.deny]] on a proxy service; clean requests still pass.
# /metrics must count exactly what the test did, per listener, route and reason (and /stats
# agree); the bytes of the plain HTTP routes are what their backends read and wrote.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hbone/common.sh"
require_root
hbone_python
# On failure the gateway's non-zero listener / proxy / TCP counters and its open flows go to the
# log dump too.
fail() {
  curl -s --max-time 2 "http://$MG_ADMIN/metrics" 2>/dev/null |
    grep -E '^meshgate_(listener|signature|proxy|tcp|hbone_origin|drops)' | grep -v ' 0$' \
    >"$TMP/metrics-at-failure.log" || true
  curl -s --max-time 2 "http://$MG_ADMIN/flows?limit=50" >"$TMP/flows-at-failure.log" 2>&1 || true
  echo "FAIL: $*" >&2
  exit 1
}
for t in nginx nghttpx openssl curl; do command -v $t >/dev/null || fail "$t missing (tools/setup.sh)"; done
N=$MG_SOURCE_DIR/tests/integration/listeners/names.py
T0=$(date +%s)

CLI=mglc$ID BE=mglb$ID
add_host "$CLI" "glc$ID" 192.0.2.2/24 192.0.2.1 2001:db8:2::2/64 2001:db8:2::1
add_host "$BE" "glb$ID" 198.51.100.11/24 198.51.100.1
for a in 12 13 14 15 16; do ip netns exec "$BE" ip addr add "198.51.100.$a/24" dev eth0; done
C() { ip netns exec "$CLI" "$@"; }

# One self-signed certificate per TLS backend, CN backend-NAME, its SANs the names the test
# routes to it: curl --cacert that certificate only succeeds against that backend.
declare -A SANS=(
  [shop]="shop.example.com special.apps.example.com"
  [apps]="*.apps.example.com a.b.apps.example.com"
  [api]="api-42.example.net"
  [fallback]="apps.example.com nomatch.example.org xapi-1.example.net"
  [mesh]="mesh.example.com"
)
declare -A ADDR=([shop]=11 [apps]=12 [api]=13 [fallback]=14 [mesh]=16)
mkdir -p "$TMP/certs" "$TMP/nginx" "$TMP/rec"
for b in "${!SANS[@]}"; do
  san=$(printf 'DNS:%s,' ${SANS[$b]}); san=${san%,}
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj "/CN=backend-$b" -addext "subjectAltName=$san" \
    -keyout "$TMP/certs/$b-key.pem" -out "$TMP/certs/$b.pem" 2>/dev/null || fail "openssl req $b"
done
{
  cat <<NGINX
daemon off;
worker_processes 1;
user root;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx-error.log;
events { worker_connections 256; }
http {
  default_type text/plain;
  # A request per connection: nghttpx does not pass a client's FIN on to its CONNECT proxy, so
  # the stream of an HTTP request over HBONE ends (and is logged) when nginx closes.
  keepalive_timeout 0;
  log_format t '\$server_addr:\$server_port sni=\$ssl_server_name host=\$host from=\$remote_addr "\$request" in=\$request_length out=\$bytes_sent';
  access_log $TMP/nginx-access.log t;
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
NGINX
  for b in "${!ADDR[@]}"; do
    cat <<NGINX
  server {
    listen 198.51.100.${ADDR[$b]}:8443 ssl;
    ssl_certificate $TMP/certs/$b.pem;
    ssl_certificate_key $TMP/certs/$b-key.pem;
    return 200 "backend-$b\n";
  }
  server {
    listen 198.51.100.${ADDR[$b]}:8080;
    return 200 "http-$b\n";
  }
NGINX
  done
  echo "}"
} >"$TMP/nginx.conf"
ip netns exec "$BE" nginx -p "$TMP/nginx" -e "$TMP/nginx-error.log" -c "$TMP/nginx.conf" &
PIDS+=($!)
ip netns exec "$BE" $PY "$N" record 198.51.100.15 8080 "$TMP/rec" >"$TMP/recorder.log" 2>&1 &
PIDS+=($!)

# The mesh: web.default (443 -> 8443, 80 -> 8080) whose one workload, 198.51.100.16, is an
# HBONE pod: nghttpx terminates HBONE on 15008 toward a CONNECT proxy that reaches nginx there.
# empty.default has no workload.
"$MG_SOURCE_DIR/tools/mkpki" "$TMP/pki" >/dev/null
P=$TMP/pki
ip netns exec "$BE" $PY "$H/backend.py" connect-proxy 3128 2>"$TMP/connect-proxy.log" & PIDS+=($!)
ip netns exec "$BE" nghttpx --conf=/dev/null --http2-proxy --frontend="198.51.100.16,15008" \
  --backend="127.0.0.1,3128" --verify-client --verify-client-cacert="$P/root.pem" \
  --tls-min-proto-version=TLSv1.3 --tls-max-proto-version=TLSv1.3 --workers=1 --no-ocsp \
  --errorlog-file="$TMP/nghttpx.log" --accesslog-file="$TMP/nghttpx-access.log" \
  "$P/default.default-key.pem" "$P/default.default.pem" & PIDS+=($!)
cat >"$TMP/mesh.toml" <<TOML
[[mesh_service]]
name = "web"
namespace = "default"
hostname = "web.default.svc.cluster.local"
vips = ["203.0.113.40"]
ports = [{ service_port = 443, target_port = 8443 }, { service_port = 80, target_port = 8080 }]

[[workload]]
uid = "default/web-1"
name = "web-1"
namespace = "default"
addresses = ["198.51.100.16"]
tunnel = "hbone"
service_account = "default"
trust_domain = "cluster.local"
services = { "default/web.default.svc.cluster.local" = [{ service_port = 443, target_port = 8443 }, { service_port = 80, target_port = 8080 }] }

[[mesh_service]]
name = "empty"
namespace = "default"
hostname = "empty.default.svc.cluster.local"
vips = ["203.0.113.41"]
ports = [{ service_port = 443, target_port = 8443 }]
TOML

svc() {  # svc NAME VIP PORT BACKEND BACKEND_PORT [EXTRA]
  printf '[[service]]\nname = "%s"\nvip = "%s"\nport = %s\nmode = "proxy"\n%s\n' "$1" "$2" "$3" "${6:-}"
  printf '  [[service.backend]]\n  address = "%s"\n  port = %s\n' "$4" "$5"
}
cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_lc$ID,iface=glc$ID"
addresses = ["192.0.2.1/24", "2001:db8:2::1/64"]
[[port]]
name = "backend"
device = "net_af_packet_lb$ID,iface=glb$ID"
addresses = ["198.51.100.1/24"]
[fullnat]
local_addresses = ["198.51.100.2"]
[mesh]
source = "file"
path = "$TMP/mesh.toml"
[hbone]
cert_chain = "$P/demo.server.pem"
private_key = "$P/demo.server-key.pem"
trust_bundle = "$P/root.pem"
[admin]
listen = "$MG_ADMIN"
$(svc shop 203.0.113.21 1001 198.51.100.11 8443)
$(svc apps 203.0.113.21 1002 198.51.100.12 8443)
$(svc api 203.0.113.21 1003 198.51.100.13 8443)
$(svc fallback 203.0.113.21 1004 198.51.100.14 8443)
$(svc web-a 203.0.113.21 1011 198.51.100.11 8080)
$(svc web-b 203.0.113.21 1012 198.51.100.12 8080)
$(svc rec 203.0.113.21 1015 198.51.100.15 8080)
$(svc guarded 203.0.113.22 80 198.51.100.15 8080 '  [[service.deny]]
  pattern = "(?i)drop\\s+table"')

[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
match = "sni"
default_service = "fallback"
  [[listener.route]]
  hostnames = ["shop.example.com", "special.apps.example.com"]
  service = "shop"
  [[listener.route]]
  hostnames = ["*.apps.example.com"]
  service = "apps"
  [[listener.route]]
  hostnames = ['~api-[0-9]+\.example\.net']
  service = "api"
  [[listener.route]]
  hostnames = ["mesh.example.com"]
  service = "web.default.svc.cluster.local"

[[listener]]
name = "tls6"
vip = "2001:db8:100::30"
port = 443
match = "sni"
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "shop"

[[listener]]
name = "strict"
vip = "203.0.113.31"
port = 443
match = "sni"
peek_timeout_ms = 1000
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "shop"
  [[listener.route]]
  hostnames = ["ghost.example.com"]
  service = "ghost.default.svc.cluster.local"
  [[listener.route]]
  hostnames = ["empty.example.com"]
  service = "empty.default.svc.cluster.local"

[[listener]]
name = "web"
vip = "203.0.113.30"
port = 80
match = "host"
peek_bytes = 1024
# Far longer than the bounds on resets below: a reset within them is never this time-out.
peek_timeout_ms = 20000
  [[listener.route]]
  hostnames = ["a.example.com"]
  service = "web-a"
  [[listener.route]]
  hostnames = ["b.example.com"]
  service = "web-b"
  [[listener.route]]
  hostnames = ["rec.example.com"]
  service = "rec"
  [[listener.route]]
  hostnames = ["mesh.example.com"]
  service = "web.default.svc.cluster.local"
  [[listener.deny]]
  pattern = "(?i)union\\\\s+select"
TOML
# (the heredoc above unescapes once: the file has "(?i)union\\s+select", TOML's \s for Hyperscan)
grep -qF '"(?i)union\\s+select"' "$TMP/gw.toml" || fail "deny pattern not written as meant"
"$MG_BIN" --check --config "$TMP/gw.toml" >"$TMP/check.log" 2>&1 || fail "--check: $(cat "$TMP/check.log")"
start_gateway "$TMP/gw.toml"
wait_for 10 curl -sf "http://$MG_ADMIN/ready" || fail "gateway not ready"
for a in 11 12 13 14 16; do
  wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/198.51.100.$a/8443" || fail "nginx on .$a down"
done
wait_for 10 grep -q ready "$TMP/recorder.log" || fail "recorder down"
wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/198.51.100.16/15008" || fail "nghttpx down"
note "set up in $(( $(date +%s) - T0 )) s"

# What the test expects /metrics to say at the end: routed[LISTENER/SERVICE] connections,
# rejected[LISTENER/REASON], defaulted[LISTENER].
declare -A routed rejected defaulted
count() { local -n m=$1; m[$2]=$(( ${m[$2]:-0} + 1 )); }

# tls_curl VIP NAME BACKEND: curl --resolve NAME:443:VIP trusting only BACKEND's certificate.
tls_curl() {
  local body
  body=$(C curl -sS --max-time 20 --cacert "$TMP/certs/$3.pem" --resolve "$2:443:$1" "https://$2/") \
    || fail "curl https://$2/ via $1: no answer from backend-$3"
  [[ $body == "backend-$3" ]] || fail "curl https://$2/ via $1: '$body', want backend-$3"
}
# tls_sclient VIP BACKEND ARGS...: the certificate openssl s_client sees is BACKEND's.
tls_sclient() {
  local vip=$1 b=$2 subj; shift 2
  subj=$(C timeout 20 openssl s_client -connect "$vip:443" "$@" </dev/null 2>"$TMP/sclient.err" |
    openssl x509 -noout -subject 2>/dev/null) || true
  [[ $subj == "subject=CN = backend-$b" ]] || fail "s_client $* via $vip: '$subj', want backend-$b ($(tail -n 2 "$TMP/sclient.err"))"
}
# reset_expected WHAT CMD...: CMD (curl, s_client) must fail soon: the gateway resets the
# connection as soon as it knows, no time-out (the bound is loose for a loaded machine).
reset_expected() {
  local what=$1 out rc=0 t0; shift
  t0=$(date +%s%N)
  out=$("$@" 2>&1 </dev/null) || rc=$?
  (( rc != 0 )) || fail "$what: not reset: $out"
  (( rc != 28 && rc != 124 && $(date +%s%N) - t0 < 8000000000 )) || fail "$what: timed out (rc $rc): $out"
  echo "$what: reset (rc $rc: $(tail -n 1 <<<"$out"))"
}

note "SNI listener: exact, wildcard, regex and default routes"
tls_curl 203.0.113.30 shop.example.com shop; count routed tls/shop
tls_sclient 203.0.113.30 shop -servername shop.example.com; count routed tls/shop
tls_sclient 203.0.113.30 shop -servername SHOP.Example.COM; count routed tls/shop
tls_curl 203.0.113.30 special.apps.example.com shop; count routed tls/shop
tls_curl 203.0.113.30 x.apps.example.com apps; count routed tls/apps
tls_curl 203.0.113.30 a.b.apps.example.com apps; count routed tls/apps
tls_sclient 203.0.113.30 apps -servername deep.er.apps.example.com -tls1_2; count routed tls/apps
tls_curl 203.0.113.30 api-42.example.net api; count routed tls/api
tls_sclient 203.0.113.30 api -servername api-7.EXAMPLE.net; count routed tls/api
# Not matched: the wildcard needs a label before its suffix; the regex must match the whole name.
tls_curl 203.0.113.30 apps.example.com fallback; count defaulted tls
tls_curl 203.0.113.30 xapi-1.example.net fallback; count defaulted tls
tls_curl 203.0.113.30 nomatch.example.org fallback; count defaulted tls
tls_sclient 203.0.113.30 fallback -servername api-1.example.net.evil.example; count defaulted tls
note "SNI listener: no server_name goes to the default"
tls_sclient 203.0.113.30 fallback -noservername; count defaulted tls
note "SNI listener: a ClientHello sent 7 bytes per segment"
body=$(C timeout 20 $PY "$N" tls-split 203.0.113.30 443 x.apps.example.com --chunk 7) || fail "tls-split: $body"
[[ $body == backend-apps ]] || fail "split ClientHello: '$body', want backend-apps"
count routed tls/apps
note "SNI listener on IPv6"
tls_curl "[2001:db8:100::30]" shop.example.com shop; count routed tls6/shop
# (the readiness probes above came from the backend namespace and sent no request)
grep -q 'from=198.51.100.2 "GET' "$TMP/nginx-access.log" || fail "backends do not see the [fullnat] address"
grep '"GET' "$TMP/nginx-access.log" | grep -v 'from=198.51.100.2 ' && fail "a request reached nginx from elsewhere"

note "SNI listener: a route to a mesh service whose workload is an HBONE pod"
tls_curl 203.0.113.30 mesh.example.com mesh; count routed tls/web.default.svc.cluster.local
tls_sclient 203.0.113.30 mesh -servername mesh.example.com; count routed tls/web.default.svc.cluster.local
connects() { grep -c '"CONNECT 198.51.100.16:8443 HTTP/2" 200' "$TMP/nghttpx-access.log" || true; }
for _ in $(seq 50); do [[ $(connects) == 2 ]] && break; sleep 0.1; done
[[ $(connects) == 2 ]] || fail "nghttpx logged $(connects) CONNECTs to the pod, want 2: $(tail -n 3 "$TMP/nghttpx-access.log")"

note "strict SNI listener (no default): what is reset"
tls_curl 203.0.113.31 shop.example.com shop; count routed strict/shop
reset_expected "no route" C curl -sS --max-time 15 -k --resolve nomatch.example.org:443:203.0.113.31 https://nomatch.example.org/
count rejected strict/no_route
reset_expected "no SNI" C timeout 15 openssl s_client -connect 203.0.113.31:443 -noservername
count rejected strict/no_name
C timeout 20 $PY "$N" split 203.0.113.31 443 reset --within 8 'GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n' \
  || fail "not TLS: not reset"
count rejected strict/malformed
t0=$(date +%s.%N)
C timeout 20 $PY "$N" split 203.0.113.31 443 reset '' || fail "silent client: not reset"
t1=$(date +%s.%N)
$PY -c "import sys; w = $t1 - $t0; print(f'silent client reset after {w:.2f} s'); sys.exit(0 if 0.9 <= w <= 6 else 1)" \
  || fail "peek_timeout_ms = 1000 not kept"
count rejected strict/peek_timeout
reset_expected "mesh service not in the mesh" C curl -sS --max-time 15 -k --resolve ghost.example.com:443:203.0.113.31 https://ghost.example.com/
count rejected strict/no_service
reset_expected "mesh service without endpoints" C curl -sS --max-time 15 -k --resolve empty.example.com:443:203.0.113.31 https://empty.example.com/
count rejected strict/no_backend

note "Host listener"
http_get() {  # http_get WANT CURL_ARGS...
  local want=$1 body; shift
  body=$(C curl -sS --max-time 20 "$@") || fail "curl $*: no answer"
  [[ $body == "$want" ]] || fail "curl $*: '$body', want '$want'"
}
http_get http-shop -H 'Host: a.example.com' http://203.0.113.30/; count routed web/web-a
http_get http-apps -H 'Host: b.example.com' http://203.0.113.30/; count routed web/web-b
http_get http-shop --resolve a.example.com:80:203.0.113.30 http://a.example.com/; count routed web/web-a
http_get http-apps --resolve b.example.com:80:203.0.113.30 http://b.example.com/; count routed web/web-b
http_get http-shop -H 'Host: A.Example.COM:80' http://203.0.113.30/; count routed web/web-a
grep -q 'host=a.example.com from=198.51.100.2 "GET / HTTP/1.1"' "$TMP/nginx-access.log" || fail "nginx did not log the Host request"
note "Host listener: a route to the mesh service (its port 80) over HBONE"
http_get http-mesh -H 'Host: mesh.example.com' http://203.0.113.30/; count routed web/web.default.svc.cluster.local
wait_for 5 grep -q '"CONNECT 198.51.100.16:8080 HTTP/2" 200' "$TMP/nghttpx-access.log" \
  || fail "no CONNECT to the pod's port 8080: $(tail -n 3 "$TMP/nghttpx-access.log")"
reset_expected "Host with no route" C curl -sS --max-time 15 -H 'Host: c.example.com' http://203.0.113.30/
count rejected web/no_route
C timeout 20 $PY "$N" split 203.0.113.30 80 reset --within 8 'GET / HTTP/1.0\r\nAccept: */*\r\n\r\n' || fail "no Host: not reset"
count rejected web/no_name
# peek_bytes = 1024 (the reset must come long before peek_timeout_ms).
pad=$(printf 'a%.0s' {1..1100})
C timeout 20 $PY "$N" split 203.0.113.30 80 reset --within 8 --chunk 100 "GET / HTTP/1.1\\r\\nX-Pad: $pad\\r\\n" \
  || fail "request head over peek_bytes, 100 bytes per segment: not reset at once"
count rejected web/peek_limit
C timeout 20 $PY "$N" split 203.0.113.30 80 reset --within 8 "GET / HTTP/1.1\\r\\nX-Pad: $pad\\r\\n" \
  || fail "request head over peek_bytes in one segment: not reset at once"
count rejected web/peek_limit

note "a clean request to the recording backend: the route's bytes are what it got and sent"
rec_conns() { cat "$TMP/rec/events" 2>/dev/null | wc -l; }
route_bytes() {  # route_bytes LISTENER SERVICE DIRECTION
  curl -s "http://$MG_ADMIN/metrics" | $PY -c '
import re, sys
l, s, d = sys.argv[1:]
print(sum(int(float(m.group(2))) for m in re.finditer(r"^meshgate_listener_route_bytes_total\{(.*)\} (\S+)$", sys.stdin.read(), re.M)
          if all(f"{k}=\"{v}\"" in m.group(1) for k, v in (("listener", l), ("service", s), ("direction", d)))))' "$@"
}
http_get recorder -H 'Host: rec.example.com' http://203.0.113.30/; count routed web/rec
wait_for 5 grep -q '^1 .* answered ' "$TMP/rec/events" || fail "recorder: $(cat "$TMP/rec/events")"
REC_ANSWER=66  # "HTTP/1.1 200 OK", Content-Length, Connection: close, "recorder\n"
rec1=$(wc -c <"$TMP/rec/conn-1.bin")
for _ in $(seq 50); do
  [[ $(route_bytes web rec to_backend) == "$rec1" && $(route_bytes web rec to_client) == "$REC_ANSWER" ]] && break
  sleep 0.1
done
[[ $(route_bytes web rec to_backend) == "$rec1" && $(route_bytes web rec to_client) == "$REC_ANSWER" ]] || fail "route bytes $(route_bytes web rec to_backend) / $(route_bytes web rec to_client), want $rec1 / $REC_ANSWER"

note "deny signature split across segments, in the request head"
C timeout 20 $PY "$N" split 203.0.113.30 80 reset --within 8 --chunk 3 --delay 0.02 \
  'GET /search HTTP/1.1\r\nHost: rec.example.com\r\nX-Q: 1 UNION  SELECT password FROM users\r\n\r\n' \
  || fail "signature in the head: not reset"
# The head is complete only after the signature: the connection never reached the backend.
sleep 0.5
[[ $(rec_conns) == 1 ]] || fail "the backend got a connection with the signature: $(cat "$TMP/rec/events")"
note "deny signature split across segments, in a body after the connection reached its backend"
POST='POST /q HTTP/1.1\r\nHost: rec.example.com\r\nContent-Length: 38\r\n\r\nid=1 UnIoN\t\t SeLeCt password, 2 FROM u'
C timeout 20 $PY "$N" split 203.0.113.30 80 reset --within 8 --chunk 3 --delay 0.02 --pause-after-head 0.5 "$POST" \
  || fail "signature in the body: not reset"
wait_for 5 grep -q '^2 ' "$TMP/rec/events" || fail "the backend never saw the POST's head"
grep -q '^2 198\.51\.100\.2:[0-9]* reset ' "$TMP/rec/events" || fail "the backend's connection was not reset: $(cat "$TMP/rec/events")"
got=$(cat "$TMP/rec/conn-2.bin")
got_bytes=$(wc -c <"$TMP/rec/conn-2.bin")
echo "the backend got $got_bytes bytes: $(tr '\r\n\t' '...' <<<"$got")"
[[ $got == *"Host: rec.example.com"* ]] || fail "the backend did not get the head"
$PY -c 'import re,sys; sys.exit(1 if re.search(rb"(?i)union\s+select", open(sys.argv[1], "rb").read()) else 0)' \
  "$TMP/rec/conn-2.bin" || fail "the backend received the signature"
# What the route sent is at least what the backend got, and short of the signature's last byte.
sig_end=$($PY -c 'import re, sys
print(re.search(r"(?i)union\s+select", sys.argv[1].encode().decode("unicode_escape")).end())' "$POST")
b=$(route_bytes web rec to_backend)
(( b >= rec1 + got_bytes && b < rec1 + sig_end )) || fail "route bytes to the backend $b, want [$((rec1 + got_bytes)), $((rec1 + sig_end)))"
note "a clean request on the same listener"
http_get recorder -X POST --data 'q=union of selected items' -H 'Host: rec.example.com' http://203.0.113.30/
count routed web/rec
note "[[service.deny]] on a proxy service"
C timeout 20 $PY "$N" split 203.0.113.22 80 reset --within 8 --chunk 2 --delay 0.02 \
  'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n1; DROP   TABLE users' || fail "service signature: not reset"
http_get recorder -H 'Host: x' --data 'drop the table' http://203.0.113.22/
sleep 0.3
for f in "$TMP"/rec/conn-*.bin; do
  $PY -c 'import re,sys; sys.exit(1 if re.search(rb"(?i)(union\s+select|drop\s+table)", open(sys.argv[1], "rb").read()) else 0)' \
    "$f" || fail "$f holds a signature"
done
echo "recorder: $(cat "$TMP/rec/events" | tr '\n' ';')"

note "/metrics against what the test did"
curl -s "http://$MG_ADMIN/metrics" >"$TMP/metrics.txt"
curl -s "http://$MG_ADMIN/stats" >"$TMP/stats-now.json"
grep -E '^meshgate_(listener|signature|proxy_signature)' "$TMP/metrics.txt" | grep -v ' 0$' || true
exp=$TMP/expected.txt
: >"$exp"
for k in "${!routed[@]}"; do echo "routed ${k%%/*} ${k#*/} ${routed[$k]}" >>"$exp"; done
for k in "${!rejected[@]}"; do echo "rejected ${k%%/*} ${k#*/} ${rejected[$k]}" >>"$exp"; done
for k in "${!defaulted[@]}"; do echo "defaulted $k ${defaulted[$k]}" >>"$exp"; done
$PY - "$TMP/metrics.txt" "$exp" "$TMP/stats-now.json" "$TMP/nginx-access.log" <<'PY' || fail "metrics differ from what the test did"
import re, sys
from collections import defaultdict
samples = {}
for line in open(sys.argv[1]):
    m = re.match(r'^(\w+)(?:\{(.*)\})? (\S+)$', line.strip())
    if m:
        labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")))
        samples[(m.group(1), labels)] = float(m.group(3))
def get(name, **kw):
    return sum(v for (n, l), v in samples.items() if n == name and all((k, x) in l for k, x in kw.items()))
bad = []
def want(what, got, exp):
    if got != exp:
        bad.append(f"{what}: {got}, expected {exp}")
routed, rejected, defaulted = defaultdict(int), defaultdict(int), defaultdict(int)
for line in open(sys.argv[2]):
    kind, listener, *rest = line.split()
    if kind == "routed":
        routed[(listener, rest[0])] = int(rest[1])
    elif kind == "rejected":
        rejected[(listener, rest[0])] = int(rest[1])
    else:
        defaulted[listener] = int(rest[0])
listeners = {"tls", "tls6", "strict", "web"}
deny_blocks = {"web": 2}
for li in sorted(listeners):
    r = sum(v for (l, _), v in routed.items() if l == li)
    d = defaulted[li]
    j = sum(v for (l, _), v in rejected.items() if l == li)
    blocked = deny_blocks.get(li, 0)
    want(f"{li} routed", get("meshgate_listener_connections_total", listener=li, outcome="routed"), r + d + blocked)
    want(f"{li} defaulted", get("meshgate_listener_connections_total", listener=li, outcome="defaulted"), d)
    want(f"{li} accepted", get("meshgate_listener_connections_total", listener=li, outcome="accepted"), r + d + j + blocked)
    if d:
        want(f"{li} default route connections",
             get("meshgate_listener_route_connections_total", listener=li, route="default"), d)
    for reason in ["no_name", "no_route", "malformed", "peek_limit", "peek_timeout", "no_service", "no_backend"]:
        want(f"{li} rejected {reason}", get("meshgate_listener_rejected_total", listener=li, reason=reason),
             rejected[(li, reason)])
http = {"web-a": "198.51.100.11:8080", "web-b": "198.51.100.12:8080",
        "web.default.svc.cluster.local": "198.51.100.16:8080"}
for (li, svc), n in routed.items():
    n += deny_blocks.get(li, 0) if svc == "rec" else 0
    want(f"{li} -> {svc} connections", get("meshgate_listener_route_connections_total", listener=li, service=svc), n)
    if li == "web" and svc in http:
        continue  # exact byte counts below
    if get("meshgate_listener_route_bytes_total", listener=li, service=svc, direction="to_backend") <= 0:
        bad.append(f"{li} -> {svc}: no bytes to the backend")
    if get("meshgate_listener_route_bytes_total", listener=li, service=svc, direction="to_client") <= 0:
        bad.append(f"{li} -> {svc}: no bytes to the client")
want("signature blocks on web", get("meshgate_signature_blocked_total", listener="web"), 2)
want("signature blocks on guarded", get("meshgate_signature_blocked_total", service="guarded"), 1)
# The proxy's own total counts every block, listeners' and services'.
want("proxy signature blocks", get("meshgate_proxy_signature_blocked_total"), 3)
# The plain HTTP routes (one request per connection) moved exactly what nginx read and wrote,
# the one into the mesh too (its stream carries the client's bytes both ways).
for svc, server in http.items():
    got_in = got_out = 0
    for line in open(sys.argv[4]):
        m = re.match(r'^(\S+) .* in=(\d+) out=(\d+)$', line.strip())
        if m and m.group(1) == server:
            got_in += int(m.group(2))
            got_out += int(m.group(3))
    want(f"web -> {svc} bytes to the backend (what nginx read)",
         get("meshgate_listener_route_bytes_total", listener="web", service=svc, direction="to_backend"), got_in)
    want(f"web -> {svc} bytes to the client (what nginx wrote)",
         get("meshgate_listener_route_bytes_total", listener="web", service=svc, direction="to_client"), got_out)
# /stats says the same as /metrics (the counters did not move in between: the test is idle).
import json
stats = json.load(open(sys.argv[3]))["listeners"]
want("listeners in /stats", sorted(stats), sorted(listeners))
for li, st in stats.items():
    for outcome in ["accepted", "routed", "defaulted", "client_closed"]:
        want(f"/stats {li} {outcome}", st[outcome],
             get("meshgate_listener_connections_total", listener=li, outcome=outcome))
    for reason, v in st["rejected"].items():
        want(f"/stats {li} rejected {reason}", v, get("meshgate_listener_rejected_total", listener=li, reason=reason))
    for r in st["routes"]:
        want(f"/stats {li} route {r['route']} connections", r["connections"],
             get("meshgate_listener_route_connections_total", listener=li, route=r["route"]))
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("metrics: every listener, route and reason as expected")
PY

stop_gateway TERM
S=$TMP/stats.json
[[ $(json "$S" "d['packets_in'] + d['packets_generated'] + d['handoff_in'] == d['packets_out'] + d['packets_consumed'] + d['drops_total'] + d['packets_pending'] + d['handoff_out']") == True ]] \
  || fail "counters do not add up"
echo "PASS in $(( $(date +%s) - T0 )) s"
