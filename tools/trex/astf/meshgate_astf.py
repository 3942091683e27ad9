# Shared pieces of the meshgate ASTF profiles (not a profile itself). TRex plays both sides:
# port 0 the clients, which connect to a VIP; port 1 the backends, which meshgate's dnat sends
# the connections to (config/perf-lab.toml). The server side therefore listens on the backend
# port (8080, 5353), not on the VIP's port.

import argparse
import os

from trex.astf.api import *  # noqa: F401,F403

# Services (config/demo.toml, config/perf-lab.toml).
VIP4 = "203.0.113.10"
# ASTF makes IPv6 addresses from a 96-bit prefix and the low 32 bits of the IPv4 generator:
# 2001:db8:100:: + 0.0.0.16 = 2001:db8:100::10 (web6); clients 2001:db8:2::c000:201 and up.
VIP6_MSB = "2001:db8:100::"
VIP6_LOW = "0.0.0.16"
CLIENT6_MSB = "2001:db8:2::"
WEB_PORT, WEB_BACKEND_PORT = 80, 8080
DNS_PORT, DNS_BACKEND_PORT = 53, 5353

# Clients, as in tools/pcapgen/profiles/*.toml (TRex picks the source ports).
CLIENT4 = ["192.0.2.1", "192.0.2.254"]


def parser(profile_file, description):
    p = argparse.ArgumentParser(prog=os.path.basename(profile_file), description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cps", type=float, default=10000,
                   help="new connections per second before `start -m` multiplies it")
    return p


def ip_gen(v6=False):
    """Clients 192.0.2.1-254 -> the VIP. One TRex port pair: ip_offset applies from the second
    pair on, which this lab does not have."""
    client = ASTFIPGenDist(ip_range=CLIENT4, distribution="seq")
    vip = [VIP6_LOW, VIP6_LOW] if v6 else [VIP4, VIP4]
    server = ASTFIPGenDist(ip_range=vip, distribution="seq")
    return ASTFIPGen(glob=ASTFIPGenGlobal(ip_offset="1.0.0.0"), dist_client=client,
                     dist_server=server)


def glob_info(v6=False):
    """Client-side globals: IPv6 prefixes when v6, else TRex's defaults."""
    info = ASTFGlobalInfo()
    if v6:
        info.ipv6.src_msb = CLIENT6_MSB
        info.ipv6.dst_msb = VIP6_MSB
        info.ipv6.enable = 1
    return info


def http_request(n_bytes):
    """A GET padded with a header to n_bytes (at least the bare request)."""
    head = "GET /index.html HTTP/1.1\r\nHost: web\r\nUser-Agent: meshgate-perf-lab\r\n"
    pad = max(0, n_bytes - len(head) - len("X-Pad: \r\n\r\n"))
    return head + "X-Pad: " + "a" * pad + "\r\n\r\n"


def http_response(n_bytes):
    head = "HTTP/1.1 200 OK\r\nServer: backend\r\nContent-Type: text/plain\r\n"
    body_len = max(0, n_bytes - len(head) - len("Content-Length: 0000000\r\n\r\n"))
    return head + "Content-Length: %07d\r\n\r\n" % body_len + "b" * body_len


def http_template(cps, requests, request_bytes, response_bytes, close="fin", v6=False):
    """One TCP connection to web (or web6): handshake, `requests` request/response exchanges,
    then a FIN close (the four-way close of pcapgen's close = "fin") or an RST from the client
    (close = "rst"). The same shape as pcapgen's tcp classes with data_packets = requests."""
    req, resp = http_request(request_bytes), http_response(response_bytes)
    client = ASTFProgram()
    server = ASTFProgram()
    for _ in range(requests):
        client.send(req)
        client.recv(len(resp))
        server.recv(len(req))
        server.send(resp)
    if close == "rst":
        client.reset()
    server.wait_for_peer_close()
    c = ASTFTCPClientTemplate(program=client, ip_gen=ip_gen(v6), port=WEB_PORT, cps=cps)
    s = ASTFTCPServerTemplate(program=server, assoc=ASTFAssociationRule(port=WEB_BACKEND_PORT))
    return ASTFTemplate(client_template=c, server_template=s)


def dns_template(cps, requests, request_bytes, response_bytes):
    """UDP request/response pairs to dns, like pcapgen's udp class (`requests` pairs)."""
    client = ASTFProgram(stream=False)
    server = ASTFProgram(stream=False)
    for _ in range(requests):
        client.send_msg("q" * request_bytes)
        client.recv_msg(1)
        server.recv_msg(1)
        server.send_msg("r" * response_bytes)
    c = ASTFTCPClientTemplate(program=client, ip_gen=ip_gen(), port=DNS_PORT, cps=cps)
    s = ASTFTCPServerTemplate(program=server, assoc=ASTFAssociationRule(port=DNS_BACKEND_PORT))
    return ASTFTemplate(client_template=c, server_template=s)
