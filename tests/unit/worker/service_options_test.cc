// Service options through the real workers (dp_harness): session affinity kept by the table the
// workers share (across two workers, across a snapshot that adds a backend, until it expires,
// counted when full), the [[deny]] block list and source_ranges enforced on every path a packet
// can take (new flows, established flows on the fast path, the TCP stack).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using dp::Drop;
using pkt::Bytes;
using test::DataplaneHarness;
using test::HarnessOptions;
using test::kSec;
using test::kT0;
using test::tcp_frame;
using test::udp_frame;

const char* const kBackend = R"(
  [[service.backend]]
  address = "%s"
  port = 8080
)";

// The demo topology plus a session-affinity service with `backends` (of .11 .. .14).
std::string sticky_config(std::initializer_list<const char*> backends, uint32_t timeout_s = 10800,
                          const char* mode = "dnat") {
  std::string c = std::string(test::kDemoTopology) + R"(
[[neighbor]]
address = "198.51.100.14"
mac = "02:00:00:00:01:14"
[fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "sticky"
vip = "203.0.113.31"
port = 80
mode = ")" + std::string(mode) + R"("
session_affinity = "client_ip"
node_port = 30080
affinity_timeout_s = )" + std::to_string(timeout_s) + "\n";
  for (const char* b : backends) {
    char buf[128];
    std::snprintf(buf, sizeof buf, kBackend, b);
    c += buf;
  }
  return c;
}

const std::initializer_list<const char*> kThree = {"198.51.100.11", "198.51.100.12",
                                                   "198.51.100.13"};
const std::initializer_list<const char*> kFour = {"198.51.100.11", "198.51.100.12",
                                                  "198.51.100.13", "198.51.100.14"};

// The backend address a SYN from client:port to the sticky VIP reached (one frame out).
std::string backend_of(DataplaneHarness& h, const std::string& client, uint16_t port,
                       uint64_t ts) {
  const auto out = h.send(tcp_frame(client.c_str(), port, "203.0.113.31", 80, pkt::kTcpSyn), ts);
  if (out.size() != 1) return "(" + std::to_string(out.size()) + " frames)";
  return pkt::decode(out[0]).dst.str();
}

// A client whose Maglev choice differs between the two configs (so that keeping it proves the
// table, not the hash).
std::string client_moved_by(const std::string& before, const std::string& after) {
  auto c1 = ctl::parse_config(before, "a.toml");
  auto c2 = ctl::parse_config(after, "b.toml");
  for (int i = 1; i < 250; ++i) {
    const std::string client = "192.0.2." + std::to_string(i);
    if (test::expected_backend(c1.value(), "sticky", client.c_str(), 1) !=
        test::expected_backend(c2.value(), "sticky", client.c_str(), 1)) {
      return client;
    }
  }
  return "";
}

TEST(SessionAffinity, two_hundred_connections_of_one_client_reach_one_backend_on_both_workers) {
  for (const char* mode : {"dnat", "fullnat"}) {
    SCOPED_TRACE(mode);
    const std::string before = sticky_config(kThree, 10800, mode);
    const std::string after = sticky_config(kFour, 10800, mode);
    const std::string client = client_moved_by(before, after);
    ASSERT_FALSE(client.empty());
    DataplaneHarness h(before, HarnessOptions{1 << 14, 2, true});
    std::set<std::string> backends;
    std::set<uint16_t> queues;
    for (int i = 0; i < 200; ++i) {
      if (i == 100) h.publish(after);  // a backend added mid-way: nobody moves
      const uint16_t port = uint16_t(20000 + i * 7);
      queues.insert(h.rss_queue(tcp_frame(client.c_str(), port, "203.0.113.31", 80, pkt::kTcpSyn)));
      backends.insert(backend_of(h, client, port, kT0 + uint64_t(i) * 1000000));
    }
    // Through the node port (the gateway's own address) the client keeps its backend too.
    for (uint16_t p = 40000; p < 40020; ++p) {
      const auto out =
          h.send(tcp_frame(client.c_str(), p, "198.51.100.1", 30080, pkt::kTcpSyn), kT0 + 5000000);
      ASSERT_EQ(out.size(), 1u);
      backends.insert(pkt::decode(out[0]).dst.str());
    }
    EXPECT_EQ(backends.size(), 1u) << *backends.begin();
    EXPECT_EQ(queues.size(), 2u) << "the connections came in on both workers";
    auto c1 = ctl::parse_config(before, "a.toml");
    const std::string want = test::expected_backend(c1.value(), "sticky", client.c_str(), 1);
    EXPECT_EQ(*backends.begin(), want.substr(0, want.find(':'))) << "the first choice stays";
    // Clients new after the change get the new table's choice: some reach the new backend.
    std::set<std::string> others;
    for (int i = 1; i < 60; ++i) {
      const std::string other = "192.0.2." + std::to_string(i);
      if (other == client) continue;
      others.insert(backend_of(h, other, 1000, kT0 + 300000000));
    }
    EXPECT_TRUE(others.contains("198.51.100.14"));
    EXPECT_GT(others.size(), 1u) << "other clients go elsewhere";
    EXPECT_EQ(h.affinity()->full(), 0u);
    EXPECT_EQ(h.drops_total(), 0u);
  }
}

TEST(SessionAffinity, a_choice_lasts_the_timeout_after_the_clients_last_connection) {
  const std::string before = sticky_config(kThree, 10);
  const std::string after = sticky_config(kFour, 10);
  const std::string client = client_moved_by(before, after);
  ASSERT_FALSE(client.empty());
  auto c1 = ctl::parse_config(before, "a.toml");
  auto c2 = ctl::parse_config(after, "b.toml");
  const std::string old_be = test::expected_backend(c1.value(), "sticky", client.c_str(), 1);
  const std::string new_be = test::expected_backend(c2.value(), "sticky", client.c_str(), 1);
  const auto addr = [](const std::string& ep) { return ep.substr(0, ep.find(':')); };
  DataplaneHarness h(before, HarnessOptions{1 << 14, 2, true});
  EXPECT_EQ(backend_of(h, client, 1000, kT0), addr(old_be));
  h.publish(after);
  // 8 s later: within the timeout, and the new connection starts it again.
  EXPECT_EQ(backend_of(h, client, 1001, kT0 + 8 * kSec), addr(old_be));
  // 16 s after the first, 8 after the last: still there.
  EXPECT_EQ(backend_of(h, client, 1002, kT0 + 16 * kSec), addr(old_be));
  // 11 s of silence: expired, the new table's choice.
  EXPECT_EQ(backend_of(h, client, 1003, kT0 + 27 * kSec), addr(new_be));
  EXPECT_EQ(backend_of(h, client, 1004, kT0 + 28 * kSec), addr(new_be));
}

TEST(SessionAffinity, a_backend_removed_or_drained_is_replaced_by_the_maglev_choice) {
  const std::string cfg = sticky_config(kThree);
  DataplaneHarness h(cfg, HarnessOptions{1 << 14, 2, true});
  const std::string client = "192.0.2.77";
  const std::string first = backend_of(h, client, 1000, kT0);
  // Drain that backend (weight 0): the client moves, and stays on its new backend.
  std::string drained = cfg;
  const std::string line = "address = \"" + first + "\"\n  port = 8080\n";
  // The sticky service's entry: the last (the demo's web service lists the same backends).
  drained.replace(drained.rfind(line), line.size(), line + "  weight = 0\n");
  h.publish(drained);
  const std::string second = backend_of(h, client, 1001, kT0 + kSec);
  EXPECT_NE(second, first);
  EXPECT_EQ(second.rfind("198.51.100.", 0), 0u) << second;
  for (uint16_t p = 1002; p < 1020; ++p) EXPECT_EQ(backend_of(h, client, p, kT0 + 2 * kSec), second);
}

TEST(SessionAffinity, a_full_bucket_is_counted_and_the_flow_still_goes_to_maglevs_choice) {
  HarnessOptions opt{1 << 14, 1, false};
  opt.affinity_entries = dp::AffinityTable::kWays;  // one bucket
  DataplaneHarness h(sticky_config(kThree), opt);
  ASSERT_EQ(h.affinity()->capacity(), dp::AffinityTable::kWays);
  auto cfg = ctl::parse_config(sticky_config(kThree), "a.toml");
  for (int i = 1; i <= 6; ++i) {
    const std::string client = "192.0.2." + std::to_string(i);
    const std::string want = test::expected_backend(cfg.value(), "sticky", client.c_str(), 1);
    EXPECT_EQ(backend_of(h, client, 1000, kT0), want.substr(0, want.find(':')));
  }
  EXPECT_EQ(h.affinity()->entries(), dp::AffinityTable::kWays);
  EXPECT_EQ(h.affinity()->full(), 2u);
  // A remembered client is still found (its entry was not pushed out).
  const std::string c1 = test::expected_backend(cfg.value(), "sticky", "192.0.2.1", 1);
  EXPECT_EQ(backend_of(h, "192.0.2.1", 1001, kT0 + kSec), c1.substr(0, c1.find(':')));
  EXPECT_EQ(h.affinity()->full(), 2u);
}

// ---- block list and source ranges --------------------------------------------------------

std::string guarded_config() {
  return std::string(test::kDemoTopology) + R"(
[[deny]]
source = "192.0.2.128/25"
[[deny]]
source = "2001:db8:2:bad::/64"
[[service]]
name = "ranged"
vip = "203.0.113.30"
port = 80
source_ranges = ["192.0.2.0/26"]
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "ranged_udp"
vip = "203.0.113.30"
port = 80
protocol = "udp"
source_ranges = ["192.0.2.0/26"]
  [[service.backend]]
  address = "198.51.100.11"
  port = 5353
)";
}

TEST(SourceChecks, blocked_sources_are_dropped_whatever_they_address) {
  DataplaneHarness h(guarded_config());
  const std::vector<Bytes> blocked = {
      tcp_frame("192.0.2.200", 1000, "203.0.113.10", 80, pkt::kTcpSyn),    // a VIP
      udp_frame("192.0.2.200", 1000, "203.0.113.10", 53),                   // UDP to a VIP
      tcp_frame("192.0.2.129", 1000, "198.51.100.1", 22, pkt::kTcpSyn),    // a port address
      tcp_frame("2001:db8:2:bad::9", 1000, "2001:db8:100::10", 80, pkt::kTcpSyn),
  };
  for (const Bytes& f : blocked) EXPECT_TRUE(h.send(f, kT0).empty());
  EXPECT_EQ(h.drops(Drop::kSourceBlocked), blocked.size());
  // Next to them, others pass.
  EXPECT_EQ(h.send(tcp_frame("192.0.2.7", 1000, "203.0.113.10", 80, pkt::kTcpSyn), kT0).size(), 1u);
  EXPECT_EQ(h.send(tcp_frame("2001:db8:2:ba0::9", 1000, "2001:db8:100::10", 80, pkt::kTcpSyn), kT0)
                .size(),
            1u);
  EXPECT_EQ(h.drops(Drop::kSourceBlocked), blocked.size());
  EXPECT_TRUE(h.balanced());
}

TEST(SourceChecks, a_source_blocked_after_its_flow_started_is_cut_off_on_the_fast_path) {
  std::string open = test::kDemoTopology;
  DataplaneHarness h(open);
  std::vector<Bytes> burst;
  for (uint16_t p = 0; p < 32; ++p) {
    burst.push_back(tcp_frame("192.0.2.200", uint16_t(2000 + p), "203.0.113.10", 80, pkt::kTcpAck));
  }
  EXPECT_EQ(h.send(burst, kT0).size(), 32u);  // flows picked up
  EXPECT_EQ(h.send(burst, kT0 + 1000).size(), 32u);  // established: the fast path
  h.publish(guarded_config());
  EXPECT_TRUE(h.send(burst, kT0 + 2000).empty());
  EXPECT_EQ(h.drops(Drop::kSourceBlocked), 32u);
}

TEST(SourceChecks, source_ranges_refuse_new_flows_from_outside_and_keep_older_flows) {
  DataplaneHarness h(guarded_config());
  EXPECT_EQ(h.send(tcp_frame("192.0.2.7", 1000, "203.0.113.30", 80, pkt::kTcpSyn), kT0).size(), 1u);
  EXPECT_TRUE(h.send(tcp_frame("192.0.2.70", 1000, "203.0.113.30", 80, pkt::kTcpSyn), kT0).empty());
  EXPECT_TRUE(h.send(udp_frame("192.0.2.70", 1000, "203.0.113.30", 80), kT0).empty());
  EXPECT_EQ(h.drops(Drop::kSourceDenied), 2u);
  // The other services take anyone.
  EXPECT_EQ(h.send(tcp_frame("192.0.2.70", 1000, "203.0.113.10", 80, pkt::kTcpSyn), kT0).size(), 1u);
  EXPECT_EQ(h.drops(Drop::kSourceDenied), 2u);
  EXPECT_TRUE(h.balanced());
}

// ---- UDP re-balancing ---------------------------------------------------------------------

TEST(UdpRebalancing, flows_of_a_removed_backend_move_on_their_next_packet_without_a_drop) {
  for (uint16_t workers : {1, 2}) {
    SCOPED_TRACE(workers);
    DataplaneHarness h(test::kDemoTopology, HarnessOptions{1 << 14, workers, workers > 1});
    std::map<uint16_t, std::string> first;
    int on_11 = 0;
    for (uint16_t p = 7000; p < 7100; ++p) {
      const auto out = h.send(udp_frame("192.0.2.7", p, "203.0.113.10", 53), kT0);
      ASSERT_EQ(out.size(), 1u);
      first[p] = pkt::decode(out[0]).dst.str();
      on_11 += first[p] == "198.51.100.11";
    }
    ASSERT_GT(on_11, 10);
    std::string cfg = test::kDemoTopology;
    const std::string gone = "  [[service.backend]]\n  address = \"198.51.100.11\"\n  port = 5353\n";
    ASSERT_NE(cfg.find(gone), std::string::npos);
    cfg.erase(cfg.find(gone), gone.size());
    h.publish(cfg);
    for (int round = 0; round < 2; ++round) {
      for (uint16_t p = 7000; p < 7100; ++p) {
        const auto out = h.send(udp_frame("192.0.2.7", p, "203.0.113.10", 53), kT0 + kSec);
        ASSERT_EQ(out.size(), 1u) << p;
        const auto d = pkt::decode(out[0]);
        EXPECT_EQ(d.dst.str(), "198.51.100.12") << p;
        EXPECT_EQ(d.dport, 5353);
        // The backend's answer goes back from the VIP.
        const auto rep = h.send(udp_frame("198.51.100.12", 5353, "192.0.2.7", p,
                                          pkt::EthHdr{test::kGw, test::M("02:00:00:00:01:12")}),
                                kT0 + kSec);
        ASSERT_EQ(rep.size(), 1u);
        EXPECT_EQ(pkt::decode(rep[0]).src.str(), "203.0.113.10");
      }
    }
    EXPECT_EQ(h.drops_total(), 0u);
    EXPECT_EQ(h.counters().flows_moved, uint64_t(on_11)) << "each moved once";
    EXPECT_TRUE(h.balanced());
  }
}

TEST(UdpRebalancing, tcp_flows_of_a_removed_backend_keep_it) {
  DataplaneHarness h(test::kDemoTopology);
  std::map<uint16_t, std::string> first;
  for (uint16_t p = 7000; p < 7050; ++p) {
    first[p] = pkt::decode(h.send(tcp_frame("192.0.2.7", p, "203.0.113.10", 80, pkt::kTcpSyn), kT0)
                               .at(0)).dst.str();
  }
  std::string cfg = test::kDemoTopology;
  const std::string gone = "  [[service.backend]]\n  address = \"198.51.100.11\"\n  port = 8080\n";
  cfg.erase(cfg.find(gone), gone.size());
  h.publish(cfg);
  for (uint16_t p = 7000; p < 7050; ++p) {
    EXPECT_EQ(pkt::decode(h.send(tcp_frame("192.0.2.7", p, "203.0.113.10", 80, pkt::kTcpAck),
                                 kT0 + kSec).at(0)).dst.str(),
              first[p]);
  }
  EXPECT_EQ(h.counters().flows_moved, 0u);
}

// ---- NodePort -----------------------------------------------------------------------------

TEST(NodePort, a_port_address_at_the_node_port_reaches_the_service_and_replies_come_back_from_it) {
  for (const char* mode : {"dnat", "fullnat"}) {
    SCOPED_TRACE(mode);
    const std::string cfg = std::string(test::kDemoTopology) + R"(
[fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "np"
vip = "203.0.113.40"
port = 80
mode = ")" + mode + R"("
node_port = 30080
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
)";
    DataplaneHarness h(cfg, HarnessOptions{1 << 14, 2, true});
    std::set<std::string> reached;
    for (uint16_t p = 3000; p < 3040; ++p) {
      const auto out =
          h.send(tcp_frame("192.0.2.7", p, "198.51.100.1", 30080, pkt::kTcpSyn), kT0);
      ASSERT_EQ(out.size(), 1u);
      const auto d = pkt::decode(out[0]);
      EXPECT_EQ(d.dport, 8080);
      reached.insert(d.dst.str());
      const std::string be = d.dst.str();
      const auto rep = h.send(
          tcp_frame(be.c_str(), d.dport, d.src.str().c_str(), d.sport,
                    pkt::kTcpSyn | pkt::kTcpAck, 64,
                    pkt::EthHdr{test::kGw, test::M(be == "198.51.100.11" ? "02:00:00:00:01:11"
                                                                         : "02:00:00:00:01:12")}),
          kT0 + 1);
      ASSERT_EQ(rep.size(), 1u);
      const auto r = pkt::decode(rep[0]);
      EXPECT_EQ(r.src.str(), "198.51.100.1");
      EXPECT_EQ(r.sport, 30080);
      EXPECT_EQ(r.dst.str(), "192.0.2.7");
      EXPECT_EQ(r.dport, p);
    }
    EXPECT_EQ(reached.size(), 2u);
    // The VIP still works, and both count under the service's backends.
    EXPECT_EQ(h.send(tcp_frame("192.0.2.8", 3000, "203.0.113.40", 80, pkt::kTcpSyn), kT0).size(),
              1u);
    const uint64_t flows = h.backend("np", "198.51.100.11:8080").flows +
                           h.backend("np", "198.51.100.12:8080").flows;
    EXPECT_EQ(flows, 41u);
    EXPECT_EQ(h.drops_total(), 0u);
    // An IPv4 service is not opened on the IPv6 port address.
    EXPECT_TRUE(h.send(tcp_frame("2001:db8:2::7", 3000, "2001:db8:1::1", 30080, pkt::kTcpSyn), kT0)
                    .empty());
    // The port address is no VIP: other ports of it are not the service's.
    EXPECT_EQ(h.snapshot()->is_vip(test::A("198.51.100.1")), false);
  }
}

}  // namespace
}  // namespace meshgate
