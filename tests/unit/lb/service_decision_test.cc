// The service stage's decision (dp::decide_flow) as a table: for a packet, its flow in the
// table (or none), the drain state and whether the worker runs a TCP stack, what the stage
// does: forward or reverse by the flow, start a flow to the backend Maglev picks, hand the
// packet on (miss, stack) or drop it with its reason. Pure: no worker, no NIC; the snapshot
// comes from an inline config.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "control/snapshot/builder.h"
#include "control/snapshot/model.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/lb/service_stage.h"
#include "dataplane/packet/parse.h"
#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"

namespace meshgate {
namespace {

using dp::Drop;
using dp::FlowAction;
using dp::FlowDir;
using test::tcp_frame;
using test::udp_frame;

std::string config() {
  return std::string(test::kDemoTopology) + R"(
[fullnat]
local_addresses = ["198.51.100.2"]
[proxy]
memory_mb = 8
[[service]]
name = "px"
vip = "203.0.113.20"
port = 80
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "pxr"
vip = "203.0.113.21"
port = 80
mode = "proxy"
source_ranges = ["192.0.2.0/25"]
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "ranged"
vip = "203.0.113.30"
port = 80
source_ranges = ["192.0.2.0/25", "2001:db8:2::/48"]
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "ranged_udp"
vip = "203.0.113.30"
port = 80
protocol = "udp"
source_ranges = ["192.0.2.0/25"]
  [[service.backend]]
  address = "198.51.100.11"
  port = 5353
[[service]]
name = "ranged6"
vip = "2001:db8:100::30"
port = 80
source_ranges = ["192.0.2.0/25", "2001:db8:2::/48"]
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
[[service]]
name = "sticky"
vip = "203.0.113.31"
port = 80
session_affinity = "client_ip"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
  [[service.backend]]
  address = "198.51.100.13"
  port = 8080
[[service]]
name = "drained"
vip = "203.0.113.32"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  weight = 0
)";
}

enum class Hit { kNone, kOriginal, kReply };

struct Row {
  const char* description;
  pkt::Bytes frame;
  Hit hit = Hit::kNone;
  bool draining = false;
  bool stack = true;
  FlowAction action;
  Drop drop = Drop::kNone;
  const char* service = nullptr;  // kNewFlow: the service whose Maglev pick is expected
};

TEST(ServiceDecision, TableOfPacketsFlowsAndStates) {
  test::DataplaneHarness h(config());
  const dp::Snapshot& snap = *h.snapshot();
  const uint8_t syn = pkt::kTcpSyn, ack = pkt::kTcpAck;
  const std::vector<Row> rows = {
      {"established client packet follows its flow",
       tcp_frame("192.0.2.7", 40000, "203.0.113.10", 80, ack), Hit::kOriginal, false, true,
       FlowAction::kForward},
      {"backend reply is reversed by its flow",
       tcp_frame("198.51.100.11", 8080, "192.0.2.7", 40000, ack), Hit::kReply, false, true,
       FlowAction::kReverse},
      {"a SYN on a live flow keeps the flow",
       tcp_frame("192.0.2.7", 40000, "203.0.113.10", 80, syn), Hit::kOriginal, false, true,
       FlowAction::kForward},
      {"draining keeps existing flows", tcp_frame("192.0.2.7", 40000, "203.0.113.10", 80, ack),
       Hit::kOriginal, true, true, FlowAction::kForward},
      {"TTL 1 on a flow: time exceeded", tcp_frame("192.0.2.7", 40000, "203.0.113.10", 80, ack, 1),
       Hit::kOriginal, false, true, FlowAction::kTtlExceeded},
      {"SYN to a dnat VIP starts a flow", tcp_frame("192.0.2.7", 40001, "203.0.113.10", 80, syn),
       Hit::kNone, false, true, FlowAction::kNewFlow, Drop::kNone, "web"},
      {"UDP to a dnat VIP starts a flow", udp_frame("192.0.2.7", 5000, "203.0.113.10", 53),
       Hit::kNone, false, true, FlowAction::kNewFlow, Drop::kNone, "dns"},
      {"a mid-stream ACK without a flow starts one too (pickup)",
       tcp_frame("192.0.2.8", 40002, "203.0.113.10", 80, ack), Hit::kNone, false, true,
       FlowAction::kNewFlow, Drop::kNone, "web"},
      {"draining refuses new flows", tcp_frame("192.0.2.7", 40003, "203.0.113.10", 80, syn),
       Hit::kNone, true, true, FlowAction::kDrop, Drop::kDraining},
      {"TTL 1 to a VIP: time exceeded", tcp_frame("192.0.2.7", 40004, "203.0.113.10", 80, syn, 1),
       Hit::kNone, false, true, FlowAction::kTtlExceeded},
      {"no service on that port: a miss", tcp_frame("192.0.2.7", 40005, "203.0.113.10", 81, syn),
       Hit::kNone, false, true, FlowAction::kMiss},
      {"a reply without a flow: a miss (another worker's, or stateless)",
       tcp_frame("198.51.100.11", 8080, "192.0.2.7", 40006, ack), Hit::kNone, false, true,
       FlowAction::kMiss},
      {"proxy service: to the TCP stack", tcp_frame("192.0.2.7", 40008, "203.0.113.20", 80, syn),
       Hit::kNone, false, true, FlowAction::kStack},
      {"proxy service on a worker without a stack",
       tcp_frame("192.0.2.7", 40009, "203.0.113.20", 80, syn), Hit::kNone, false, false,
       FlowAction::kDrop, Drop::kL4Unsupported},
      {"source is a gateway address", tcp_frame("203.0.113.10", 40010, "203.0.113.10", 80, syn),
       Hit::kNone, false, true, FlowAction::kDrop, Drop::kSourceIsLocal},
      {"source is a subnet broadcast", tcp_frame("198.51.100.255", 40011, "203.0.113.10", 80, syn),
       Hit::kNone, false, true, FlowAction::kDrop, Drop::kSourceIsBroadcast},
      {"destination is a directed broadcast", udp_frame("192.0.2.7", 5001, "198.51.100.255", 53),
       Hit::kNone, false, true, FlowAction::kDrop, Drop::kDestinationNotUnicast},
      {"destination is loopback", udp_frame("192.0.2.7", 5002, "127.0.0.1", 53), Hit::kNone, false,
       true, FlowAction::kDrop, Drop::kMartianDestination},
      {"source inside the service's source_ranges starts a flow",
       tcp_frame("192.0.2.7", 40013, "203.0.113.30", 80, syn), Hit::kNone, false, true,
       FlowAction::kNewFlow, Drop::kNone, "ranged"},
      {"source outside the service's source_ranges is denied",
       tcp_frame("192.0.2.200", 40014, "203.0.113.30", 80, syn), Hit::kNone, false, true,
       FlowAction::kDrop, Drop::kSourceDenied},
      {"UDP from outside the source_ranges is denied too",
       udp_frame("192.0.2.200", 5003, "203.0.113.30", 80), Hit::kNone, false, true,
       FlowAction::kDrop, Drop::kSourceDenied},
      {"IPv6 source outside the source_ranges is denied",
       tcp_frame("2001:db8:3::7", 40015, "2001:db8:100::30", 80, syn), Hit::kNone, false, true,
       FlowAction::kDrop, Drop::kSourceDenied},
      {"IPv6 source inside the source_ranges starts a flow",
       tcp_frame("2001:db8:2::7", 40016, "2001:db8:100::30", 80, syn), Hit::kNone, false, true,
       FlowAction::kNewFlow, Drop::kNone, "ranged6"},
      {"a flow from outside the ranges (older than them) keeps going",
       tcp_frame("192.0.2.200", 40017, "203.0.113.30", 80, ack), Hit::kOriginal, false, true,
       FlowAction::kForward},
      {"proxy service: a source outside its ranges is denied before the stack",
       tcp_frame("192.0.2.200", 40018, "203.0.113.21", 80, syn), Hit::kNone, false, true,
       FlowAction::kDrop, Drop::kSourceDenied},
      {"proxy service: a source inside its ranges goes to the stack",
       tcp_frame("192.0.2.7", 40019, "203.0.113.21", 80, syn), Hit::kNone, false, true,
       FlowAction::kStack},
      {"session affinity: the client address picks (port 40020)",
       tcp_frame("192.0.2.7", 40020, "203.0.113.31", 80, syn), Hit::kNone, false, true,
       FlowAction::kNewFlow, Drop::kNone, "sticky"},
      {"session affinity: the client address picks (port 51234)",
       tcp_frame("192.0.2.7", 51234, "203.0.113.31", 80, syn), Hit::kNone, false, true,
       FlowAction::kNewFlow, Drop::kNone, "sticky"},
      {"every backend drained (weight 0): no_backend",
       tcp_frame("192.0.2.7", 40021, "203.0.113.32", 80, syn), Hit::kNone, false, true,
       FlowAction::kDrop, Drop::kNoBackend},
      {"IPv6 SYN to a VIP starts a flow",
       tcp_frame("2001:db8:2::7", 40012, "2001:db8:100::10", 80, syn), Hit::kNone, false, true,
       FlowAction::kNewFlow, Drop::kNone, "web6"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.description);
    dp::PacketMeta m;
    ASSERT_EQ(dp::parse_packet(r.frame.data(), uint32_t(r.frame.size()), &m, true), Drop::kNone);
    const uint32_t hash =
        dp::FlowTable::hash(dp::Tuple{m.src, m.dst, m.sport, m.dport, m.l4_proto});
    dp::Flow flow{};
    flow.stat_id = 1;
    dp::FlowHit hit;
    if (r.hit != Hit::kNone) {
      hit.flow = &flow;
      hit.dir = r.hit == Hit::kReply ? FlowDir::kReply : FlowDir::kOriginal;
    }
    const dp::FlowVerdict v = dp::decide_flow(snap, m, hash, hit, r.draining, r.stack);
    EXPECT_EQ(int(v.action), int(r.action));
    EXPECT_EQ(dp::drop_name(v.drop), dp::drop_name(r.drop));
    if (r.action != FlowAction::kNewFlow) continue;
    ASSERT_NE(v.service, nullptr);
    ASSERT_NE(v.backend, nullptr);
    const std::string want = test::expected_backend(h.config(), r.service, m.src.str().c_str(),
                                                    ntohs(m.sport));
    EXPECT_EQ(v.backend->address.str() + ":" + std::to_string(ntohs(v.backend->port_be)), want);
  }
}

dp::FlowVerdict decide_new(const dp::Snapshot& snap, const pkt::Bytes& frame) {
  dp::PacketMeta m;
  EXPECT_EQ(dp::parse_packet(frame.data(), uint32_t(frame.size()), &m, true), Drop::kNone);
  const uint32_t hash =
      dp::FlowTable::hash(dp::Tuple{m.src, m.dst, m.sport, m.dport, m.l4_proto});
  return dp::decide_flow(snap, m, hash, dp::FlowHit{}, false, true);
}

TEST(ServiceDecision, SessionAffinityPicksByClientAddressAloneWhereTheTupleWouldSpread) {
  test::DataplaneHarness h(config());
  const dp::Snapshot& snap = *h.snapshot();
  std::set<const dp::SnapBackend*> sticky, spread;
  for (uint16_t port = 20000; port < 20200; ++port) {
    const dp::FlowVerdict a = decide_new(snap, tcp_frame("192.0.2.9", port, "203.0.113.31", 80,
                                                         pkt::kTcpSyn));
    ASSERT_EQ(int(a.action), int(FlowAction::kNewFlow));
    sticky.insert(a.backend);
    const dp::FlowVerdict b = decide_new(snap, tcp_frame("192.0.2.9", port, "203.0.113.10", 80,
                                                         pkt::kTcpSyn));
    spread.insert(b.backend);
  }
  EXPECT_EQ(sticky.size(), 1u) << "200 source ports of one client: one backend";
  EXPECT_EQ(spread.size(), 3u) << "without affinity the same ports reach every backend";
  // Other clients are spread over the backends.
  std::set<const dp::SnapBackend*> clients;
  for (int i = 1; i < 60; ++i) {
    const std::string src = "192.0.2." + std::to_string(i);
    clients.insert(decide_new(snap, tcp_frame(src.c_str(), 1000, "203.0.113.31", 80,
                                              pkt::kTcpSyn)).backend);
  }
  EXPECT_EQ(clients.size(), 3u);
}

TEST(ServiceDecision, EveryBackendUnhealthyDropsAsNoHealthyBackend) {
  test::init_eal_once();
  auto cfg = ctl::parse_config(config(), "test.toml");
  ASSERT_TRUE(cfg) << cfg.error().str();
  std::vector<ctl::ServiceSpec> specs = ctl::services_from_config(cfg.value());
  for (ctl::ServiceSpec& sp : specs) {
    if (sp.name == "web") {
      for (auto& e : sp.endpoints) e.healthy = false;
    }
    if (sp.name == "ranged") sp.endpoints[0].healthy = false;
    if (sp.name == "dns") sp.endpoints[0].healthy = false;  // 198.51.100.11:5353
  }
  std::vector<dp::PortRuntime> ports(1);
  ports[0].name = "net0";
  ports[0].addresses = cfg.value().ports[0].addresses;
  ctl::Registries reg;
  auto built = ctl::build_snapshot(cfg.value(), specs, ports, reg, 1);
  ASSERT_TRUE(built) << built.error().message;
  std::unique_ptr<dp::Snapshot, void (*)(dp::Snapshot*)> snap(*built, dp::snapshot_free);
  const dp::FlowVerdict all_down =
      decide_new(*snap, tcp_frame("192.0.2.7", 40000, "203.0.113.10", 80, pkt::kTcpSyn));
  EXPECT_EQ(int(all_down.action), int(FlowAction::kDrop));
  EXPECT_EQ(dp::drop_name(all_down.drop), dp::drop_name(Drop::kNoHealthyBackend));
  // One of two down: the other takes every new flow.
  for (uint16_t port = 1000; port < 1100; ++port) {
    const dp::FlowVerdict v =
        decide_new(*snap, tcp_frame("192.0.2.7", port, "203.0.113.30", 80, pkt::kTcpSyn));
    ASSERT_EQ(int(v.action), int(FlowAction::kNewFlow));
    EXPECT_EQ(v.backend->address.str(), "198.51.100.12");
  }
  // Flows of an unhealthy backend: a UDP client packet moves to a live backend in the same
  // step; TCP keeps its backend (on_backend_removal = "keep"); a reply is translated as ever.
  const dp::SnapService* dns = snap->find_service(test::A("203.0.113.10"), htons(53), 17);
  ASSERT_NE(dns, nullptr);
  const dp::SnapBackend& down = snap->backends[dns->first_backend];
  ASSERT_FALSE(down.healthy);
  EXPECT_TRUE(snap->stale_backend(down.stat_id));
  EXPECT_FALSE(snap->stale_backend(snap->backends[dns->first_backend + 1].stat_id));
  auto decide_hit = [&](const pkt::Bytes& frame, uint8_t proto, FlowDir dir, uint32_t stat_id) {
    dp::PacketMeta m;
    EXPECT_EQ(dp::parse_packet(frame.data(), uint32_t(frame.size()), &m, true), Drop::kNone);
    dp::Flow flow{};
    flow.proto = proto;
    flow.stat_id = stat_id;
    const uint32_t hash =
        dp::FlowTable::hash(dp::Tuple{m.src, m.dst, m.sport, m.dport, m.l4_proto});
    return dp::decide_flow(*snap, m, hash, dp::FlowHit{&flow, dir}, false, true);
  };
  const dp::FlowVerdict moved = decide_hit(udp_frame("192.0.2.7", 5000, "203.0.113.10", 53),
                                           17, FlowDir::kOriginal, down.stat_id);
  EXPECT_EQ(int(moved.action), int(FlowAction::kMoveFlow));
  ASSERT_NE(moved.backend, nullptr);
  EXPECT_EQ(moved.backend->address.str(), "198.51.100.12");
  EXPECT_EQ(moved.service, dns);
  const dp::FlowVerdict live = decide_hit(udp_frame("192.0.2.7", 5000, "203.0.113.10", 53), 17,
                                          FlowDir::kOriginal,
                                          snap->backends[dns->first_backend + 1].stat_id);
  EXPECT_EQ(int(live.action), int(FlowAction::kForward)) << "a live backend's flow stays";
  const dp::FlowVerdict reply = decide_hit(udp_frame("198.51.100.11", 5353, "192.0.2.7", 5000),
                                           17, FlowDir::kReply, down.stat_id);
  EXPECT_EQ(int(reply.action), int(FlowAction::kReverse));
  const dp::SnapService* web = snap->find_service(test::A("203.0.113.10"), htons(80), 6);
  const dp::FlowVerdict tcp =
      decide_hit(tcp_frame("192.0.2.7", 40000, "203.0.113.10", 80, pkt::kTcpAck), 6,
                 FlowDir::kOriginal, snap->backends[web->first_backend].stat_id);
  EXPECT_EQ(int(tcp.action), int(FlowAction::kForward)) << "TCP keeps its backend";
}

}  // namespace
}  // namespace meshgate
