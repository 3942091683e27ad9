# Shared pieces of the meshgate STL profiles (not a profile itself): the addresses of
# config/perf-lab.toml (the demo services of config/demo.toml), the pcapgen IMIX, and the field
# engine that spreads packets over client addresses and ports.
#
# Sizes are Ethernet frame sizes with the 4-byte FCS, as in tools/pcapgen and RFC 2544: a 64-byte
# frame is 60 bytes here, TRex's NIC adds the FCS.

import argparse
import os

# The STL API and scapy's layers (Ether, IP, IPv6, TCP, UDP), as TRex's own profiles take them.
from trex_stl_lib.api import *  # noqa: F401,F403

# Services (config/demo.toml, config/perf-lab.toml).
VIP4 = "203.0.113.10"
VIP6 = "2001:db8:100::10"
WEB_PORT = 80     # web (tcp) and web6 (tcp)
DNS_PORT = 53     # dns (udp), IPv4 only

# Clients, as in tools/pcapgen/profiles/*.toml: 192.0.2.0/24 and 2001:db8:2::/64. The field
# engine writes the low 32 bits of the IPv6 source, so both families use .1 - .254.
CLIENT4_MIN = "192.0.2.1"
CLIENT4_MAX = "192.0.2.254"
CLIENT6_BASE = "2001:db8:2::1"
CLIENT6_LOW_MIN = "0.0.0.1"
CLIENT6_LOW_MAX = "0.0.0.254"
CLIENT_PORT_MIN = 1024     # tools/pcapgen/profiles/million.toml client_ports
CLIENT_PORT_MAX = 65535

FCS = 4

# pcapgen's "imix": 64, 594 and 1518-byte frames in the proportion 7:4:1 (TRex's own imix.py
# uses 28:16:4 of 60/590/1514 without the FCS: the same mix).
IMIX = [(64, 7), (594, 4), (1518, 1)]


def parser(profile_file, description):
    """The tunables every profile takes: `start -f PROFILE -t --flows 100000 --csum ipv4`."""
    p = argparse.ArgumentParser(prog=os.path.basename(profile_file), description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--flows", type=int, default=1000,
                   help="distinct client (address, port) pairs per address family; meshgate "
                        "keeps one flow each (mind conntrack.max_flows)")
    p.add_argument("--csum", choices=["hw", "ipv4"], default="hw",
                   help="hw: the NIC fixes the IPv4 and L4 checksums after the field engine; "
                        "ipv4: only the IPv4 header checksum is fixed in software, the L4 one is "
                        "left stale (meshgate does not verify L4 checksums) - for NICs without "
                        "TX checksum offload")
    p.add_argument("--latency_pps", type=int, default=0,
                   help="add a latency stream (one fixed flow) at this rate; 0 = none")
    p.add_argument("--pg_id", type=int, default=7,
                   help="packet group id of the latency stream (unique per port)")
    return p


def _vm(v6, l4, flows, csum):
    """Field engine: (client address, client port) tuples, `flows` of them, then checksums."""
    cmds = []
    if v6:
        cmds.append(STLVmTupleGen(name="client", ip_min=CLIENT6_LOW_MIN, ip_max=CLIENT6_LOW_MAX,
                                  port_min=CLIENT_PORT_MIN, port_max=CLIENT_PORT_MAX,
                                  limit_flows=flows))
        cmds.append(STLVmWrFlowVar(fv_name="client.ip", pkt_offset="IPv6.src", offset_fixup=12))
    else:
        cmds.append(STLVmTupleGen(name="client", ip_min=CLIENT4_MIN, ip_max=CLIENT4_MAX,
                                  port_min=CLIENT_PORT_MIN, port_max=CLIENT_PORT_MAX,
                                  limit_flows=flows))
        cmds.append(STLVmWrFlowVar(fv_name="client.ip", pkt_offset="IP.src"))
    cmds.append(STLVmWrFlowVar(fv_name="client.port", pkt_offset=l4 + ".sport"))
    if csum == "hw":
        l4_type = CTRexVmInsFixHwCs.L4_TYPE_TCP if l4 == "TCP" else CTRexVmInsFixHwCs.L4_TYPE_UDP
        cmds.append(STLVmFixChecksumHw(l3_offset="IPv6" if v6 else "IP", l4_offset=l4,
                                       l4_type=l4_type))
    elif not v6:
        cmds.append(STLVmFixIpv4(offset="IP"))
    return STLScVmRaw(cmds)


def base_packet(proto, v6, tcp_flags="A"):
    """A client packet to the VIP, without padding. TCP packets are ACKs by default: meshgate
    takes a first packet that is not a SYN as an established flow (mid-stream pickup), which is
    what a steady STL stream looks like; "S" makes a SYN flood."""
    l3 = IPv6(src=CLIENT6_BASE, dst=VIP6) if v6 else IP(src=CLIENT4_MIN, dst=VIP4)
    if proto == "tcp":
        l4 = TCP(sport=CLIENT_PORT_MIN, dport=WEB_PORT, flags=tcp_flags, seq=1000, ack=1000)
    else:
        l4 = UDP(sport=CLIENT_PORT_MIN, dport=DNS_PORT)
    return Ether() / l3 / l4


def padded(pkt, frame_bytes):
    pad = max(0, frame_bytes - FCS - len(pkt))
    return pkt / ("x" * pad)


def stream(proto, v6, frame_bytes, pps, args, tcp_flags="A"):
    """A continuous stream of `frame_bytes` frames over `args.flows` client tuples."""
    pkt = padded(base_packet(proto, v6, tcp_flags), frame_bytes)
    vm = _vm(v6, "TCP" if proto == "tcp" else "UDP", args.flows, args.csum)
    return STLStream(packet=STLPktBuilder(pkt=pkt, vm=vm), mode=STLTXCont(pps=pps))


def imix_streams(proto, v6, weight, args, tcp_flags="A"):
    """The IMIX as three streams whose rates keep the 7:4:1 proportion (scaled by `weight`)."""
    return [stream(proto, v6, size, share * weight, args, tcp_flags) for size, share in IMIX]


def latency_stream(proto, v6, args):
    """One fixed flow (the lowest client tuple) carrying TRex latency signatures. TRex matches
    them by payload, which dnat leaves alone, so latency is measured through the gateway."""
    pkt = padded(base_packet(proto, v6), 128)
    return STLStream(packet=STLPktBuilder(pkt=pkt),
                     flow_stats=STLFlowLatencyStats(pg_id=args.pg_id),
                     mode=STLTXCont(pps=args.latency_pps))


def with_latency(streams, proto, v6, args):
    if args.latency_pps > 0:
        streams.append(latency_stream(proto, v6, args))
    return streams
