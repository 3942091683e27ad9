#include "tests/golden/replay_support.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tools/pktlib/pcap.h"

#ifndef MG_SOURCE_DIR
#error "MG_SOURCE_DIR must be defined (tests/golden/CMakeLists.txt)"
#endif
#ifndef MG_PCAPGEN
#error "MG_PCAPGEN must be defined (tests/golden/CMakeLists.txt)"
#endif
#ifndef MG_MESHGATE
#error "MG_MESHGATE must be defined (tests/golden/CMakeLists.txt)"
#endif

namespace meshgate::golden {

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "meshgate-replay-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    // Nothing useful can run without it; GoogleTest reports the exception as a failure.
    throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

CommandResult run_command(const std::vector<std::string>& argv, const TempDir& dir,
                          const std::string& tag) {
  CommandResult r;
  const fs::path out_path = dir / (tag + ".stdout");
  const fs::path err_path = dir / (tag + ".stderr");
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;

  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    r.report = line + "\nfork failed: " + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  r.report = line + "\nexit " + std::to_string(r.exit_code) + "\n--- stdout ---\n" + r.out +
             "--- stderr ---\n" + r.err;
  return r;
}

fs::path source_dir() { return MG_SOURCE_DIR; }
fs::path pcapgen_path() { return MG_PCAPGEN; }
fs::path meshgate_path() { return MG_MESHGATE; }
fs::path demo_config() { return source_dir() / "config" / "demo.toml"; }
fs::path profile_path(const std::string& name) {
  return source_dir() / "tools" / "pcapgen" / "profiles" / (name + ".toml");
}

CommandResult run_pcapgen(const fs::path& config, const fs::path& profile, const fs::path& out,
                          const TempDir& dir) {
  return run_command({pcapgen_path().string(), "--config", config.string(), "--profile",
                      profile.string(), "--out", out.string()},
                     dir, "pcapgen");
}

CommandResult run_meshgate(const fs::path& config, const fs::path& in, const fs::path& out,
                           const fs::path& stats, const TempDir& dir) {
  return run_command({meshgate_path().string(), "--config", config.string(), "--pcap-in",
                      in.string(), "--pcap-out", out.string(), "--stats-json", stats.string(),
                      "--log-level", "warn"},
                     dir, "meshgate");
}

std::vector<PcapRecord> read_pcap(const fs::path& path, std::string* error) {
  std::vector<PcapRecord> v;
  auto r = pkt::PcapReader::open(path.string());
  if (!r) {
    *error = r.error().message;
    return v;
  }
  PcapRecord rec;
  while (r->next(&rec.ts_ns, &rec.frame)) v.push_back(rec);
  if (!r->error().empty()) *error = r->error();
  else if (r->linktype() != pkt::kLinktypeEthernet)
    *error = path.string() + ": link type " + std::to_string(r->linktype()) + ", not Ethernet";
  return v;
}

uint64_t count_pcap(const fs::path& path, std::string* error) {
  auto r = pkt::PcapReader::open(path.string());
  if (!r) {
    *error = r.error().message;
    return 0;
  }
  uint64_t n = 0, ts;
  pkt::Bytes frame;
  while (r->next(&ts, &frame)) ++n;
  if (!r->error().empty()) *error = r->error();
  return n;
}

nlohmann::json read_json(const fs::path& path, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot open " + path.string();
    return {};
  }
  try {
    return nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    *error = path.string() + ": " + e.what();
    return {};
  }
}

uint64_t count(const nlohmann::json& j, const std::string& key) {
  return j.at(key).get<uint64_t>();
}

void expect_counters_add_up(const nlohmann::json& stats, uint64_t input_packets,
                            uint64_t expected_consumed) {
  const uint64_t in = count(stats, "packets_in");
  const uint64_t out = count(stats, "packets_out");
  const uint64_t drops = count(stats, "drops_total");
  const uint64_t generated = count(stats, "packets_generated");
  const uint64_t consumed = count(stats, "packets_consumed");
  const uint64_t pending = count(stats, "packets_pending");
  EXPECT_EQ(in, input_packets) << "the gateway did not read every record of the input pcap";
  // Every next hop is a static neighbor: the only packets the gateway makes are ICMP errors,
  // sent or rate-limited: one for each ttl_exceeded drop, and one for each mtu_exceeded drop
  // of a packet that forbade fragmenting.
  EXPECT_EQ(generated, count(stats, "icmp_errors_sent"));
  const uint64_t errors = count(stats, "icmp_errors_sent") + count(stats, "icmp_rate_limited");
  EXPECT_GE(errors, count(stats.at("drops"), "ttl_exceeded"));
  EXPECT_LE(errors, count(stats.at("drops"), "ttl_exceeded") +
                        count(stats.at("drops"), "mtu_exceeded"));
  EXPECT_EQ(consumed, expected_consumed);
  EXPECT_EQ(pending, 0u) << "packets left waiting for a neighbor at exit";
  EXPECT_EQ(in + generated, out + consumed + drops + pending)
      << "in " << in << " + generated " << generated << " != out " << out << " + consumed "
      << consumed << " + drops " << drops << " + pending " << pending;
  uint64_t sum = 0;
  for (const auto& [reason, n] : stats.at("drops").items()) sum += n.get<uint64_t>();
  EXPECT_EQ(sum, drops) << "drops_total is not the sum of drops{}";
  // The replay port's own counters (net_pcap, read with rte_eth_stats_get) agree with the
  // workers': nothing was lost before them.
  ASSERT_EQ(stats.at("ports").size(), 1u);
  const nlohmann::json& port = stats.at("ports")[0];
  EXPECT_EQ(count(port, "ipackets"), in);
  EXPECT_EQ(count(port, "ibytes"), count(stats, "bytes_in"));
  EXPECT_EQ(count(port, "opackets"), out);
  EXPECT_EQ(count(port, "obytes"), count(stats, "bytes_out"));
  EXPECT_EQ(count(port, "imissed"), 0u);
  EXPECT_EQ(count(port, "rx_nombuf"), 0u);
  EXPECT_EQ(count(port, "oerrors"), 0u);
}

void expect_drops_equal_sidecar(const nlohmann::json& stats, const nlohmann::json& sidecar) {
  const auto& drops = stats.at("drops");
  const auto& malformed = sidecar.at("malformed");
  for (const auto& [reason, n] : drops.items()) {
    const uint64_t want = malformed.contains(reason) ? malformed.at(reason).get<uint64_t>() : 0;
    EXPECT_EQ(n.get<uint64_t>(), want) << "drops." << reason << " (sidecar malformed." << reason
                                       << (malformed.contains(reason) ? "" : " absent: 0") << ")";
  }
  for (const auto& [reason, n] : malformed.items()) {
    EXPECT_TRUE(drops.contains(reason))
        << "the sidecar has malformation class " << reason << " (" << n
        << " frames) but the gateway has no drop reason of that name";
  }
}

std::string environment_hint() {
  std::string s;
  if (geteuid() != 0) s += "meshgate runs DPDK and needs root (CI runs the tests as root). ";
  if (!fs::exists(pcapgen_path())) s += "missing " + pcapgen_path().string() + ". ";
  if (!fs::exists(meshgate_path())) s += "missing " + meshgate_path().string() + ". ";
  return s;
}

}  // namespace meshgate::golden
