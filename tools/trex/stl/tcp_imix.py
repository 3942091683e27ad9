# IMIX TCP (64/594/1518-byte frames, 7:4:1, as pcapgen's size = "imix") from the clients to web
# and/or web6: established-looking data segments (ACK) over --flows client tuples.
#
#   trex> start -f tools/trex/stl/tcp_imix.py --port 0 -m 10gbps -t --flows 100000 --family 46

from trex_stl_lib.api import *  # noqa: F401,F403

import meshgate_stl as mg


class TcpImix(object):
    def get_streams(self, tunables=None, **kwargs):
        p = mg.parser(__file__, "IMIX TCP to the web / web6 VIPs")
        p.add_argument("--family", choices=["4", "6", "46"], default="4",
                       help="IPv4 (web), IPv6 (web6), or both at equal rates")
        args = p.parse_args(tunables or [])
        streams = []
        for fam in args.family:
            streams += mg.imix_streams("tcp", fam == "6", 1, args)
        return mg.with_latency(streams, "tcp", args.family == "6", args)


def register():
    return TcpImix()
