#include "control/flowsteer/flowsteer.h"

#include <array>

#include "control/common/log.h"

namespace meshgate::ctl {
namespace {

// "fullnat_steer=8 block_source=2", or "none".
std::string kinds_text(const std::array<uint32_t, kFlowRuleKinds>& n) {
  std::string t;
  for (uint32_t k = 0; k < kFlowRuleKinds; ++k) {
    if (n[k] == 0) continue;
    if (!t.empty()) t += ' ';
    t += std::string(flow_rule_kind_name(FlowRuleKind(k))) + "=" + std::to_string(n[k]);
  }
  return t.empty() ? "none" : t;
}

}  // namespace

FlowRuleInputs flow_rule_inputs(const Config& cfg, uint32_t workers) {
  FlowRuleInputs in;
  in.blocked = cfg.deny_sources;
  // Each service with source_ranges at its VIP and, with a node_port, at every port address of
  // its VIP's family (the snapshot's NodePort entries carry the same ranges).
  for (const ServiceConfig& s : cfg.services) {
    if (s.source_ranges.empty()) continue;
    in.services.push_back(FlowServiceInput{s.vip, s.port, s.protocol, s.source_ranges});
    if (s.node_port == 0) continue;
    for (const PortConfig& p : cfg.ports) {
      for (const IpPrefix& a : p.addresses) {
        if (a.addr.is_v4() != s.vip.is_v4()) continue;
        in.services.push_back(FlowServiceInput{a.addr, s.node_port, s.protocol, s.source_ranges});
      }
    }
  }
  in.fullnat_addresses = cfg.fullnat.local_addresses;
  in.workers = workers;
  return in;
}

FlowPortFacts flow_port_facts(const dp::PortRuntime& p, uint32_t workers) {
  FlowPortFacts f;
  f.port_id = p.port_id;
  f.name = p.name;
  f.queues = uint16_t(workers);
  f.rss_hf = p.rss_hf;
  f.rss_key = p.rss_key;
  return f;
}

std::vector<SteeringResult> setup_flow_steering(FlowRuleManager& m,
                                                const std::vector<dp::PortRuntime>& ports,
                                                const FlowRuleInputs& in) {
  std::vector<SteeringResult> out;
  for (const auto& p : ports) m.add_port(flow_port_facts(p, in.workers));
  m.sync_all(in);
  const std::vector<FlowRuleStatus> status = m.status();
  for (const auto& p : ports) {
    SteeringResult r;
    r.port = p.name;
    std::array<uint32_t, kFlowRuleKinds> offloaded{}, software{};
    std::string refused_reason, steer_reason;
    for (const FlowRuleStatus& s : status) {
      if (s.spec.port_id != p.port_id) continue;
      const size_t k = size_t(s.spec.kind);
      if (s.state == FlowRuleState::kInstalled) {
        ++offloaded[k];
        r.rules += s.spec.kind == FlowRuleKind::kFullnatSteer;
      } else {
        ++software[k];
        if (refused_reason.empty()) refused_reason = s.reason;
        if (s.spec.kind == FlowRuleKind::kFullnatSteer && steer_reason.empty()) {
          steer_reason = s.reason;
        }
      }
    }
    r.rte_flow = m.all_installed(p.port_id, FlowRuleKind::kFullnatSteer);
    const FlowPortFacts facts = flow_port_facts(p, in.workers);
    const std::string blocker = fullnat_steering_blocker(in, facts);
    if (!blocker.empty()) {
      // Nothing to steer: probe a representative rule anyway, so the log tells the operator
      // what this NIC could do.
      FlowRuleSpec probe;
      probe.kind = FlowRuleKind::kFullnatSteer;
      probe.port_id = p.port_id;
      probe.priority = kFullnatSteerPriority;
      probe.destination = in.fullnat_addresses.empty()
                              ? (p.addresses.empty() ? IpAddr::v4(0xc6336402) : p.addresses[0].addr)
                              : in.fullnat_addresses[0];
      probe.ipv6 = !probe.destination.is_v4();
      probe.has_destination = true;
      probe.proto = 6;
      probe.dst_port_mask = uint16_t(in.workers > 1 ? in.workers - 1 : 0);
      probe.action = FlowRuleAction::kQueue;
      if (auto err = m.probe(p.port_id, probe)) {
        r.reason = "rte_flow_validate: " + (err->message.empty() ? "not supported" : err->message);
      } else {
        r.reason = blocker;
      }
    } else if (!r.rte_flow) {
      r.reason = steer_reason;
    }
    m.set_port_note(p.port_id, r.rte_flow ? "" : "fullnat steering in software: " + r.reason);
    if (r.rte_flow) {
      log(LogLevel::kInfo, "flow_steering", "port=%s mode=rte_flow rules=%u", p.name.c_str(),
          r.rules);
    } else {
      log(LogLevel::kInfo, "flow_steering", "port=%s mode=software reason=\"%s\"", p.name.c_str(),
          r.reason.c_str());
    }
    log(LogLevel::kInfo, "flow_rules", "port=%s offloaded=\"%s\" software=\"%s\" reason=\"%s\"",
        p.name.c_str(), kinds_text(offloaded).c_str(), kinds_text(software).c_str(),
        refused_reason.c_str());
    out.push_back(std::move(r));
  }
  return out;
}

void teardown_flow_steering(FlowRuleManager& m) { m.flush_all(); }

}  // namespace meshgate::ctl
