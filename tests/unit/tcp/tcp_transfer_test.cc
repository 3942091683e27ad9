// Two TCP stacks linked in memory by a link model with seeded loss, reordering, duplication and
// delay, on a deterministic virtual clock: multi-megabyte transfers both ways compared by hash
// (clean and lossy links, CUBIC and NewReno, SACK on and off, IPv4 and IPv6, ISNs next to the
// 2^32 wrap), half-close, abort -> RST, refused port -> RST, a zero window held by a slow reader,
// and a SYN flood answered with SYN cookies while a legitimate connect still succeeds. Every
// test also checks that no mbuf leaked.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "dataplane/common/hash.h"
#include "tests/support/tcp_test_util.h"

namespace meshgate::test::tcp {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint16_t kPort = 8080;

const IpAddr kA4 = IpAddr::v4(0x0a000001);
const IpAddr kB4 = IpAddr::v4(0x0a000002);
const IpAddr kA6 = *IpAddr::parse("2001:db8::1");
const IpAddr kB6 = *IpAddr::parse("2001:db8::2");

Bytes pattern(size_t n, uint64_t seed) {
  Bytes b(n);
  std::mt19937_64 r(seed);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = r();
    for (size_t k = 0; k < 8 && i + k < n; ++k) b[i + k] = uint8_t(v >> (8 * k));
  }
  return b;
}

uint64_t digest(const Bytes& b) { return hash64(b.data(), b.size(), 7); }

// The link: seeded impairments per direction, frames delivered in time order.
struct LinkModel {
  double loss = 0;       // probability a frame is dropped
  double dup = 0;        // probability a frame is delivered twice
  double reorder = 0;    // probability a frame is held back (delivered after later ones)
  uint64_t delay_ns = 1 * kMs;
  uint64_t reorder_extra_ns = 3 * kMs;
};

// A connection's application: sends `data` (then FIN if asked), reads everything (or at most
// `read_per_ms` bytes per millisecond), and records the events.
struct App {
  TcpStack* stack = nullptr;
  TcpConnId conn = kNoConn;
  Bytes data;
  size_t sent = 0;
  bool fin_after = true;
  bool fin_done = false;
  Bytes got;
  uint32_t read_per_ms = 0;  // 0 = read everything at once
  bool paused = false;       // a reader that stopped reading
  bool connected = false, peer_fin = false, reset = false, closed = false;
  uint32_t readable_events = 0;

  static void on_event(void* user, TcpConnId c, TcpEvent ev) {
    auto* a = static_cast<App*>(user);
    a->conn = c;
    switch (ev) {
      case TcpEvent::kConnected: a->connected = true; a->push(); break;
      case TcpEvent::kReadable: ++a->readable_events; a->read(); break;
      case TcpEvent::kWritable: a->push(); break;
      case TcpEvent::kPeerFin: a->peer_fin = true; break;
      case TcpEvent::kReset: a->reset = true; break;
      case TcpEvent::kClosed: a->closed = true; break;
    }
  }
  void push() {
    while (sent < data.size()) {
      const uint32_t n = stack->send(conn, data.data() + sent,
                                     uint32_t(std::min<size_t>(data.size() - sent, 64 * 1024)));
      if (n == 0) break;
      sent += n;
    }
    if (sent == data.size() && fin_after && !fin_done) {
      fin_done = true;
      EXPECT_EQ(stack->shutdown_write(conn), TcpError::kOk);
    }
  }
  void read() {
    if (paused || read_per_ms != 0) return;
    uint32_t len = 0;
    rte_mbuf* m = stack->recv_chain(conn, &len);
    if (m == nullptr) return;
    const size_t at = got.size();
    got.resize(at + len);
    EXPECT_NE(rte_pktmbuf_read(m, 0, len, got.data() + at), nullptr);
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, len, got.data() + at));
    if (p != got.data() + at) std::memcpy(got.data() + at, p, len);
    rte_pktmbuf_free(m);
  }
  void tick() {
    if (paused || read_per_ms == 0 || conn == kNoConn) return;
    uint8_t buf[65536];
    const uint32_t n = stack->recv(conn, buf, std::min<uint32_t>(read_per_ms, sizeof buf));
    got.insert(got.end(), buf, buf + n);
  }
};

struct Listener {
  App* next = nullptr;  // the App the next accepted connection gets
  uint32_t accepted = 0;
  bool refuse = false;
  static bool accept(void* ctx, const TcpTuple&, TcpEventFn* fn, void** user) {
    auto* l = static_cast<Listener*>(ctx);
    if (l->refuse) return false;
    ++l->accepted;
    *fn = App::on_event;
    *user = l->next;
    return true;
  }
};

struct FixedIsn {
  uint32_t isn;
  static uint32_t fn(void* ctx, const TcpTuple&, uint64_t) { return static_cast<FixedIsn*>(ctx)->isn; }
};

class Sim {
 public:
  Sim(const TcpConfig& ca, const TcpConfig& cb, LinkModel link, uint64_t seed,
      FixedIsn* isn_a = nullptr, FixedIsn* isn_b = nullptr)
      : a(ca, now, isn_a ? FixedIsn::fn : nullptr, isn_a),
        b(cb, now, isn_b ? FixedIsn::fn : nullptr, isn_b),
        link_(link),
        rng_(seed) {}
  ~Sim() {
    for (auto& [k, f] : inflight_) rte_pktmbuf_free(f.m);
  }

  uint64_t now = 1'000 * kMs;
  Endpoint a;
  Endpoint b;
  std::function<void()> on_tick;  // runs every millisecond (slow readers)
  uint64_t frames = 0, lost = 0, duplicated = 0, reordered = 0;

  // Advances the clock (by 1 ms, or to the next delivery) until `done` or `limit_ns` passes.
  bool run_until(const std::function<bool()>& done, uint64_t limit_ns) {
    const uint64_t end = now + limit_ns;
    while (!done()) {
      if (now >= end) return false;
      pump();
      uint64_t next = now + kMs;
      if (!inflight_.empty()) next = std::min(next, std::max(now + 1, inflight_.begin()->first.first));
      now = next;
      while (!inflight_.empty() && inflight_.begin()->first.first <= now) {
        Flight f = inflight_.begin()->second;
        inflight_.erase(inflight_.begin());
        (f.to_b ? b : a).deliver(f.m, now);
        pump();
      }
      a.stack->advance(now);
      b.stack->advance(now);
      if (now / kMs != last_tick_ms_ && on_tick) {
        last_tick_ms_ = now / kMs;
        on_tick();
      }
      pump();
    }
    return true;
  }

 private:
  struct Flight {
    rte_mbuf* m;
    bool to_b;
  };

  void pump() {
    while (!a.out.empty()) {
      rte_mbuf* m = a.out.front();
      a.out.pop_front();
      carry(m, true);
    }
    while (!b.out.empty()) {
      rte_mbuf* m = b.out.front();
      b.out.pop_front();
      carry(m, false);
    }
  }

  // Frames to an address neither stack has (SYN-ACKs to spoofed sources) go nowhere.
  static bool addressed_to(rte_mbuf* m, bool to_b) {
    const Out o = decode(m);
    return to_b ? (o.dst == kB4 || o.dst == kB6) : (o.dst == kA4 || o.dst == kA6);
  }

  void carry(rte_mbuf* m, bool to_b) {
    if (!addressed_to(m, to_b)) {
      rte_pktmbuf_free(m);
      return;
    }
    ++frames;
    std::uniform_real_distribution<double> u(0, 1);
    if (u(rng_) < link_.loss) {
      ++lost;
      rte_pktmbuf_free(m);
      return;
    }
    uint64_t at = now + link_.delay_ns;
    if (u(rng_) < link_.reorder) {
      ++reordered;
      at += 1 + rng_() % link_.reorder_extra_ns;
    }
    if (u(rng_) < link_.dup) {
      rte_mbuf* c = rte_pktmbuf_copy(m, tcp_pool(), 0, UINT32_MAX);
      if (c != nullptr) {
        ++duplicated;
        inflight_.emplace(std::make_pair(at + 1 + rng_() % kMs, seq_++), Flight{c, to_b});
      }
    }
    inflight_.emplace(std::make_pair(at, seq_++), Flight{m, to_b});
  }

  LinkModel link_;
  std::mt19937_64 rng_;
  uint64_t last_tick_ms_ = 0;
  uint64_t seq_ = 0;
  std::map<std::pair<uint64_t, uint64_t>, Flight> inflight_;
};


// Two stacks, a client App on A and a server App on B behind a listener on B.
struct Pair {
  Sim sim;
  App client, server;
  Listener lis;
  TcpConnId c = kNoConn;

  Pair(const TcpConfig& cfg, uint64_t seed, LinkModel link = LinkModel{}, FixedIsn* isn_a = nullptr,
       FixedIsn* isn_b = nullptr)
      : sim(cfg, cfg, link, seed, isn_a, isn_b) {
    client.stack = sim.a.stack.get();
    server.stack = sim.b.stack.get();
    lis.next = &server;
  }
  // Listens on B and connects from A (over IPv6 when asked).
  void open(bool v6 = false, const IpAddr* listen_on = nullptr) {
    const IpAddr la = v6 ? kA6 : kA4;
    const IpAddr lb = v6 ? kB6 : kB4;
    ASSERT_EQ(sim.b.stack->listen(listen_on ? *listen_on : lb, kPort, Listener::accept, &lis),
              TcpError::kOk);
    ASSERT_EQ(sim.a.stack->connect(la, lb, kPort, nullptr, nullptr, App::on_event, &client, &c),
              TcpError::kOk);
    client.conn = c;
  }
};

TcpConfig base_config() {
  TcpConfig c;
  c.max_connections = 256;
  c.secret = SipKey{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  c.time_wait_ms = 2000;
  return c;
}

struct TransferCase {
  const char* name;
  LinkModel link;
  CcAlgo cc = CcAlgo::kCubic;
  bool sack = true;
  bool timestamps = true;
  bool v6 = false;
  uint32_t isn_a = 0, isn_b = 0;  // 0 = RFC 6528 ISNs
  size_t bytes = 4 << 20;
  uint64_t seed = 1;
  uint32_t rcv_buf = 256 * 1024;
};

void PrintTo(const TransferCase& c, std::ostream* os) { *os << c.name; }

// Every test ends with the pool as full as it started: no mbuf leaked.
class TcpTwoStacks : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp_pool();
    base_in_use_ = pool_in_use();
  }
  void TearDown() override { EXPECT_EQ(pool_in_use(), base_in_use_) << "mbufs leaked"; }
  uint32_t base_in_use_ = 0;
};

class TcpTransfer : public TcpTwoStacks, public ::testing::WithParamInterface<TransferCase> {};

TEST_P(TcpTransfer, bulk_both_ways_arrives_intact_and_both_sides_close) {
  const TransferCase& tc = GetParam();
  TcpConfig cfg = base_config();
  cfg.cc = tc.cc;
  cfg.sack = tc.sack;
  cfg.timestamps = tc.timestamps;
  cfg.rcv_buf_bytes = tc.rcv_buf;
  cfg.snd_buf_bytes = tc.rcv_buf;
  FixedIsn ia{tc.isn_a}, ib{tc.isn_b};
  {
    Pair p(cfg, tc.seed, tc.link, tc.isn_a ? &ia : nullptr, tc.isn_b ? &ib : nullptr);
    Sim& sim = p.sim;
    App& client = p.client;
    App& server = p.server;
    client.data = pattern(tc.bytes, tc.seed * 2 + 1);
    server.data = pattern(tc.bytes, tc.seed * 2 + 2);
    p.open(tc.v6);
    const bool ok = sim.run_until(
        [&] {
          return client.got.size() == tc.bytes && server.got.size() == tc.bytes &&
                 client.peer_fin && server.peer_fin && client.closed && server.closed;
        },
        600'000 * kMs);
    EXPECT_TRUE(ok) << "client got " << client.got.size() << " server got " << server.got.size()
                    << " frames " << sim.frames << " lost " << sim.lost;
    EXPECT_EQ(client.got.size(), tc.bytes);
    EXPECT_EQ(server.got.size(), tc.bytes);
    EXPECT_EQ(digest(server.got), digest(client.data)) << "client -> server stream differs";
    EXPECT_EQ(digest(client.got), digest(server.data)) << "server -> client stream differs";
    EXPECT_FALSE(client.reset);
    EXPECT_FALSE(server.reset);
    if (getenv("TCP_DBG")) {
      for (auto* st : {sim.a.stack.get(), sim.b.stack.get()}) {
        std::fprintf(stderr, "DBG t=%lums frames=%lu lost=%lu:", (unsigned long)(sim.now / kMs), (unsigned long)sim.frames, (unsigned long)sim.lost);
        for (uint32_t k = 0; k < kTcpCounterCount; ++k) {
          if (st->counters().v[k]) std::fprintf(stderr, " %s=%lu", kTcpCounterNames[k], (unsigned long)st->counters().v[k]);
        }
        std::fprintf(stderr, "\n");
      }
    }
    const auto& ca = sim.a.stack->counters();
    const auto& cb = sim.b.stack->counters();
    if (tc.link.loss > 0) {
      EXPECT_GT(ca[kRetransSegs] + cb[kRetransSegs], 0u);
      if (tc.sack) {
        EXPECT_GT(ca[kSackRecoverySegs] + cb[kSackRecoverySegs] + ca[kFastRetrans] + cb[kFastRetrans], 0u);
      }
    }
    if (tc.link.reorder > 0) {
      EXPECT_GT(ca[kOooSegs] + cb[kOooSegs], 0u);
    }
    if (tc.link.dup > 0) {
      EXPECT_GT(ca[kDupSegs] + cb[kDupSegs] + ca[kDupAcksIn] + cb[kDupAcksIn], 0u);
    }
    // The active closer... both closed at once here (simultaneous-ish): each side ends in
    // TIME-WAIT or CLOSED, and after 2 MSL nothing is left.
    sim.a.stack->close(client.conn);
    sim.b.stack->close(server.conn);
    ASSERT_TRUE(sim.run_until(
        [&] { return sim.a.stack->connections() == 0 && sim.b.stack->connections() == 0; },
        10'000 * kMs));
    EXPECT_EQ(sim.a.stack->mem_used(), 0u);
    EXPECT_EQ(sim.b.stack->mem_used(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Links, TcpTransfer,
    ::testing::Values(
        TransferCase{"clean_cubic", LinkModel{}},
        TransferCase{"clean_newreno_no_sack_no_ts", LinkModel{}, CcAlgo::kNewReno, false, false},
        TransferCase{"loss1_cubic_sack", LinkModel{0.01, 0, 0}, CcAlgo::kCubic, true, true, false, 0, 0, 4 << 20, 3},
        TransferCase{"loss5_reorder_dup_cubic_sack", LinkModel{0.05, 0.02, 0.05}, CcAlgo::kCubic, true, true, false, 0, 0, 2 << 20, 4},
        TransferCase{"loss3_reorder_newreno_no_sack", LinkModel{0.03, 0.01, 0.03}, CcAlgo::kNewReno, false, true, false, 0, 0, 2 << 20, 5},
        TransferCase{"loss2_no_timestamps_sack", LinkModel{0.02, 0.01, 0.02}, CcAlgo::kCubic, true, false, false, 0, 0, 2 << 20, 6},
        TransferCase{"ipv6_loss2_reorder", LinkModel{0.02, 0.01, 0.03}, CcAlgo::kCubic, true, true, true, 0, 0, 2 << 20, 7},
        TransferCase{"isn_wraps_during_transfer", LinkModel{0.01, 0.01, 0.02}, CcAlgo::kCubic, true, true, false, 0xffffffffu - 300000, 0xffffff00u, 4 << 20, 8},
        TransferCase{"isn_at_wrap_edge", LinkModel{}, CcAlgo::kNewReno, true, true, false, 0xffffffffu, 0x7fffffffu, 1 << 20, 9},
        // A 40 ms RTT with a 2 MiB window (window scale 6): the long fat pipe case.
        TransferCase{"delay20ms_loss1_big_window", LinkModel{0.01, 0, 0.01, 20 * kMs, 5 * kMs}, CcAlgo::kCubic, true, true, false, 0, 0, 8 << 20, 10, 2 << 20},
        TransferCase{"delay20ms_loss1_newreno_no_sack", LinkModel{0.01, 0, 0, 20 * kMs}, CcAlgo::kNewReno, false, true, false, 0, 0, 2 << 20, 11}),
    [](const ::testing::TestParamInfo<TransferCase>& i) { return std::string(i.param.name); });

TEST_F(TcpTwoStacks, half_close_keeps_the_other_direction_flowing) {
  Pair p(base_config(), 11);
  Sim& sim = p.sim;
  App& client = p.client;
  App& server = p.server;
  client.data = pattern(1000, 1);  // client sends a request, then FIN
  server.fin_after = false;        // server keeps its side open, answering after the FIN
  p.open();
  ASSERT_TRUE(sim.run_until(
      [&] { return server.peer_fin && sim.a.stack->state(client.conn) == TcpState::kFinWait2; },
      5000 * kMs));
  EXPECT_EQ(server.got, client.data);
  EXPECT_EQ(sim.b.stack->state(server.conn), TcpState::kCloseWait);
  EXPECT_EQ(sim.a.stack->state(client.conn), TcpState::kFinWait2);
  // The server answers after the client's FIN; the client still receives.
  server.data = pattern(300 * 1000, 2);
  server.push();
  ASSERT_TRUE(sim.run_until([&] { return client.got.size() == server.data.size(); }, 10000 * kMs));
  EXPECT_EQ(client.got, server.data);
  EXPECT_FALSE(client.peer_fin);
  ASSERT_EQ(sim.b.stack->shutdown_write(server.conn), TcpError::kOk);
  EXPECT_EQ(sim.b.stack->state(server.conn), TcpState::kLastAck);
  ASSERT_TRUE(sim.run_until([&] { return client.peer_fin && server.closed; }, 5000 * kMs));
  EXPECT_EQ(sim.a.stack->state(client.conn), TcpState::kTimeWait);
  EXPECT_EQ(sim.b.stack->state(server.conn), TcpState::kClosed);
  sim.a.stack->close(client.conn);
  sim.b.stack->close(server.conn);
  EXPECT_EQ(sim.b.stack->connections(), 0u);
  // TIME-WAIT lasts time_wait_ms, then the TCB is gone.
  EXPECT_EQ(sim.a.stack->connections(), 1u);
  ASSERT_TRUE(sim.run_until([&] { return sim.a.stack->connections() == 0; }, 3000 * kMs));
}

TEST_F(TcpTwoStacks, abort_sends_rst_and_the_peer_sees_a_reset) {
  Pair p(base_config(), 12);
  Sim& sim = p.sim;
  App& client = p.client;
  App& server = p.server;
  client.fin_after = server.fin_after = false;
  const IpAddr any;  // a wildcard listener
  p.open(false, &any);
  const TcpConnId c = p.c;
  ASSERT_TRUE(sim.run_until([&] { return server.connected && client.connected; }, 5000 * kMs));
  sim.a.stack->abort(c);
  EXPECT_EQ(sim.a.stack->connections(), 0u);
  EXPECT_EQ(sim.a.stack->counters()[kRstOut], 1u);
  ASSERT_TRUE(sim.run_until([&] { return server.reset; }, 5000 * kMs));
  EXPECT_EQ(sim.b.stack->state(server.conn), TcpState::kClosed);
  EXPECT_EQ(sim.b.stack->counters()[kRstIn], 1u);
  sim.b.stack->close(server.conn);
  EXPECT_EQ(sim.b.stack->connections(), 0u);
}

// A connect() that the other stack answers with a RST: nobody listens on the port, or the
// listener's accept callback refuses.
void expect_connect_reset(bool listener_refuses) {
  TcpConfig cfg = base_config();
  Sim sim(cfg, cfg, LinkModel{}, 13);
  App client;
  client.stack = sim.a.stack.get();
  Listener lis;
  lis.refuse = true;
  if (listener_refuses) {
    ASSERT_EQ(sim.b.stack->listen(kB4, kPort, Listener::accept, &lis), TcpError::kOk);
  }
  TcpConnId c;
  ASSERT_EQ(sim.a.stack->connect(kA4, kB4, kPort, nullptr, nullptr, App::on_event, &client, &c),
            TcpError::kOk);
  ASSERT_TRUE(sim.run_until([&] { return client.reset; }, 5000 * kMs));
  EXPECT_FALSE(client.connected);
  EXPECT_EQ(sim.b.stack->counters()[kRefused], 1u);
  EXPECT_EQ(sim.b.stack->counters()[kRstOut], 1u);
  EXPECT_EQ(sim.b.stack->connections(), 0u);
  EXPECT_EQ(sim.a.stack->state(c), TcpState::kClosed);
  sim.a.stack->close(c);
  EXPECT_EQ(sim.a.stack->connections(), 0u);
}

TEST_F(TcpTwoStacks, connect_to_a_port_nobody_listens_on_is_reset) { expect_connect_reset(false); }

TEST_F(TcpTwoStacks, a_listener_refusing_the_connection_resets_it) { expect_connect_reset(true); }

TEST_F(TcpTwoStacks, a_slow_reader_closes_the_window_and_the_sender_probes_until_it_reopens) {
  TcpConfig cfg = base_config();
  cfg.rcv_buf_bytes = 64 * 1024;
  Pair p(cfg, 15);
  Sim& sim = p.sim;
  App& client = p.client;
  App& server = p.server;
  client.data = pattern(1 << 20, 3);
  server.paused = true;  // reads nothing at first
  p.open();
  const TcpConnId c = p.c;
  // The receive buffer fills; the advertised window reaches zero and stays there.
  sim.run_until([] { return false; }, 3000 * kMs);
  TcpConnInfo si, ci;
  ASSERT_TRUE(sim.b.stack->info(server.conn, &si));
  ASSERT_TRUE(sim.a.stack->info(c, &ci));
  EXPECT_GE(si.recv_queued, cfg.rcv_buf_bytes - 2 * 1460);
  EXPECT_LE(si.recv_queued, cfg.rcv_buf_bytes);
  EXPECT_EQ(si.rcv_wnd, 0u);
  EXPECT_EQ(ci.snd_wnd, 0u);
  // The sender's buffer is bounded: send() took only what fits.
  EXPECT_LE(client.sent, cfg.rcv_buf_bytes + cfg.snd_buf_bytes);
  EXPECT_GT(sim.a.stack->counters()[kWindowProbes], 0u);
  EXPECT_EQ(sim.a.stack->connections(), 1u);  // probing never gives up while answered
  // A slow reader: 20 KB per ms from now on; everything arrives.
  server.paused = false;
  server.read_per_ms = 20000;
  sim.on_tick = [&] { server.tick(); };
  ASSERT_TRUE(sim.run_until([&] { return server.got.size() == client.data.size(); },
                            60'000 * kMs));
  EXPECT_EQ(server.got, client.data);
}

TEST_F(TcpTwoStacks, syn_flood_gets_cookies_and_a_legitimate_client_still_connects) {
  TcpConfig cfg = base_config();
  cfg.syn_backlog = 8;
  cfg.max_connections = 64;
  Sim sim(cfg, cfg, LinkModel{}, 16);
  App client, server;
  client.stack = sim.a.stack.get();
  server.stack = sim.b.stack.get();
  client.data = pattern(200 * 1000, 5);
  server.data = pattern(100 * 1000, 6);
  Listener lis;
  lis.next = &server;
  ASSERT_EQ(sim.b.stack->listen(kB4, kPort, Listener::accept, &lis), TcpError::kOk);
  // 500 spoofed SYNs (timestamps on, like Linux clients) from addresses that never answer.
  std::mt19937 rng(99);
  for (int i = 0; i < 500; ++i) {
    pkt::TcpHdr th;
    th.sport = uint16_t(1024 + rng() % 60000);
    th.dport = kPort;
    th.seq = rng();
    th.flags = pkt::kTcpSyn;
    pkt::TcpOptions o;
    o.mss = 1460;
    o.wscale = 7;
    o.sack_permitted = true;
    o.ts_val = rng();
    th.options = pkt::tcp_options(o);
    pkt::IpHdr ip;
    ip.src = IpAddr::v4(0xc6120000u | (rng() & 0xffff));
    ip.dst = kB4;
    sim.b.inject(pkt::build_tcp(pkt::EthHdr{}, ip, th), sim.now);
  }
  sim.b.drop_output();  // the SYN-ACKs go to the spoofed sources
  const auto& cb = sim.b.stack->counters();
  EXPECT_EQ(cb[kPassiveOpens], 8u);  // the backlog
  EXPECT_EQ(cb[kSyncookiesSent], 492u);
  EXPECT_EQ(sim.b.stack->connections(), 8u);
  // A legitimate client connects and transfers both ways through a cookie.
  TcpConnId c;
  ASSERT_EQ(sim.a.stack->connect(kA4, kB4, kPort, nullptr, nullptr, App::on_event, &client, &c),
            TcpError::kOk);
  ASSERT_TRUE(sim.run_until(
      [&] { return server.got.size() == client.data.size() && client.got.size() == server.data.size(); },
      20'000 * kMs));
  EXPECT_EQ(server.got, client.data);
  EXPECT_EQ(client.got, server.data);
  EXPECT_EQ(cb[kSyncookiesValidated], 1u);
  // The cookie carried window scaling and SACK in the timestamp (syncookie.h).
  TcpConnInfo si;
  ASSERT_TRUE(sim.b.stack->info(server.conn, &si));
  EXPECT_TRUE(si.ws);
  EXPECT_TRUE(si.sack);
  EXPECT_TRUE(si.ts);
  // A forged ACK to the listener fails validation and is reset.
  pkt::TcpHdr th;
  th.sport = 5555;
  th.dport = kPort;
  th.seq = 12345;
  th.ack = 67890;
  th.flags = pkt::kTcpAck;
  pkt::IpHdr ip;
  ip.src = IpAddr::v4(0xc6130001u);
  ip.dst = kB4;
  const uint64_t failed = cb[kSyncookiesFailed];
  sim.b.inject(pkt::build_tcp(pkt::EthHdr{}, ip, th), sim.now);
  EXPECT_EQ(cb[kSyncookiesFailed], failed + 1);
  auto outs = sim.b.take();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(outs[0].has(pkt::kTcpRst));
  EXPECT_EQ(outs[0].seq, 67890u);
  // The half-open flood connections time out after their SYN-ACK retries.
  sim.a.stack->abort(c);
  sim.b.stack->abort(server.conn);
  ASSERT_TRUE(sim.run_until([&] { return sim.b.stack->connections() == 0; }, 300'000 * kMs));
  EXPECT_EQ(cb[kTimeouts], 8u);
}

TEST_F(TcpTwoStacks, simultaneous_open_between_two_stacks_establishes_both) {
  TcpConfig cfg = base_config();
  cfg.ephemeral_lo = cfg.ephemeral_hi = 40000;  // both sides pick the same port
  Sim sim(cfg, cfg, LinkModel{}, 17);
  App a, b;
  a.stack = sim.a.stack.get();
  b.stack = sim.b.stack.get();
  a.fin_after = b.fin_after = false;
  TcpConnId ca, cb;
  ASSERT_EQ(sim.a.stack->connect(kA4, kB4, 40000, nullptr, nullptr, App::on_event, &a, &ca),
            TcpError::kOk);
  ASSERT_EQ(sim.b.stack->connect(kB4, kA4, 40000, nullptr, nullptr, App::on_event, &b, &cb),
            TcpError::kOk);
  ASSERT_TRUE(sim.run_until([&] { return a.connected && b.connected; }, 5000 * kMs));
  EXPECT_EQ(sim.a.stack->state(ca), TcpState::kEstablished);
  EXPECT_EQ(sim.b.stack->state(cb), TcpState::kEstablished);
  // And a simultaneous close: both FINs cross, both sides go through CLOSING to TIME-WAIT.
  ASSERT_EQ(sim.a.stack->shutdown_write(ca), TcpError::kOk);
  ASSERT_EQ(sim.b.stack->shutdown_write(cb), TcpError::kOk);
  ASSERT_TRUE(sim.run_until([&] { return a.closed && b.closed; }, 5000 * kMs));
  EXPECT_EQ(sim.a.stack->state(ca), TcpState::kTimeWait);
  EXPECT_EQ(sim.b.stack->state(cb), TcpState::kTimeWait);
  sim.a.stack->close(ca);
  sim.b.stack->close(cb);
}

TEST_F(TcpTwoStacks, many_parallel_connections_share_the_budgets) {
  TcpConfig cfg = base_config();
  cfg.worker_mem_bytes = 2 << 20;  // far less than 64 connections x 256 KiB buffers
  Sim sim(cfg, cfg, LinkModel{0.005, 0, 0.01}, 18);
  constexpr int kConns = 64;
  std::vector<App> clients(kConns), servers(kConns);
  struct Multi {
    std::vector<App>* servers;
    int next = 0;
    static bool accept(void* ctx, const TcpTuple&, TcpEventFn* fn, void** user) {
      auto* m = static_cast<Multi*>(ctx);
      *fn = App::on_event;
      *user = &(*m->servers)[m->next++];
      return true;
    }
  } multi{&servers};
  ASSERT_EQ(sim.b.stack->listen(kB4, kPort, Multi::accept, &multi), TcpError::kOk);
  for (int i = 0; i < kConns; ++i) {
    clients[i].stack = sim.a.stack.get();
    servers[i].stack = sim.b.stack.get();
    clients[i].data = pattern(100'000 + 1000 * i, 100 + i);
    TcpConnId c;
    ASSERT_EQ(sim.a.stack->connect(kA4, kB4, kPort, nullptr, nullptr, App::on_event, &clients[i], &c),
              TcpError::kOk);
  }
  uint64_t peak = 0;
  sim.on_tick = [&] { peak = std::max(peak, sim.a.stack->mem_used()); };
  ASSERT_TRUE(sim.run_until(
      [&] {
        // Servers were handed out in accept order: compare totals here, contents below.
        size_t want = 0, got = 0;
        for (int i = 0; i < kConns; ++i) {
          want += clients[i].data.size();
          got += servers[i].got.size();
        }
        return got == want;
      },
      120'000 * kMs)) << [&] {
    std::string d;
    for (int i = 0; i < kConns; ++i) {
      TcpConnInfo ci;
      sim.a.stack->info(clients[i].conn, &ci);
      d += "c" + std::to_string(i) + " sent=" + std::to_string(clients[i].sent) + "/" +
           std::to_string(clients[i].data.size()) + " st=" + state_name(ci.state) +
           " q=" + std::to_string(ci.send_queued) + " wnd=" + std::to_string(ci.snd_wnd) + "\n";
    }
    return d + "mem " + std::to_string(sim.a.stack->mem_used()) + "\n";
  }();
  for (int i = 0; i < kConns; ++i) {
    // The server apps were handed out in accept order; match them by content length.
    bool found = false;
    for (int k = 0; k < kConns; ++k) {
      if (servers[k].got.size() == clients[i].data.size()) {
        EXPECT_EQ(servers[k].got, clients[i].data);
        found = true;
      }
    }
    EXPECT_TRUE(found);
  }
  EXPECT_LE(peak, cfg.worker_mem_bytes);
  for (int i = 0; i < kConns; ++i) {
    sim.a.stack->close(clients[i].conn);
    sim.b.stack->close(servers[i].conn);
  }
  ASSERT_TRUE(sim.run_until(
      [&] { return sim.a.stack->connections() == 0 && sim.b.stack->connections() == 0; },
      20'000 * kMs));
}

// An echo server that splices what it receives back without copying: recv_chain() hands over
// the received mbufs (headers trimmed, one per segment) and send_chain() queues them as they
// are, the proxy's data path. When the send buffer is full the chain waits for kWritable.
struct EchoServer {
  TcpStack* stack = nullptr;
  TcpConnId conn = kNoConn;
  rte_mbuf* pending = nullptr;  // received, not yet accepted by send_chain()
  bool peer_fin = false;
  uint64_t echoed = 0;

  static bool accept(void* ctx, const TcpTuple&, TcpEventFn* fn, void** user) {
    *fn = on_event;
    *user = ctx;
    return true;
  }
  static void on_event(void* user, TcpConnId c, TcpEvent ev) {
    auto* e = static_cast<EchoServer*>(user);
    e->conn = c;
    if (ev == TcpEvent::kPeerFin) e->peer_fin = true;
    e->pump();
  }
  void pump() {
    for (;;) {
      if (pending == nullptr) {
        // At most what the send buffer takes now.
        const uint32_t room = stack->send_space(conn);
        uint32_t len = 0;
        pending = stack->recv_chain(conn, &len, room);
        if (pending == nullptr) {
          TcpConnInfo ci;
          if (stack->info(conn, &ci) && ci.recv_queued > 0) stack->request_writable(conn);
          break;
        }
      }
      const uint32_t len = rte_pktmbuf_pkt_len(pending);
      if (!stack->send_chain(conn, pending)) break;  // kWritable brings us back
      pending = nullptr;
      echoed += len;
    }
    // The FIN goes after the last byte: nothing pending, nothing left to read.
    TcpConnInfo ci;
    if (pending == nullptr && peer_fin && stack->info(conn, &ci) && ci.recv_queued == 0) {
      stack->shutdown_write(conn);
    }
  }
  ~EchoServer() {
    if (pending != nullptr) rte_pktmbuf_free(pending);
  }
};

TEST_F(TcpTwoStacks, an_echo_server_splicing_mbuf_chains_returns_the_stream_intact) {
  TcpConfig cfg = base_config();
  cfg.snd_buf_bytes = 64 * 1024;  // smaller than the receive buffer: splicing must wait
  Sim sim(base_config(), cfg, LinkModel{0.01, 0.01, 0.02}, 31);
  EchoServer echo;
  echo.stack = sim.b.stack.get();
  ASSERT_EQ(sim.b.stack->listen(kB4, kPort, EchoServer::accept, &echo), TcpError::kOk);
  App client;
  client.stack = sim.a.stack.get();
  client.data = pattern(3 << 20, 77);
  TcpConnId c;
  ASSERT_EQ(sim.a.stack->connect(kA4, kB4, kPort, nullptr, nullptr, App::on_event, &client, &c),
            TcpError::kOk);
  client.conn = c;
  ASSERT_TRUE(sim.run_until([&] { return client.peer_fin && client.closed; }, 120'000 * kMs))
      << "client got " << client.got.size() << " echoed " << echo.echoed;
  EXPECT_EQ(client.got.size(), client.data.size());
  EXPECT_EQ(digest(client.got), digest(client.data));
  EXPECT_EQ(echo.echoed, client.data.size());
  sim.a.stack->close(c);
  sim.b.stack->close(echo.conn);
  ASSERT_TRUE(sim.run_until(
      [&] { return sim.a.stack->connections() == 0 && sim.b.stack->connections() == 0; },
      10'000 * kMs));
}

// Blind junk: random segments (flags, sequence numbers near and far from the windows,
// options bytes, payloads), half of them on the live connection's tuple, injected into both
// stacks while they transfer over a lossy link. TCP cannot keep a stream intact against
// in-window forgeries, so this checks robustness only: no crash, no leak, bounded state,
// everything released at the end.
TEST_F(TcpTwoStacks, random_junk_segments_never_crash_leak_or_grow_state) {
  TcpConfig cfg = base_config();
  cfg.max_connections = 32;
  cfg.time_wait_ms = 500;
  Pair p(cfg, 21, LinkModel{0.01, 0.01, 0.02});
  p.client.data = pattern(512 * 1024, 1);
  p.server.data = pattern(512 * 1024, 2);
  p.open();
  std::mt19937_64 rng(2024);
  uint64_t injected = 0;
  auto junk = [&](Endpoint& ep, const IpAddr& me, const IpAddr& peer, TcpConnId conn) {
    TcpConnInfo ci;
    const bool live = ep.stack->info(conn, &ci) && rng() % 2 == 0;
    pkt::TcpHdr th;
    th.sport = live ? ci.tuple.remote_port : uint16_t(1 + rng() % 65535);
    th.dport = live ? ci.tuple.local_port : (rng() % 2 ? kPort : uint16_t(1 + rng() % 65535));
    const uint32_t near_rcv = ci.rcv_nxt + uint32_t(int32_t(rng() % 200000) - 50000);
    const uint32_t near_snd = ci.snd_una + uint32_t(int32_t(rng() % 200000) - 100000);
    th.seq = rng() % 4 ? near_rcv : uint32_t(rng());
    th.ack = rng() % 4 ? near_snd : uint32_t(rng());
    th.flags = uint8_t(rng() & 0x3f);
    th.window = uint16_t(rng());
    const size_t olen = 4 * (rng() % 11);
    for (size_t i = 0; i < olen; ++i) th.options.push_back(uint8_t(rng()));
    Bytes payload(rng() % 3 ? 0 : rng() % 1200);
    for (auto& b : payload) b = uint8_t(rng());
    pkt::IpHdr ip;
    ip.src = peer;
    ip.dst = me;
    ep.inject(pkt::build_tcp(pkt::EthHdr{}, ip, th, payload), p.sim.now, true);
    ++injected;
  };
  p.sim.on_tick = [&] {
    for (int i = 0; i < 20; ++i) {
      junk(p.sim.b, kB4, kA4, p.server.conn);
      junk(p.sim.a, kA4, kB4, p.client.conn);
    }
    EXPECT_LE(p.sim.a.stack->connections(), cfg.max_connections);
    EXPECT_LE(p.sim.b.stack->connections(), cfg.max_connections);
  };
  p.sim.run_until([] { return false; }, 3000 * kMs);
  EXPECT_GT(injected, 100000u);
  p.sim.on_tick = nullptr;
  p.sim.a.stack->abort(p.client.conn);
  p.sim.b.stack->abort(p.server.conn);
  // Whatever the junk opened (SYN-RECEIVED, TIME-WAIT) times out.
  EXPECT_TRUE(p.sim.run_until(
      [&] { return p.sim.a.stack->connections() == 0 && p.sim.b.stack->connections() == 0; },
      600'000 * kMs));
  EXPECT_EQ(p.sim.a.stack->mem_used(), 0u);
  EXPECT_EQ(p.sim.b.stack->mem_used(), 0u);
  const auto& cb = p.sim.b.stack->counters();
  EXPECT_GT(cb[kChallengeAcks] + cb[kChallengeAcksLimited], 0u);
}

}  // namespace
}  // namespace meshgate::test::tcp
