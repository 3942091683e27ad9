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
#include <initializer_list>
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

namespace {

// DPDK 22.11's EAL options (lib/eal/common/eal_options.h) that take a value. Short ones that
// have a long name are reported by it (-a allow, -b block).
struct LongOption {
  const char* name;
  enum { kNone, kRequired, kOptional } arg;
};
constexpr LongOption kLongOptions[] = {
    {"allow", LongOption::kRequired},          {"base-virtaddr", LongOption::kRequired},
    {"block", LongOption::kRequired},          {"create-uio-dev", LongOption::kNone},
    {"file-prefix", LongOption::kRequired},    {"force-max-simd-bitwidth", LongOption::kRequired},
    {"help", LongOption::kNone},               {"huge-dir", LongOption::kRequired},
    {"huge-unlink", LongOption::kOptional},    {"huge-worker-stack", LongOption::kOptional},
    {"in-memory", LongOption::kNone},          {"iova-mode", LongOption::kRequired},
    {"lcores", LongOption::kRequired},         {"legacy-mem", LongOption::kNone},
    {"log-level", LongOption::kRequired},      {"main-lcore", LongOption::kRequired},
    {"match-allocations", LongOption::kNone},  {"mbuf-pool-ops-name", LongOption::kRequired},
    {"no-hpet", LongOption::kNone},            {"no-huge", LongOption::kNone},
    {"no-pci", LongOption::kNone},             {"no-shconf", LongOption::kNone},
    {"no-telemetry", LongOption::kNone},       {"proc-type", LongOption::kRequired},
    {"single-file-segments", LongOption::kNone}, {"socket-limit", LongOption::kRequired},
    {"socket-mem", LongOption::kRequired},     {"syslog", LongOption::kRequired},
    {"telemetry", LongOption::kNone},          {"trace", LongOption::kRequired},
    {"trace-bufsz", LongOption::kRequired},    {"trace-dir", LongOption::kRequired},
    {"trace-mode", LongOption::kRequired},     {"vdev", LongOption::kRequired},
    {"vfio-intr", LongOption::kRequired},      {"vfio-vf-token", LongOption::kRequired},
    {"vmware-tsc-map", LongOption::kNone},
};
// eal_short_options: "a:b:c:s:d:hl:S:m:n:r:v".
constexpr std::string_view kShortWithValue = "abcsdlSmnr";
constexpr std::string_view kShortWithout = "hv";

const LongOption* find_long(std::string_view name) {
  const LongOption* prefix_match = nullptr;
  int prefix_matches = 0;
  for (const auto& o : kLongOptions) {
    if (name == o.name) return &o;
    if (std::string_view(o.name).substr(0, name.size()) == name) {
      prefix_match = &o;
      ++prefix_matches;
    }
  }
  return prefix_matches == 1 ? prefix_match : nullptr;
}

std::string short_name(char c) {
  switch (c) {
    case 'a': return "allow";
    case 'b': return "block";
    case 'h': return "help";
    default: return std::string(1, c);
  }
}

// The device of an -a / -b value: "0000:3b:02.0,txq_inline=128" -> "0000:3b:02.0".
std::string device_of(const std::string& value) { return value.substr(0, value.find(',')); }

}  // namespace

std::vector<EalOption> parse_eal_options(const std::vector<std::string>& args) {
  std::vector<EalOption> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") break;
    if (w.size() > 2 && w.compare(0, 2, "--") == 0) {
      const size_t eq = w.find('=');
      const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const LongOption* o = find_long(name);
      EalOption opt{o ? o->name : name, ""};
      if (eq != std::string::npos) {
        opt.value = w.substr(eq + 1);
      } else if (o && o->arg == LongOption::kRequired && i + 1 < args.size()) {
        opt.value = args[++i];
      }
      out.push_back(std::move(opt));
      continue;
    }
    if (w.size() < 2 || w[0] != '-') continue;  // not an option: getopt leaves it to the app
    for (size_t k = 1; k < w.size(); ++k) {
      const char c = w[k];
      if (kShortWithValue.find(c) != std::string_view::npos) {
        EalOption opt{short_name(c), w.substr(k + 1)};
        if (opt.value.empty() && i + 1 < args.size()) opt.value = args[++i];
        out.push_back(std::move(opt));
        break;
      }
      out.push_back({kShortWithout.find(c) != std::string_view::npos ? short_name(c)
                                                                     : std::string(1, c),
                     ""});
    }
  }
  return out;
}

EalPlan plan_eal_on(const Config& cfg, uint32_t workers, uint32_t mbufs,
                    const std::vector<std::string>& user_args, LogLevel level,
                    const EalHost& host) {
  EalPlan plan;
  plan.memory_mb = estimate_memory_mb(cfg, workers, mbufs);
  plan.user_args = !user_args.empty();
  const std::vector<EalOption> user = parse_eal_options(user_args);
  auto given = [&](std::initializer_list<std::string_view> names) {
    return std::any_of(user.begin(), user.end(), [&](const EalOption& o) {
      return std::find(names.begin(), names.end(), o.name) != names.end();
    });
  };
  auto& a = plan.args;
  // Each default either goes in or is recorded as replaced by the user's.
  auto unless = [&](bool user_has, const char* name, auto&& add) {
    if (user_has) {
      plan.replaced.emplace_back(name);
    } else {
      add();
    }
  };

  // Lcore 0 is the control thread, 1..workers the workers, spread over the CPUs we may use.
  unless(given({"l", "c", "lcores"}), "lcores", [&] {
    std::vector<int> cpus = host.cpus;
    if (cpus.empty()) cpus.push_back(0);
    std::string lcores;
    for (uint32_t l = 0; l <= workers; ++l) {
      if (l) lcores += ",";
      lcores += std::to_string(l) + "@" + std::to_string(cpus[l % cpus.size()]);
    }
    a.push_back("--lcores=" + lcores);
  });
  // Unique per process, so tests and several gateways can run side by side.
  unless(given({"file-prefix"}), "file-prefix",
         [&] { a.push_back("--file-prefix=" + host.file_prefix); });

  // Memory: the user's --no-huge or --socket-mem (hugepages only) decides; else free hugepages.
  const bool user_no_huge = given({"no-huge"});
  const bool user_socket_mem = given({"socket-mem"});
  plan.user_memory = user_no_huge || user_socket_mem || given({"m"});
  plan.hugepages =
      !user_no_huge && (user_socket_mem || host.free_hugepage_mb >= plan.memory_mb);
  if (plan.hugepages) {
    unless(given({"in-memory"}), "in-memory", [&] { a.push_back("--in-memory"); });
  } else {
    unless(user_no_huge, "no-huge", [&] { a.push_back("--no-huge"); });
    unless(given({"no-shconf"}), "no-shconf", [&] { a.push_back("--no-shconf"); });
    // Telemetry's socket lives in the shared runtime directory.
    unless(given({"no-telemetry", "telemetry"}), "no-telemetry",
           [&] { a.push_back("--no-telemetry"); });
    unless(given({"m", "socket-mem"}), "m", [&] {
      a.push_back("-m");
      a.push_back(std::to_string(plan.memory_mb));
    });
  }

  // PCI: the config's PCI ports allowed; no PCI probing at all without one (the host's own
  // NIC, for one), unless the user allows PCI devices of their own.
  std::vector<std::string> user_allowed;
  for (const auto& o : user) {
    if (o.name == "allow") user_allowed.push_back(device_of(o.value));
  }
  const bool user_allows_pci =
      std::any_of(user_allowed.begin(), user_allowed.end(), is_pci_address);
  bool any_pci = false;
  std::vector<std::string> port_allow;
  for (const auto& p : cfg.ports) {
    if (!is_pci_address(p.device)) continue;
    any_pci = true;
    // The same device twice would be two allow-list entries for one device.
    if (std::find(user_allowed.begin(), user_allowed.end(), p.device) != user_allowed.end()) {
      continue;
    }
    port_allow.push_back(p.device);
  }
  if (!port_allow.empty()) {
    unless(given({"block", "no-pci"}), "allow", [&] {
      for (const auto& d : port_allow) {
        a.push_back("-a");
        a.push_back(d);
      }
    });
  }
  if (!any_pci) {
    unless(user_allows_pci || given({"no-pci"}), "no-pci", [&] { a.push_back("--no-pci"); });
  }

  // A global level ("debug", "7") replaces ours; one for some log types ("pmd.net.tap:debug",
  // "pmd.*,8") adds to it.
  const bool user_global_level = std::any_of(user.begin(), user.end(), [](const EalOption& o) {
    return o.name == "log-level" && o.value.find_first_of(":,") == std::string::npos;
  });
  unless(user_global_level, "log-level",
         [&] { a.push_back(std::string("--log-level=") + dpdk_log_threshold(level)); });

  // The user's after ours: where the EAL lets a later option win, it is theirs.
  a.insert(a.end(), user_args.begin(), user_args.end());
  return plan;
}

EalPlan plan_eal(const Config& cfg, uint32_t workers, uint32_t mbufs,
                 const std::vector<std::string>& user_args, LogLevel level) {
  EalHost host;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) host.cpus.push_back(c);
    }
  }
  static std::atomic<uint32_t> seq{0};
  host.file_prefix =
      "meshgate-" + std::to_string(getpid()) + "-" + std::to_string(seq.fetch_add(1));
  host.free_hugepage_mb = free_hugepage_mb();
  return plan_eal_on(cfg, workers, mbufs, user_args, level, host);
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

std::string eal_failure_hint(const EalPlan& plan, uint64_t free_hugepage_mb) {
  const std::string mb = std::to_string(plan.memory_mb);
  if (!plan.user_memory) {
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
