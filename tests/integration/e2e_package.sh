#!/usr/bin/env bash
# The Debian package from the build tree's binaries (cpack, as `cmake --build build --target
# package` runs it, without rebuilding anything): its control data (Depends from
# dpkg-shlibdeps naming DPDK, OpenSSL, Hyperscan, nghttp2, gRPC; the conffile), its file list
# (the two programs only in /usr/bin), then installed with dpkg -i: --version and --check of
# the default config from the installed paths, the unit verified by systemd-analyze, the bash
# completions, the dashboard when the source tree has one. dpkg -r keeps the edited conffile;
# dpkg --purge removes everything. The package is purged on any exit, and a meshgate package
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
[[ $(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles) == /etc/meshgate/meshgate.toml ]] \
  || fail "conffiles is not /etc/meshgate/meshgate.toml: $(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles)"

# File list: the two programs, no test, fuzz, bench or tool binary.
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's#^\./#/#' >"$TMP/files.txt"
bins=$(grep -E '^/usr/s?bin/.' "$TMP/files.txt" | sort | tr '\n' ' ')
[[ $bins == "/usr/bin/meshgate /usr/bin/meshgate-ctl " ]] || fail "programs in the package: $bins"
for f in /etc/meshgate/meshgate.toml /lib/systemd/system/meshgate.service \
    /usr/share/bash-completion/completions/meshgate /usr/share/bash-completion/completions/meshgate-ctl \
    /usr/share/doc/meshgate/config/README.md /usr/share/doc/meshgate/config/ingress-node.toml; do
  grep -qx "$f" "$TMP/files.txt" || fail "$f not in the package"
done
DASHBOARD=/usr/share/meshgate/grafana/meshgate.json
if [[ -f $SRC/tools/grafana/meshgate.json ]]; then
  grep -qx "$DASHBOARD" "$TMP/files.txt" || fail "the dashboard is not in the package"
fi
note "control data and file list"

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
/usr/bin/meshgate-ctl --version | grep -qE '^meshgate-ctl [0-9]+\.[0-9]+\.[0-9]+$' || fail "meshgate-ctl --version"
dpkg-query -W -f='${Conffiles}\n' meshgate | grep -qE '^ /etc/meshgate/meshgate.toml [0-9a-f]{32}$' \
  || fail "dpkg does not list the conffile: $(dpkg-query -W -f='${Conffiles}' meshgate)"
# verify exits 0 on an unknown key or a bad value, printing a warning: any output fails.
systemd-analyze verify /lib/systemd/system/meshgate.service >"$TMP/verify.log" 2>&1 \
  || fail "systemd-analyze verify: $(cat "$TMP/verify.log")"
if [[ -s $TMP/verify.log ]]; then fail "systemd-analyze verify warned: $(cat "$TMP/verify.log")"; fi
grep -q '^ExecStart=/usr/bin/meshgate --config /etc/meshgate/meshgate.toml$' /lib/systemd/system/meshgate.service \
  || fail "the unit does not start /usr/bin/meshgate with /etc/meshgate/meshgate.toml"
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
note "installed: --version, --check, conffile, unit, completions"

# Remove keeps the (edited) conffile, purge removes it.
echo "# edited by the package test" >>/etc/meshgate/meshgate.toml
dpkg -r meshgate >"$TMP/remove.log" 2>&1 || fail "dpkg -r failed: $(cat "$TMP/remove.log")"
if [[ -e /usr/bin/meshgate ]]; then fail "/usr/bin/meshgate left after dpkg -r"; fi
grep -q "edited by the package test" /etc/meshgate/meshgate.toml || fail "dpkg -r did not keep the edited conffile"
dpkg --purge meshgate >"$TMP/purge.log" 2>&1 || fail "dpkg --purge failed: $(cat "$TMP/purge.log")"
while read -r f; do
  if [[ -n $f && ! -d $f && -e $f ]]; then fail "$f left after dpkg --purge"; fi
done <"$TMP/files.txt"
for d in /etc/meshgate /usr/share/doc/meshgate /usr/share/meshgate; do
  if [[ -e $d ]]; then fail "$d left after dpkg --purge"; fi
done
if known; then fail "dpkg still knows meshgate after --purge"; fi
note "removed and purged"
echo "e2e_package: ok"
