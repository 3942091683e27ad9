// Maglev (NSDI 2016 §3.4): table build on the control thread for 10, 100 and 1000 backends at
// their automatic sizes, and the per-packet choice on a worker (flow hash + one slot read).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>

#include <vector>

#include "control/snapshot/maglev.h"
#include "dataplane/lb/lb.h"
#include "dataplane/packet/wire.h"

namespace meshgate::bench {
namespace {

std::vector<ctl::LbBackend> backends(uint32_t n) {
  std::vector<ctl::LbBackend> b(n);
  for (uint32_t i = 0; i < n; ++i) {
    b[i].address = IpAddr::v4(0xc6336400u + 11 + i);  // 198.51.100.11 upwards
    b[i].port = 8080;
    b[i].weight = 1 + i % 3;  // weighted, as in config/demo.toml
  }
  return b;
}

void lb_build(benchmark::State& state) {
  const auto b = backends(uint32_t(state.range(0)));
  const uint32_t size = ctl::lb_auto_table_size(b.size());
  for (auto _ : state) {
    std::vector<uint32_t> table = ctl::lb_build_table(b, size);
    benchmark::DoNotOptimize(table.data());
  }
  // Items are slots filled: items/s compares sizes.
  state.SetItemsProcessed(int64_t(state.iterations()) * size);
  state.counters["slots"] = size;
}
BENCHMARK(lb_build)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

// A mesh service's table: [mesh] sizes tables by endpoint count (10 endpoints: 1009 slots), and
// a mesh snapshot builds thousands of them into buffers it keeps.
void lb_fill_mesh(benchmark::State& state) {
  const auto b = backends(uint32_t(state.range(0)));
  const uint32_t size = ctl::next_prime(uint32_t(b.size()) * ctl::kMinSlotsPerBackend);
  std::vector<uint32_t> table(size);
  for (auto _ : state) {
    ctl::lb_fill_table(b, size, table.data());
    benchmark::DoNotOptimize(table.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * size);
  state.counters["slots"] = size;
}
BENCHMARK(lb_fill_mesh)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);

// The worker's per-new-flow cost: CRC32C of the client 5-tuple, then one slot.
void lb_lookup(benchmark::State& state) {
  const auto b = backends(uint32_t(state.range(0)));
  const uint32_t size = ctl::lb_auto_table_size(b.size());
  const std::vector<uint32_t> table = ctl::lb_build_table(b, size);
  const IpAddr vip = IpAddr::v4(0xcb00710a);  // 203.0.113.10
  constexpr uint32_t kClients = 4096;
  std::vector<IpAddr> clients(kClients);
  for (uint32_t i = 0; i < kClients; ++i) clients[i] = IpAddr::v4(0xc0000200u + (i & 0xff));
  uint32_t i = 0;
  for (auto _ : state) {
    const uint32_t k = i++ % kClients;
    const uint32_t h = dp::lb_flow_hash(clients[k], vip, htons(uint16_t(1024 + k)), htons(80),
                                        dp::kProtoTcp);
    benchmark::DoNotOptimize(dp::lb_lookup(table.data(), size, h));
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(lb_lookup)->Arg(10)->Arg(100)->Arg(1000);

}  // namespace
}  // namespace meshgate::bench
