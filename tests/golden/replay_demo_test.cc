// replay_demo: pcapgen's demo profile (a few hundred flows, IMIX, echo, one frame of every
// malformation class) through meshgate with config/demo.toml. Checks the run, the counters,
// one drop per malformation class under its own reason, and (with tshark, independently of
// pktlib) that every IP / TCP / UDP / ICMP / ICMPv6 checksum meshgate sent is right.
//
// The replay runs once for the suite (SetUpTestSuite) in a temporary directory removed at the end.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "tests/golden/replay_support.h"
#include "tools/pktlib/malformed.h"

namespace meshgate::golden {
namespace {

// tshark's *.checksum.status values (epan/proto.h: PROTO_CHECKSUM_E_BAD / _GOOD / _UNVERIFIED).
constexpr int kCsumBad = 0;
constexpr int kCsumGood = 1;

const char* const kCsumFields[] = {"ip.checksum.status", "tcp.checksum.status",
                                   "udp.checksum.status", "icmp.checksum.status",
                                   "icmpv6.checksum.status"};

struct ChecksumCensus {
  size_t frames = 0;
  // field -> status -> count
  std::map<std::string, std::map<int, uint64_t>> status;
  // field -> frame numbers (1-based, as tshark shows them) with a bad checksum
  std::map<std::string, std::vector<std::string>> bad_frames;
};

uint64_t status_count(const ChecksumCensus& c, const std::string& field, int status) {
  const auto f = c.status.find(field);
  if (f == c.status.end()) return 0;
  const auto s = f->second.find(status);
  return s == f->second.end() ? 0 : s->second;
}

// tshark with IP / TCP / UDP checksum validation on (ICMP and ICMPv6 are always validated),
// one line per frame, every occurrence of each status field (ICMP errors quote headers).
ChecksumCensus tshark_census(const fs::path& pcap, const TempDir& dir, std::string* error) {
  std::vector<std::string> argv = {"tshark", "-r", pcap.string(), "-n",
                                   "-o", "ip.check_checksum:TRUE",
                                   "-o", "tcp.check_checksum:TRUE",
                                   "-o", "udp.check_checksum:TRUE",
                                   "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a",
                                   "-E", "aggregator=,", "-e", "frame.number"};
  for (const char* f : kCsumFields) {
    argv.push_back("-e");
    argv.push_back(f);
  }
  // stderr goes to a file, never to the test output: tshark warns when run as root.
  const auto r = run_command(argv, dir, "tshark-" + pcap.filename().string());
  ChecksumCensus c;
  if (r.exit_code != 0) {
    *error = "tshark failed (is it installed? apt-get install tshark)\n" + r.report;
    return c;
  }
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    ++c.frames;
    std::vector<std::string> cols;
    std::string col;
    std::istringstream cs(line);
    while (std::getline(cs, col, '\t')) cols.push_back(col);
    for (size_t i = 0; i < std::size(kCsumFields); ++i) {
      if (i + 1 >= cols.size() || cols[i + 1].empty()) continue;
      std::istringstream vs(cols[i + 1]);
      std::string v;
      while (std::getline(vs, v, ',')) {
        const int s = std::stoi(v);
        ++c.status[kCsumFields[i]][s];
        if (s == kCsumBad) c.bad_frames[kCsumFields[i]].push_back(cols[0]);
      }
    }
  }
  return c;
}

class ReplayDemo : public ::testing::Test {
 protected:
  struct Run {
    TempDir dir;
    std::string error;  // set when generating or replaying failed: every test fails with it
    CommandResult meshgate;
    uint64_t input_packets = 0;
    uint64_t output_packets = 0;
    nlohmann::json sidecar, stats;
  };

  static void SetUpTestSuite() {
    run_ = std::make_unique<Run>();
    Run& r = *run_;
    const auto gen = run_pcapgen(demo_config(), profile_path("demo"), r.dir / "in.pcap", r.dir);
    if (gen.exit_code != 0) {
      r.error = "pcapgen failed: " + gen.report + environment_hint();
      return;
    }
    r.meshgate = run_meshgate(demo_config(), r.dir / "in.pcap", r.dir / "out.pcap",
                              r.dir / "stats.json", r.dir);
    if (r.meshgate.exit_code != 0) {
      r.error = "meshgate failed: " + r.meshgate.report + environment_hint();
      return;
    }
    std::string err;
    r.input_packets = count_pcap(r.dir / "in.pcap", &err);
    if (err.empty()) r.output_packets = count_pcap(r.dir / "out.pcap", &err);
    if (err.empty()) r.sidecar = read_json(r.dir / "in.pcap.json", &err);
    if (err.empty()) r.stats = read_json(r.dir / "stats.json", &err);
    r.error = err;
  }
  static void TearDownTestSuite() { run_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(run_);
    ASSERT_TRUE(run_->error.empty()) << run_->error;
  }

  static std::unique_ptr<Run> run_;
};

std::unique_ptr<ReplayDemo::Run> ReplayDemo::run_;

TEST_F(ReplayDemo, replay_exits_0_and_every_packet_is_accounted_for) {
  EXPECT_EQ(run_->meshgate.exit_code, 0);
  EXPECT_EQ(run_->input_packets, count(run_->sidecar, "packets"));
  expect_counters_add_up(run_->stats, run_->input_packets);
  EXPECT_EQ(count(run_->stats, "packets_out"), run_->output_packets)
      << "packets_out vs records in --pcap-out";
}

TEST_F(ReplayDemo, every_malformation_class_is_dropped_once_under_its_own_reason) {
  const auto& malformed = run_->sidecar.at("malformed");
  // The demo profile asks for every class pktlib knows; config/demo.toml can express them all.
  std::set<std::string> kinds, listed;
  for (const auto& k : pkt::malformed_kinds()) kinds.insert(k.name);
  for (const auto& [reason, n] : malformed.items()) {
    listed.insert(reason);
    EXPECT_EQ(n.get<uint64_t>(), 1u) << "sidecar malformed." << reason;
    EXPECT_EQ(count(run_->stats.at("drops"), reason), 1u) << "drops." << reason;
  }
  EXPECT_EQ(listed, kinds) << "the demo capture lacks malformation classes";
  // ... and nothing else is dropped.
  expect_drops_equal_sidecar(run_->stats, run_->sidecar);
  EXPECT_EQ(count(run_->stats, "drops_total"), kinds.size());
}

TEST_F(ReplayDemo, flows_created_and_echo_replies_equal_the_sidecar) {
  uint64_t flows = 0, echo = 0;
  for (const auto& [name, svc] : run_->sidecar.at("services").items()) flows += count(svc, "flows");
  for (const auto& [addr, n] : run_->sidecar.at("icmp_echo").items()) echo += n.get<uint64_t>();
  EXPECT_GT(flows, 0u);
  EXPECT_EQ(count(run_->stats, "flows_created"), flows);
  EXPECT_EQ(count(run_->stats, "echo_replies"), echo);
}

TEST_F(ReplayDemo, tshark_finds_no_bad_checksum_in_the_output_and_good_ones_of_every_protocol) {
  std::string err;
  const ChecksumCensus c = tshark_census(run_->dir / "out.pcap", run_->dir, &err);
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(c.frames, run_->output_packets) << "tshark did not read every output frame";
  for (const char* f : kCsumFields) {
    const uint64_t bad = status_count(c, f, kCsumBad);
    const uint64_t good = status_count(c, f, kCsumGood);
    std::string frames;
    if (c.bad_frames.count(f)) {
      for (const auto& n : c.bad_frames.at(f)) frames += " " + n;
    }
    EXPECT_EQ(bad, 0u) << f << ": bad in output frames" << frames;
    EXPECT_GT(good, 0u) << f << ": no verified checksum at all (the demo has TCP, UDP, ICMP and "
                        << "ICMPv6 over IPv4 and IPv6)";
  }
}

// The checker itself: the input carries frames with a corrupted IPv4 header checksum and a
// corrupted ICMP checksum, which tshark must call bad, or the output check proves nothing.
TEST_F(ReplayDemo, tshark_checker_flags_the_corrupted_checksums_of_the_input) {
  std::string err;
  const ChecksumCensus c = tshark_census(run_->dir / "in.pcap", run_->dir, &err);
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_GE(status_count(c, "ip.checksum.status", kCsumBad), 1u) << "ipv4_bad_checksum not seen";
  EXPECT_GE(status_count(c, "icmp.checksum.status", kCsumBad), 1u) << "icmp_bad_checksum not seen";
}

}  // namespace
}  // namespace meshgate::golden
