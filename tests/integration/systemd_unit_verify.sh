#!/usr/bin/env bash
# packaging/meshgate.service passes `systemd-analyze verify`, run against a copy whose
# ExecStart is the built binary (verify needs the program to exist; the man pages its
# Documentation= names are checked where they are installed, by e2e_package.sh, which verifies
# the installed unit as it is). The copy must differ from the original in that path only.
# `systemd-analyze security` rates the unit MEDIUM or better: an overall exposure below 7.5,
# where systemd's EXPOSED begins (--threshold counts in tenths: 74 is 7.4).
set -euo pipefail
SRC=${MG_SOURCE_DIR:?}
MG_BIN=${MG_BIN:?}
TMP=$(mktemp -d /tmp/mg-unit.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
unit=$SRC/packaging/meshgate.service
exec_line='ExecStart=/usr/bin/meshgate --config /etc/meshgate/meshgate.toml -- $MESHGATE_EAL_ARGS'
grep -qxF "$exec_line" "$unit" \
  || { echo "FAIL: ExecStart is not: $exec_line" >&2; exit 1; }
grep -qxF 'EnvironmentFile=-/etc/default/meshgate' "$unit" \
  || { echo "FAIL: no EnvironmentFile=-/etc/default/meshgate" >&2; exit 1; }
sed "s#^ExecStart=/usr/bin/meshgate #ExecStart=$MG_BIN #" "$unit" >"$TMP/meshgate.service"
[[ $(diff "$unit" "$TMP/meshgate.service" | grep -c '^[<>]') -eq 2 ]] \
  || { echo "FAIL: the copy differs in more than ExecStart" >&2; exit 1; }
if ! systemd-analyze verify --man=no "$TMP/meshgate.service" >"$TMP/verify.log" 2>&1; then
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

rc=0
systemd-analyze security --offline=true --threshold=74 "$TMP/meshgate.service" \
  >"$TMP/security.log" 2>&1 || rc=$?
overall=$(grep -oE 'Overall exposure level for meshgate\.service: [0-9]+\.[0-9] [A-Z]+' \
  "$TMP/security.log" || true)
[[ -n $overall ]] || { echo "FAIL: no overall exposure level:" >&2; cat "$TMP/security.log" >&2; exit 1; }
read -r score label < <(awk '{print $(NF-1), $NF}' <<<"$overall")
if [[ $rc -ne 0 ]] || ! [[ $label =~ ^(MEDIUM|OK|SAFE|PERFECT)$ ]] \
    || ! awk -v s="$score" 'BEGIN { exit !(s < 7.5) }'; then
  echo "FAIL: systemd-analyze security rates the unit $score $label (exit $rc), not MEDIUM or better:" >&2
  grep '✗' "$TMP/security.log" >&2 || true
  exit 1
fi
echo "systemd_unit_verify: ok (exposure $score $label)"
