#!/usr/bin/python3
"""Kernel TCP peers for e2e_proxy.sh (clients and backends, plain sockets, standard library only).

Backends (one process, several ports):
  serve --sink P   read to EOF, answer the sha256 of what came (hex + newline), then close:
                   the client's half-close must arrive as EOF while the answer still flows back
        --echo P   echo every byte; at EOF close
        --rst P    read one chunk, then reset (SO_LINGER 0)
        --log F    one line per event: "<port> <peer> eof|reset|proxy <addr:port>"
        --proxy-v2 P  like --echo, but the first bytes must be a PROXY v2 header; logged
Clients (exit 0 when the expectation holds, 1 otherwise, with a line saying what happened):
  upload HOST PORT FILE         send FILE, shut down writing, compare the sha256 answer
  expect-reset HOST PORT        connect, send, expect a reset (or refusal) within 5 s
  abort HOST PORT               echo round trip, then reset the connection (SO_LINGER 0)
  idle HOST PORT SECONDS        echo round trip, then wait for the proxy's FIN; prints the wait
  many HOST PORT N              N parallel connections, each an echo round trip of its own bytes
  halfclose HOST PORT           send, shut down writing, read the echo to EOF
  synflood SRC DST PORT COUNT SECONDS   raw SYNs from SRC with random ports, bounded in count and time;
                                        SRC may be a list of ranges (192.0.2.100-250,198.51.100.100-250):
                                        a random address of them per SYN
  loop HOST PORT SECONDS        sequential connect + 1 KiB echo round trip + close for SECONDS (3 s
                                timeout each); prints "loop ok=N failed=M" and each failure's kind
  connect-rate HOST PORT SECONDS        sequential connect + echo + close; prints connections/s
"""
import asyncio
import hashlib
import os
import random
import socket
import struct
import sys
import time

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def log_line(path, text):
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


async def serve(args):
    ports = {"sink": [], "echo": [], "rst": [], "proxy-v2": []}
    logf = None
    i = 0
    while i < len(args):
        k = args[i].lstrip("-")
        if k == "log":
            logf = args[i + 1]
        else:
            ports[k].append(int(args[i + 1]))
        i += 2

    def handler(kind, port):
        async def h(reader, writer):
            peer = writer.get_extra_info("peername")
            who = f"{peer[0]}:{peer[1]}"
            sock = writer.get_extra_info("socket")
            try:
                if kind == "proxy-v2":
                    hdr = await reader.readexactly(16)
                    if hdr[:12] != V2_SIG:
                        log_line(logf, f"{port} {who} bad-proxy-header")
                        writer.close()
                        return
                    rest = await reader.readexactly(struct.unpack("!H", hdr[14:16])[0])
                    if hdr[13] == 0x11:
                        src = socket.inet_ntop(socket.AF_INET, rest[0:4])
                        sport = struct.unpack("!H", rest[8:10])[0]
                        dst = socket.inet_ntop(socket.AF_INET, rest[4:8])
                        dport = struct.unpack("!H", rest[10:12])[0]
                    else:
                        src = socket.inet_ntop(socket.AF_INET6, rest[0:16])
                        sport = struct.unpack("!H", rest[32:34])[0]
                        dst = socket.inet_ntop(socket.AF_INET6, rest[16:32])
                        dport = struct.unpack("!H", rest[34:36])[0]
                    log_line(logf, f"{port} {who} proxy {src}:{sport} {dst}:{dport}")
                    kind_ = "echo"
                else:
                    kind_ = kind
                if kind_ == "sink":
                    h = hashlib.sha256()
                    while True:
                        b = await reader.read(1 << 16)
                        if not b:
                            break
                        h.update(b)
                    log_line(logf, f"{port} {who} eof")
                    writer.write((h.hexdigest() + "\n").encode())
                    await writer.drain()
                elif kind_ == "echo":
                    while True:
                        b = await reader.read(1 << 16)
                        if not b:
                            break
                        writer.write(b)
                        await writer.drain()
                    log_line(logf, f"{port} {who} eof")
                elif kind_ == "rst":
                    await reader.read(1 << 16)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    log_line(logf, f"{port} {who} sent-reset")
                    writer.transport.abort()
                    return
                writer.close()
            except (ConnectionResetError, BrokenPipeError):
                log_line(logf, f"{port} {who} reset")
                writer.transport.abort()
            except asyncio.IncompleteReadError:
                log_line(logf, f"{port} {who} short")
                writer.transport.abort()
        return h

    servers = []
    for kind, plist in ports.items():
        for p in plist:
            servers.append(await asyncio.start_server(handler(kind, p), host=None, port=p,
                                                      backlog=4096, reuse_address=True))
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def conn(host, port, timeout=10):
    s = socket.create_connection((host, int(port)), timeout=timeout)
    return s


def upload(host, port, path):
    h = hashlib.sha256()
    s = conn(host, port, 60)
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 16)
            if not b:
                break
            h.update(b)
            s.sendall(b)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    s.close()
    ok = got.decode().strip() == h.hexdigest()
    print(f"upload sha256 sent={h.hexdigest()} backend={got.decode().strip()} ok={ok}")
    return 0 if ok else 1


def expect_reset(host, port):
    try:
        s = conn(host, port, 5)
        s.sendall(b"hello\n")
        b = s.recv(100)
        print(f"no reset: got {b!r}")
        return 1
    except ConnectionResetError:
        print("reset")
        return 0
    except ConnectionRefusedError:
        print("refused")
        return 0
    except socket.timeout:
        print("timeout, no reset")
        return 1


def abort(host, port):
    s = conn(host, port)
    s.sendall(b"ping\n")
    b = s.recv(100)
    if b != b"ping\n":
        print(f"bad echo {b!r}")
        return 1
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    print("aborted")
    return 0


def idle(host, port, seconds):
    s = conn(host, port, float(seconds) * 3)
    s.sendall(b"ping\n")
    if s.recv(100) != b"ping\n":
        print("bad echo")
        return 1
    t0 = time.monotonic()
    try:
        b = s.recv(100)
    except ConnectionResetError:
        b = b"<reset>"
    waited = time.monotonic() - t0
    print(f"closed after {waited:.2f} s idle (got {b!r})")
    return 0 if b == b"" else 1


def halfclose(host, port):
    s = conn(host, port)
    msg = os.urandom(100000)
    s.sendall(msg)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    ok = got == msg
    print(f"half-close echo {len(got)}/{len(msg)} bytes ok={ok}")
    return 0 if ok else 1


async def many(host, port, n):
    sem_ok = 0
    errors = {}

    async def one(i):
        nonlocal sem_ok
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 20)
            msg = f"conn {i} {os.urandom(8).hex()}\n".encode()
            w.write(msg)
            await w.drain()
            got = await asyncio.wait_for(r.readexactly(len(msg)), 20)
            if got == msg:
                sem_ok += 1
            else:
                errors["mismatch"] = errors.get("mismatch", 0) + 1
            # Hold every connection open until all are up, so N are open at once.
            await barrier.wait()
            w.close()
            await w.wait_closed()
        except Exception as e:  # noqa: BLE001 - counted by type
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
            await barrier.abort()

    barrier = asyncio.Barrier(n)
    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(n)))
    print(f"parallel {sem_ok}/{n} ok in {time.monotonic() - t0:.2f} s errors={errors}")
    return 0 if sem_ok == n else 1


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def source_pool(spec):
    pool = []
    for part in spec.split(","):
        if "-" not in part:
            pool.append(socket.inet_aton(part))
            continue
        first, last = part.split("-")
        base, lo = first.rsplit(".", 1)
        pool += [socket.inet_aton(f"{base}.{h}") for h in range(int(lo), int(last) + 1)]
    return pool


def synflood(src, dst, port, count, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    sources = source_pool(src)
    daddr = socket.inet_aton(dst)
    deadline = time.monotonic() + float(seconds)
    sent = 0
    rnd = random.Random(7)
    start = time.monotonic()
    interval = float(seconds) / int(count)  # paced: the flood lasts the whole period
    while sent < int(count) and time.monotonic() < deadline:
        ahead = start + sent * interval - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        saddr = sources[rnd.randrange(len(sources))]
        sport = rnd.randrange(1024, 65535)
        seq = rnd.getrandbits(32)
        # MSS 1460 option: a SYN as Linux would send it, minus timestamps.
        tcp = struct.pack("!HHIIBBHHH", sport, int(port), seq, 0, 6 << 4, 0x02, 64240, 0, 0)
        tcp += b"\x02\x04\x05\xb4"
        pseudo = saddr + daddr + struct.pack("!BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), sent & 0xFFFF, 0, 64, 6, 0,
                         saddr, daddr)
        s.sendto(ip + tcp, (dst, 0))
        sent += 1
    print(f"synflood sent {sent} SYNs in {float(seconds) - (deadline - time.monotonic()):.2f} s")
    return 0


def loop(host, port, seconds):
    deadline = time.monotonic() + float(seconds)
    ok, failed = 0, {}
    while time.monotonic() < deadline:
        msg = os.urandom(1024)
        try:
            s = conn(host, port, 3)
            s.sendall(msg)
            got = b""
            while len(got) < len(msg):
                b = s.recv(len(msg) - len(got))
                if not b:
                    break
                got += b
            s.close()
            if got == msg:
                ok += 1
            else:
                failed["short-echo"] = failed.get("short-echo", 0) + 1
        except OSError as e:
            failed[type(e).__name__] = failed.get(type(e).__name__, 0) + 1
    print(f"loop ok={ok} failed={sum(failed.values())} {failed}")
    return 0


def connect_rate(host, port, seconds):
    deadline = time.monotonic() + float(seconds)
    n = 0
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        s = conn(host, port, 5)
        s.sendall(b"x")
        if s.recv(1) != b"x":
            print("bad echo")
            return 1
        s.close()
        n += 1
    dt = time.monotonic() - t0
    print(f"connections {n} in {dt:.2f} s = {n / dt:.0f}/s")
    return 0


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "serve":
        asyncio.run(serve(args))
        return 0
    if cmd == "upload":
        return upload(*args)
    if cmd == "expect-reset":
        return expect_reset(*args)
    if cmd == "abort":
        return abort(*args)
    if cmd == "idle":
        return idle(*args)
    if cmd == "halfclose":
        return halfclose(*args)
    if cmd == "many":
        return asyncio.run(many(args[0], args[1], int(args[2])))
    if cmd == "synflood":
        return synflood(*args)
    if cmd == "loop":
        return loop(*args)
    if cmd == "connect-rate":
        return connect_rate(*args)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
