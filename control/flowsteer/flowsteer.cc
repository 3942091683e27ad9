#include "control/flowsteer/flowsteer.h"

#include <rte_flow.h>

#include <cstring>

#include "control/common/log.h"

namespace meshgate::ctl {
namespace {

// One rule: packets of `proto` to `addr` whose destination port has residue `queue` under
// `mask` go to RX queue `queue`.
int make_rule(uint16_t port_id, const IpAddr& addr, uint8_t proto, uint16_t mask, uint16_t queue,
              bool create, rte_flow** out, rte_flow_error* err) {
  rte_flow_attr attr{};
  attr.ingress = 1;
  rte_flow_item pattern[4] = {};
  rte_flow_item_ipv4 ip4{}, ip4_mask{};
  rte_flow_item_ipv6 ip6{}, ip6_mask{};
  rte_flow_item_tcp tcp{}, tcp_mask{};
  rte_flow_item_udp udp{}, udp_mask{};
  pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
  if (addr.is_v4()) {
    std::memcpy(&ip4.hdr.dst_addr, addr.v4_ptr(), 4);
    ip4_mask.hdr.dst_addr = 0xffffffff;
    pattern[1] = {RTE_FLOW_ITEM_TYPE_IPV4, &ip4, nullptr, &ip4_mask};
  } else {
    std::memcpy(ip6.hdr.dst_addr, addr.b, 16);
    std::memset(ip6_mask.hdr.dst_addr, 0xff, 16);
    pattern[1] = {RTE_FLOW_ITEM_TYPE_IPV6, &ip6, nullptr, &ip6_mask};
  }
  const rte_be16_t port_spec = rte_cpu_to_be_16(queue), port_mask = rte_cpu_to_be_16(mask);
  if (proto == 6) {
    tcp.hdr.dst_port = port_spec;
    tcp_mask.hdr.dst_port = port_mask;
    pattern[2] = {RTE_FLOW_ITEM_TYPE_TCP, &tcp, nullptr, &tcp_mask};
  } else {
    udp.hdr.dst_port = port_spec;
    udp_mask.hdr.dst_port = port_mask;
    pattern[2] = {RTE_FLOW_ITEM_TYPE_UDP, &udp, nullptr, &udp_mask};
  }
  pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
  rte_flow_action_queue q{queue};
  rte_flow_action actions[2] = {};
  actions[0] = {RTE_FLOW_ACTION_TYPE_QUEUE, &q};
  actions[1].type = RTE_FLOW_ACTION_TYPE_END;
  if (!create) return rte_flow_validate(port_id, &attr, pattern, actions, err);
  *out = rte_flow_create(port_id, &attr, pattern, actions, err);
  return *out ? 0 : -1;
}

}  // namespace

std::vector<SteeringResult> setup_flow_steering(const std::vector<dp::PortRuntime>& ports,
                                                const std::vector<IpAddr>& fullnat_addresses,
                                                uint32_t workers) {
  std::vector<SteeringResult> out;
  const bool pow2 = workers && (workers & (workers - 1)) == 0;
  for (const auto& p : ports) {
    SteeringResult r;
    r.port = p.name;
    // Probe with a representative rule even when nothing needs steering, so the log tells the
    // operator what this NIC could do.
    const IpAddr probe_addr = fullnat_addresses.empty()
                                  ? (p.addresses.empty() ? IpAddr::v4(0xc6336402) : p.addresses[0].addr)
                                  : fullnat_addresses[0];
    rte_flow_error err{};
    const int rc = make_rule(p.port_id, probe_addr, 6, uint16_t(workers - 1), 0, false, nullptr, &err);
    if (rc != 0) {
      r.reason = std::string("rte_flow_validate: ") + (err.message ? err.message : "not supported");
    } else if (workers == 1) {
      r.reason = "one worker: nothing to steer";
    } else if (!pow2) {
      r.reason = "worker count is not a power of two: a port mask cannot express the owner";
    } else if (fullnat_addresses.empty()) {
      r.reason = "no fullnat local addresses";
    } else {
      bool ok = true;
      for (const IpAddr& a : fullnat_addresses) {
        for (uint8_t proto : {uint8_t(6), uint8_t(17)}) {
          for (uint16_t q = 0; q < workers && ok; ++q) {
            rte_flow* flow = nullptr;
            if (make_rule(p.port_id, a, proto, uint16_t(workers - 1), q, true, &flow, &err) != 0) {
              r.reason = std::string("rte_flow_create: ") + (err.message ? err.message : "failed");
              ok = false;
            } else {
              ++r.rules;
            }
          }
        }
      }
      if (!ok) {
        rte_flow_flush(p.port_id, &err);
        r.rules = 0;
      }
      r.rte_flow = ok;
    }
    if (r.rte_flow) {
      log(LogLevel::kInfo, "flow_steering", "port=%s mode=rte_flow rules=%u", p.name.c_str(),
          r.rules);
    } else {
      log(LogLevel::kInfo, "flow_steering", "port=%s mode=software reason=\"%s\"", p.name.c_str(),
          r.reason.c_str());
    }
    out.push_back(std::move(r));
  }
  return out;
}

void teardown_flow_steering(const std::vector<dp::PortRuntime>& ports) {
  for (const auto& p : ports) {
    rte_flow_error err{};
    rte_flow_flush(p.port_id, &err);
  }
}

}  // namespace meshgate::ctl
