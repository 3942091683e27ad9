#include "control/runtime/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unordered_map>

#include "control/snapshot/maglev.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/worker/counters.h"

namespace meshgate::ctl {

bool is_pci_address(const std::string& d) {
  // DDDD:BB:DD.F or BB:DD.F (domain optional), hexadecimal.
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  std::string s = d;
  if (s.size() == 12 && s[4] == ':') s = s.substr(5);
  if (s.size() != 7 || s[2] != ':' || s[5] != '.') return false;
  return hex(s[0]) && hex(s[1]) && hex(s[3]) && hex(s[4]) && hex(s[6]);
}

uint32_t estimate_memory_mb(const Config& cfg, uint32_t workers, uint32_t mbufs) {
  // An mbuf object in its mempool: 128-byte header, 2176-byte buffer (2048 + headroom), the
  // mempool's per-object header and trailer. Without hugepages the memory is 4 KiB pages whose
  // IOVAs need not be contiguous, so no object may cross a page: each takes a page of its own.
  // Plus its share of the pool's ring and per-lcore caches.
  constexpr uint64_t kMbufBytes = 4096 + 64;
  uint64_t bytes = uint64_t(mbufs) * kMbufBytes;
  const uint32_t per_worker_flows = std::max<uint32_t>(1024, cfg.conntrack.max_flows / workers);
  bytes += uint64_t(workers) * dp::FlowTable::memory_bytes(per_worker_flows);
  bytes += uint64_t(workers) * dp::kMaxBackendStats * sizeof(dp::BackendCounters);
  bytes += uint64_t(workers) * (4u << 20);  // neighbor cache, fragment table, pending, rings
  // Each snapshot holds an rte_lpm and an rte_lpm6 whose tbl24s are 2^24 x 4 bytes (64 MiB)
  // apiece, each one contiguous. One is alive with a static config; a mesh source rebuilds
  // while running: the live one, the one being built and one retired until its grace period.
  constexpr uint64_t kSnapshotLpmBytes = 132ull << 20;
  bytes += (cfg.mesh.source != MeshSource::kNone ? 3 : 1) * kSnapshotLpmBytes;
  // The EAL's own structures, the address table (4 MiB), handoff rings, snapshot vectors.
  bytes += 96ull << 20;
  return uint32_t((bytes + (1u << 20) - 1) >> 20);
}

uint64_t maglev_table_bytes(const ServiceConfig& s) {
  const uint64_t slots = s.table_size ? s.table_size : lb_auto_table_size(s.backends.size());
  return slots * sizeof(uint32_t);
}

namespace {

// A snapshot's per-service entries (SnapService, its backends, index and stat entries) are a
// few hundred bytes; 1 KiB a service and 256 bytes a backend leave room for the vectors'
// growth.
uint64_t entry_bytes(const ServiceConfig& s) { return 1024 + 256 * uint64_t(s.backends.size()); }

// The builder reuses a service's table when its backends (in order, with their weights) and its
// table size are the same (build_snapshot, control/snapshot/builder.h).
bool same_table(const ServiceConfig& a, const ServiceConfig& b) {
  return maglev_table_bytes(a) == maglev_table_bytes(b) &&
         std::equal(a.backends.begin(), a.backends.end(), b.backends.begin(), b.backends.end(),
                    [](const BackendConfig& x, const BackendConfig& y) {
                      return x.address == y.address && x.port == y.port && x.weight == y.weight;
                    });
}

}  // namespace

uint64_t estimate_table_bytes(const Config& cfg) {
  uint64_t bytes = 0;
  for (const auto& s : cfg.services) bytes += maglev_table_bytes(s) + entry_bytes(s);
  return bytes;
}

ReloadTables estimate_reload_tables(const Config& running, const Config& next) {
  std::unordered_map<std::string_view, const ServiceConfig*> old;
  old.reserve(running.services.size());
  for (const auto& s : running.services) old.emplace(s.name, &s);
  ReloadTables t;
  uint64_t largest = 0;
  for (size_t i = 0; i < next.services.size(); ++i) {
    const ServiceConfig& s = next.services[i];
    t.bytes += entry_bytes(s);
    const auto it = old.find(s.name);
    if (it != old.end() && same_table(*it->second, s)) continue;
    t.bytes += maglev_table_bytes(s);
    ++t.built;
    if (maglev_table_bytes(s) > largest) {
      largest = maglev_table_bytes(s);
      t.largest = i;
    }
  }
  return t;
}

MemoryNeed memory_need(const Config& cfg, const EalPlan& plan, bool mbufs_fit,
                       uint64_t available_mb) {
  MemoryNeed n;
  n.mbufs_fit = mbufs_fit;
  n.eal_mb = mbufs_fit ? plan.memory_mb : UINT32_MAX;
  n.eal_in_ram = !mbufs_fit || !plan.hugepages;
  n.tables_mb = mib_ceil(estimate_table_bytes(cfg));
  n.services = cfg.services.size();
  n.needed_mb = n.tables_mb + (n.eal_in_ram ? n.eal_mb : 0);
  n.available_mb = available_mb;
  return n;
}

std::string memory_need_text(const MemoryNeed& n) {
  return "needs about " + std::to_string(n.needed_mb) + " MiB (EAL: mbufs and flow tables " +
         std::to_string(n.eal_mb) + " MiB" + (n.eal_in_ram ? "" : " in hugepages") +
         "; Maglev tables of " + std::to_string(n.services) + " services " +
         std::to_string(n.tables_mb) + " MiB), " +
         (n.available_mb ? "host has " + std::to_string(n.available_mb) + " MiB available"
                         : std::string("available memory unknown"));
}

uint64_t available_memory_mb() {
  uint64_t mb = 0;
  {
    std::ifstream f("/proc/meminfo");
    std::string key;
    uint64_t kb = 0;
    std::string unit;
    while (f >> key >> kb) {
      std::getline(f, unit);
      if (key == "MemAvailable:") {
        mb = kb / 1024;
        break;
      }
    }
  }
  // cgroup v2: "0::/system.slice/x.service" -> /sys/fs/cgroup/system.slice/x.service/memory.max
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    std::ifstream max_f(dir + "/memory.max"), cur_f(dir + "/memory.current");
    uint64_t max = 0, cur = 0;
    if ((max_f >> max) && (cur_f >> cur)) {  // "max" (no limit) fails to parse: skipped
      const uint64_t left = max > cur ? (max - cur) >> 20 : 0;
      if (mb == 0 || left < mb) mb = left;
    }
  }
  return mb;
}

uint64_t free_hugepage_mb() {
  uint64_t mb = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
    const std::string name = e.path().filename();  // hugepages-2048kB
    const auto dash = name.find('-');
    const uint64_t kb = std::strtoull(name.c_str() + dash + 1, nullptr, 10);
    std::ifstream f(e.path() / "free_hugepages");
    uint64_t n = 0;
    if (f >> n) mb += n * kb / 1024;
  }
  // The pages must also be mountable: hugetlbfs mounted somewhere.
  std::ifstream mounts("/proc/mounts");
  std::string line;
  bool mounted = false;
  while (std::getline(mounts, line)) mounted |= line.find(" hugetlbfs ") != std::string::npos;
  return mounted ? mb : 0;
}

EalPlan plan_eal(const Config& cfg, uint32_t workers, uint32_t mbufs,
                 const std::vector<std::string>& user_args, LogLevel level) {
  EalPlan plan;
  plan.memory_mb = estimate_memory_mb(cfg, workers, mbufs);
  if (!user_args.empty()) {
    plan.args = user_args;
    return plan;
  }
  auto& a = plan.args;
  // Lcore 0 is the control thread, 1..workers the workers, spread over the CPUs we may use.
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  std::string lcores;
  for (uint32_t l = 0; l <= workers; ++l) {
    if (l) lcores += ",";
    lcores += std::to_string(l) + "@" + std::to_string(cpus[l % cpus.size()]);
  }
  a.push_back("--lcores=" + lcores);
  // Unique per process, so tests and several gateways can run side by side.
  static std::atomic<uint32_t> seq{0};
  a.push_back("--file-prefix=meshgate-" + std::to_string(getpid()) + "-" +
              std::to_string(seq.fetch_add(1)));
  plan.hugepages = free_hugepage_mb() >= plan.memory_mb;
  if (plan.hugepages) {
    a.push_back("--in-memory");
  } else {
    a.push_back("--no-huge");
    a.push_back("--no-shconf");
    a.push_back("--no-telemetry");  // its socket lives in the shared runtime directory
    a.push_back("-m");
    a.push_back(std::to_string(plan.memory_mb));
  }
  bool any_pci = false;
  for (const auto& p : cfg.ports) {
    if (is_pci_address(p.device)) {
      any_pci = true;
      a.push_back("-a");
      a.push_back(p.device);
    }
  }
  // Never probe PCI devices we were not given (the host's own NIC, for one).
  if (!any_pci) a.push_back("--no-pci");
  a.push_back(std::string("--log-level=") + dpdk_log_threshold(level));
  return plan;
}

LogLevel log_level_of_dpdk(uint32_t rte_level) {
  if (rte_level <= RTE_LOG_ERR) return LogLevel::kError;
  if (rte_level == RTE_LOG_WARNING) return LogLevel::kWarn;
  if (rte_level == RTE_LOG_NOTICE) return LogLevel::kInfo;
  return LogLevel::kDebug;
}

const char* dpdk_log_threshold(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warning";
    case LogLevel::kInfo: return "notice";
    case LogLevel::kDebug: return "info";
  }
  return "notice";
}

namespace {

// fopencookie's write: called by the thread that logs (the stream is unbuffered, see
// route_dpdk_logs), right after rte_vlog recorded that thread's message level.
ssize_t write_dpdk_log(void*, const char* buf, size_t size) {
  // Per thread: pieces of one thread's line never mix with another's.
  thread_local std::string pending;
  thread_local uint32_t pending_level = 0;
  if (pending.empty()) pending_level = uint32_t(rte_log_cur_msg_loglevel());
  pending.append(buf, size);
  size_t start = 0;
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(pending.data() + start, nl - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (!line.empty()) log_message(log_level_of_dpdk(pending_level), "dpdk", line);
    pending_level = uint32_t(rte_log_cur_msg_loglevel());
  }
  pending.erase(0, start);
  return ssize_t(size);
}

}  // namespace

void route_dpdk_logs() {
  static FILE* const stream = [] {
    FILE* f = fopencookie(nullptr, "w", cookie_io_functions_t{nullptr, write_dpdk_log, nullptr,
                                                              nullptr});
    // Unbuffered: each message reaches write_dpdk_log from the thread that logged it, in one
    // call, while rte_log_cur_msg_loglevel() is still that message's. A buffer would let one
    // thread's fflush deliver another's message under the wrong level.
    if (f) setvbuf(f, nullptr, _IONBF, 0);
    return f;
  }();
  if (stream) rte_openlog_stream(stream);
}

std::string eal_failure_hint(const EalPlan& plan, bool user_args, uint64_t free_hugepage_mb) {
  const std::string mb = std::to_string(plan.memory_mb);
  if (!user_args) {
    // The defaults already chose --no-huge when hugepages were short: what is left is access.
    return "the EAL could not start with meshgate's defaults (" +
           std::string(plan.hugepages ? "hugepages" : "--no-huge -m " + mb) +
           "): run as root, or with CAP_SYS_ADMIN, CAP_IPC_LOCK and CAP_NET_RAW";
  }
  const bool no_huge = std::find(plan.args.begin(), plan.args.end(), "--no-huge") != plan.args.end();
  if (!no_huge && free_hugepage_mb < plan.memory_mb) {
    return "no hugepages for the " + mb + " MiB meshgate estimated (" +
           std::to_string(free_hugepage_mb) + " MiB free): run without them with "
           "'-- --no-huge -m " + mb + "', or reserve hugepages (/sys/kernel/mm/hugepages)";
  }
  return "with your EAL arguments give at least -m " + mb + " (or --socket-mem), the memory "
         "meshgate estimated" + (no_huge ? "" : ", and --no-huge without hugepages");
}

Result<bool> init_eal(const EalPlan& plan) {
  route_dpdk_logs();
  std::vector<std::string> storage;
  storage.push_back("meshgate");
  for (const auto& s : plan.args) storage.push_back(s);
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  if (rte_eal_init(int(argv.size() - 1), argv.data()) < 0) {
    return Error{std::string("EAL init failed: ") + rte_strerror(rte_errno)};
  }
  return true;
}

}  // namespace meshgate::ctl
