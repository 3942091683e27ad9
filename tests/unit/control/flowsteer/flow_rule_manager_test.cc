// FlowRuleManager's lifecycle against a recording fake of the rte_flow API: the rules live in
// the "NIC" are exactly the desired ones after every sync, nothing leaks across 100 reloads,
// flush at exit leaves none, and refusals and destroy failures leave the software path in
// charge, counted and not retried. The start-up steering (flowsteer.h) through the manager
// keeps its rules: steered only where every steering rule is in.
#include "control/flowsteer/flow_rule_manager.h"
#include "control/flowsteer/flowsteer.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace meshgate::ctl {
namespace {

// What a NIC would hold for a rule: attr, item types with their spec and mask bytes, action
// types with their conf. Equal signatures, equal rules.
std::string signature(const RteFlowRule& r) {
  std::string s = "prio=" + std::to_string(r.attr.priority) +
                  " ingress=" + std::to_string(r.attr.ingress) + " |";
  auto bytes = [&s](const void* p, size_t n) {
    if (p == nullptr) {
      s += " -";
      return;
    }
    const auto* b = static_cast<const uint8_t*>(p);
    s += ' ';
    for (size_t i = 0; i < n; ++i) {
      s += "0123456789abcdef"[b[i] >> 4];
      s += "0123456789abcdef"[b[i] & 15];
    }
  };
  for (const rte_flow_item& it : r.pattern) {
    s += " item" + std::to_string(int(it.type));
    size_t n = 0;
    switch (it.type) {
      case RTE_FLOW_ITEM_TYPE_IPV4: n = sizeof(rte_ipv4_hdr); break;
      case RTE_FLOW_ITEM_TYPE_IPV6: n = sizeof(rte_ipv6_hdr); break;
      case RTE_FLOW_ITEM_TYPE_TCP: n = sizeof(rte_tcp_hdr); break;
      case RTE_FLOW_ITEM_TYPE_UDP: n = sizeof(rte_udp_hdr); break;
      default: break;
    }
    if (n) {
      bytes(it.spec, n);
      bytes(it.mask, n);
    }
  }
  s += " |";
  for (const rte_flow_action& a : r.actions) {
    s += " action" + std::to_string(int(a.type));
    if (a.type == RTE_FLOW_ACTION_TYPE_QUEUE) {
      s += "=" + std::to_string(static_cast<const rte_flow_action_queue*>(a.conf)->index);
    }
    if (a.type == RTE_FLOW_ACTION_TYPE_RSS) {
      const auto* rss = static_cast<const rte_flow_action_rss*>(a.conf);
      s += "=" + std::to_string(rss->queue_num);
    }
  }
  return s;
}

class RecordingFlowApi : public FlowApi {
 public:
  struct Live {
    uint16_t port;
    std::string sig;
  };
  using Pred = std::function<bool(const RteFlowRule&)>;

  std::optional<Error> validate(uint16_t, const RteFlowRule& r) override {
    ++validates;
    validated.push_back(signature(r));
    if (refuse_validate && refuse_validate(r)) return Error{"fake: pattern not supported"};
    return std::nullopt;
  }
  Result<FlowHandle> create(uint16_t port, const RteFlowRule& r) override {
    ++creates;
    if (refuse_create && refuse_create(r)) return Error{"fake: no room for the rule"};
    const FlowHandle h = next_++;
    live[h] = {port, signature(r)};
    ever_created.insert(h);
    return h;
  }
  std::optional<Error> destroy(uint16_t port, FlowHandle h) override {
    ++destroys;
    const auto it = live.find(h);
    if (it == live.end() || it->second.port != port) {
      ++bad_destroys;  // a handle destroyed twice, never created, or on the wrong port
      return Error{"fake: no such rule"};
    }
    if (fail_destroy && fail_destroy(h)) return Error{"fake: device busy"};
    live.erase(it);
    return std::nullopt;
  }
  std::optional<Error> flush(uint16_t port) override {
    ++flushes;
    if (fail_flush) return Error{"fake: flush failed"};
    std::erase_if(live, [port](const auto& kv) { return kv.second.port == port; });
    return std::nullopt;
  }

  std::multiset<std::string> live_on(uint16_t port) const {
    std::multiset<std::string> out;
    for (const auto& [h, l] : live) {
      if (l.port == port) out.insert(l.sig);
    }
    return out;
  }

  std::map<FlowHandle, Live> live;
  std::set<FlowHandle> ever_created;
  std::vector<std::string> validated;
  Pred refuse_validate, refuse_create;
  std::function<bool(FlowHandle)> fail_destroy;
  bool fail_flush = false;
  uint64_t validates = 0, creates = 0, destroys = 0, flushes = 0, bad_destroys = 0;

 private:
  FlowHandle next_ = 0x1000;
};

IpPrefix pfx(const char* s) { return *IpPrefix::parse(s); }
IpAddr ip(const char* s) { return *IpAddr::parse(s); }

FlowPortFacts facts(uint16_t port_id, const char* name) {
  FlowPortFacts f;
  f.port_id = port_id;
  f.name = name;
  f.queues = 4;
  f.rss_hf = 0x38d34;
  f.rss_key = std::vector<uint8_t>(40, 0x6d);
  return f;
}

FlowServiceInput svc(const char* vip, uint16_t port, std::vector<const char*> allowed) {
  FlowServiceInput s;
  s.vip = ip(vip);
  s.port = port;
  for (const char* a : allowed) s.allowed.push_back(pfx(a));
  return s;
}

// Rule sets a sequence of reloads walks through: ranges added and removed, the block list
// growing and shrinking, a service gone, IPv6; the fullnat steering stays.
std::vector<FlowRuleInputs> reload_sets() {
  FlowRuleInputs base;
  base.workers = 4;
  base.fullnat_addresses = {ip("198.51.100.2")};
  std::vector<FlowRuleInputs> sets(5, base);
  sets[0].blocked = {pfx("203.0.113.0/24")};
  sets[0].services = {svc("192.0.2.10", 80, {"10.0.0.0/8", "172.16.0.0/12"})};
  sets[1].blocked = {pfx("203.0.113.0/24"), pfx("2001:db8:bad::/48")};
  sets[1].services = {svc("192.0.2.10", 80, {"10.0.0.0/8"}),  // a range removed
                      svc("2001:db8::10", 443, {"2001:db8:1::/48"})};
  sets[2].services = {svc("192.0.2.10", 80, {})};  // source ranges cleared: no rule
  sets[3].blocked = {pfx("0.0.0.0/0")};
  sets[3].services = {svc("192.0.2.10", 80, {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}),
                      svc("192.0.2.11", 53, {"10.0.0.0/8"})};
  sets[4].fullnat_addresses.push_back(ip("2001:db8::2"));
  return sets;
}

std::multiset<std::string> desired_signatures(const FlowRuleInputs& in, const FlowPortFacts& f) {
  std::multiset<std::string> out;
  for (const FlowRuleSpec& s : desired_rules(in, f)) {
    out.insert(signature(translate_flow_rule(s, f)));
  }
  return out;
}

class FlowRuleManagerTest : public testing::Test {
 protected:
  void SetUp() override {
    m_.add_port(p0_);
    m_.add_port(p1_);
  }
  void expect_in_step(const FlowRuleInputs& in) {
    EXPECT_EQ(api_.live_on(0), desired_signatures(in, p0_));
    EXPECT_EQ(api_.live_on(1), desired_signatures(in, p1_));
    for (const FlowRuleStatus& s : m_.status()) {
      EXPECT_EQ(s.state, FlowRuleState::kInstalled) << flow_rule_match_text(s.spec);
      EXPECT_TRUE(s.handle);
    }
  }

  const FlowPortFacts p0_ = facts(0, "net0"), p1_ = facts(1, "net1");
  RecordingFlowApi api_;
  FlowRuleManager m_{api_};
};

TEST_F(FlowRuleManagerTest, HundredReloadsKeepTheNicEqualToTheDesiredSetAndLeakNothing) {
  const std::vector<FlowRuleInputs> sets = reload_sets();
  // A walk that revisits sets in different orders and repeats some (an unchanged reload).
  for (int i = 0; i < 100; ++i) {
    const size_t k = size_t((i * 7 + i / 5) % int(sets.size()));
    const uint64_t creates = api_.creates, destroys = api_.destroys;
    const auto before0 = api_.live_on(0);
    m_.sync_all(sets[k]);
    SCOPED_TRACE("reload " + std::to_string(i) + " to set " + std::to_string(k));
    expect_in_step(sets[k]);
    // Only the difference was touched: created = new rules, destroyed = gone rules.
    const auto after0 = api_.live_on(0);
    uint64_t added = 0, gone = 0;
    for (const auto& s : after0) added += before0.count(s) == 0;
    for (const auto& s : before0) gone += after0.count(s) == 0;
    EXPECT_EQ(api_.creates - creates, 2 * added);  // the same rules on both ports
    EXPECT_EQ(api_.destroys - destroys, 2 * gone);
    // Every handle ever created is either destroyed or alive and desired.
    for (FlowHandle h : api_.ever_created) {
      if (api_.live.count(h)) {
        EXPECT_EQ(desired_signatures(sets[k], p0_).count(api_.live[h].sig), 1u);
      }
    }
  }
  EXPECT_EQ(api_.bad_destroys, 0u);
  EXPECT_EQ(m_.counters().destroy_failures, 0u);
  m_.flush_all();
  EXPECT_TRUE(api_.live.empty());
  EXPECT_TRUE(m_.status().empty());
  m_.flush_all();  // idempotent, and no flush of ports holding nothing
  EXPECT_TRUE(api_.live.empty());
}

TEST_F(FlowRuleManagerTest, AnUnchangedReloadTouchesNothing) {
  const FlowRuleInputs in = reload_sets()[0];
  m_.sync_all(in);
  const uint64_t v = api_.validates, c = api_.creates, d = api_.destroys;
  m_.sync_all(in);
  EXPECT_EQ(api_.validates, v);
  EXPECT_EQ(api_.creates, c);
  EXPECT_EQ(api_.destroys, d);
}

TEST_F(FlowRuleManagerTest, AReloadThatRemovesARangeRemovesItsRule) {
  FlowRuleInputs in;
  in.services = {svc("192.0.2.10", 80, {"10.0.0.0/8", "172.16.0.0/12"})};
  m_.sync_all(in);
  ASSERT_EQ(api_.live_on(0).size(), 3u);  // two allows, one DROP
  in.services[0].allowed = {pfx("10.0.0.0/8")};
  m_.sync_all(in);
  expect_in_step(in);
  ASSERT_EQ(api_.live_on(0).size(), 2u);
  in.services.clear();
  m_.sync_all(in);
  EXPECT_TRUE(api_.live.empty());
  EXPECT_EQ(m_.counters().removals, 2u * 3u);
}

TEST_F(FlowRuleManagerTest, ARefusedValidateLeavesTheRuleToSoftwareAndIsNotRetried) {
  api_.refuse_validate = [](const RteFlowRule& r) {
    return r.attr.priority == kBlockSourcePriority;  // this NIC takes no block rule
  };
  FlowRuleInputs in = reload_sets()[1];  // two block rules, allows, DROPs, steering
  m_.sync_all(in);
  uint32_t refused = 0;
  for (const FlowRuleStatus& s : m_.status()) {
    if (s.spec.kind == FlowRuleKind::kBlockSource) {
      EXPECT_EQ(s.state, FlowRuleState::kRefused);
      EXPECT_EQ(s.reason, "rte_flow_validate: fake: pattern not supported");
      EXPECT_FALSE(s.handle);
      ++refused;
    } else {
      EXPECT_EQ(s.state, FlowRuleState::kInstalled) << flow_rule_match_text(s.spec);
    }
  }
  EXPECT_EQ(refused, 2u * 2u);
  EXPECT_EQ(m_.counters().refusals[size_t(FlowRuleKind::kBlockSource)], 4u);
  EXPECT_EQ(m_.counters().refusals[size_t(FlowRuleKind::kSourceRange)], 0u);
  EXPECT_TRUE(m_.all_installed(0, FlowRuleKind::kFullnatSteer));
  EXPECT_FALSE(m_.all_installed(0, FlowRuleKind::kBlockSource));
  // The next reloads do not ask the NIC again about the same rules.
  const uint64_t validates = api_.validates;
  for (int i = 0; i < 10; ++i) m_.sync_all(in);
  EXPECT_EQ(api_.validates, validates);
  EXPECT_EQ(m_.counters().refusals[size_t(FlowRuleKind::kBlockSource)], 4u);
  // A changed spec is a new rule: tried once per port.
  in.blocked[0] = pfx("203.0.112.0/23");
  m_.sync_all(in);
  EXPECT_EQ(api_.validates, validates + 2);
  EXPECT_EQ(m_.counters().refusals[size_t(FlowRuleKind::kBlockSource)], 6u);
  EXPECT_EQ(api_.bad_destroys, 0u);
}

TEST_F(FlowRuleManagerTest, ARefusedCreateIsCountedAndTheOthersStayInstalled) {
  api_.refuse_create = [](const RteFlowRule& r) {
    return r.actions[0].type == RTE_FLOW_ACTION_TYPE_QUEUE &&
           r.pattern[2].type == RTE_FLOW_ITEM_TYPE_UDP;
  };
  const FlowRuleInputs in = reload_sets()[0];
  m_.sync_all(in);
  for (const FlowRuleStatus& s : m_.status()) {
    const bool udp_steer = s.spec.kind == FlowRuleKind::kFullnatSteer && s.spec.proto == 17;
    EXPECT_EQ(s.state, udp_steer ? FlowRuleState::kRefused : FlowRuleState::kInstalled);
    if (udp_steer) {
      EXPECT_EQ(s.reason, "rte_flow_create: fake: no room for the rule");
    }
  }
  EXPECT_EQ(m_.counters().refusals[size_t(FlowRuleKind::kFullnatSteer)], 2u * 4u);
  // Some steering rules are missing: the port's replies keep the software steering.
  EXPECT_FALSE(m_.all_installed(0, FlowRuleKind::kFullnatSteer));
  const uint64_t creates = api_.creates;
  m_.sync_all(in);
  EXPECT_EQ(api_.creates, creates);
}

TEST_F(FlowRuleManagerTest, ASourceRangeDropWaitsForAllItsAllowRules) {
  // The NIC refuses the allow rule of one prefix: installing the service's DROP would drop
  // those clients in hardware, so it stays in software too.
  api_.refuse_validate = [](const RteFlowRule& r) {
    return r.actions[0].type == RTE_FLOW_ACTION_TYPE_RSS && r.pattern[1].spec &&
           static_cast<const rte_flow_item_ipv4*>(r.pattern[1].spec)->hdr.src_addr ==
               rte_cpu_to_be_32(0xac100000);  // 172.16.0.0
  };
  FlowRuleInputs in;
  in.services = {svc("192.0.2.10", 80, {"10.0.0.0/8", "172.16.0.0/12"}),
                 svc("192.0.2.11", 53, {"10.0.0.0/8"})};
  m_.sync_all(in);
  for (const FlowRuleStatus& s : m_.status()) {
    if (s.spec.port_id != 0) continue;
    const bool first = s.spec.destination == ip("192.0.2.10");
    const bool refused_allow = first && s.spec.source == pfx("172.16.0.0/12");
    const bool waiting_drop = first && is_source_range_drop(s.spec);
    EXPECT_EQ(s.state, refused_allow || waiting_drop ? FlowRuleState::kRefused
                                                     : FlowRuleState::kInstalled)
        << flow_rule_match_text(s.spec);
    if (waiting_drop) {
      EXPECT_NE(s.reason.find("allow rule not installed"), std::string::npos);
    }
  }
  // 192.0.2.10: only its 10/8 allow is live; 192.0.2.11: allow and DROP.
  EXPECT_EQ(api_.live_on(0).size(), 3u);
  // The refused prefix is removed by a reload: the DROP goes in now.
  in.services[0].allowed = {pfx("10.0.0.0/8")};
  m_.sync_all(in);
  expect_in_step(in);
  // And a new refused prefix takes the installed DROP out again.
  in.services[0].allowed.push_back(pfx("172.16.0.0/12"));
  m_.sync_all(in);
  EXPECT_EQ(api_.live_on(0).size(), 3u);
  for (const FlowRuleStatus& s : m_.status()) {
    if (is_source_range_drop(s.spec) && s.spec.destination == ip("192.0.2.10")) {
      EXPECT_EQ(s.state, FlowRuleState::kRefused);
      EXPECT_FALSE(s.handle);
    }
  }
  EXPECT_EQ(api_.bad_destroys, 0u);
}

TEST_F(FlowRuleManagerTest, ADestroyFailureIsCountedAndTheFlushedPortRefilled) {
  const std::vector<FlowRuleInputs> sets = reload_sets();
  m_.sync_all(sets[0]);
  // The NIC will not destroy the 172.16/12 allow rule that set 1 removes.
  api_.fail_destroy = [this](FlowHandle h) {
    return api_.live[h].sig.find("ac100000") != std::string::npos;
  };
  m_.sync_all(sets[1]);
  EXPECT_EQ(m_.counters().destroy_failures, 2u);  // one per port
  EXPECT_EQ(m_.counters().flushes, 2u);
  expect_in_step(sets[1]);  // flushed and refilled: the removed range's rule is gone
  EXPECT_EQ(api_.bad_destroys, 0u);
}

TEST_F(FlowRuleManagerTest, AFailedFlushKeepsTheRuleStaleUntilItCanBeDestroyed) {
  const std::vector<FlowRuleInputs> sets = reload_sets();
  m_.sync_all(sets[0]);
  api_.fail_destroy = [this](FlowHandle h) {
    return api_.live[h].sig.find("ac100000") != std::string::npos;
  };
  api_.fail_flush = true;
  m_.sync_all(sets[1]);
  uint32_t stale = 0;
  for (const FlowRuleStatus& s : m_.status()) {
    if (s.state != FlowRuleState::kStale) continue;
    ++stale;
    EXPECT_TRUE(s.handle);
    EXPECT_EQ(s.reason, "rte_flow_destroy: fake: device busy");
  }
  EXPECT_EQ(stale, 2u);
  api_.fail_destroy = nullptr;
  api_.fail_flush = false;
  m_.sync_all(sets[1]);
  expect_in_step(sets[1]);
  EXPECT_EQ(m_.status().size(), desired_rules(sets[1], p0_).size() * 2);
  EXPECT_EQ(api_.bad_destroys, 0u);
}

TEST_F(FlowRuleManagerTest, StatusJsonListsRulesLikeFlowList) {
  api_.refuse_validate = [](const RteFlowRule& r) {
    return r.attr.priority == kBlockSourcePriority;
  };
  m_.sync_all(reload_sets()[0]);
  m_.set_port_note(1, "fullnat steering in software: test");
  const nlohmann::json j = flow_rules_json(m_);
  ASSERT_EQ(j["ports"].size(), 2u);
  EXPECT_EQ(j["ports"][0]["port"], "net0");
  EXPECT_EQ(j["ports"][0]["installed"], 3 + 8);
  EXPECT_EQ(j["ports"][0]["refused"], 1);
  EXPECT_EQ(j["ports"][1]["note"], "fullnat steering in software: test");
  const nlohmann::json& r0 = j["rules"][0];
  EXPECT_EQ(r0["port"], "net0");
  EXPECT_EQ(r0["kind"], "block_source");
  EXPECT_EQ(r0["match"], "ipv4 src 203.0.113.0/24");
  EXPECT_EQ(r0["action"], "drop");
  EXPECT_EQ(r0["state"], "refused");
  EXPECT_EQ(r0["reason"], "rte_flow_validate: fake: pattern not supported");
  EXPECT_EQ(r0["handle"], false);
  EXPECT_EQ(j["rules"][1]["state"], "installed");
  EXPECT_EQ(j["rules"][1]["handle"], true);
  EXPECT_EQ(j["counters"]["refusals"]["block_source"], 2);
}

TEST_F(FlowRuleManagerTest, AProbeValidatesWithoutInstalling) {
  FlowRuleSpec s = desired_rules(reload_sets()[0], p0_).back();
  EXPECT_FALSE(m_.probe(0, s).has_value());
  EXPECT_EQ(api_.creates, 0u);
  EXPECT_TRUE(m_.status().empty());
  api_.refuse_validate = [](const RteFlowRule&) { return true; };
  ASSERT_TRUE(m_.probe(0, s).has_value());
  EXPECT_EQ(m_.probe(0, s)->message, "fake: pattern not supported");
}

// ---- start-up steering through the manager ----

std::vector<dp::PortRuntime> runtime_ports() {
  std::vector<dp::PortRuntime> ports(2);
  ports[0].name = "client";
  ports[0].port_id = 0;
  ports[1].name = "backend";
  ports[1].port_id = 1;
  ports[1].index = 1;
  ports[1].addresses = {pfx("198.51.100.1/24")};
  return ports;
}

FlowRuleInputs steering_inputs(uint32_t workers) {
  FlowRuleInputs in;
  in.workers = workers;
  in.fullnat_addresses = {ip("198.51.100.2"), ip("2001:db8::2")};
  return in;
}

TEST(FlowSteeringSetup, AcceptedRulesSteerEveryPort) {
  RecordingFlowApi api;
  FlowRuleManager m(api);
  const auto r = setup_flow_steering(m, runtime_ports(), steering_inputs(4));
  ASSERT_EQ(r.size(), 2u);
  for (const SteeringResult& s : r) {
    EXPECT_TRUE(s.rte_flow) << s.port;
    EXPECT_EQ(s.rules, 2u * 2u * 4u);
    EXPECT_EQ(s.reason, "");
  }
  EXPECT_EQ(api.live.size(), 2u * 16u);
  EXPECT_EQ(m.port_note(1), "");
  teardown_flow_steering(m);
  EXPECT_TRUE(api.live.empty());
}

TEST(FlowSteeringSetup, ARefusalLeavesSoftwareSteeringWithThePmdReason) {
  RecordingFlowApi api;
  api.refuse_create = [](const RteFlowRule& r) {
    return r.pattern[1].type == RTE_FLOW_ITEM_TYPE_IPV6;  // IPv6 steering not taken
  };
  FlowRuleManager m(api);
  const auto r = setup_flow_steering(m, runtime_ports(), steering_inputs(2));
  for (const SteeringResult& s : r) {
    EXPECT_FALSE(s.rte_flow);  // replies to the IPv6 address would not be steered
    EXPECT_EQ(s.rules, 4u);   // the IPv4 rules stay: they agree with the software choice
    EXPECT_EQ(s.reason, "rte_flow_create: fake: no room for the rule");
  }
  EXPECT_EQ(m.port_note(0),
            "fullnat steering in software: rte_flow_create: fake: no room for the rule");
}

TEST(FlowSteeringSetup, NothingToSteerStillProbesAndSaysWhy) {
  struct Row {
    uint32_t workers;
    bool nic_refuses;
    const char* reason;
  };
  const Row rows[] = {
      {3, false, "worker count is not a power of two: a port mask cannot express the owner"},
      {1, false, "one worker: nothing to steer"},
      {2, true, "rte_flow_validate: fake: pattern not supported"},  // the NIC's answer first
  };
  for (const Row& row : rows) {
    RecordingFlowApi api;
    if (row.nic_refuses) api.refuse_validate = [](const RteFlowRule&) { return true; };
    FlowRuleManager m(api);
    FlowRuleInputs in = steering_inputs(row.workers);
    if (row.nic_refuses) in.fullnat_addresses.clear();
    const auto r = setup_flow_steering(m, runtime_ports(), in);
    for (const SteeringResult& s : r) {
      EXPECT_FALSE(s.rte_flow);
      EXPECT_EQ(s.reason, row.reason);
    }
    EXPECT_EQ(api.validates, 2u);  // one probe per port
    EXPECT_EQ(api.creates, 0u);
    EXPECT_TRUE(m.status().empty());
  }
}

// The rules a config asks for, from the config keys: the block list on every port, each
// service's source ranges at its VIP and its NodePort addresses; a reload without the ranges
// removes exactly their rules.
TEST(FlowRuleInputsFromConfig, BlockListAndSourceRangesFollowAReload) {
  const std::string head = R"([[port]]
name = "client"
device = "net_null0"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_null1"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
[[deny]]
source = "203.0.113.0/28"
[[deny]]
source = "2001:db8:bad::/48"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
node_port = 30080
)";
  const std::string backend = R"(  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)";
  auto with = parse_config(head + "source_ranges = [\"192.0.2.0/24\", \"2001:db8:5::/48\"]\n" +
                               backend, "with.toml");
  auto without = parse_config(head + backend, "without.toml");
  ASSERT_TRUE(with) << with.error().str();
  ASSERT_TRUE(without) << without.error().str();

  const FlowRuleInputs in = flow_rule_inputs(*with, 1);
  EXPECT_EQ(in.blocked.size(), 2u);
  // The VIP, then the NodePort at each IPv4 port address (the VIP's family).
  ASSERT_EQ(in.services.size(), 3u);
  EXPECT_EQ(in.services[0].vip, ip("203.0.113.10"));
  EXPECT_EQ(in.services[0].port, 80);
  EXPECT_EQ(in.services[1].vip, ip("192.0.2.1"));
  EXPECT_EQ(in.services[1].port, 30080);
  EXPECT_EQ(in.services[2].vip, ip("198.51.100.1"));
  EXPECT_EQ(in.services[2].allowed.size(), 2u);

  RecordingFlowApi api;
  FlowRuleManager m(api);
  setup_flow_steering(m, runtime_ports(), in);
  auto count = [&m](FlowRuleKind k) {
    size_t n = 0;
    for (const FlowRuleStatus& st : m.status()) n += st.spec.kind == k;
    return n;
  };
  // Per port: 2 block rules; per service entry one IPv4 allow (the IPv6 range cannot match an
  // IPv4 VIP) and its DROP.
  EXPECT_EQ(count(FlowRuleKind::kBlockSource), 2u * 2u);
  EXPECT_EQ(count(FlowRuleKind::kSourceRange), 2u * 3u * 2u);
  EXPECT_EQ(api.live.size(), 2u * 2u + 2u * 3u * 2u);

  m.sync_all(flow_rule_inputs(*without, 1));
  EXPECT_EQ(count(FlowRuleKind::kSourceRange), 0u);
  EXPECT_EQ(count(FlowRuleKind::kBlockSource), 2u * 2u);
  EXPECT_EQ(api.live.size(), 2u * 2u);
  EXPECT_EQ(api.bad_destroys, 0u);
  teardown_flow_steering(m);
  EXPECT_TRUE(api.live.empty());
}

}  // namespace
}  // namespace meshgate::ctl
