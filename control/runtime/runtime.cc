#include "control/runtime/runtime.h"

#include <pcap/pcap.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>
#include <malloc.h>
#include <rte_ring_elem.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>

#include "control/flowsteer/flowsteer.h"
#include "control/mesh/authz.h"
#include "control/mesh/mesh_runtime.h"
#include "control/runtime/eal_cleanup.h"
#include "control/admin/admin.h"
#include "control/certs/cert_info.h"
#include "control/certs/cert_provider.h"
#include "control/certs/tls_context.h"
#include "control/admin/prometheus.h"
#include "control/mesh/xds_provider.h"
#include "control/runtime/eal.h"
#include "control/runtime/ports.h"
#include "control/snapshot/builder.h"
#include "control/snapshot/publisher.h"
#include "control/stats/stats.h"
#include "dataplane/l2/neighbor.h"
#include "dataplane/nat/rss.h"
#include "dataplane/hbone/gateway.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/worker/worker.h"

namespace meshgate::ctl {
namespace {

// SIGINT and SIGQUIT stop at once; SIGTERM drains first (live mode). SIGHUP, which would
// otherwise end the process without a summary, --stats-json or EAL cleanup, is logged and
// ignored until the config can be reloaded. Every one of them ends in the same cleanup path.
volatile std::sig_atomic_t g_sigint = 0;
volatile std::sig_atomic_t g_sigterm = 0;
volatile std::sig_atomic_t g_sighup = 0;
volatile std::sig_atomic_t g_stop_signal = 0;  // the signal that stops at once

void on_signal(int sig) {
  switch (sig) {
    case SIGINT:
    case SIGQUIT:
      g_stop_signal = sig;
      g_sigint = 1;
      break;
    case SIGHUP: g_sighup = 1; break;
    default: g_sigterm = 1; break;
  }
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

namespace {

Result<uint64_t> count_pcap_packets(const std::string& path) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  if (!p) return Error{"cannot read " + path + ": " + err};
  uint64_t n = 0;
  pcap_pkthdr* h;
  const u_char* d;
  while (pcap_next_ex(p, &h, &d) == 1) ++n;
  pcap_close(p);
  return n;
}

constexpr uint32_t kNeighborRingSize = 1024;
// Packets in flight between two workers: several bursts' worth, so a busy owner loses none.
constexpr uint32_t kHandoffRingSize = 4096;
constexpr uint32_t kMbufCache = 256;

struct WorkerSlot {
  dp::Worker* worker = nullptr;
  unsigned lcore = 0;
  rte_ring* to_control = nullptr;
  rte_ring* from_control = nullptr;
};

// The CPUs of `allowed` that no worker lcore runs on: where the snapshot builder's helpers go,
// so that a build never takes a polling worker's core. The main lcore's CPUs when the workers
// take them all.
cpu_set_t non_worker_cpus(const cpu_set_t& allowed, uint32_t workers) {
  cpu_set_t out = allowed;
  unsigned lcore = rte_get_next_lcore(-1, 1, 0);
  for (uint32_t w = 0; w < workers && lcore < RTE_MAX_LCORE;
       ++w, lcore = rte_get_next_lcore(lcore, 1, 0)) {
    const rte_cpuset_t cpus = rte_lcore_cpuset(lcore);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &cpus)) CPU_CLR(c, &out);
    }
  }
  if (CPU_COUNT(&out) == 0) out = rte_lcore_cpuset(rte_get_main_lcore());
  return out;
}

void free_worker(WorkerSlot& s) {
  if (s.worker) {
    s.worker->~Worker();
    rte_free(s.worker);
  }
  rte_ring_free(s.to_control);
  rte_ring_free(s.from_control);
  s = WorkerSlot{};
}

int worker_main(void* arg) { return static_cast<dp::Worker*>(arg)->run(); }

}  // namespace

dp::ProxyParams proxy_params(const Config& cfg) {
  dp::ProxyParams pp;
  dp::tcp::TcpConfig& t = pp.tcp;
  t.max_connections = cfg.proxy.max_connections;
  t.snd_buf_bytes = t.rcv_buf_bytes = cfg.proxy.buffer_bytes;
  t.reass.max_bytes = cfg.proxy.buffer_bytes;
  t.worker_mem_bytes = uint64_t(cfg.proxy.memory_mb) << 20;
  t.time_wait_ms = cfg.proxy.time_wait_s * 1000;
  uint32_t mtu = 65535;
  for (const auto& p : cfg.ports) mtu = std::min<uint32_t>(mtu, p.mtu);
  t.mss = uint16_t(mtu - 40);      // IPv4 + TCP headers
  t.mss_v6 = uint16_t(mtu - 60);   // IPv6 + TCP headers
  // Static proxy VIPs are known; mesh services may add any number later.
  size_t vips = 0;
  for (const auto& s : cfg.services) vips += s.mode == ForwardMode::kProxy;
  // Mesh services run on the stack in proxy mode, or when they have HBONE endpoints.
  const bool mesh_proxy = cfg.mesh.source != MeshSource::kNone &&
                          (cfg.mesh.mode == ForwardMode::kProxy || uses_hbone(cfg));
  t.max_listeners = uint32_t(std::max<size_t>(mesh_proxy ? 1024 : 64, 2 * vips));
  // RFC 6528 ISNs and SYN cookies: a secret nobody outside the process knows, shared by the
  // workers (a cookie is checked by whichever worker gets the ACK).
  uint64_t key[2] = {0, 0};
  if (getrandom(key, sizeof key, 0) != ssize_t(sizeof key)) {
    key[0] = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    key[1] = uint64_t(getpid()) * 0x9e3779b97f4a7c15ull;
  }
  t.secret = dp::tcp::SipKey{key[0], key[1]};
  pp.idle_timeout_ms = cfg.proxy.idle_timeout_s * 1000;
  pp.max_sessions = std::max<uint32_t>(1, cfg.proxy.max_connections / 2);
  return pp;
}

int run_gateway(const Config& cfg, const RunOptions& opt) {
  // HBONE's buffers are heap vectors that reach MiBs under back-pressure (docs/HBONE.md,
  // "Abuse"). A fixed threshold gives every block of 256 KiB or more its own mapping, returned
  // to the kernel when freed; glibc's dynamic threshold would rise after the first such free
  // and keep later blocks in worker arenas that never shrink (RSS held after the load left).
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  const bool replay = !opt.pcap_in.empty();
  uint32_t workers = opt.workers ? opt.workers : cfg.gateway.workers;
  // The validator and the command line keep to these; a config built in code might not, and
  // the per-worker and per-port arrays below are sized by them.
  if (workers < 1 || workers > dp::kMaxWorkers || cfg.ports.size() > dp::kMaxPorts) {
    log(LogLevel::kError, "usage", "error=\"at most %u workers and %u ports\" workers=%u ports=%zu",
        dp::kMaxWorkers, dp::kMaxPorts, workers, cfg.ports.size());
    return kExitUsage;
  }
  uint64_t replay_packets = 0;
  std::vector<PortSetup> setups;
  for (const auto& p : cfg.ports) setups.push_back(PortSetup{&p, p.device});
  if (replay) {
    for (const std::string& f : {opt.pcap_in, opt.pcap_out}) {
      if (f.find(',') != std::string::npos) {
        log(LogLevel::kError, "usage", "error=\"pcap paths must not contain ','\" path=\"%s\"", f.c_str());
        return kExitUsage;
      }
    }
    auto n = count_pcap_packets(opt.pcap_in);
    if (!n) {
      log(LogLevel::kError, "usage", "error=\"%s\"", n.error().message.c_str());
      return kExitUsage;
    }
    replay_packets = *n;
    // net_pcap has one RX queue per rx_pcap file: the replay runs on one worker.
    if (workers != 1) {
      log(LogLevel::kInfo, "replay_single_worker", "configured_workers=%u", workers);
      workers = 1;
    }
    const std::string out = opt.pcap_out.empty() ? "/dev/null" : opt.pcap_out;
    setups[0].device = "net_pcap_replay0,rx_pcap=" + opt.pcap_in + ",tx_pcap=" + out;
  }

  const uint32_t per_worker_flows = std::max<uint32_t>(1024, cfg.conntrack.max_flows / workers);
  uint64_t mbufs = 0;
  for (const auto& p : cfg.ports) mbufs += uint64_t(workers) * (p.rx_descriptors + p.tx_descriptors);
  mbufs += uint64_t(workers) * (4 * dp::kBurst + dp::PendingQueue::kCapacity + kMbufCache) + 4096;
  // HBONE runs on the proxy's TCP stack: with [hbone] certificates the stack runs too.
  const bool hbone = uses_hbone(cfg);
  const bool proxy = uses_proxy(cfg) || hbone;
  dp::ProxyParams proxy_cfg;
  dp::hbone::GatewayParams hbone_cfg;
  hbone_cfg.port = cfg.hbone.port;
  hbone_cfg.max_connections = cfg.hbone.max_connections;
  hbone_cfg.max_handshakes = cfg.hbone.max_handshakes;
  hbone_cfg.max_handshakes_per_source = cfg.hbone.max_handshakes_per_source;
  hbone_cfg.limits.handshake_timeout_ms = cfg.hbone.handshake_timeout_ms;
  hbone_cfg.memory_bytes = uint64_t(cfg.hbone.memory_mb) << 20;
  if (getrandom(&hbone_cfg.source_seed, sizeof hbone_cfg.source_seed, 0) !=
      ssize_t(sizeof hbone_cfg.source_seed)) {
    hbone_cfg.source_seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  if (proxy) {
    proxy_cfg = proxy_params(cfg);
    // Buffered TCP data is received mbufs (one per segment, >= 1 KiB of payload each when the
    // budget is what limits), plus the frames the stacks emit between two drains.
    mbufs += uint64_t(workers) *
             ((uint64_t(cfg.proxy.memory_mb) << 20) / 1024 + dp::kProxyOutQueue);
  }
  // net_pcap with infinite_rx copies its whole file into the RX pool at start: make room.
  for (const auto& st : setups) {
    const std::string& d = st.device;
    if (d.rfind("net_pcap", 0) != 0 || d.find("infinite_rx=1") == std::string::npos) continue;
    const auto at = d.find("rx_pcap=");
    if (at == std::string::npos) continue;
    const std::string path = d.substr(at + 8, d.find(',', at) - (at + 8));
    if (auto n = count_pcap_packets(path)) mbufs += *n;
  }

  // The CPUs we were given, before EAL init pins this thread to the main lcore's.
  cpu_set_t allowed_cpus;
  CPU_ZERO(&allowed_cpus);
  if (sched_getaffinity(0, sizeof allowed_cpus, &allowed_cpus) != 0) CPU_SET(0, &allowed_cpus);
  // Memory, before the EAL takes any: what the config asks for must fit what the host has
  // left, or the start would end in the OOM killer's hands, silently. The EAL's part comes
  // from RAM unless hugepages hold it; the Maglev tables are always ordinary memory.
  const uint64_t tables_mb = (estimate_table_bytes(cfg) + (1u << 20) - 1) >> 20;
  const bool mbufs_fit = mbufs <= std::numeric_limits<uint32_t>::max();
  EalPlan plan = plan_eal(cfg, workers, uint32_t(std::min<uint64_t>(mbufs, UINT32_MAX)),
                          opt.eal_args, opt.log_level);
  {
    const bool eal_in_ram = !mbufs_fit || !plan.hugepages;
    const uint64_t eal_mb = mbufs_fit ? plan.memory_mb : UINT32_MAX;
    const uint64_t needed_mb = tables_mb + (eal_in_ram ? eal_mb : 0);
    const uint64_t available_mb = available_memory_mb();
    if (!mbufs_fit || (available_mb != 0 && needed_mb > available_mb)) {
      log(LogLevel::kError, "memory_insufficient",
          "needed_mb=%lu available_mb=%lu eal_mb=%lu maglev_tables_mb=%lu services=%zu "
          "error=\"the config needs about %lu MiB (EAL: mbufs and flow tables %lu MiB%s; Maglev "
          "tables of %zu services %lu MiB), more than the %lu MiB this host has available; "
          "lower conntrack.max_flows, proxy.memory_mb, table_size or the service count\"",
          (unsigned long)needed_mb, (unsigned long)available_mb, (unsigned long)eal_mb,
          (unsigned long)tables_mb, cfg.services.size(), (unsigned long)needed_mb,
          (unsigned long)eal_mb, eal_in_ram ? "" : " in hugepages", cfg.services.size(),
          (unsigned long)tables_mb, (unsigned long)available_mb);
      return kExitUsage;
    }
  }
  if (auto r = init_eal(plan); !r) {
    // Say what the EAL was asked for and what the host has: the usual cause is memory.
    log(LogLevel::kError, "eal_init_failed",
        "error=\"%s\" estimated_mb=%u hugepages=%s free_hugepages_mb=%lu eal_args=%s "
        "hint=\"%s\"",
        r.error().message.c_str(), plan.memory_mb, plan.hugepages ? "yes" : "no",
        (unsigned long)free_hugepage_mb(), opt.eal_args.empty() ? "default" : "user",
        opt.eal_args.empty()
            ? "check that the EAL can run here (root, /dev/hugepages or --no-huge memory)"
            : ("with your EAL arguments, give at least -m " + std::to_string(plan.memory_mb) +
               " (or --socket-mem) and, without hugepages, --no-huge")
                  .c_str());
    return kExitRuntime;
  }
  // What the EAL really has (user arguments after `--` replace the plan's).
  uint64_t heap_bytes = 0;
  for (unsigned sock = 0; sock < RTE_MAX_NUMA_NODES; ++sock) {
    rte_malloc_socket_stats st{};
    if (rte_malloc_get_socket_stats(int(sock), &st) == 0) heap_bytes += st.heap_totalsz_bytes;
  }
  log(LogLevel::kInfo, "eal_ready",
      "eal_args=%s hugepages=%s memory_mb=%lu estimated_mb=%u lcores=%u workers=%u",
      opt.eal_args.empty() ? "default" : "user", plan.hugepages ? "yes" : "no",
      (unsigned long)(heap_bytes >> 20), plan.memory_mb, rte_lcore_count(), workers);
  if (rte_lcore_count() < workers + 1) {
    log(LogLevel::kError, "not_enough_lcores", "lcores=%u needed=%u", rte_lcore_count(), workers + 1);
    eal_cleanup();
    return kExitRuntime;
  }

  int rc = kExitOk;
  rte_mempool* pool = rte_pktmbuf_pool_create("mg_mbufs", uint32_t(mbufs), kMbufCache, 0,
                                              RTE_MBUF_DEFAULT_BUF_SIZE, int(rte_socket_id()));
  std::vector<dp::PortRuntime> ports;
  SnapshotPublisher publisher;
  // After EAL init: the address registry lives in DPDK memory.
  auto reg = std::make_unique<Registries>();
  StatRegistry& registry = reg->stats;
  {
    const uint32_t n = resolve_build_threads(cfg.control.build_threads, workers,
                                             std::thread::hardware_concurrency());
    const cpu_set_t cpus = non_worker_cpus(allowed_cpus, workers);
    const bool pinned = reg->pool.start(n, &cpus);
    log(pinned ? LogLevel::kInfo : LogLevel::kWarn, "snapshot_builder",
        "build_threads=%u configured=%u helper_cpus=%d pinned=%s", n, cfg.control.build_threads,
        CPU_COUNT(&cpus), pinned ? "yes" : "no");
  }
  std::vector<std::unique_ptr<dp::RssPredictor>> rss;
  std::vector<SteeringResult> steering;
  std::vector<std::vector<rte_ring*>> handoff(workers, std::vector<rte_ring*>(workers, nullptr));
  std::vector<WorkerSlot> slots(workers);
  std::vector<const dp::Worker*> views;
  std::unique_ptr<Admin> admin;
  std::unique_ptr<mesh::MeshRuntime> mesh_rt;
  uint64_t version = 0;
  // A new service list -> snapshot -> publish. On failure the running snapshot stays.
  std::unique_ptr<CertProvider> cert_provider;
  std::vector<ServiceSpec> last_services;
  // A certificate for the snapshots: its metadata and one TLS context per worker (built here,
  // on the control thread). False, with the running ones kept, when no context can be built.
  auto take_certificate = [&](CertBundle b) {
    std::vector<std::shared_ptr<const dp::tls::Context>> contexts;
    TlsContextConfig tc;
    tc.cert_chain_pem = b.chain_pem;
    tc.private_key_pem = b.key_pem;
    tc.trust_bundle_pem = b.roots_pem;
    tc.trust_domain = cfg.hbone.trust_domain;
    for (uint32_t w = 0; w < workers; ++w) {
      std::string err;
      std::shared_ptr<const dp::tls::Context> c = create_tls_context(tc, err);
      if (!c) {
        log(LogLevel::kError, "certificate_unusable", "identity=%s error=\"%s\" keeping=%s",
            b.identity.c_str(), err.c_str(), reg->tls_contexts.empty() ? "none" : "the previous");
        return false;
      }
      contexts.push_back(std::move(c));
    }
    reg->tls_contexts = std::move(contexts);
    reg->certificates = std::make_shared<const std::vector<CertInfo>>(std::move(b.info));
    return true;
  };
  auto publish_services = [&](std::vector<ServiceSpec> services, const char* why) {
    const auto t0 = std::chrono::steady_clock::now();
    auto snap = build_snapshot(cfg, services, ports, *reg, version + 1);
    const double build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!snap) {
      log(LogLevel::kError, "snapshot_failed", "version=%lu reason=%s error=\"%s\"",
          (unsigned long)(version + 1), why, snap.error().message.c_str());
      return false;
    }
    ++version;
    publisher.publish(*snap);
    log(LogLevel::kInfo, "snapshot_published",
        "version=%lu reason=%s services=%zu backends=%zu build_ms=%.1f tables_built=%zu "
        "tables_reused=%zu",
        (unsigned long)version, why, (*snap)->services.size(), (*snap)->backends.size(), build_ms,
        reg->last_build.tables_built, reg->last_build.tables_reused);
    if (cert_provider) last_services = services;  // a new certificate republishes them
    if (admin) admin->set_services(std::move(services));
    return true;
  };
  do {
    if (!pool) {
      log(LogLevel::kError, "mempool_failed", "mbufs=%lu error=\"%s\"", (unsigned long)mbufs,
          rte_strerror(rte_errno));
      rc = kExitRuntime;
      break;
    }
    // The admin API runs in live mode only: replays are batch jobs, and parallel replays would
    // fight over the port. It starts before the ports and the first snapshot, so that /ready
    // answers 503 rather than "connection refused" while the gateway comes up, and after EAL
    // init, so that its threads inherit the main lcore's affinity and stay off worker cores.
    if (!replay && !cfg.admin.listen.empty()) {
      auto a = Admin::start(cfg, registry, publisher);
      if (!a) {
        log(LogLevel::kError, "admin_start_failed", "listen=\"%s\" error=\"%s\"",
            cfg.admin.listen.c_str(), a.error().message.c_str());
        rc = kExitRuntime;
        break;
      }
      admin = std::move(a.value());
      log(LogLevel::kInfo, "admin_listening", "listen=\"%s\"", cfg.admin.listen.c_str());
    }
    // The gateway's certificate ([hbone] files, reloaded on change, or the Istio CA): every
    // snapshot carries its metadata (/config_dump) and the workers' TLS contexts. Until a
    // usable one arrives the workers refuse HBONE connections (counted); the rest runs.
    cert_provider = CertProvider::create(cfg);
    if (cert_provider) {
      cert_provider->start();
      if (auto b = cert_provider->poll()) take_certificate(std::move(b.value()));
    }
    if (admin && cert_provider) {
      admin->add_metrics_source([c = &cert_provider->counters()](PromWriter& w) {
        w.family("meshgate_cert_issued_total", MetricType::kCounter,
                 "certificates taken (from the Istio CA or reloaded files)");
        w.sample(c->issued.load(std::memory_order_relaxed));
        w.family("meshgate_cert_failures_total", MetricType::kCounter,
                 "certificate requests or reloads that failed (the old certificate stays)");
        w.sample(c->failures.load(std::memory_order_relaxed));
        w.family("meshgate_cert_expiry_unix_seconds", MetricType::kGauge,
                 "not-after of the certificate in use (0: none)");
        w.sample(uint64_t(std::max<int64_t>(0, c->not_after_unix.load(std::memory_order_relaxed))));
      });
    }
    auto pr = setup_ports(setups, uint16_t(workers), pool, replay);
    if (!pr) {
      log(LogLevel::kError, "port_setup_failed", "error=\"%s\"", pr.error().message.c_str());
      rc = kExitRuntime;
      break;
    }
    ports = std::move(pr.value());
    if (!publisher.init(workers)) {
      log(LogLevel::kError, "qsbr_init_failed");
      rc = kExitRuntime;
      break;
    }
    // The mesh provider starts first so that a mesh file is in the first snapshot; an xDS
    // provider's first model arrives later and makes the next one.
    auto mr = mesh::MeshRuntime::create(cfg);
    if (!mr) {
      log(LogLevel::kError, "mesh_failed", "error=\"%s\"", mr.error().message.c_str());
      rc = kExitRuntime;
      break;
    }
    mesh_rt = std::move(mr.value());
    if (mesh_rt) {
      if (auto r = mesh_rt->start(); !r) {
        log(LogLevel::kError, "mesh_failed", "source=%s error=\"%s\"",
            cfg.mesh.source == MeshSource::kFile ? "file" : "xds", r.error().message.c_str());
        rc = kExitRuntime;
        break;
      }
    }
    if (admin && mesh_rt && mesh_rt->xds_counters()) {
      // meshgate_xds_*: read on the control thread from the provider's relaxed atomics.
      admin->add_metrics_source([c = mesh_rt->xds_counters()](PromWriter& w) {
        const auto v = mesh::XdsCountersView::of(*c);
        auto counter = [&](const char* name, const char* help, uint64_t value) {
          w.family(name, MetricType::kCounter, help);
          w.sample(value);
        };
        auto gauge = [&](const char* name, const char* help, uint64_t value) {
          w.family(name, MetricType::kGauge, help);
          w.sample(value);
        };
        counter("meshgate_xds_connects_total", "xDS streams that got a first response", v.connects);
        counter("meshgate_xds_connect_failures_total", "xDS attempts that ended before a response",
                v.connect_failures);
        counter("meshgate_xds_disconnects_total", "connected xDS streams that ended", v.disconnects);
        w.family("meshgate_xds_responses_total", MetricType::kCounter, "xDS responses by type");
        w.sample({{"type", "address"}}, v.responses_address);
        w.sample({{"type", "authorization"}}, v.responses_authorization);
        counter("meshgate_xds_acks_total", "responses ACKed", v.acks);
        counter("meshgate_xds_nacks_total", "responses NACKed (some resources rejected)", v.nacks);
        counter("meshgate_xds_resources_rejected_total", "resources named in NACKs",
                v.resources_rejected);
        counter("meshgate_xds_resources_applied_total", "resources added or updated",
                v.resources_applied);
        counter("meshgate_xds_resources_removed_total", "resources removed", v.resources_removed);
        w.family("meshgate_xds_resources", MetricType::kGauge, "resources held now by kind");
        w.sample({{"kind", "workload"}}, v.workloads);
        w.sample({{"kind", "service"}}, v.services);
        w.sample({{"kind", "authorization"}}, v.authorizations);
        gauge("meshgate_xds_connected", "1 while an xDS stream is up", v.connected);
        gauge("meshgate_xds_synced", "1 once every type had a first response", v.synced);
        gauge("meshgate_xds_backoff_ms", "wait before the next connection attempt", v.backoff_ms);
        gauge("meshgate_xds_last_sync_unix_ms", "wall-clock time of the last applied response",
              uint64_t(v.last_sync_unix_ms));
      });
    }
    std::vector<mesh::Policy> mesh_policies;  // what reg->policies was compiled from
    auto poll_mesh = [&]() {
      auto pending = mesh_rt->poll();
      if (!pending) return;
      // The snapshot carries the model's policies, compiled again only when they changed; a
      // failed build keeps the running ones.
      auto old_policies = reg->policies;
      const bool policies_changed = !reg->policies || pending->policies != mesh_policies;
      if (policies_changed) reg->policies = mesh::compile_policies(pending->policies);
      if (!publish_services(std::move(pending->services), "mesh")) {
        reg->policies = std::move(old_policies);
      } else {
        if (policies_changed) mesh_policies = pending->policies;
        mesh_rt->published(*pending);
        if (admin && mesh_rt->synced()) admin->bridge().mark_mesh_synced();
        log(LogLevel::kInfo, "mesh_applied",
            "generation=%lu synced=%s mesh_services=%zu specs=%zu endpoints=%zu policies=%zu",
            (unsigned long)pending->generation, pending->synced ? "true" : "false",
            pending->stats.services, pending->stats.specs, pending->stats.endpoints,
            pending->stats.policies);
      }
    };
    if (mesh_rt) poll_mesh();
    if (version == 0 && !publish_services(services_from_config(cfg), "config")) {
      rc = kExitRuntime;
      break;
    }

    steering = setup_flow_steering(ports, cfg.fullnat.local_addresses, workers);
    // Software RSS per port with RSS: predicts the queue (worker) of a flow's replies.
    for (const auto& p : ports) {
      rss.push_back(!p.reta.empty() && !p.rss_key.empty()
                        ? std::make_unique<dp::RssPredictor>(p.rss_key, p.reta)
                        : nullptr);
    }
    // Handoff rings, one per ordered pair of workers (SPSC), on the receiver's socket.
    bool rings_ok = true;
    for (uint32_t a = 0; a < workers && workers > 1; ++a) {
      for (uint32_t b = 0; b < workers; ++b) {
        if (a == b) continue;
        const std::string name = "mg_ho_" + std::to_string(a) + "_" + std::to_string(b);
        handoff[a][b] = rte_ring_create(name.c_str(), kHandoffRingSize, SOCKET_ID_ANY,
                                        RING_F_SP_ENQ | RING_F_SC_DEQ);
        rings_ok &= handoff[a][b] != nullptr;
      }
    }
    if (!rings_ok) {
      log(LogLevel::kError, "handoff_rings_failed", "error=\"%s\"", rte_strerror(rte_errno));
      rc = kExitRuntime;
      break;
    }
    int ts_offset = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, nullptr);
    const int ts_bit = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, nullptr);
    unsigned lcore = rte_get_next_lcore(-1, 1, 0);
    bool ok = true;
    for (uint32_t w = 0; w < workers && ok; ++w, lcore = rte_get_next_lcore(lcore, 1, 0)) {
      WorkerSlot& s = slots[w];
      s.lcore = lcore;
      const int socket = int(rte_lcore_to_socket_id(lcore));
      const std::string n = std::to_string(w);
      s.to_control = rte_ring_create_elem(("mg_nb_out" + n).c_str(), sizeof(dp::NeighborUpdate),
                                          kNeighborRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
      s.from_control = rte_ring_create_elem(("mg_nb_in" + n).c_str(), sizeof(dp::NeighborUpdate),
                                            kNeighborRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
      void* mem = rte_zmalloc_socket("mg_worker", sizeof(dp::Worker), 64, socket);
      if (mem) s.worker = new (mem) dp::Worker();
      dp::WorkerParams wp;
      wp.index = uint16_t(w);
      wp.n_workers = uint16_t(workers);
      wp.socket = socket;
      wp.ports = ports;
      wp.snapshot = publisher.slot();
      wp.addrs = reg->addrs.table();
      for (uint32_t o = 0; o < workers; ++o) {
        wp.handoff_to[o] = handoff[w][o];
        wp.handoff_from[o] = handoff[o][w];
      }
      for (size_t pi = 0; pi < rss.size(); ++pi) {
        wp.rss[pi] = rss[pi].get();
        wp.flow_steered[pi] = steering[pi].rte_flow;
      }
      wp.qsbr = publisher.qsbr();
      wp.pool = pool;
      wp.max_flows = per_worker_flows;
      wp.timeouts.tcp_syn_ms = cfg.conntrack.tcp_syn * 1000;
      wp.timeouts.tcp_established_ms = cfg.conntrack.tcp_established * 1000;
      wp.timeouts.tcp_fin_ms = cfg.conntrack.tcp_fin * 1000;
      wp.timeouts.tcp_time_wait_ms = cfg.conntrack.tcp_time_wait * 1000;
      wp.timeouts.tcp_close_ms = std::min(cfg.conntrack.tcp_time_wait, 10u) * 1000;
      wp.timeouts.udp_ms = cfg.conntrack.udp * 1000;
      wp.timeouts.other_ms = cfg.conntrack.icmp * 1000;
      wp.neighbor_out = s.to_control;
      wp.neighbor_in = s.from_control;
      wp.replay = replay;
      wp.replay_packets = replay_packets;
      wp.pipeline = !replay;
      wp.timestamp_offset = ts_bit >= 0 ? ts_offset : -1;
      wp.timestamp_flag = ts_bit >= 0 ? (1ull << ts_bit) : 0;
      wp.proxy = proxy ? &proxy_cfg : nullptr;
      wp.hbone = hbone ? &hbone_cfg : nullptr;
      if (!s.to_control || !s.from_control || !s.worker || !s.worker->init(wp)) {
        log(LogLevel::kError, "worker_init_failed", "worker=%u error=\"out of DPDK memory\"", w);
        ok = false;
      }
      views.push_back(s.worker);
    }
    if (!ok) {
      rc = kExitRuntime;
      break;
    }

    if (replay) log(LogLevel::kInfo, "replay_start", "packets=%lu", (unsigned long)replay_packets);
    for (auto& s : slots) rte_eal_remote_launch(worker_main, s.worker, s.lcore);
    log(LogLevel::kInfo, "workers_started", "workers=%u", workers);
    if (admin && proxy) {
      // meshgate_tcp_* (dataplane/tcp/tcp_counters.def) and meshgate_proxy_*
      // (dataplane/proxy/proxy_counters.def), summed over workers.
      admin->add_metrics_source([&views](PromWriter& w) {
        static constexpr const char* kTcpHelp[] = {
#define MG_TCP_COUNTER(e, name, desc) desc,
#include "dataplane/tcp/tcp_counters.def"
#undef MG_TCP_COUNTER
        };
        const ProxyTotals pt = proxy_totals(views);
        for (uint32_t i = 0; i < dp::tcp::kTcpCounterCount; ++i) {
          w.family(std::string("meshgate_tcp_") + dp::tcp::kTcpCounterNames[i] + "_total",
                   MetricType::kCounter, kTcpHelp[i]);
          w.sample(pt.sum.tcp[i]);
        }
        w.family("meshgate_tcp_connections", MetricType::kGauge,
                 "TCP connections held by the proxies' stacks (TIME-WAIT and half-open included).");
        w.sample(pt.sum.tcp_connections);
        w.family("meshgate_tcp_buffer_bytes", MetricType::kGauge,
                 "Bytes in the TCP send and receive buffers of the proxies' stacks.");
        w.sample(pt.sum.tcp_mem_bytes);
        for (uint32_t i = 0; i < dp::kProxyCounterCount; ++i) {
          w.family(std::string("meshgate_proxy_") + dp::kProxyCounterNames[i] + "_total",
                   MetricType::kCounter, dp::kProxyCounterHelp[i]);
          w.sample(pt.sum.proxy[i]);
        }
        w.family("meshgate_proxy_sessions", MetricType::kGauge,
                 "Proxy sessions open (client and backend connection pairs).");
        w.sample(pt.sum.sessions_active);
      });
    }
    if (admin && hbone) {
      // meshgate_hbone_* (dataplane/hbone/hbone_counters.def: the engine; gateway_counters.def:
      // the terminator on the workers), summed over workers.
      admin->add_metrics_source([&views](PromWriter& w) {
        const HboneTotals ht = hbone_totals(views);
        for (int i = 0; i < dp::hbone::kNumCounters; ++i) {
          const auto c = dp::hbone::Counter(i);
          w.family(std::string("meshgate_hbone_") + dp::hbone::counter_name(c) + "_total",
                   MetricType::kCounter, dp::hbone::counter_help(c));
          w.sample(ht.sum.engine[i]);
        }
        for (int i = 0; i < dp::hbone::kNumGwCounters; ++i) {
          const auto c = dp::hbone::GwCounter(i);
          w.family(std::string("meshgate_hbone_") + dp::hbone::gw_counter_name(c) + "_total",
                   MetricType::kCounter, dp::hbone::gw_counter_help(c));
          w.sample(ht.sum.gw[i]);
        }
        auto gauge = [&w](const char* name, const char* help, uint64_t v) {
          w.family(name, MetricType::kGauge, help);
          w.sample(v);
        };
        gauge("meshgate_hbone_connections", "HBONE connections open on the [hbone] port.",
              ht.sum.connections_active);
        gauge("meshgate_hbone_tunnels", "HBONE tunnels open (streams with an upstream connection).",
              ht.sum.tunnels_active);
        gauge("meshgate_hbone_handshakes",
              "HBONE connections still in their handshake (TLS or before the client's SETTINGS).",
              ht.sum.handshakes_active);
        gauge("meshgate_hbone_buffer_bytes",
              "Bytes held in HBONE buffers (queued toward clients, received and not yet sent upstream).",
              ht.sum.buffer_bytes);
      });
    }
    if (admin) {
      std::vector<dp::Worker*> running;
      for (auto& s : slots) running.push_back(s.worker);
      admin->start_serving(std::move(running), ports);
      admin->bridge().mark_snapshot_live();
    }

    // Control loop: 1 ms period; nothing here is on the packet path.
    const bool progress = replay && isatty(STDERR_FILENO);
    auto last_progress = std::chrono::steady_clock::now();
    uint64_t last_rx = 0;
    // Drain (SIGTERM, POST /drain; live only): workers refuse new flows and keep existing ones
    // until no TCP flow is established or [gateway] drain_timeout_ms passed, then stop. SIGINT,
    // and SIGTERM during a replay, stop at once.
    enum class Phase { kRunning, kDraining, kStopping };
    Phase phase = Phase::kRunning;
    std::chrono::steady_clock::time_point drain_start, drain_deadline;
    auto stop_workers = [&] {
      for (auto& s : slots) s.worker->request_stop();
      phase = Phase::kStopping;
    };
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (g_sighup) {
        g_sighup = 0;
        log(LogLevel::kWarn, "sighup", "action=ignored reason=\"config reload is not supported "
            "yet; restart meshgate to apply a new config\"");
      }
      if (phase != Phase::kStopping && (g_sigint || (replay && g_sigterm))) {
        log(LogLevel::kInfo, "stopping", "signal=%d", g_sigint ? int(g_stop_signal) : SIGTERM);
        stop_workers();
      }
      if (phase == Phase::kRunning && !replay &&
          (g_sigterm || (admin && admin->bridge().take_drain_request()))) {
        const StatsTotals t = sum_counters(views);
        log(LogLevel::kInfo, "drain_start", "trigger=%s established=%lu active=%lu timeout_ms=%u",
            g_sigterm ? "sigterm" : "admin", (unsigned long)t.flows_established,
            (unsigned long)t.flows_active, cfg.gateway.drain_timeout_ms);
        for (auto& s : slots) s.worker->set_draining(true);
        if (admin) admin->bridge().mark_draining();
        phase = Phase::kDraining;
        drain_start = now;
        drain_deadline = now + std::chrono::milliseconds(cfg.gateway.drain_timeout_ms);
      }
      if (phase == Phase::kDraining) {
        const StatsTotals t = sum_counters(views);
        // Proxy sessions finish like established flows (new connections are refused).
        // HBONE connections too (they got GOAWAY; their streams finish).
        const uint64_t sessions = (proxy ? proxy_totals(views).sum.sessions_active : 0) +
                                  (hbone ? hbone_totals(views).sum.connections_active : 0);
        if ((t.flows_established == 0 && sessions == 0) || now >= drain_deadline) {
          log(LogLevel::kInfo, "drain_done",
              "reason=%s elapsed_ms=%lld established=%lu active=%lu refused=%lu",
              t.flows_established == 0 ? "no_established_flows" : "timeout",
              (long long)std::chrono::duration_cast<std::chrono::milliseconds>(now - drain_start)
                  .count(),
              (unsigned long)t.flows_established, (unsigned long)t.flows_active,
              (unsigned long)t.drops[uint32_t(dp::Drop::kDraining)]);
          stop_workers();
        }
      }
      if (admin) admin->tick(now);
      bool all_done = true;
      for (auto& s : slots) all_done &= s.worker->done();
      if (all_done) break;
      // Neighbor fan-out: what one worker learned from the wire, every other worker learns.
      for (uint32_t w = 0; w < workers; ++w) {
        dp::NeighborUpdate u;
        while (rte_ring_dequeue_elem(slots[w].to_control, &u, sizeof u) == 0) {
          for (uint32_t o = 0; o < workers; ++o) {
            if (o != w) rte_ring_enqueue_elem(slots[o].from_control, &u, sizeof u);
          }
        }
      }
      // A provider that fails keeps the last snapshot forwarding; only new models publish.
      if (mesh_rt && phase != Phase::kStopping) poll_mesh();
      // A new or renewed certificate: the next snapshot carries its metadata.
      if (cert_provider && phase != Phase::kStopping) {
        if (auto b = cert_provider->poll()) {
          auto old_certs = reg->certificates;
          auto old_contexts = reg->tls_contexts;
          if (take_certificate(std::move(b.value())) &&
              !publish_services(last_services, "certificate")) {
            reg->certificates = std::move(old_certs);
            reg->tls_contexts = std::move(old_contexts);
          }
        }
      }
      publisher.reclaim();
      if (progress) {
        const auto now = std::chrono::steady_clock::now();
        const double dt = std::chrono::duration<double>(now - last_progress).count();
        if (dt >= 1.0) {
          const StatsTotals t = sum_counters(views);
          std::fprintf(stderr, "\rreplay: %lu/%lu packets (%.1f%%), %.2f Mpps   ",
                       (unsigned long)t.packets_in, (unsigned long)replay_packets,
                       replay_packets ? 100.0 * double(t.packets_in) / double(replay_packets) : 100.0,
                       double(t.packets_in - last_rx) / dt / 1e6);
          last_rx = t.packets_in;
          last_progress = now;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    rte_eal_mp_wait_lcore();
    if (mesh_rt) mesh_rt->stop();
    if (cert_provider) cert_provider->stop();
    if (admin) admin->stop();
    if (progress) std::fprintf(stderr, "\n");

    const std::vector<PortCounters> port_counters = read_port_counters(ports);
    std::fputs(summary_text(views, registry, publisher.current(), port_counters).c_str(), stdout);
    std::fflush(stdout);
    if (!opt.stats_json.empty()) {
      std::ofstream f(opt.stats_json);
      nlohmann::json j = stats_json(views, registry, publisher.current(), port_counters);
      for (const auto& st : steering) {
        j["flow_steering"][st.port] = st.rte_flow ? "rte_flow" : "software";
      }
      f << j.dump(2) << "\n";
      if (!f) {
        log(LogLevel::kError, "stats_json_failed", "path=\"%s\"", opt.stats_json.c_str());
        rc = kExitRuntime;
      }
    }
    const StatsTotals t = sum_counters(views);
    if (replay && t.packets_in != replay_packets) {
      log(LogLevel::kWarn, "replay_incomplete", "expected=%lu received=%lu",
          (unsigned long)replay_packets, (unsigned long)t.packets_in);
    }
  } while (false);

  admin.reset();  // before the workers: it may hold their flow-dump requests
  mesh_rt.reset();
  for (auto& s : slots) free_worker(s);
  if (!steering.empty()) teardown_flow_steering(ports);
  for (auto& row : handoff) {
    for (rte_ring* r : row) rte_ring_free(r);
  }
  stop_ports(ports);
  publisher.shutdown();
  reg.reset();
  rte_mempool_free(pool);
  eal_cleanup();
  return rc;
}

}  // namespace meshgate::ctl
