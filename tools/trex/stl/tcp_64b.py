# 64-byte TCP frames (78 bytes over IPv6, its shortest) from the clients to web
# (203.0.113.10:80) and/or web6 ([2001:db8:100::10]:80): the small-packet rate of the dnat
# path. The TRex counterpart of the 64-byte established-flow runs of docs/PERFORMANCE.md, and
# with --syn of the syn-flood class of tools/pcapgen/profiles/million.toml.
#
#   trex> start -f tools/trex/stl/tcp_64b.py --port 0 -m 10mpps -t --flows 100000 --family 46

from trex_stl_lib.api import *  # noqa: F401,F403

import meshgate_stl as mg


class TcpSmall(object):
    def get_streams(self, tunables=None, **kwargs):
        p = mg.parser(__file__, "64-byte TCP to the web / web6 VIPs")
        p.add_argument("--family", choices=["4", "6", "46"], default="4",
                       help="IPv4 (web), IPv6 (web6), or both at equal rates")
        p.add_argument("--syn", action="store_true",
                       help="SYNs instead of ACKs: every tuple is a new half-open flow")
        args = p.parse_args(tunables or [])
        flags = "S" if args.syn else "A"
        streams = [mg.stream("tcp", fam == "6", 64, 1, args, flags) for fam in args.family]
        return mg.with_latency(streams, "tcp", args.family == "6", args)


def register():
    return TcpSmall()
