// pcapgen: traffic profiles -> pcap for meshgate replays and tests (README.md).
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "control/config/config.h"
#include "tools/pcapgen/generator.h"
#include "tools/pcapgen/profile.h"
#include "tools/pktlib/malformed.h"

namespace {

// Exit codes as meshgate's (README.md "Running it"): 2 for usage and input errors, 1 for runtime failures.
constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;

}  // namespace

int main(int argc, char** argv) {
  using namespace meshgate;
  CLI::App app{"pcapgen: generate a pcap of client traffic (and backend replies) for a meshgate "
               "config from a traffic profile"};
  std::string config_path, profile_path;
  pcapgen::Options opts;
  uint64_t packets = 0, seed = 0, rate = 0;
  bool list_malformed = false;
  app.add_option("--config", config_path, "meshgate config (TOML)");
  app.add_option("--profile", profile_path, "traffic profile (TOML, see tools/pcapgen/README.md)");
  app.add_option("--out", opts.out_path, "output pcap; the sidecar goes to OUT.json");
  auto* packets_opt = app.add_option("--packets", packets,
                                     "total packets: scales the profile's flows to reach N");
  auto* seed_opt = app.add_option("--seed", seed, "random seed (overrides the profile's)");
  auto* rate_opt = app.add_option("--rate", rate, "packets per second for the timestamps")
                       ->check(CLI::Range(uint64_t{1}, uint64_t{1000000000}));
  app.add_flag("--list-malformed", list_malformed,
               "print the malformation classes (drop reason names) and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every other parse error is a usage error.
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }

  if (list_malformed) {
    for (const auto& k : pkt::malformed_kinds()) std::printf("%-24s %s\n", k.name, k.fault);
    return 0;
  }
  if (config_path.empty() || profile_path.empty() || opts.out_path.empty()) {
    std::fprintf(stderr, "pcapgen: --config, --profile and --out are required\n%s",
                 app.help().c_str());
    return kExitUsage;
  }
  if (*packets_opt) opts.packets = packets;
  if (*seed_opt) opts.seed = seed;
  if (*rate_opt) opts.rate_pps = rate;

  auto config = ctl::load_config(config_path);
  if (!config) {
    std::fprintf(stderr, "%s", config.error().str().c_str());
    return kExitUsage;
  }
  auto profile = pcapgen::load_profile(profile_path);
  if (!profile) {
    std::fprintf(stderr, "%s", profile.error().message.c_str());
    return kExitUsage;
  }
  auto result = pcapgen::generate(*config, *profile, opts);
  if (!result) {
    std::fprintf(stderr, "pcapgen: %s\n", result.error().message.c_str());
    return kExitRuntime;
  }
  for (const auto& w : result->warnings) std::fprintf(stderr, "pcapgen: warning: %s\n", w.c_str());
  std::fprintf(stderr, "pcapgen: wrote %llu packets to %s (+ %s.json)\n",
               static_cast<unsigned long long>(result->packets), opts.out_path.c_str(),
               opts.out_path.c_str());
  return 0;
}
