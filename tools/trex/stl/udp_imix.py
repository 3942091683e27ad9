# IMIX UDP (64/594/1518-byte frames, 7:4:1) from the IPv4 clients to dns (203.0.113.10:53).
#
#   trex> start -f tools/trex/stl/udp_imix.py --port 0 -m 10gbps -t --flows 100000

from trex_stl_lib.api import *  # noqa: F401,F403

import meshgate_stl as mg


class UdpImix(object):
    def get_streams(self, tunables=None, **kwargs):
        p = mg.parser(__file__, "IMIX UDP to the dns VIP")
        args = p.parse_args(tunables or [])
        return mg.with_latency(mg.imix_streams("udp", False, 1, args), "udp", False, args)


def register():
    return UdpImix()
