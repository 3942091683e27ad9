// The service stage's decision (dp::decide_flow) as a table: for a packet, its flow in the
// table (or none), the drain state and whether the worker runs a TCP stack, what the stage
// does: forward or reverse by the flow, start a flow to the backend Maglev picks, hand the
// packet on (miss, stack) or drop it with its reason. Pure: no worker, no NIC; the snapshot
// comes from an inline config.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

}  // namespace
}  // namespace meshgate
