#!/usr/bin/env bash
# The admin API of a live gateway (net_null port) against hostile local clients
# (admin_abuse.py): a browser's cross-origin and DNS-rebinding requests are refused with 403
# and change nothing, eight 100 MB request bodies are refused with 413 without the peak RSS
# growing, /ready answers every probe while 200 connections trickle their requests, and
# meshgate-ctl still reads and sets the log level.
source "$(dirname "$0")/lib.sh"

MG_CTL=${MG_CTL:?MG_CTL must point at meshgate-ctl}
cat >"$TMP/gw.toml" <<TOML
[[port]]
name = "null0"
device = "net_null_m$ID"
addresses = ["198.51.100.1/24"]
[admin]
listen = "$MG_ADMIN"
TOML
ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$MG_ADMIN/ready") == 200 ]]; }

start_gateway "$TMP/gw.toml"
wait_for 20 ready || fail "not ready"

rc=0
python3 "$(dirname "$0")/admin_abuse.py" "$MG_ADMIN" "$GW_PID" || rc=$?

note "meshgate-ctl through the same checks"
out=$("$MG_CTL" --admin "$MG_ADMIN" log-level debug 2>&1) || fail "meshgate-ctl log-level debug: $out"
[[ $out == "log level: debug (was info)" ]] || fail "meshgate-ctl log-level debug said: $out"
"$MG_CTL" --admin "$MG_ADMIN" log-level info >/dev/null || fail "meshgate-ctl log-level info"
"$MG_CTL" --admin "$MG_ADMIN" stats >/dev/null || fail "meshgate-ctl stats"
ready || fail "/ready not 200 after the abuse"
(( rc == 0 )) || fail "admin_abuse.py: see above"
stop_gateway TERM
echo PASS
