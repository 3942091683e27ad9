// rte_flow steering of fullnat replies: where the NIC can, rules send TCP/UDP packets to each
// fullnat local address to the queue of the worker that owns their destination port (the
// port's residue modulo the worker count, which must be a power of two for a mask to express
// it; DPVS does the same with flow director). Elsewhere the software path (RSS-aware port choice,
// handoff rings) does the job. Control thread, after the ports started.
#pragma once

#include <string>
#include <vector>

#include "dataplane/common/net_types.h"
#include "dataplane/worker/port.h"

namespace meshgate::ctl {

struct SteeringResult {
  std::string port;
  bool rte_flow = false;  // rules installed
  uint32_t rules = 0;
  std::string reason;     // why software steering is used
};

// Probes (and, when supported and useful, installs) the rules on every port.
std::vector<SteeringResult> setup_flow_steering(const std::vector<dp::PortRuntime>& ports,
                                                const std::vector<IpAddr>& fullnat_addresses,
                                                uint32_t workers);
// Removes the rules (before the ports stop).
void teardown_flow_steering(const std::vector<dp::PortRuntime>& ports);

}  // namespace meshgate::ctl
