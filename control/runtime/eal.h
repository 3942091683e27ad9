// EAL bring-up: the default arguments (README.md "What works today": hugepages when present, --no-huge
// otherwise, a unique file prefix, lcores for the workers) or the user's own after `--`.
// Main thread, before anything else touches DPDK.
#pragma once

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
};

// Memory the process needs: mbuf pool, flow tables, per-worker counters, tables, slack.
uint32_t estimate_memory_mb(const Config& cfg, uint32_t workers, uint32_t mbufs);
// Memory outside the EAL's that the first snapshot takes: each static service's Maglev table
// (4 bytes a slot; 65537 slots when automatic: 256 KiB a service) and its entries. Mesh
// services are not known before their source answers and are not counted.
uint64_t estimate_table_bytes(const Config& cfg);
// Memory this process can still take, in MB: MemAvailable, or what the cgroup's memory.max
// leaves when that is less. 0 when unknown.
uint64_t available_memory_mb();
// Free hugepage memory in MB (all page sizes).
uint64_t free_hugepage_mb();

// Builds the EAL argument list. With user_args non-empty they are passed unchanged. DPDK's log
// threshold follows `level` (dpdk_log_threshold).
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
// given the hugepage memory the host has free: with the user's EAL arguments and too few free
// hugepages for the estimate, "-- --no-huge -m <MB>" with that estimate; with --no-huge (or
// -m / --socket-mem) of their own, the figure to give; with the default arguments, the
// privileges the EAL needs. Pure function.
std::string eal_failure_hint(const EalPlan& plan, bool user_args, uint64_t free_hugepage_mb);

}  // namespace meshgate::ctl
