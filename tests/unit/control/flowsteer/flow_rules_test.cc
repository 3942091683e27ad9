// The rte_flow rules as a NIC would match them: desired_rules() from plain inputs, and each
// rule kind translated to rte_flow_attr / items / actions, checked as a table against the
// header bytes the items' spec and mask hold (addresses and ports in network order).
#include "control/flowsteer/flow_rules.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace meshgate::ctl {
namespace {

using Bytes = std::vector<uint8_t>;

IpPrefix pfx(const char* s) { return *IpPrefix::parse(s); }
IpAddr ip(const char* s) { return *IpAddr::parse(s); }

FlowPortFacts port_facts(uint16_t queues) {
  FlowPortFacts f;
  f.port_id = 3;
  f.name = "net0";
  f.queues = queues;
  f.rss_hf = 0x38d34;  // any value: the RSS action must carry the port's own
  f.rss_key = Bytes(40);
  for (size_t i = 0; i < f.rss_key.size(); ++i) f.rss_key[i] = uint8_t(0x6d + i);
  return f;
}

// An IPv4 header (20 bytes, RFC 791 3.1): protocol at 9, source at 12, destination at 16.
Bytes v4hdr(uint8_t proto, Bytes src, Bytes dst) {
  Bytes h(20, 0);
  h[9] = proto;
  std::copy(src.begin(), src.end(), h.begin() + 12);
  std::copy(dst.begin(), dst.end(), h.begin() + 16);
  return h;
}
// An IPv6 header (40 bytes, RFC 8200 3): next header at 6, source at 8, destination at 24.
Bytes v6hdr(uint8_t proto, Bytes src, Bytes dst) {
  Bytes h(40, 0);
  h[6] = proto;
  std::copy(src.begin(), src.end(), h.begin() + 8);
  std::copy(dst.begin(), dst.end(), h.begin() + 24);
  return h;
}
// TCP (20 bytes) or UDP (8 bytes) header with only the destination port (offset 2) set.
Bytes l4hdr(uint8_t proto, uint8_t hi, uint8_t lo) {
  Bytes h(proto == 6 ? 20 : 8, 0);
  h[2] = hi;
  h[3] = lo;
  return h;
}
Bytes zeros(size_t n) { return Bytes(n, 0); }
Bytes ones(size_t n) { return Bytes(n, 0xff); }
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const Bytes kV4Any = {0, 0, 0, 0};
const Bytes kV4Full = {0xff, 0xff, 0xff, 0xff};

FlowRuleSpec block(const char* prefix) {
  FlowRuleSpec s;
  s.kind = FlowRuleKind::kBlockSource;
  s.port_id = 3;
  s.priority = kBlockSourcePriority;
  s.source = pfx(prefix);
  s.ipv6 = !s.source.addr.is_v4();
  s.action = FlowRuleAction::kDrop;
  return s;
}

FlowRuleSpec service(const char* vip, uint8_t proto, uint16_t port) {
  FlowRuleSpec s;
  s.kind = FlowRuleKind::kSourceRange;
  s.port_id = 3;
  s.destination = ip(vip);
  s.ipv6 = !s.destination.is_v4();
  s.has_destination = true;
  s.proto = proto;
  s.dst_port = port;
  s.dst_port_mask = 0xffff;
  return s;
}

FlowRuleSpec allow(const char* vip, uint8_t proto, uint16_t port, const char* prefix,
                   uint16_t queues) {
  FlowRuleSpec s = service(vip, proto, port);
  s.priority = kSourceAllowPriority;
  s.source = pfx(prefix);
  if (queues > 1) {
    s.action = FlowRuleAction::kRss;
    s.rss_queues = queues;
  } else {
    s.action = FlowRuleAction::kQueue;
  }
  return s;
}

FlowRuleSpec deny(const char* vip, uint8_t proto, uint16_t port) {
  FlowRuleSpec s = service(vip, proto, port);
  s.priority = kSourceDenyPriority;
  s.action = FlowRuleAction::kDrop;
  return s;
}

FlowRuleSpec steer(const char* addr, uint8_t proto, uint16_t q, uint16_t workers) {
  FlowRuleSpec s;
  s.kind = FlowRuleKind::kFullnatSteer;
  s.port_id = 3;
  s.priority = kFullnatSteerPriority;
  s.destination = ip(addr);
  s.ipv6 = !s.destination.is_v4();
  s.has_destination = true;
  s.proto = proto;
  s.dst_port = q;
  s.dst_port_mask = uint16_t(workers - 1);
  s.action = FlowRuleAction::kQueue;
  s.queue = q;
  return s;
}

struct TranslationCase {
  const char* description;
  FlowRuleSpec spec;
  uint16_t port_queues;
  std::vector<rte_flow_item_type> items;  // without the trailing END
  Bytes l3_spec, l3_mask;                 // empty: the IP item has no spec (any packet)
  Bytes l4_spec, l4_mask;                 // empty: no L4 item
  uint32_t priority;
  rte_flow_action_type action;
  uint16_t queue;       // QUEUE
  uint16_t rss_queues;  // RSS
};

const Bytes kV6Db8 = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
const Bytes kV6Vip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0x53, 0, 0, 0, 0, 0, 0, 0, 0x10};

const std::vector<TranslationCase>& cases() {
  using T = rte_flow_item_type;
  constexpr T kEth = RTE_FLOW_ITEM_TYPE_ETH, kV4 = RTE_FLOW_ITEM_TYPE_IPV4,
              kV6 = RTE_FLOW_ITEM_TYPE_IPV6, kTcp = RTE_FLOW_ITEM_TYPE_TCP,
              kUdp = RTE_FLOW_ITEM_TYPE_UDP;
  constexpr auto kDrop = RTE_FLOW_ACTION_TYPE_DROP, kQueue = RTE_FLOW_ACTION_TYPE_QUEUE,
                 kRss = RTE_FLOW_ACTION_TYPE_RSS;
  static const std::vector<TranslationCase> c = {
      {"block ipv4 /24: source network under a /24 mask", block("198.51.100.0/24"), 4,
       {kEth, kV4}, v4hdr(0, {198, 51, 100, 0}, kV4Any), v4hdr(0, {0xff, 0xff, 0xff, 0}, kV4Any),
       {}, {}, kBlockSourcePriority, kDrop, 0, 0},
      {"block ipv4 /32: one host", block("203.0.113.7/32"), 4, {kEth, kV4},
       v4hdr(0, {203, 0, 113, 7}, kV4Any), v4hdr(0, kV4Full, kV4Any), {}, {},
       kBlockSourcePriority, kDrop, 0, 0},
      {"block ipv4 /20 given with host bits: they are cleared in the spec",
       block("10.1.31.255/20"), 4, {kEth, kV4}, v4hdr(0, {10, 1, 16, 0}, kV4Any),
       v4hdr(0, {0xff, 0xff, 0xf0, 0}, kV4Any), {}, {}, kBlockSourcePriority, kDrop, 0, 0},
      {"block ipv4 /0: every IPv4 packet, an IPV4 item without spec", block("0.0.0.0/0"), 4,
       {kEth, kV4}, {}, {}, {}, {}, kBlockSourcePriority, kDrop, 0, 0},
      {"block ipv6 /48", block("2001:db8:1::/48"), 4, {kEth, kV6},
       v6hdr(0, kV6Db8, zeros(16)), v6hdr(0, cat(ones(6), zeros(10)), zeros(16)), {}, {},
       kBlockSourcePriority, kDrop, 0, 0},
      {"block ipv6 /128", block("2001:db8:0:53::10/128"), 4, {kEth, kV6},
       v6hdr(0, kV6Vip, zeros(16)), v6hdr(0, ones(16), zeros(16)), {}, {}, kBlockSourcePriority,
       kDrop, 0, 0},
      {"block ipv6 /0: every IPv6 packet", block("::/0"), 4, {kEth, kV6}, {}, {}, {}, {},
       kBlockSourcePriority, kDrop, 0, 0},
      {"source range allow ipv4 /24 to tcp 80: RSS over the port's 4 queues",
       allow("192.0.2.10", 6, 80, "198.51.100.0/24", 4), 4, {kEth, kV4, kTcp},
       v4hdr(6, {198, 51, 100, 0}, {192, 0, 2, 10}), v4hdr(0xff, {0xff, 0xff, 0xff, 0}, kV4Full),
       l4hdr(6, 0x00, 0x50), l4hdr(6, 0xff, 0xff), kSourceAllowPriority, kRss, 0, 4},
      {"source range allow ipv4 /0 to udp 53 on a single-queue port: QUEUE 0",
       allow("192.0.2.10", 17, 53, "0.0.0.0/0", 1), 1, {kEth, kV4, kUdp},
       v4hdr(17, kV4Any, {192, 0, 2, 10}), v4hdr(0xff, kV4Any, kV4Full), l4hdr(17, 0, 53),
       l4hdr(17, 0xff, 0xff), kSourceAllowPriority, kQueue, 0, 0},
      {"source range allow ipv4 /32 to tcp 8443 (port above 255: big-endian)",
       allow("192.0.2.10", 6, 8443, "203.0.113.7/32", 2), 2, {kEth, kV4, kTcp},
       v4hdr(6, {203, 0, 113, 7}, {192, 0, 2, 10}), v4hdr(0xff, kV4Full, kV4Full),
       l4hdr(6, 0x20, 0xfb), l4hdr(6, 0xff, 0xff), kSourceAllowPriority, kRss, 0, 2},
      {"source range allow ipv6 /48 to tcp 443",
       allow("2001:db8:0:53::10", 6, 443, "2001:db8:1::/48", 4), 4, {kEth, kV6, kTcp},
       v6hdr(6, kV6Db8, kV6Vip), v6hdr(0xff, cat(ones(6), zeros(10)), ones(16)),
       l4hdr(6, 0x01, 0xbb), l4hdr(6, 0xff, 0xff), kSourceAllowPriority, kRss, 0, 4},
      {"source range DROP ipv4 tcp 80: any source, lower priority than the allows",
       deny("192.0.2.10", 6, 80), 4, {kEth, kV4, kTcp}, v4hdr(6, kV4Any, {192, 0, 2, 10}),
       v4hdr(0xff, kV4Any, kV4Full), l4hdr(6, 0x00, 0x50), l4hdr(6, 0xff, 0xff),
       kSourceDenyPriority, kDrop, 0, 0},
      {"source range DROP ipv6 udp 53", deny("2001:db8:0:53::10", 17, 53), 4, {kEth, kV6, kUdp},
       v6hdr(17, zeros(16), kV6Vip), v6hdr(0xff, zeros(16), ones(16)), l4hdr(17, 0, 53),
       l4hdr(17, 0xff, 0xff), kSourceDenyPriority, kDrop, 0, 0},
      {"fullnat steer ipv4 tcp: residue 3 under mask 3 to queue 3",
       steer("198.51.100.2", 6, 3, 4), 4, {kEth, kV4, kTcp}, v4hdr(6, kV4Any, {198, 51, 100, 2}),
       v4hdr(0xff, kV4Any, kV4Full), l4hdr(6, 0, 3), l4hdr(6, 0, 3), kFullnatSteerPriority,
       kQueue, 3, 0},
      {"fullnat steer ipv6 udp: residue 5 under mask 7 to queue 5",
       steer("2001:db8:0:53::10", 17, 5, 8), 8, {kEth, kV6, kUdp}, v6hdr(17, zeros(16), kV6Vip),
       v6hdr(0xff, zeros(16), ones(16)), l4hdr(17, 0, 5), l4hdr(17, 0, 7),
       kFullnatSteerPriority, kQueue, 5, 0},
  };
  return c;
}

Bytes raw(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return Bytes(b, b + n);
}

// The header bytes an item's spec or mask points to (the item structs start with the header).
Bytes header_of(const rte_flow_item& item, const void* p) {
  switch (item.type) {
    case RTE_FLOW_ITEM_TYPE_IPV4: return raw(p, sizeof(rte_ipv4_hdr));
    case RTE_FLOW_ITEM_TYPE_IPV6: return raw(p, sizeof(rte_ipv6_hdr));
    case RTE_FLOW_ITEM_TYPE_TCP: return raw(p, sizeof(rte_tcp_hdr));
    case RTE_FLOW_ITEM_TYPE_UDP: return raw(p, sizeof(rte_udp_hdr));
    default: return {};
  }
}

void expect_matches(const RteFlowRule& r, const TranslationCase& c, const FlowPortFacts& port) {
  SCOPED_TRACE(c.description);
  EXPECT_EQ(r.attr.group, 0u);
  EXPECT_EQ(r.attr.priority, c.priority);
  EXPECT_EQ(r.attr.ingress, 1u);
  EXPECT_EQ(r.attr.egress, 0u);
  EXPECT_EQ(r.attr.transfer, 0u);
  ASSERT_EQ(r.pattern.size(), c.items.size() + 1);
  for (size_t i = 0; i < c.items.size(); ++i) EXPECT_EQ(r.pattern[i].type, c.items[i]) << i;
  EXPECT_EQ(r.pattern.back().type, RTE_FLOW_ITEM_TYPE_END);
  // ETH: any frame, no spec; no item uses ranges.
  EXPECT_EQ(r.pattern[0].spec, nullptr);
  EXPECT_EQ(r.pattern[0].mask, nullptr);
  for (const rte_flow_item& it : r.pattern) EXPECT_EQ(it.last, nullptr);
  const rte_flow_item& l3 = r.pattern[1];
  if (c.l3_spec.empty()) {
    EXPECT_EQ(l3.spec, nullptr);
    EXPECT_EQ(l3.mask, nullptr);
  } else {
    ASSERT_NE(l3.spec, nullptr);
    ASSERT_NE(l3.mask, nullptr);  // NULL would mean the item's default (full) mask
    EXPECT_EQ(header_of(l3, l3.spec), c.l3_spec);
    EXPECT_EQ(header_of(l3, l3.mask), c.l3_mask);
  }
  if (c.l4_spec.empty()) {
    EXPECT_EQ(c.items.size(), 2u);
  } else {
    const rte_flow_item& l4 = r.pattern[2];
    ASSERT_NE(l4.spec, nullptr);
    ASSERT_NE(l4.mask, nullptr);
    EXPECT_EQ(header_of(l4, l4.spec), c.l4_spec);
    EXPECT_EQ(header_of(l4, l4.mask), c.l4_mask);
  }
  ASSERT_EQ(r.actions.size(), 2u);
  EXPECT_EQ(r.actions[0].type, c.action);
  EXPECT_EQ(r.actions[1].type, RTE_FLOW_ACTION_TYPE_END);
  if (c.action == RTE_FLOW_ACTION_TYPE_DROP) {
    EXPECT_EQ(r.actions[0].conf, nullptr);
  }
  if (c.action == RTE_FLOW_ACTION_TYPE_QUEUE) {
    ASSERT_NE(r.actions[0].conf, nullptr);
    EXPECT_EQ(static_cast<const rte_flow_action_queue*>(r.actions[0].conf)->index, c.queue);
  }
  if (c.action == RTE_FLOW_ACTION_TYPE_RSS) {
    ASSERT_NE(r.actions[0].conf, nullptr);
    const auto* rss = static_cast<const rte_flow_action_rss*>(r.actions[0].conf);
    EXPECT_EQ(rss->func, RTE_ETH_HASH_FUNCTION_DEFAULT);
    EXPECT_EQ(rss->level, 0u);
    EXPECT_EQ(rss->types, port.rss_hf);
    ASSERT_EQ(rss->key_len, port.rss_key.size());
    EXPECT_EQ(raw(rss->key, rss->key_len), port.rss_key);
    ASSERT_EQ(rss->queue_num, c.rss_queues);
    for (uint16_t q = 0; q < c.rss_queues; ++q) EXPECT_EQ(rss->queue[q], q);
  }
}

TEST(FlowRuleTranslation, EachKindAndFamilyMatchesTheBytesOfTheTable) {
  for (const TranslationCase& c : cases()) {
    const FlowPortFacts port = port_facts(c.port_queues);
    expect_matches(translate_flow_rule(c.spec, port), c, port);
  }
}

TEST(FlowRuleTranslation, MovedRulesKeepPointingAtTheirOwnStorage) {
  std::vector<RteFlowRule> rules;
  const FlowPortFacts port = port_facts(4);
  for (const TranslationCase& c : cases()) {
    RteFlowRule r = translate_flow_rule(c.spec, port);
    RteFlowRule moved = std::move(r);
    rules.push_back(std::move(moved));  // and again as the vector grows
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    expect_matches(rules[i], cases()[i], port);
  }
}

TEST(FlowRuleTranslation, TheRssKeyIsOmittedWhenThePortHasNone) {
  FlowPortFacts port = port_facts(2);
  port.rss_key.clear();
  const RteFlowRule r = translate_flow_rule(allow("192.0.2.10", 6, 80, "10.0.0.0/8", 2), port);
  const auto* rss = static_cast<const rte_flow_action_rss*>(r.actions[0].conf);
  EXPECT_EQ(rss->key, nullptr);
  EXPECT_EQ(rss->key_len, 0u);
}

TEST(FlowRuleText, MatchAndActionReadLikeTestpmd) {
  EXPECT_EQ(flow_rule_match_text(allow("192.0.2.10", 6, 80, "198.51.100.0/24", 4)),
            "ipv4 src 198.51.100.0/24 dst 192.0.2.10 tcp dport 80");
  EXPECT_EQ(flow_rule_action_text(allow("192.0.2.10", 6, 80, "198.51.100.0/24", 4)),
            "rss queues 0-3");
  EXPECT_EQ(flow_rule_match_text(steer("198.51.100.2", 17, 1, 2)),
            "ipv4 dst 198.51.100.2 udp dport 1/0x1");
  EXPECT_EQ(flow_rule_action_text(steer("198.51.100.2", 17, 1, 2)), "queue 1");
  EXPECT_EQ(flow_rule_match_text(block("2001:db8:1::/48")), "ipv6 src 2001:db8:1::/48");
  EXPECT_EQ(flow_rule_action_text(block("2001:db8:1::/48")), "drop");
}

// ---- desired_rules ----

FlowServiceInput svc_in(const char* vip, L4Proto proto, uint16_t port,
                        std::vector<const char*> allowed) {
  FlowServiceInput s;
  s.vip = ip(vip);
  s.proto = proto;
  s.port = port;
  for (const char* a : allowed) s.allowed.push_back(pfx(a));
  return s;
}

TEST(DesiredRules, NothingConfiguredMeansNoRules) {
  FlowRuleInputs in;
  in.workers = 4;
  EXPECT_TRUE(desired_rules(in, port_facts(4)).empty());
}

TEST(DesiredRules, BlockListGivesOneDropPerNetworkOnce) {
  FlowRuleInputs in;
  in.blocked = {pfx("198.51.100.0/24"), pfx("198.51.100.77/24"), pfx("2001:db8:1::/48")};
  const auto r = desired_rules(in, port_facts(4));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], block("198.51.100.0/24"));
  EXPECT_EQ(r[1], block("2001:db8:1::/48"));
}

TEST(DesiredRules, SourceRangesGiveAllowsBeforeTheDropAndSkipTheOtherFamily) {
  FlowRuleInputs in;
  in.services = {svc_in("192.0.2.10", L4Proto::kTcp, 80,
                        {"198.51.100.0/24", "2001:db8:1::/48", "203.0.113.7/32"}),
                 svc_in("192.0.2.11", L4Proto::kUdp, 53, {}),  // empty: no rule
                 svc_in("2001:db8:0:53::10", L4Proto::kUdp, 53, {"10.0.0.0/8"})};
  const auto r = desired_rules(in, port_facts(4));
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], allow("192.0.2.10", 6, 80, "198.51.100.0/24", 4));
  EXPECT_EQ(r[1], allow("192.0.2.10", 6, 80, "203.0.113.7/32", 4));
  EXPECT_EQ(r[2], deny("192.0.2.10", 6, 80));
  // Only IPv4 sources are allowed to an IPv6 VIP: nothing of its family passes.
  EXPECT_EQ(r[3], deny("2001:db8:0:53::10", 17, 53));
  EXPECT_TRUE(same_service(r[0], r[2]));
  EXPECT_FALSE(same_service(r[0], r[3]));
}

TEST(DesiredRules, SingleQueuePortAllowsWithQueueZero) {
  FlowRuleInputs in;
  in.services = {svc_in("192.0.2.10", L4Proto::kTcp, 80, {"198.51.100.0/24"})};
  const auto r = desired_rules(in, port_facts(1));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].action, FlowRuleAction::kQueue);
  EXPECT_EQ(r[0].queue, 0);
}

TEST(DesiredRules, FullnatSteeringPerAddressProtocolAndWorker) {
  FlowRuleInputs in;
  in.fullnat_addresses = {ip("198.51.100.2"), ip("2001:db8:0:53::10")};
  in.workers = 4;
  const auto r = desired_rules(in, port_facts(4));
  ASSERT_EQ(r.size(), 2u * 2u * 4u);
  EXPECT_EQ(r[0], steer("198.51.100.2", 6, 0, 4));
  EXPECT_EQ(r[3], steer("198.51.100.2", 6, 3, 4));
  EXPECT_EQ(r[4], steer("198.51.100.2", 17, 0, 4));
  EXPECT_EQ(r[15], steer("2001:db8:0:53::10", 17, 3, 4));
  EXPECT_EQ(r[0].priority, kFullnatSteerPriority);  // no block rule to stay behind
  EXPECT_EQ(fullnat_steering_blocker(in, port_facts(4)), "");
}

TEST(DesiredRules, FullnatSteeringOnlyWithAPowerOfTwoWorkerCountOfTheQueues) {
  struct Row {
    uint32_t workers;
    uint16_t queues;
    bool addresses;
    const char* blocker;
  };
  const Row rows[] = {
      {1, 1, true, "one worker: nothing to steer"},
      {3, 3, true, "worker count is not a power of two: a port mask cannot express the owner"},
      {4, 2, true, "the port's queue count differs from the worker count"},
      {2, 2, false, "no fullnat local addresses"},
  };
  for (const Row& row : rows) {
    FlowRuleInputs in;
    in.workers = row.workers;
    if (row.addresses) in.fullnat_addresses = {ip("198.51.100.2")};
    EXPECT_EQ(fullnat_steering_blocker(in, port_facts(row.queues)), row.blocker);
    EXPECT_TRUE(desired_rules(in, port_facts(row.queues)).empty()) << row.blocker;
  }
}

TEST(DesiredRules, KindsComeInInstallOrder) {
  FlowRuleInputs in;
  in.fullnat_addresses = {ip("198.51.100.2")};
  in.workers = 2;
  in.services = {svc_in("192.0.2.10", L4Proto::kTcp, 80, {"198.51.100.0/24"})};
  in.blocked = {pfx("203.0.113.0/24")};
  const auto r = desired_rules(in, port_facts(2));
  ASSERT_EQ(r.size(), 1u + 2u + 4u);
  EXPECT_EQ(r[0].kind, FlowRuleKind::kBlockSource);
  EXPECT_EQ(r[1].kind, FlowRuleKind::kSourceRange);
  EXPECT_EQ(r[2].kind, FlowRuleKind::kSourceRange);
  EXPECT_TRUE(is_source_range_drop(r[2]));
  for (size_t i = 3; i < r.size(); ++i) {
    EXPECT_EQ(r[i].kind, FlowRuleKind::kFullnatSteer);
    EXPECT_EQ(r[i].priority, kFullnatSteerBehindBlockPriority);  // behind the block rule
  }
  for (const FlowRuleSpec& s : r) EXPECT_EQ(s.port_id, 3);
}

}  // namespace
}  // namespace meshgate::ctl
