// The whole worker on bursts of 32 frames, through the test harness's net_ring port
// (tests/support/dp_harness.h): new flows (a SYN flood into a table a quarter of the flood's
// size, so that every SYN is a new flow and evicts a half-open one, as the syn-1m row does),
// established dnat traffic, and the same with one packet in four a SYN on a live flow. The
// harness's injection and collection are part of the wall time: compare these cases with each
// other, not with tools/bench/run. For per-function instruction counts of the worker alone,
// run it under callgrind with --toggle-collect='*run*' (the timed loop, past the setup) and
// read Worker::process_burst's inclusive costs (docs/PERFORMANCE.md, "Where a new flow's
// instructions go").
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/build.h"

namespace meshgate::bench {
namespace {

using pkt::Bytes;

constexpr uint32_t kFlows = 1 << 16;
constexpr uint32_t kTableFlows = kFlows / 4;
constexpr size_t kBurst = 32;

// Client i: 10.x.y.z (distinct addresses, as pcapgen's flows have), port 1024 + i % 60000.
std::string client(uint32_t i) {
  return "10." + std::to_string(i >> 16 & 0xff) + "." + std::to_string(i >> 8 & 0xff) + "." +
         std::to_string(i & 0xff);
}

Bytes segment(uint32_t i, uint8_t flags) {
  pkt::IpHdr ip;
  ip.src = test::A(client(i).c_str());
  ip.dst = test::A("203.0.113.10");
  pkt::TcpHdr t;
  t.sport = uint16_t(1024 + i % 60000);
  t.dport = 80;
  t.seq = i * 2654435761u;
  t.flags = flags;
  if (flags & pkt::kTcpSyn) {
    pkt::TcpOptions o;  // as pcapgen's SYNs: MSS, SACK permitted, window scale
    o.mss = 1460;
    o.sack_permitted = true;
    o.wscale = 7;
    t.options = pkt::tcp_options(o);
  }
  return pkt::build_tcp(test::kToGw, ip, t, flags & pkt::kTcpSyn ? Bytes{} : Bytes(6, 0x5a));
}

std::vector<std::vector<Bytes>> bursts_of(const std::vector<Bytes>& frames) {
  std::vector<std::vector<Bytes>> out;
  for (size_t i = 0; i + kBurst <= frames.size(); i += kBurst) {
    out.emplace_back(frames.begin() + long(i), frames.begin() + long(i + kBurst));
  }
  return out;
}

// Not inlined: callgrind's --toggle-collect names it, to count the timed loop alone.
[[gnu::noinline]] void run(benchmark::State& state, test::DataplaneHarness& h,
         const std::vector<std::vector<Bytes>>& bursts, uint64_t& t) {
  size_t k = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(h.send(bursts[k], t += 1000));
    if (++k == bursts.size()) k = 0;
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
}

void new_flows(benchmark::State& state) {
  test::HarnessOptions o;
  o.max_flows = kTableFlows;
  test::DataplaneHarness h(test::kDemoTopology, o);
  std::vector<Bytes> syns;
  for (uint32_t i = 0; i < kFlows; ++i) syns.push_back(segment(i, pkt::kTcpSyn));
  const auto bursts = bursts_of(syns);
  uint64_t t = test::kT0;
  // A first round fills the table: every later SYN evicts.
  for (const auto& b : bursts) h.send(b, t += 1000);
  run(state, h, bursts, t);
  state.counters["flows_created"] = double(h.counters().flows_created);
  state.counters["stateless"] = double(h.counters().stateless_packets);
  state.counters["evicted"] = double(h.counters().flows_evicted);
}
BENCHMARK(new_flows);

// Established flows, then the same with every fourth packet a SYN of its (live) flow.
void established(benchmark::State& state, bool syn_every_fourth) {
  test::DataplaneHarness h(test::kDemoTopology, test::HarnessOptions{});
  constexpr uint32_t kLive = 2048;
  std::vector<Bytes> frames;
  for (uint32_t i = 0; i < kLive; ++i) {
    frames.push_back(segment(i, syn_every_fourth && i % 4 == 0 ? pkt::kTcpSyn
                                                                : pkt::kTcpAck | pkt::kTcpPsh));
  }
  uint64_t t = test::kT0;
  std::vector<Bytes> acks;
  for (uint32_t i = 0; i < kLive; ++i) acks.push_back(segment(i, pkt::kTcpAck));
  for (const auto& b : bursts_of(acks)) h.send(b, t += 1000);  // the flows exist
  run(state, h, bursts_of(frames), t);
  state.counters["fast_path_share"] =
      double(h.counters().fast_path_packets) / double(h.counters().rx_packets);
}
BENCHMARK_CAPTURE(established, dnat, false);
BENCHMARK_CAPTURE(established, dnat_syn_on_live_1_in_4, true);

}  // namespace
}  // namespace meshgate::bench
