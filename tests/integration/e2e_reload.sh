#!/usr/bin/env bash
# Live reload of the config (config/README.md "Reloading") under traffic: a client namespace
# and three backend namespaces (on a bridge) around meshgate (dnat, net_af_packet veth ports).
# Long-lived kernel TCP connections (reload/peers.py hold) exchange a line every 0.2 s across
# every reload and must never fail; new connections (reload/peers.py probe) follow each change.
#   SIGHUP: a backend's weight to 0, a backend added, a service removed, conntrack timeouts
#     changed -> established connections keep exchanging bytes (on their backends), new ones
#     avoid the drained backend and reach the new one, the removed VIP takes none (no_service),
#     established flows expire by the new timeout; the process keeps running.
#   POST /reload and meshgate-ctl reload with a bad key (400, the key at its file position,
#     exit 1) and with [gateway] workers changed (409, gateway.workers named, exit 1): nothing
#     changes, the old services still answer.
#   SIGHUP with Maglev tables 2 GiB past MemAvailable (estimated, never built): invalid, the
#     log line names needed_mb and available_mb, the old services still answer; --check of that
#     file exits 2 with the start's figures, of a good one prints its memory line.
#   meshgate-ctl reload of a good file turns on watch_config; a saved change (write + rename)
#     is then reloaded by itself, a save of the same bytes is not.
#   meshgate_config_reloads_total{result} exact, /config_dump's config.sha256 = the file's.
#   A second gateway (net_null port, [hbone] certificates): its key file moved away, --check
#     exits 2 and POST /reload and SIGHUP are invalid with --check's very error line.
source "$(dirname "$0")/lib.sh"
require_root
CTL=${MG_CTL:?MG_CTL must point at meshgate-ctl}
PEERS="$(dirname "$0")/reload/peers.py"
PY=/usr/bin/python3

CLI=mgrc$ID SW=mgrs$ID GWC=grc$ID GWB=grb$ID
add_host "$CLI" "$GWC" 192.0.2.2/24 192.0.2.1
add_switch "$SW" "$GWB"
for i in 1 2 3; do
  B=mgrb${i}_$ID
  add_bridged_host "$B" "$SW" b$i 198.51.100.1$i/24 198.51.100.1
  ip netns exec "$B" $PY "$PEERS" serve --port 7000 --name b$i >"$TMP/peer$i.log" 2>&1 &
  PIDS+=($!)
done

# gwconf: the config from these variables (each reload changes some).
W1=1 B3=no GONE=yes WORKERS=1 WATCH=false BOGUS=no ESTABLISHED=7200
gwconf() {
  cat <<TOML
[gateway]
workers = $WORKERS
watch_config = $WATCH
[[port]]
name = "client"
device = "net_af_packet_rc$ID,iface=$GWC"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_rb$ID,iface=$GWB"
addresses = ["198.51.100.1/24"]
[conntrack]
tcp_established = $ESTABLISHED
[admin]
listen = "$MG_ADMIN"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
TOML
  [[ $BOGUS == yes ]] && echo "bogus = 1"
  printf '  [[service.backend]]\n  address = "198.51.100.11"\n  port = 7000\n  weight = %s\n' "$W1"
  printf '  [[service.backend]]\n  address = "198.51.100.12"\n  port = 7000\n'
  [[ $B3 == yes ]] && printf '  [[service.backend]]\n  address = "198.51.100.13"\n  port = 7000\n'
  if [[ $GONE == yes ]]; then
    printf '[[service]]\nname = "gone"\nvip = "203.0.113.11"\nport = 80\n'
    printf '  [[service.backend]]\n  address = "198.51.100.11"\n  port = 7000\n'
  fi
  return 0
}
CFG=$TMP/gw.toml
gwconf >"$CFG"
"$MG_BIN" --config "$CFG" --check | grep -qx "config ok" || fail "--check"
SHA0=$(sha256sum "$CFG" | cut -d' ' -f1)
start_gateway "$CFG"
ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$MG_ADMIN/ready") == 200 ]]; }
wait_for 20 ready || fail "not ready"
for i in 1 2 3; do
  wait_for 10 ip netns exec mgrb${i}_$ID bash -c "echo >/dev/tcp/127.0.0.1/7000" || fail "peer b$i did not start"
done

probe() { ip netns exec "$CLI" $PY "$PEERS" probe --vip "$1" --port 80; }
# probes VIP N: the backends N new connections reached, sorted and counted.
probes() { for _ in $(seq 1 "$2"); do probe "$1"; done | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' '; }
reloads_logged() { grep -c "event=config_reload " "$TMP/gateway.log" || true; }
admin_json() { curl -sf --max-time 5 "http://$MG_ADMIN/$1" >"$TMP/$2.json" || fail "GET /$1"; }
# The largest expires_in_ms of the flows to web's VIP.
web_expiry() {
  admin_json flows flows
  json "$TMP/flows.json" "max(f['expires_in_ms'] for f in d['flows'] if f['vip'] == '203.0.113.10:80')"
}

note "before any reload: both backends take new connections, both services answer"
got=$(probes 203.0.113.10 20)
[[ $got == *b1=* && $got == *b2=* && $got != *b3=* ]] || fail "web before the reload: $got"
[[ $(probe 203.0.113.11) == b1 ]] || fail "gone before the reload"

note "long-lived connections: at least 2 on each of web's backends, 2 to gone"
mkdir -p "$TMP/hold_web" "$TMP/hold_gone"
ip netns exec "$CLI" $PY "$PEERS" hold --vip 203.0.113.10 --port 80 --n 2 --each b1,b2 \
  --dir "$TMP/hold_web" >"$TMP/hold_web.log" 2>&1 &
HOLD_WEB=$!; PIDS+=($HOLD_WEB)
ip netns exec "$CLI" $PY "$PEERS" hold --vip 203.0.113.11 --port 80 --n 2 \
  --dir "$TMP/hold_gone" >"$TMP/hold_gone.log" 2>&1 &
HOLD_GONE=$!; PIDS+=($HOLD_GONE)
wait_for 20 test -e "$TMP/hold_web/ready" || fail "web connections not held: $(cat "$TMP/hold_web.log")"
wait_for 20 test -e "$TMP/hold_gone/ready" || fail "gone connections not held: $(cat "$TMP/hold_gone.log")"
sleep 0.5
(( $(web_expiry) > 600000 )) || fail "established flows should expire after ~7200 s before the reload"

note "SIGHUP: b1 drained (weight 0), b3 added, gone removed, tcp_established 7200 -> 600"
W1=0 B3=yes GONE=no ESTABLISHED=600
gwconf >"$CFG"
kill -HUP "$GW_PID"
wait_for 10 grep -q "event=config_reload result=ok trigger=sighup" "$TMP/gateway.log" \
  || fail "no reload after SIGHUP: $(grep -E 'config_reload|sighup' "$TMP/gateway.log")"
grep -q "event=config_reload result=ok trigger=sighup services_added=0 services_removed=1 services_changed=1 listeners_added=0 listeners_removed=0 listeners_changed=0 other=conntrack sha256=$(sha256sum "$CFG" | cut -d' ' -f1)" \
  "$TMP/gateway.log" || fail "reload log line: $(grep 'event=config_reload' "$TMP/gateway.log")"
touch "$TMP/hold_web/mark" "$TMP/hold_gone/mark"
kill -0 "$GW_PID" 2>/dev/null || fail "SIGHUP ended the gateway"
ready || fail "/ready does not answer 200 after the reload"
got=$(probes 203.0.113.10 20)
[[ $got != *b1=* && $got == *b2=* && $got == *b3=* ]] || fail "web after the reload (b1 drained, b3 added): $got"
admin_json stats stats0
nosvc0=$(json "$TMP/stats0.json" "d['drops']['no_service']")
[[ $(probe 203.0.113.11) == timeout ]] || fail "the removed service still takes new connections"
admin_json stats stats1
(( $(json "$TMP/stats1.json" "d['drops']['no_service']") > nosvc0 )) || fail "no no_service drop for the removed VIP"
sleep 0.5
(( $(web_expiry) <= 600000 )) || fail "established flows do not follow the new tcp_established (600 s): $(web_expiry)"

note "POST /reload with a bad key: 400, positioned; nothing changes"
BOGUS=yes
gwconf >"$CFG"
line=$(grep -n '^bogus = 1$' "$CFG" | cut -d: -f1)
code=$(curl -s -o "$TMP/reload.json" -w '%{http_code}' --max-time 40 -X POST "http://$MG_ADMIN/reload")
[[ $code == 400 ]] || fail "POST /reload with a bad key answered $code: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "d['result']") == invalid ]] || fail "result: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "d['errors'][0]['key']") == "service[0].bogus" ]] || fail "key: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "d['errors'][0]['line']") == "$line" ]] || fail "line (want $line): $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "d['errors'][0]['file']") == "$CFG" ]] || fail "file: $(cat "$TMP/reload.json")"
rc=0; "$CTL" --admin "$MG_ADMIN" reload >"$TMP/ctl.out" 2>"$TMP/ctl.err" || rc=$?
[[ $rc == 1 ]] || fail "meshgate-ctl reload of a bad file exited $rc"
grep -q "reload refused (invalid): nothing changed" "$TMP/ctl.err" || fail "ctl: $(cat "$TMP/ctl.err")"
grep -qF "$CFG:$line:1: service[0].bogus: " "$TMP/ctl.err" || fail "ctl error position: $(cat "$TMP/ctl.err")"
got=$(probes 203.0.113.10 6)
[[ $got != *b1=* && $got != *timeout* && $got != *reset* ]] || fail "web after an invalid reload: $got"

note "workers changed: 409 naming gateway.workers; nothing changes"
BOGUS=no WORKERS=2
gwconf >"$CFG"
code=$(curl -s -o "$TMP/reload.json" -w '%{http_code}' --max-time 40 -X POST "http://$MG_ADMIN/reload")
[[ $code == 409 ]] || fail "POST /reload with workers changed answered $code: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "d['result']") == restart_required ]] || fail "result: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "[e['key'] for e in d['errors']]") == "['gateway.workers']" ]] \
  || fail "keys: $(cat "$TMP/reload.json")"
rc=0; "$CTL" --admin "$MG_ADMIN" reload >"$TMP/ctl.out" 2>"$TMP/ctl.err" || rc=$?
[[ $rc == 1 ]] || fail "meshgate-ctl reload with workers changed exited $rc"
grep -qF "$CFG:2:11: gateway.workers: cannot change while running (sizes the lcores, queues and per-worker tables); restart meshgate to apply" \
  "$TMP/ctl.err" || fail "ctl: $(cat "$TMP/ctl.err")"
got=$(probes 203.0.113.10 6)
[[ $got != *b1=* && $got != *timeout* && $got != *reset* ]] || fail "web after a refused reload: $got"

note "SIGHUP with Maglev tables beyond the host's memory: refused with the figures, nothing changes"
# 16 MiB tables (4194301 slots), 2 GiB past MemAvailable: estimated, never built.
WORKERS=1
avail_mb=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
n_big=$(( avail_mb / 16 + 128 ))
{ gwconf
  for i in $(seq 1 "$n_big"); do
    printf '[[service]]\nname = "big%d"\nvip = "203.0.113.20"\nport = %d\ntable_size = 4194301\n' "$i" "$i"
    printf '  [[service.backend]]\n  address = "198.51.100.11"\n  port = 7000\n'
  done; } >"$CFG"
n=$(reloads_logged)
more_reloads() { (( $(reloads_logged) > n )); }
kill -HUP "$GW_PID"
wait_for 20 more_reloads || fail "no reload after SIGHUP"
refusal=$(grep "event=config_reload " "$TMP/gateway.log" | tail -n 1)
[[ $refusal =~ result=invalid\ trigger=sighup\ errors=1\ needed_mb=([0-9]+)\ available_mb=([0-9]+)\  ]] \
  || fail "reload beyond memory: $refusal"
(( BASH_REMATCH[1] > BASH_REMATCH[2] && BASH_REMATCH[1] >= n_big * 16 )) || fail "figures: $refusal"
note "refused: $refusal"
grep -q "event=config_reload_error result=invalid error=\"$CFG:[0-9]*:[0-9]*: service\[[0-9]*\].table_size: memory: the reload needs about ${BASH_REMATCH[1]} MiB (Maglev tables of $n_big services added or changed" \
  "$TMP/gateway.log" || fail "memory error: $(grep config_reload_error "$TMP/gateway.log" | tail -n 1)"
kill -0 "$GW_PID" 2>/dev/null || fail "the gateway died after the refused reload"
got=$(probes 203.0.113.10 6)
[[ $got != *b1=* && $got != *timeout* && $got != *reset* ]] || fail "web after the refused reload: $got"
[[ $(probe 203.0.113.20) == timeout ]] || fail "a service of the refused config answers"
# --check of the same file says what it needs and fails as the start would.
rc=0; "$MG_BIN" --config "$CFG" --check >"$TMP/check.out" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "--check of a config beyond memory exited $rc: $(head -c 400 "$TMP/check.out")"
grep -Eq "^$CFG:[0-9]+:[0-9]+: service\[[0-9]+\]\.table_size: memory: the config needs about [0-9]+ MiB \(EAL: mbufs and flow tables [0-9]+ MiB.*; Maglev tables of $((n_big + 1)) services [0-9]+ MiB\), host has [0-9]+ MiB available" \
  "$TMP/check.out" || fail "--check memory error: $(head -c 400 "$TMP/check.out")"
gwconf >"$CFG"
"$MG_BIN" --config "$CFG" --check 2>"$TMP/check.err" | grep -qx "config ok" || fail "--check of the good file"
grep -Eq "^memory: needs about [0-9]+ MiB \(EAL: mbufs and flow tables [0-9]+ MiB.*; Maglev tables of 1 services 1 MiB\), host has [0-9]+ MiB available$" \
  "$TMP/check.err" || fail "--check memory line: $(cat "$TMP/check.err")"

note "meshgate-ctl reload of a good file: watch_config on"
WORKERS=1 WATCH=true
gwconf >"$CFG"
"$CTL" --admin "$MG_ADMIN" reload >"$TMP/ctl.out" 2>"$TMP/ctl.err" || fail "meshgate-ctl reload: $(cat "$TMP/ctl.err")"
grep -qx "reloaded: services +0 -0 ~0, listeners +0 -0 ~0, also changed: gateway" "$TMP/ctl.out" \
  || fail "ctl: $(cat "$TMP/ctl.out")"
grep -qx "sha256 $(sha256sum "$CFG" | cut -d' ' -f1)" "$TMP/ctl.out" || fail "ctl sha: $(cat "$TMP/ctl.out")"
wait_for 5 grep -q "event=config_watch state=on" "$TMP/gateway.log" || fail "the watch did not start"

note "watch: a saved change (write + rename) reloads by itself; the same bytes again do not"
GONE=yes
gwconf >"$CFG.new"
mv "$CFG.new" "$CFG"
wait_for 10 grep -q "event=config_reload result=ok trigger=watch services_added=1 " "$TMP/gateway.log" \
  || fail "no reload after the file changed: $(grep 'event=config' "$TMP/gateway.log")"
[[ $(probe 203.0.113.11) == b1 ]] || fail "the service added back does not answer"
n=$(reloads_logged)
gwconf >"$CFG.new"
mv "$CFG.new" "$CFG"
touch "$CFG"
sleep 1.5
[[ $(reloads_logged) == "$n" ]] || fail "a save of the same bytes was reloaded"

note "metrics and /config_dump"
curl -sf --max-time 5 "http://$MG_ADMIN/metrics" >"$TMP/metrics.txt" || fail "GET /metrics"
for want in 'meshgate_config_reloads_total{result="ok"} 3' \
    'meshgate_config_reloads_total{result="invalid"} 3' \
    'meshgate_config_reloads_total{result="restart_required"} 2'; do
  grep -qxF "$want" "$TMP/metrics.txt" || fail "metrics: want '$want': $(grep config_reloads "$TMP/metrics.txt")"
done
admin_json config_dump dump
SHA=$(sha256sum "$CFG" | cut -d' ' -f1)
[[ $(json "$TMP/dump.json" "d['config']['sha256']") == "$SHA" ]] || fail "config_dump sha256"
[[ $SHA != "$SHA0" ]] || fail "the config's hash did not change"
[[ $(json "$TMP/dump.json" "d['config']['path']") == "$CFG" ]] || fail "config_dump path"
[[ $(json "$TMP/dump.json" "d['config']['last_reload']['trigger']") == watch ]] || fail "last_reload"
[[ $(json "$TMP/dump.json" "d['config']['reloads'] == {'ok': 3, 'invalid': 3, 'restart_required': 2}") == True ]] \
  || fail "config_dump reloads: $(json "$TMP/dump.json" "d['config']")"
[[ $(json "$TMP/dump.json" "sorted(s['name'] for s in d['services'])") == "['gone', 'web']" ]] \
  || fail "config_dump services"

note "the long-lived connections: none lost, each kept its backend and exchanged after the reload"
touch "$TMP/hold_web/stop" "$TMP/hold_gone/stop"
wait "$HOLD_WEB" || fail "a web connection failed: $(cat "$TMP/hold_web/result.json" "$TMP/hold_web.log")"
wait "$HOLD_GONE" || fail "a connection to the removed service failed: $(cat "$TMP/hold_gone/result.json" "$TMP/hold_gone.log")"
for h in hold_web hold_gone; do
  [[ $(json "$TMP/$h/result.json" "all(c['after_mark'] >= 10 for c in d['conns'])") == True ]] \
    || fail "$h: too few exchanges after the reload: $(cat "$TMP/$h/result.json")"
done
[[ $(json "$TMP/hold_web/result.json" "sum(c['backend'] == 'b1' for c in d['conns']) >= 2") == True ]] \
  || fail "no held connection on the drained backend"

stop_gateway TERM
grep -q "meshgate summary" "$TMP/gateway.log" || fail "no summary"

note "[hbone] key file removed while running: --check exits 2, a reload is invalid with the same error"
"$(dirname "$0")/../../tools/mkpki" "$TMP/pki" demo/server >/dev/null
cat >"$TMP/hb.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "net0"
device = "net_null_h$ID"
addresses = ["198.51.100.1/24"]
[fullnat]
local_addresses = ["198.51.100.2"]
[hbone]
cert_chain = "$TMP/pki/demo.server.pem"
private_key = "$TMP/pki/demo.server-key.pem"
trust_bundle = "$TMP/pki/root.pem"
[admin]
listen = "$MG_ADMIN"
TOML
start_gateway "$TMP/hb.toml"
wait_for 20 ready || fail "the [hbone] gateway is not ready"
mv "$TMP/pki/demo.server-key.pem" "$TMP/pki/key.moved"
rc=0; "$MG_BIN" --config "$TMP/hb.toml" --check >"$TMP/check.out" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "--check without the key file exited $rc: $(cat "$TMP/check.out")"
check_line=$(cat "$TMP/check.out")
[[ $check_line == "$TMP/hb.toml:11:15: hbone.private_key: \"$TMP/pki/demo.server-key.pem\" "* ]] \
  || fail "--check: $check_line"
code=$(curl -s -o "$TMP/reload.json" -w '%{http_code}' --max-time 40 -X POST "http://$MG_ADMIN/reload")
[[ $code == 400 ]] || fail "POST /reload without the key file answered $code: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "d['result']") == invalid ]] || fail "result: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "len(d['errors'])") == 1 ]] || fail "errors: $(cat "$TMP/reload.json")"
[[ $(json "$TMP/reload.json" "d['errors'][0]['text']") == "$check_line" ]] \
  || fail "reload and --check disagree: $(json "$TMP/reload.json" "d['errors'][0]['text']") vs $check_line"
kill -HUP "$GW_PID"
wait_for 10 grep -q "event=config_reload result=invalid trigger=sighup errors=1 " "$TMP/gateway.log" \
  || fail "SIGHUP without the key file: $(grep 'event=config_reload' "$TMP/gateway.log")"
grep -qF "event=config_reload_error result=invalid error=\"$check_line\"" "$TMP/gateway.log" \
  || fail "reload error line: $(grep config_reload_error "$TMP/gateway.log")"
ready || fail "/ready after the refused reloads"
mv "$TMP/pki/key.moved" "$TMP/pki/demo.server-key.pem"
"$CTL" --admin "$MG_ADMIN" reload >"$TMP/ctl.out" 2>"$TMP/ctl.err" || fail "reload with the key back: $(cat "$TMP/ctl.err")"
stop_gateway TERM
echo "PASS"
