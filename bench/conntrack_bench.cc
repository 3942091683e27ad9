// Flow-table lookups with 1k, 100k and 1M flows: one at a time, and in bursts of 32 the way
// Worker::stage_classify does it (hash every packet and prefetch its two buckets, then prefetch
// the flows whose signatures match, then look up). The 1M table (about 120 MB) fits no cache,
// and with the EAL's --no-huge 4 KB pages no TLB either: those cases show what the prefetch
// passes buy. Hits look up flows in the table in a random order; misses look up tuples that
// are not there (new flows, scans, floods).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "bench/eal.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/packet/wire.h"

namespace meshgate::bench {
namespace {

constexpr uint32_t kVipId = 1;
constexpr uint16_t kBurst = 32;  // the worker's rx burst
// Tuples that miss, per table: as many as the table has flows (at least 4096), so the 1M case
// walks memory as widely as its hits do.
constexpr uint32_t kMinMisses = 4096;

// A full table of `flows` TCP flows (pool = flows) and tuples to look up, built once per size
// and shared by the single and bulk benchmarks.
struct Table {
  std::vector<IpAddr> addrs = std::vector<IpAddr>(4);
  dp::AddrTable addr_table;
  dp::FlowTable ft;
  std::vector<dp::Tuple> hits;
  std::vector<dp::Tuple> misses;
};

dp::Tuple client_tuple(std::mt19937& rng, const IpAddr& vip, uint32_t net) {
  // Clients in 192.0.2.0/24 (hits) or 198.18.0.0/15 (misses), random ports.
  const uint32_t a = net | (rng() & (net == 0xc0000200u ? 0xffu : 0x1ffffu));
  return dp::Tuple{IpAddr::v4(a), vip, htons(uint16_t(1024 + rng() % 64512)), htons(80),
                   dp::kProtoTcp};
}

Table* table(uint32_t flows) {
  static std::map<uint32_t, std::unique_ptr<Table>> tables;
  auto& t = tables[flows];
  if (t) return t.get();
  init_eal_once();
  t = std::make_unique<Table>();
  t->addrs[kVipId] = IpAddr::v4(0xcb00710a);  // 203.0.113.10
  t->addr_table.addrs = t->addrs.data();
  if (!t->ft.init(flows, 0, dp::ConntrackTimeouts{}, &t->addr_table)) {
    std::fprintf(stderr, "meshgate_microbench: no DPDK memory for %u flows\n", flows);
    std::exit(1);
  }
  dp::FlowTarget to;
  to.backend = IpAddr::v4(0xc633640b);  // 198.51.100.11:8080
  to.backend_port = htons(8080);
  to.vip_id = kVipId;
  to.stat_id = 1;
  std::mt19937 rng(flows);
  dp::FlowDir dir;
  // The pool is filled completely; each flow also takes an index entry for its reply tuple.
  while (t->ft.active() < flows) {
    const dp::Tuple c = client_tuple(rng, t->addrs[kVipId], 0xc0000200u);
    if (t->ft.lookup(c, dp::FlowTable::hash(c), 0, &dir)) continue;
    if (!t->ft.insert(c, to, 0)) {
      std::fprintf(stderr, "meshgate_microbench: insert %u of %u failed\n", t->ft.active(), flows);
      std::exit(1);
    }
    t->hits.push_back(c);
  }
  // An insert may evict a not-yet-established flow to make room in its buckets: keep only the
  // tuples still present.
  std::erase_if(t->hits, [&](const dp::Tuple& c) {
    return t->ft.lookup(c, dp::FlowTable::hash(c), 0, &dir) == nullptr;
  });
  std::shuffle(t->hits.begin(), t->hits.end(), rng);
  for (uint32_t i = 0; i < std::max(flows, kMinMisses); ++i) {
    t->misses.push_back(client_tuple(rng, t->addrs[kVipId], 0xc6120000u));
  }
  return t.get();
}

const std::vector<dp::Tuple>& probes(Table* t, bool hit) { return hit ? t->hits : t->misses; }

void check_result(benchmark::State& state, uint64_t found, uint64_t looked_up, bool hit) {
  if (found != (hit ? looked_up : 0)) state.SkipWithError("unexpected lookup result");
}

// One packet at a time: hash, then look up (two bucket reads, then the flow).
void ct_lookup_single(benchmark::State& state, bool hit) {
  Table* t = table(uint32_t(state.range(0)));
  const auto& p = probes(t, hit);
  const size_t n = p.size() / kBurst * kBurst;
  size_t pos = 0;
  uint64_t found = 0;
  dp::FlowDir dir;
  for (auto _ : state) {
    for (uint16_t i = 0; i < kBurst; ++i) {
      const dp::Tuple& tu = p[pos + i];
      dp::Flow* f = t->ft.lookup(tu, dp::FlowTable::hash(tu), 0, &dir);
      found += f != nullptr;
      benchmark::DoNotOptimize(f);
    }
    pos = pos + kBurst == n ? 0 : pos + kBurst;
  }
  check_result(state, found, uint64_t(state.iterations()) * kBurst, hit);
  state.SetItemsProcessed(int64_t(state.iterations()) * kBurst);
}

// A burst as Worker::stage_classify and stage_lookup see it.
void ct_lookup_bulk(benchmark::State& state, bool hit) {
  Table* t = table(uint32_t(state.range(0)));
  const auto& p = probes(t, hit);
  const size_t n = p.size() / kBurst * kBurst;
  size_t pos = 0;
  uint64_t found = 0;
  uint32_t h[kBurst];
  dp::FlowDir dir;
  for (auto _ : state) {
    const dp::Tuple* burst = &p[pos];
    for (uint16_t i = 0; i < kBurst; ++i) {
      h[i] = dp::FlowTable::hash(burst[i]);
      t->ft.prefetch_buckets(h[i]);
    }
    for (uint16_t i = 0; i < kBurst; ++i) t->ft.prefetch_flows(h[i]);
    for (uint16_t i = 0; i < kBurst; ++i) {
      dp::Flow* f = t->ft.lookup(burst[i], h[i], 0, &dir);
      found += f != nullptr;
      benchmark::DoNotOptimize(f);
    }
    pos = pos + kBurst == n ? 0 : pos + kBurst;
  }
  check_result(state, found, uint64_t(state.iterations()) * kBurst, hit);
  state.SetItemsProcessed(int64_t(state.iterations()) * kBurst);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("flows")->Arg(1000)->Arg(100000)->Arg(1000000);
}

BENCHMARK_CAPTURE(ct_lookup_single, hit, true)->Apply(sizes);
BENCHMARK_CAPTURE(ct_lookup_bulk, hit, true)->Apply(sizes);
BENCHMARK_CAPTURE(ct_lookup_single, miss, false)->Apply(sizes);
BENCHMARK_CAPTURE(ct_lookup_bulk, miss, false)->Apply(sizes);

}  // namespace
}  // namespace meshgate::bench
