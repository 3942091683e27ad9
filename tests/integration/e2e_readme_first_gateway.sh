#!/usr/bin/env bash
# README's "A first live gateway, step by step" runs as it is written: the shell block between
# its first-gateway markers, in a scratch directory whose build/apps holds this build's programs.
# It must end with exit 0, the backend's page fetched through the VIP, meshgate-ctl listing the
# service with its backend and its connections, the drain's summary.
source "$(dirname "$0")/lib.sh"
require_root
SRC=${MG_SOURCE_DIR:?}

# The block uses fixed names; a run that failed half-way may have left them.
cleanup_block() {
  pkill -f -- "--config first.toml" 2>/dev/null || true
  local ns
  for ns in mg-client mg-backend; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap 'rc=$?; cleanup_block; (exit $rc); cleanup' EXIT
cleanup_block

sed -n '/<!-- first-gateway:begin -->/,/<!-- first-gateway:end -->/p' "$SRC/README.md" |
  sed '1,2d;$d' | sed '$d' >"$TMP/block.sh"
grep -q 'net_af_packet0,iface=mg-c' "$TMP/block.sh" || fail "README block not found: $(head -3 "$TMP/block.sh")"
mkdir -p "$TMP/run/build/apps"
ln -s "$MG_BIN" "$TMP/run/build/apps/meshgate"
ln -s "$MG_CTL" "$TMP/run/build/apps/meshgate-ctl"
rc=0
(cd "$TMP/run" && timeout 120 bash -euo pipefail "$TMP/block.sh") >"$TMP/out.log" 2>&1 || rc=$?
cat "$TMP/out.log"
cp "$TMP/run/gateway.log" "$TMP/gateway.log" 2>/dev/null || true
[[ $rc -eq 0 ]] || fail "the README block exited $rc"
grep -qx "config ok" "$TMP/out.log" || fail "no 'config ok'"
grep -qx "hello from the backend" "$TMP/out.log" || fail "the page did not come through the VIP"
grep -Eq '203\.0\.113\.10:80' "$TMP/out.log" || fail "meshgate-ctl services does not list the VIP"
# "  -> Backend:Port Weight Health ActiveConn InActConn Conns ...": the page's connection at least
# (curl's retries while the backend started count too).
conns=$(awk '$1 == "->" && $2 == "198.51.100.11:8080" { print $7; exit }' "$TMP/out.log")
[[ $conns =~ ^[0-9]+$ ]] && (( conns >= 1 )) ||
  fail "meshgate-ctl services does not show the backend with its connections: '$conns'"
grep -q "meshgate summary" "$TMP/out.log" || fail "no summary after the drain"
ip netns list | grep -q '^mg-client' && fail "the block left its namespace"
echo "PASS"
