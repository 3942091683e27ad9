#!/usr/bin/env bash
# The TCP stack alone (tcp_tun_peer: the stack behind a TUN device) against the Linux kernel's
# TCP in a namespace of its own: a kernel client through a zero-copy echo server (IPv4 and
# IPv6, 20 MB, sha256 both ways), the stack fetching from a kernel server, both again with 2%
# loss, 1% duplication and 3% reordering each way, and a kernel connect to a closed port
# refused by RST. No worker, no NIC: this checks the stack's wire behaviour before it is wired
# into the dataplane.
source "$(dirname "$0")/lib.sh"
require_root
PEER=${MG_TCP_PEER:?MG_TCP_PEER must point at tcp_tun_peer}
[[ -c /dev/net/tun ]] || fail "no /dev/net/tun"

NS=mgtcp$ID
ip netns add "$NS"
NETNS+=("$NS")
in_ns() { ip netns exec "$NS" "$@"; }
in_ns ip link set lo up
in_ns ip tuntap add dev tcp0 mode tun
in_ns ip addr add 10.9.0.1/24 dev tcp0
in_ns ip -6 addr add fd00:9::1/64 dev tcp0 nodad
in_ns ip link set tcp0 up

# start_peer LOG ARGS...: tcp_tun_peer in the namespace, waits for "ready".
start_peer() {
  local log=$1; shift
  # Not through in_ns: a backgrounded function is a subshell, and $! would be its PID.
  ip netns exec "$NS" "$PEER" --dev tcp0 "$@" >"$log" 2>&1 &
  PEER_PID=$!
  PIDS+=("$PEER_PID")
  wait_for 20 grep -q ready "$log" || fail "tcp_tun_peer did not start: $(cat "$log")"
}

cat >"$TMP/client.py" <<'PY'
import hashlib, os, socket, sys, threading
host, n = sys.argv[1], int(sys.argv[2])
data = os.urandom(n)
s = socket.create_connection((host, 7), timeout=60)
got = bytearray()
def reader():
    while True:
        b = s.recv(1 << 16)
        if not b:
            return
        got.extend(b)
t = threading.Thread(target=reader)
t.start()
s.sendall(data)
s.shutdown(socket.SHUT_WR)
t.join()
s.close()
ok = hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
print("sent", n, "echoed", len(got), "match", ok)
sys.exit(0 if ok else 1)
PY

cat >"$TMP/server.py" <<'PY'
import hashlib, os, socket, sys
n, out = int(sys.argv[1]), sys.argv[2]
data = os.urandom(n)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("10.9.0.1", 9000))
ls.listen(4)
open(out + ".ready", "w").close()
c, _ = ls.accept()
c.sendall(data)
c.shutdown(socket.SHUT_WR)
c.recv(1)
c.close()
open(out, "w").write(hashlib.sha256(data).hexdigest())
PY

echo_case() {  # NAME HOST BYTES [IMPAIRMENTS...]
  local name=$1 host=$2 bytes=$3; shift 3
  note "kernel client -> stack echo: $name"
  start_peer "$TMP/echo-$name.log" --mode echo --port 7 --seconds 120 "$@"
  in_ns timeout 100 python3 "$TMP/client.py" "$host" "$bytes" || fail "echo $name: $(cat "$TMP/echo-$name.log")"
  kill "$PEER_PID"; wait "$PEER_PID" 2>/dev/null || true
  cat "$TMP/echo-$name.log" | tr '\n' ' '; echo
}

fetch_case() {  # NAME BYTES [IMPAIRMENTS...]
  local name=$1 bytes=$2; shift 2
  note "stack client <- kernel server: $name"
  rm -f "$TMP/sha-$name" "$TMP/sha-$name.ready"
  ip netns exec "$NS" timeout 100 python3 "$TMP/server.py" "$bytes" "$TMP/sha-$name" &
  local srv=$!
  PIDS+=("$srv")
  wait_for 10 test -f "$TMP/sha-$name.ready" || fail "server did not start"
  in_ns timeout 100 "$PEER" --dev tcp0 --mode fetch --connect 10.9.0.1 --port 9000 \
    --out "$TMP/got-$name" --seconds 90 "$@" >"$TMP/fetch-$name.log" 2>&1 ||
    fail "fetch $name: $(cat "$TMP/fetch-$name.log")"
  wait "$srv" || fail "server $name failed"
  local want got
  want=$(cat "$TMP/sha-$name")
  got=$(sha256sum "$TMP/got-$name" | cut -d' ' -f1)
  [[ $want == "$got" ]] || fail "fetch $name: sha256 differs ($(stat -c %s "$TMP/got-$name") bytes)"
  tr '\n' ' ' <"$TMP/fetch-$name.log"; echo
}

IMPAIR=(--loss 0.02 --dup 0.01 --reorder 0.03 --seed 7)
echo_case clean4 10.9.0.2 20000000
echo_case clean6 fd00:9::2 20000000
echo_case impaired4 10.9.0.2 4000000 "${IMPAIR[@]}"
fetch_case clean 20000000
fetch_case impaired 4000000 "${IMPAIR[@]}"

note "kernel connect to a port the stack does not listen on"
start_peer "$TMP/refuse.log" --mode echo --port 7 --seconds 30
in_ns python3 -c '
import socket, sys
try:
    socket.create_connection(("10.9.0.2", 8), timeout=5)
except ConnectionRefusedError:
    sys.exit(0)
sys.exit(1)' || fail "no RST for a closed port"
kill "$PEER_PID"; wait "$PEER_PID" 2>/dev/null || true
grep -q '^refused=1$' "$TMP/refuse.log" || fail "refused counter: $(cat "$TMP/refuse.log")"
note "ok"
