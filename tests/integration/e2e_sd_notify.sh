#!/usr/bin/env bash
# sd_notify (packaging/meshgate.service is Type=notify): a live gateway (net_null port, the
# shipped example mesh file, so /ready also waits for the mesh source's first sync) started
# with NOTIFY_SOCKET pointing at a unix datagram socket this test binds. READY=1 arrives, and
# GET /ready answers 200 at that moment (asked by the listener on receipt, before anything
# else happens); SIGHUP brings RELOADING=1 then READY=1; SIGTERM brings STOPPING=1 while the
# drain begins, and the gateway exits 0. Without NOTIFY_SOCKET the other tests run it as before.
# /metrics has meshgate_build_info with the labels --version prints.
source "$(dirname "$0")/lib.sh"

SRC=${MG_SOURCE_DIR:?}
cp "$SRC/config/mesh.toml" "$TMP/mesh.toml"
cat >"$TMP/gw.toml" <<TOML
[gateway]
drain_timeout_ms = 1000
[[port]]
name = "null0"
device = "net_null_n$ID"
addresses = ["198.51.100.1/24"]
[mesh]
source = "file"
path = "$TMP/mesh.toml"
[admin]
listen = "$MG_ADMIN"
TOML

# The listener: one line per datagram in notify.log ("READY=1 STATUS=serving"); on the first
# READY=1 it asks GET /ready at once and writes the status to ready_at_notify.
python3 - "$TMP/notify.sock" "$TMP/notify.log" "$TMP/ready_at_notify" "$MG_ADMIN" <<'PY' &
import socket, sys, urllib.request, urllib.error
path, log, ready_file, admin = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
asked = False
while True:
    msg = s.recv(4096).decode()
    fields = msg.strip().split("\n")
    if "READY=1" in fields and not asked:
        asked = True
        try:
            code = urllib.request.urlopen(f"http://{admin}/ready", timeout=5).status
        except urllib.error.HTTPError as e:
            code = e.code
        except Exception as e:
            code = f"error {e}"
        with open(ready_file, "w") as f:
            f.write(f"{code}\n")
    with open(log, "a") as f:
        f.write(" ".join(fields) + "\n")
PY
PIDS+=($!)
wait_for 5 test -S "$TMP/notify.sock" || fail "the notify listener did not bind"

NOTIFY_SOCKET=$TMP/notify.sock start_gateway "$TMP/gw.toml"
wait_for 30 grep -q '^READY=1' "$TMP/notify.log" || fail "no READY=1: $(cat "$TMP/notify.log" 2>/dev/null)"
wait_for 5 test -s "$TMP/ready_at_notify" || fail "the listener did not ask /ready"
[[ $(cat "$TMP/ready_at_notify") == 200 ]] || fail "GET /ready answered $(cat "$TMP/ready_at_notify") when READY=1 arrived"
[[ $(grep -c 'READY=1' "$TMP/notify.log") -eq 1 ]] || fail "READY=1 sent more than once: $(cat "$TMP/notify.log")"
grep -q 'STOPPING=1' "$TMP/notify.log" && fail "STOPPING=1 before any stop"
note "READY=1 with /ready 200"

# meshgate_build_info carries what --version prints.
curl -sf --max-time 5 "http://$MG_ADMIN/metrics" >"$TMP/metrics.txt" || fail "GET /metrics"
v() { "$MG_BIN" --version | sed -n "s/^$1: //p"; }
want="meshgate_build_info{version=\"$("$MG_BIN" --version | sed -n 's/^meshgate //p')\",commit=\"$(v commit)\",dpdk=\"$(v dpdk)\",openssl=\"$(v openssl)\",hyperscan=\"$(v hyperscan)\"} 1"
grep -qxF "$want" "$TMP/metrics.txt" || fail "/metrics lacks '$want': $(grep build_info "$TMP/metrics.txt")"
grep -qx '# TYPE meshgate_build_info gauge' "$TMP/metrics.txt" || fail "meshgate_build_info is not a gauge"
note "meshgate_build_info matches --version"

kill -HUP "$GW_PID"
wait_for 10 grep -q 'RELOADING=1' "$TMP/notify.log" || fail "no RELOADING=1 on SIGHUP: $(cat "$TMP/notify.log")"
wait_for 10 test "$(grep -c 'READY=1' "$TMP/notify.log")" -ge 2 || fail "no READY=1 after the reload"
grep -A1 'RELOADING=1' "$TMP/notify.log" | tail -1 | grep -q '^READY=1' \
  || fail "READY=1 does not follow RELOADING=1: $(cat "$TMP/notify.log")"
grep 'RELOADING=1' "$TMP/notify.log" | grep -qE 'MONOTONIC_USEC=[0-9]+' || fail "RELOADING=1 without MONOTONIC_USEC"
note "SIGHUP: RELOADING=1, READY=1"

kill -TERM "$GW_PID"
wait_for 10 grep -q '^STOPPING=1' "$TMP/notify.log" || fail "no STOPPING=1 on SIGTERM: $(cat "$TMP/notify.log")"
rc=0
wait "$GW_PID" || rc=$?
[[ $rc -eq 0 ]] || fail "gateway exited $rc after SIGTERM"
grep -q "event=drain_start trigger=sigterm" "$TMP/gateway.log" || fail "SIGTERM did not drain"
[[ $(grep -c 'STOPPING=1' "$TMP/notify.log") -eq 1 ]] || fail "STOPPING=1 not sent exactly once: $(cat "$TMP/notify.log")"
note "SIGTERM: STOPPING=1, drained, exit 0"
echo "e2e_sd_notify: ok"
