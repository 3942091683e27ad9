# The IPv4 web and dns classes of tools/pcapgen/profiles/demo.toml as connection rates, in the
# demo's proportion of flows (150 : 100): HTTP connections with 2 exchanges and a FIN close, and
# single UDP request/response pairs. Run the other classes on their own: web-reset with
# http_vip.py --close rst (a second template on the same backend port would need TRex's L7
# association), web6 with http_vip.py --family 6 (ASTF turns IPv6 on for a whole profile).
#
#   trex> start -f tools/trex/astf/demo_mix.py -m 10 -t --cps 25000

from trex.astf.api import *  # noqa: F401,F403

import meshgate_astf as mg

# demo.toml: flows per class.
WEB_FLOWS, DNS_FLOWS = 150, 100


class DemoMix(object):
    def get_profile(self, tunables=None, **kwargs):
        p = mg.parser(__file__, "demo.toml's IPv4 web and dns classes")
        args = p.parse_args(tunables or [])
        total = float(WEB_FLOWS + DNS_FLOWS)
        templates = [
            mg.http_template(args.cps * WEB_FLOWS / total, 2, 100, 1000, "fin"),
            # dns: size = 100 frames (FCS included), i.e. 54 bytes of UDP payload over IPv4.
            mg.dns_template(args.cps * DNS_FLOWS / total, 1, 54, 54),
        ]
        return ASTFProfile(default_ip_gen=mg.ip_gen(), templates=templates)


def register():
    return DemoMix()
