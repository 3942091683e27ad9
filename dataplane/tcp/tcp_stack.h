// The userspace TCP endpoint of one worker (docs/TCP.md): RFC 9293 state machine with RFC 5961
// challenge ACKs, RFC 7323 window scaling, timestamps and PAWS, RFC 2018 SACK with RFC 6675
// loss recovery, RFC 6298 RTO, CUBIC or NewReno, delayed ACK, keepalive, persist timer,
// bounded out-of-order reassembly, TIME-WAIT with RFC 6191 reuse, SYN cookies.
//
// Sans-I/O: the worker hands in parsed segments (the mbuf and its PacketMeta) with the time,
// calls advance() for timers, and gets frames (IPv4/IPv6 + TCP, no L2) from the output
// function. Nothing here touches a NIC, a socket or a thread.
//
// Threads: one TcpStack per worker lcore, built at setup (where it allocates its connection
// pool and table once); every call after that runs on that worker only. No locks, no heap
// allocation per segment (mbufs come from the pool given at setup), no exceptions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/tcp/conn_table.h"
#include "dataplane/tcp/seq.h"
#include "dataplane/tcp/syncookie.h"
#include "dataplane/tcp/tcb.h"
#include "dataplane/tcp/tcp_options.h"
#include "dataplane/tcp/tcp_types.h"
#include "dataplane/tcp/timer_wheel.h"

struct rte_mempool;

namespace meshgate::dp {
struct PacketMeta;
}

namespace meshgate::dp::tcp {

struct TcpStackDeps {
  rte_mempool* pool = nullptr;   // TX frames and send-buffer copies
  TimerWheel* wheel = nullptr;   // owned by the worker, used by this stack only (see advance())
  TcpOutputFn output = nullptr;
  void* output_ctx = nullptr;
  TcpIsnFn isn = nullptr;        // nullptr: RFC 6528 from config.secret
  void* isn_ctx = nullptr;
};

enum class TcpError : uint8_t {
  kOk,
  kTableFull,      // max_connections reached
  kNoPort,         // connect(): no local port passed the predicate and was free
  kBadState,       // the call does not apply in the connection's state
  kStale,          // the handle's connection was released
  kListenerExists,
};

class TcpStack {
 public:
  TcpStack(const TcpConfig& cfg, const TcpStackDeps& deps, uint64_t now_ns);
  ~TcpStack();
  TcpStack(const TcpStack&) = delete;
  TcpStack& operator=(const TcpStack&) = delete;

  // ---- Inbound ------------------------------------------------------------------------------
  // One parsed TCP segment (meta from parse_frame: l4_off, l4_len, l4_hdr_len, addresses,
  // ports). The headers must be in the first mbuf segment (the parser guarantees it). Consumes
  // `m`: its payload is kept zero-copy when in order or reassembled, freed otherwise.
  void input(rte_mbuf* m, const PacketMeta& meta, uint64_t now_ns);

  // Runs due timers (RTO, TLP, delayed ACK, persist, keepalive, TIME-WAIT) on deps.wheel, at
  // most `budget` of them, and wakes senders blocked on the worker memory budget. Call once per
  // poll-loop iteration. The stack advances the wheel itself and passes itself as the wheel's
  // context: give it a wheel of its own rather than one other modules' timers share.
  void advance(uint64_t now_ns, uint32_t budget = 1024);
  // Moves the stack's clock forward (never back) without running timers, for API calls made
  // outside input() / advance() (timestamps and timers read it).
  void set_now(uint64_t now_ns);

  // ---- Listeners ----------------------------------------------------------------------------
  // Listens on (local, port); a zero `local` listens on every address. `accept` decides on each
  // SYN (and on each valid SYN-cookie ACK).
  TcpError listen(const IpAddr& local, uint16_t port, TcpAcceptFn accept, void* ctx);
  void unlisten(const IpAddr& local, uint16_t port);

  // ---- Active open --------------------------------------------------------------------------
  // Opens a connection from `local` (a port chosen among the ephemeral range for which
  // `port_ok` says yes and no connection, TIME-WAIT included, uses the tuple) to remote:port.
  // kConnected or kReset (refused) / kClosed (timed out) follow. *out gets the handle.
  TcpError connect(const IpAddr& local, const IpAddr& remote, uint16_t remote_port,
                   TcpPortOkFn port_ok, void* port_ctx, TcpEventFn fn, void* user,
                   TcpConnId* out);

  // ---- Data ---------------------------------------------------------------------------------
  // None of these calls the event function: events come only from input() and advance().
  // Copies up to `len` bytes into the send buffer; returns how many it took (0 when the
  // per-connection buffer or the worker budget is full: kWritable follows when room opens).
  uint32_t send(TcpConnId c, const void* data, uint32_t len);
  // Queues a whole mbuf chain without copying (a proxy splicing recv_chain() output). Takes
  // the chain only when all of it fits; false leaves it with the caller.
  bool send_chain(TcpConnId c, rte_mbuf* chain);
  // Asks for a kWritable once send_space() grows (send() and send_chain() that could not take
  // everything ask implicitly). For a caller that sized its read by send_space() and found it
  // too small.
  void request_writable(TcpConnId c);
  // Zero-copy receive: in-order bytes not read yet, as one chain of the received mbufs (whole
  // mbufs, at most `max_bytes`; nullptr when none, or when the first mbuf alone is larger than
  // `max_bytes`). *len gets its length. The caller owns the chain. Reading opens the receive
  // window. A proxy passes the other side's send_space() so send_chain() always takes it.
  rte_mbuf* recv_chain(TcpConnId c, uint32_t* len, uint32_t max_bytes = UINT32_MAX);
  // Copies out up to `len` bytes and consumes them.
  uint32_t recv(TcpConnId c, void* buf, uint32_t len);
  // No more data from us: FIN after what is queued (RFC 9293 §3.10.4 CLOSE on a half-open
  // connection). Receiving continues.
  TcpError shutdown_write(TcpConnId c);
  // Releases the handle. The connection finishes in the background (FIN after queued data);
  // unread received data, or data arriving later, resets it instead (RFC 9293 §3.10.4,
  // RFC 2525 2.17). No event follows.
  void close(TcpConnId c);
  // Releases the handle and resets the connection (RST to the peer if it was synchronized).
  void abort(TcpConnId c);
  // Rebinds the connection's event function and user pointer (a listener's connection handed
  // from its acceptor to the object that serves it, e.g. a proxy session). Takes effect for the
  // next event, including later events of the dispatch in progress.
  TcpError set_user(TcpConnId c, TcpEventFn fn, void* user);
  // RFC 9293 §3.8.4 keepalive with the given times (0 = the defaults).
  TcpError set_keepalive(TcpConnId c, bool on, uint32_t idle_ms = 0, uint32_t interval_ms = 0,
                         uint32_t probes = 0);

  // ---- ICMP ---------------------------------------------------------------------------------
  // An ICMP "fragmentation needed" (RFC 1191) or ICMPv6 "packet too big" (RFC 8201) quoting one
  // of our segments: `t` is the connection as we see it (local = the quoted source), `seq` the
  // quoted sequence number, `mtu` the reported next-hop MTU. Ignored unless `seq` is in flight
  // (RFC 5927 §4.1: a blind attacker must guess it). Lowers the MSS (not below the IPv4 576 /
  // IPv6 1280 minimum MTU) and resends what was in flight, without a congestion response.
  void icmp_too_big(const TcpTuple& t, uint32_t seq, uint32_t mtu);

  // ---- Introspection ------------------------------------------------------------------------
  bool info(TcpConnId c, TcpConnInfo* out) const;
  TcpState state(TcpConnId c) const;
  // The state of the connection with this tuple (kClosed when none), for tests and dumps.
  TcpState state_of(const TcpTuple& t) const;
  // Whether some connection made by connect() (any state, TIME-WAIT included) has `port` (host
  // order) as its local port: one bit test, the filter in front of state_of() for a caller
  // that asks per packet whether a segment is one of this stack's active opens.
  bool active_port(uint16_t port) const { return active_bits_[port >> 6] >> (port & 63) & 1; }
  uint32_t send_space(TcpConnId c) const;
  const TcpCounters& counters() const { return counters_; }
  uint32_t connections() const { return used_; }
  uint64_t mem_used() const { return mem_used_; }
  const TcpConfig& config() const { return cfg_; }
  // The owning worker, between bursts (a config reload): connections entering TIME-WAIT from
  // now on stay there this long; those already in it keep their timer.
  void set_time_wait_ms(uint32_t ms) { cfg_.time_wait_ms = ms; }

 private:
  struct Listener {
    IpAddr local;
    uint16_t port = 0;
    bool used = false;
    TcpAcceptFn accept = nullptr;
    void* ctx = nullptr;
    uint32_t syn_recv = 0;           // half-open connections (SYN backlog)
    uint32_t cookie_until_ms = 0;    // cookies were sent recently: validate bare ACKs
    bool cookies_sent = false;
  };
  struct Seg;  // a parsed inbound segment (tcp_input.cc)

  // tcp_input.cc
  void input_listen(Listener* l, rte_mbuf* m, const Seg& s);
  void input_syn_sent(Tcb* t, rte_mbuf* m, const Seg& s);
  void input_synchronized(Tcb* t, rte_mbuf* m, const Seg& s);
  bool process_ack(Tcb* t, const Seg& s);
  void process_data(Tcb* t, rte_mbuf* m, const Seg& s);
  void process_fin(Tcb* t);
  bool time_wait_reusable(const Tcb* t, const Seg& s) const;
  void challenge_ack(Tcb* t);
  void enter_established(Tcb* t);
  void negotiate(Tcb* t, const TcpOptions& o);
  uint8_t our_wscale() const;
  void reply_rst(const Seg& s);
  Tcb* cookie_ack(Listener* l, const Seg& s);
  void syn_ack_cookie(Listener* l, const Seg& s);

  // tcp_output.cc
  void output(Tcb* t);
  void send_segment(Tcb* t, uint32_t seq, uint32_t len, uint8_t flags);
  void xmit(Tcb* t, uint32_t seq, uint32_t max_len);
  void send_ack(Tcb* t) { send_segment(t, acceptable_seq(t), 0, 0x10); }
  // SND.NXT, or the peer's right window edge when SND.NXT went past it (the peer shrank its
  // window and dropped what lay beyond): a peer accepts a segment, its ACK included, only when
  // SEG.SEQ <= RCV.NXT + RCV.WND (RFC 9293 §3.10.7.4; Linux's tcp_acceptable_seq()).
  static uint32_t acceptable_seq(const Tcb* t) {
    const uint32_t wnd_end = t->snd_una + t->snd_wnd;
    return seq_gt(t->snd_nxt, wnd_end) ? wnd_end : t->snd_nxt;
  }
  void send_syn(Tcb* t);
  void send_rst(Tcb* t);
  bool emit(const TcpTuple& tp, bool v6, uint32_t seq, uint32_t ack, uint8_t flags,
            uint16_t win, const TcpOptionsOut& opts, const SendBuf* data, uint32_t len);
  // The window to offer now; *mem_limited: the worker budget, not the buffer, bounds it.
  uint32_t rcv_window(Tcb* t, bool* mem_limited = nullptr) const;
  uint16_t window_field(Tcb* t);
  void arm_rtx(Tcb* t);
  void on_rtx_timer(Tcb* t);
  void on_delack_timer(Tcb* t);
  void on_keep_timer(Tcb* t);
  void schedule_ack(Tcb* t);
  void rto_retransmit(Tcb* t);
  uint32_t tlp_timeout_us(const Tcb* t) const;  // 0: no probe, arm the RTO
  void send_tail_loss_probe(Tcb* t);
  void retransmit_una(Tcb* t);
  uint32_t ts_now() const { return uint32_t(now_ns_ / 1'000'000); }
  uint32_t now_ms() const { return uint32_t(now_ns_ / 1'000'000); }
  // A timer of a Tcb fired: find the Tcb from its Timer member, run the handler, then deliver
  // the events it raised (unless it released the connection).
  template <size_t kTimerOffset, void (TcpStack::*kHandler)(Tcb*)>
  static void timer_cb(Timer* tm, void*) {
    Tcb* t = reinterpret_cast<Tcb*>(reinterpret_cast<char*>(tm) - kTimerOffset);
    TcpStack* s = t->stack;
    const uint32_t gen = t->gen;
    (s->*kHandler)(t);
    if (t->gen == gen) s->dispatch(t);
  }
  void window_update_after_read(Tcb* t);

  // tcp_stack.cc
  Tcb* alloc_tcb(const TcpTuple& tp);
  // The table is full: frees the oldest orphaned TIME-WAIT connection, if any (like Linux past
  // tcp_max_tw_buckets, a new connection matters more than an old one's last ACK).
  bool recycle_time_wait();
  void free_tcb(Tcb* t);
  void terminate(Tcb* t, uint8_t event);  // to CLOSED: events to the app, or free if orphaned
  void enter_time_wait(Tcb* t);
  Tcb* lookup(const TcpTuple& tp) const;
  Listener* find_listener(const IpAddr& local, uint16_t port);
  Tcb* tcb_of(TcpConnId c) const;
  TcpConnId id_of(const Tcb* t) const;
  uint32_t hash_of(const TcpTuple& tp) const;
  uint32_t make_isn(const TcpTuple& tp);
  void init_tcb_common(Tcb* t, bool v6);
  void dispatch(Tcb* t);
  void free_send_acked(Tcb* t, uint32_t ack);
  // Receive-side mbufs a connection may hold (in order + out of order): one per 512 bytes of
  // buffer, so a full-size-segment stream never hits it.
  uint32_t max_rcv_mbufs() const { return std::max<uint32_t>(64, cfg_.rcv_buf_bytes / 512); }
  uint64_t mem_room() const { return mem_used_ < cfg_.worker_mem_bytes ? cfg_.worker_mem_bytes - mem_used_ : 0; }
  void count(TcpCounter c, uint64_t n = 1) { counters_.v[c] += n; }

  TcpConfig cfg_;
  TcpStackDeps deps_;
  uint64_t now_ns_ = 0;
  std::unique_ptr<Tcb[]> tcbs_;
  uint32_t free_head_ = 0;  // index + 1; 0 = none
  uint32_t used_ = 0;
  ConnTable table_;
  std::vector<Listener> listeners_;
  SynCookies cookies_;
  uint64_t mem_used_ = 0;
  uint32_t next_port_ = 0;
  uint32_t hash_seed_ = 0;
  bool mem_blocked_ = false;  // a send() was cut short by the worker budget
  bool wnd_mem_limited_ = false;  // some connection's offered window was cut by the budget
  // Connections in the order they entered TIME-WAIT, as (generation << 32 | index): entries
  // whose connection left TIME-WAIT since are skipped when popped. max_connections slots.
  std::unique_ptr<uint64_t[]> tw_fifo_;
  uint64_t tw_head_ = 0, tw_tail_ = 0;
  // Active opens per local port (connect() counts, free_tcb() uncounts) and its bitmap.
  std::unique_ptr<uint32_t[]> active_refs_;  // 65536
  uint64_t active_bits_[65536 / 64] = {};
  TcpCounters counters_;
};

}  // namespace meshgate::dp::tcp
