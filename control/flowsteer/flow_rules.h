// The rte_flow rules the gateway wants on a port, as plain values, and their translation to
// the arrays rte_flow_validate / rte_flow_create take. Both are pure functions: the rule set
// is computed from plain inputs (the block list, each service's source ranges, the fullnat
// addresses) and a port's facts, so it is tested as a table without a NIC; FlowRuleManager
// (flow_rule_manager.h) installs and removes the difference between two rule sets.
//
// Kinds, and why each has its priority (rte_flow: a lower value is matched first; one group):
//   kBlockSource  priority 0: DROP everything from a source prefix ([[deny]] source), before
//                 any other rule can pass it on.
//   kSourceRange  for a VIP:port:proto with source_ranges: one ALLOW rule per allowed prefix
//                 of the VIP's family at priority 1 and one DROP for the VIP:port:proto at
//                 priority 2. rte_flow has no "accept and stop" action, so an allow rule is a
//                 terminating action that does what the port does without rules: RSS over
//                 the port's queues with its RSS key and hash types (QUEUE 0 on a single-queue
//                 port). A flow's packets all match the same rule, so they keep landing on one
//                 worker. The DROP is only installed while every allow rule of its service is
//                 (flow_rule_manager.h): a NIC that takes the DROP but refuses an allow rule
//                 would drop allowed clients.
//   kFullnatSteer QUEUE rules sending TCP/UDP to a fullnat local address whose destination
//                 port has residue q under the power-of-two worker count to queue q (the worker
//                 that chose that port; dataplane/nat/fullnat_source.cc). Priority 0 while the
//                 block list is empty, else 1 behind the block rules (same-priority rules that
//                 overlap have an undefined outcome): NICs without priorities (i40e) keep
//                 taking them where no block list asks for a second level.
// The dataplane checks sources in software whatever is installed here: a rule only moves the
// drop earlier, correctness never depends on the NIC.
//
// Control thread (any thread for the pure functions).
#pragma once

#include <rte_flow.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/common/net_types.h"

namespace meshgate::ctl {

enum class FlowRuleKind : uint8_t { kBlockSource, kSourceRange, kFullnatSteer };
inline constexpr uint32_t kFlowRuleKinds = 3;
// "block_source" | "source_range" | "fullnat_steer" (metric labels, /flow_rules).
const char* flow_rule_kind_name(FlowRuleKind k);

enum class FlowRuleAction : uint8_t { kDrop, kQueue, kRss };
const char* flow_rule_action_name(FlowRuleAction a);  // "drop" | "queue" | "rss"

inline constexpr uint32_t kBlockSourcePriority = 0;
inline constexpr uint32_t kSourceAllowPriority = 1;
inline constexpr uint32_t kFullnatSteerPriority = 0;             // no block rules
inline constexpr uint32_t kFullnatSteerBehindBlockPriority = 1;  // with block rules
inline constexpr uint32_t kSourceDenyPriority = 2;

// One rule. Fields a kind does not use stay at their defaults, so equality is "same rule".
struct FlowRuleSpec {
  FlowRuleKind kind = FlowRuleKind::kBlockSource;
  uint16_t port_id = 0;  // DPDK ethdev port id
  uint32_t priority = 0;
  // Family of the rule: true when it matches IPv6 packets.
  bool ipv6 = false;
  IpPrefix source;           // length 0: any source of the family
  bool has_destination = false;
  IpAddr destination;        // a host address when has_destination
  uint8_t proto = 0;         // 6 or 17; 0: no L4 item
  uint16_t dst_port = 0;     // host order; matched under dst_port_mask when proto != 0
  uint16_t dst_port_mask = 0;
  FlowRuleAction action = FlowRuleAction::kDrop;
  uint16_t queue = 0;        // kQueue
  uint16_t rss_queues = 0;   // kRss: queues 0 .. rss_queues-1
  friend bool operator==(const FlowRuleSpec&, const FlowRuleSpec&) = default;
};

// "src 192.0.2.0/24 dst 198.51.100.1 tcp dport 80/0xffff" (testpmd `flow list` style).
std::string flow_rule_match_text(const FlowRuleSpec& s);
// "drop" | "queue 3" | "rss queues 0-3".
std::string flow_rule_action_text(const FlowRuleSpec& s);
// True for the DROP half of a source range (the rule that needs its allow rules first).
inline bool is_source_range_drop(const FlowRuleSpec& s) {
  return s.kind == FlowRuleKind::kSourceRange && s.action == FlowRuleAction::kDrop;
}
// Same VIP:port:proto on the same port (the allow rules a source-range DROP depends on).
bool same_service(const FlowRuleSpec& a, const FlowRuleSpec& b);

// What the rules depend on of a started port.
struct FlowPortFacts {
  uint16_t port_id = 0;
  std::string name;
  uint16_t queues = 1;        // RX queues (one per worker)
  uint64_t rss_hf = 0;        // RTE_ETH_RSS_* the port hashes on; 0: no RSS
  std::vector<uint8_t> rss_key;
};

struct FlowServiceInput {
  IpAddr vip;
  uint16_t port = 0;
  L4Proto proto = L4Proto::kTcp;
  std::vector<IpPrefix> allowed;  // empty: every source, no rule
};

struct FlowRuleInputs {
  std::vector<IpPrefix> blocked;  // [[deny]] source
  std::vector<FlowServiceInput> services;
  std::vector<IpAddr> fullnat_addresses;
  uint32_t workers = 1;
};

// Why a port gets no fullnat steering rules, or "" when it does (the worker count must be a
// power of two above one, equal to the port's queue count, with fullnat addresses to steer).
std::string fullnat_steering_blocker(const FlowRuleInputs& in, const FlowPortFacts& port);

// The rules a port should carry, in install order: block rules, then per service its allow
// rules before its DROP, then fullnat steering. Prefixes are used as networks (host bits
// cleared); duplicates appear once; a service's prefixes of the other family are left out
// (they cannot match its VIP, so only the DROP remains, as in software).
std::vector<FlowRuleSpec> desired_rules(const FlowRuleInputs& in, const FlowPortFacts& port);

// One spec as rte_flow takes it. Owns every spec, mask and action conf the arrays point to
// (on the heap, so a move keeps the pointers valid). pattern and actions end with END.
struct RteFlowRule {
  rte_flow_attr attr{};
  std::vector<rte_flow_item> pattern;
  std::vector<rte_flow_action> actions;

  struct Storage {
    rte_flow_item_ipv4 ip4{}, ip4_mask{};
    rte_flow_item_ipv6 ip6{}, ip6_mask{};
    rte_flow_item_tcp tcp{}, tcp_mask{};
    rte_flow_item_udp udp{}, udp_mask{};
    rte_flow_action_queue queue{};
    rte_flow_action_rss rss{};
    std::vector<uint8_t> rss_key;
    std::vector<uint16_t> rss_queues;
  };
  std::unique_ptr<Storage> storage;
};

// ETH (any) / IPV4|IPV6 (source prefix, destination host, next protocol) / TCP|UDP (masked
// destination port) / END, and DROP | QUEUE | RSS (the port's key and hash types) / END.
// Addresses and ports are in network order, as the NIC compares them.
RteFlowRule translate_flow_rule(const FlowRuleSpec& s, const FlowPortFacts& port);

}  // namespace meshgate::ctl
