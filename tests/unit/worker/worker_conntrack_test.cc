// Connection tracking as the worker applies it, through the real burst functions: state in wire
// order within a burst, a full table (eviction of half-open and unassured flows, stateless
// forwarding in both directions), and the table's soundness after all of it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using dp::Drop;
using dp::TcpState;
using pkt::Bytes;
using test::DataplaneHarness;
using test::expected_backend;
using test::kDemoTopology;
using test::kGw;
using test::kSec;
using test::kT0;
using test::M;
using test::tcp_frame;

const std::map<std::string, MacAddr> kBackendMac = {{"198.51.100.11", M("02:00:00:00:01:11")},
                                                    {"198.51.100.12", M("02:00:00:00:01:12")},
                                                    {"198.51.100.13", M("02:00:00:00:01:13")}};

std::string client_of(int i) { return "192.0.2." + std::to_string(1 + i % 250); }
uint16_t port_of(int i) { return uint16_t(20000 + i); }

Bytes client_segment(int i, uint8_t flags) {
  return tcp_frame(client_of(i).c_str(), port_of(i), "203.0.113.10", 80, flags);
}

// The backend's segment of client i's connection (to the client, as dnat's backend sees it).
Bytes backend_segment(const DataplaneHarness& h, int i, uint8_t flags) {
  const std::string be = expected_backend(h.config(), "web", client_of(i).c_str(), port_of(i));
  const std::string ip = be.substr(0, be.find(':'));
  return tcp_frame(ip.c_str(), 8080, client_of(i).c_str(), port_of(i), flags, 64,
                   pkt::EthHdr{kGw, kBackendMac.at(ip)});
}

const dp::Flow* flow_of(const DataplaneHarness& h, int i, uint32_t now_ms) {
  const auto& ft = const_cast<DataplaneHarness&>(h).worker().flows();
  for (uint32_t idx = 0; idx < ft.capacity(); ++idx) {
    const dp::Flow* f = ft.at(idx);
    if (f && f->client() == test::A(client_of(i).c_str()) && ntohs(f->client_port) == port_of(i) &&
        int32_t(f->expire_ms - now_ms) > 0) {
      return f;
    }
  }
  return nullptr;
}

uint32_t ms_of(uint64_t ts_ns) { return uint32_t(ts_ns / 1000000); }

TEST(WorkerConntrack, an_ack_in_the_same_burst_as_its_syn_ack_establishes_the_flow) {
  DataplaneHarness h(kDemoTopology);
  ASSERT_EQ(h.send(client_segment(0, pkt::kTcpSyn), kT0).size(), 1u);
  const auto out = h.send({backend_segment(h, 0, pkt::kTcpSyn | pkt::kTcpAck),
                           client_segment(0, pkt::kTcpAck)},
                          kT0 + 1000);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(pkt::decode(out[0]).src.str(), "203.0.113.10");
  const dp::Flow* f = flow_of(h, 0, ms_of(kT0));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->state, TcpState::kEstablished);
  EXPECT_EQ(h.worker().flows().established(), 1u);
}

TEST(WorkerConntrack, a_reply_in_a_burst_whose_later_syn_evicts_its_flow_leaves_the_table_sound) {
  constexpr int kFlows = 8;
  DataplaneHarness h(kDemoTopology, kFlows);
  // Eight IPv4 flows fill the table, one per slot; the odd ones complete their handshake, so
  // only the even ones (each with an odd, assured line-mate) may be evicted. The eviction ring
  // (half as many entries as slots) remembers the newest four: flows 4 to 7.
  for (int i = 0; i < kFlows; ++i) {
    ASSERT_EQ(h.send(client_segment(i, pkt::kTcpSyn), kT0).size(), 1u);
    if (i % 2) {
      ASSERT_EQ(h.send(backend_segment(h, i, pkt::kTcpSyn | pkt::kTcpAck), kT0).size(), 1u);
      ASSERT_EQ(h.send(client_segment(i, pkt::kTcpAck), kT0).size(), 1u);
    }
  }
  ASSERT_EQ(h.worker().flows().active(), uint32_t(kFlows));
  // Flow 4's SYN-ACK, then an IPv6 SYN: it evicts flows 4 and 6 and still finds no free
  // line, so it goes statelessly and both slots stay free.
  const auto out = h.send({backend_segment(h, 4, pkt::kTcpSyn | pkt::kTcpAck),
                           tcp_frame("2001:db8:2::5", 4444, "2001:db8:100::10", 80, pkt::kTcpSyn)},
                          kT0 + 1000);
  ASSERT_EQ(out.size(), 2u);
  const auto r = pkt::decode(out[0]);
  EXPECT_EQ(r.src.str(), "203.0.113.10");
  EXPECT_EQ(r.sport, 80);
  EXPECT_EQ(r.dst.str(), client_of(4));
  EXPECT_EQ(h.worker().flows().stats().evicted, 2u);
  EXPECT_EQ(h.counters().stateless_packets, 1u);
  const char* bad = h.worker().flows().audit(ms_of(kT0 + 1000));
  EXPECT_EQ(bad, nullptr) << bad;
  // Churn on: every new flow still gets a slot of its own.
  for (int round = 0; round < 8; ++round) {
    std::vector<Bytes> syns;
    for (int i = 0; i < 16; ++i) syns.push_back(client_segment(100 + round * 16 + i, pkt::kTcpSyn));
    ASSERT_EQ(h.send(syns, kT0 + 2000 + uint64_t(round)).size(), syns.size());
    bad = h.worker().flows().audit(ms_of(kT0 + 2000));
    ASSERT_EQ(bad, nullptr) << bad;
  }
  EXPECT_EQ(h.worker().flows().active(), uint32_t(kFlows));
  EXPECT_EQ(h.drops_total(), 0u);
  EXPECT_TRUE(h.balanced());
}

TEST(WorkerConntrack, mid_stream_pickups_cannot_squat_the_table_and_new_connections_complete) {
  constexpr int kFlows = 1024;
  DataplaneHarness h(kDemoTopology, kFlows);
  // ACK-only packets of 1,100 distinct tuples: each is picked up (unassured) and forwarded to
  // its Maglev backend; past capacity the oldest pickups make room.
  for (int i = 0; i < 1100; ++i) {
    const auto out = h.send(client_segment(i, pkt::kTcpAck), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    EXPECT_EQ(d.dst.str() + ":" + std::to_string(d.dport),
              expected_backend(h.config(), "web", client_of(i).c_str(), port_of(i)));
  }
  EXPECT_EQ(h.worker().flows().active(), uint32_t(kFlows));
  EXPECT_EQ(h.counters().flows_created, 1100u);
  EXPECT_EQ(h.worker().flows().stats().evicted, 1100u - kFlows);
  EXPECT_EQ(h.counters().stateless_packets, 0u);
  // A new connection gets a flow and its handshake completes both ways.
  constexpr int kNew = 5000;
  ASSERT_EQ(h.send(client_segment(kNew, pkt::kTcpSyn), kT0 + kSec).size(), 1u);
  const auto synack = h.send(backend_segment(h, kNew, pkt::kTcpSyn | pkt::kTcpAck), kT0 + kSec);
  ASSERT_EQ(synack.size(), 1u);
  EXPECT_EQ(pkt::decode(synack[0]).src.str(), "203.0.113.10");
  ASSERT_EQ(h.send(client_segment(kNew, pkt::kTcpAck), kT0 + kSec).size(), 1u);
  const dp::Flow* f = flow_of(h, kNew, ms_of(kT0 + kSec));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->state, TcpState::kEstablished);
  // A pickup whose backend answers is assured; one that only ever talked is not.
  const int answered = 1099;
  ASSERT_EQ(h.send(backend_segment(h, answered, pkt::kTcpAck), kT0 + kSec).size(), 1u);
  // Unassured flows live as long as a handshake (tcp_syn, 30 s by default).
  for (int t = 0; t < 300; ++t) h.tick(kT0 + 32 * kSec + uint64_t(t));
  EXPECT_EQ(h.worker().flows().active(), 2u);
  EXPECT_NE(flow_of(h, kNew, ms_of(kT0 + 32 * kSec)), nullptr);
  EXPECT_NE(flow_of(h, answered, ms_of(kT0 + 32 * kSec)), nullptr);
  EXPECT_EQ(h.drops_total(), 0u);
  EXPECT_TRUE(h.balanced());
}

TEST(WorkerConntrack, a_table_full_of_assured_flows_forwards_new_connections_statelessly_both_ways) {
  constexpr int kFlows = 64;
  DataplaneHarness h(kDemoTopology, kFlows);
  for (int i = 0; i < kFlows; ++i) {
    ASSERT_EQ(h.send(client_segment(i, pkt::kTcpSyn), kT0).size(), 1u);
    ASSERT_EQ(h.send(backend_segment(h, i, pkt::kTcpSyn | pkt::kTcpAck), kT0).size(), 1u);
    ASSERT_EQ(h.send(client_segment(i, pkt::kTcpAck), kT0).size(), 1u);
  }
  ASSERT_EQ(h.worker().flows().established(), uint32_t(kFlows));
  // New connections: no flow (nothing may be evicted), forwarded to the backend Maglev picks,
  // and their replies translated back from that pick.
  for (int i = 1000; i < 1050; ++i) {
    const auto fwd = h.send(client_segment(i, pkt::kTcpSyn), kT0 + 1000);
    ASSERT_EQ(fwd.size(), 1u);
    const auto d = pkt::decode(fwd[0]);
    EXPECT_EQ(d.dst.str() + ":" + std::to_string(d.dport),
              expected_backend(h.config(), "web", client_of(i).c_str(), port_of(i)));
    const auto rep = h.send(backend_segment(h, i, pkt::kTcpSyn | pkt::kTcpAck), kT0 + 1000);
    ASSERT_EQ(rep.size(), 1u) << "reply of client " << i;
    const auto r = pkt::decode(rep[0]);
    EXPECT_EQ(r.src.str(), "203.0.113.10");
    EXPECT_EQ(r.sport, 80);
    EXPECT_EQ(r.dst.str(), client_of(i));
    EXPECT_EQ(r.dport, port_of(i));
    EXPECT_EQ(r.ttl, 63);
    EXPECT_TRUE(pkt::verify_checksums(rep[0]).l4 == pkt::CsumState::kValid);
  }
  EXPECT_EQ(h.counters().stateless_packets, 100u);
  EXPECT_EQ(h.counters().flows_created, uint64_t(kFlows));
  EXPECT_EQ(h.drops(Drop::kReplyNoFlow), 0u);
  // A backend's packet toward a client tuple that Maglev sends elsewhere is no reply of ours.
  int other = 2000;
  while (expected_backend(h.config(), "web", client_of(other).c_str(), port_of(other)) ==
         "198.51.100.11:8080") {
    ++other;
  }
  EXPECT_TRUE(h.send(tcp_frame("198.51.100.11", 8080, client_of(other).c_str(), port_of(other),
                               pkt::kTcpSyn | pkt::kTcpAck, 64,
                               pkt::EthHdr{kGw, kBackendMac.at("198.51.100.11")}),
                     kT0 + 2000)
                  .empty());
  EXPECT_EQ(h.drops(Drop::kReplyNoFlow), 1u);
  EXPECT_TRUE(h.balanced());
}

}  // namespace
}  // namespace meshgate
