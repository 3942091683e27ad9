#!/usr/bin/env python3
"""Userspace DSR decapsulator: the backend side of meshgate's dsr-ipip and dsr-gue modes.

The test kernel has no ipip, sit or fou modules, so the backend cannot decapsulate in the
kernel. This program does it instead, inside the backend's namespace:
  - IPIP: a raw IPPROTO_IPIP socket gets each outer IPv4 packet (protocol 4) with its header;
    the outer header is stripped. IPv6-in-IPv6 (next header 41) arrives on a raw IPv6 socket
    already without the outer header.
  - GUE: a UDP socket on --gue-port. meshgate sends GUE variant 1 ("direct IP": the inner IP
    packet right after the UDP header, dataplane/nat/encap.h); variant 0 (4-byte header and
    its extensions, then the packet) is accepted too.
The inner packet is written to a TUN device, so the kernel receives it there as if the tunnel
had ended in it: the VIP is on lo, and the replies (source = VIP) leave by the normal route,
straight to the client. Prints "ready" when set up and "ipip=N gue=M bad=K" on exit (stderr).
"""
import argparse
import fcntl
import os
import select
import signal
import socket
import struct
import sys

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI, IFF_UP = 0x0001, 0x1000, 0x0001
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
counts = {"ipip": 0, "gue": 0, "bad": 0}


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # ip link set NAME up
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", name.encode(), 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", name.encode(), flags | IFF_UP))
    return fd


def sysctl(path, value):
    with open("/proc/sys/" + path, "w") as f:
        f.write(value)


def inner_ok(pkt):
    """A plausible IPv4 or IPv6 packet whose length field fits the bytes we have."""
    if len(pkt) >= 20 and pkt[0] >> 4 == 4 and pkt[0] & 15 >= 5:
        return 20 <= struct.unpack_from("!H", pkt, 2)[0] <= len(pkt)
    if len(pkt) >= 40 and pkt[0] >> 4 == 6:
        return 40 + struct.unpack_from("!H", pkt, 4)[0] <= len(pkt)
    return False


def gue_inner(data):
    """The inner packet of a GUE datagram (variant 1, or variant 0 carrying IP), or None."""
    if data and data[0] >> 6 == 1:  # variant 1: the IP header itself (first nibble 4 or 6)
        return data
    if len(data) >= 4 and data[0] >> 6 == 0 and not data[0] & 0x20 and data[1] in (4, 41):
        return data[4 + (data[0] & 0x1F) * 4:]  # variant 0 data message: skip hlen words
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tun", default="dsr0")
    ap.add_argument("--gue-port", type=int, default=6080)
    args = ap.parse_args()

    tun = open_tun(args.tun)
    # The inner source (the client) is not routed via the TUN, so reverse-path filtering
    # would drop every packet (the effective mode is the max of "all" and the device's).
    # accept_local: a client inside the backend's own namespace still works.
    for dev in ("all", args.tun):
        sysctl("net/ipv4/conf/%s/rp_filter" % dev, "0")
    sysctl("net/ipv4/conf/%s/accept_local" % args.tun, "1")

    socks = {socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_IPIP): "ipip4"}
    try:
        socks[socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_IPV6)] = "ipip6"
        gue = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)  # dual stack: v4 and v6
        gue.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        gue.bind(("::", args.gue_port))
    except OSError:  # no IPv6 in this namespace
        gue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        gue.bind(("0.0.0.0", args.gue_port))
    socks[gue] = "gue"

    def stop(signum, frame):
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)

    try:
        while True:
            for s in select.select(list(socks), [], [])[0]:
                kind = socks[s]
                data = s.recv(65535)
                if kind == "ipip4":  # the outer IPv4 header is included: strip IHL * 4 bytes
                    inner = data[(data[0] & 15) * 4:] if len(data) >= 20 else None
                elif kind == "ipip6":  # IPv6 raw sockets deliver the payload only
                    inner = data
                else:
                    inner = gue_inner(data)
                if inner is None or not inner_ok(inner):
                    counts["bad"] += 1
                    continue
                try:
                    os.write(tun, inner)
                    counts["gue" if kind == "gue" else "ipip"] += 1
                except OSError:
                    counts["bad"] += 1
    finally:
        print("ipip=%d gue=%d bad=%d" % (counts["ipip"], counts["gue"], counts["bad"]),
              file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
