#!/usr/bin/env bash
# The gateway's log as JSON (--log-format json) on a net_null port: every stderr line is one
# JSON object with an RFC 3339 UTC "ts", a "level" and an "event"; the EAL's own start-up lines
# come through as event "dpdk" (DPDK INFO lines: debug); the level changes at runtime with
# POST /logging (GET /logging shows it; debug shows event admin_request for each admin
# request, info does not); a bad level is a 400. An unknown --log-format is a usage error.
source "$(dirname "$0")/lib.sh"

cat >"$TMP/gw.toml" <<TOML
[[port]]
name = "null0"
device = "net_null_l$ID"
addresses = ["198.51.100.1/24"]
[admin]
listen = "$MG_ADMIN"
TOML
A=$MG_ADMIN
LOG=$TMP/gateway.log

rc=0
"$MG_BIN" --config "$TMP/gw.toml" --log-format xml >"$TMP/usage.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "--log-format xml: exit $rc, expected 2"
grep -q -- "--log-format" "$TMP/usage.log" || fail "--log-format xml: $(cat "$TMP/usage.log")"

# every_line_is_json: each stderr line an object with ts (RFC 3339 UTC, milliseconds), a known
# level and an event.
every_line_is_json() {
  python3 - "$LOG" <<'PY' || fail "a stderr line is not a JSON log object"
import json, re, sys
ts = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
n = 0
for i, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    try:
        o = json.loads(line)
    except ValueError as e:
        sys.exit(f"line {i}: {e}: {line!r}")
    if not isinstance(o, dict) or not ts.fullmatch(str(o.get("ts"))) \
            or o.get("level") not in ("error", "warn", "info", "debug") \
            or not isinstance(o.get("event"), str) or not o["event"]:
        sys.exit(f"line {i}: missing or bad ts/level/event: {line!r}")
    n += 1
if n == 0:
    sys.exit("no log lines")
PY
}
# has_event EVENT [KEY VALUE]: a line with that event (and member).
has_event() {
  python3 - "$LOG" "$@" <<'PY'
import json, sys
path, event, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
for line in open(path, encoding="utf-8"):
    o = json.loads(line)
    if o.get("event") == event and (not rest or str(o.get(rest[0])) == rest[1]):
        sys.exit(0)
sys.exit(1)
PY
}
count_event() { grep -c "\"event\":\"$1\"" "$LOG" || true; }
post() { curl -sS -X POST --max-time 5 -w '\n%{http_code}' "http://$A$1"; }

note "start with --log-format json --log-level debug"
"$MG_BIN" --config "$TMP/gw.toml" --log-format json --log-level debug >"$TMP/stdout.log" 2>"$LOG" &
GW_PID=$!
PIDS+=("$GW_PID")
wait_for "${MG_START_WAIT_S:-60}" grep -q '"event":"workers_started"' "$LOG" \
  || fail "gateway did not start: $(tail -5 "$LOG")"
every_line_is_json
has_event config_loaded ports 1 || fail "config_loaded with ports as the number 1"
python3 - "$LOG" <<'PY' || fail "no EAL line as event dpdk: $(grep -c '"dpdk"' "$LOG") dpdk lines"
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    o = json.loads(line)
    if o["event"] == "dpdk" and o["level"] == "debug" and o.get("msg", "").startswith("EAL: "):
        sys.exit(0)
sys.exit(1)
PY

note "GET /logging; POST /logging?level=info hides debug events"
[[ $(curl -sS --max-time 5 "http://$A/logging") == '{"level":"debug","format":"json"}' ]] \
  || fail "GET /logging: $(curl -sS "http://$A/logging")"
wait_for 5 has_event admin_request path /logging || fail "no debug admin_request line at debug"
[[ $(post "/logging?level=info") == $'{"level":"info","previous":"debug"}\n200' ]] \
  || fail "POST /logging?level=info"
wait_for 5 has_event log_level_changed log_level info || fail "no log_level_changed to info"
[[ $(curl -sS --max-time 5 "http://$A/logging") == '{"level":"info","format":"json"}' ]] \
  || fail "GET /logging after the change"
before=$(count_event admin_request)
curl -sS --max-time 5 -o /dev/null "http://$A/stats"
sleep 0.5
[[ $(count_event admin_request) -eq $before ]] || fail "admin_request logged at info"
has_event admin_request path /stats && fail "GET /stats logged at info"

note "POST /logging?level=debug shows them again"
[[ $(post "/logging?level=debug") == $'{"level":"debug","previous":"info"}\n200' ]] \
  || fail "POST /logging?level=debug"
wait_for 5 has_event log_level_changed log_level debug || fail "no log_level_changed to debug"
curl -sS --max-time 5 -o /dev/null "http://$A/stats"
wait_for 5 has_event admin_request path /stats || fail "no admin_request for /stats at debug"
[[ $(curl -sS --max-time 5 "http://$A/logging") == '{"level":"debug","format":"json"}' ]] \
  || fail "GET /logging after the second change"

note "bad levels: 400, level unchanged"
for q in "?level=verbose" "" "?level=DEBUG"; do
  [[ $(post "/logging$q") == $'level: expected error, warn, info or debug\n\n400' ]] \
    || fail "POST /logging$q: $(post "/logging$q")"
done
[[ $(curl -sS --max-time 5 "http://$A/logging") == '{"level":"debug","format":"json"}' ]] \
  || fail "a bad POST changed the level"

note "SIGTERM: exit 0, the drain lines JSON too"
kill -TERM "$GW_PID"
rc=0; wait "$GW_PID" || rc=$?
[[ $rc -eq 0 ]] || fail "gateway exited $rc after SIGTERM"
has_event drain_done || fail "no drain_done"
every_line_is_json
note "ok"
