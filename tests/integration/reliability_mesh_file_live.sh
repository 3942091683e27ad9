#!/usr/bin/env bash
# A live gateway (net_null port) with [mesh] source = "file" whose mesh file is replaced by a
# FIFO, then by a symlink to /dev/zero: each is logged as an error at once (no open() waiting
# for a writer, no read until memory runs out), the last good model keeps serving (/ready
# stays 200), a good file applies again, and SIGTERM still ends the gateway promptly with
# exit 0 and its summary.
source "$(dirname "$0")/lib.sh"

SRC=${MG_SOURCE_DIR:?}
cp "$SRC/config/mesh.toml" "$TMP/mesh.toml"  # the shipped example mesh file
cat >"$TMP/gw.toml" <<TOML
[[port]]
name = "null0"
device = "net_null_m$ID"
addresses = ["198.51.100.1/24"]
[mesh]
source = "file"
path = "$TMP/mesh.toml"
[admin]
listen = "$MG_ADMIN"
TOML
ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$MG_ADMIN/ready") == 200 ]]; }
invalid_count() { grep -c "event=mesh_file_invalid" "$TMP/gateway.log" || true; }

start_gateway "$TMP/gw.toml"
wait_for 10 ready || fail "not ready"

# A FIFO renamed over the mesh file: an error naming it, at once.
mkfifo "$TMP/next"
mv "$TMP/next" "$TMP/mesh.toml"
wait_for 5 grep -q 'event=mesh_file_invalid .*is not a regular file (a FIFO)' "$TMP/gateway.log" \
  || fail "FIFO mesh file not reported: $(grep mesh_file "$TMP/gateway.log")"
ready || fail "/ready not 200 with a FIFO mesh file"

# A symlink to /dev/zero: the same, and the process does not grow.
ln -s /dev/zero "$TMP/next"
mv -T "$TMP/next" "$TMP/mesh.toml"
wait_for 5 grep -q 'event=mesh_file_invalid .*is not a regular file (a character device)' \
  "$TMP/gateway.log" || fail "/dev/zero mesh file not reported: $(grep mesh_file "$TMP/gateway.log")"
rss_kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$GW_PID/status")
(( rss_kb < 2 * 1024 * 1024 )) || fail "gateway RSS ${rss_kb} kB after a /dev/zero mesh file"
ready || fail "/ready not 200 with a /dev/zero mesh file"

# A good file again: applied (the provider's thread is not wedged).
loaded=$(grep -c "event=mesh_file_loaded" "$TMP/gateway.log")
{ cat "$SRC/config/mesh.toml"; echo "# edited"; } >"$TMP/next"
mv -T "$TMP/next" "$TMP/mesh.toml"
wait_for 5 bash -c "(( \$(grep -c 'event=mesh_file_loaded' '$TMP/gateway.log') > $loaded ))" \
  || fail "a good mesh file after the FIFO and /dev/zero was not applied"

# And a FIFO once more, then SIGTERM: exit 0 within 10 s.
mkfifo "$TMP/next"
mv -T "$TMP/next" "$TMP/mesh.toml"
sleep 0.3
start=$(date +%s)
kill -TERM "$GW_PID"
for _ in $(seq 1 100); do kill -0 "$GW_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$GW_PID" 2>/dev/null && { kill -KILL "$GW_PID"; fail "SIGTERM did not end the gateway in 10 s"; }
rc=0; wait "$GW_PID" || rc=$?
[[ $rc -eq 0 ]] || fail "gateway exited $rc after SIGTERM"
grep -q "meshgate summary" "$TMP/gateway.log" || fail "no summary"
echo "PASS ($(( $(date +%s) - start )) s to stop)"
