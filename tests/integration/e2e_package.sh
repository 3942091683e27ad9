#!/usr/bin/env bash
# The Debian package from the build tree's binaries (cpack, as `cmake --build build --target
# package` runs it, without rebuilding anything): its control data (Depends from
# dpkg-shlibdeps naming DPDK, OpenSSL, Hyperscan, nghttp2, gRPC; the conffile), its file list
# (the two programs only in /usr/bin), then installed with dpkg -i: --version and --check of
# the default config from the installed paths, the unit verified by systemd-analyze (and rated
# MEDIUM or better by its security analysis), the bash completions, the dashboard when the
# source tree has one; /var/log/meshgate created by the package (0750), the logrotate file
# accepted by logrotate and rotating a log into a 0640 one, the man pages rendered by man
# without a warning, copyright (DEP-5) and changelog.gz, /etc/default/meshgate.
# dpkg -r keeps the edited conffile; dpkg --purge removes everything, the logs too. The package is purged on any exit, and a meshgate package
# left installed by an earlier, aborted run is purged first. Root (dpkg).
source "$(dirname "$0")/lib.sh"
require_root
BUILD=${MG_BUILD_DIR:?MG_BUILD_DIR must point at the build directory}
SRC=${MG_SOURCE_DIR:?}
MG_CTL=${MG_CTL:?}

installed() { dpkg-query -W -f='${Status}' meshgate 2>/dev/null | grep -q "install ok installed"; }
known() { dpkg-query -W -f='${Status}' meshgate >/dev/null 2>&1; }
purge() { dpkg --purge meshgate >"$TMP/purge.log" 2>&1 || true; }
package_cleanup() {
  local rc=$?
  known && purge
  (exit $rc)
  cleanup
}
trap package_cleanup EXIT

if known; then
  note "purging a meshgate package already present ($(dpkg-query -W -f='${Version} ${Status}' meshgate))"
  purge
  known && fail "could not purge the meshgate package present before the test: $(cat "$TMP/purge.log")"
fi

cpack --config "$BUILD/CPackConfig.cmake" -B "$TMP/pkg" >"$TMP/cpack.log" 2>&1 || fail "cpack failed: $(tail -20 "$TMP/cpack.log")"
DEB=$(ls "$TMP"/pkg/meshgate_*.deb 2>/dev/null || true)
[[ -n $DEB && -f $DEB ]] || fail "no .deb in $TMP/pkg: $(ls "$TMP/pkg")"
note "built $(basename "$DEB")"

# Control data.
dpkg-deb -I "$DEB" >"$TMP/info.txt"
depends=$(dpkg-deb -f "$DEB" Depends)
for lib in 'librte-eal[0-9]+' 'librte-ethdev[0-9]+' 'librte-mempool-ring[0-9]+' 'librte-net-tap[0-9]+' 'libssl3' 'libhyperscan5' 'libnghttp2-14' 'libgrpc' 'libsystemd0' 'libstdc\+\+6'; do
  grep -qE "(^|, )$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
conffiles=$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | sort | tr '\n' ' ')
[[ $conffiles == "/etc/default/meshgate /etc/logrotate.d/meshgate /etc/meshgate/meshgate.toml " ]] \
  || fail "conffiles: $conffiles"

# File list: the two programs, no test, fuzz, bench or tool binary.
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's#^\./#/#' >"$TMP/files.txt"
bins=$(grep -E '^/usr/s?bin/.' "$TMP/files.txt" | sort | tr '\n' ' ')
[[ $bins == "/usr/bin/meshgate /usr/bin/meshgate-ctl " ]] || fail "programs in the package: $bins"
for f in /etc/meshgate/meshgate.toml /lib/systemd/system/meshgate.service \
    /usr/share/bash-completion/completions/meshgate /usr/share/bash-completion/completions/meshgate-ctl \
    /usr/share/doc/meshgate/config/README.md /usr/share/doc/meshgate/config/ingress-node.toml \
    /etc/default/meshgate /etc/logrotate.d/meshgate /usr/lib/tmpfiles.d/meshgate.conf \
    /usr/share/man/man8/meshgate.8.gz /usr/share/man/man8/meshgate-ctl.8.gz \
    /usr/share/doc/meshgate/copyright /usr/share/doc/meshgate/changelog.gz; do
  grep -qx "$f" "$TMP/files.txt" || fail "$f not in the package"
done
DASHBOARD=/usr/share/meshgate/grafana/meshgate.json
if [[ -f $SRC/tools/grafana/meshgate.json ]]; then
  grep -qx "$DASHBOARD" "$TMP/files.txt" || fail "the dashboard is not in the package"
fi
note "control data and file list"

# The log directory must come from the package, not from an earlier run.
if [[ -e /var/log/meshgate ]]; then rm -rf /var/log/meshgate; fi
dpkg -i "$DEB" >"$TMP/dpkg.log" 2>&1 || fail "dpkg -i failed: $(cat "$TMP/dpkg.log")"
installed || fail "meshgate not installed after dpkg -i"

/usr/bin/meshgate --version >"$TMP/version.txt" || fail "meshgate --version failed"
"$MG_BIN" --version | cmp -s - "$TMP/version.txt" || fail "the installed --version differs from the build's: $(cat "$TMP/version.txt")"
grep -qE '^meshgate [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/version.txt" || fail "--version: $(cat "$TMP/version.txt")"
for k in commit dpdk openssl hyperscan; do
  grep -qE "^$k: [0-9a-zA-Z.+-]+$" "$TMP/version.txt" || fail "--version has no $k line: $(cat "$TMP/version.txt")"
done
[[ $(/usr/bin/meshgate --check --config /etc/meshgate/meshgate.toml) == "config ok" ]] \
  || fail "the default config does not pass --check"
/usr/bin/meshgate --help | grep -q -- '-- EAL_ARGS' || fail "meshgate --help does not document -- EAL_ARGS"
/usr/bin/meshgate-ctl --version | grep -qE '^meshgate-ctl [0-9]+\.[0-9]+\.[0-9]+$' || fail "meshgate-ctl --version"
for c in /etc/meshgate/meshgate.toml /etc/default/meshgate /etc/logrotate.d/meshgate; do
  dpkg-query -W -f='${Conffiles}\n' meshgate | grep -qE "^ $c [0-9a-f]{32}\$" \
    || fail "dpkg does not list the conffile $c: $(dpkg-query -W -f='${Conffiles}' meshgate)"
done
# verify exits 0 on an unknown key or a bad value, printing a warning: any output fails.
systemd-analyze verify /lib/systemd/system/meshgate.service >"$TMP/verify.log" 2>&1 \
  || fail "systemd-analyze verify: $(cat "$TMP/verify.log")"
if [[ -s $TMP/verify.log ]]; then fail "systemd-analyze verify warned: $(cat "$TMP/verify.log")"; fi
UNIT=/lib/systemd/system/meshgate.service
grep -qxF 'ExecStart=/usr/bin/meshgate --config /etc/meshgate/meshgate.toml -- $MESHGATE_EAL_ARGS' "$UNIT" \
  || fail "the unit does not start /usr/bin/meshgate with /etc/meshgate/meshgate.toml and \$MESHGATE_EAL_ARGS"
for line in EnvironmentFile=-/etc/default/meshgate LogsDirectory=meshgate LogsDirectoryMode=0750 UMask=0027; do
  grep -qxF "$line" "$UNIT" || fail "the unit has no $line"
done
systemd-analyze security --offline=true --threshold=74 "$UNIT" >"$TMP/security.log" 2>&1 \
  || fail "systemd-analyze security: $(grep Overall "$TMP/security.log")"
# The default file sets the variable the unit passes, empty (meshgate's defaults).
[[ $(bash -c 'set -u; . /etc/default/meshgate; echo "[$MESHGATE_EAL_ARGS]"') == "[]" ]] \
  || fail "/etc/default/meshgate does not set MESHGATE_EAL_ARGS empty"
# The completion asks the installed binary for its subcommands.
subs=$(bash -c 'source /usr/share/bash-completion/completions/meshgate-ctl
  COMP_WORDS=(meshgate-ctl fl); COMP_CWORD=1; _meshgate_ctl; echo "${COMPREPLY[*]}"')
[[ $subs == "flows flow-rules" ]] || fail "completion of 'meshgate-ctl fl': '$subs'"
levels=$(bash -c 'source /usr/share/bash-completion/completions/meshgate
  COMP_WORDS=(meshgate --log-level ""); COMP_CWORD=2; _meshgate; echo "${COMPREPLY[*]}"')
grep -qw debug <<<"$levels" || fail "completion of 'meshgate --log-level': '$levels'"
if [[ -f $SRC/tools/grafana/meshgate.json ]]; then
  cmp -s "$SRC/tools/grafana/meshgate.json" "$DASHBOARD" || fail "$DASHBOARD differs from the source's"
fi
note "installed: --version, --check, conffiles, unit, completions"

# The access log's directory: there after the install (tmpfiles.d), root's, 0750.
[[ $(stat -c '%a %U %G' /var/log/meshgate 2>&1) == "750 root root" ]] \
  || fail "/var/log/meshgate after dpkg -i: $(stat -c '%a %U %G' /var/log/meshgate 2>&1)"
# logrotate reads the file without an error, and a forced rotation (its own state file) moves
# the log aside and creates a new one 0640. The postrotate's systemctl has no gateway to
# signal here: it must not fail the rotation.
logrotate -d /etc/logrotate.d/meshgate >"$TMP/logrotate-d.log" 2>&1 \
  || fail "logrotate -d: $(cat "$TMP/logrotate-d.log")"
if grep -qi 'error' "$TMP/logrotate-d.log"; then fail "logrotate -d: $(grep -i error "$TMP/logrotate-d.log")"; fi
echo '{"event":"test"}' >/var/log/meshgate/access.log
logrotate -f -s "$TMP/logrotate.state" /etc/logrotate.d/meshgate >"$TMP/logrotate.log" 2>&1 \
  || fail "logrotate -f: $(cat "$TMP/logrotate.log")"
grep -q '"event":"test"' /var/log/meshgate/access.log.1 || fail "logrotate did not move the log: $(ls -l /var/log/meshgate)"
[[ $(stat -c '%a %s' /var/log/meshgate/access.log 2>&1) == "640 0" ]] \
  || fail "the new log after rotation: $(stat -c '%a %s' /var/log/meshgate/access.log 2>&1)"
note "/var/log/meshgate and its rotation"

# Man pages: gzip -9n (no name, no time stamp: bytes 3..7 of the header zero but the method),
# rendered at 80 columns without a warning from man or groff.
for page in meshgate meshgate-ctl; do
  gz=/usr/share/man/man8/$page.8.gz
  [[ $(od -An -tx1 -j3 -N5 "$gz" | tr -d ' \n') == 0000000000 ]] || fail "$gz keeps a name or time stamp"
  MANWIDTH=80 man --warnings -l "$gz" >"$TMP/$page.txt" 2>"$TMP/$page.warn" || fail "man -l $gz failed: $(cat "$TMP/$page.warn")"
  if [[ -s $TMP/$page.warn ]]; then fail "man -l $gz warned: $(cat "$TMP/$page.warn")"; fi
  grep -qE "^NAME" "$TMP/$page.txt" && grep -qE "^ +$page +- " "$TMP/$page.txt" \
    || fail "man $page has no NAME section naming it: $(head -5 "$TMP/$page.txt")"
  grep -q "meshgate $(sed -n 's/^meshgate //p;q' "$TMP/version.txt")" "$TMP/$page.txt" \
    || fail "man $page does not carry the version: $(tail -1 "$TMP/$page.txt")"
done
grep -q 'MESHGATE_EAL_ARGS' "$TMP/meshgate.txt" || fail "man meshgate does not document MESHGATE_EAL_ARGS"
grep -q -- '-- EAL_ARGS' "$TMP/meshgate.txt" || fail "man meshgate does not document -- EAL_ARGS"
DOC=/usr/share/doc/meshgate
[[ $(head -1 $DOC/copyright) == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ]] \
  || fail "$DOC/copyright is not DEP-5: $(head -1 $DOC/copyright)"
grep -qE '^Files: \*$' $DOC/copyright && grep -qE '^License: ' $DOC/copyright || fail "$DOC/copyright has no Files: * or License:"
[[ $(zcat $DOC/changelog.gz | head -1) =~ ^meshgate\ \($(sed -n 's/^meshgate //p;q' "$TMP/version.txt")\)\  ]] \
  || fail "changelog.gz does not begin with this version: $(zcat $DOC/changelog.gz | head -1)"
note "man pages, copyright, changelog"

# Remove keeps the (edited) conffile, purge removes it.
echo "# edited by the package test" >>/etc/meshgate/meshgate.toml
dpkg -r meshgate >"$TMP/remove.log" 2>&1 || fail "dpkg -r failed: $(cat "$TMP/remove.log")"
if [[ -e /usr/bin/meshgate ]]; then fail "/usr/bin/meshgate left after dpkg -r"; fi
grep -q "edited by the package test" /etc/meshgate/meshgate.toml || fail "dpkg -r did not keep the edited conffile"
dpkg --purge meshgate >"$TMP/purge.log" 2>&1 || fail "dpkg --purge failed: $(cat "$TMP/purge.log")"
while read -r f; do
  if [[ -n $f && ! -d $f && -e $f ]]; then fail "$f left after dpkg --purge"; fi
done <"$TMP/files.txt"
for d in /etc/meshgate /usr/share/doc/meshgate /usr/share/meshgate /var/log/meshgate; do
  if [[ -e $d ]]; then fail "$d left after dpkg --purge"; fi
done
if known; then fail "dpkg still knows meshgate after --purge"; fi
note "removed and purged"
echo "e2e_package: ok"
