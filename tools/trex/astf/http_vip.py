# HTTP over TCP at a target connection rate: clients 192.0.2.1-254 (or 2001:db8:2::/64 with
# --family 6) connect to web 203.0.113.10:80 (web6 [2001:db8:100::10]:80); meshgate's dnat hands
# each connection to a backend, which TRex port 1 plays on port 8080. The shape of
# tools/pcapgen/profiles/demo.toml's web / web6 classes: handshake, 2 requests and responses,
# FIN close (--close rst: the web-reset class).
#
#   t-rex-64 -i --astf, then in trex-console:
#   trex> start -f tools/trex/astf/http_vip.py -m 10 -t --cps 10000 --family 4

from trex.astf.api import *  # noqa: F401,F403

import meshgate_astf as mg


class HttpVip(object):
    def get_profile(self, tunables=None, **kwargs):
        p = mg.parser(__file__, "HTTP connections to the web / web6 VIP")
        p.add_argument("--family", choices=["4", "6"], default="4")
        p.add_argument("--requests", type=int, default=2,
                       help="request/response exchanges per connection (pcapgen data_packets)")
        p.add_argument("--request_bytes", type=int, default=100)
        p.add_argument("--response_bytes", type=int, default=1000,
                       help="HTTP response size; more than one MSS makes several segments")
        p.add_argument("--close", choices=["fin", "rst"], default="fin")
        args = p.parse_args(tunables or [])
        v6 = args.family == "6"
        t = mg.http_template(args.cps, args.requests, args.request_bytes, args.response_bytes,
                             args.close, v6)
        return ASTFProfile(default_ip_gen=mg.ip_gen(v6), default_c_glob_info=mg.glob_info(v6),
                           templates=t)


def register():
    return HttpVip()
