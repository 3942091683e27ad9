// Two gateways, one behaviour: gateways of a fleet behind an ECMP router see each other's flows
// when the router moves them (a gateway dies, restarts, or a path is added), so every gateway
// must send a flow to the backend any other would have picked. Two meshgate processes replay
// the same traffic: one with config/demo.toml's services plus two DSR ones, the other with
// the services and their backends listed in the opposite order; then the second sees the
// connections without their SYNs (picked up mid-stream, as after an ECMP move).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tests/golden/replay_support.h"
#include "tools/pktlib/decode.h"
#include "tools/pktlib/pcap.h"

namespace meshgate::golden {
namespace {

using pkt::Bytes;

struct Backend {
  std::string address;
  uint16_t port;
  uint32_t weight;
};
struct Service {
  std::string name, vip;
  uint16_t port;
  std::string protocol, mode;
  std::vector<Backend> backends;
};

const std::vector<Service> kServices = {
    {"web", "203.0.113.10", 80, "tcp", "dnat",
     {{"198.51.100.11", 8080, 1}, {"198.51.100.12", 8080, 1}, {"198.51.100.13", 8080, 2}}},
    {"dns", "203.0.113.10", 53, "udp", "dnat",
     {{"198.51.100.11", 5353, 1}, {"198.51.100.12", 5353, 1}}},
    {"web6", "2001:db8:100::10", 80, "tcp", "dnat",
     {{"2001:db8:1::11", 8080, 1}, {"2001:db8:1::12", 8080, 1}}},
    {"web-ipip", "203.0.113.12", 80, "tcp", "dsr-ipip",
     {{"198.51.100.11", 80, 1}, {"198.51.100.12", 80, 1}, {"198.51.100.13", 80, 1}}},
    {"web-gue", "203.0.113.13", 80, "tcp", "dsr-gue",
     {{"198.51.100.11", 80, 1}, {"198.51.100.12", 80, 3}, {"198.51.100.13", 80, 1}}},
};

// config/demo.toml with its services replaced by kServices, in order or reversed (the services
// and each one's backends).
std::string fleet_config(bool reversed) {
  const std::string demo = read_text(demo_config());
  const size_t first = demo.find("\n[[service]]");
  const size_t tail = demo.find("\n[conntrack]");
  if (first == std::string::npos || tail == std::string::npos || tail < first) return "";
  std::string out = demo.substr(0, first) + "\n";
  std::vector<Service> svcs = kServices;
  if (reversed) std::reverse(svcs.begin(), svcs.end());
  for (Service& s : svcs) {
    if (reversed) std::reverse(s.backends.begin(), s.backends.end());
    out += "\n[[service]]\nname = \"" + s.name + "\"\nvip = \"" + s.vip +
           "\"\nport = " + std::to_string(s.port) + "\nprotocol = \"" + s.protocol +
           "\"\nmode = \"" + s.mode + "\"\n";
    for (const Backend& b : s.backends) {
      out += "  [[service.backend]]\n  address = \"" + b.address + "\"\n  port = " +
             std::to_string(b.port) + "\n  weight = " + std::to_string(b.weight) + "\n";
    }
  }
  return out + demo.substr(tail);
}

constexpr const char* kProfile = R"(seed = 21
rate_pps = 100000
start = 2024-01-01T00:00:00Z
concurrency = 256
backend_replies = true
size = 120
client_prefix = "192.0.2.0/24"
client_prefix6 = "2001:db8:2::/64"
client_ports = [1024, 65535]

[[class]]
name = "http"
type = "tcp"
targets = ["web", "web6", "web-ipip", "web-gue"]
flows = 2000
data_packets = 3
close = "fin"

[[class]]
name = "dns"
type = "udp"
targets = ["dns"]
flows = 500
requests = 2
size = 90
)";

constexpr uint16_t kGuePort = 6080;  // a dsr-gue service's default

// A client's connection as the client sent it: addresses, ports, protocol.
using FlowKey = std::tuple<std::string, uint16_t, std::string, uint16_t, uint8_t>;

// From every frame the gateway sent toward a backend: the client's flow and that backend (the
// destination of a dnat frame; the outer destination of a DSR one, whose inner packet is the
// client's). Frames toward clients (replies) are skipped.
std::map<FlowKey, std::string> backends_by_flow(const std::vector<PcapRecord>& out,
                                                size_t* conflicts) {
  const IpPrefix clients4 = *IpPrefix::parse("192.0.2.0/24");
  const IpPrefix clients6 = *IpPrefix::parse("2001:db8:2::/64");
  std::map<FlowKey, std::string> by_flow;
  for (const PcapRecord& r : out) {
    const pkt::Decoded d = pkt::decode(r.frame);
    if (d.error || (d.l3 != pkt::L3Kind::kIpv4 && d.l3 != pkt::L3Kind::kIpv6)) continue;
    pkt::Decoded inner = d;
    if (d.l4_proto == 4 || (d.l4_proto == 17 && d.dport == kGuePort)) {
      // IPIP, or GUE (UDP, then the inner IP header): the client's packet inside.
      const size_t at = d.l4_proto == 4 ? d.l4_off : d.l4_off + 8;
      Bytes f(r.frame.begin(), r.frame.begin() + 14);
      f[12] = 0x08;
      f[13] = 0x00;
      f.insert(f.end(), r.frame.begin() + long(at), r.frame.end());
      inner = pkt::decode(f);
      if (inner.error) continue;
    }
    if (!clients4.contains(inner.src) && !clients6.contains(inner.src)) continue;
    const FlowKey k{inner.src.str(), inner.sport, inner.dst.str(), inner.dport, inner.l4_proto};
    const std::string backend = d.dst.str();
    const auto [it, added] = by_flow.emplace(k, backend);
    if (!added && it->second != backend) ++*conflicts;
  }
  return by_flow;
}

class ReplayFleet : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(fleet_config(false).empty()) << "config/demo.toml changed shape";
    write_text(dir_ / "gw1.toml", fleet_config(false));
    write_text(dir_ / "gw2.toml", fleet_config(true));
    write_text(dir_ / "fleet.toml", kProfile);
    const auto gen = run_pcapgen(dir_ / "gw1.toml", dir_ / "fleet.toml", dir_ / "in.pcap", dir_);
    ASSERT_EQ(gen.exit_code, 0) << gen.report << environment_hint();
    const auto run = run_meshgate(dir_ / "gw1.toml", dir_ / "in.pcap", dir_ / "gw1-out.pcap",
                                  dir_ / "gw1-stats.json", dir_);
    ASSERT_EQ(run.exit_code, 0) << run.report << environment_hint();
    std::string err;
    gw1_out_ = read_pcap(dir_ / "gw1-out.pcap", &err);
    ASSERT_TRUE(err.empty()) << err;
    size_t conflicts = 0;
    gw1_ = backends_by_flow(gw1_out_, &conflicts);
    ASSERT_EQ(conflicts, 0u) << "one gateway sent a flow to two backends";
    ASSERT_GT(gw1_.size(), 2400u) << "the traffic's 2,500 flows did not all reach a backend";
  }

  TempDir dir_;
  std::vector<PcapRecord> gw1_out_;
  std::map<FlowKey, std::string> gw1_;
};

TEST_F(ReplayFleet, a_gateway_with_services_and_backends_in_another_order_sends_every_frame_alike) {
  const auto run = run_meshgate(dir_ / "gw2.toml", dir_ / "in.pcap", dir_ / "gw2-out.pcap",
                                dir_ / "gw2-stats.json", dir_);
  ASSERT_EQ(run.exit_code, 0) << run.report << environment_hint();
  std::string err;
  const auto gw2_out = read_pcap(dir_ / "gw2-out.pcap", &err);
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_EQ(gw2_out.size(), gw1_out_.size());
  size_t differ = 0;
  for (size_t i = 0; i < gw1_out_.size(); ++i) differ += gw1_out_[i].frame != gw2_out[i].frame;
  EXPECT_EQ(differ, 0u) << "frames the second gateway sent differently";
  // And the backends were spread: every backend of every service took flows.
  std::map<std::string, size_t> per_backend;
  for (const auto& [k, b] : gw1_) {
    ++per_backend[std::get<2>(k) + ":" + std::to_string(std::get<3>(k)) + " -> " + b];
  }
  EXPECT_EQ(per_backend.size(), 3u + 2u + 2u + 3u + 3u) << "a backend that took no flow";
}

TEST_F(ReplayFleet, a_gateway_that_picks_the_connections_up_mid_stream_keeps_their_backends) {
  // The second gateway sees every packet but the clients' SYNs: it learns each connection from
  // a later packet, as after an ECMP move to it.
  std::string err;
  const auto in = read_pcap(dir_ / "in.pcap", &err);
  ASSERT_TRUE(err.empty()) << err;
  size_t kept = 0, syns = 0;
  {
    auto w = pkt::PcapWriter::open((dir_ / "pickup.pcap").string());
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (const PcapRecord& r : in) {
      const pkt::Decoded d = pkt::decode(r.frame);
      if (d.has_l4 && d.l4_proto == 6 && (d.tcp_flags & 0x12) == 0x02) {
        ++syns;
        continue;
      }
      ASSERT_TRUE(w->write(r.ts_ns, r.frame));
      ++kept;
    }
    ASSERT_TRUE(w->close().ok());
  }
  ASSERT_EQ(syns, 2000u);
  const auto run = run_meshgate(dir_ / "gw2.toml", dir_ / "pickup.pcap", dir_ / "gw2-out.pcap",
                                dir_ / "gw2-stats.json", dir_);
  ASSERT_EQ(run.exit_code, 0) << run.report << environment_hint();
  const auto gw2_out = read_pcap(dir_ / "gw2-out.pcap", &err);
  ASSERT_TRUE(err.empty()) << err;
  size_t conflicts = 0;
  const auto gw2 = backends_by_flow(gw2_out, &conflicts);
  EXPECT_EQ(conflicts, 0u);
  EXPECT_EQ(gw2.size(), gw1_.size()) << "every connection's later packets reached a backend";
  size_t same = 0, missing = 0;
  for (const auto& [k, b] : gw2) {
    const auto it = gw1_.find(k);
    if (it == gw1_.end()) ++missing;
    else same += it->second == b;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(same, gw2.size()) << "connections the second gateway sent to another backend";
}

}  // namespace
}  // namespace meshgate::golden
