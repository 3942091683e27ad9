// pcapgen's generator: a meshgate config + a traffic profile -> a pcap of what the gateway's
// port would receive, and a JSON sidecar counting what was generated. Tool main thread only.
//
// Backends are predicted exactly as the dataplane chooses them (tables built as
// control/snapshot/maglev.h builds them, looked up as dataplane/lb/lb.h does), so replies
// in the capture come from the backend the gateway will pick, and the sidecar's per-backend
// counts are what the gateway's own counters must show.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/common/result.h"
#include "control/config/config.h"
#include "tools/pcapgen/profile.h"

namespace meshgate::pcapgen {

struct Options {
  std::string out_path;             // the pcap; the sidecar is out_path + ".json"
  std::optional<uint64_t> packets;  // overrides of the profile (command line)
  std::optional<uint64_t> seed;
  std::optional<uint64_t> rate_pps;
};

struct Generated {
  uint64_t packets = 0;
  std::string sidecar_json;           // also written to out_path + ".json"
  std::vector<std::string> warnings;  // things left out (printed by the caller)
};

ctl::Result<Generated> generate(const ctl::Config& config, const Profile& profile,
                             const Options& options);

}  // namespace meshgate::pcapgen
