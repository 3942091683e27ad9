// The TCP stack on one core: two stacks wired back to back in memory (no loss, no delay), each
// frame going through the real parser into the other stack the way a worker would hand it in.
// Bulk: bytes per second one way (1 MiB per iteration, the receiver takes zero-copy chains).
// Connections: connect, handshake, 1 KB request, 1 KB answer, FIN both ways; per second.
// What this measures is the stack's own cost per segment (input, ACK processing, output, the
// checksums, one payload copy per transmission), not a NIC.
#include <benchmark/benchmark.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>

#include "bench/eal.h"
#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::bench {
namespace {

using namespace dp::tcp;

rte_mempool* pool() {
  static rte_mempool* p = [] {
    init_eal_once();
    rte_mempool* m = rte_pktmbuf_pool_create("tcp_bench_pool", 16383, 256, 0,
                                             RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (m == nullptr) {
      std::fprintf(stderr, "meshgate_microbench: no mbuf pool for the TCP benchmark\n");
      std::exit(1);
    }
    return m;
  }();
  return p;
}

struct Side {
  TimerWheel wheel;
  std::unique_ptr<TcpStack> stack;
  std::deque<rte_mbuf*> out;
  static void on_output(void* ctx, rte_mbuf* m, const TcpTuple&) {
    static_cast<Side*>(ctx)->out.push_back(m);
  }
};

// Two stacks; frames from one go to the other through an Ethernet header and parse_frame().
struct Wire {
  Side a, b;
  uint64_t now_ns = 1'000'000'000;

  Wire() {
    TcpConfig cfg;
    cfg.max_connections = 1024;
    cfg.time_wait_ms = 1;  // the connection benchmark would otherwise fill the table
    cfg.secret = SipKey{11, 22};
    for (Side* s : {&a, &b}) {
      s->wheel.init(uint32_t(now_ns / 1'000'000));
      TcpStackDeps d;
      d.pool = pool();
      d.wheel = &s->wheel;
      d.output = Side::on_output;
      d.output_ctx = s;
      s->stack = std::make_unique<TcpStack>(cfg, d, now_ns);
    }
  }
  ~Wire() {
    for (Side* s : {&a, &b}) {
      for (rte_mbuf* m : s->out) rte_pktmbuf_free(m);
    }
  }
  static void deliver(rte_mbuf* m, Side& to, uint64_t now) {
    auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, 14));
    std::memset(eth, 0, 12);
    const bool v6 = (eth[14] >> 4) == 6;
    dp::wr16(eth + 12, v6 ? dp::kEtherTypeIpv6 : dp::kEtherTypeIpv4);
    dp::PacketMeta meta;
    if (dp::parse_frame(eth, m->data_len, m->pkt_len, &meta, true) != dp::Drop::kNone) {
      rte_pktmbuf_free(m);
      return;
    }
    to.stack->input(m, meta, now);
  }
  // Moves frames both ways until both queues are empty, the clock 10 µs on per round.
  void pump() {
    while (!a.out.empty() || !b.out.empty()) {
      now_ns += 10'000;
      std::deque<rte_mbuf*> qa, qb;
      qa.swap(a.out);
      qb.swap(b.out);
      for (rte_mbuf* m : qa) deliver(m, b, now_ns);
      for (rte_mbuf* m : qb) deliver(m, a, now_ns);
      a.stack->advance(now_ns);
      b.stack->advance(now_ns);
    }
  }
  void tick(uint64_t ns) {
    now_ns += ns;
    a.stack->advance(now_ns);
    b.stack->advance(now_ns);
    pump();
  }
};

const IpAddr kA = IpAddr::v4(0x0a000001);
const IpAddr kB = IpAddr::v4(0x0a000002);

// The receiving application: takes every chain and frees it; answers requests when asked to.
struct Sink {
  TcpStack* stack = nullptr;
  TcpConnId conn = kNoConn;
  uint64_t bytes = 0;
  uint32_t answer = 0;  // bytes to send back once that many arrived (0 = none)
  bool connected = false, peer_fin = false, closed = false;
  static bool accept(void* ctx, const TcpTuple&, TcpEventFn* fn, void** user) {
    *fn = on_event;
    *user = ctx;
    return true;
  }
  static void on_event(void* u, TcpConnId c, TcpEvent ev) {
    auto* s = static_cast<Sink*>(u);
    s->conn = c;
    if (ev == TcpEvent::kConnected) s->connected = true;
    if (ev == TcpEvent::kPeerFin) s->peer_fin = true;
    if (ev == TcpEvent::kClosed) s->closed = true;
    uint32_t len = 0;
    while (rte_mbuf* m = s->stack->recv_chain(c, &len)) {
      s->bytes += len;
      rte_pktmbuf_free(m);
    }
    if (s->answer != 0 && s->bytes >= s->answer) {
      static const uint8_t kReply[1024] = {};
      s->stack->send(c, kReply, sizeof kReply);
      s->stack->shutdown_write(c);
      s->answer = 0;
    }
  }
};

void BM_TcpBulkTransfer(benchmark::State& state) {
  Wire w;
  Sink server, client;
  server.stack = w.b.stack.get();
  client.stack = w.a.stack.get();
  w.b.stack->listen(kB, 80, Sink::accept, &server);
  TcpConnId c;
  w.a.stack->connect(kA, kB, 80, nullptr, nullptr, Sink::on_event, &client, &c);
  w.pump();
  static uint8_t chunk[64 * 1024];
  constexpr uint64_t kPerIteration = 1 << 20;
  uint64_t target = 0;
  for (auto _ : state) {
    target += kPerIteration;
    uint64_t queued = 0;
    while (server.bytes < target) {
      while (queued < kPerIteration) {
        const uint32_t n = w.a.stack->send(c, chunk, uint32_t(std::min<uint64_t>(sizeof chunk, kPerIteration - queued)));
        if (n == 0) break;
        queued += n;
      }
      w.pump();
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kPerIteration));
  state.counters["segs_per_s"] = benchmark::Counter(
      double(w.a.stack->counters()[kSegsOut] + w.b.stack->counters()[kSegsOut]),
      benchmark::Counter::kIsRate);
  w.a.stack->abort(c);
  w.b.stack->abort(server.conn);
}
BENCHMARK(BM_TcpBulkTransfer)->Unit(benchmark::kMicrosecond);

void BM_TcpConnectRequestClose(benchmark::State& state) {
  Wire w;
  static const uint8_t kRequest[1024] = {};
  for (auto _ : state) {
    Sink server, client;
    server.stack = w.b.stack.get();
    server.answer = sizeof kRequest;
    client.stack = w.a.stack.get();
    w.b.stack->listen(kB, 80, Sink::accept, &server);
    TcpConnId c;
    if (w.a.stack->connect(kA, kB, 80, nullptr, nullptr, Sink::on_event, &client, &c) !=
        TcpError::kOk) {
      state.SkipWithError("connect failed");
      break;
    }
    w.pump();
    w.a.stack->send(c, kRequest, sizeof kRequest);
    w.a.stack->shutdown_write(c);
    w.pump();
    if (client.bytes != 1024 || !client.closed) {
      state.SkipWithError("exchange did not complete");
      break;
    }
    w.a.stack->close(c);
    w.b.stack->close(server.conn);
    w.b.stack->unlisten(kB, 80);
    w.tick(2'000'000);  // TIME-WAIT (1 ms here) runs out
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(BM_TcpConnectRequestClose)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace meshgate::bench
