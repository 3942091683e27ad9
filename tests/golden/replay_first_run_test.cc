// replay_first_run: what a new user meets replaying a capture made elsewhere (ctest label
// `replay`). pcapgen traffic generated for a gateway with another MAC, replayed through
// config/demo.toml: without promiscuous mode every frame is l2_not_for_us and the summary says
// what to do; with --promiscuous or `[[port]] promiscuous = true` every packet is forwarded.
// The summary's closing tcpreplay-style lines, --progress into a file, and the port's own
// counters (rte_eth_stats) equal to the replayed packets.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/golden/replay_support.h"

namespace meshgate::golden {
namespace {

constexpr const char* kProfile = R"(seed = 11
rate_pps = 100000
concurrency = 16
backend_replies = true
size = 200
client_prefix = "192.0.2.0/24"

[[class]]
name = "web"
type = "tcp"
targets = ["web"]
flows = 40
data_packets = 2
close = "fin"
)";

constexpr const char* kHint =
    "most frames were for another MAC (l2_not_for_us); replaying a capture from elsewhere? set "
    "promiscuous = true on the port or pass --promiscuous";

class ReplayFirstRun : public ::testing::Test {
 protected:
  void SetUp() override {
    // The capture's gateway had another MAC: its frames are not addressed to the demo port's.
    std::string cfg = read_text(demo_config());
    const std::regex port_mac(R"(mac = "02:00:00:00:00:01")");
    ASSERT_TRUE(std::regex_search(cfg, port_mac)) << "config/demo.toml's port MAC changed";
    write_text(dir_ / "elsewhere.toml",
               std::regex_replace(cfg, port_mac, R"(mac = "02:00:00:00:aa:01")"));
    write_text(dir_ / "promiscuous.toml",
               std::regex_replace(cfg, port_mac,
                                  "mac = \"02:00:00:00:00:01\"\npromiscuous = true"));
    write_text(dir_ / "profile.toml", kProfile);
    const auto gen = run_pcapgen(dir_ / "elsewhere.toml", dir_ / "profile.toml",
                                 dir_ / "in.pcap", dir_);
    ASSERT_EQ(gen.exit_code, 0) << gen.report << environment_hint();
    std::string err;
    packets_ = count_pcap(dir_ / "in.pcap", &err);
    ASSERT_TRUE(err.empty()) << err;
    ASSERT_GT(packets_, 200u);
  }

  CommandResult replay(const fs::path& config, std::vector<std::string> extra,
                       const std::string& tag) {
    std::vector<std::string> argv{meshgate_path().string(), "--config", config.string(),
                                  "--pcap-in", (dir_ / "in.pcap").string(), "--pcap-out",
                                  (dir_ / (tag + ".pcap")).string(), "--stats-json",
                                  (dir_ / (tag + ".json")).string(), "--log-level", "warn"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_command(argv, dir_, tag);
  }

  nlohmann::json stats(const std::string& tag) {
    std::string err;
    auto j = read_json(dir_ / (tag + ".json"), &err);
    EXPECT_TRUE(err.empty()) << err;
    return j;
  }

  // Forwarded, all of it: the capture's frames taken as if sent to this port.
  void expect_all_forwarded(const std::string& tag, const CommandResult& r) {
    const auto j = stats(tag);
    expect_counters_add_up(j, packets_);
    EXPECT_EQ(count(j.at("drops"), "l2_not_for_us"), 0u);
    EXPECT_EQ(count(j, "drops_total"), 0u);
    EXPECT_EQ(count(j, "packets_out"), packets_);
    EXPECT_EQ(r.out.find(kHint), std::string::npos) << r.out;
  }

  TempDir dir_;
  uint64_t packets_ = 0;
};

TEST_F(ReplayFirstRun, a_capture_for_another_mac_is_dropped_and_the_summary_says_why) {
  const auto r = replay(demo_config(), {}, "plain");
  ASSERT_EQ(r.exit_code, 0) << r.report << environment_hint();
  const auto j = stats("plain");
  expect_counters_add_up(j, packets_);
  EXPECT_EQ(count(j.at("drops"), "l2_not_for_us"), packets_);
  EXPECT_EQ(count(j, "packets_out"), 0u);
  EXPECT_NE(r.out.find(kHint), std::string::npos) << r.out;
}

TEST_F(ReplayFirstRun, promiscuous_flag_forwards_a_capture_for_another_mac) {
  const auto r = replay(demo_config(), {"--promiscuous"}, "flag");
  ASSERT_EQ(r.exit_code, 0) << r.report << environment_hint();
  expect_all_forwarded("flag", r);
}

TEST_F(ReplayFirstRun, promiscuous_port_key_forwards_a_capture_for_another_mac) {
  const auto r = replay(dir_ / "promiscuous.toml", {}, "key");
  ASSERT_EQ(r.exit_code, 0) << r.report << environment_hint();
  expect_all_forwarded("key", r);
}

TEST_F(ReplayFirstRun, summary_ends_with_actual_and_rated_lines_and_port_counters_match) {
  const auto r = replay(demo_config(), {"--promiscuous"}, "rate");
  ASSERT_EQ(r.exit_code, 0) << r.report << environment_hint();
  const auto j = stats("rate");
  const uint64_t bytes = count(j, "bytes_in");
  const std::regex actual("\nActual: " + std::to_string(packets_) + " packets \\(" +
                          std::to_string(bytes) +
                          " bytes\\) processed in [0-9]+\\.[0-9]{6} seconds\n"
                          "Rated: [0-9]+\\.[0-9] Bps, [0-9]+\\.[0-9]{2} Mbps, "
                          "[0-9]+\\.[0-9]{2} pps\n$");
  EXPECT_TRUE(std::regex_search(r.out, actual)) << r.out;
  // The port's own counters (rte_eth_stats_get on net_pcap) saw exactly the replay.
  ASSERT_EQ(j.at("ports").size(), 1u);
  const auto& port = j.at("ports")[0];
  EXPECT_EQ(count(port, "ipackets"), packets_);
  EXPECT_EQ(count(port, "ibytes"), bytes);
  EXPECT_EQ(count(port, "opackets"), count(j, "packets_out"));
  EXPECT_EQ(count(port, "obytes"), count(j, "bytes_out"));
  EXPECT_EQ(count(port, "imissed") + count(port, "ierrors") + count(port, "oerrors") +
                count(port, "rx_nombuf"),
            0u);
  EXPECT_NE(r.out.find("  port net0         in " + std::to_string(packets_) + ", out " +
                       std::to_string(packets_) + ", missed 0"),
            std::string::npos)
      << r.out;
}

TEST_F(ReplayFirstRun, progress_is_printed_into_a_file_with_the_flag_only) {
  const auto quiet = replay(demo_config(), {"--promiscuous"}, "quiet");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.report << environment_hint();
  EXPECT_EQ(quiet.err.find("replay: "), std::string::npos) << quiet.err;
  const auto r = replay(demo_config(), {"--promiscuous", "--progress"}, "progress");
  ASSERT_EQ(r.exit_code, 0) << r.report << environment_hint();
  const std::string total = std::to_string(packets_);
  // A line per report, no carriage returns: a log file reads one line each.
  EXPECT_NE(r.err.find("replay: " + total + "/" + total + " packets (100.0%), "),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
}

TEST_F(ReplayFirstRun, replay_only_flags_need_pcap_in) {
  for (const char* flag : {"--progress", "--promiscuous"}) {
    const auto r = run_command({meshgate_path().string(), "--config", demo_config().string(),
                                "--check", flag},
                               dir_, "usage");
    EXPECT_EQ(r.exit_code, 2) << r.report;
    EXPECT_NE(r.err.find(std::string(flag) + " needs --pcap-in"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace meshgate::golden
