// Flow-end records of packet-mode flows ([access_log] flows = true) through the real worker
// (DataplaneHarness): a flow that expires, one closed by FINs, one reset, one evicted from a
// full table; none without the opt-in.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/accesslog/access_record.h"
#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using dp::AccessEnd;
using dp::AccessKind;
using dp::AccessRecord;
using test::A;
using test::DataplaneHarness;
using test::HarnessOptions;
using test::kDemoTopology;
using test::kSec;
using test::kT0;
using test::tcp_frame;
using test::udp_frame;

std::vector<AccessRecord> drain(dp::AccessRing& ring) {
  std::vector<AccessRecord> out;
  while (const AccessRecord* r = ring.front()) {
    out.push_back(*r);
    ring.pop();
  }
  return out;
}

// Lets the conntrack sweep visit every slot at time `t`.
void sweep(DataplaneHarness& h, uint64_t t) {
  for (int i = 0; i < 200; ++i) h.tick(t);
}

// A harness whose worker writes flow-end records (`flows`) into `ring`.
HarnessOptions logging(dp::AccessRing* ring, bool flows = true) {
  HarnessOptions opt;
  opt.access_log = ring;
  opt.access_log_flows = flows;
  return opt;
}

// A TCP flow from `client`:`port` to the web VIP through its handshake; its backend.
std::string open_tcp(DataplaneHarness& h, const char* client, uint16_t port) {
  const auto syn = h.send(tcp_frame(client, port, "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  EXPECT_EQ(syn.size(), 1u);
  if (syn.empty()) return "";
  const std::string backend = pkt::decode(syn[0]).dst.str();
  h.send(tcp_frame(backend.c_str(), 8080, client, port, pkt::kTcpSyn | pkt::kTcpAck), kT0 + 1);
  h.send(tcp_frame(client, port, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 2);
  return backend;
}

const std::string kShortTimeouts =
    std::string(kDemoTopology) + "\n[conntrack]\nudp = 5\ntcp_fin = 2\ntcp_time_wait = 2\n";

TEST(AccessLogFlows, ExpiredUdpFlowWritesOneRecordWithItsTupleAndService) {
  dp::AccessRing ring(64);
  DataplaneHarness h(kShortTimeouts, logging(&ring));
  const auto out = h.send(udp_frame("192.0.2.40", 4000, "203.0.113.10", 53), kT0);
  ASSERT_EQ(out.size(), 1u);
  const std::string backend = pkt::decode(out[0]).dst.str();
  h.tick(kT0 + 2 * kSec);
  EXPECT_TRUE(drain(ring).empty()) << "nothing before the flow ends";
  sweep(h, kT0 + 6 * kSec);
  const std::vector<AccessRecord> recs = drain(ring);
  ASSERT_EQ(recs.size(), 1u);
  const AccessRecord& r = recs[0];
  EXPECT_EQ(r.kind, AccessKind::kFlow);
  EXPECT_EQ(r.end, AccessEnd::kIdleTimeout);
  EXPECT_EQ(r.proto, 17);
  EXPECT_EQ(r.mode, uint8_t(dp::Mode::kDnat));
  EXPECT_EQ(r.tuple.client, A("192.0.2.40"));
  EXPECT_EQ(r.tuple.client_port, 4000);
  EXPECT_EQ(r.tuple.vip, A("203.0.113.10"));
  EXPECT_EQ(r.tuple.vip_port, 53);
  EXPECT_EQ(r.tuple.backend.str(), backend);
  EXPECT_EQ(r.tuple.backend_port, 5353);
  EXPECT_STREQ(r.names.service, "dns");
  // The flow lived from kT0 until the sweep that found it expired (5 s timeout, swept at 6 s).
  EXPECT_GE(r.duration_ms, 5000u);
  EXPECT_LE(r.duration_ms, 6000u);
  EXPECT_EQ(r.worker, 0);
}

TEST(AccessLogFlows, TcpFlowClosedByTheClientsFinFirstIsClientFin) {
  dp::AccessRing ring(64);
  DataplaneHarness h(kShortTimeouts, logging(&ring));
  const std::string backend = open_tcp(h, "192.0.2.41", 5000);
  ASSERT_FALSE(backend.empty());
  const char* be = backend.c_str();
  h.send(tcp_frame("192.0.2.41", 5000, "203.0.113.10", 80, pkt::kTcpFin | pkt::kTcpAck), kT0 + 3);
  h.send(tcp_frame(be, 8080, "192.0.2.41", 5000, pkt::kTcpFin | pkt::kTcpAck), kT0 + 4);
  h.send(tcp_frame("192.0.2.41", 5000, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 5);
  sweep(h, kT0 + 10 * kSec);
  const std::vector<AccessRecord> recs = drain(ring);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].end, AccessEnd::kClientFin);
  EXPECT_EQ(recs[0].proto, 6);
  EXPECT_STREQ(recs[0].names.service, "web");
}

TEST(AccessLogFlows, ResetTcpFlowIsReset) {
  dp::AccessRing ring(64);
  DataplaneHarness h(kShortTimeouts, logging(&ring));
  const std::string backend = open_tcp(h, "192.0.2.42", 5001);
  ASSERT_FALSE(backend.empty());
  h.send(tcp_frame(backend.c_str(), 8080, "192.0.2.42", 5001, pkt::kTcpRst), kT0 + 3);
  sweep(h, kT0 + 200 * kSec);
  const std::vector<AccessRecord> recs = drain(ring);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].end, AccessEnd::kFlowReset);
}

TEST(AccessLogFlows, EvictedHalfOpenFlowsSayEvicted) {
  dp::AccessRing ring(4096);
  HarnessOptions opt = logging(&ring);
  opt.max_flows = 1024;
  DataplaneHarness h(kDemoTopology, opt);
  for (int i = 0; i < 1100; ++i) {
    const std::string client = "192.0.2." + std::to_string(1 + i % 250);
    h.send(tcp_frame(client.c_str(), uint16_t(20000 + i), "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  }
  const std::vector<AccessRecord> recs = drain(ring);
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs.size(), h.worker().flows().stats().evicted);
  for (const AccessRecord& r : recs) EXPECT_EQ(r.end, AccessEnd::kFlowEvicted);
}

TEST(AccessLogFlows, WithoutTheOptInFlowsWriteNothing) {
  dp::AccessRing ring(64);
  DataplaneHarness h(kShortTimeouts, logging(&ring, false));
  ASSERT_EQ(h.send(udp_frame("192.0.2.40", 4000, "203.0.113.10", 53), kT0).size(), 1u);
  sweep(h, kT0 + 6 * kSec);
  EXPECT_EQ(h.worker().flows().active(), 0u);
  EXPECT_TRUE(drain(ring).empty());
}

}  // namespace
}  // namespace meshgate
