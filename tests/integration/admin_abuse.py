#!/usr/bin/env python3
"""Hostile clients of a live gateway's admin API (stdlib only); prints one line per check with
its figures and exits 1 when one fails.

    admin_abuse.py HOST:PORT GATEWAY_PID

bodies:  8 POSTs each streaming a 100 MB body at once: each answered 413, and the gateway's
         peak RSS (VmHWM) grows by less than 64 MB.
flood:   200 connections that trickle a byte every 100 ms (reconnecting when closed) while
         /ready is probed every 100 ms for 8 s: every probe answers 200 within 1 s.
browser: a cross-origin text/plain POST /logging?level=debug (what any web page may send
         without a preflight) is 403 and the level stays; a POST /drain and a GET /stats
         whose Host is a DNS name (DNS rebinding) are 403 and /ready stays 200.
"""
import json
import selectors
import socket
import sys
import threading
import time

ADDR, PID = sys.argv[1], int(sys.argv[2])
HOST, PORT = ADDR.rsplit(':', 1)[0], int(ADDR.rsplit(':', 1)[1])
failures = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what, flush=True)
    if not ok:
        failures.append(what)


def request(raw, timeout=5.0):
    """Sends raw bytes, returns (status, body) of the answer, (-1, why) when none came."""
    data = b''
    try:
        with socket.create_connection((HOST, PORT), timeout=timeout) as s:
            s.sendall(raw)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        if not data:
            return -1, str(e)
    head, _, body = data.partition(b'\r\n\r\n')
    try:
        return int(head.split(b' ', 2)[1]), body.decode(errors='replace')
    except (IndexError, ValueError):
        return -1, repr(data[:200])


def get(path, host=ADDR):
    return request(f'GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n'.encode())


def vm_hwm_kb():
    with open(f'/proc/{PID}/status') as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1])
    return -1


def browser():
    st, body = get('/logging')
    before = json.loads(body)['level'] if st == 200 else None
    st, body = request((
        f'POST /logging?level=debug HTTP/1.1\r\nHost: {ADDR}\r\nOrigin: http://attacker.example\r\n'
        f'Content-Type: text/plain;charset=UTF-8\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx'
    ).encode())
    after = json.loads(get('/logging')[1]).get('level')
    check(st == 403 and after == before,
          f'browser: cross-origin text/plain POST /logging?level=debug -> {st} '
          f'({body.strip()!r}); level {before} -> {after}')
    st, body = request((
        f'POST /drain HTTP/1.1\r\nHost: rebind.example:{PORT}\r\nContent-Length: 0\r\n'
        f'Connection: close\r\n\r\n').encode())
    ready = get('/ready')[0]
    check(st == 403 and ready == 200,
          f'browser: POST /drain with Host rebind.example:{PORT} -> {st} ({body.strip()!r}); '
          f'/ready {ready}')
    st, body = get('/stats', host=f'rebind.example:{PORT}')
    check(st == 403, f'browser: GET /stats with Host rebind.example:{PORT} -> {st}')


def stream_body(out, i, total=100 << 20):
    status, sent = -1, 0
    try:
        with socket.create_connection((HOST, PORT), timeout=10) as s:
            s.sendall((f'POST /logging?level=info HTTP/1.1\r\nHost: {ADDR}\r\n'
                       f'Content-Length: {total}\r\nConnection: close\r\n\r\n').encode())
            chunk = b'a' * 65536
            try:
                while sent < total:
                    s.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                pass  # the server stopped reading: its answer may be waiting
            data = b''
            try:
                while True:
                    c = s.recv(65536)
                    if not c:
                        break
                    data += c
            except OSError:
                pass
            if data.startswith(b'HTTP/1.1 '):
                status = int(data.split(b' ', 2)[1])
    except OSError:
        pass
    out[i] = (status, sent)


def bodies():
    before = vm_hwm_kb()
    out = [None] * 8
    threads = [threading.Thread(target=stream_body, args=(out, i)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    after = vm_hwm_kb()
    statuses = [o[0] if o else -1 for o in out]
    sent_mb = sum(o[1] for o in out if o) >> 20
    check(all(s == 413 for s in statuses),
          f'bodies: 8 x 100 MB POST bodies answered {statuses} ({sent_mb} MB accepted by the socket)')
    check(after - before < 64 * 1024,
          f'bodies: peak RSS (VmHWM) {before // 1024} MB -> {after // 1024} MB')


def flood(conns=200, seconds=8.0):
    stop = threading.Event()
    sel = selectors.DefaultSelector()
    head = f'GET /ready HTTP/1.1\r\nHost: {ADDR}\r\nX-Slow: '.encode()
    reconnects = [0]

    def open_one():
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((HOST, PORT))
        except BlockingIOError:
            pass
        sel.register(s, selectors.EVENT_READ, {'sent': 0})

    def trickle():
        for _ in range(conns):
            open_one()
        while not stop.is_set():
            t0 = time.monotonic()
            for key in list(sel.get_map().values()):
                s, st = key.fileobj, key.data
                try:
                    s.send(head[st['sent']:st['sent'] + 1] if st['sent'] < len(head) else b'a')
                    st['sent'] += 1
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    sel.unregister(s)
                    s.close()
                    reconnects[0] += 1
                    open_one()
            for key, _ in sel.select(timeout=0):
                s = key.fileobj
                try:
                    if s.recv(4096):
                        continue
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    pass
                sel.unregister(s)  # closed by the server: come back
                s.close()
                reconnects[0] += 1
                open_one()
            time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
        for key in list(sel.get_map().values()):
            key.fileobj.close()

    t = threading.Thread(target=trickle)
    t.start()
    time.sleep(0.5)  # every slow connection open
    ok = probes = 0
    worst = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        st, _ = request(f'GET /ready HTTP/1.1\r\nHost: {ADDR}\r\nConnection: close\r\n\r\n'.encode(),
                        timeout=1.0)
        took = time.monotonic() - t0
        probes += 1
        if st == 200 and took < 1.0:
            ok += 1
        worst = max(worst, took)
        time.sleep(max(0.0, 0.1 - took))
    stop.set()
    t.join(10)
    check(ok == probes, f'flood: {conns} trickling connections ({reconnects[0]} reconnects): '
                        f'{ok} of {probes} /ready probes answered 200 within 1 s '
                        f'(slowest {worst * 1000:.0f} ms)')


def main():
    # browser last: a POST /drain that is not refused ends the gateway.
    for name in sys.argv[3:] or ['bodies', 'flood', 'browser']:
        globals()[name]()
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
