// rte_flow at start-up and exit: the ports' rules (flow_rules.h) installed through a
// FlowRuleManager. Fullnat reply steering: where the NIC can, rules send TCP/UDP packets to
// each fullnat local address to the queue of the worker that owns their destination port (the
// port's residue modulo the worker count, which must be a power of two for a mask to express
// it; DPVS does the same with flow director). Elsewhere the software path (RSS-aware port
// choice, handoff rings) does the job. Control thread, after the ports started.
#pragma once

#include <string>
#include <vector>

#include "control/config/config.h"
#include "control/flowsteer/flow_rule_manager.h"
#include "dataplane/common/net_types.h"
#include "dataplane/worker/port.h"

namespace meshgate::ctl {

struct SteeringResult {
  std::string port;
  bool rte_flow = false;  // every fullnat steering rule of the port is installed
  uint32_t rules = 0;     // fullnat steering rules installed
  std::string reason;     // why software steering is used
};

// The manager's inputs from a config: the [[deny]] block list, each service's source_ranges (at
// its VIP and its NodePort addresses), the fullnat addresses and the worker count. Start-up
// gives them to setup_flow_steering; a reload to FlowRuleManager::sync_all.
FlowRuleInputs flow_rule_inputs(const Config& cfg, uint32_t workers);

// The port's facts for its rules (queues = workers: one RX queue per worker).
FlowPortFacts flow_port_facts(const dp::PortRuntime& p, uint32_t workers);

// Adds every port to `m`, installs `in`'s rules and logs per port what is offloaded and why
// not (event=flow_rules, and event=flow_steering for fullnat steering). Ports the NIC refuses a
// probe rule on are noted with its reason even when no rule is wanted, so the log tells the
// operator what the NIC could do.
std::vector<SteeringResult> setup_flow_steering(FlowRuleManager& m,
                                                const std::vector<dp::PortRuntime>& ports,
                                                const FlowRuleInputs& in);
// Removes the rules (before the ports stop).
void teardown_flow_steering(FlowRuleManager& m);

}  // namespace meshgate::ctl
