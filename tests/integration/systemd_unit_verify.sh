#!/usr/bin/env bash
# packaging/meshgate.service passes `systemd-analyze verify`, run against a copy whose
# ExecStart is the built binary (verify needs the program to exist); the installed unit is
# verified as it is by e2e_package.sh. The copy must differ from the original in that path only.
set -euo pipefail
SRC=${MG_SOURCE_DIR:?}
MG_BIN=${MG_BIN:?}
TMP=$(mktemp -d /tmp/mg-unit.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
unit=$SRC/packaging/meshgate.service
grep -q '^ExecStart=/usr/bin/meshgate --config /etc/meshgate/meshgate.toml$' "$unit" \
  || { echo "FAIL: ExecStart is not /usr/bin/meshgate --config /etc/meshgate/meshgate.toml" >&2; exit 1; }
sed "s#^ExecStart=/usr/bin/meshgate #ExecStart=$MG_BIN #" "$unit" >"$TMP/meshgate.service"
[[ $(diff "$unit" "$TMP/meshgate.service" | grep -c '^[<>]') -eq 2 ]] \
  || { echo "FAIL: the copy differs in more than ExecStart" >&2; exit 1; }
if ! systemd-analyze verify "$TMP/meshgate.service" >"$TMP/verify.log" 2>&1; then
  echo "FAIL: systemd-analyze verify:" >&2
  cat "$TMP/verify.log" >&2
  exit 1
fi
# Anything verify prints is a warning about the unit (an unknown key, a bad value).
if [[ -s $TMP/verify.log ]]; then
  echo "FAIL: systemd-analyze verify warned:" >&2
  cat "$TMP/verify.log" >&2
  exit 1
fi
echo "systemd_unit_verify: ok"
