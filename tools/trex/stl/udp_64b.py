# 64-byte UDP frames from the IPv4 clients to dns (203.0.113.10:53, dnat to :5353).
#
#   trex> start -f tools/trex/stl/udp_64b.py --port 0 -m 10mpps -t --flows 100000

from trex_stl_lib.api import *  # noqa: F401,F403

import meshgate_stl as mg


class UdpSmall(object):
    def get_streams(self, tunables=None, **kwargs):
        p = mg.parser(__file__, "64-byte UDP to the dns VIP")
        args = p.parse_args(tunables or [])
        return mg.with_latency([mg.stream("udp", False, 64, 1, args)], "udp", False, args)


def register():
    return UdpSmall()
