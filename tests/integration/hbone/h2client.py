#!/usr/bin/python3
"""An HBONE client on python-h2 (not nghttp2) and Python's ssl: drives meshgate's terminator.

  h2client.py ADDR PORT --cert C --key K --bundle B MODE [options]
  modes:
    streams    N concurrent CONNECT streams on one connection to an echo backend; each sends
               --bytes of its own data, half-closes, and must get exactly its bytes back
    status     one request; prints the :status (or "reset <code>")
    halfclose  send --bytes then END_STREAM to a sha backend; the answer (sent by the backend
               only after our FIN) must name our bytes, then END_STREAM must follow
    drain      open a stream, signal --pid (SIGTERM), expect GOAWAY, keep using the stream
    revoke     open a stream to an echo backend, see an echo, signal --pid (SIGHUP: the server
               reloads its policies), expect RST_STREAM with CONNECT_ERROR (10)
  --source ADDR connects from that local address.
Prints one line of JSON; exit 0 when every check of the mode passed, 1 otherwise, 3 when the
TLS handshake failed. Everything is bounded by --timeout seconds.
"""
import argparse
import hashlib
import json
import os
import select
import signal
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def fail(msg, **kw):
    print(json.dumps({"ok": False, "error": msg, **kw}), flush=True)
    sys.exit(1)


class Client:
    def __init__(self, a):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False  # SPIFFE ids, not DNS names: checked below
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(a.bundle)
        ctx.load_cert_chain(a.cert, a.key)
        ctx.set_alpn_protocols(["h2"])
        src = (a.source, 0) if getattr(a, "source", "") else None
        raw = socket.create_connection((a.addr, a.port), timeout=a.timeout, source_address=src)
        try:
            self.sock = ctx.wrap_socket(raw)  # no server_hostname: no SNI, as HBONE clients
            # TLS 1.3: a rejected client certificate shows on the first read.
            self.sock.settimeout(a.timeout)
        except (ssl.SSLError, OSError) as e:
            print(json.dumps({"ok": False, "handshake": "failed", "error": str(e)}), flush=True)
            sys.exit(3)
        self.peer = [v for k, v in self.sock.getpeercert().get("subjectAltName", ()) if k == "URI"]
        if self.sock.selected_alpn_protocol() != "h2":
            fail("no ALPN h2")
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8",
            # h2 4.1 demands :scheme and :path on every request, CONNECT included (RFC 9113
            # 8.5 forbids them there): skip its outbound check.
            validate_outbound_headers=False))
        self.h2.initiate_connection()
        self.deadline = time.monotonic() + a.timeout
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def events(self, wait=1.0):
        if time.monotonic() > self.deadline:
            fail("timeout")
        if not self.sock.pending():
            r, _, _ = select.select([self.sock], [], [], wait)
            if not r:
                return []
        try:
            data = self.sock.recv(65536)
        except ssl.SSLError as e:
            print(json.dumps({"ok": False, "handshake": "failed", "error": str(e)}), flush=True)
            sys.exit(3)
        if not data:
            return [None]
        evs = self.h2.receive_data(data)
        self.flush()
        return evs

    def connect(self, authority, method="CONNECT"):
        sid = self.h2.get_next_available_stream_id()
        hdrs = [(":method", method), (":authority", authority)]
        if method != "CONNECT":
            hdrs += [(":scheme", "https"), (":path", "/")]
        self.h2.send_headers(sid, hdrs)
        self.flush()
        return sid

    def send(self, sid, data, end):
        """Sends what flow control allows now; returns the rest."""
        while data:
            n = min(len(data), self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size)
            if n <= 0:
                break
            self.h2.send_data(sid, data[:n])
            data = data[n:]
        if not data and end:
            self.h2.end_stream(sid)
        self.flush()
        return data


def payload(i, n):
    seed = hashlib.sha256(str(i).encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def run_streams(c, a):
    st = {}
    for i in range(a.n):
        sid = c.connect(a.authority)
        st[sid] = {"i": i, "status": None, "out": payload(i, a.bytes), "in": bytearray(), "ended": False, "sent_end": False}
    resets = 0
    while not all(s["ended"] for s in st.values()):
        for sid, s in st.items():
            if s["status"] == 200 and not s["sent_end"]:
                s["out"] = c.send(sid, s["out"], True)
                s["sent_end"] = not s["out"]
        for ev in c.events(0.2):
            if ev is None:
                fail("connection closed", streams_done=sum(s["ended"] for s in st.values()))
            s = st.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived):
                s["status"] = int(dict(ev.headers)[":status"])
                if s["status"] != 200:
                    fail("status", status=s["status"])
            elif isinstance(ev, h2.events.DataReceived):
                s["in"] += ev.data
                c.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                s["ended"] = True
            elif isinstance(ev, h2.events.StreamReset):
                resets += 1
                s["ended"] = True
        c.flush()
    bad = [s["i"] for s in st.values() if bytes(s["in"]) != payload(s["i"], a.bytes)]
    out = {"ok": not bad and resets == 0, "streams": len(st), "bytes_each": a.bytes,
           "mismatched": bad[:10], "resets": resets, "peer": c.peer}
    print(json.dumps(out), flush=True)
    return out["ok"]


def run_status(c, a):
    sid = c.connect(a.authority, a.method)
    while True:
        for ev in c.events():
            if ev is None:
                fail("connection closed")
            if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                print(json.dumps({"ok": True, "status": int(dict(ev.headers)[":status"])}), flush=True)
                return True
            if isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                print(json.dumps({"ok": True, "status": f"reset {int(ev.error_code)}"}), flush=True)
                return True


def run_halfclose(c, a):
    sid = c.connect(a.authority)
    data = payload(7, a.bytes)
    status, got, ended, sent_end = None, bytearray(), False, False
    while not ended:
        if status == 200 and not sent_end:
            data = c.send(sid, data, True)
            sent_end = not data
        for ev in c.events(0.2):
            if ev is None:
                fail("connection closed")
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                if not sent_end:
                    fail("backend answered before our END_STREAM reached it")
                got += ev.data
                c.h2.acknowledge_received_data(ev.flow_controlled_length, sid)
            elif isinstance(ev, h2.events.StreamEnded):
                ended = True
            elif isinstance(ev, h2.events.StreamReset):
                fail("reset", code=int(ev.error_code))
        c.flush()
    want = f"{hashlib.sha256(payload(7, a.bytes)).hexdigest()} {a.bytes}\n".encode()
    ok = bytes(got) == want
    print(json.dumps({"ok": ok, "answer": got.decode(errors="replace").strip()}), flush=True)
    return ok


def run_drain(c, a):
    sid = c.connect(a.authority)
    got, goaway, sent_after, ended, status = bytearray(), None, False, False, None
    c_sent = False
    while not ended:
        if status == 200 and not c_sent:
            c.send(sid, b"before;", False)
            c_sent = True
        if goaway is not None and not sent_after:
            c.send(sid, b"after-goaway;", True)
            sent_after = True
        for ev in c.events(0.2):
            if ev is None:
                fail("connection closed before the stream ended", got=got.decode())
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                got += ev.data
                c.h2.acknowledge_received_data(ev.flow_controlled_length, sid)
                if bytes(got) == b"before;" and goaway is None:
                    os.kill(a.pid, signal.SIGTERM)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                goaway = {"error_code": int(ev.error_code), "last_stream_id": ev.last_stream_id}
                # python-h2 4.1 closes its whole state machine on GOAWAY, but RFC 9113 6.8 lets
                # streams up to last_stream_id finish: reopen it to keep using our stream.
                if ev.last_stream_id >= sid:
                    c.h2.state_machine.state = h2.connection.ConnectionState.CLIENT_OPEN
            elif isinstance(ev, h2.events.StreamEnded):
                ended = True
            elif isinstance(ev, h2.events.StreamReset):
                fail("reset", code=int(ev.error_code))
        c.flush()
    # After GOAWAY, the server closes the connection once the stream is done.
    closed = False
    for _ in range(50):
        evs = c.events(0.1)
        if None in evs:
            closed = True
            break
    ok = goaway is not None and goaway["error_code"] == 0 and bytes(got) == b"before;after-goaway;" and closed
    print(json.dumps({"ok": ok, "goaway": goaway, "echo": got.decode(), "closed_after": closed}), flush=True)
    return ok


def run_revoke(c, a):
    sid = c.connect(a.authority)
    got, status, hup, reset = bytearray(), None, False, None
    while reset is None:
        for ev in c.events(0.2):
            if ev is None:
                fail("connection closed before the stream was reset", echo=got.decode())
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[":status"])
                if status != 200:
                    fail("not 200", status=status)
                c.send(sid, b"before;", False)
            elif isinstance(ev, h2.events.DataReceived):
                got += ev.data
                c.h2.acknowledge_received_data(ev.flow_controlled_length, sid)
                if bytes(got) == b"before;" and not hup:
                    os.kill(a.pid, signal.SIGHUP)
                    hup = True
            elif isinstance(ev, h2.events.StreamReset):
                reset = int(ev.error_code)
            elif isinstance(ev, h2.events.StreamEnded):
                fail("stream ended cleanly instead of being reset", echo=got.decode())
        c.flush()
    ok = hup and reset == 10
    print(json.dumps({"ok": ok, "echo": got.decode(), "reset_code": reset}), flush=True)
    return ok


def client_args(p):
    """The arguments every client of the terminator takes (this one and abuse.py)."""
    p.add_argument("addr")
    p.add_argument("port", type=int)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--bundle", required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--source", default="", help="local address to connect from")


def main():
    p = argparse.ArgumentParser()
    client_args(p)
    p.add_argument("mode", choices=["streams", "status", "halfclose", "drain", "revoke"])
    p.add_argument("--authority", default="127.0.0.1:9")
    p.add_argument("--method", default="CONNECT")
    p.add_argument("--n", type=int, default=1)
    p.add_argument("--bytes", type=int, default=1024)
    p.add_argument("--pid", type=int, default=0)
    a = p.parse_args()
    c = Client(a)
    run = {"streams": run_streams, "status": run_status, "halfclose": run_halfclose, "drain": run_drain,
           "revoke": run_revoke}[a.mode]
    try:
        ok = run(c, a)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        # TLS 1.3: the server's verdict on our certificate arrives after our handshake ends.
        print(json.dumps({"ok": False, "handshake": "failed", "error": str(e)}), flush=True)
        sys.exit(3)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
