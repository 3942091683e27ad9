// The TCP state machine as tables: state x incoming segment -> new state + the segments sent
// (flags, seq, ack), driven by hand-built frames through the real parser against one stack.
// Covers LISTEN, SYN-SENT, SYN-RECEIVED, ESTABLISHED, the closing states and TIME-WAIT;
// simultaneous open and close; RST and SYN validation with RFC 5961 challenge ACKs (rate
// limited per connection); RFC 1337 and RFC 6191 in TIME-WAIT; options negotiation, PAWS,
// delayed and immediate ACKs, SACK blocks, RTO backoff, fast retransmit, SACK recovery,
// zero-window probes and keepalive. Our ISN sits just below 2^32 so every handshake and data
// exchange here crosses the sequence wrap.
#include <gtest/gtest.h>

#include <optional>

#include "tests/support/tcp_test_util.h"

namespace meshgate::test::tcp {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kIss = 0xfffffff0u;       // ours
constexpr uint32_t kPeerIss = 0xffffff00u;   // the raw peer's
constexpr uint16_t kLocalPort = 80;
constexpr uint16_t kPeerPort = 40000;
const IpAddr kUs = IpAddr::v4(0x0a000001);
const IpAddr kPeer = IpAddr::v4(0x0a000002);

constexpr uint8_t F = pkt::kTcpFin;
constexpr uint8_t S = pkt::kTcpSyn;
constexpr uint8_t R = pkt::kTcpRst;
constexpr uint8_t P = pkt::kTcpPsh;
constexpr uint8_t A = pkt::kTcpAck;

struct Recorder {
  std::vector<TcpEvent> events;
  TcpConnId conn = kNoConn;
  bool refuse = false;
  static void on_event(void* u, TcpConnId c, TcpEvent ev) {
    auto* r = static_cast<Recorder*>(u);
    r->conn = c;
    r->events.push_back(ev);
  }
  static bool accept(void* ctx, const TcpTuple&, TcpEventFn* fn, void** user) {
    auto* r = static_cast<Recorder*>(ctx);
    *fn = on_event;
    *user = r;
    return !r->refuse;
  }
  bool saw(TcpEvent e) const { return std::find(events.begin(), events.end(), e) != events.end(); }
};

uint32_t fixed_isn(void*, const TcpTuple&, uint64_t) { return kIss; }

// Options of a raw SYN.
struct SynOpts {
  bool ts = false, sack = false, ws = false;
  uint16_t mss = 1460;
};

class TcpStateMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp_pool();
    base_in_use_ = pool_in_use();
    cfg_.secret = SipKey{1, 2};
    cfg_.max_connections = 64;
    cfg_.time_wait_ms = 1000;
  }
  void TearDown() override {
    ep_.reset();
    EXPECT_EQ(pool_in_use(), base_in_use_) << "mbufs leaked";
  }

  void make() { ep_ = std::make_unique<Endpoint>(cfg_, now_, fixed_isn, nullptr); }
  TcpStack& st() { return *ep_->stack; }
  TcpTuple tuple(uint16_t peer_port = kPeerPort) const {
    return TcpTuple{kUs, kPeer, kLocalPort, peer_port};
  }
  dp::tcp::TcpState state(uint16_t peer_port = kPeerPort) { return st().state_of(tuple(peer_port)); }

  // One raw segment from the peer; returns what the stack sent in response.
  std::vector<Out> seg(uint8_t flags, uint32_t seq, uint32_t ack, size_t len = 0,
                       uint16_t win = 65535, Bytes options = {}, uint16_t peer_port = kPeerPort) {
    pkt::TcpHdr th;
    th.sport = peer_port;
    th.dport = local_port_;
    th.seq = seq;
    th.ack = ack;
    th.flags = flags;
    th.window = win;
    th.options = std::move(options);
    pkt::IpHdr ip;
    ip.src = kPeer;
    ip.dst = kUs;
    Bytes payload(len);
    for (size_t i = 0; i < len; ++i) payload[i] = uint8_t(seq + i);
    ep_->inject(pkt::build_tcp(pkt::EthHdr{}, ip, th, payload), now_);
    return ep_->take();
  }
  // Queues `n` bytes on `c` (all must be taken) and returns the segments that went out.
  std::vector<Out> send_bytes(TcpConnId c, size_t n) {
    const Bytes data(n, 0x5a);
    EXPECT_EQ(st().send(c, data.data(), uint32_t(n)), n);
    return ep_->take();
  }
  std::vector<Out> advance(uint64_t ms) {
    now_ += ms * kMs;
    st().advance(now_);
    return ep_->take();
  }
  static Bytes syn_options(const SynOpts& o, uint32_t tsval = 1000, uint32_t tsecr = 0) {
    pkt::TcpOptions p;
    p.mss = o.mss;
    if (o.ws) p.wscale = 7;
    p.sack_permitted = o.sack;
    if (o.ts) {
      p.ts_val = tsval;
      p.ts_ecr = tsecr;
    }
    return pkt::tcp_options(p);
  }
  static Bytes ts_option(uint32_t tsval, uint32_t tsecr) {
    pkt::TcpOptions p;
    p.ts_val = tsval;
    p.ts_ecr = tsecr;
    return pkt::tcp_options(p);
  }
  static Bytes sack_option(std::initializer_list<std::pair<uint32_t, uint32_t>> blocks) {
    Bytes b = {1, 1, 5, uint8_t(2 + 8 * blocks.size())};
    for (auto [s, e] : blocks) {
      for (int k = 3; k >= 0; --k) b.push_back(uint8_t(s >> (8 * k)));
      for (int k = 3; k >= 0; --k) b.push_back(uint8_t(e >> (8 * k)));
    }
    return b;
  }

  // connect() to the raw peer; checks the SYN and aims raw segments at the chosen port.
  TcpConnId active_open(Recorder* rec) {
    TcpConnId c = kNoConn;
    EXPECT_EQ(st().connect(kUs, kPeer, kPeerPort, nullptr, nullptr, Recorder::on_event, rec, &c),
              TcpError::kOk);
    const auto syn = ep_->take();
    EXPECT_EQ(syn.size(), 1u);
    if (syn.empty()) return c;
    EXPECT_EQ(syn[0].flags, S);
    EXPECT_EQ(syn[0].seq, kIss);
    EXPECT_TRUE(syn[0].opt.sack_permitted);
    EXPECT_TRUE(syn[0].opt.has_ts);
    EXPECT_NE(syn[0].opt.wscale, 0xff);
    local_port_ = syn[0].sport;
    return c;
  }

  // LISTEN -> SYN-RECEIVED -> ESTABLISHED with the raw peer; returns the handle.
  TcpConnId establish_passive(SynOpts o = {}) {
    EXPECT_EQ(st().listen(kUs, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
    auto out = seg(S, kPeerIss, 0, 0, 65535, syn_options(o));
    EXPECT_EQ(out.size(), 1u);
    EXPECT_EQ(state(), dp::tcp::TcpState::kSynReceived);
    out = seg(A, kPeerIss + 1, kIss + 1, 0, 65535, o.ts ? ts_option(1001, out[0].opt.tsval) : Bytes{});
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(state(), dp::tcp::TcpState::kEstablished);
    EXPECT_TRUE(rec_.saw(TcpEvent::kConnected));
    return rec_.conn;
  }

  TcpConfig cfg_;
  uint16_t local_port_ = kLocalPort;  // the port raw segments go to (an active open's choice)
  uint64_t now_ = 1000 * kMs;
  std::unique_ptr<Endpoint> ep_;
  Recorder rec_;
  uint32_t base_in_use_ = 0;
};

// What a row expects the stack to send: flags, and seq / ack relative to the connection's
// SND.NXT / RCV.NXT before the segment arrived.
struct Expect {
  uint8_t flags;
  int32_t seq_off;
  int32_t ack_off;
};

void expect_out(const std::vector<Out>& got, const std::vector<Expect>& want, uint32_t snd_nxt,
                uint32_t rcv_nxt, const char* row) {
  ASSERT_EQ(got.size(), want.size()) << row;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].flags, want[i].flags) << row << " segment " << i;
    EXPECT_EQ(got[i].seq, snd_nxt + uint32_t(want[i].seq_off)) << row << " segment " << i;
    if (want[i].flags & A) {
      EXPECT_EQ(got[i].ack, rcv_nxt + uint32_t(want[i].ack_off)) << row << " segment " << i;
    }
  }
}

// ---- LISTEN and CLOSED ------------------------------------------------------------------------

TEST_F(TcpStateMachine, passive_open_answers_syn_with_syn_ack_echoing_the_options_it_got) {
  make();
  ASSERT_EQ(st().listen(kUs, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
  auto out = seg(S, kPeerIss, 0, 0, 65535, syn_options({.ts = true, .sack = true, .ws = true}, 777));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, S | A);
  EXPECT_EQ(out[0].seq, kIss);
  EXPECT_EQ(out[0].ack, kPeerIss + 1);
  EXPECT_EQ(out[0].src, kUs);
  EXPECT_EQ(out[0].dst, kPeer);
  EXPECT_EQ(out[0].sport, kLocalPort);
  EXPECT_EQ(out[0].dport, kPeerPort);
  EXPECT_EQ(out[0].opt.mss, cfg_.mss);
  EXPECT_EQ(out[0].opt.wscale, 3);  // 256 KiB buffer: 65535 << 3 covers it (RFC 7323 §2.3)
  EXPECT_TRUE(out[0].opt.sack_permitted);
  EXPECT_TRUE(out[0].opt.has_ts);
  EXPECT_EQ(out[0].opt.tsecr, 777u);
  EXPECT_EQ(out[0].win, 65535);  // a SYN's window is never scaled
  EXPECT_EQ(state(), dp::tcp::TcpState::kSynReceived);
  EXPECT_TRUE(rec_.events.empty());  // not the application's until established
}

TEST_F(TcpStateMachine, syn_without_options_gets_a_syn_ack_with_only_mss) {
  make();
  ASSERT_EQ(st().listen(IpAddr{}, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
  auto out = seg(S, kPeerIss, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opt.mss, cfg_.mss);
  EXPECT_EQ(out[0].opt.wscale, 0xff);
  EXPECT_FALSE(out[0].opt.sack_permitted);
  EXPECT_FALSE(out[0].opt.has_ts);
}

struct ClosedRow {
  const char* name;
  uint8_t flags;
  bool listener;  // a listener on the port (LISTEN) or none (CLOSED)
  // Expected reply: none, or RST with seq / ack from the segment.
  std::optional<uint8_t> reply_flags;
  bool seq_is_seg_ack;  // RST <SEQ=SEG.ACK> (else <SEQ=0><ACK=SEG.SEQ+SEG.LEN>)
};

TEST_F(TcpStateMachine, closed_and_listen_answer_stray_segments_per_rfc_9293) {
  const ClosedRow rows[] = {
      {"closed: SYN -> RST,ACK", S, false, R | A, false},
      {"closed: ACK -> RST <SEQ=SEG.ACK>", A, false, R, true},
      {"closed: data without ACK -> RST,ACK", P, false, R | A, false},
      {"closed: RST -> nothing", R, false, std::nullopt, false},
      {"closed: FIN,ACK -> RST", F | A, false, R, true},
      {"listen: RST -> nothing", R, true, std::nullopt, false},
      {"listen: ACK without cookie -> RST <SEQ=SEG.ACK>", A, true, R, true},
      {"listen: SYN,ACK -> RST <SEQ=SEG.ACK>", S | A, true, R, true},
      {"listen: FIN without SYN -> RST,ACK", F, true, R | A, false},
  };
  for (const ClosedRow& r : rows) {
    make();
    if (r.listener) {
      ASSERT_EQ(st().listen(kUs, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
    }
    auto out = seg(r.flags, 5000, 9000, 10);
    if (!r.reply_flags) {
      EXPECT_TRUE(out.empty()) << r.name;
    } else {
      ASSERT_EQ(out.size(), 1u) << r.name;
      EXPECT_EQ(out[0].flags, *r.reply_flags) << r.name;
      if (r.seq_is_seg_ack) {
        EXPECT_EQ(out[0].seq, 9000u) << r.name;
      } else {
        EXPECT_EQ(out[0].seq, 0u) << r.name;
        const uint32_t seg_len = 10 + ((r.flags & S) ? 1 : 0) + ((r.flags & F) ? 1 : 0);
        EXPECT_EQ(out[0].ack, 5000u + seg_len) << r.name;
      }
    }
    EXPECT_EQ(st().connections(), 0u) << r.name;
    ep_.reset();
  }
}

TEST_F(TcpStateMachine, a_refusing_accept_callback_resets_the_syn) {
  make();
  rec_.refuse = true;
  ASSERT_EQ(st().listen(kUs, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
  auto out = seg(S, kPeerIss, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, R | A);
  EXPECT_EQ(out[0].ack, kPeerIss + 1);
  EXPECT_EQ(st().connections(), 0u);
  EXPECT_EQ(st().counters()[kRefused], 1u);
}

// ---- SYN-RECEIVED -----------------------------------------------------------------------------

struct SynRcvdRow {
  const char* name;
  uint8_t flags;
  uint32_t seq;
  uint32_t ack;
  dp::tcp::TcpState want;
  std::vector<Expect> out;  // relative to SND.NXT = ISS + 1 (SYN-ACK: ISS) and RCV.NXT
};

TEST_F(TcpStateMachine, syn_received_table) {
  using St = dp::tcp::TcpState;
  const SynRcvdRow rows[] = {
      {"ACK of our SYN establishes", A, kPeerIss + 1, kIss + 1, St::kEstablished, {}},
      {"ACK of nothing we sent -> RST <SEQ=SEG.ACK>", A, kPeerIss + 1, kIss + 7, St::kSynReceived,
       {{R, 6, 0}}},
      {"retransmitted SYN -> SYN-ACK again", S, kPeerIss, 0, St::kSynReceived, {{S | A, -1, 0}}},
      {"RST at RCV.NXT -> back to LISTEN (TCB freed)", R, kPeerIss + 1, 0, St::kClosed, {}},
      {"RST in window off RCV.NXT -> challenge ACK", R, kPeerIss + 100, 0, St::kSynReceived,
       {{A, 0, 0}}},
      {"RST out of window -> dropped", R, kPeerIss + 1 + 100000, 0, St::kSynReceived, {}},
      {"SYN at another sequence number -> challenge ACK", S, kPeerIss + 50, 0, St::kSynReceived,
       {{A, 0, 0}}},
  };
  for (const SynRcvdRow& r : rows) {
    make();
    rec_ = Recorder{};
    ASSERT_EQ(st().listen(kUs, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
    ASSERT_EQ(seg(S, kPeerIss, 0).size(), 1u);
    auto out = seg(r.flags, r.seq, r.ack);
    EXPECT_EQ(state(), r.want) << r.name;
    expect_out(out, r.out, kIss + 1, kPeerIss + 1, r.name);
    ep_.reset();
  }
}

TEST_F(TcpStateMachine, syn_ack_is_retransmitted_with_backoff_then_the_half_open_connection_dies) {
  cfg_.max_syn_retries = 2;
  make();
  ASSERT_EQ(st().listen(kUs, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
  ASSERT_EQ(seg(S, kPeerIss, 0).size(), 1u);
  EXPECT_TRUE(advance(999).empty());
  auto out = advance(1);  // RFC 6298 §2.1: 1 s
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, S | A);
  EXPECT_TRUE(advance(1999).empty());
  EXPECT_EQ(advance(1).size(), 1u);  // doubled (§5.5)
  EXPECT_TRUE(advance(4000).empty());
  EXPECT_EQ(state(), dp::tcp::TcpState::kClosed);
  EXPECT_EQ(st().counters()[kTimeouts], 1u);
}

// ---- SYN-SENT (active open) -------------------------------------------------------------------

struct SynSentRow {
  const char* name;
  uint8_t flags;
  uint32_t ack;
  dp::tcp::TcpState want;
  std::vector<Expect> out;  // seq relative to ISS + 1 for ACKs; RST rows check seq = SEG.ACK
  bool reset_event;
};

TEST_F(TcpStateMachine, syn_sent_table) {
  using St = dp::tcp::TcpState;
  const SynSentRow rows[] = {
      {"SYN,ACK acking our SYN -> ESTABLISHED + ACK", S | A, kIss + 1, St::kEstablished,
       {{A, 0, 0}}, false},
      {"SYN,ACK acking something else -> RST <SEQ=SEG.ACK>", S | A, kIss + 5, St::kSynSent,
       {{R, 4, 0}}, false},
      {"ACK acking nothing sent -> RST", A, kIss - 100, St::kSynSent, {{R, -101, 0}}, false},
      {"RST,ACK acking our SYN -> refused", R | A, kIss + 1, St::kClosed, {}, true},
      {"RST,ACK with a bad ACK -> ignored", R | A, kIss + 9, St::kSynSent, {}, false},
      {"RST without ACK -> ignored", R, 0, St::kSynSent, {}, false},
      {"SYN -> simultaneous open: SYN-RECEIVED + SYN,ACK", S, 0, St::kSynReceived,
       {{S | A, -1, 0}}, false},
      {"bare ACK acking our SYN (no SYN) -> dropped", A, kIss + 1, St::kSynSent, {}, false},
  };
  for (const SynSentRow& r : rows) {
    make();
    Recorder rec;
    const TcpConnId c = active_open(&rec);
    auto out = seg(r.flags, kPeerIss, r.ack);
    EXPECT_EQ(st().state_of(TcpTuple{kUs, kPeer, local_port_, kPeerPort}), r.want) << r.name;
    if (r.want != St::kClosed) {
      EXPECT_EQ(st().state(c), r.want) << r.name;
    }
    expect_out(out, r.out, kIss + 1, kPeerIss + 1, r.name);
    EXPECT_EQ(rec.saw(TcpEvent::kReset), r.reset_event) << r.name;
    EXPECT_EQ(rec.saw(TcpEvent::kConnected), r.want == St::kEstablished) << r.name;
    if (r.want == St::kEstablished) {
      // No timestamps on the SYN-ACK: the handshake itself was timed (RFC 6298 §2), ~0 here,
      // so RTO sits at its floor.
      TcpConnInfo ci;
      ASSERT_TRUE(st().info(c, &ci));
      EXPECT_FALSE(ci.ts);
      EXPECT_EQ(ci.rto_us, 200'000u) << r.name;
    }
    st().close(c);
    ep_.reset();
  }
}

// A Linux backend whose SYN queue is full answers with a SYN cookie; when its accept queue is
// full too, it drops our third ACK (and the data at ISS + 1 with it) and keeps no state, and a
// later segment whose sequence number is not ISS + 1 fails the cookie check and draws a RST
// <SEQ=SEG.ACK>, exactly at our RCV.NXT: an established connection reset by a busy backend.
// So an active open sends only the segment at ISS + 1 (retransmitted as usual) until the peer
// shows it holds the connection (any acceptable segment after its SYN-ACK).
TEST_F(TcpStateMachine, an_active_open_sends_only_its_first_segment_until_the_peer_holds_it) {
  for (const bool with_fin : {false, true}) {
    make();
    Recorder rec;
    const TcpConnId c = active_open(&rec);
    auto out = seg(S | A, kPeerIss, kIss + 1, 0, 65535, syn_options(SynOpts{}));
    ASSERT_EQ(out.size(), 1u);  // the third ACK
    EXPECT_EQ(out[0].flags, A);
    EXPECT_EQ(out[0].seq, kIss + 1);
    out = send_bytes(c, 5000);
    if (with_fin) {
      ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
      auto more = ep_->take();
      out.insert(out.end(), more.begin(), more.end());
    }
    ASSERT_EQ(out.size(), 1u) << "with_fin " << with_fin;
    EXPECT_EQ(out[0].seq, kIss + 1);
    EXPECT_EQ(out[0].payload.size(), 1460u);
    EXPECT_FALSE(out[0].has(F));
    // An ACK that acknowledges nothing new (SEG.ACK = ISS + 1) comes from a socket too.
    if (with_fin) {
      out = seg(A, kPeerIss + 1, kIss + 1);
      ASSERT_EQ(out.size(), 3u);
      EXPECT_EQ(out[0].seq, kIss + 1 + 1460);
      EXPECT_TRUE(out[2].has(F));
      EXPECT_EQ(out[2].seq + out[2].payload.size(), kIss + 1 + 5000);
      st().abort(c);
      ep_.reset();
      continue;
    }
    // The backend accepted it: its ACK opens the window, the rest goes out.
    out = seg(A, kPeerIss + 1, kIss + 1 + 1460);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].seq, kIss + 1 + 1460);
    EXPECT_EQ(out[2].seq + out[2].payload.size(), kIss + 1 + 5000);
    EXPECT_FALSE(out[2].has(F));
    EXPECT_FALSE(rec.saw(TcpEvent::kReset));
    st().abort(c);
    ep_.reset();
  }
}

// A short first flight that fits one segment goes out at once, its FIN with it.
TEST_F(TcpStateMachine, an_active_opens_first_segment_carries_its_fin_when_everything_fits) {
  make();
  Recorder rec;
  const TcpConnId c = active_open(&rec);
  auto out = seg(S | A, kPeerIss, kIss + 1, 0, 65535, syn_options(SynOpts{}));
  ASSERT_EQ(out.size(), 1u);
  out = send_bytes(c, 100);
  ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
  auto more = ep_->take();
  out.insert(out.end(), more.begin(), more.end());
  // The first segment went out before the FIN was asked for: the FIN (seq ISS + 101) waits.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].payload.size(), 100u);
  // Nothing answers: the RTO and its backoff resend that segment, now with its FIN (still at
  // ISS + 1), and nothing beyond it.
  uint32_t resent = 0;
  for (uint32_t k = 0; k < 10; ++k) {
    for (const Out& o : advance(1000)) {
      EXPECT_EQ(o.seq, kIss + 1);
      EXPECT_TRUE(o.has(F));
      EXPECT_EQ(o.payload.size(), 100u);
      ++resent;
    }
  }
  EXPECT_GE(resent, 4u);
  // The first ACK from the peer's socket: it holds the connection.
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1 + 101).empty());
  EXPECT_EQ(st().state(c), dp::tcp::TcpState::kFinWait2);
  st().abort(c);
}

TEST_F(TcpStateMachine, simultaneous_open_syn_then_syn_ack_establishes) {
  make();
  Recorder rec;
  const TcpConnId c = active_open(&rec);
  auto send = [&](uint8_t flags, uint32_t seq, uint32_t ack) { return seg(flags, seq, ack); };
  // RFC 9293 Figure 7: the SYNs cross.
  auto out = send(S, kPeerIss, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, S | A);
  EXPECT_EQ(out[0].seq, kIss);
  EXPECT_EQ(out[0].ack, kPeerIss + 1);
  EXPECT_EQ(st().state(c), dp::tcp::TcpState::kSynReceived);
  out = send(S | A, kPeerIss, kIss + 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, A);
  EXPECT_EQ(out[0].seq, kIss + 1);
  EXPECT_EQ(out[0].ack, kPeerIss + 1);
  EXPECT_EQ(st().state(c), dp::tcp::TcpState::kEstablished);
  EXPECT_TRUE(rec.saw(TcpEvent::kConnected));
  st().abort(c);
}

TEST_F(TcpStateMachine, an_active_open_closed_during_simultaneous_open_finishes_without_events) {
  make();
  Recorder rec;
  const TcpConnId c = active_open(&rec);
  ASSERT_EQ(seg(S, kPeerIss, 0).size(), 1u);  // SYN-RECEIVED, our SYN-ACK
  st().close(c);                               // released before the handshake completes
  EXPECT_EQ(st().state(c), dp::tcp::TcpState::kClosed);  // the handle is stale
  const auto out = seg(S | A, kPeerIss, kIss + 1);
  // Established, then straight to FIN-WAIT-1: the FIN goes with the ACK.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, F | A);
  EXPECT_EQ(st().state_of(TcpTuple{kUs, kPeer, local_port_, kPeerPort}),
            dp::tcp::TcpState::kFinWait1);
  EXPECT_TRUE(rec.events.empty());
}

// ---- ESTABLISHED ------------------------------------------------------------------------------

struct EstRow {
  const char* name;
  uint8_t flags;
  int32_t seq_off;  // from RCV.NXT
  int32_t ack_off;  // from SND.NXT
  uint32_t len;
  dp::tcp::TcpState want;
  std::vector<Expect> out;
  std::optional<TcpEvent> event;
};

TEST_F(TcpStateMachine, established_table) {
  using St = dp::tcp::TcpState;
  // Our advertised window is 65535 (no window scaling negotiated).
  const EstRow rows[] = {
      {"RST at RCV.NXT resets", R, 0, 0, 0, St::kClosed, {}, TcpEvent::kReset},
      {"RST,ACK at RCV.NXT resets", R | A, 0, 0, 0, St::kClosed, {}, TcpEvent::kReset},
      {"RST in window, not at RCV.NXT -> challenge ACK", R, 100, 0, 0, St::kEstablished,
       {{A, 0, 0}}, std::nullopt},
      {"RST left of the window -> dropped", R, -10, 0, 0, St::kEstablished, {}, std::nullopt},
      {"RST right of the window -> dropped", R, 70000, 0, 0, St::kEstablished, {}, std::nullopt},
      {"SYN in window -> challenge ACK", S, 0, 0, 0, St::kEstablished, {{A, 0, 0}}, std::nullopt},
      {"SYN,ACK in window -> challenge ACK", S | A, 5, 0, 0, St::kEstablished, {{A, 0, 0}},
       std::nullopt},
      {"SYN out of window -> ACK", S, -5000, 0, 0, St::kEstablished, {{A, 0, 0}}, std::nullopt},
      {"data beyond the window -> ACK, dropped", A, 70000, 0, 100, St::kEstablished, {{A, 0, 0}},
       std::nullopt},
      {"old duplicate data -> ACK", A, -200, 0, 100, St::kEstablished, {{A, 0, 0}}, std::nullopt},
      {"ACK of data not sent -> ACK, dropped", A, 0, 5000, 0, St::kEstablished, {{A, 0, 0}},
       std::nullopt},
      {"ACK far below SND.UNA -> challenge ACK", A, 0, -200000, 0, St::kEstablished, {{A, 0, 0}},
       std::nullopt},
      {"in-order data -> delayed ACK (nothing yet)", A | P, 0, 0, 100, St::kEstablished, {},
       TcpEvent::kReadable},
      {"out-of-order data -> immediate duplicate ACK", A, 1000, 0, 100, St::kEstablished,
       {{A, 0, 0}}, std::nullopt},
      {"segment without ACK -> dropped", P, 0, 0, 10, St::kEstablished, {}, std::nullopt},
      {"FIN -> CLOSE-WAIT + ACK of the FIN", F | A, 0, 0, 0, St::kCloseWait, {{A, 0, 1}},
       TcpEvent::kPeerFin},
      {"data + FIN -> CLOSE-WAIT, both acknowledged", F | A, 0, 0, 50, St::kCloseWait,
       {{A, 0, 51}}, TcpEvent::kPeerFin},
      {"FIN beyond a hole -> ACK, stays ESTABLISHED", F | A, 100, 0, 0, St::kEstablished,
       {{A, 0, 0}}, std::nullopt},
  };
  for (const EstRow& r : rows) {
    make();
    rec_ = Recorder{};
    const TcpConnId c = establish_passive();
    rec_.events.clear();
    const uint32_t snd_nxt = kIss + 1;
    const uint32_t rcv_nxt = kPeerIss + 1;
    auto out = seg(r.flags, rcv_nxt + uint32_t(r.seq_off), snd_nxt + uint32_t(r.ack_off), r.len);
    EXPECT_EQ(state(), r.want) << r.name;
    expect_out(out, r.out, snd_nxt, rcv_nxt, r.name);
    if (r.event) {
      EXPECT_TRUE(rec_.saw(*r.event)) << r.name;
    } else {
      EXPECT_TRUE(rec_.events.empty()) << r.name;
    }
    st().abort(c);
    ep_.reset();
  }
}

TEST_F(TcpStateMachine, challenge_acks_are_limited_per_connection_not_globally) {
  make();
  const TcpConnId c1 = establish_passive();
  // A second connection from another peer port.
  ASSERT_EQ(seg(S, kPeerIss, 0, 0, 65535, {}, kPeerPort + 1).size(), 1u);
  ASSERT_TRUE(seg(A, kPeerIss + 1, kIss + 1, 0, 65535, {}, kPeerPort + 1).empty());
  const TcpConnId c2 = rec_.conn;
  uint32_t acks = 0;
  for (int i = 0; i < 25; ++i) acks += uint32_t(seg(R, kPeerIss + 1 + 100, 0).size());
  EXPECT_EQ(acks, cfg_.challenge_acks_per_sec);
  EXPECT_EQ(st().counters()[kChallengeAcksLimited], 25u - cfg_.challenge_acks_per_sec);
  // The other connection is not affected by the first one's limit.
  EXPECT_EQ(seg(R, kPeerIss + 1 + 100, 0, 0, 65535, {}, kPeerPort + 1).size(), 1u);
  // A second later the first one answers again.
  advance(1000);
  EXPECT_EQ(seg(R, kPeerIss + 1 + 100, 0).size(), 1u);
  EXPECT_EQ(state(), dp::tcp::TcpState::kEstablished);
  st().abort(c1);
  st().abort(c2);
}

TEST_F(TcpStateMachine, paws_drops_a_segment_with_an_old_timestamp) {
  make();
  const TcpConnId c = establish_passive({.ts = true});
  auto out = seg(A, kPeerIss + 1, kIss + 1, 100, 65535, ts_option(5000, 1));
  EXPECT_EQ(st().counters()[kBytesIn], 100u);
  // TSval 4000 < TS.Recent 5000: an old duplicate, even though its sequence number is fine.
  out = seg(A, kPeerIss + 101, kIss + 1, 100, 65535, ts_option(4000, 1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, A);
  EXPECT_EQ(out[0].ack, kPeerIss + 101);
  EXPECT_EQ(out[0].opt.tsecr, 5000u);
  EXPECT_EQ(st().counters()[kPawsRejected], 1u);
  EXPECT_EQ(st().counters()[kBytesIn], 100u);
  st().abort(c);
}

TEST_F(TcpStateMachine, delayed_ack_waits_40_ms_but_two_full_segments_are_acked_at_once) {
  make();
  const TcpConnId c = establish_passive();
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1, 100).empty());
  EXPECT_TRUE(advance(39).empty());
  auto out = advance(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ack, kPeerIss + 101);
  EXPECT_EQ(st().counters()[kDelayedAcks], 1u);
  EXPECT_TRUE(seg(A, kPeerIss + 101, kIss + 1, 1460).empty());
  out = seg(A, kPeerIss + 1561, kIss + 1, 1460);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ack, kPeerIss + 1 + 100 + 2920);
  uint8_t buf[4000];
  EXPECT_EQ(st().recv(c, buf, sizeof buf), 3020u);
  EXPECT_EQ(buf[0], uint8_t(kPeerIss + 1));  // the payload bytes are seq-numbered
  st().abort(c);
}

TEST_F(TcpStateMachine, out_of_order_data_is_sacked_and_filling_the_hole_acks_everything) {
  make();
  const TcpConnId c = establish_passive({.sack = true});
  const uint32_t r0 = kPeerIss + 1;
  auto out = seg(A, r0 + 1000, kIss + 1, 500);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ack, r0);
  ASSERT_EQ(out[0].opt.nsack, 1);
  EXPECT_EQ(out[0].opt.sack[0].start, r0 + 1000);
  EXPECT_EQ(out[0].opt.sack[0].end, r0 + 1500);
  out = seg(A, r0 + 2000, kIss + 1, 500);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].opt.nsack, 2);
  EXPECT_EQ(out[0].opt.sack[0].start, r0 + 2000);  // RFC 2018 §4: the newest block first
  out = seg(A, r0, kIss + 1, 1000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ack, r0 + 1500);
  ASSERT_EQ(out[0].opt.nsack, 1);
  // A duplicate is reported with a D-SACK block (RFC 2883).
  out = seg(A, r0 + 100, kIss + 1, 200);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_GE(out[0].opt.nsack, 1);
  EXPECT_EQ(out[0].opt.sack[0].start, r0 + 100);
  EXPECT_EQ(out[0].opt.sack[0].end, r0 + 300);
  uint32_t len = 0;
  rte_mbuf* m = st().recv_chain(c, &len);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(len, 1500u);
  EXPECT_EQ(rte_pktmbuf_pkt_len(m), 1500u);
  rte_pktmbuf_free(m);
  st().abort(c);
}

// RFC 9293 §3.7.1 / RFC 6691: options count against the MSS. Data segments sent while our
// receive side has holes (both directions sending, as HBONE's echo streams do) carry only the
// SACK blocks that still fit: a full-MSS segment plus 28 bytes of SACK was dropped by the
// worker as mtu_exceeded. Pure ACKs carry every block.
TEST_F(TcpStateMachine, data_segments_carrying_sack_blocks_still_fit_the_mss) {
  make();
  const TcpConnId c = establish_passive({.ts = true, .sack = true, .mss = 1460});
  const uint32_t r0 = kPeerIss + 1;
  // Three holes on our receive side: our segments carry three SACK blocks.
  for (uint32_t k = 1; k <= 3; ++k) {
    seg(A, r0 + 1000 * k, kIss + 1, 100, 65535, ts_option(1002 + k, 0));
  }
  const auto out = send_bytes(c, 6000);
  size_t full = 0, partial = 0, sent = 0;
  for (const Out& o : out) {
    if (o.payload.empty()) continue;
    sent += o.payload.size();
    const size_t opt_bytes = (o.opt.has_ts ? 12 : 0) + (o.opt.nsack ? 4 + 8 * o.opt.nsack : 0);
    EXPECT_LE(o.payload.size() + opt_bytes, 1460u) << "segment at " << o.seq;
    if (o.payload.size() == 1448) {
      ++full;
      EXPECT_EQ(o.opt.nsack, 0);  // the payload keeps the full MSS
    } else {
      ++partial;  // the tail (6000 - 4 * 1448 = 208 bytes): room for all three blocks
      EXPECT_EQ(o.opt.nsack, 3);
    }
  }
  EXPECT_EQ(full, 4u);
  EXPECT_EQ(partial, 1u);
  EXPECT_EQ(sent, 6000u);
  // A pure ACK still reports every hole.
  const auto ack = seg(A, r0 + 5000, kIss + 1, 100, 65535, ts_option(1010, 0));
  ASSERT_EQ(ack.size(), 1u);
  EXPECT_TRUE(ack[0].payload.empty());
  EXPECT_EQ(ack[0].opt.nsack, 3);
  st().abort(c);
}

// When the worker budget (not the connection's buffer) limited the window a connection
// offered, memory freed elsewhere must reach its peer as a window update: it may have nothing
// to send but a zero-window probe at a long backoff (an HBONE upstream stalled 30 s so).
TEST_F(TcpStateMachine, memory_freed_by_another_connection_reopens_a_budget_limited_window) {
  cfg_.worker_mem_bytes = 64 * 1024;
  make();
  const TcpConnId c1 = establish_passive();
  const uint16_t p2 = kPeerPort + 1;
  ASSERT_EQ(seg(S, kPeerIss, 0, 0, 65535, {}, p2).size(), 1u);
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1, 0, 65535, {}, p2).empty());
  const TcpConnId c2 = rec_.conn;
  ASSERT_NE(c1, c2);
  const uint32_t r0 = kPeerIss + 1;
  for (uint32_t k = 0; k < 60; ++k) seg(A, r0 + 1000 * k, kIss + 1, 1000);  // 60 KB unread on c1
  // c2 gets 50 KB and its application reads them at once: its own buffer is empty, but the
  // budget (c1's bytes) keeps its right edge where it was.
  std::vector<uint8_t> buf(60000);
  uint16_t limited = 0;
  for (uint32_t k = 0; k < 50; ++k) {
    for (const Out& o : seg(A, r0 + 1000 * k, kIss + 1, 1000, 65535, {}, p2)) {
      if (o.dport == p2) limited = o.win;
    }
    st().recv(c2, buf.data(), uint32_t(buf.size()));
  }
  for (const Out& o : advance(50)) {
    if (o.dport == p2) limited = o.win;
  }
  ASSERT_GT(limited, 0);
  EXPECT_LE(limited, 65535 - 50000 + 1000) << "the budget, not c2's buffer, limits its window";
  EXPECT_EQ(st().recv(c1, buf.data(), uint32_t(buf.size())), 60000u);
  ep_->take();  // c1's own window update
  bool updated = false;
  for (const Out& o : advance(1)) updated |= o.dport == p2 && o.flags == A && o.win >= 65535 - 4096;
  EXPECT_TRUE(updated) << "no window update on c2 after the budget freed";
  st().abort(c1);
  st().abort(c2);
}

// A peer that shrank its window (Linux rounds it to its window scale) drops what we sent beyond
// the new right edge, and Linux accepts a segment only when SEG.SEQ <= RCV.NXT + RCV.WND
// (tcp_sequence): an ACK from SND.NXT past that edge is dropped unread, ACK field included. With
// its window at zero (its application blocked writing to us) it would never learn that we
// received its data: both sides wait forever. So an ACK carries SEQ = min(SND.NXT, SND.UNA +
// SND.WND), as Linux's tcp_acceptable_seq().
TEST_F(TcpStateMachine, an_ack_stays_inside_a_window_the_peer_shrank_so_the_peer_reads_it) {
  make();
  const TcpConnId c = establish_passive();
  auto out = send_bytes(c, 3000);
  ASSERT_EQ(out.size(), 3u);
  // The peer takes 1460 bytes and closes its window: its right edge moved back to ISS + 1461.
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1 + 1460, 0, 0).empty());
  // Its data still comes (it sends while it cannot read): our ACKs must be acceptable to it.
  out = seg(A | P, kPeerIss + 1, kIss + 1 + 1460, 100, 0);
  for (uint32_t k = 0; k < 20 && out.empty(); ++k) out = advance(10);  // a delayed ACK
  ASSERT_FALSE(out.empty());
  for (const Out& o : out) {
    EXPECT_EQ(o.ack, kPeerIss + 101);
    if (o.payload.empty()) {
      EXPECT_EQ(o.seq, kIss + 1 + 1460) << "an ACK beyond the peer's window";
    }
  }
  // The timers (persist, RTO) keep probing with segments at SND.UNA; ACKs stay acceptable.
  for (uint32_t k = 0; k < 5; ++k) {
    for (const Out& o : advance(1000)) {
      if (o.payload.empty()) {
        EXPECT_LE(o.seq - (kIss + 1), 1460u);
      }
    }
  }
  st().abort(c);
}

// RFC 9293 §3.8.6.1 / what Linux does (tcp_retransmit_skb): a retransmission fits the peer's
// current window; a peer that shrank it (memory pressure) drops a full segment every time.
TEST_F(TcpStateMachine, a_retransmission_fits_a_window_the_peer_shrank) {
  make();
  const TcpConnId c = establish_passive();
  const auto first = send_bytes(c, 4000);
  ASSERT_GE(first.size(), 2u);
  EXPECT_EQ(first[0].payload.size(), 1460u);
  // The first segment is acknowledged, and the window shrinks to 1000 bytes past it.
  seg(A, kPeerIss + 1, kIss + 1 + 1460, 0, 1000);
  const auto rtx = advance(1100);
  ASSERT_FALSE(rtx.empty());
  EXPECT_EQ(rtx[0].seq, kIss + 1 + 1460);
  EXPECT_LE(rtx[0].payload.size(), 1000u);
  EXPECT_GT(rtx[0].payload.size(), 0u);
  st().abort(c);
}

// ---- Closing ----------------------------------------------------------------------------------

struct CloseStep {
  uint8_t flags;
  int32_t seq_off;  // from the peer's RCV.NXT-side sequence (kPeerIss + 1)
  int32_t ack_off;  // from our ISS + 1
  dp::tcp::TcpState want;
  std::vector<Expect> out;  // seq from ISS + 1, ack from kPeerIss + 1
};

struct CloseRow {
  const char* name;
  bool we_close_first;  // shutdown_write() before the steps
  std::vector<CloseStep> steps;
};

TEST_F(TcpStateMachine, closing_table) {
  using St = dp::tcp::TcpState;
  const CloseRow rows[] = {
      {"active close: FIN-WAIT-1, FIN-WAIT-2, TIME-WAIT",
       true,
       {{A, 0, 1, St::kFinWait2, {}}, {F | A, 0, 1, St::kTimeWait, {{A, 1, 1}}}}},
      {"FIN,ACK acking our FIN: FIN-WAIT-1 straight to TIME-WAIT",
       true,
       {{F | A, 0, 1, St::kTimeWait, {{A, 1, 1}}}}},
      {"simultaneous close: FIN-WAIT-1, CLOSING, TIME-WAIT",
       true,
       {{F | A, 0, 0, St::kClosing, {{A, 1, 1}}}, {A, 1, 1, St::kTimeWait, {}}}},
      {"passive close: CLOSE-WAIT, then our FIN in LAST-ACK, then CLOSED",
       false,
       {{F | A, 0, 0, St::kCloseWait, {{A, 0, 1}}}}},
      {"TIME-WAIT: a RST is ignored (RFC 1337), a retransmitted FIN is acked",
       true,
       {{F | A, 0, 1, St::kTimeWait, {{A, 1, 1}}},
        {R, 1, 0, St::kTimeWait, {}},
        {F | A, 0, 1, St::kTimeWait, {{A, 1, 1}}}}},
  };
  for (const CloseRow& r : rows) {
    make();
    rec_ = Recorder{};
    const TcpConnId c = establish_passive();
    if (r.we_close_first) {
      ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
      auto fin = ep_->take();
      ASSERT_EQ(fin.size(), 1u) << r.name;
      EXPECT_EQ(fin[0].flags, F | A) << r.name;
      EXPECT_EQ(fin[0].seq, kIss + 1) << r.name;
      EXPECT_EQ(st().state(c), St::kFinWait1) << r.name;
    }
    for (const CloseStep& s : r.steps) {
      auto out = seg(s.flags, kPeerIss + 1 + uint32_t(s.seq_off), kIss + 1 + uint32_t(s.ack_off));
      EXPECT_EQ(state(), s.want) << r.name;
      expect_out(out, s.out, kIss + 1, kPeerIss + 1, r.name);
    }
    if (!r.we_close_first) {
      ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
      auto fin = ep_->take();
      ASSERT_EQ(fin.size(), 1u);
      EXPECT_EQ(fin[0].flags, F | A);
      EXPECT_EQ(st().state(c), St::kLastAck);
      EXPECT_TRUE(seg(A, kPeerIss + 2, kIss + 2).empty());
      EXPECT_EQ(state(), St::kClosed);
      EXPECT_TRUE(rec_.saw(TcpEvent::kClosed));
    }
    st().close(c);
    ep_.reset();
  }
}

TEST_F(TcpStateMachine, time_wait_lasts_its_time_then_the_tuple_is_free) {
  make();
  const TcpConnId c = establish_passive();
  ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
  ep_->take();
  seg(F | A, kPeerIss + 1, kIss + 2);
  ASSERT_EQ(state(), dp::tcp::TcpState::kTimeWait);
  EXPECT_TRUE(rec_.saw(TcpEvent::kClosed));
  st().close(c);
  EXPECT_EQ(st().connections(), 1u);
  advance(cfg_.time_wait_ms - 1);
  EXPECT_EQ(state(), dp::tcp::TcpState::kTimeWait);
  advance(1);
  EXPECT_EQ(state(), dp::tcp::TcpState::kClosed);
  EXPECT_EQ(st().connections(), 0u);
}

TEST_F(TcpStateMachine, time_wait_is_reused_only_by_a_syn_beyond_the_old_connection) {
  for (const bool newer : {true, false}) {
    make();
    rec_ = Recorder{};
    const TcpConnId c = establish_passive();
    ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
    ep_->take();
    seg(F | A, kPeerIss + 1, kIss + 2);
    st().close(c);
    ASSERT_EQ(state(), dp::tcp::TcpState::kTimeWait);
    // RFC 9293 §3.6.1 / RFC 6191 without timestamps: SEG.SEQ above the old RCV.NXT.
    const uint32_t seq = newer ? kPeerIss + 100000 : kPeerIss - 5;
    auto out = seg(S, seq, 0);
    ASSERT_EQ(out.size(), 1u);
    if (newer) {
      EXPECT_EQ(out[0].flags, S | A);
      EXPECT_EQ(out[0].ack, seq + 1);
      EXPECT_EQ(state(), dp::tcp::TcpState::kSynReceived);
      EXPECT_EQ(st().counters()[kTimeWaitReused], 1u);
    } else {
      EXPECT_EQ(out[0].flags, A);  // RFC 5961 §4: the old connection's ACK
      EXPECT_EQ(state(), dp::tcp::TcpState::kTimeWait);
      EXPECT_EQ(st().counters()[kTimeWaitReused], 0u);
    }
    ep_.reset();
  }
}

TEST_F(TcpStateMachine, with_timestamps_time_wait_reuse_follows_the_timestamp_not_the_sequence) {
  // RFC 6191 §2: a SYN whose TSval is above TS.Recent may reuse the tuple even with a lower
  // sequence number; one with an older TSval may not, even with a higher one.
  for (const bool newer_ts : {true, false}) {
    make();
    rec_ = Recorder{};
    const TcpConnId c = establish_passive({.ts = true});
    ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
    const uint32_t our_ts = ep_->take().at(0).opt.tsval;
    seg(F | A, kPeerIss + 1, kIss + 2, 0, 65535, ts_option(2000, our_ts));
    st().close(c);
    ASSERT_EQ(state(), dp::tcp::TcpState::kTimeWait);
    const uint32_t seq = newer_ts ? kPeerIss - 5000 : kPeerIss + 100000;
    const uint32_t tsval = newer_ts ? 2001 : 1999;
    auto out = seg(S, seq, 0, 0, 65535, syn_options({.ts = true}, tsval));
    ASSERT_EQ(out.size(), 1u);
    if (newer_ts) {
      EXPECT_EQ(out[0].flags, S | A);
      EXPECT_EQ(state(), dp::tcp::TcpState::kSynReceived);
    } else {
      EXPECT_EQ(out[0].flags, A);
      EXPECT_EQ(state(), dp::tcp::TcpState::kTimeWait);
    }
    ep_.reset();
  }
}

TEST_F(TcpStateMachine, an_orphaned_fin_wait_2_times_out) {
  cfg_.fin_wait2_ms = 5000;
  make();
  const TcpConnId c = establish_passive();
  st().close(c);  // FIN; the handle is released at once
  ASSERT_EQ(ep_->take().size(), 1u);
  seg(A, kPeerIss + 1, kIss + 2);  // our FIN acknowledged; the peer never sends its own
  EXPECT_EQ(state(), dp::tcp::TcpState::kFinWait2);
  advance(4999);
  EXPECT_EQ(state(), dp::tcp::TcpState::kFinWait2);
  advance(1);
  EXPECT_EQ(state(), dp::tcp::TcpState::kClosed);
  EXPECT_EQ(st().connections(), 0u);
}

TEST_F(TcpStateMachine, connect_picks_a_port_the_predicate_accepts_and_reports_exhaustion) {
  cfg_.ephemeral_lo = 40000;
  cfg_.ephemeral_hi = 40009;
  make();
  // The worker's predicate will be "the reply hashes to my RSS queue"; here: odd ports only.
  auto odd = [](void*, const TcpTuple& t) { return (t.local_port & 1) == 1; };
  Recorder rec;
  std::vector<TcpConnId> conns;
  for (int i = 0; i < 5; ++i) {
    TcpConnId c;
    ASSERT_EQ(st().connect(kUs, kPeer, kPeerPort, odd, nullptr, Recorder::on_event, &rec, &c),
              TcpError::kOk);
    TcpConnInfo ci;
    ASSERT_TRUE(st().info(c, &ci));
    EXPECT_EQ(ci.tuple.local_port & 1, 1);
    EXPECT_GE(ci.tuple.local_port, 40000);
    EXPECT_LE(ci.tuple.local_port, 40009);
    conns.push_back(c);
  }
  TcpConnId c;
  EXPECT_EQ(st().connect(kUs, kPeer, kPeerPort, odd, nullptr, Recorder::on_event, &rec, &c),
            TcpError::kNoPort);
  // The same ports toward another remote port are other tuples: free.
  EXPECT_EQ(st().connect(kUs, kPeer, kPeerPort + 1, odd, nullptr, Recorder::on_event, &rec, &c),
            TcpError::kOk);
  conns.push_back(c);
  ep_->drop_output();
  for (TcpConnId k : conns) st().abort(k);
}

TEST_F(TcpStateMachine, the_connection_table_is_bounded) {
  cfg_.max_connections = 2;
  cfg_.syncookies = false;
  make();
  ASSERT_EQ(st().listen(kUs, kLocalPort, Recorder::accept, &rec_), TcpError::kOk);
  EXPECT_EQ(seg(S, kPeerIss, 0, 0, 65535, {}, 1001).size(), 1u);
  EXPECT_EQ(seg(S, kPeerIss, 0, 0, 65535, {}, 1002).size(), 1u);
  // Full: the third SYN gets nothing (the client retries), and connect() says so.
  EXPECT_TRUE(seg(S, kPeerIss, 0, 0, 65535, {}, 1003).empty());
  EXPECT_EQ(st().connections(), 2u);
  EXPECT_GE(st().counters()[kDropTableFull], 1u);
  Recorder rec;
  TcpConnId c;
  EXPECT_EQ(st().connect(kUs, kPeer, kPeerPort, nullptr, nullptr, Recorder::on_event, &rec, &c),
            TcpError::kTableFull);
}

TEST_F(TcpStateMachine, a_full_table_recycles_the_oldest_time_wait_connection) {
  cfg_.max_connections = 2;
  cfg_.syncookies = false;
  make();
  // The first connection ends in TIME-WAIT (we closed first) and is released.
  const TcpConnId c = establish_passive();
  ASSERT_EQ(st().shutdown_write(c), TcpError::kOk);
  ep_->take();
  seg(F | A, kPeerIss + 1, kIss + 2);
  ASSERT_EQ(state(), dp::tcp::TcpState::kTimeWait);
  st().close(c);
  // The second slot: a half-open connection, which is not recycled.
  EXPECT_EQ(seg(S, kPeerIss, 0, 0, 65535, {}, 1002).size(), 1u);
  ASSERT_EQ(st().connections(), 2u);
  // Full: the next SYN takes the TIME-WAIT connection's place, well before time_wait_ms.
  const auto out = seg(S, kPeerIss, 0, 0, 65535, {}, 1003);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags, S | A);
  EXPECT_EQ(st().counters()[kTimeWaitRecycled], 1u);
  EXPECT_EQ(state(), dp::tcp::TcpState::kClosed) << "the old tuple is free";
  EXPECT_EQ(st().connections(), 2u);
  // No TIME-WAIT left: a full table refuses as before.
  EXPECT_TRUE(seg(S, kPeerIss, 0, 0, 65535, {}, 1004).empty());
  EXPECT_GE(st().counters()[kDropTableFull], 1u);
  EXPECT_EQ(st().counters()[kTimeWaitRecycled], 1u);
}

TEST_F(TcpStateMachine, close_with_unread_data_resets_the_connection) {
  make();
  const TcpConnId c = establish_passive();
  seg(A, kPeerIss + 1, kIss + 1, 10);
  ep_->take();
  st().close(c);
  auto out = ep_->take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].has(R));
  EXPECT_EQ(st().connections(), 0u);
  EXPECT_EQ(st().state(c), dp::tcp::TcpState::kClosed);  // the handle is stale
  EXPECT_EQ(st().send(c, "x", 1), 0u);
}

// ---- Sending: RTO, fast retransmit, SACK recovery, persist, keepalive ---------------------------

TEST_F(TcpStateMachine, rto_retransmits_the_first_segment_with_exponential_backoff) {
  make();
  const TcpConnId c = establish_passive();
  auto out = send_bytes(c, 3000);
  ASSERT_EQ(out.size(), 3u);  // 1460 + 1460 + 80
  EXPECT_EQ(out[0].seq, kIss + 1);
  EXPECT_EQ(out[2].payload.size(), 80u);
  TcpConnInfo ci;
  ASSERT_TRUE(st().info(c, &ci));
  // The handshake gave an RTT sample of ~0: RTO is at its 200 ms floor.
  EXPECT_EQ(ci.rto_us, 200'000u);
  EXPECT_TRUE(advance(199).empty());
  out = advance(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq, kIss + 1);
  EXPECT_EQ(out[0].payload.size(), 1460u);
  EXPECT_TRUE(advance(399).empty());
  EXPECT_EQ(advance(1).size(), 1u);  // 400 ms: doubled
  EXPECT_EQ(st().counters()[kRtoFired], 2u);
  ASSERT_TRUE(st().info(c, &ci));
  EXPECT_EQ(ci.cwnd, ci.mss);  // RFC 5681 §3.1: LW = 1 SMSS
  // The ACK of everything stops the timer.
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1 + 3000).empty());
  EXPECT_TRUE(advance(5000).empty());
  st().abort(c);
}

TEST_F(TcpStateMachine, a_timeout_the_timestamps_prove_spurious_is_undone) {
  for (const bool spurious : {true, false}) {
    make();
    rec_ = Recorder{};
    const TcpConnId c = establish_passive({.ts = true});
    TcpConnInfo before;
    ASSERT_TRUE(st().info(c, &before));
    const uint32_t mss = before.mss;  // 1448: 1460 less the timestamp option
    const auto out = send_bytes(c, 5 * mss);
    ASSERT_EQ(out.size(), 5u);
    const uint32_t original_ts = out[0].opt.tsval;
    ASSERT_TRUE(st().info(c, &before));
    const auto rexmit = advance(200);
    ASSERT_EQ(rexmit.size(), 1u);
    ASSERT_GT(rexmit[0].opt.tsval, original_ts);
    // The ACK of the first segment echoes the original's TSval (a delayed ACK, not a loss), or
    // the retransmission's (a real loss).
    const uint32_t echo = spurious ? original_ts : rexmit[0].opt.tsval;
    const auto next = seg(A, kPeerIss + 1, kIss + 1 + mss, 0, 65535, ts_option(5000, echo));
    TcpConnInfo after;
    ASSERT_TRUE(st().info(c, &after));
    EXPECT_EQ(st().counters()[kSpuriousRto], spurious ? 1u : 0u);
    if (spurious) {
      EXPECT_GE(after.cwnd, before.cwnd);  // RFC 4015: the reduction is undone (then grows)
      EXPECT_TRUE(next.empty());           // and segments 2-5 are not sent again
    } else {
      EXPECT_LT(after.cwnd, before.cwnd);
      ASSERT_FALSE(next.empty());          // go-back-N resends segment 2
      EXPECT_EQ(next[0].seq, kIss + 1 + mss);
    }
    st().abort(c);
    ep_.reset();
  }
}

TEST_F(TcpStateMachine, three_duplicate_acks_trigger_a_fast_retransmit_without_sack) {
  cfg_.cc = CcAlgo::kNewReno;
  make();
  const TcpConnId c = establish_passive();
  ASSERT_EQ(send_bytes(c, 8 * 1460).size(), 8u);
  // The first segment is lost: the peer acknowledges nothing, three times.
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1).empty());
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1).empty());
  auto out = seg(A, kPeerIss + 1, kIss + 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq, kIss + 1);
  EXPECT_EQ(out[0].payload.size(), 1460u);
  EXPECT_EQ(st().counters()[kFastRetrans], 1u);
  EXPECT_EQ(st().counters()[kDupAcksIn], 3u);
  st().abort(c);
}

TEST_F(TcpStateMachine, sack_recovery_retransmits_only_the_holes) {
  make();
  const TcpConnId c = establish_passive({.sack = true});
  ASSERT_EQ(send_bytes(c, 8 * 1460).size(), 8u);
  const uint32_t base = kIss + 1;
  // Segments 0 and 3 lost; the peer SACKs 1-2 and 4-7 over three ACKs.
  seg(A, kPeerIss + 1, base, 0, 65535, sack_option({{base + 1460, base + 2 * 1460}}));
  seg(A, kPeerIss + 1, base, 0, 65535, sack_option({{base + 1460, base + 3 * 1460}}));
  auto out = seg(A, kPeerIss + 1, base, 0, 65535,
                 sack_option({{base + 4 * 1460, base + 8 * 1460}, {base + 1460, base + 3 * 1460}}));
  ASSERT_GE(out.size(), 1u);
  EXPECT_EQ(out[0].seq, base);
  EXPECT_EQ(st().counters()[kFastRetrans], 1u);
  bool hole3 = false;
  for (const Out& o : out) {
    EXPECT_TRUE(o.seq == base || o.seq == base + 3 * 1460) << "retransmitted SACKed data at " << o.seq - base;
    hole3 |= o.seq == base + 3 * 1460;
  }
  if (!hole3) {
    // cwnd allowed one segment; the next ACK (of segment 0) clocks out the other hole.
    out = seg(A, kPeerIss + 1, base + 1460, 0, 65535,
              sack_option({{base + 4 * 1460, base + 8 * 1460}, {base + 1460, base + 3 * 1460}}));
    ASSERT_GE(out.size(), 1u);
    EXPECT_EQ(out[0].seq, base + 3 * 1460);
  }
  EXPECT_TRUE(seg(A, kPeerIss + 1, base + 8 * 1460).empty());
  st().abort(c);
}

TEST_F(TcpStateMachine, a_lost_tail_is_probed_after_two_rtts_not_an_rto) {
  make();
  const TcpConnId c = establish_passive({.sack = true});
  TcpConnInfo ci;
  ASSERT_TRUE(st().info(c, &ci));
  ASSERT_EQ(ci.rto_us, 200'000u);
  const auto out = send_bytes(c, 3 * 1460);
  ASSERT_EQ(out.size(), 3u);
  // No ACK: SRTT is ~0 here, so the probe timeout is its 10 ms floor (RFC 8985 §7.2).
  EXPECT_TRUE(advance(9).empty());
  const auto probe = advance(1);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].seq, kIss + 1 + 2 * 1460);  // the last segment (no new data to send)
  EXPECT_EQ(probe[0].payload.size(), 1460u);
  EXPECT_EQ(st().counters()[kTlpProbes], 1u);
  EXPECT_EQ(st().counters()[kRtoFired], 0u);
  // One probe per episode: the RTO comes next if nothing is acknowledged.
  EXPECT_TRUE(advance(150).empty());
  // The probe repaired the tail: everything acknowledged, no timeout.
  EXPECT_TRUE(seg(A, kPeerIss + 1, kIss + 1 + 3 * 1460).empty());
  EXPECT_TRUE(advance(1000).empty());
  EXPECT_EQ(st().counters()[kRtoFired], 0u);
  // One segment in flight: the probe would wait for the peer's delayed ACK; the RTO is sooner.
  ASSERT_EQ(send_bytes(c, 100).size(), 1u);
  EXPECT_TRUE(advance(199).empty());
  EXPECT_EQ(advance(1).size(), 1u);
  EXPECT_EQ(st().counters()[kRtoFired], 1u);
  EXPECT_EQ(st().counters()[kTlpProbes], 1u);
  st().abort(c);
}

TEST_F(TcpStateMachine, zero_window_is_probed_and_data_flows_when_it_opens) {
  make();
  const TcpConnId c = establish_passive();
  // The peer closes its window.
  seg(A, kPeerIss + 1, kIss + 1, 0, 0);
  EXPECT_TRUE(send_bytes(c, 1000).empty());
  auto out = advance(200);  // the persist timer starts at RTO
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq, kIss);  // SND.UNA - 1, no data: draws an ACK with the window
  EXPECT_TRUE(out[0].payload.empty());
  EXPECT_EQ(st().counters()[kWindowProbes], 1u);
  // The peer still says 0: backoff, the connection never gives up.
  seg(A, kPeerIss + 1, kIss + 1, 0, 0);
  EXPECT_TRUE(advance(399).empty());
  EXPECT_EQ(advance(1).size(), 1u);
  // The window opens: the data goes out at once.
  out = seg(A, kPeerIss + 1, kIss + 1, 0, 65535);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].payload.size(), 1000u);
  EXPECT_EQ(out[0].seq, kIss + 1);
  st().abort(c);
}

TEST_F(TcpStateMachine, keepalive_probes_an_idle_peer_then_gives_up) {
  make();
  const TcpConnId c = establish_passive();
  ASSERT_EQ(st().set_keepalive(c, true, 1000, 100, 3), TcpError::kOk);
  EXPECT_TRUE(advance(999).empty());
  auto out = advance(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq, kIss);  // SND.NXT - 1 (RFC 9293 §3.8.4)
  EXPECT_EQ(out[0].flags, A);
  // An answer resets the idle time.
  seg(A, kPeerIss + 1, kIss + 1);
  EXPECT_TRUE(advance(999).empty());
  EXPECT_EQ(advance(1).size(), 1u);
  EXPECT_EQ(advance(100).size(), 1u);
  EXPECT_EQ(advance(100).size(), 1u);
  out = advance(100);  // three probes unanswered: reset
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].has(R));
  EXPECT_EQ(st().state(c), dp::tcp::TcpState::kClosed);
  EXPECT_TRUE(rec_.saw(TcpEvent::kClosed));
  EXPECT_EQ(st().counters()[kKeepaliveProbes], 4u);
  st().close(c);
  EXPECT_EQ(st().connections(), 0u);
}

TEST_F(TcpStateMachine, send_is_bounded_by_the_send_buffer_and_writable_follows_acks) {
  cfg_.snd_buf_bytes = 10000;
  make();
  const TcpConnId c = establish_passive();
  const Bytes data(50000, 1);
  EXPECT_EQ(st().send(c, data.data(), 50000), 10000u);
  EXPECT_EQ(st().send(c, data.data(), 50000), 0u);
  const auto out = ep_->take();
  ASSERT_FALSE(out.empty());
  rec_.events.clear();
  seg(A, kPeerIss + 1, kIss + 1 + 5000);
  EXPECT_TRUE(rec_.saw(TcpEvent::kWritable));
  EXPECT_EQ(st().send_space(c), 5000u);
  st().abort(c);
}

TEST_F(TcpStateMachine, packet_too_big_lowers_the_mss_and_resends_only_when_the_seq_is_in_flight) {
  make();
  const TcpConnId c = establish_passive();
  ASSERT_EQ(send_bytes(c, 3 * 1460).size(), 3u);
  // RFC 5927 §4.1: a sequence number not in flight is a blind guess.
  st().icmp_too_big(tuple(), kIss + 1 + 5 * 1460, 1000);
  EXPECT_TRUE(ep_->take().empty());
  EXPECT_EQ(st().counters()[kDropIcmpIgnored], 1u);
  st().icmp_too_big(tuple(), kIss + 1, 1000);
  auto out = ep_->take();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].seq, kIss + 1);
  for (const Out& o : out) EXPECT_LE(o.payload.size(), 1000u - 40u);
  TcpConnInfo ci;
  ASSERT_TRUE(st().info(c, &ci));
  EXPECT_EQ(ci.mss, 960u);
  EXPECT_EQ(st().counters()[kPmtuUpdates], 1u);
  // A forged tiny MTU is clamped to the IPv4 576 minimum.
  st().icmp_too_big(tuple(), kIss + 1, 68);
  ASSERT_TRUE(st().info(c, &ci));
  EXPECT_EQ(ci.mss, 536u);
  ep_->take();
  st().abort(c);
}

TEST_F(TcpStateMachine, after_an_idle_period_longer_than_rto_cwnd_restarts_from_the_initial_window) {
  cfg_.cc = CcAlgo::kNewReno;
  make();
  const TcpConnId c = establish_passive();
  // Grow cwnd beyond the initial 10 segments: acknowledge each flight until all is sent.
  std::vector<Out> flight = send_bytes(c, 40 * 1460);
  for (int round = 0; round < 20 && !flight.empty(); ++round) {
    const Out& last = flight.back();
    flight = seg(A, kPeerIss + 1, last.seq + uint32_t(last.payload.size()));
  }
  TcpConnInfo ci;
  ASSERT_TRUE(st().info(c, &ci));
  ASSERT_GT(ci.cwnd, 10u * ci.mss);
  ASSERT_EQ(ci.send_queued, 0u);
  advance(2000);  // idle, longer than RTO
  EXPECT_EQ(send_bytes(c, 40 * 1460).size(), 10u);  // RFC 5681 §4.1: RW = min(IW, cwnd)
  EXPECT_EQ(st().counters()[kIdleRestarts], 1u);
  st().abort(c);
}

TEST_F(TcpStateMachine, tiny_segments_cannot_pin_more_mbufs_than_the_connection_allows) {
  cfg_.rcv_buf_bytes = 64 * 1024;  // 128 mbufs at most (one per 512 bytes of buffer)
  cfg_.delayed_ack_ms = 0;
  make();
  const TcpConnId c = establish_passive();
  for (uint32_t i = 0; i < 200; ++i) seg(A | P, kPeerIss + 1 + i, kIss + 1, 1);
  TcpConnInfo ci;
  ASSERT_TRUE(st().info(c, &ci));
  EXPECT_EQ(ci.recv_queued, 128u);
  EXPECT_EQ(st().counters()[kDropRcvBufFull], 72u);
  EXPECT_LE(pool_in_use(), base_in_use_ + 128 + 8);
  // Reading frees them, and the rest is accepted when the peer resends.
  uint8_t buf[256];
  EXPECT_EQ(st().recv(c, buf, sizeof buf), 128u);
  seg(A | P, kPeerIss + 1 + 128, kIss + 1, 72);
  ASSERT_TRUE(st().info(c, &ci));
  EXPECT_EQ(ci.recv_queued, 72u);
  st().abort(c);
}

}  // namespace
}  // namespace meshgate::test::tcp
