# Shared helpers of the HBONE interop tests (bash, sourced): a scratch directory, background
# processes killed at exit, the mkpki PKI, counter checks on meshgate-hbone --stats files.
set -euo pipefail
HB=${MG_HBONE:?MG_HBONE must point at meshgate-hbone}
SRC=${MG_SOURCE_DIR:?}
PY=/usr/bin/python3  # Debian's python: python3-h2 is installed for it
H=$SRC/tests/integration/hbone
TMP=$(mktemp -d /tmp/mg-hbone.XXXXXX)
PIDS=()
cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ $rc -ne 0 ]]; then
    for f in "$TMP"/*.log; do [[ -f $f ]] && { echo "=== $f"; tail -n 30 "$f"; }; done
  fi
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "--- $*"; }
# A block of 10 ports for this run, chosen by PID inside [$1, $1 + 10000). Keep $1 + 10000 below
# the kernel's ephemeral range (32768..60999): a port there can be any outgoing connection's.
port_block() { echo $(( $1 + ($$ % 1000) * 10 )); }
make_pki() { "$SRC/tools/mkpki" "$TMP/pki" >/dev/null; P=$TMP/pki; }
stat() { $PY -c "import json; print(json.load(open('$1'))['$2'])"; }
expect() { local v; v=$(stat "$1" "$2"); [[ $v == "$3" ]] || fail "$(basename "$1"): $2 = $v, want $3"; }
