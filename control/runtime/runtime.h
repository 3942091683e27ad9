// The gateway process: EAL, ports, snapshot, workers on their lcores, and the control loop on
// the main lcore (signals, replay progress, neighbor fan-out, snapshot reclamation), then the
// summary and --stats-json at exit. Main thread.
#pragma once

#include <string>
#include <vector>

#include "control/common/log.h"
#include "control/config/config.h"
#include "control/runtime/eal.h"
#include "dataplane/proxy/proxy.h"

namespace meshgate::ctl {

struct RunOptions {
  std::string pcap_in;
  std::string pcap_out;
  std::string stats_json;
  uint32_t workers = 0;  // overrides [gateway] workers when > 0
  std::vector<std::string> eal_args;
  LogLevel log_level = LogLevel::kInfo;
  bool progress = false;     // replay progress on stderr even when it is not a terminal
  bool promiscuous = false;  // replay: the replayed port takes frames to any MAC
};

// Exit codes (README.md "Running it").
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;

// Each worker's proxy settings from [proxy] and the ports (the MSS follows the smallest MTU),
// with a fresh random secret for ISNs and SYN cookies.
dp::ProxyParams proxy_params(const Config& cfg);

// SIGINT / SIGQUIT (stop at once), SIGTERM (drain in live mode, stop in a replay) and SIGHUP
// (reload the config file in live mode, config/README.md "Reloading"; ignored in a replay) only
// set flags that run_gateway's control loop acts on, so the stopping ones end with the summary,
// --stats-json and the EAL cleaned up, and a reload runs on the control thread. main installs
// them before anything starts: a signal during start-up is acted on once the loop runs.
void install_signal_handlers();

// The mbuf pool a start of `cfg` with `workers` workers sizes: every port's descriptors, the
// workers' bursts, queues and caches, the host twins', the TCP stack's buffers, and each frame of
// a net_pcap device (of `devices`, the ports' as started) with infinite_rx=1.
uint64_t mbufs_needed(const Config& cfg, uint32_t workers, const std::vector<std::string>& devices);

// What a start of `cfg` with `opt` needs of the host's memory, figured as the start figures it
// before the EAL (it refuses to start when !fits()): --check says it.
MemoryNeed start_memory_need(const Config& cfg, const RunOptions& opt);

int run_gateway(const Config& cfg, const RunOptions& opt);

}  // namespace meshgate::ctl
