// Control-plane benchmark: how long the control thread takes to turn a mesh of S services and
// S x E endpoints into a snapshot, and how long after publishing it every running worker uses it.
//
//   build/tools/bench/ctlplane/meshgate-ctlplane-bench [--services 10000] [--endpoints 10]
//       [--v6-every 10] [--workers 1] [--threads 1] [--rounds 15] [--json FILE]
//
// The mesh is mesh-style: services "ns-K/svc-I.ns-K.svc.cluster.local" with one port, a VIP in
// 10.96.0.0/12 (every --v6-every-th service an IPv6 VIP in fd00:10:96::/64 instead), E dual-stack
// HBONE workloads each, mapped by the real mesh::map_mesh (so table sizes are [mesh]'s
// automatic ones). Figures (docs/PERFORMANCE.md, "Control plane"):
//
//   map_mesh            model -> ServiceSpecs
//   build cold          build_snapshot with empty caches (the first snapshot of a process)
//   rebuild 1 changed   one service's endpoints changed since the last build (a pod came or went)
//   rebuild 10% changed a tenth of the services' weights changed
//   rebuild all changed every service's weights changed: every Maglev table refilled, only the
//                       route tables reused
//   rebuild unchanged   the same services again (a push that changed nothing the dataplane sees)
//   publish -> use      SnapshotPublisher::publish() of a new version until every running
//                       worker's counters().snapshot_version shows it; workers poll idle
//                       net_ring ports, as on an idle gateway
//   reclaim             freeing a retired snapshot of this size after its grace period
//
// Each figure is over --rounds runs: median, min and max, in milliseconds (publish -> use in
// microseconds). It runs on the EAL like the gateway: --no-huge, lcore 0 the control thread,
// lcores 1.. the workers (on CPUs 1.., wrapping). Builds fill Maglev tables on --threads threads
// (the control thread and helpers that may run on any of the process's CPUs). No worker runs
// during the builds: the workers start after them, for publish -> use, which publishes copies
// of the last snapshot. A gateway keeps its control thread and the helpers off the workers'
// cores instead.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "control/config/config.h"
#include "control/mesh/mesh_mapping.h"
#include "control/runtime/eal_cleanup.h"
#include "control/snapshot/builder.h"
#include "control/snapshot/publisher.h"
#include "dataplane/worker/worker.h"

using namespace meshgate;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CPU time of the calling thread: on a shared machine, wall time also counts the time other
// processes held the core.
double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

struct Figure {
  std::string name;
  std::string unit;  // "ms" or "us"
  std::vector<double> samples;
  std::vector<double> cpu;  // thread CPU time of the same runs (ms), when measured
  static double median_of(std::vector<double> s) {
    std::sort(s.begin(), s.end());
    return s.empty() ? 0 : s[s.size() / 2];
  }
  double median() const { return median_of(samples); }
  double min() const { return samples.empty() ? 0 : *std::min_element(samples.begin(), samples.end()); }
  double max() const { return samples.empty() ? 0 : *std::max_element(samples.begin(), samples.end()); }
};

IpAddr v4(uint32_t host) {
  IpAddr a;
  a.b[10] = a.b[11] = 0xff;
  a.b[12] = uint8_t(host >> 24);
  a.b[13] = uint8_t(host >> 16);
  a.b[14] = uint8_t(host >> 8);
  a.b[15] = uint8_t(host);
  return a;
}

// fd00:<hi>:<mid>::<n> (n up to 32 bits)
IpAddr v6(uint16_t hi, uint16_t mid, uint32_t n) {
  IpAddr a;
  a.b[0] = 0xfd;
  a.b[2] = uint8_t(hi >> 8);
  a.b[3] = uint8_t(hi);
  a.b[4] = uint8_t(mid >> 8);
  a.b[5] = uint8_t(mid);
  a.b[12] = uint8_t(n >> 24);
  a.b[13] = uint8_t(n >> 16);
  a.b[14] = uint8_t(n >> 8);
  a.b[15] = uint8_t(n);
  return a;
}

ctl::mesh::MeshModel make_mesh(uint32_t services, uint32_t endpoints, uint32_t v6_every) {
  ctl::mesh::MeshModel m;
  for (uint32_t i = 0; i < services; ++i) {
    ctl::mesh::Service s;
    const std::string ns = "ns-" + std::to_string(i / 100);
    s.name = "svc-" + std::to_string(i);
    s.ns = ns;
    s.hostname = s.name + "." + ns + ".svc.cluster.local";
    const bool six = v6_every && i % v6_every == v6_every - 1;
    s.vips.push_back({"", six ? v6(0x10, 0x96, i) : v4((10u << 24 | 96u << 16) + i), std::nullopt});
    s.ports.push_back({80, 8080, 0});
    const std::string key = s.key();
    for (uint32_t e = 0; e < endpoints; ++e) {
      const uint32_t n = i * endpoints + e;
      ctl::mesh::Workload w;
      w.uid = "Kubernetes//Pod/" + ns + "/" + s.name + "-" + std::to_string(e);
      w.name = s.name + "-" + std::to_string(e);
      w.ns = ns;
      w.addresses = {v4((10u << 24 | 128u << 16) + n), v6(0x10, 0x244, n)};
      w.tunnel = ctl::mesh::Tunnel::kHbone;
      w.service_account = s.name;
      w.services[key] = {};
      m.workloads.emplace(w.uid, std::move(w));
    }
    m.services.emplace(key, std::move(s));
  }
  return m;
}

const char* kConfig = R"(
[gateway]
workers = 1
[[port]]
name = "net0"
device = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
[[route]]
prefix = "10.128.0.0/9"
via = "198.51.100.254"
[[route]]
prefix = "fd00::/8"
via = "2001:db8:1::fe"
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
[[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:00:fe"
[[neighbor]]
address = "2001:db8:1::fe"
mac = "02:00:00:00:00:fe"
[mesh]
source = "xds"
address = "127.0.0.1:15010"
tls = false
)";

int worker_main(void* arg) { return static_cast<dp::Worker*>(arg)->run(); }

void fail(const std::string& what) {
  std::fprintf(stderr, "ctlplane-bench: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t n_services = 10000, n_endpoints = 10, v6_every = 10, n_workers = 1, rounds = 15;
  uint32_t threads = 1;
  std::string json_out;
  CLI::App app{"meshgate control-plane benchmark: snapshot rebuild and publish at mesh scale"};
  app.add_option("--services", n_services, "mesh services (one VIP:port each)")->check(CLI::Range(1u, 200000u));
  app.add_option("--endpoints", n_endpoints, "endpoints per service")->check(CLI::Range(1u, 1000u));
  app.add_option("--v6-every", v6_every, "every Nth service has an IPv6 VIP (0: none)");
  app.add_option("--workers", n_workers, "running workers polling idle ports")->check(CLI::Range(1u, 16u));
  app.add_option("--threads", threads, "threads filling Maglev tables in a build, the control "
                 "thread included ([control] build_threads)")->check(CLI::Range(1u, ctl::kMaxBuildThreads));
  app.add_option("--rounds", rounds, "runs per figure")->check(CLI::Range(1u, 1000u));
  app.add_option("--json", json_out, "also write the figures as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  if (uint64_t(n_services) * n_endpoints > 2'000'000) fail("at most 2,000,000 endpoints");

  // The CPUs we were given, before EAL init pins this thread to lcore 0's: the helpers' CPUs.
  cpu_set_t all_cpus;
  CPU_ZERO(&all_cpus);
  if (sched_getaffinity(0, sizeof all_cpus, &all_cpus) != 0) CPU_SET(0, &all_cpus);
  // EAL as the gateway sets it up without hugepages: lcore 0 = control, 1.. = workers.
  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  std::string lcores = "0@0";
  for (uint32_t w = 1; w <= n_workers; ++w) {
    lcores += "," + std::to_string(w) + "@" + std::to_string(ncpu > 1 ? 1 + (w - 1) % (ncpu - 1) : 0);
  }
  std::vector<std::string> eal = {"ctlplane-bench", "--no-huge", "-m", "1024", "--no-pci",
                                  "--no-shconf", "--no-telemetry", "--lcores", lcores,
                                  "--file-prefix=mgbench-" + std::to_string(getpid()),
                                  "--log-level=error"};
  std::vector<char*> eargv;
  for (auto& a : eal) eargv.push_back(a.data());
  if (rte_eal_init(int(eargv.size()), eargv.data()) < 0) {
    fail(std::string("EAL init failed: ") + rte_strerror(rte_errno));
  }

  auto cfg = ctl::parse_config(kConfig, "bench.toml");
  if (!cfg) fail("config: " + cfg.error().str());

  // One net_ring port with a queue per worker: idle, so a worker's loop is as short as it gets
  // and the figure is the publish mechanism's, not the packet work's.
  rte_mempool* pool = rte_pktmbuf_pool_create("mgb_pool", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  if (!pool) fail("mbuf pool");
  std::vector<rte_ring*> rx(n_workers), tx(n_workers);
  for (uint32_t q = 0; q < n_workers; ++q) {
    rx[q] = rte_ring_create(("mgb_rx" + std::to_string(q)).c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    tx[q] = rte_ring_create(("mgb_tx" + std::to_string(q)).c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!rx[q] || !tx[q]) fail("rings");
  }
  const int port_id = rte_eth_from_rings("net_ring_bench", rx.data(), uint16_t(n_workers), tx.data(),
                                         uint16_t(n_workers), 0);
  if (port_id < 0) fail("rte_eth_from_rings");
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(uint16_t(port_id), uint16_t(n_workers), uint16_t(n_workers), &conf) != 0) {
    fail("configure the net_ring port");
  }
  for (uint16_t q = 0; q < n_workers; ++q) {
    if (rte_eth_rx_queue_setup(uint16_t(port_id), q, 1024, 0, nullptr, pool) != 0 ||
        rte_eth_tx_queue_setup(uint16_t(port_id), q, 1024, 0, nullptr) != 0) {
      fail("set up the net_ring queues");
    }
  }
  if (rte_eth_dev_start(uint16_t(port_id)) != 0) fail("start the net_ring port");
  dp::PortRuntime port;
  port.name = "net0";
  port.port_id = uint16_t(port_id);
  port.index = 0;
  port.mac = *cfg->ports[0].mac;
  port.addresses = cfg->ports[0].addresses;
  const std::vector<dp::PortRuntime> ports = {port};

  std::printf("meshgate control-plane benchmark: %u services x %u endpoints (%u endpoints), "
              "IPv6 VIP every %u, %u worker(s), %u build thread(s), %u rounds\n",
              n_services, n_endpoints, n_services * n_endpoints, v6_every, n_workers, threads,
              rounds);
  auto t0 = Clock::now();
  const ctl::mesh::MeshModel model = make_mesh(n_services, n_endpoints, v6_every);
  std::printf("  (mesh model generated in %.0f ms)\n", ms_since(t0));

  ctl::mesh::MappingOptions mopt;
  std::vector<Figure> figs;
  Figure f_map{"map_mesh", "ms", {}};
  std::vector<ctl::ServiceSpec> specs;
  for (uint32_t r = 0; r < rounds; ++r) {
    t0 = Clock::now();
    const double c0 = thread_cpu_ms();
    auto m = ctl::mesh::map_mesh(model, mopt);
    f_map.samples.push_back(ms_since(t0));
    f_map.cpu.push_back(thread_cpu_ms() - c0);
    specs = std::move(m.specs);
  }
  if (specs.size() != n_services) fail("map_mesh gave " + std::to_string(specs.size()) + " specs");
  uint64_t slots = 0;
  for (const auto& s : specs) slots += s.table_size;
  figs.push_back(f_map);

  uint64_t version = 0;
  auto build = [&](ctl::Registries& reg, const std::vector<ctl::ServiceSpec>& sv, Figure* f) {
    const auto t = Clock::now();
    const double c0 = thread_cpu_ms();
    auto snap = ctl::build_snapshot(*cfg, sv, ports, reg, ++version);
    const double ms = ms_since(t), cpu = thread_cpu_ms() - c0;
    if (!snap) fail("build_snapshot: " + snap.error().message);
    if (f) {
      f->samples.push_back(ms);
      f->cpu.push_back(cpu);
    }
    return *snap;
  };

  auto start_pool = [&](ctl::Registries& reg) {
    if (!reg.pool.start(threads, &all_cpus)) fail("cannot pin the build helpers");
  };
  // Cold: a fresh registry (and so empty caches) each round; its helpers start untimed, as the
  // gateway starts them once.
  Figure f_cold{"build cold", "ms", {}};
  for (uint32_t r = 0; r < rounds; ++r) {
    ctl::Registries fresh;
    start_pool(fresh);
    dp::snapshot_free(build(fresh, specs, &f_cold));
  }
  figs.push_back(f_cold);

  // Rebuilds against one long-lived registry, as the control loop does.
  auto reg = std::make_unique<ctl::Registries>();
  start_pool(*reg);
  dp::Snapshot* base = build(*reg, specs, nullptr);
  ctl::SnapshotPublisher publisher;
  if (!publisher.init(n_workers)) fail("qsbr");
  publisher.publish(base);

  // A variant of the specs: service i's endpoint 0 removed (r odd) or back (r even).
  std::vector<ctl::ServiceSpec> cur = specs;
  Figure f_one{"rebuild 1 changed", "ms", {}};
  Figure f_tenth{"rebuild 10% changed", "ms", {}};
  Figure f_all{"rebuild all changed", "ms", {}};
  Figure f_same{"rebuild unchanged", "ms", {}};
  Figure f_pub{"publish -> use", "us", {}};
  Figure f_reclaim{"reclaim", "ms", {}};
  size_t reused_one = 0, built_one = 0;

  // Retired snapshots past their grace period are freed (as the control loop's 1 ms tick does).
  auto settle = [&](Figure* f) {
    const auto t = Clock::now();
    const double c0 = thread_cpu_ms();
    while (publisher.reclaim() != 0) std::this_thread::yield();
    if (f) {
      f->samples.push_back(ms_since(t));
      f->cpu.push_back(thread_cpu_ms() - c0);
    }
  };
  // One service changes per round.
  for (uint32_t r = 0; r < rounds; ++r) {
    ctl::ServiceSpec& s = cur[(r * 7919u) % cur.size()];
    const ctl::ServiceSpec& orig = specs[(r * 7919u) % cur.size()];
    if (s.endpoints.size() == orig.endpoints.size()) {
      s.endpoints.erase(s.endpoints.begin());
    } else {
      s.endpoints = orig.endpoints;
    }
    publisher.publish(build(*reg, cur, &f_one));
    reused_one = reg->last_build.tables_reused;
    built_one = reg->last_build.tables_built;
    settle(nullptr);
  }
  for (uint32_t r = 0; r < rounds; ++r) {
    for (size_t i = r % 10; i < cur.size(); i += 10) {
      for (auto& e : cur[i].endpoints) e.weight = e.weight % 3 + 1;
    }
    publisher.publish(build(*reg, cur, &f_tenth));
    settle(&f_reclaim);
  }
  for (uint32_t r = 0; r < rounds; ++r) {
    for (auto& s2 : cur) {
      for (auto& e : s2.endpoints) e.weight = e.weight % 3 + 1;
    }
    publisher.publish(build(*reg, cur, &f_all));
    settle(&f_reclaim);
  }
  for (uint32_t r = 0; r < rounds; ++r) {
    publisher.publish(build(*reg, cur, &f_same));
    settle(&f_reclaim);
  }

  // Workers: real Worker::run() on their lcores, QSBR registered with the publisher.
  std::vector<std::unique_ptr<dp::Worker>> workers;
  for (uint32_t w = 0; w < n_workers; ++w) {
    dp::WorkerParams wp;
    wp.index = uint16_t(w);
    wp.n_workers = uint16_t(n_workers);
    wp.ports = ports;
    wp.snapshot = publisher.slot();
    wp.addrs = reg->addrs.table();
    wp.qsbr = publisher.qsbr();
    wp.pool = pool;
    wp.max_flows = 1024;
    workers.push_back(std::make_unique<dp::Worker>());
    if (!workers.back()->init(wp)) fail("worker init");
  }
  {
    unsigned lc = rte_get_next_lcore(-1, 1, 0);
    for (auto& w : workers) {
      if (rte_eal_remote_launch(worker_main, w.get(), lc) != 0) fail("launch");
      lc = rte_get_next_lcore(lc, 1, 0);
    }
  }
  auto all_use = [&](uint64_t v) {
    for (const auto& w : workers) {
      if (dp::counter_read(w->counters().snapshot_version) != v) return false;
    }
    return true;
  };
  while (!all_use(version)) std::this_thread::yield();

  for (uint32_t r = 0; r < rounds; ++r) {
    // A copy of the current snapshot as the next version: publish it and wait until every
    // worker uses it.
    settle(nullptr);
    auto* snap = new dp::Snapshot(*publisher.current());
    snap->version = ++version;
    const auto t = Clock::now();
    publisher.publish(snap);
    while (!all_use(snap->version)) {
    }
    f_pub.samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  figs.push_back(f_one);
  figs.push_back(f_tenth);
  figs.push_back(f_all);
  figs.push_back(f_same);
  figs.push_back(f_pub);
  figs.push_back(f_reclaim);

  for (auto& w : workers) w->request_stop();
  rte_eal_mp_wait_lcore();
  publisher.shutdown();

  std::printf("  Maglev slots: %lu (%.1f MiB of tables per snapshot); last 1-changed rebuild: "
              "%zu tables built, %zu reused\n",
              (unsigned long)slots, double(slots) * 4 / (1 << 20), built_one, reused_one);
  std::printf("  %-22s %10s %10s %10s %12s\n", "figure", "median", "min", "max", "cpu median");
  nlohmann::json j;
  j["services"] = n_services;
  j["endpoints_per_service"] = n_endpoints;
  j["v6_every"] = v6_every;
  j["workers"] = n_workers;
  j["build_threads"] = threads;
  j["rounds"] = rounds;
  j["maglev_slots"] = slots;
  for (const Figure& f : figs) {
    std::string cpu = "-";
    if (!f.cpu.empty()) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f ms", Figure::median_of(f.cpu));
      cpu = b;
    }
    std::printf("  %-22s %8.2f %s %7.2f %s %7.2f %s %12s\n", f.name.c_str(), f.median(),
                f.unit.c_str(), f.min(), f.unit.c_str(), f.max(), f.unit.c_str(), cpu.c_str());
    j["figures"][f.name] = {{"unit", f.unit}, {"median", f.median()}, {"min", f.min()}, {"max", f.max()}};
    if (!f.cpu.empty()) j["figures"][f.name]["cpu_median_ms"] = Figure::median_of(f.cpu);
  }
  if (!json_out.empty()) {
    std::ofstream o(json_out);
    o << j.dump(2) << "\n";
  }
  workers.clear();
  reg.reset();
  ctl::eal_cleanup();
  return 0;
}
