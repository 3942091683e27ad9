#!/usr/bin/env bash
# meshgate --check: good configs print "config ok" (exit 0, and on stderr the memory they need);
# bad ones exit 2 and name file:line:column and the key. Nothing is started either way.
source "$(dirname "$0")/lib.sh"
SRC=${MG_SOURCE_DIR:?}
# The output of a good config without its memory line.
verdict() { grep -v '^memory: needs about [0-9]* MiB '; }

# Every example config is valid as a file; those written for this machine pass the whole check.
for good in "$SRC"/config/*.toml; do
  [[ $good == */mesh.toml ]] && continue  # a mesh file ([mesh] path), not a gateway config
  out=$("$MG_BIN" --config "$good" --check --offline 2>&1) || fail "$good --offline: $out"
  [[ $out == "config ok (offline: "* ]] || fail "$good --offline: $out"
done
out=$("$MG_BIN" --config "$SRC/config/demo.toml" --check 2>&1 | verdict) || fail "demo.toml: $out"
[[ $out == "config ok" ]] || fail "demo.toml: $out"
# Written for a lab host: the whole check names each absent device and file at its key, and
# --offline is refused without --check.
rc=0
out=$("$MG_BIN" --config "$SRC/config/ingress-node.toml" --check 2>&1) || rc=$?
[[ $rc -eq 2 ]] || fail "ingress-node.toml --check: exit $rc: $out"
grep -Eq '^.*ingress-node.toml:[0-9]+:[0-9]+: port\[0\]\.device: PCI device 0000:3b:02.0 is absent' \
  <<<"$out" || fail "ingress-node.toml --check: $out"
grep -Eq 'hbone.cert_chain: "/etc/meshgate/certs/gateway.pem" cannot be opened' <<<"$out" ||
  fail "ingress-node.toml --check: $out"
rc=0
out=$("$MG_BIN" --config "$SRC/config/demo.toml" --offline 2>&1) || rc=$?
[[ $rc -eq 2 && $out == *"--offline needs --check"* ]] || fail "--offline alone: exit $rc: $out"

# check NAME EXPECTED_REGEX TOML: exit 2 and stderr matching the regex.
check() {
  local name=$1 want=$2 f="$TMP/$1.toml" rc=0
  printf '%s\n' "$3" >"$f"
  "$MG_BIN" --config "$f" --check >"$TMP/out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "$name: exit $rc (want 2): $(cat "$TMP/out")"
  grep -Eq "$want" "$TMP/out" || fail "$name: '$(cat "$TMP/out")' does not match /$want/"
  echo "ok $name: $(head -n1 "$TMP/out")"
}
base='[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]'

# An access log in a directory that does not exist: the start would open it and exit 1.
check access_log_dir "access_log_dir.toml:[0-9]+:8: access_log.path: access log: directory \"/nonexistent-mg\" does not exist" "$base
[access_log]
path = \"/nonexistent-mg/access.log\""
check misspelt_key "misspelt_key.toml:2:1: gateway.wrokers: unknown key \(did you mean 'workers'\?\)" "[gateway]
wrokers = 2
$base"
check bad_ip "bad_ip.toml:[0-9]+:[0-9]+: service\[0\].vip: .*10.0.0.300" "$base
[[service]]
name = \"web\"
vip = \"10.0.0.300\"
port = 80
  [[service.backend]]
  address = \"198.51.100.11\"
  port = 8080"
check duplicate_vip "duplicate_vip.toml:[0-9]+:[0-9]+: service\[1\].*(duplicate|already)" "$base
[[service]]
name = \"a\"
vip = \"203.0.113.10\"
port = 80
  [[service.backend]]
  address = \"198.51.100.11\"
  port = 8080
[[service]]
name = \"b\"
vip = \"203.0.113.10\"
port = 80
  [[service.backend]]
  address = \"198.51.100.12\"
  port = 8080"
check missing_backend_port "missing_backend_port.toml:[0-9]+:[0-9]+: service\[0\].backend\[0\].port: missing" "$base
[[service]]
name = \"web\"
vip = \"203.0.113.10\"
port = 80
  [[service.backend]]
  address = \"198.51.100.11\""
check proxy_idle_timeout "proxy_idle_timeout.toml:[0-9]+:18: proxy.idle_timeout_s: expected an integer 0..604800, got -1" "$base
[proxy]
idle_timeout_s = -1"
check proxy_protocol_on_dnat "proxy_protocol_on_dnat.toml:[0-9]+:18: service\[0\].proxy_protocol: proxy_protocol applies to mode \"proxy\" only" "$base
[[service]]
name = \"web\"
vip = \"203.0.113.10\"
port = 80
proxy_protocol = \"v2\"
  [[service.backend]]
  address = \"198.51.100.11\"
  port = 8080"
# mode = "proxy" is available: a proxy service passes --check.
printf '%s\n[fullnat]\nlocal_addresses = ["198.51.100.2"]\n[[service]]\nname = "web"\nvip = "203.0.113.10"\nport = 80\nmode = "proxy"\nproxy_protocol = "v2"\n  [[service.backend]]\n  address = "198.51.100.11"\n  port = 8080\n' "$base" >"$TMP/proxy_ok.toml"
out=$("$MG_BIN" --config "$TMP/proxy_ok.toml" --check 2>&1 | verdict) || fail "proxy config: $out"
[[ $out == "config ok" ]] || fail "proxy config: $out"
# [mesh] source = "file": the mesh file is checked too, with its own file:line:column.
printf '[[workload]]\nuid = "w"\nnamespace = "ns"\naddresses = ["10.0.0.300"]\n' >"$TMP/bad-mesh.toml"
check bad_mesh_file "bad-mesh.toml:4:14: workload\[0\].addresses\[0\]: expected an IPv4/IPv6 address" "$base
[mesh]
source = \"file\"
path = \"$TMP/bad-mesh.toml\""
# (A config is read from a regular file only: written out, not given as a pipe.)
printf '%s\n[mesh]\nsource = "file"\npath = "%s"\n' "$base" "$SRC/config/mesh.toml" >"$TMP/good-mesh.toml"
out=$("$MG_BIN" --config "$TMP/good-mesh.toml" --check 2>&1 | verdict) || fail "good mesh file: $out"
[[ $out == "config ok" ]] || fail "good mesh file: $out"
# Every independent mistake in one run: an unknown key, a validation error, a misspelt driver
# and a missing mesh file are all reported, each at its key, in file order.
check all_in_one_pass "all_in_one_pass.toml:2:1: gateway.wrokers: unknown key" "[gateway]
wrokers = 2
[[port]]
name = \"net0\"
device = \"net_nul0\"
addresses = [\"198.51.100.1/24\"]
mtu = 100
[mesh]
source = \"file\"
path = \"$TMP/no-such-mesh.toml\""
for want in "all_in_one_pass.toml:5:10: port\[0\].device: unknown DPDK net driver in \"net_nul0\"" \
    "all_in_one_pass.toml:7:7: port\[0\].mtu: expected an integer 576..9000, got 100" \
    "all_in_one_pass.toml:10:8: mesh.path: \"$TMP/no-such-mesh.toml\" cannot be opened"; do
  grep -Eq "$want" "$TMP/out" || fail "all_in_one_pass: '$(cat "$TMP/out")' lacks /$want/"
done
[[ $(wc -l <"$TMP/out") -eq 4 ]] || fail "all_in_one_pass: want 4 errors: $(cat "$TMP/out")"
# A device key that did not parse is reported once, by the parser, not again by the device check.
check device_not_a_string "device_not_a_string.toml:2:10: port\[0\].device: expected a string" \
  "[[port]]
device = 7
name = \"net0\""
[[ $(grep -c 'port\[0\].device' "$TMP/out") -eq 1 ]] || fail "device_not_a_string: $(cat "$TMP/out")"
# A backend no port prefix and no [[route]] reaches: a warning at its address, still config ok.
printf '%s\n[[service]]\nname = "web"\nvip = "203.0.113.10"\nport = 80\n  [[service.backend]]\n  address = "192.0.2.20"\n  port = 8080\n' "$base" >"$TMP/unrouted.toml"
rc=0; "$MG_BIN" --config "$TMP/unrouted.toml" --check >"$TMP/stdout" 2>"$TMP/stderr" || rc=$?
[[ $rc -eq 0 ]] || fail "unrouted backend: exit $rc: $(cat "$TMP/stderr")"
[[ $(cat "$TMP/stdout") == "config ok" ]] || fail "unrouted backend: stdout $(cat "$TMP/stdout")"
grep -q "unrouted.toml:10:13: service\[0\].backend\[0\].address: warning: backend 192.0.2.20 of service 'web' is on no port's prefix and no \[\[route\]\] covers it" "$TMP/stderr" \
  || fail "unrouted backend: stderr '$(cat "$TMP/stderr")'"
echo "ok unrouted_backend: $(head -n1 "$TMP/stderr")"
printf '[[route]]\nprefix = "192.0.2.0/24"\nvia = "198.51.100.254"\n' >>"$TMP/unrouted.toml"
out=$("$MG_BIN" --config "$TMP/unrouted.toml" --check 2>&1 | verdict) || fail "routed backend: $out"
[[ $out == "config ok" ]] || fail "routed backend: $out"
# Usage errors are exit 2 too.
rc=0; "$MG_BIN" --check >/dev/null 2>&1 || rc=$?; [[ $rc -eq 2 ]] || fail "missing --config: exit $rc"
# A replay input that cannot be read is plain text, before anything starts.
for input in /nonexistent.pcap "$TMP" "$TMP/unrouted.toml"; do
  rc=0; "$MG_BIN" --config "$SRC/config/demo.toml" --pcap-in "$input" >"$TMP/out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "unreadable --pcap-in $input: exit $rc: $(cat "$TMP/out")"
  case $input in
    /nonexistent.pcap) want="meshgate: --pcap-in /nonexistent.pcap: No such file or directory" ;;
    "$TMP") want="meshgate: --pcap-in $TMP: is a directory" ;;
    *) want="meshgate: --pcap-in $input: not a pcap capture (libpcap: " ;;
  esac
  [[ $(head -n1 "$TMP/out") == "$want"* && $(wc -l <"$TMP/out") -eq 1 ]] \
    || fail "--pcap-in $input: '$(cat "$TMP/out")' (want '$want')"
  echo "ok pcap_in $input: $(cat "$TMP/out")"
done
check bgp_without_host_interface "bgp_without_host_interface.toml:8:13: bgp.peer\[0\].address: peer 198.51.100.254 is reached through port \"net0\", which has no host_interface" "$base
[bgp]
local_as = 65001
  [[bgp.peer]]
  address = \"198.51.100.254\"
  remote_as = 65000"
check bgp_peer_not_on_link "bgp_peer_not_on_link.toml:[0-9]+:[0-9]+: bgp.peer\[0\].address: peer 192.0.2.9 is not on-link" "$base
host_interface = \"mgh\"
[bgp]
local_as = 65001
  [[bgp.peer]]
  address = \"192.0.2.9\"
  remote_as = 65000"
check bgp_bad_as "bgp_bad_as.toml:[0-9]+:[0-9]+: bgp.local_as: expected an integer 1..4294967295, got 0" "$base
host_interface = \"mgh\"
[bgp]
local_as = 0
  [[bgp.peer]]
  address = \"198.51.100.254\"
  remote_as = 65000"
check bgp_daemon_missing "bgp_daemon_missing.toml:[0-9]+:[0-9]+: bgp.daemon: \"/nonexistent/bird\" is not an executable" "$base
host_interface = \"mgh\"
[bgp]
local_as = 65001
daemon = \"/nonexistent/bird\"
  [[bgp.peer]]
  address = \"198.51.100.254\"
  remote_as = 65000"
echo "PASS"
