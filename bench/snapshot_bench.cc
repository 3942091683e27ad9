// Control-plane cost of a change: building a snapshot for a small config (config/demo.toml:
// one port, three services with 65537-slot Maglev tables, routes, neighbors) and publishing it;
// and SnapshotPublisher::publish + reclaim alone, with one worker registered with the RCU that
// reports a quiescent state between publishes, so every reclaim frees the previous snapshot.
#include <benchmark/benchmark.h>
#include <rte_rcu_qsbr.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/eal.h"
#include "control/config/config.h"
#include "control/snapshot/builder.h"
#include "control/snapshot/publisher.h"

namespace meshgate::bench {
namespace {

constexpr uint32_t kWorker = 0;  // the QSBR thread id of the simulated worker

struct SmallConfig {
  ctl::Config cfg;
  std::vector<ctl::ServiceSpec> services;
  std::vector<dp::PortRuntime> ports;
  ctl::Registries reg;
  uint64_t version = 0;

  dp::Snapshot* build() {
    auto s = ctl::build_snapshot(cfg, services, ports, reg, ++version);
    if (!s) {
      std::fprintf(stderr, "meshgate_microbench: snapshot: %s\n", s.error().message.c_str());
      std::exit(1);
    }
    return *s;
  }
};

SmallConfig& small_config() {
  static SmallConfig* c = [] {
    init_eal_once();
    auto* sc = new SmallConfig;
    auto cfg = ctl::load_config(MG_SOURCE_DIR "/config/demo.toml");
    if (!cfg) {
      std::fprintf(stderr, "meshgate_microbench: %s", cfg.error().str().c_str());
      std::exit(1);
    }
    sc->cfg = std::move(*cfg);
    sc->services = ctl::services_from_config(sc->cfg);
    for (size_t i = 0; i < sc->cfg.ports.size(); ++i) {
      dp::PortRuntime rt;
      rt.name = sc->cfg.ports[i].name;
      rt.port_id = uint16_t(i);
      rt.index = uint16_t(i);
      rt.mac = sc->cfg.ports[i].mac.value_or(MacAddr{});
      rt.mtu = sc->cfg.ports[i].mtu;
      rt.addresses = sc->cfg.ports[i].addresses;
      sc->ports.push_back(rt);
    }
    return sc;
  }();
  return *c;
}

struct Publisher {
  ctl::SnapshotPublisher pub;
  Publisher() {
    if (!pub.init(1) || rte_rcu_qsbr_thread_register(pub.qsbr(), kWorker) != 0) {
      std::fprintf(stderr, "meshgate_microbench: cannot set up the RCU publisher\n");
      std::exit(1);
    }
    rte_rcu_qsbr_thread_online(pub.qsbr(), kWorker);
  }
  ~Publisher() {
    rte_rcu_qsbr_thread_offline(pub.qsbr(), kWorker);
    rte_rcu_qsbr_thread_unregister(pub.qsbr(), kWorker);
  }
  // What the control loop does for one change once the worker passed its quiescent state.
  void swap(dp::Snapshot* s) {
    pub.publish(s);
    rte_rcu_qsbr_quiescent(pub.qsbr(), kWorker);
    if (pub.reclaim() != 0) std::fprintf(stderr, "meshgate_microbench: reclaim kept a snapshot\n");
  }
};

void snapshot_build_publish(benchmark::State& state) {
  SmallConfig& c = small_config();
  Publisher p;
  for (auto _ : state) p.swap(c.build());
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(snapshot_build_publish)->Unit(benchmark::kMicrosecond);

void snapshot_build(benchmark::State& state) {
  SmallConfig& c = small_config();
  for (auto _ : state) dp::snapshot_free(c.build());
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(snapshot_build)->Unit(benchmark::kMicrosecond);

// publish + reclaim alone: the atomic swap, the QSBR token, the grace-period check and the
// free of the previous snapshot. Empty snapshots (new dp::Snapshot) measure the mechanism;
// they are built in batches outside the timed region.
void snapshot_publish_reclaim_empty(benchmark::State& state) {
  constexpr int kBatch = 1024;
  small_config();  // the EAL
  Publisher p;
  std::vector<dp::Snapshot*> batch(kBatch, nullptr);
  for (auto _ : state) {
    state.PauseTiming();
    for (auto& s : batch) s = new dp::Snapshot;
    state.ResumeTiming();
    for (dp::Snapshot* s : batch) p.swap(s);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch);
}
BENCHMARK(snapshot_publish_reclaim_empty);

// The same with demo snapshots, whose free includes their LPM tables. A demo snapshot takes
// about 130 MB of DPDK memory (rte_lpm's and rte_lpm6's 2^24-entry first-level tables), so
// they are built one at a time, the swap timed alone, for a fixed number of iterations.
void snapshot_publish_reclaim_demo(benchmark::State& state) {
  SmallConfig& c = small_config();
  Publisher p;
  for (auto _ : state) {
    dp::Snapshot* s = c.build();
    const auto t0 = std::chrono::steady_clock::now();
    p.swap(s);
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(snapshot_publish_reclaim_demo)->UseManualTime()->Iterations(16)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace meshgate::bench
