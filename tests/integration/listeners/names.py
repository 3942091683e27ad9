#!/usr/bin/python3
"""Kernel-socket peers for e2e_listeners.sh (standard library only).

Backend:
  record ADDR PORT DIR   an HTTP/1.x server that keeps every byte each connection sent in
                         DIR/conn-N.bin and logs one line per connection in DIR/events:
                         "N PEER answered|eof|reset BYTES". It answers "recorder\\n" once the
                         headers and their Content-Length of body have arrived.
Clients (exit 0 when the expectation holds, 1 otherwise, with a line saying what happened):
  split HOST PORT EXPECT [--chunk N] [--delay S] [--pause-after-head S] [--within S] PAYLOAD
      TCP_NODELAY, PAYLOAD (text with Python escapes such as \\r\\n) sent N bytes per
      send with S seconds between sends (each send its own segment); --pause-after-head waits
      S seconds once the bytes up to the first blank line (an HTTP head) are out; --within:
      the outcome must come within S seconds of the last send (default 10). EXPECT: "reset" (the peer resets, before or after
      the last send), "answer:TEXT" (the response ends with TEXT), "closed" (FIN, no bytes),
      "refused" (the SYN is answered by a reset).
  tls-split HOST PORT SNI [--chunk N]
      a TLS handshake (Python ssl over a memory BIO, no verification) whose ClientHello goes
      out N bytes per segment; then GET / with Host SNI; prints the response body.
"""
import asyncio
import os
import select
import socket
import ssl
import sys
import time


def record(addr, port, out):
    counter = [0]

    async def handler(reader, writer):
        counter[0] += 1
        n = counter[0]
        peer = writer.get_extra_info("peername")
        who = f"{peer[0]}:{peer[1]}"
        got = bytearray()
        outcome = "eof"
        try:
            while True:
                b = await reader.read(65536)
                if not b:
                    break
                got += b
                with open(os.path.join(out, f"conn-{n}.bin"), "ab") as f:
                    f.write(b)
                head, sep, body = bytes(got).partition(b"\r\n\r\n")
                if not sep:
                    continue
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v.strip())
                if len(body) >= length:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n"
                                 b"Connection: close\r\n\r\nrecorder\n")
                    await writer.drain()
                    outcome = "answered"
                    break
        except (ConnectionResetError, BrokenPipeError):
            outcome = "reset"
        with open(os.path.join(out, "events"), "a") as f:
            f.write(f"{n} {who} {outcome} {len(got)}\n")
        writer.close()

    async def main():
        server = await asyncio.start_server(handler, addr, int(port))
        print("ready", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def split(host, port, expect, rest):
    chunk, delay, pause, within = 1 << 30, 0.0, None, 10.0
    while rest and rest[0].startswith("--"):
        k, v = rest[0], rest[1]
        rest = rest[2:]
        if k == "--chunk":
            chunk = int(v)
        elif k == "--delay":
            delay = float(v)
        elif k == "--within":
            within = float(v)
        elif k == "--pause-after-head":
            pause = float(v)
    payload = rest[0].encode().decode("unicode_escape").encode("latin-1") if rest else b""
    if pause is not None:
        pause = (payload.index(b"\r\n\r\n") + 4, pause)
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
    except ConnectionRefusedError:
        print("refused")
        return 0 if expect == "refused" else 1
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    got = b""
    t_last = time.monotonic()
    try:
        sent = 0
        while sent < len(payload):
            n = chunk
            if pause and sent < pause[0]:
                n = min(n, pause[0] - sent)
            s.sendall(payload[sent:sent + n])
            t_last = time.monotonic()
            sent += n
            if pause and sent == pause[0]:
                time.sleep(pause[1])
            elif sent < len(payload):
                time.sleep(delay)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except (ConnectionResetError, BrokenPipeError):
        what = "reset"
    except socket.timeout:
        what = "timeout"
    else:
        what = "answer" if got else "closed"
    s.close()
    took = time.monotonic() - t_last
    print(f"{what} after {len(got)} bytes, {took:.2f} s after the last send: {got[-40:]!r}")
    if took > within:
        print(f"too late: more than {within} s")
        return 1
    if expect.startswith("answer:"):
        return 0 if what == "answer" and got.decode(errors="replace").rstrip().endswith(expect[7:]) else 1
    return 0 if what == expect else 1


def tls_split(host, port, sni, rest):
    chunk = int(rest[1]) if rest[:1] == ["--chunk"] else 7
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, outg, server_hostname=sni)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    first = True

    def flush():
        nonlocal first
        data = outg.read()
        if first and data:
            # The ClientHello: one small segment at a time.
            first = False
            for i in range(0, len(data), chunk):
                s.sendall(data[i:i + chunk])
                time.sleep(0.005)
        elif data:
            s.sendall(data)

    def pump():
        b = s.recv(65536)
        if not b:
            inc.write_eof()
        inc.write(b)

    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            flush()
            pump()
    flush()
    tls.write(f"GET / HTTP/1.0\r\nHost: {sni}\r\n\r\n".encode())
    flush()
    resp = b""
    while True:
        try:
            b = tls.read(65536)
            if not b:
                break
            resp += b
        except ssl.SSLWantReadError:
            r, _, _ = select.select([s], [], [], 10)
            if not r:
                break
            b = s.recv(65536)
            if not b:
                break
            inc.write(b)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
    s.close()
    sys.stdout.write(resp.partition(b"\r\n\r\n")[2].decode())
    return 0


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "record":
        return record(*args)
    if cmd == "split":
        return split(args[0], args[1], args[2], args[3:])
    if cmd == "tls-split":
        return tls_split(args[0], args[1], args[2], args[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
