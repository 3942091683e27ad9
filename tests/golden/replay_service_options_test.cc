// Service options through the real meshgate binary (ctest label `replay`): config/demo.toml
// with a [[deny]] block list and services with source_ranges, session_affinity and node_port;
// a pcap of traffic from blocked, denied and allowed sources; the drop counters, the output
// frames and the accounting asserted.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/golden/replay_support.h"
#include "tests/support/frames.h"
#include "tools/pktlib/decode.h"
#include "tools/pktlib/pcap.h"

namespace meshgate::golden {
namespace {

using pkt::Bytes;
using test::kT0;
using test::tcp_frame;
using test::udp_frame;

const char* const kOptions = R"(
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
name = "sticky"
vip = "203.0.113.31"
port = 80
session_affinity = "client_ip"
node_port = 30080
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
  [[service.backend]]
  address = "198.51.100.13"
  port = 8080
)";

TEST(ServiceOptionsReplay, block_list_source_ranges_affinity_and_node_port_through_meshgate) {
  TempDir dir;
  write_text(dir / "options.toml", read_text(demo_config()) + kOptions);
  std::vector<Bytes> frames;
  auto add = [&](int n, auto make) {
    for (int i = 0; i < n; ++i) frames.push_back(make(uint16_t(10000 + frames.size())));
  };
  // Blocked sources, to a VIP (TCP and UDP), a port address and an IPv6 VIP: 40 drops.
  add(10, [](uint16_t p) { return tcp_frame("192.0.2.200", p, "203.0.113.10", 80, pkt::kTcpSyn); });
  add(10, [](uint16_t p) { return udp_frame("192.0.2.129", p, "203.0.113.10", 53); });
  add(10, [](uint16_t p) { return tcp_frame("192.0.2.130", p, "198.51.100.1", 30080, pkt::kTcpSyn); });
  add(10, [](uint16_t p) {
    return tcp_frame("2001:db8:2:bad::7", p, "2001:db8:100::10", 80, pkt::kTcpSyn);
  });
  // Outside the ranged service's source_ranges: 10 source_denied.
  add(10, [](uint16_t p) { return tcp_frame("192.0.2.70", p, "203.0.113.30", 80, pkt::kTcpSyn); });
  // Allowed: 10 to the ranged service, 10 from an outside source to another service.
  add(10, [](uint16_t p) { return tcp_frame("192.0.2.7", p, "203.0.113.30", 80, pkt::kTcpSyn); });
  add(10, [](uint16_t p) { return tcp_frame("192.0.2.70", p, "203.0.113.10", 80, pkt::kTcpSyn); });
  // Affinity: 50 connections of one client, then 10 more at the node port.
  add(50, [](uint16_t p) { return tcp_frame("192.0.2.9", p, "203.0.113.31", 80, pkt::kTcpSyn); });
  add(10, [](uint16_t p) { return tcp_frame("192.0.2.9", p, "198.51.100.1", 30080, pkt::kTcpSyn); });
  {
    auto w = pkt::PcapWriter::open((dir / "in.pcap").string());
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (size_t i = 0; i < frames.size(); ++i) ASSERT_TRUE(w->write(kT0 + i * 1000, frames[i]));
    ASSERT_TRUE(w->close().ok());
  }
  const auto mg = run_meshgate(dir / "options.toml", dir / "in.pcap", dir / "out.pcap",
                               dir / "stats.json", dir);
  ASSERT_EQ(mg.exit_code, 0) << mg.report << environment_hint();
  std::string err;
  const auto stats = read_json(dir / "stats.json", &err);
  ASSERT_TRUE(err.empty()) << err;
  const auto out = read_pcap(dir / "out.pcap", &err);
  ASSERT_TRUE(err.empty()) << err;
  expect_counters_add_up(stats, frames.size());
  const auto& drops = stats.at("drops");
  EXPECT_EQ(count(drops, "source_blocked"), 40u);
  EXPECT_EQ(count(drops, "source_denied"), 10u);
  EXPECT_EQ(count(stats, "drops_total"), 50u);
  ASSERT_EQ(out.size(), 80u);
  // The affinity client's 60 connections (VIP and node port) reached one backend.
  std::set<std::string> sticky;
  std::map<std::string, int> ranged;
  for (const auto& r : out) {
    const auto d = pkt::decode(r.frame);
    if (d.src.str() == "192.0.2.9") sticky.insert(d.dst.str());
    if (d.src.str() == "192.0.2.7") ranged[d.dst.str()]++;
  }
  EXPECT_EQ(sticky.size(), 1u);
  EXPECT_EQ(ranged["198.51.100.11"], 10);
}

}  // namespace
}  // namespace meshgate::golden
