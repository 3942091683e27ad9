// Support for the pcap replay tests (tests/golden): a temporary directory per test, pcapgen and
// meshgate run as subprocesses, their pcaps and JSON files loaded. Test threads only.
//
// Paths of the tools come from compile definitions set by tests/golden/CMakeLists.txt:
// MG_SOURCE_DIR, MG_PCAPGEN (tools/pcapgen) and MG_MESHGATE (apps/meshgate).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tools/pktlib/build.h"

namespace meshgate::golden {

namespace fs = std::filesystem;

// A fresh directory under $TMPDIR (mkdtemp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

struct CommandResult {
  int exit_code = -1;  // the exit status, or 128 + signal when killed by one
  std::string out;     // stdout
  std::string err;     // stderr
  double seconds = 0;  // wall time
  // "<command line>\nexit N\n--- stdout ---\n...\n--- stderr ---\n..." for failure messages.
  std::string report;
};

// Runs argv[0] (a path, or a name looked up in PATH) with its arguments (no shell); stdout and stderr go to files in `dir`, then are
// read back. Never throws for a failing command: the caller asserts on exit_code.
CommandResult run_command(const std::vector<std::string>& argv, const TempDir& dir,
                          const std::string& tag);

// Where the source tree and the tools are.
fs::path source_dir();
fs::path pcapgen_path();
fs::path meshgate_path();
fs::path demo_config();  // config/demo.toml
fs::path profile_path(const std::string& name);  // tools/pcapgen/profiles/<name>.toml

// pcapgen --config CONFIG --profile PROFILE --out OUT (sidecar OUT.json).
CommandResult run_pcapgen(const fs::path& config, const fs::path& profile, const fs::path& out,
                          const TempDir& dir);
// meshgate --config CONFIG --pcap-in IN --pcap-out OUT --stats-json STATS --log-level warn.
CommandResult run_meshgate(const fs::path& config, const fs::path& in, const fs::path& out,
                           const fs::path& stats, const TempDir& dir);

// Reads a whole pcap. Sets *error (and returns what was read) on a damaged file.
struct PcapRecord {
  uint64_t ts_ns = 0;
  pkt::Bytes frame;
};
std::vector<PcapRecord> read_pcap(const fs::path& path, std::string* error);
// The number of records, without keeping them.
uint64_t count_pcap(const fs::path& path, std::string* error);

// Parses a JSON file; *error is set when it is missing or not JSON.
nlohmann::json read_json(const fs::path& path, std::string* error);
std::string read_text(const fs::path& path);
void write_text(const fs::path& path, const std::string& text);

// ---- Assertions shared by the replay tests (GoogleTest EXPECTs; missing keys throw, which
// GoogleTest reports as a failure). ----

// A counter of the stats JSON (or of any object), by key.
uint64_t count(const nlohmann::json& j, const std::string& key);

// packets_in equals the input's record count, and every packet is accounted for exactly once:
// packets_in + packets_generated == packets_out + packets_consumed + drops_total +
// packets_pending, with drops_total the sum of drops{}. In a topology with static neighbors and
// no ARP/NDP replies in the input the only generated packets are ICMP time exceeded errors
// (one per ttl_exceeded drop, or rate-limited), and nothing is left pending.
void expect_counters_add_up(const nlohmann::json& stats, uint64_t input_packets,
                            uint64_t expected_consumed = 0);

// Every drop reason the gateway reports equals the sidecar's malformed count for it (0 for the
// reasons the sidecar does not list), and every reason the sidecar lists is a reason the
// gateway knows.
void expect_drops_equal_sidecar(const nlohmann::json& stats, const nlohmann::json& sidecar);

// Hints for a failing replay: meshgate needs root (DPDK), pcapgen and meshgate must be built.
std::string environment_hint();

}  // namespace meshgate::golden
