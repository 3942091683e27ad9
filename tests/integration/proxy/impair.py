#!/usr/bin/python3
"""A userspace netem for e2e_proxy.sh: relays Ethernet frames between two interfaces of the
namespace it runs in (AF_PACKET, promiscuous), both directions, with seeded impairments.
The test machine's kernel may have no sch_netem; this needs nothing but the standard library.

  impair.py IF_A IF_B --loss P --dup P --reorder P --delay-ms D --seed S --seconds T

  loss: frames dropped; dup: frames sent twice; reorder: frames held back an extra 1-5 ms (so
  later frames overtake them); delay: every frame leaves D ms after it arrived. Each direction
  draws from its own seeded generator. Stops after T seconds (or SIGTERM) and prints counts.
"""
import argparse
import heapq
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--loss", type=float, default=0)
    ap.add_argument("--dup", type=float, default=0)
    ap.add_argument("--reorder", type=float, default=0)
    ap.add_argument("--delay-ms", type=float, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=300)
    o = ap.parse_args()

    socks = []
    for ifname in (o.a, o.b):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((ifname, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setblocking(False)
        socks.append(s)
    rng = [random.Random(o.seed), random.Random(o.seed + 1)]
    stats = {"in": 0, "out": 0, "lost": 0, "dup": 0, "reordered": 0}
    held = []  # (due, seq, out_index, frame)
    seq = 0
    stop = False

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    deadline = time.monotonic() + o.seconds
    print("ready", flush=True)
    while not stop and time.monotonic() < deadline:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, _, out, frame = heapq.heappop(held)
            try:
                socks[out].send(frame)
                stats["out"] += 1
            except (BlockingIOError, OSError):
                stats["lost"] += 1
        timeout = max(0.0, held[0][0] - now) if held else 0.05
        ready, _, _ = select.select(socks, [], [], min(timeout, 0.05))
        for s in ready:
            i = socks.index(s)
            for _ in range(256):
                try:
                    frame, addr = s.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue  # our own sends, seen again on this socket
                stats["in"] += 1
                r = rng[i]
                if r.random() < o.loss:
                    stats["lost"] += 1
                    continue
                copies = 2 if r.random() < o.dup else 1
                stats["dup"] += copies - 1
                due = time.monotonic() + o.delay_ms / 1000
                if r.random() < o.reorder:
                    due += r.uniform(0.001, 0.005)
                    stats["reordered"] += 1
                for _ in range(copies):
                    seq += 1
                    heapq.heappush(held, (due, seq, 1 - i, frame))
    print(" ".join(f"{k}={v}" for k, v in stats.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
