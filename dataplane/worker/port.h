// What a worker knows about each port. Fixed for the lifetime of the process (ports are not
// reconfigured live); built by the control thread before workers start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/common/limits.h"
#include "dataplane/common/net_types.h"

namespace meshgate::dp {

struct PortRuntime {
  std::string name;
  uint16_t port_id = 0;  // DPDK ethdev port id
  uint16_t index = 0;    // index in the runtime's port array (what routes and neighbors use)
  MacAddr mac;
  uint16_t mtu = 1500;
  bool promiscuous = false;  // [[port]] promiscuous: unicast frames to any MAC are ours
  std::vector<IpPrefix> addresses;
  // RSS as programmed, so software Toeplitz can predict the queue of a reply (port selection).
  uint64_t rss_hf = 0;
  std::vector<uint8_t> rss_key;
  std::vector<uint16_t> reta;  // queue per RETA entry; empty when the port has no RSS
};

}  // namespace meshgate::dp
