// replay_million: pcapgen's million profile (exactly 1,000,000 packets: ~53,000 flows of every
// class, IMIX, replies, ~1,000 frames of every malformation class) through meshgate with
// config/demo.toml as shipped. Checks that the replay finishes, that the counters add up, that
// nothing is forwarded statelessly (the profile fits the demo's flow table), that the drops per
// reason, the flows and the per-service packets equal the sidecar's, and prints the replay time
// (not asserted).
//
// The replay runs once for the suite (SetUpTestSuite) in a temporary directory removed at the end.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "tests/golden/replay_support.h"

namespace meshgate::golden {
namespace {

class ReplayMillion : public ::testing::Test {
 protected:
  struct Run {
    TempDir dir;
    std::string error;
    CommandResult pcapgen, meshgate;
    uint64_t input_packets = 0;
    uint64_t output_packets = 0;  // records in --pcap-out
    nlohmann::json sidecar, stats;
  };

  static void SetUpTestSuite() {
    run_ = std::make_unique<Run>();
    Run& r = *run_;
    r.pcapgen = run_pcapgen(demo_config(), profile_path("million"), r.dir / "in.pcap", r.dir);
    if (r.pcapgen.exit_code != 0) {
      r.error = "pcapgen failed: " + r.pcapgen.report + environment_hint();
      return;
    }
    std::string err;
    r.sidecar = read_json(r.dir / "in.pcap.json", &err);
    if (!err.empty()) {
      r.error = err;
      return;
    }
    r.meshgate = run_meshgate(demo_config(), r.dir / "in.pcap", r.dir / "out.pcap",
                              r.dir / "stats.json", r.dir);
    if (r.meshgate.exit_code != 0) {
      r.error = "meshgate failed: " + r.meshgate.report + environment_hint();
      return;
    }
    r.input_packets = count(r.sidecar, "packets");
    r.stats = read_json(r.dir / "stats.json", &r.error);
    r.output_packets = count_pcap(r.dir / "out.pcap", &r.error);
    std::printf("replay_million: pcapgen %.2f s; meshgate %llu packets in %.2f s wall time "
                "(EAL start-up included) = %.0f packets/s\n",
                r.pcapgen.seconds, (unsigned long long)r.input_packets, r.meshgate.seconds,
                double(r.input_packets) / r.meshgate.seconds);
    std::fflush(stdout);
  }
  static void TearDownTestSuite() { run_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(run_);
    ASSERT_TRUE(run_->error.empty()) << run_->error;
  }

  static std::unique_ptr<Run> run_;
};

std::unique_ptr<ReplayMillion::Run> ReplayMillion::run_;

TEST_F(ReplayMillion, replay_of_a_million_packets_finishes_and_every_packet_is_accounted_for) {
  EXPECT_EQ(run_->input_packets, 1'000'000u) << "the million profile changed";
  expect_counters_add_up(run_->stats, run_->input_packets);
  EXPECT_EQ(count(run_->stats, "packets_out"), run_->output_packets)
      << "packets_out vs records in --pcap-out";
}

TEST_F(ReplayMillion, drops_per_reason_equal_the_sidecar_for_every_malformation_class) {
  const auto& malformed = run_->sidecar.at("malformed");
  EXPECT_GE(malformed.size(), 30u) << "the million profile asks for every malformation class";
  for (const auto& [reason, n] : malformed.items()) {
    EXPECT_GT(n.get<uint64_t>(), 0u) << "sidecar malformed." << reason;
  }
  expect_drops_equal_sidecar(run_->stats, run_->sidecar);
}

TEST_F(ReplayMillion, flows_created_and_per_service_packets_equal_the_sidecar) {
  const auto& services = run_->stats.at("services");
  uint64_t flows = 0;
  for (const auto& [name, svc] : run_->sidecar.at("services").items()) {
    SCOPED_TRACE(name);
    flows += count(svc, "flows");
    ASSERT_TRUE(services.contains(name));
    // The gateway counts both directions per service; the sidecar splits them.
    EXPECT_EQ(count(services.at(name), "packets"),
              count(svc, "packets") + count(svc, "reply_packets"));
    EXPECT_EQ(count(services.at(name), "flows"), count(svc, "flows"));
  }
  EXPECT_EQ(count(run_->stats, "stateless_packets"), 0u) << "the profile outgrew the flow table";
  EXPECT_EQ(count(run_->stats, "flows_created"), flows);
  EXPECT_EQ(count(run_->stats, "flows_active"), flows) << "nothing expires within one second";
  uint64_t echo = 0;
  for (const auto& [addr, n] : run_->sidecar.at("icmp_echo").items()) echo += n.get<uint64_t>();
  EXPECT_EQ(count(run_->stats, "echo_replies"), echo);
}

}  // namespace
}  // namespace meshgate::golden
