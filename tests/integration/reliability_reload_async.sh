#!/usr/bin/env bash
# A reload that takes seconds (a listener of thousands of regex routes: Hyperscan compiles them
# in the check and for the snapshot) must not stop the gateway from answering
# (config/README.md "Reloading"). A live gateway on a net_null port:
#   meshgate-ctl reload of the big config while /healthz, /ready and /stats are probed every 100 ms:
#     every probe answers 200, a second POST /reload meanwhile answers 409 in_progress (nothing
#     started), GET /reload says in_progress, and ctl exits 0 with "reloaded" once the config
#     runs (/config_dump's sha256 is the new file's): the true outcome, also past POST /reload's
#     10 s wait (202, then ctl polls GET /reload).
#   A SIGTERM during another big reload ends the gateway within 3 s, exit 0 with its summary.
#   A SIGTERM while a big config's first snapshot compiles ends the start within 3 s, exit 0.
# RELOAD_ROUTES overrides the route count (the default takes ~15 s here for the reload).
source "$(dirname "$0")/lib.sh"
CTL=${MG_CTL:?MG_CTL must point at meshgate-ctl}
ROUTES=${RELOAD_ROUTES:-6000}

# gwconf ROUTES SEED: a listener with ROUTES regex routes, different for each SEED (no database
# of one seed's config is in the cache of another's).
gwconf() {
  cat <<TOML
[[port]]
name = "null0"
device = "net_null_r$ID"
addresses = ["198.51.100.1/24"]
[fullnat]
local_addresses = ["198.51.100.2"]
[proxy]
max_connections = 1024
memory_mb = 4
buffer_bytes = 65536
[admin]
listen = "$MG_ADMIN"
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
TOML
  awk -v n="$1" -v s="$2" 'BEGIN {
    for (i = 0; i < n; ++i) {
      printf "  [[listener.route]]\n  hostnames = [\"~(api|web|app)-s%dr%d-[a-z0-9]{1,8}\\\\.(eu|us)[0-9]+\\\\.example\\\\.com\"]\n  service = \"shop\"\n", s, i
    }
  }'
}
code() { curl -s -o /dev/null -w '%{http_code}' --max-time "${2:-2}" "http://$MG_ADMIN$1" || true; }
ready() { [[ $(code /ready) == 200 ]]; }
ms() { date +%s%3N; }

# prober FILE: /healthz and /ready every 100 ms, one "path code" line each, until killed; and
# /stats, which the control loop answers: the loop keeps ticking (and so draining the access
# log's rings, polling health checks and signals) while the reload compiles.
prober() {
  while :; do
    echo "/healthz $(code /healthz 1)" >>"$1"
    echo "/ready $(code /ready 1)" >>"$1"
    echo "/stats $(code /stats 2)" >>"$1"
    sleep 0.1
  done
}

# term_within_3s WHEN: SIGTERM to the gateway, which must exit 0 within 3 s (killed at 5 s).
term_within_3s() {
  local t0 t1 rc=0
  t0=$(ms)
  kill -TERM "$GW_PID"
  for _ in $(seq 1 100); do kill -0 "$GW_PID" 2>/dev/null || break; sleep 0.05; done
  t1=$(ms)
  kill -0 "$GW_PID" 2>/dev/null && { kill -KILL "$GW_PID"; fail "SIGTERM during $1: still running after 5 s"; }
  wait "$GW_PID" || rc=$?
  note "SIGTERM during $1: exit $rc after $((t1 - t0)) ms"
  [[ $rc -eq 0 ]] || fail "gateway exited $rc after SIGTERM during $1"
  (( t1 - t0 <= 3000 )) || fail "SIGTERM during $1 took $((t1 - t0)) ms"
}

CFG=$TMP/gw.toml
gwconf 2 0 >"$CFG"
start_gateway "$CFG"
wait_for 20 ready || fail "not ready"

note "reload of $ROUTES regex routes, probed every 100 ms"
gwconf "$ROUTES" 1 >"$CFG.next"
mv "$CFG.next" "$CFG"
SHA1=$(sha256sum "$CFG" | cut -d' ' -f1)
prober "$TMP/probes.txt" &
PROBER=$!
PIDS+=("$PROBER")
t0=$(ms)
"$CTL" --admin "$MG_ADMIN" reload >"$TMP/ctl.out" 2>"$TMP/ctl.err" &
CTL_PID=$!
PIDS+=("$CTL_PID")
sleep 1
curl -s -w ' %{http_code}' -X POST --max-time 5 "http://$MG_ADMIN/reload" >"$TMP/second.out" 2>&1 &
SECOND=$!
PIDS+=("$SECOND")
curl -s --max-time 2 "http://$MG_ADMIN/reload" >"$TMP/state.out" 2>&1 || true
rc=0; wait "$CTL_PID" || rc=$?
t1=$(ms)
kill "$PROBER"; wait "$PROBER" 2>/dev/null || true
wait "$SECOND" 2>/dev/null || true
probes=$(wc -l <"$TMP/probes.txt")
bad=$(grep -vc ' 200$' "$TMP/probes.txt" || true)
note "ctl reload: exit $rc after $((t1 - t0)) ms; probes: $probes, not 200: $bad"
grep "event=config_reload_timing\|event=config_reload " "$TMP/gateway.log" | tail -2
(( bad == 0 )) || fail "$bad of $probes probes failed: $(grep -v ' 200$' "$TMP/probes.txt" | sort | uniq -c)"
(( probes >= 20 )) || fail "only $probes probes answered during the reload"
[[ $rc -eq 0 ]] || fail "meshgate-ctl reload exited $rc: $(cat "$TMP/ctl.err")"
grep -q "^reloaded: " "$TMP/ctl.out" || fail "ctl output: $(cat "$TMP/ctl.out")"
second=$(cat "$TMP/second.out")
[[ $second == *'"result": "in_progress"'*' 409' ]] || fail "second POST /reload during the reload: $second"
state=$(cat "$TMP/state.out")
[[ $state == *'"state": "in_progress"'* ]] || fail "GET /reload during the reload: $state"
curl -s --max-time 5 "http://$MG_ADMIN/config_dump" >"$TMP/dump.json"
[[ $(json "$TMP/dump.json" "d['config']['sha256']") == "$SHA1" ]] || fail "/config_dump sha256 is not the new file's"
routes=$(curl -s --max-time 5 "http://$MG_ADMIN/metrics" | grep -c '^meshgate_listener_route_connections_total{listener="tls"' || true)
(( routes >= ROUTES )) || fail "the snapshot has $routes routes, not the new config's $ROUTES"

note "SIGTERM during a big reload"
gwconf "$ROUTES" 2 >"$CFG.next"
mv "$CFG.next" "$CFG"
curl -s -X POST --max-time 20 "http://$MG_ADMIN/reload" >"$TMP/post.out" 2>&1 &
PIDS+=($!)
wait_for 5 bash -c "(( \$(grep -c 'event=config_reload_started' '$TMP/gateway.log') >= 2 ))" \
  || fail "the second reload did not start"
sleep 1
term_within_3s "a reload"
[[ -s $TMP/stats.json ]] || fail "no --stats-json written"

note "SIGTERM while the first snapshot of a big config compiles"
gwconf "$ROUTES" 3 >"$CFG"
mv "$TMP/gateway.log" "$TMP/gateway-1.log"
"$MG_BIN" --config "$CFG" >"$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
wait_for 120 grep -q "event=admin_listening" "$TMP/gateway.log" || fail "the second gateway did not get to its admin API"
sleep 1
grep -q "event=workers_started" "$TMP/gateway.log" && fail "the first snapshot compiled within 1 s: raise RELOAD_ROUTES"
term_within_3s "the start"
grep -q "event=stopping signal=15 phase=start" "$TMP/gateway.log" || fail "no stopping phase=start line"
echo "PASS"
