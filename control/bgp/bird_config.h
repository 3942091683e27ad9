// What the BGP daemon (BIRD 2) is told: the sessions of [bgp] and the VIPs to announce, as the
// text of its config file. Pure functions (control/bgp/bgp_speaker.h runs the daemon).
#pragma once

#include <string>
#include <vector>

#include "control/common/result.h"
#include "control/config/config.h"
#include "dataplane/worker/port.h"

namespace meshgate::ctl {

struct BgpSession {
  std::string name;  // the daemon's protocol name: "peer0", "peer1", ...
  IpAddr address;
  IpAddr local;            // the port address on the peer's prefix: the session's source
  std::string interface;   // the kernel twin it goes through
  uint32_t remote_as = 0;
  std::string password;
};

struct BgpPlan {
  IpAddr router_id;
  uint32_t local_as = 0;
  uint32_t hold_time_s = 0;
  std::vector<BgpSession> sessions;
};

// The sessions of a validated [bgp] config (config_validate.cc checked that each peer is
// on-link of a port address whose port has a host_interface).
Result<BgpPlan> bgp_plan(const Config& cfg);

// BIRD 2's config: one static protocol per family holding the VIPs to announce (blackhole
// routes: they exist only to be exported), one BGP protocol per peer exporting them with next
// hop self and importing nothing. Sessions are direct (on-link), IPv4 VIPs go to IPv4 peers and
// IPv6 VIPs to IPv6 peers.
std::string bird_config(const BgpPlan& plan, const std::vector<IpAddr>& announce);

}  // namespace meshgate::ctl
