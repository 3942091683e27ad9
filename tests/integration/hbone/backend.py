#!/usr/bin/python3
"""TCP backends and an HTTP/1.1 CONNECT proxy for the HBONE interop tests (threads; bounded).

  backend.py echo PORT          echo every byte; FIN after the peer's FIN (half-close aware)
  backend.py sha PORT           read until FIN, then answer "<sha256 hex> <byte count>\\n" and close
  backend.py connect-proxy PORT HTTP/1.1 CONNECT proxy (the parent proxy nghttpx --http2-proxy
                                forwards CONNECT to); logs each request line to stderr
  backend.py roundtrip PORT N SIZE  client: N concurrent connections to 127.0.0.1:PORT, each
                                sends SIZE bytes of its own and reads SIZE back from an echo;
                                prints "ok <sha256 of all> <bytes>" or "bad ..."; exit status
Listens on 127.0.0.1 (and ::1 with --v6; --bind ADDR: that address, e.g. "::" inside a
test's network namespace). Every socket has a 30 s timeout (--idle S sets
another: an echo connection idle that long is closed as if the peer had sent FIN).
--backlog N sets listen()'s backlog (default 256) and --accept-delay-ms MS sleeps before each
accept(): a busy backend whose listen queue overflows under parallel connects.
"""
import hashlib
import socket
import sys
import threading
import time

TIMEOUT_S = 30


def serve(port, handler, v6=False, idle=TIMEOUT_S, bind=None, backlog=256, accept_delay_s=0.0):
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((bind or ("::1" if v6 else "127.0.0.1"), port))
    s.listen(backlog)
    print(f"backend: listening on {port}", file=sys.stderr, flush=True)
    while True:
        if accept_delay_s:
            time.sleep(accept_delay_s)
        c, _ = s.accept()
        c.settimeout(idle)
        threading.Thread(target=guarded, args=(handler, c), daemon=True).start()


def guarded(handler, c):
    try:
        handler(c)
    except OSError as e:
        print(f"backend: {e}", file=sys.stderr, flush=True)
    finally:
        c.close()


def echo(c):
    while True:
        try:
            b = c.recv(65536)
        except socket.timeout:
            b = b""
        if not b:
            c.shutdown(socket.SHUT_WR)
            return
        c.sendall(b)


def sha(c):
    h, n = hashlib.sha256(), 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    c.sendall(f"{h.hexdigest()} {n}\n".encode())
    c.shutdown(socket.SHUT_WR)


def splice(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                b.shutdown(socket.SHUT_WR)
                return
            b.sendall(d)
    except OSError:
        pass


def connect_proxy(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d or len(head) > 16384:
            return
        head += d
    line = head.split(b"\r\n", 1)[0].decode()
    # One write per line: print() writes the text and its newline separately, and the
    # handler threads' lines interleaved ("...HTTP/1.1connect-proxy: ...").
    sys.stderr.write(f"connect-proxy: {line}\n")
    sys.stderr.flush()
    method, target, _ = line.split(" ", 2)
    if method != "CONNECT":
        c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        return
    host, port = target.rsplit(":", 1)
    try:
        u = socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S)
    except OSError:
        c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
        return
    c.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    rest = head.split(b"\r\n\r\n", 1)[1]
    if rest:
        u.sendall(rest)
    t = threading.Thread(target=splice, args=(u, c), daemon=True)
    t.start()
    splice(c, u)
    t.join(TIMEOUT_S)
    u.close()


def roundtrip(port, n, size):
    results = [None] * n

    def one(i):
        seed = hashlib.sha256(f"conn{i}".encode()).digest()
        data = (seed * (size // 32 + 1))[:size]
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
            w = threading.Thread(target=s.sendall, args=(data,), daemon=True)
            w.start()
            got = bytearray()
            while len(got) < size:
                b = s.recv(65536)
                if not b:
                    break
                got += b
            w.join(TIMEOUT_S)
            s.close()
            results[i] = hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
        except OSError as e:
            print(f"roundtrip {i}: {e}", file=sys.stderr)
            results[i] = False

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(2 * TIMEOUT_S)
    good = sum(1 for r in results if r)
    print(f"{'ok' if good == n else 'bad'} {good}/{n} connections x {size} bytes echoed intact")
    return good == n


if __name__ == "__main__":
    if sys.argv[1] == "roundtrip":
        sys.exit(0 if roundtrip(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])) else 1)
    mode, port = sys.argv[1], int(sys.argv[2])
    handler = {"echo": echo, "sha": sha, "connect-proxy": connect_proxy}[mode]
    idle = float(sys.argv[sys.argv.index("--idle") + 1]) if "--idle" in sys.argv else TIMEOUT_S
    bind = sys.argv[sys.argv.index("--bind") + 1] if "--bind" in sys.argv else None
    backlog = int(sys.argv[sys.argv.index("--backlog") + 1]) if "--backlog" in sys.argv else 256
    delay = float(sys.argv[sys.argv.index("--accept-delay-ms") + 1]) / 1000 \
        if "--accept-delay-ms" in sys.argv else 0.0
    serve(port, handler, v6="--v6" in sys.argv, idle=idle, bind=bind, backlog=backlog,
          accept_delay_s=delay)
