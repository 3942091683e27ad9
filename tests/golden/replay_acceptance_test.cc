// The L4 acceptance replay: 100,000 new TCP flows to a VIP with four equal backends. Each
// backend gets 25% +/- 2% of the flows, every packet of a flow goes to the same backend, every
// reply is translated back to the VIP, and the counters add up. The gateway runs as a
// subprocess on the pcap (tests/golden/configs/four_backends.toml).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "tests/golden/replay_support.h"
#include "tools/pktlib/decode.h"

namespace meshgate::golden {
namespace {

TEST(AcceptanceReplay, hundred_thousand_new_flows_spread_evenly_stay_on_their_backend_and_replies_come_back) {
  TempDir dir;
  const fs::path cfg = source_dir() / "tests/golden/configs/four_backends.toml";
  const auto gen = run_pcapgen(cfg, source_dir() / "tests/golden/profiles/new_flows_100k.toml",
                               dir / "in.pcap", dir);
  ASSERT_EQ(gen.exit_code, 0) << gen.report;
  const auto mg = run_meshgate(cfg, dir / "in.pcap", dir / "out.pcap", dir / "stats.json", dir);
  ASSERT_EQ(mg.exit_code, 0) << mg.report;
  std::printf("replayed in %.2f s\n", mg.seconds);
  std::string err;
  const auto in = read_pcap(dir / "in.pcap", &err);
  ASSERT_TRUE(err.empty()) << err;
  const auto out = read_pcap(dir / "out.pcap", &err);
  ASSERT_TRUE(err.empty()) << err;
  const auto stats = read_json(dir / "stats.json", &err);
  ASSERT_TRUE(err.empty()) << err;

  // Nothing is dropped, so output i is input i translated (one worker keeps the order).
  ASSERT_EQ(count(stats, "drops_total"), 0u);
  ASSERT_EQ(out.size(), in.size());
  expect_counters_add_up(stats, in.size());

  const IpAddr vip = *IpAddr::parse("203.0.113.10");
  using Client = std::pair<IpAddr, uint16_t>;
  std::map<Client, IpAddr> backend_of;
  uint64_t forward = 0, replies = 0, mismatches = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto a = pkt::decode(in[i].frame);
    const auto b = pkt::decode(out[i].frame);
    ASSERT_TRUE(a.ok() && b.ok()) << "record " << i;
    ASSERT_TRUE(pkt::verify_checksums(out[i].frame).ok()) << "record " << i;
    if (a.dst == vip) {
      // Client -> VIP: to a backend:8080, the client's address and port kept.
      ++forward;
      EXPECT_EQ(b.src, a.src);
      EXPECT_EQ(b.sport, a.sport);
      EXPECT_EQ(b.dport, 8080);
      auto [it, fresh] = backend_of.emplace(Client{a.src, a.sport}, b.dst);
      if (!fresh && !(it->second == b.dst)) ++mismatches;
    } else {
      // Backend -> client: from the VIP again, to the client unchanged.
      ++replies;
      EXPECT_EQ(b.src, vip) << "record " << i;
      EXPECT_EQ(b.sport, 80);
      EXPECT_EQ(b.dst, a.dst);
      EXPECT_EQ(b.dport, a.dport);
      const auto it = backend_of.find(Client{a.dst, a.dport});
      ASSERT_NE(it, backend_of.end()) << "reply before its flow, record " << i;
      EXPECT_EQ(it->second, a.src) << "the reply comes from the flow's backend";
    }
  }
  EXPECT_EQ(mismatches, 0u) << "packets of one flow went to different backends";
  EXPECT_EQ(backend_of.size(), 100000u);
  EXPECT_EQ(count(stats, "flows_created"), 100000u);
  std::map<std::string, uint64_t> flows;
  for (const auto& [client, be] : backend_of) ++flows[be.str()];
  ASSERT_EQ(flows.size(), 4u);
  for (const auto& [be, n] : flows) {
    const double share = double(n) / backend_of.size();
    std::printf("backend %s: %lu flows (%.2f%%)\n", be.c_str(), (unsigned long)n, 100 * share);
    EXPECT_NEAR(share, 0.25, 0.02) << be;
  }
  std::printf("%lu client packets, %lu replies translated\n", (unsigned long)forward,
              (unsigned long)replies);
  EXPECT_GT(replies, 0u);
}

}  // namespace
}  // namespace meshgate::golden
