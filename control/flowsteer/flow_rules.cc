#include "control/flowsteer/flow_rules.h"

#include <rte_byteorder.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace meshgate::ctl {
namespace {

// `len` leading one bits over `n` bytes.
void prefix_mask(uint8_t* out, size_t n, uint32_t len) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = len > 8 * i ? std::min<uint32_t>(8, len - 8 * uint32_t(i)) : 0;
    out[i] = uint8_t(0xff00u >> bits);
  }
}

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::all_of(b, b + n, [](uint8_t x) { return x == 0; });
}

// A field of the packed IPv4 header as bytes (its address may be unaligned).
uint8_t* at(rte_ipv4_hdr& h, size_t offset) { return reinterpret_cast<uint8_t*>(&h) + offset; }

// One family's source prefix, destination host and next protocol (n: 4 or 16 address bytes).
void fill_l3(const FlowRuleSpec& s, size_t n, uint8_t* src, uint8_t* src_mask, uint8_t* dst,
             uint8_t* dst_mask, uint8_t* proto, uint8_t* proto_mask) {
  const uint8_t* src_bytes = n == 4 ? s.source.addr.v4_ptr() : s.source.addr.b;
  prefix_mask(src_mask, n, s.source.len);
  for (size_t i = 0; i < n; ++i) src[i] = src_bytes[i] & src_mask[i];
  if (s.has_destination) {
    std::memcpy(dst, n == 4 ? s.destination.v4_ptr() : s.destination.b, n);
    std::memset(dst_mask, 0xff, n);
  }
  if (s.proto != 0) {
    *proto = s.proto;
    *proto_mask = 0xff;
  }
}

// A NULL mask means the item's default mask (full addresses), so an item matching any packet
// of its family gets no spec at all rather than a zero mask.
template <typename Item>
void push_l3(std::vector<rte_flow_item>& pattern, rte_flow_item_type type, const Item& spec,
             const Item& mask) {
  const bool any = all_zero(&mask, sizeof mask);
  pattern.push_back({type, any ? nullptr : &spec, nullptr, any ? nullptr : &mask});
}

const char* proto_name(uint8_t proto) { return proto == 6 ? "tcp" : "udp"; }

void push_unique(std::vector<FlowRuleSpec>& out, const FlowRuleSpec& s) {
  if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
}

FlowRuleSpec allow_action(FlowRuleSpec s, const FlowPortFacts& port) {
  if (port.queues > 1) {
    s.action = FlowRuleAction::kRss;
    s.rss_queues = port.queues;
  } else {
    s.action = FlowRuleAction::kQueue;
    s.queue = 0;
  }
  return s;
}

}  // namespace

const char* flow_rule_kind_name(FlowRuleKind k) {
  switch (k) {
    case FlowRuleKind::kBlockSource: return "block_source";
    case FlowRuleKind::kSourceRange: return "source_range";
    case FlowRuleKind::kFullnatSteer: return "fullnat_steer";
  }
  return "unknown";
}

const char* flow_rule_action_name(FlowRuleAction a) {
  switch (a) {
    case FlowRuleAction::kDrop: return "drop";
    case FlowRuleAction::kQueue: return "queue";
    case FlowRuleAction::kRss: return "rss";
  }
  return "unknown";
}

bool same_service(const FlowRuleSpec& a, const FlowRuleSpec& b) {
  return a.kind == FlowRuleKind::kSourceRange && b.kind == FlowRuleKind::kSourceRange &&
         a.port_id == b.port_id && a.destination == b.destination && a.proto == b.proto &&
         a.dst_port == b.dst_port;
}

std::string flow_rule_match_text(const FlowRuleSpec& s) {
  std::string t = s.ipv6 ? "ipv6" : "ipv4";
  if (s.source.len != 0) t += " src " + s.source.str();
  if (s.has_destination) t += " dst " + s.destination.str();
  if (s.proto != 0) {
    char port[32];
    if (s.dst_port_mask == 0xffff) {
      std::snprintf(port, sizeof port, " dport %u", s.dst_port);
    } else {
      std::snprintf(port, sizeof port, " dport %u/0x%x", s.dst_port, s.dst_port_mask);
    }
    t += std::string(" ") + proto_name(s.proto) + port;
  }
  return t;
}

std::string flow_rule_action_text(const FlowRuleSpec& s) {
  switch (s.action) {
    case FlowRuleAction::kDrop: return "drop";
    case FlowRuleAction::kQueue: return "queue " + std::to_string(s.queue);
    case FlowRuleAction::kRss:
      return "rss queues 0-" + std::to_string(s.rss_queues ? s.rss_queues - 1 : 0);
  }
  return "";
}

std::string fullnat_steering_blocker(const FlowRuleInputs& in, const FlowPortFacts& port) {
  const uint32_t w = in.workers;
  if (w <= 1) return "one worker: nothing to steer";
  if ((w & (w - 1)) != 0) {
    return "worker count is not a power of two: a port mask cannot express the owner";
  }
  if (port.queues != w) return "the port's queue count differs from the worker count";
  if (in.fullnat_addresses.empty()) return "no fullnat local addresses";
  return "";
}

std::vector<FlowRuleSpec> desired_rules(const FlowRuleInputs& in, const FlowPortFacts& port) {
  std::vector<FlowRuleSpec> out;
  for (const IpPrefix& p : in.blocked) {
    FlowRuleSpec s;
    s.kind = FlowRuleKind::kBlockSource;
    s.port_id = port.port_id;
    s.priority = kBlockSourcePriority;
    s.ipv6 = !p.addr.is_v4();
    s.source = p.network();
    s.action = FlowRuleAction::kDrop;
    push_unique(out, s);
  }
  for (const FlowServiceInput& svc : in.services) {
    if (svc.allowed.empty()) continue;
    FlowRuleSpec base;
    base.kind = FlowRuleKind::kSourceRange;
    base.port_id = port.port_id;
    base.ipv6 = !svc.vip.is_v4();
    base.has_destination = true;
    base.destination = svc.vip;
    base.proto = uint8_t(svc.proto);
    base.dst_port = svc.port;
    base.dst_port_mask = 0xffff;
    for (const IpPrefix& p : svc.allowed) {
      if (p.addr.is_v4() == base.ipv6) continue;  // the other family never reaches this VIP
      FlowRuleSpec allow = allow_action(base, port);
      allow.priority = kSourceAllowPriority;
      allow.source = p.network();
      push_unique(out, allow);
    }
    FlowRuleSpec deny = base;
    deny.priority = kSourceDenyPriority;
    deny.action = FlowRuleAction::kDrop;
    push_unique(out, deny);
  }
  if (fullnat_steering_blocker(in, port).empty()) {
    for (const IpAddr& a : in.fullnat_addresses) {
      for (uint8_t proto : {uint8_t(6), uint8_t(17)}) {
        for (uint32_t q = 0; q < in.workers; ++q) {
          FlowRuleSpec s;
          s.kind = FlowRuleKind::kFullnatSteer;
          s.port_id = port.port_id;
          s.priority =
              in.blocked.empty() ? kFullnatSteerPriority : kFullnatSteerBehindBlockPriority;
          s.ipv6 = !a.is_v4();
          s.has_destination = true;
          s.destination = a;
          s.proto = proto;
          s.dst_port = uint16_t(q);
          s.dst_port_mask = uint16_t(in.workers - 1);
          s.action = FlowRuleAction::kQueue;
          s.queue = uint16_t(q);
          push_unique(out, s);
        }
      }
    }
  }
  return out;
}

RteFlowRule translate_flow_rule(const FlowRuleSpec& s, const FlowPortFacts& port) {
  RteFlowRule r;
  r.storage = std::make_unique<RteFlowRule::Storage>();
  RteFlowRule::Storage& st = *r.storage;
  r.attr.group = 0;
  r.attr.priority = s.priority;
  r.attr.ingress = 1;

  // ETH with no spec: any Ethernet frame (the L3 item says which EtherType).
  r.pattern.push_back({RTE_FLOW_ITEM_TYPE_ETH, nullptr, nullptr, nullptr});
  if (!s.ipv6) {
    rte_ipv4_hdr& v = st.ip4.hdr;
    rte_ipv4_hdr& m = st.ip4_mask.hdr;
    constexpr size_t kSrc = offsetof(rte_ipv4_hdr, src_addr);
    constexpr size_t kDst = offsetof(rte_ipv4_hdr, dst_addr);
    fill_l3(s, 4, at(v, kSrc), at(m, kSrc), at(v, kDst), at(m, kDst), &v.next_proto_id,
            &m.next_proto_id);
    push_l3(r.pattern, RTE_FLOW_ITEM_TYPE_IPV4, st.ip4, st.ip4_mask);
  } else {
    rte_ipv6_hdr& v = st.ip6.hdr;
    rte_ipv6_hdr& m = st.ip6_mask.hdr;
    fill_l3(s, 16, v.src_addr, m.src_addr, v.dst_addr, m.dst_addr, &v.proto, &m.proto);
    push_l3(r.pattern, RTE_FLOW_ITEM_TYPE_IPV6, st.ip6, st.ip6_mask);
  }
  if (s.proto != 0) {
    const rte_be16_t spec = rte_cpu_to_be_16(uint16_t(s.dst_port & s.dst_port_mask));
    const rte_be16_t mask = rte_cpu_to_be_16(s.dst_port_mask);
    if (s.proto == 6) {
      st.tcp.hdr.dst_port = spec;
      st.tcp_mask.hdr.dst_port = mask;
      r.pattern.push_back({RTE_FLOW_ITEM_TYPE_TCP, &st.tcp, nullptr, &st.tcp_mask});
    } else {
      st.udp.hdr.dst_port = spec;
      st.udp_mask.hdr.dst_port = mask;
      r.pattern.push_back({RTE_FLOW_ITEM_TYPE_UDP, &st.udp, nullptr, &st.udp_mask});
    }
  }
  r.pattern.push_back({RTE_FLOW_ITEM_TYPE_END, nullptr, nullptr, nullptr});

  switch (s.action) {
    case FlowRuleAction::kDrop: r.actions.push_back({RTE_FLOW_ACTION_TYPE_DROP, nullptr}); break;
    case FlowRuleAction::kQueue:
      st.queue.index = s.queue;
      r.actions.push_back({RTE_FLOW_ACTION_TYPE_QUEUE, &st.queue});
      break;
    case FlowRuleAction::kRss: {
      st.rss_key = port.rss_key;
      for (uint16_t q = 0; q < s.rss_queues; ++q) st.rss_queues.push_back(q);
      st.rss.func = RTE_ETH_HASH_FUNCTION_DEFAULT;
      st.rss.level = 0;
      st.rss.types = port.rss_hf;
      st.rss.key_len = uint32_t(st.rss_key.size());
      st.rss.key = st.rss_key.empty() ? nullptr : st.rss_key.data();
      st.rss.queue_num = uint32_t(st.rss_queues.size());
      st.rss.queue = st.rss_queues.data();
      r.actions.push_back({RTE_FLOW_ACTION_TYPE_RSS, &st.rss});
      break;
    }
  }
  r.actions.push_back({RTE_FLOW_ACTION_TYPE_END, nullptr});
  return r;
}

}  // namespace meshgate::ctl
