#!/usr/bin/env python3
"""Kernel TCP peers of e2e_reload.sh.

  serve --port P --name N          a backend: every line L a client sends is answered "N L"
  probe --vip A --port P           one new connection: prints the backend's name, or
                                   "timeout" / "refused" / "reset"
  hold --vip A --port P --n K [--each B1,B2] --dir D
                                   K long-lived connections (with --each: new ones until each
                                   named backend has K of them), each exchanging a line every
                                   0.2 s and checking the answer, until D/stop exists. Writes
                                   D/ready (the backends, once all are connected) and
                                   D/result.json: per connection its backend, the exchanges and
                                   those made after D/mark appeared; exits 1 on the first
                                   exchange that fails (a lost connection).
"""
import argparse
import json
import os
import socket
import sys
import threading
import time


def serve(a):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", a.port))
    srv.listen(256)

    def one(c):
        with c:
            f = c.makefile("rb")
            for line in f:
                c.sendall(a.name.encode() + b" " + line)

    while True:
        c, _ = srv.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


def exchange(s, f, text):
    s.sendall(text.encode() + b"\n")
    line = f.readline()
    if not line:
        raise ConnectionError("closed by the peer")
    name, _, echoed = line.decode().rstrip("\n").partition(" ")
    if echoed != text:
        raise ConnectionError("answer %r to %r" % (line, text))
    return name


def probe(a):
    try:
        s = socket.create_connection((a.vip, a.port), timeout=a.timeout)
        s.settimeout(a.timeout)
        print(exchange(s, s.makefile("rb"), "id"))
        s.close()
    except socket.timeout:
        print("timeout")
    except ConnectionRefusedError:
        print("refused")
    except (ConnectionError, OSError):
        print("reset")


def hold(a):
    conns = []
    want = a.each.split(",") if a.each else []

    def enough():
        if not want:
            return len(conns) >= a.n
        return all(sum(c["backend"] == b for c in conns) >= a.n for b in want)

    for _ in range(100):
        if enough():
            break
        s = socket.create_connection((a.vip, a.port), timeout=5)
        s.settimeout(5)
        f = s.makefile("rb")
        conns.append({"s": s, "f": f, "backend": exchange(s, f, "id"), "rounds": 0,
                      "after_mark": 0})
    if not enough():
        print("hold: 100 connections did not reach each of %s" % want, file=sys.stderr)
        return 1
    with open(os.path.join(a.dir, "ready.tmp"), "w") as out:
        out.write(" ".join(c["backend"] for c in conns) + "\n")
    os.rename(os.path.join(a.dir, "ready.tmp"), os.path.join(a.dir, "ready"))
    error = None
    seq = 0
    while error is None and not os.path.exists(os.path.join(a.dir, "stop")):
        marked = os.path.exists(os.path.join(a.dir, "mark"))
        for i, c in enumerate(conns):
            seq += 1
            try:
                name = exchange(c["s"], c["f"], "seq%d" % seq)
            except (OSError, ConnectionError) as e:
                error = "connection %d to %s: %s" % (i, c["backend"], e)
                break
            if name != c["backend"]:
                error = "connection %d moved from %s to %s" % (i, c["backend"], name)
                break
            c["rounds"] += 1
            c["after_mark"] += marked
        time.sleep(0.2)
    result = {"error": error,
              "conns": [{k: c[k] for k in ("backend", "rounds", "after_mark")} for c in conns]}
    with open(os.path.join(a.dir, "result.json"), "w") as out:
        json.dump(result, out)
    return 1 if error else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--name", required=True)
    r = sub.add_parser("probe")
    r.add_argument("--vip", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--timeout", type=float, default=2.0)
    h = sub.add_parser("hold")
    h.add_argument("--vip", required=True)
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--n", type=int, default=4)
    h.add_argument("--each", default="")
    h.add_argument("--dir", required=True)
    a = p.parse_args()
    if a.cmd == "serve":
        serve(a)
    elif a.cmd == "probe":
        probe(a)
    else:
        sys.exit(hold(a))


if __name__ == "__main__":
    main()
