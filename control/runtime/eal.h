// EAL bring-up: the default arguments (README.md "What works today": hugepages when present,
// --no-huge otherwise, a unique file prefix, lcores for the workers, no PCI probing unless a port
// is PCI) merged with the user's own after `--`. Main thread, before anything else touches DPDK.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/common/log.h"
#include "control/common/result.h"
#include "control/config/config.h"

namespace meshgate::ctl {

bool is_pci_address(const std::string& device);

struct EalPlan {
  std::vector<std::string> args;  // argv[1..] for rte_eal_init
  bool hugepages = false;
  uint32_t memory_mb = 0;
  bool user_args = false;    // the user gave EAL arguments after `--`
  bool user_memory = false;  // ... and among them --no-huge, -m or --socket-mem
  // The defaults left out because the user gave the same option or a conflicting one, by
  // name ("lcores", "no-pci"), in the order plan_eal_on considers them.
  std::vector<std::string> replaced;
};

// One option of an EAL argument list: its long name ("lcores", "allow", "block", "help") or,
// for a short option without one, its letter ("l", "c", "m"); its value, "" when none.
struct EalOption {
  std::string name;
  std::string value;
};
// Reads an EAL argument list as rte_eal_init's getopt_long does with DPDK 22.11's options: a
// value after '=' or in the next word (after the letter or in the next word for a short
// option), short options clustered, a long option by any unambiguous prefix. An unknown option
// is kept with no value; a word that is not an option is skipped; "--" ends the options.
std::vector<EalOption> parse_eal_options(const std::vector<std::string>& args);

// What plan_eal reads from the host, given to plan_eal_on so that the merge is a pure function.
struct EalHost {
  uint64_t free_hugepage_mb = 0;
  std::vector<int> cpus;  // the CPUs the process may run on; CPU 0 when empty
  std::string file_prefix;
};

// Memory the process needs: mbuf pool, flow tables, per-worker counters, tables, slack.
uint32_t estimate_memory_mb(const Config& cfg, uint32_t workers, uint32_t mbufs);
// Memory outside the EAL's that the first snapshot takes: each static service's Maglev table
// (4 bytes a slot; 65537 slots when automatic: 256 KiB a service) and its entries. Mesh
// services are not known before their source answers and are not counted.
uint64_t estimate_table_bytes(const Config& cfg);
// The Maglev table of one service: 4 bytes a slot.
uint64_t maglev_table_bytes(const ServiceConfig& s);
// Memory outside the EAL's that a reload from `running` to `next` adds while the running
// snapshot still serves: the Maglev table of each service of `next` that is built anew (added,
// or its backends, weights or table size changed; the builder reuses the others' tables) and
// every service's entries. Counted as estimate_table_bytes counts them.
struct ReloadTables {
  uint64_t bytes = 0;
  size_t built = 0;          // services whose table is built anew
  size_t largest = SIZE_MAX; // index in next.services of the largest of them (SIZE_MAX: none)
};
ReloadTables estimate_reload_tables(const Config& running, const Config& next);
// Memory this process can still take, in MB: MemAvailable, or what the cgroup's memory.max
// leaves when that is less. 0 when unknown.
uint64_t available_memory_mb();

// What a start needs of the host's memory before the EAL takes any: the EAL's part (from RAM
// unless hugepages hold it) and the static services' Maglev tables (always ordinary memory).
struct MemoryNeed {
  bool mbufs_fit = true;       // false: more mbufs than the EAL's estimate can count
  uint64_t eal_mb = 0;         // the EAL's estimate (plan_eal); UINT32_MAX when !mbufs_fit
  bool eal_in_ram = true;      // false: hugepages hold it and it is not in needed_mb
  uint64_t tables_mb = 0;      // estimate_table_bytes, rounded up to MiB
  size_t services = 0;         // static services counted in tables_mb
  uint64_t needed_mb = 0;      // tables_mb, plus eal_mb when in RAM
  uint64_t available_mb = 0;   // available_memory_mb(); 0 when unknown (never refused then)
  bool fits() const { return mbufs_fit && (available_mb == 0 || needed_mb <= available_mb); }
};
// Pure function of the config, the EAL plan made for it and the memory available.
MemoryNeed memory_need(const Config& cfg, const EalPlan& plan, bool mbufs_fit,
                       uint64_t available_mb);
// "needs about N MiB (EAL: mbufs and flow tables E MiB; Maglev tables of S services T MiB),
// host has A MiB available" ("in hugepages" after E when they hold it; "available memory
// unknown" when it is).
std::string memory_need_text(const MemoryNeed& need);
// Bytes rounded up to MiB.
inline uint64_t mib_ceil(uint64_t bytes) { return (bytes + (1u << 20) - 1) >> 20; }
// Free hugepage memory in MB (all page sizes).
uint64_t free_hugepage_mb();

// Builds the EAL argument list: meshgate's defaults, then the user's arguments unchanged. A
// default is left out when the user gives the same option or one that conflicts with it:
//   -l, -c or --lcores          the default --lcores
//   --file-prefix               the default --file-prefix
//   --no-huge                   hugepages: the plan is --no-huge's (and its -m) whatever is free
//   --socket-mem                hugepages: the plan takes them whatever is free; no default -m
//   -m                          the default -m
//   --in-memory, --no-shconf,   the same default
//   --no-telemetry, --telemetry the default --no-telemetry
//   -a / --allow with a PCI address   the default --no-pci (the user allows PCI devices)
//   -b / --block                the default -a of each PCI port (-a and -b exclude each other)
//   --no-pci                    the default -a of each PCI port
//   --log-level with a global level   the default --log-level (one for a type, "pmd.*:debug",
//                                     keeps it)
// Anything else (--vdev, -a of a device the config has too, -n, --main-lcore...) replaces
// nothing. DPDK's log threshold follows `level` (dpdk_log_threshold).
EalPlan plan_eal_on(const Config& cfg, uint32_t workers, uint32_t mbufs,
                    const std::vector<std::string>& user_args, LogLevel level,
                    const EalHost& host);
// plan_eal_on with this host: free hugepages, the process's CPU affinity, a file prefix unique
// to the process and call.
EalPlan plan_eal(const Config& cfg, uint32_t workers, uint32_t mbufs,
                 const std::vector<std::string>& user_args, LogLevel level);

// rte_eal_init with the plan, DPDK's log routed first (route_dpdk_logs) so that the EAL's own
// start-up lines are covered. Error text on failure.
Result<bool> init_eal(const EalPlan& plan);

// DPDK's log stream (the EAL's and the drivers' lines, from any thread) through meshgate's
// logger: each line becomes event=dpdk msg="..." at the level log_level_of_dpdk gives and passes
// the same level filter as meshgate's own lines. A line DPDK prints in pieces is logged once
// complete. Needs no EAL; safe to call again.
void route_dpdk_logs();
// RTE_LOG_ERR and more severe -> error, WARNING -> warn, NOTICE -> info, INFO and DEBUG -> debug.
LogLevel log_level_of_dpdk(uint32_t rte_level);
// The EAL --log-level for meshgate's level: the DPDK level that maps to it; for debug, "info"
// (DPDK's debug level is per-driver tracing: ask for it with EAL arguments after `--`).
const char* dpdk_log_threshold(LogLevel level);

// What to do after rte_eal_init failed with `plan` (its `memory_mb` is meshgate's estimate),
// given the hugepage memory the host has free. With the user's own memory arguments
// (plan.user_memory: --no-huge, -m, --socket-mem) and too few free hugepages for the
// estimate, "-- --no-huge -m <MB>" with that estimate; with --no-huge or enough hugepages, the
// figure to give; with meshgate's memory defaults, the privileges the EAL needs. Pure function.
std::string eal_failure_hint(const EalPlan& plan, uint64_t free_hugepage_mb);

}  // namespace meshgate::ctl
