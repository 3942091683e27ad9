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
#include <rte_ring_elem.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <sys/random.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>

#include "control/admin/admin.h"
#include "control/admin/workloads.h"
#include "control/bgp/bgp_speaker.h"
#include "control/certs/cert_info.h"
#include "control/certs/cert_provider.h"
#include "control/certs/tls_context.h"
#include "control/accesslog/access_log_writer.h"
#include "control/config/config_reload.h"
#include "control/flowsteer/flowsteer.h"
#include "control/health/health_check.h"
#include "control/host/host_interface.h"
#include "control/mesh/authz.h"
#include "control/mesh/mesh_runtime.h"
#include "control/runtime/eal_cleanup.h"
#include "control/runtime/eal.h"
#include "control/runtime/gateway_metrics.h"
#include "control/runtime/host_checks.h"
#include "control/runtime/ports.h"
#include "control/runtime/reload.h"
#include "control/runtime/reload_job.h"
#include "control/snapshot/builder.h"
#include "control/snapshot/publisher.h"
#include "control/stats/stats.h"
#include "dataplane/hbone/gateway.h"
#include "dataplane/l2/neighbor.h"
#include "dataplane/lb/affinity.h"
#include "dataplane/nat/rss.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/route/pending.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/worker/worker.h"

namespace meshgate::ctl {
namespace {

// SIGINT and SIGQUIT stop at once; SIGTERM drains first (live mode); each of them ends in the
// same cleanup path. SIGHUP, which would otherwise end the process without a summary,
// --stats-json or EAL cleanup, reloads the config (GatewayRun::reload).
volatile std::sig_atomic_t g_sigint = 0;
volatile std::sig_atomic_t g_sigterm = 0;
volatile std::sig_atomic_t g_sighup = 0;
volatile std::sig_atomic_t g_stop_signal = 0;  // the signal that stops at once
// SIGUSR1 reopens the access log (logrotate's postrotate).
volatile std::sig_atomic_t g_sigusr1 = 0;

void on_signal(int sig) {
  switch (sig) {
    case SIGINT:
    case SIGQUIT:
      g_stop_signal = sig;
      g_sigint = 1;
      break;
    case SIGHUP: g_sighup = 1; break;
    case SIGUSR1: g_sigusr1 = 1; break;
    default: g_sigterm = 1; break;
  }
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1}) sigaction(sig, &sa, nullptr);
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
  t.max_listeners = proxy_listener_slots(cfg);
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
  pp.deny = uses_deny(cfg);
  return pp;
}

uint64_t mbufs_needed(const Config& cfg, uint32_t workers, const std::vector<std::string>& devices) {
  uint64_t mbufs = 0;
  for (const auto& p : cfg.ports) mbufs += uint64_t(workers) * (p.rx_descriptors + p.tx_descriptors);
  mbufs += uint64_t(workers) * (4 * dp::kBurst + dp::PendingQueue::kCapacity + kMbufCache) + 4096;
  for (const auto& p : cfg.ports) {
    if (!p.host_interface.empty()) mbufs += HostInterfaces::kMbufsPerTwin;
  }
  if (uses_proxy(cfg) || uses_hbone(cfg)) {
    // Buffered TCP data is received mbufs (one per segment, >= 1 KiB of payload each when the
    // budget is what limits), plus the frames the stacks emit between two drains.
    mbufs += uint64_t(workers) * ((uint64_t(cfg.proxy.memory_mb) << 20) / 1024 + dp::kStackOutQueue);
  }
  // net_pcap with infinite_rx copies its whole file into the RX pool at start: make room.
  for (const std::string& d : devices) {
    if (d.rfind("net_pcap", 0) != 0 || d.find("infinite_rx=1") == std::string::npos) continue;
    const auto at = d.find("rx_pcap=");
    if (at == std::string::npos) continue;
    const std::string path = d.substr(at + 8, d.find(',', at) - (at + 8));
    if (auto n = count_pcap_packets(path)) mbufs += *n;
  }
  return mbufs;
}

MemoryNeed start_memory_need(const Config& cfg, const RunOptions& opt) {
  // As plan_workers sizes a start: a replay runs one worker, its first port the pcap device.
  const bool replay = !opt.pcap_in.empty();
  const uint32_t workers = replay ? 1 : opt.workers ? opt.workers : cfg.gateway.workers;
  std::vector<std::string> devices;
  for (size_t i = replay ? 1 : 0; i < cfg.ports.size(); ++i) devices.push_back(cfg.ports[i].device);
  const uint64_t mbufs = mbufs_needed(cfg, std::max<uint32_t>(workers, 1), devices);
  const bool fit = mbufs <= std::numeric_limits<uint32_t>::max();
  const EalPlan plan = plan_eal(cfg, std::max<uint32_t>(workers, 1),
                                uint32_t(std::min<uint64_t>(mbufs, UINT32_MAX)), opt.eal_args,
                                opt.log_level);
  return memory_need(cfg, plan, fit, available_memory_mb());
}

namespace {

// kWithdrawing: a drain with [bgp] first withdraws the VIPs and waits withdraw_wait_ms, still
// taking new flows, before it refuses them (kDraining).
enum class Phase { kRunning, kWithdrawing, kDraining, kStopping };

// One gateway run. run_gateway calls the steps in order; each logs its own failure, and
// teardown() frees whatever the steps got, in reverse order, whichever step failed.
class GatewayRun {
 public:
  GatewayRun(const Config& cfg, const RunOptions& opt)
      : config_(cfg), cfg_(config_), opt_(opt), reload_stats_(int64_t(std::time(nullptr))) {}

  // Before the EAL: the worker count, the replay input, the mbuf budget, the stack and HBONE
  // settings, and whether the config fits the host's memory. kExitOk, else the exit code.
  int plan();
  // The EAL with the planned memory and lcores. kExitOk, else the exit code (EAL cleaned up).
  int start_eal();
  // The mbuf pool, the registries and the snapshot builder's helper threads.
  bool create_pools();
  // The admin API (live mode with [admin] listen): /ready answers 503 while the rest starts.
  bool start_admin();
  // The gateway's certificate source, and the first certificate if one is ready.
  void start_certificates();
  bool start_ports();
  bool init_publisher();
  // The mesh provider; a mesh file's model is in the first snapshot.
  bool start_mesh();
  // The first snapshot: the mesh's, else the config's services.
  bool publish_first_snapshot();
  // Flow steering, RSS predictors, handoff rings, then each worker on its lcore.
  bool start_workers();
  // The optional parts' /metrics families; then the admin API answers every query.
  void register_metrics();
  // Live mode: POST /reload, the reload metrics and /config_dump status, and the file watch
  // ([gateway] watch_config). SIGHUP reloads from the control loop's start on.
  void setup_reload();
  // A SIGTERM or SIGINT stopped the start (while the first snapshot's names compiled).
  bool stopped_at_start() const { return stopped_at_start_; }
  // The workers run the first snapshot: the VIPs are announced from now on ([bgp]).
  void become_ready();
  // Until every worker stopped: signals, drain, admin ticks, neighbor fan-out, providers,
  // snapshot reclamation, replay progress.
  void control_loop();
  // After the workers stopped: providers and admin stopped, the summary and --stats-json.
  // The exit code.
  int finish();
  void teardown();

 private:
  int plan_workers();
  void plan_buffers();
  int check_memory();
  bool create_rings();
  bool init_workers();
  bool take_certificate(CertBundle b);
  bool publish_services(std::vector<ServiceSpec> services, const char* why,
                        std::string* error = nullptr);
  // A config reload (config/README.md "Reloading"), in two halves. start_reload: on a
  // background thread (ReloadWork), the file checked against a copy of the running config and
  // the Hyperscan databases of its listeners compiled; one reload runs at a time: `query` (POST
  // /reload) is answered 409 while one runs, a SIGHUP or watched change is queued and runs
  // after it (one, however many came). finish_reload, on the control thread once the work is
  // done: an accepted config replaces config_ and its services are published (after the
  // static ones, the mesh's last model, as poll_mesh does), the build finding the databases
  // compiled; nothing changes unless the result is ok. `query` is answered then.
  void start_reload(const char* trigger, std::shared_ptr<Query> query = nullptr);
  void poll_reload();
  void finish_reload(ReloadWork work);
  // GET /reload's state: the reload in progress, the last outcome.
  void publish_reload_state();
  // Answers the POST /reload requests waiting for the reload in progress.
  void answer_reload_waiters(const AdminReply& reply);
  bool publish_reloaded(std::string* error);
  // Starts or stops the file watch as cfg_.gateway.watch_config says.
  void update_config_watch();
  // A watched change whose bytes differ from the last ones tried: a reload.
  void poll_config_watch();
  void poll_mesh();
  void poll_certificate();
  void poll_health(std::chrono::steady_clock::time_point now);
  void act_on_signals(std::chrono::steady_clock::time_point now);
  void check_drain(std::chrono::steady_clock::time_point now);
  void start_draining(std::chrono::steady_clock::time_point now);
  // Tells the BGP speaker what to announce: the usable VIPs while ready and not draining.
  void update_announcements();
  void stop_workers();
  // sd_notify(3) for a systemd unit of Type=notify (packaging/meshgate.service); without
  // NOTIFY_SOCKET they do nothing. READY=1 once /ready would answer 200, STOPPING=1 when the
  // drain (or an immediate stop) begins.
  bool serving_ready() const;
  void notify_ready_once();
  void notify_stopping_once(const char* status);
  bool workers_done() const;
  void fan_out_neighbors();
  void show_progress(bool last = false);
  // [access_log]: the writer and its rings (before the workers), SIGUSR1's reopen, a reload's
  // new path.
  bool start_access_log();
  void reopen_access_log(const char* trigger);

  // The running config, owned here. cfg_ and what was given it at start (Admin, MeshRuntime)
  // read it in place on the control thread, so a reload that replaces its contents reaches
  // them all; what only start-up reads (ports, workers, sizes) a reload may not change
  // (restart_only_changes). Declared before cfg_, which refers to it.
  Config config_;
  const Config& cfg_;
  const RunOptions& opt_;
  bool replay_ = false;
  uint32_t workers_ = 0;
  uint64_t replay_packets_ = 0;
  std::vector<PortSetup> setups_;
  uint32_t per_worker_flows_ = 0;
  std::unique_ptr<dp::AffinityTable> affinity_;  // shared by the workers
  uint64_t mbufs_ = 0;
  bool hbone_ = false;
  bool proxy_ = false;
  dp::ProxyParams proxy_cfg_;
  dp::hbone::GatewayParams hbone_cfg_;
  cpu_set_t allowed_cpus_;
  EalPlan plan_;

  rte_mempool* pool_ = nullptr;
  std::vector<dp::PortRuntime> ports_;
  SnapshotPublisher publisher_;
  std::unique_ptr<Registries> reg_;
  std::vector<std::unique_ptr<dp::RssPredictor>> rss_;
  std::vector<SteeringResult> steering_;
  std::unique_ptr<FlowApi> flow_api_;
  std::unique_ptr<FlowRuleManager> flow_rules_;  // a reload calls flow_rules_->sync_all()
  std::vector<std::vector<rte_ring*>> handoff_;
  std::vector<WorkerSlot> slots_;
  std::vector<const dp::Worker*> views_;
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<HostInterfaces> host_;
  std::unique_ptr<BgpSpeaker> bgp_;
  std::unique_ptr<health::HealthMonitor> health_;  // static services' health checks (live)
  bool ready_ = false;  // the workers run the first snapshot: VIPs may be announced
  bool notified_ready_ = false;     // READY=1 sent
  bool notified_stopping_ = false;  // STOPPING=1 sent
  std::vector<IpAddr> vips_, usable_vips_;  // every VIP; those with a backend to take flows
  std::unique_ptr<mesh::MeshRuntime> mesh_rt_;
  std::unique_ptr<CertProvider> cert_provider_;
  uint64_t version_ = 0;
  std::vector<ServiceSpec> last_services_;  // republished with a new certificate
  std::vector<mesh::Policy> mesh_policies_;  // what reg_->policies was compiled from
  ReloadStats reload_stats_;
  std::unique_ptr<ConfigWatch> config_watch_;
  std::string watched_sha256_;  // the config bytes last loaded or tried
  cpu_set_t helper_cpus_;       // where the snapshot builder's helpers and background tasks run
  std::unique_ptr<BackgroundTask<ReloadWork>> reload_work_;  // the reload in progress
  uint64_t reload_id_ = 0;                   // reloads started
  const char* reload_trigger_ = "";          // the one in progress
  std::chrono::steady_clock::time_point reload_started_;
  int64_t reload_started_unix_ = 0;
  bool reload_told_systemd_ = false;         // RELOADING=1 sent for it
  const char* reload_queued_ = nullptr;      // a SIGHUP or watched change came meanwhile
  std::vector<std::shared_ptr<Query>> reload_waiters_;  // its POST /reload requests
  nlohmann::json last_reload_;               // the last outcome, for GET /reload
  bool stopped_at_start_ = false;
  std::unique_ptr<AccessLogWriter> access_log_;  // outlives the workers (their rings)

  Phase phase_ = Phase::kRunning;
  std::chrono::steady_clock::time_point drain_start_, drain_deadline_, withdraw_deadline_;
  const char* drain_trigger_ = "";
  bool progress_ = false;
  bool progress_tty_ = false;  // a terminal: one line redrawn; otherwise a line per report
  std::chrono::steady_clock::time_point last_progress_, replay_start_;
  uint64_t last_rx_ = 0;
};

int GatewayRun::plan() {
  if (const int rc = plan_workers(); rc != kExitOk) return rc;
  plan_buffers();
  return check_memory();
}

// The worker count and, for a replay, the pcap input in place of the first port.
int GatewayRun::plan_workers() {
  replay_ = !opt_.pcap_in.empty();
  workers_ = opt_.workers ? opt_.workers : cfg_.gateway.workers;
  // The validator and the command line keep to these; a config built in code might not, and
  // the per-worker and per-port arrays below are sized by them.
  if (workers_ < 1 || workers_ > dp::kMaxWorkers || cfg_.ports.size() > dp::kMaxPorts) {
    log(LogLevel::kError, "usage", "error=\"at most %u workers and %u ports\" workers=%u ports=%zu",
        dp::kMaxWorkers, dp::kMaxPorts, workers_, cfg_.ports.size());
    return kExitUsage;
  }
  for (const auto& p : cfg_.ports) setups_.push_back(PortSetup{&p, p.device, p.promiscuous});
  if (replay_) {
    for (const std::string& f : {opt_.pcap_in, opt_.pcap_out}) {
      if (f.find(',') != std::string::npos) {
        log(LogLevel::kError, "usage", "error=\"pcap paths must not contain ','\" path=\"%s\"",
            f.c_str());
        return kExitUsage;
      }
    }
    auto n = count_pcap_packets(opt_.pcap_in);
    if (!n) {
      log(LogLevel::kError, "usage", "error=\"%s\"", n.error().message.c_str());
      return kExitUsage;
    }
    replay_packets_ = *n;
    // net_pcap has one RX queue per rx_pcap file: the replay runs on one worker.
    if (workers_ != 1) {
      log(LogLevel::kInfo, "replay_single_worker", "configured_workers=%u", workers_);
      workers_ = 1;
    }
    const std::string out = opt_.pcap_out.empty() ? "/dev/null" : opt_.pcap_out;
    setups_[0].device = "net_pcap_replay0,rx_pcap=" + opt_.pcap_in + ",tx_pcap=" + out;
    setups_[0].promiscuous |= opt_.promiscuous;
  }
  return kExitOk;
}

// Flow tables, the TCP stack's and HBONE's settings, and the mbufs all of them need.
void GatewayRun::plan_buffers() {
  per_worker_flows_ = std::max<uint32_t>(1024, cfg_.conntrack.max_flows / workers_);
  affinity_ = std::make_unique<dp::AffinityTable>(dp::affinity_entries_for(cfg_.conntrack.max_flows));
  std::vector<std::string> devices;
  for (const auto& st : setups_) devices.push_back(st.device);
  mbufs_ = mbufs_needed(cfg_, workers_, devices);
  // HBONE runs on the proxy's TCP stack: with [hbone] certificates the stack runs too.
  hbone_ = uses_hbone(cfg_);
  proxy_ = uses_proxy(cfg_) || hbone_;
  hbone_cfg_.port = cfg_.hbone.port;
  hbone_cfg_.max_connections = cfg_.hbone.max_connections;
  hbone_cfg_.max_handshakes = cfg_.hbone.max_handshakes;
  hbone_cfg_.max_handshakes_per_source = cfg_.hbone.max_handshakes_per_source;
  hbone_cfg_.limits.handshake_timeout_ms = cfg_.hbone.handshake_timeout_ms;
  hbone_cfg_.memory_bytes = uint64_t(cfg_.hbone.memory_mb) << 20;
  if (getrandom(&hbone_cfg_.source_seed, sizeof hbone_cfg_.source_seed, 0) !=
      ssize_t(sizeof hbone_cfg_.source_seed)) {
    hbone_cfg_.source_seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  if (proxy_) proxy_cfg_ = proxy_params(cfg_);
}

int GatewayRun::check_memory() {
  // The CPUs we were given, before EAL init pins this thread to the main lcore's.
  CPU_ZERO(&allowed_cpus_);
  if (sched_getaffinity(0, sizeof allowed_cpus_, &allowed_cpus_) != 0) CPU_SET(0, &allowed_cpus_);
  // Memory, before the EAL takes any: what the config asks for must fit what the host has
  // left, or the start would end in the OOM killer's hands, silently. The EAL's part comes
  // from RAM unless hugepages hold it; the Maglev tables are always ordinary memory.
  const bool mbufs_fit = mbufs_ <= std::numeric_limits<uint32_t>::max();
  plan_ = plan_eal(cfg_, workers_, uint32_t(std::min<uint64_t>(mbufs_, UINT32_MAX)),
                   opt_.eal_args, opt_.log_level);
  const MemoryNeed n = memory_need(cfg_, plan_, mbufs_fit, available_memory_mb());
  if (!n.fits()) {
    log(LogLevel::kError, "memory_insufficient",
        "needed_mb=%lu available_mb=%lu eal_mb=%lu maglev_tables_mb=%lu services=%zu "
        "error=\"the config %s; lower conntrack.max_flows, proxy.memory_mb, table_size or the "
        "service count\"",
        (unsigned long)n.needed_mb, (unsigned long)n.available_mb, (unsigned long)n.eal_mb,
        (unsigned long)n.tables_mb, n.services, memory_need_text(n).c_str());
    return kExitUsage;
  }
  return kExitOk;
}

int GatewayRun::start_eal() {
  if (auto r = init_eal(plan_); !r) {
    // Say what the EAL was asked for and what the host has: the usual cause is memory.
    log(LogLevel::kError, "eal_init_failed",
        "error=\"%s\" estimated_mb=%u hugepages=%s free_hugepages_mb=%lu eal_args=%s "
        "hint=\"%s\"",
        r.error().message.c_str(), plan_.memory_mb, plan_.hugepages ? "yes" : "no",
        (unsigned long)free_hugepage_mb(), opt_.eal_args.empty() ? "default" : "user",
        eal_failure_hint(plan_, free_hugepage_mb()).c_str());
    return kExitRuntime;
  }
  // What the EAL really has (the user's -m or --socket-mem after `--` may differ from the plan).
  std::string replaced, argv;
  for (const auto& r : plan_.replaced) replaced += (replaced.empty() ? "" : ",") + r;
  for (const auto& w : plan_.args) argv += (argv.empty() ? "" : " ") + w;
  uint64_t heap_bytes = 0;
  for (unsigned sock = 0; sock < RTE_MAX_NUMA_NODES; ++sock) {
    rte_malloc_socket_stats st{};
    if (rte_malloc_get_socket_stats(int(sock), &st) == 0) heap_bytes += st.heap_totalsz_bytes;
  }
  log(LogLevel::kInfo, "eal_ready",
      "eal_args=%s hugepages=%s memory_mb=%lu estimated_mb=%u lcores=%u workers=%u "
      "defaults_replaced=%s argv=\"%s\"",
      opt_.eal_args.empty() ? "default" : "user", plan_.hugepages ? "yes" : "no",
      (unsigned long)(heap_bytes >> 20), plan_.memory_mb, rte_lcore_count(), workers_,
      replaced.empty() ? "none" : replaced.c_str(), argv.c_str());
  if (rte_lcore_count() < workers_ + 1) {
    log(LogLevel::kError, "not_enough_lcores", "lcores=%u needed=%u", rte_lcore_count(),
        workers_ + 1);
    eal_cleanup();
    return kExitRuntime;
  }
  return kExitOk;
}

bool GatewayRun::create_pools() {
  pool_ = rte_pktmbuf_pool_create("mg_mbufs", uint32_t(mbufs_), kMbufCache, 0,
                                  RTE_MBUF_DEFAULT_BUF_SIZE, int(rte_socket_id()));
  // After EAL init: the address registry lives in DPDK memory.
  reg_ = std::make_unique<Registries>();
  const uint32_t n = resolve_build_threads(cfg_.control.build_threads, workers_,
                                           std::thread::hardware_concurrency());
  helper_cpus_ = non_worker_cpus(allowed_cpus_, workers_);
  const bool pinned = reg_->pool.start(n, &helper_cpus_);
  log(pinned ? LogLevel::kInfo : LogLevel::kWarn, "snapshot_builder",
      "build_threads=%u configured=%u helper_cpus=%d pinned=%s", n, cfg_.control.build_threads,
      CPU_COUNT(&helper_cpus_), pinned ? "yes" : "no");
  handoff_.assign(workers_, std::vector<rte_ring*>(workers_, nullptr));
  slots_.resize(workers_);
  if (!pool_) {
    log(LogLevel::kError, "mempool_failed", "mbufs=%lu error=\"%s\"", (unsigned long)mbufs_,
        rte_strerror(rte_errno));
    return false;
  }
  return true;
}

bool GatewayRun::start_admin() {
  // The admin API runs in live mode only: replays are batch jobs, and parallel replays would
  // fight over the port. It starts before the ports and the first snapshot, so that /ready
  // answers 503 rather than "connection refused" while the gateway comes up, and after EAL
  // init, so that its threads inherit the main lcore's affinity and stay off worker cores.
  if (replay_ || cfg_.admin.listen.empty()) return true;
  auto a = Admin::start(cfg_, reg_->stats, publisher_);
  if (!a) {
    log(LogLevel::kError, "admin_start_failed", "listen=\"%s\" error=\"%s\"",
        cfg_.admin.listen.c_str(), a.error().message.c_str());
    return false;
  }
  admin_ = std::move(a.value());
  log(LogLevel::kInfo, "admin_listening", "listen=\"%s\"", cfg_.admin.listen.c_str());
  return true;
}

void GatewayRun::start_certificates() {
  // The gateway's certificate ([hbone] files, reloaded on change, or the Istio CA): every
  // snapshot carries its metadata (/config_dump) and the workers' TLS contexts. Until a
  // usable one arrives the workers refuse HBONE connections (counted); the rest runs.
  cert_provider_ = CertProvider::create(cfg_);
  if (!cert_provider_) return;
  cert_provider_->start();
  if (auto b = cert_provider_->poll()) take_certificate(std::move(b.value()));
}

// A certificate for the snapshots: its metadata and one TLS context per worker (built here, on
// the control thread). False, with the running ones kept, when no context can be built.
bool GatewayRun::take_certificate(CertBundle b) {
  std::vector<std::shared_ptr<const dp::tls::Context>> contexts;
  TlsContextConfig tc;
  tc.cert_chain_pem = b.chain_pem;
  tc.private_key_pem = b.key_pem;
  tc.trust_bundle_pem = b.roots_pem;
  tc.trust_domain = cfg_.hbone.trust_domain;
  for (uint32_t w = 0; w < workers_; ++w) {
    std::string err;
    std::shared_ptr<const dp::tls::Context> c = create_tls_context(tc, err);
    if (!c) {
      log(LogLevel::kError, "certificate_unusable", "identity=%s error=\"%s\" keeping=%s",
          b.identity.c_str(), err.c_str(), reg_->tls_contexts.empty() ? "none" : "the previous");
      return false;
    }
    contexts.push_back(std::move(c));
  }
  reg_->tls_contexts = std::move(contexts);
  reg_->certificates = std::make_shared<const std::vector<CertInfo>>(std::move(b.info));
  return true;
}

bool GatewayRun::start_ports() {
  auto pr = setup_ports(setups_, uint16_t(workers_), pool_, replay_);
  if (!pr) {
    log(LogLevel::kError, "port_setup_failed", "error=\"%s\"", pr.error().message.c_str());
    return false;
  }
  ports_ = std::move(pr.value());
  // A replay has no kernel to talk to: its ports' twins are not made.
  auto host = HostInterfaces::create(replay_ ? std::vector<PortConfig>{} : cfg_.ports, ports_, pool_);
  if (!host) {
    log(LogLevel::kError, "host_interface_failed", "error=\"%s\"", host.error().message.c_str());
    return false;
  }
  host_ = std::move(host.value());
  if (!cfg_.bgp.enabled || replay_) return true;
  // The daemon starts with the ports' twins, announcing nothing until the gateway is ready.
  auto plan = bgp_plan(cfg_);
  if (!plan) {
    log(LogLevel::kError, "bgp_failed", "error=\"%s\"", plan.error().message.c_str());
    return false;
  }
  bgp_ = std::make_unique<BgpSpeaker>(std::move(plan.value()), cfg_.bgp.daemon,
                                      cfg_.bgp.runtime_dir);
  if (std::string e = bgp_->start(); !e.empty()) {
    log(LogLevel::kError, "bgp_failed", "error=\"%s\"", e.c_str());
    return false;
  }
  return true;
}

bool GatewayRun::init_publisher() {
  if (!publisher_.init(workers_)) {
    log(LogLevel::kError, "qsbr_init_failed");
    return false;
  }
  return true;
}

bool GatewayRun::start_mesh() {
  // The mesh provider starts first so that a mesh file is in the first snapshot; an xDS
  // provider's first model arrives later and makes the next one.
  auto mr = mesh::MeshRuntime::create(cfg_);
  if (!mr) {
    log(LogLevel::kError, "mesh_failed", "error=\"%s\"", mr.error().message.c_str());
    return false;
  }
  mesh_rt_ = std::move(mr.value());
  if (!mesh_rt_) return true;
  if (auto r = mesh_rt_->start(); !r) {
    log(LogLevel::kError, "mesh_failed", "source=%s error=\"%s\"",
        cfg_.mesh.source == MeshSource::kFile ? "file" : "xds", r.error().message.c_str());
    return false;
  }
  return true;
}

// A new service list -> snapshot -> publish. On failure the running snapshot stays.
bool GatewayRun::publish_services(std::vector<ServiceSpec> services, const char* why,
                                  std::string* error) {
  if (health_) health_->apply(services);
  const auto t0 = std::chrono::steady_clock::now();
  auto snap = build_snapshot(cfg_, services, ports_, *reg_, version_ + 1);
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!snap) {
    log(LogLevel::kError, "snapshot_failed", "version=%lu reason=%s error=\"%s\"",
        (unsigned long)(version_ + 1), why, snap.error().message.c_str());
    if (error) *error = snap.error().message;
    return false;
  }
  ++version_;
  publisher_.publish(*snap);
  log(LogLevel::kInfo, "snapshot_published",
      "version=%lu reason=%s services=%zu backends=%zu build_ms=%.1f tables_built=%zu "
      "tables_reused=%zu",
      (unsigned long)version_, why, (*snap)->services.size(), (*snap)->backends.size(), build_ms,
      reg_->last_build.tables_built, reg_->last_build.tables_reused);
  if (cert_provider_) last_services_ = services;  // a new certificate republishes them
  VipSets v = vip_sets(services, **snap);
  vips_ = std::move(v.all);
  usable_vips_ = std::move(v.usable);
  update_announcements();
  if (admin_) admin_->set_services(std::move(services));
  return true;
}

// A provider that fails keeps the last snapshot forwarding; only new models publish.
void GatewayRun::poll_mesh() {
  auto pending = mesh_rt_->poll();
  if (!pending) return;
  // The snapshot carries the model's policies, compiled again only when they changed; a
  // failed build keeps the running ones.
  auto old_policies = reg_->policies;
  const bool policies_changed = !reg_->policies || pending->policies != mesh_policies_;
  if (policies_changed) reg_->policies = mesh::compile_policies(pending->policies);
  if (!publish_services(std::move(pending->services), "mesh")) {
    reg_->policies = std::move(old_policies);
    return;
  }
  if (policies_changed) mesh_policies_ = pending->policies;
  mesh_rt_->published(*pending);
  if (admin_ && mesh_rt_->synced()) admin_->bridge().mark_mesh_synced();
  log(LogLevel::kInfo, "mesh_applied",
      "generation=%lu synced=%s mesh_services=%zu specs=%zu endpoints=%zu policies=%zu",
      (unsigned long)pending->generation, pending->synced ? "true" : "false",
      pending->stats.services, pending->stats.specs, pending->stats.endpoints,
      pending->stats.policies);
}

// A new or renewed certificate: the next snapshot carries its metadata.
void GatewayRun::poll_certificate() {
  auto b = cert_provider_->poll();
  if (!b) return;
  auto old_certs = reg_->certificates;
  auto old_contexts = reg_->tls_contexts;
  if (take_certificate(std::move(b.value())) && !publish_services(last_services_, "certificate")) {
    reg_->certificates = std::move(old_certs);
    reg_->tls_contexts = std::move(old_contexts);
  }
}

// A backend went up or down: the services again, marked (publish_services applies the states).
void GatewayRun::poll_health(std::chrono::steady_clock::time_point now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  if (health_->tick(uint64_t(ms.count()))) publish_services(health_->services(), "health");
}

bool GatewayRun::publish_first_snapshot() {
  if (!replay_) health_ = health::HealthMonitor::create(cfg_);
  // The listeners' regex sets can take a minute to compile: off this thread, so that a SIGTERM
  // or SIGINT meanwhile stops the start at once (there is nothing to drain yet).
  const auto t0 = std::chrono::steady_clock::now();
  BackgroundTask<CompiledNames> names(
      [c = cfg_] { return compile_listener_names(c, {}); }, &helper_cpus_);
  while (!names.done()) {
    if (g_sigint || g_sigterm) {
      log(LogLevel::kInfo, "stopping", "signal=%d phase=start waited_ms=%lld",
          g_sigint ? int(g_stop_signal) : SIGTERM,
          (long long)std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - t0)
              .count());
      stopped_at_start_ = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  adopt_names(reg_->names, names.take());
  if (mesh_rt_) poll_mesh();
  return version_ != 0 || publish_services(services_from_config(cfg_), "config");
}

bool GatewayRun::start_workers() {
  if (!start_access_log() || !create_rings() || !init_workers()) return false;
  if (replay_) log(LogLevel::kInfo, "replay_start", "packets=%lu", (unsigned long)replay_packets_);
  // Before the launch, while a competitor pinned to a worker's CPU still has it to itself.
  cpu_set_t worker_cpus;
  CPU_ZERO(&worker_cpus);
  for (const auto& s : slots_) {
    const rte_cpuset_t l = rte_lcore_cpuset(s.lcore);
    CPU_OR(&worker_cpus, &worker_cpus, &l);
  }
  warn_shared_worker_cpus(worker_cpus);
  replay_start_ = std::chrono::steady_clock::now();
  for (auto& s : slots_) rte_eal_remote_launch(worker_main, s.worker, s.lcore);
  if (host_) host_->start();
  log(LogLevel::kInfo, "workers_started", "workers=%u", workers_);
  return true;
}

// Flow steering and RSS predictors per port; handoff rings between workers.
bool GatewayRun::create_rings() {
  flow_api_ = make_dpdk_flow_api();
  flow_rules_ = std::make_unique<FlowRuleManager>(*flow_api_);
  steering_ = setup_flow_steering(*flow_rules_, ports_, flow_rule_inputs(cfg_, workers_));
  // Software RSS per port with RSS: predicts the queue (worker) of a flow's replies.
  for (const auto& p : ports_) {
    rss_.push_back(!p.reta.empty() && !p.rss_key.empty()
                       ? std::make_unique<dp::RssPredictor>(p.rss_key, p.reta)
                       : nullptr);
  }
  // Handoff rings, one per ordered pair of workers (SPSC), on the receiver's socket.
  bool rings_ok = true;
  for (uint32_t a = 0; a < workers_ && workers_ > 1; ++a) {
    for (uint32_t b = 0; b < workers_; ++b) {
      if (a == b) continue;
      const std::string name = "mg_ho_" + std::to_string(a) + "_" + std::to_string(b);
      handoff_[a][b] = rte_ring_create(name.c_str(), kHandoffRingSize, SOCKET_ID_ANY,
                                       RING_F_SP_ENQ | RING_F_SC_DEQ);
      rings_ok &= handoff_[a][b] != nullptr;
    }
  }
  if (!rings_ok) {
    log(LogLevel::kError, "handoff_rings_failed", "error=\"%s\"", rte_strerror(rte_errno));
    return false;
  }
  return true;
}

// Each worker in its lcore's socket memory, with its neighbor rings to and from the control
// thread.
bool GatewayRun::init_workers() {
  const int ts_offset = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, nullptr);
  const int ts_bit = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, nullptr);
  unsigned lcore = rte_get_next_lcore(-1, 1, 0);
  bool ok = true;
  for (uint32_t w = 0; w < workers_ && ok; ++w, lcore = rte_get_next_lcore(lcore, 1, 0)) {
    WorkerSlot& s = slots_[w];
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
    wp.n_workers = uint16_t(workers_);
    wp.socket = socket;
    wp.ports = ports_;
    wp.snapshot = publisher_.slot();
    wp.addrs = reg_->addrs.table();
    wp.affinity = affinity_.get();
    for (uint32_t o = 0; o < workers_; ++o) {
      wp.handoff_to[o] = handoff_[w][o];
      wp.handoff_from[o] = handoff_[o][w];
    }
    for (size_t pi = 0; pi < rss_.size(); ++pi) {
      wp.rss[pi] = rss_[pi].get();
      wp.flow_steered[pi] = steering_[pi].rte_flow;
    }
    wp.qsbr = publisher_.qsbr();
    wp.pool = pool_;
    wp.max_flows = per_worker_flows_;
    wp.timeouts = worker_settings(cfg_).conntrack;
    wp.neighbor_out = s.to_control;
    wp.neighbor_in = s.from_control;
    wp.replay = replay_;
    wp.replay_packets = replay_packets_;
    wp.pipeline = !replay_;
    wp.timestamp_offset = ts_bit >= 0 ? ts_offset : -1;
    wp.timestamp_flag = ts_bit >= 0 ? (1ull << ts_bit) : 0;
    wp.proxy = proxy_ ? &proxy_cfg_ : nullptr;
    wp.hbone = hbone_ ? &hbone_cfg_ : nullptr;
    wp.access_log = access_log_ ? access_log_->ring(w) : nullptr;
    wp.access_log_flows = cfg_.access_log.flows;
    if (host_) host_->attach(wp);
    if (!s.to_control || !s.from_control || !s.worker || !s.worker->init(wp)) {
      log(LogLevel::kError, "worker_init_failed", "worker=%u error=\"out of DPDK memory\"", w);
      ok = false;
    }
    views_.push_back(s.worker);
  }
  return ok;
}

void GatewayRun::register_metrics() {
  if (!admin_) return;
  if (cert_provider_) add_cert_metrics(*admin_, cert_provider_->counters());
  if (mesh_rt_ && mesh_rt_->xds_counters()) add_xds_metrics(*admin_, *mesh_rt_->xds_counters());
  if (proxy_) add_proxy_metrics(*admin_, views_);
  if (proxy_) add_listener_metrics(*admin_, views_, publisher_);
  if (hbone_) add_hbone_metrics(*admin_, views_);
  if (proxy_ || hbone_) add_istio_metrics(*admin_, views_, reg_->istio);
  if (access_log_) add_access_log_metrics(*admin_, *access_log_);
  add_affinity_metrics(*admin_, *affinity_);
  add_build_info_metric(*admin_);
  if (host_ && !host_->empty()) add_host_metrics(*admin_, *host_);
  if (flow_rules_) {
    add_flow_rule_metrics(*admin_, *flow_rules_);
    admin_->set_flow_rules_source([m = flow_rules_.get()] { return flow_rules_json(*m); });
  }
  add_health_metrics(*admin_, health_);
  if (mesh_rt_) {
    admin_->set_workloads_source([m = mesh_rt_.get()] { return workloads_json(m->model().get()); });
  }
  if (bgp_) {
    add_bgp_metrics(*admin_, *bgp_);
    admin_->set_bgp_source([b = bgp_.get()] {
      return bgp_status_json(b->status(), std::chrono::duration_cast<std::chrono::seconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
    });
  }
  std::vector<dp::Worker*> running;
  for (auto& s : slots_) running.push_back(s.worker);
  admin_->start_serving(std::move(running), ports_);
  admin_->bridge().mark_snapshot_live();
}

void GatewayRun::setup_reload() {
  if (replay_) return;
  if (admin_) {
    admin_->set_reload_handler([this](std::shared_ptr<Query> q) { start_reload("admin", std::move(q)); });
    admin_->add_metrics_source([this](PromWriter& w) { reload_stats_.write_metrics(w); });
    admin_->set_config_status(reload_stats_.status(cfg_));
  }
  watched_sha256_ = cfg_.sha256;
  update_config_watch();
}

void GatewayRun::start_reload(const char* trigger, std::shared_ptr<Query> query) {
  if (reload_work_) {
    if (query) {
      query->promise.set_value(reload_in_progress_reply(reload_id_, reload_trigger_));
    } else if (!reload_queued_) {
      reload_queued_ = trigger;
      log(LogLevel::kInfo, "config_reload_queued", "trigger=%s in_progress_id=%lu", trigger,
          (unsigned long)reload_id_);
      publish_reload_state();
    }
    return;
  }
  // systemd shows the unit "reloading" until READY=1; MONOTONIC_USEC is what systemd 253's
  // Type=notify-reload expects with it (sd_notify(3)).
  reload_told_systemd_ = notified_ready_ && !notified_stopping_;
  if (reload_told_systemd_) {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
               (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
  }
  ++reload_id_;
  reload_trigger_ = trigger;
  reload_started_ = std::chrono::steady_clock::now();
  reload_started_unix_ = int64_t(std::time(nullptr));
  // Copies: the task may outlive this run (abandoned at a stop), and the control thread keeps
  // reading and (on another reload) replacing config_.
  reload_work_ = std::make_unique<BackgroundTask<ReloadWork>>(
      [running = cfg_, trigger, have = cached_name_keys(reg_->names)] {
        return run_reload_check(running, trigger, have);
      },
      &helper_cpus_);
  if (query) {
    query->reload_id.store(reload_id_, std::memory_order_release);
    reload_waiters_.push_back(std::move(query));
  }
  log(LogLevel::kInfo, "config_reload_started", "trigger=%s id=%lu", trigger,
      (unsigned long)reload_id_);
  publish_reload_state();
}

void GatewayRun::poll_reload() {
  if (!reload_work_ || !reload_work_->done()) return;
  ReloadWork w = reload_work_->take();
  reload_work_.reset();
  finish_reload(std::move(w));
  if (reload_queued_ && phase_ != Phase::kStopping) {
    const char* trigger = reload_queued_;
    reload_queued_ = nullptr;
    start_reload(trigger);
  }
}

void GatewayRun::finish_reload(ReloadWork w) {
  ReloadOutcome& o = w.outcome;
  o.id = reload_id_;
  if (phase_ == Phase::kStopping) {
    log(LogLevel::kInfo, "config_reload_abandoned", "trigger=%s id=%lu reason=stopping",
        o.trigger, (unsigned long)o.id);
    answer_reload_waiters(text_reply(503, "meshgate is shutting down: the reload was not applied"));
    return;
  }
  std::optional<Config>& next = w.next;
  if (!o.sha256.empty()) watched_sha256_ = o.sha256;
  if (o.result == ReloadResult::kOk) {
    // Only start_ports read setups_; they point into the ports about to be replaced.
    setups_.clear();
    std::swap(config_, *next);  // *next: the config that ran until now
    if (access_log_ && next->access_log.path != cfg_.access_log.path) reopen_access_log("reload");
    // The reloaded services' health checks, each backend still checked keeping its state.
    std::unique_ptr<health::HealthMonitor> checks = health::HealthMonitor::create(cfg_);
    if (checks && health_) checks->adopt_states(*health_);
    std::swap(health_, checks);  // checks: the running monitor, until the publish succeeded
    adopt_names(reg_->names, std::move(w.names));
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    const bool published = publish_reloaded(&error);
    log(LogLevel::kInfo, "config_reload_timing",
        "id=%lu check_ms=%.0f compile_ms=%.0f publish_ms=%.1f", (unsigned long)o.id, w.check_ms,
        w.compile_ms,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!published) {
      std::swap(health_, checks);
      std::swap(config_, *next);
      o.result = ReloadResult::kInvalid;
      o.errors.errors.push_back(ConfigError{SourcePos{cfg_.path, 0, 0}, "",
                                            "the new config's snapshot cannot be built: " + error});
    } else if (flow_rules_) {
      // The NIC rules follow (a removed range loses its rules); the software checks of the
      // new snapshot are already in force.
      flow_rules_->sync_all(flow_rule_inputs(cfg_, workers_));
    }
  }
  o.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                           reload_started_)
                     .count();
  log_reload(o);
  reload_stats_.count(o);
  if (admin_) admin_->set_config_status(reload_stats_.status(cfg_));
  update_config_watch();
  if (reload_told_systemd_ && !notified_stopping_) sd_notify(0, "READY=1\nSTATUS=serving");
  last_reload_ = reload_json(o);
  last_reload_["unix_time"] = o.unix_time;
  publish_reload_state();
  answer_reload_waiters(reload_reply(o));
}

void GatewayRun::publish_reload_state() {
  if (!admin_) return;
  nlohmann::json j = {{"state", reload_work_ ? "in_progress" : "idle"},
                      {"id", reload_id_},
                      {"last", last_reload_.is_null() ? nlohmann::json(nullptr) : last_reload_}};
  if (reload_work_) {
    j["trigger"] = reload_trigger_;
    j["started_unix"] = reload_started_unix_;
    j["queued"] = reload_queued_ != nullptr;
  }
  admin_->bridge().set_reload_state(j.dump(2));
}

void GatewayRun::answer_reload_waiters(const AdminReply& reply) {
  for (auto& q : reload_waiters_) q->promise.set_value(reply);
  reload_waiters_.clear();
}

bool GatewayRun::publish_reloaded(std::string* error) {
  if (mesh_rt_) {
    if (auto pending = mesh_rt_->remap()) {
      return publish_services(std::move(pending->services), "reload", error);
    }
  }
  return publish_services(services_from_config(cfg_), "reload", error);
}

void GatewayRun::update_config_watch() {
  const bool want = cfg_.gateway.watch_config && !replay_;
  if (want == (config_watch_ != nullptr)) return;
  if (!want) {
    config_watch_.reset();
    log(LogLevel::kInfo, "config_watch", "state=off path=\"%s\"", cfg_.path.c_str());
    return;
  }
  auto w = std::make_unique<ConfigWatch>();
  if (!w->start(cfg_.path)) {
    log(LogLevel::kWarn, "config_watch_failed", "path=\"%s\" error=\"%s\"", cfg_.path.c_str(),
        std::strerror(errno));
    return;
  }
  config_watch_ = std::move(w);
  log(LogLevel::kInfo, "config_watch", "state=on path=\"%s\" settle_ms=%d", cfg_.path.c_str(),
      ConfigWatch::kSettleMs);
}

void GatewayRun::poll_config_watch() {
  if (!config_watch_->take_change()) return;
  const std::string sha = file_sha256(cfg_.path);
  // Unreadable: removed for a moment (the rename of a save); the next event brings it back.
  if (sha.empty() || sha == watched_sha256_) return;
  start_reload("watch");
}

void GatewayRun::become_ready() {
  ready_ = true;
  update_announcements();
}

void GatewayRun::update_announcements() {
  if (!bgp_) return;
  const bool announce = ready_ && phase_ == Phase::kRunning;
  bgp_->announce(announce ? usable_vips_ : std::vector<IpAddr>{}, vips_);
}

// Drain (SIGTERM, POST /drain; live only): workers refuse new flows and keep existing ones
// until no TCP flow is established or [gateway] drain_timeout_ms passed, then stop. SIGINT,
// and SIGTERM during a replay, stop at once.
void GatewayRun::control_loop() {
  // 1 ms period; nothing here is on the packet path.
  progress_tty_ = isatty(STDERR_FILENO);
  progress_ = replay_ && (progress_tty_ || opt_.progress);
  last_progress_ = std::chrono::steady_clock::now();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    act_on_signals(now);
    notify_ready_once();
    if (phase_ == Phase::kDraining) check_drain(now);
    if (admin_) admin_->tick(now);
    if (bgp_) bgp_->tick(now);
    if (workers_done()) break;
    fan_out_neighbors();
    if (mesh_rt_ && phase_ != Phase::kStopping) poll_mesh();
    if (cert_provider_ && phase_ != Phase::kStopping) poll_certificate();
    if (health_ && phase_ != Phase::kStopping) poll_health(now);
    // A change seen while a reload runs waits for it (the flag stays up).
    if (config_watch_ && phase_ != Phase::kStopping && !reload_work_) poll_config_watch();
    if (reload_work_) poll_reload();
    publisher_.reclaim();
    if (access_log_) access_log_->drain();
    if (progress_) show_progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void GatewayRun::act_on_signals(std::chrono::steady_clock::time_point now) {
  if (g_sigusr1) {
    g_sigusr1 = 0;
    if (access_log_) {
      access_log_->drain();  // what the old file should still get
      reopen_access_log("sigusr1");
    }
  }
  if (g_sighup) {
    g_sighup = 0;
    if (replay_) {
      log(LogLevel::kInfo, "sighup", "action=ignored reason=\"a replay does not reload its config\"");
    } else if (phase_ != Phase::kStopping) {
      start_reload("sighup");
    }
  }
  if (phase_ != Phase::kStopping && (g_sigint || (replay_ && g_sigterm))) {
    log(LogLevel::kInfo, "stopping", "signal=%d", g_sigint ? int(g_stop_signal) : SIGTERM);
    stop_workers();
  }
  if (phase_ == Phase::kRunning && !replay_ &&
      (g_sigterm || (admin_ && admin_->bridge().take_drain_request()))) {
    drain_trigger_ = g_sigterm ? "sigterm" : "admin";
    if (admin_) admin_->bridge().mark_draining();
    notify_stopping_once("draining");
    if (bgp_) {
      // The routers first move new flows to the other gateways; this one still takes what
      // arrives meanwhile.
      phase_ = Phase::kWithdrawing;
      update_announcements();
      withdraw_deadline_ = now + std::chrono::milliseconds(cfg_.bgp.withdraw_wait_ms);
      log(LogLevel::kInfo, "drain_withdraw", "trigger=%s vips=%zu wait_ms=%u", drain_trigger_,
          usable_vips_.size(), cfg_.bgp.withdraw_wait_ms);
    } else {
      start_draining(now);
    }
  }
  if (phase_ == Phase::kWithdrawing && now >= withdraw_deadline_) start_draining(now);
}

void GatewayRun::start_draining(std::chrono::steady_clock::time_point now) {
  const StatsTotals t = sum_counters(views_);
  log(LogLevel::kInfo, "drain_start",
      "trigger=%s established=%lu closing=%lu active=%lu timeout_ms=%u", drain_trigger_,
      (unsigned long)t.flows_established, (unsigned long)t.flows_closing,
      (unsigned long)t.flows_active, cfg_.gateway.drain_timeout_ms);
  for (auto& s : slots_) s.worker->set_draining(true);
  phase_ = Phase::kDraining;
  drain_start_ = now;
  drain_deadline_ = now + std::chrono::milliseconds(cfg_.gateway.drain_timeout_ms);
}

void GatewayRun::check_drain(std::chrono::steady_clock::time_point now) {
  const StatsTotals t = sum_counters(views_);
  // Proxy sessions finish like established flows (new connections are refused).
  // HBONE connections too (they got GOAWAY; their streams finish).
  const uint64_t sessions = (proxy_ ? proxy_totals(views_).sum.sessions_active : 0) +
                            (hbone_ ? hbone_totals(views_).sum.connections_active : 0);
  // Closing connections too: a half-closed one may still carry data the other way, and its
  // last FIN and ACK must pass, or the peers retransmit them to whoever holds the VIP next.
  const uint64_t open = t.flows_established + t.flows_closing;
  if ((open != 0 || sessions != 0) && now < drain_deadline_) return;
  log(LogLevel::kInfo, "drain_done",
      "reason=%s elapsed_ms=%lld established=%lu closing=%lu active=%lu refused=%lu",
      open == 0 ? "no_established_flows" : "timeout",
      (long long)std::chrono::duration_cast<std::chrono::milliseconds>(now - drain_start_)
          .count(),
      (unsigned long)t.flows_established, (unsigned long)t.flows_closing,
      (unsigned long)t.flows_active, (unsigned long)t.drops[uint32_t(dp::Drop::kDraining)]);
  stop_workers();
}

void GatewayRun::stop_workers() {
  notify_stopping_once("stopping");
  // The BGP daemon first, while worker 0 still sends what the kernel twin emits: its Cease
  // reaches the routers, which withdraw this gateway's routes at once.
  if (bgp_) {
    bgp_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the pump and worker 0 flush
  }
  for (auto& s : slots_) s.worker->request_stop();
  phase_ = Phase::kStopping;
}

// What GET /ready answers (AdminBridge::readiness), also without an admin API.
bool GatewayRun::serving_ready() const {
  if (admin_) return admin_->bridge().readiness().ready;
  return ready_ && phase_ == Phase::kRunning && (!mesh_rt_ || mesh_rt_->synced());
}

void GatewayRun::notify_ready_once() {
  if (notified_ready_ || replay_ || !serving_ready()) return;
  notified_ready_ = true;
  sd_notify(0, "READY=1\nSTATUS=serving");
}

void GatewayRun::notify_stopping_once(const char* status) {
  if (notified_stopping_ || replay_) return;
  notified_stopping_ = true;
  sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status);
}

bool GatewayRun::workers_done() const {
  bool all_done = true;
  for (const auto& s : slots_) all_done &= s.worker->done();
  return all_done;
}

// What one worker learned from the wire, every other worker learns.
void GatewayRun::fan_out_neighbors() {
  for (uint32_t w = 0; w < workers_; ++w) {
    dp::NeighborUpdate u;
    while (rte_ring_dequeue_elem(slots_[w].to_control, &u, sizeof u) == 0) {
      for (uint32_t o = 0; o < workers_; ++o) {
        if (o != w) rte_ring_enqueue_elem(slots_[o].from_control, &u, sizeof u);
      }
    }
  }
}

bool GatewayRun::start_access_log() {
  const AccessLogConfig& al = cfg_.access_log;
  if (al.path.empty()) return true;
  access_log_ = std::make_unique<AccessLogWriter>(workers_, al.ring_size);
  if (auto r = access_log_->open(al.path); !r) {
    log(LogLevel::kError, "access_log_failed", "path=\"%s\" error=\"%s\"", al.path.c_str(),
        r.error().message.c_str());
    return false;
  }
  log(LogLevel::kInfo, "access_log_opened", "path=\"%s\" flows=%s ring_size=%u", al.path.c_str(),
      al.flows ? "true" : "false", access_log_->ring(0)->capacity());
  return true;
}

void GatewayRun::reopen_access_log(const char* trigger) {
  // A reload's new path, or the same path again: on failure the open file stays in use.
  if (auto r = access_log_->open(cfg_.access_log.path); !r) {
    log(LogLevel::kError, "access_log_reopen_failed", "trigger=%s path=\"%s\" error=\"%s\" keeping=\"%s\"",
        trigger, cfg_.access_log.path.c_str(), r.error().message.c_str(),
        access_log_->path().c_str());
    return;
  }
  log(LogLevel::kInfo, "access_log_reopened", "trigger=%s path=\"%s\"", trigger,
      cfg_.access_log.path.c_str());
}

// Once a second, and (`last`) once at the end with the whole replay's rate, so a replay shorter
// than a second still reports.
void GatewayRun::show_progress(bool last) {
  const auto now = std::chrono::steady_clock::now();
  if (last) {
    last_progress_ = replay_start_;
    last_rx_ = 0;
  }
  const double dt = std::chrono::duration<double>(now - last_progress_).count();
  if (dt < 1.0 && !last) return;
  const StatsTotals t = sum_counters(views_);
  std::fprintf(stderr, "%sreplay: %lu/%lu packets (%.1f%%), %.2f Mpps%s",
               progress_tty_ ? "\r" : "", (unsigned long)t.packets_in,
               (unsigned long)replay_packets_,
               replay_packets_ ? 100.0 * double(t.packets_in) / double(replay_packets_) : 100.0,
               dt > 0 ? double(t.packets_in - last_rx_) / dt / 1e6 : 0.0,
               progress_tty_ && !last ? "   " : "\n");
  last_rx_ = t.packets_in;
  last_progress_ = now;
}

int GatewayRun::finish() {
  int rc = kExitOk;
  rte_eal_mp_wait_lcore();
  // Every worker has stopped: what a sibling's last poll handed to one stopped before it.
  for (auto& s : slots_) {
    if (s.worker) s.worker->drop_late_handoffs();
  }
  if (access_log_) access_log_->drain(SIZE_MAX);  // the connections that ended last
  // A reload still compiling is abandoned (teardown); its requests are answered now.
  answer_reload_waiters(text_reply(503, "meshgate is shutting down: the reload was not applied"));
  if (bgp_) bgp_->stop();  // stopped already unless the workers ended by themselves
  if (mesh_rt_) mesh_rt_->stop();
  if (cert_provider_) cert_provider_->stop();
  if (admin_) admin_->stop();
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - replay_start_).count();
  if (progress_) show_progress(true);

  const std::vector<PortCounters> port_counters = read_port_counters(ports_);
  std::fputs(summary_text(views_, reg_->stats, publisher_.current(), port_counters).c_str(),
             stdout);
  if (replay_) {
    const StatsTotals in = sum_counters(views_);
    std::fputs(replay_rate_text(in.packets_in, in.bytes_in, elapsed_s).c_str(), stdout);
  }
  std::fflush(stdout);
  if (!opt_.stats_json.empty()) {
    std::ofstream f(opt_.stats_json);
    nlohmann::json j = stats_json(views_, reg_->stats, publisher_.current(), port_counters);
    for (const auto& st : steering_) {
      j["flow_steering"][st.port] = st.rte_flow ? "rte_flow" : "software";
    }
    if (access_log_) j["access_log"] = access_log_->stats_json();
    f << j.dump(2) << "\n";
    if (!f) {
      log(LogLevel::kError, "stats_json_failed", "path=\"%s\"", opt_.stats_json.c_str());
      rc = kExitRuntime;
    }
  }
  const StatsTotals t = sum_counters(views_);
  if (replay_ && t.packets_in != replay_packets_) {
    log(LogLevel::kWarn, "replay_incomplete", "expected=%lu received=%lu",
        (unsigned long)replay_packets_, (unsigned long)t.packets_in);
  }
  return rc;
}

void GatewayRun::teardown() {
  answer_reload_waiters(text_reply(503, "meshgate is shutting down: the reload was not applied"));
  reload_work_.reset();  // abandoned when still running (reload_job.h)
  config_watch_.reset();
  admin_.reset();  // before the workers: it may hold their flow-dump requests
  mesh_rt_.reset();
  for (auto& s : slots_) free_worker(s);
  bgp_.reset();   // the daemon before the twins it talks through
  host_.reset();  // its TAPs before the pool their mbufs come from
  if (flow_rules_) teardown_flow_steering(*flow_rules_);
  for (auto& row : handoff_) {
    for (rte_ring* r : row) rte_ring_free(r);
  }
  stop_ports(ports_);
  publisher_.shutdown();
  reg_.reset();
  rte_mempool_free(pool_);
  eal_cleanup();
}

}  // namespace

// The steps of a gateway's life, in order: plan and check memory, the EAL, pools, the admin
// API, the certificate, ports, the mesh, the first snapshot, the workers, their metrics, the
// control loop (and drain), the summary; then everything freed, whichever step stopped it.
int run_gateway(const Config& cfg, const RunOptions& opt) {
  // HBONE's buffers are heap vectors that reach MiBs under back-pressure (docs/HBONE.md,
  // "Abuse"). A fixed threshold gives every block of 256 KiB or more its own mapping, returned
  // to the kernel when freed; glibc's dynamic threshold would rise after the first such free
  // and keep later blocks in worker arenas that never shrink (RSS held after the load left).
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  GatewayRun g(cfg, opt);
  if (const int rc = g.plan(); rc != kExitOk) return rc;
  if (const int rc = g.start_eal(); rc != kExitOk) return rc;
  int rc = kExitRuntime;
  if (g.create_pools() && g.start_admin()) {
    g.start_certificates();
    if (g.start_ports() && g.init_publisher() && g.start_mesh() && g.publish_first_snapshot() &&
        g.start_workers()) {
      g.register_metrics();
      g.setup_reload();
      g.become_ready();
      g.control_loop();
      rc = g.finish();
    }
  }
  if (g.stopped_at_start()) rc = kExitOk;
  g.teardown();
  if (background_tasks_running() > 0) {
    // A compile still running (abandoned): exit without waiting for it, and without running
    // static destructors under it.
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}

}  // namespace meshgate::ctl
