// replay_exhaustion: a flow table far too small for the traffic (tests/golden/profiles/
// table_exhaustion.toml against config/demo.toml with max_flows = 2048: ten times that many
// complete connections, long ones, a SYN flood and mid-stream pickups, with backend replies).
// The gateway must finish, forward every packet in both directions to the backend Maglev picks
// (statelessly once the table is full: per-backend packets equal pcapgen's prediction), evict
// only half-open and unassured flows, and account for every packet.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

#include "tests/golden/replay_support.h"

namespace meshgate::golden {
namespace {

constexpr uint64_t kMaxFlows = 2048;

TEST(ReplayExhaustion, a_table_ten_times_too_small_forwards_every_packet_both_ways_and_counts) {
  TempDir dir;
  // The demo config, with a small table.
  std::string cfg = read_text(demo_config());
  const std::regex max_flows(R"(max_flows\s*=\s*\d+)");
  ASSERT_TRUE(std::regex_search(cfg, max_flows)) << "config/demo.toml has no max_flows";
  cfg = std::regex_replace(cfg, max_flows, "max_flows = " + std::to_string(kMaxFlows));
  write_text(dir / "demo-small.toml", cfg);

  const auto gen = run_pcapgen(dir / "demo-small.toml",
                               source_dir() / "tests/golden/profiles/table_exhaustion.toml",
                               dir / "in.pcap", dir);
  ASSERT_EQ(gen.exit_code, 0) << gen.report << environment_hint();
  std::string err;
  const auto sidecar = read_json(dir / "in.pcap.json", &err);
  ASSERT_TRUE(err.empty()) << err;
  const auto run = run_meshgate(dir / "demo-small.toml", dir / "in.pcap", dir / "out.pcap",
                                dir / "stats.json", dir);
  ASSERT_EQ(run.exit_code, 0) << run.report << environment_hint();
  const auto stats = read_json(dir / "stats.json", &err);
  ASSERT_TRUE(err.empty()) << err;

  const uint64_t in = count(sidecar, "packets");
  expect_counters_add_up(stats, in);
  EXPECT_EQ(count(stats, "packets_out"), in) << "every packet forwarded";
  EXPECT_EQ(count(stats, "drops_total"), 0u);
  EXPECT_EQ(count_pcap(dir / "out.pcap", &err), in);
  EXPECT_GT(count(stats, "stateless_packets"), 10 * kMaxFlows) << "the table never filled";
  EXPECT_LE(count(stats, "flows_active"), kMaxFlows);

  // Every packet reached (or came back from) the backend pcapgen's own Maglev picks for it.
  const auto& services = stats.at("services");
  for (const auto& [name, svc] : sidecar.at("services").items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(services.contains(name));
    for (const auto& [backend, want] : svc.at("backends").items()) {
      SCOPED_TRACE(backend);
      ASSERT_TRUE(services.at(name).at("backends").contains(backend));
      EXPECT_EQ(count(services.at(name).at("backends").at(backend), "packets"),
                count(want, "packets") + count(want, "reply_packets"));
    }
  }
  std::printf("replay_exhaustion: %llu packets, %llu flows created, %llu stateless packets, "
              "%llu flows active at the end (max_flows %llu)\n",
              (unsigned long long)in, (unsigned long long)count(stats, "flows_created"),
              (unsigned long long)count(stats, "stateless_packets"),
              (unsigned long long)count(stats, "flows_active"), (unsigned long long)kMaxFlows);
}

}  // namespace
}  // namespace meshgate::golden
