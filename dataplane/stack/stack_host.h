// The userspace TCP stack of one worker with what it needs from that worker (docs/TCP.md "On
// the worker"). A worker that terminates TCP owns one StackHost; the applications on the stack
// are its peers, each given the host at setup and none knowing another:
//
//   worker ── input() ──► StackHost ──► TcpStack ──► events ──► Proxy (dataplane/proxy)
//     ▲                      │ listen()/unlisten()  ◄──────────  hbone terminator
//     └── take_output() ◄────┤ connect()            ◄──────────  hbone originator
//         (frame + L3 meta)  └ is_local_endpoint()  ◄── the worker, per packet
//
//   - Listeners go through listen() / unlisten(): the host keeps the table is_local_endpoint()
//     reads.
//   - Active opens go through connect(): a [fullnat] address and a port chosen by the worker's
//     FullnatSource, the same choice conntrack's fullnat flows make (so the two never share a
//     reply tuple).
//   - Everything else (send, recv, close, events) is on stack() directly.
//
// Packets in: input() with the worker's parse. Frames out: IPv4/IPv6 packets queued here, taken
// by the worker with take_output() together with the L3 metadata its route stage reads, so they
// are not parsed again.
//
// Threads: built by Worker::init() (setup); every other call on the worker lcore only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/common/istio_metrics.h"
#include "dataplane/common/net_types.h"
#include "dataplane/tcp/tcp_stack.h"
#include "dataplane/tcp/timer_wheel.h"

struct rte_mbuf;
struct rte_mempool;

namespace meshgate::dp {

struct PacketMeta;
struct Snapshot;
class FullnatSource;
struct FullnatChoice;

// Frames the stack may emit between two drains by the worker: a burst of ACKs that each open a
// full 256 KiB window (~180 segments) on a few connections.
inline constexpr uint32_t kStackOutQueue = 2048;

class StackHost {
 public:
  // `fullnat`: the worker's source choice (connect() uses it; the host registers its stack
  // with it, so conntrack's choice skips the stack's tuples). `pool`: TX frames and buffers.
  StackHost(const tcp::TcpConfig& cfg, FullnatSource& fullnat, rte_mempool* pool,
            uint64_t now_ns);
  ~StackHost();
  StackHost(const StackHost&) = delete;
  StackHost& operator=(const StackHost&) = delete;

  // ---- the worker -------------------------------------------------------------------------
  // Once per poll iteration, before the applications' begin() and any input(): the snapshot
  // connect() chooses sources from, and the clock.
  void begin(const Snapshot* snap, uint64_t now_ns);
  // One parsed TCP segment (parse_frame meta); consumes the mbuf.
  void input(rte_mbuf* m, const PacketMeta& meta);
  // The stack's timers, once per poll iteration after the bursts.
  void advance();
  // An ICMP error (the worker's parse of `frame`) that may quote one of the stack's segments:
  // "fragmentation needed" (RFC 1191) / "packet too big" (RFC 8201) lowers that connection's
  // MSS (TcpStack::icmp_too_big checks the quoted sequence number). True when the quote is
  // one of the stack's connections (the worker consumes the error).
  bool icmp_error(const uint8_t* frame, uint32_t len, const PacketMeta& meta);
  // Frames waiting to be routed, oldest first: moves up to `max` to `out` and returns how many.
  // meta[i] describes out[i] as the route stage reads it: l3, src, dst, ip_len and l3_off = 0
  // (the frame starts at its IP header: a caller that prepends L2 adds its length); the other
  // fields are zero.
  uint16_t take_output(rte_mbuf** out, PacketMeta* meta, uint16_t max);
  bool has_output() const { return out_head_ != out_tail_; }
  // Frames dropped because the queue was full (TCP resends them).
  uint64_t output_dropped() const { return out_dropped_; }

  // "To the stack" (TCP only, not a fragment; the caller checks both): is destination
  // dst:dport_be one of the stack's local endpoints for a segment from src:sport_be? True for
  //   - a listener's address and port (a proxy VIP:port, the [hbone] port on a local address;
  //     a listener on the zero address matches every destination), whatever the source;
  //   - the local side of a connection this stack opened (connect(): on a [fullnat] address),
  //     for a segment of that connection (any state, TIME-WAIT included). The source is part
  //     of the question because a [fullnat] address and port may at the same time be a
  //     conntrack fullnat flow's source toward another backend (the source choice keeps reply
  //     tuples apart, not local ports).
  // False otherwise: conntrack's flows, and strays to a [fullnat] address (which the worker
  // may still give the stack after conntrack, to be answered with a RST). Listeners follow the
  // applications' begin() of this poll iteration. Cost: a bit test per table (listener ports,
  // active-open local ports) for most packets; a scan of the listeners (at most
  // TcpConfig::max_listeners) or one lookup in the stack's table when the port bit is set.
  bool is_local_endpoint(const IpAddr& dst, uint16_t dport_be, const IpAddr& src,
                         uint16_t sport_be) const;

  // ---- the applications -------------------------------------------------------------------
  // TcpStack::listen / unlisten, recorded for is_local_endpoint(). Port in host order.
  tcp::TcpError listen(const IpAddr& local, uint16_t port, tcp::TcpAcceptFn accept, void* ctx);
  void unlisten(const IpAddr& local, uint16_t port);
  // An active open to `to`:`port_be` from a source FullnatSource chooses for `hash` (the flow
  // hash of what the connection serves: it picks the [fullnat] address). kBadState: no
  // [fullnat] address of the destination's family; kNoPort / kTableFull as TcpStack::connect().
  // After begin().
  tcp::TcpError connect(const IpAddr& to, uint16_t port_be, uint32_t hash, tcp::TcpEventFn fn,
                        void* user, tcp::TcpConnId* out);

  tcp::TcpStack& stack() { return *stack_; }
  const tcp::TcpStack& stack() const { return *stack_; }
  // Istio's TCP metrics of the applications on this stack (the proxy and the HBONE gateway).
  IstioTable& istio() { return istio_; }
  const IstioTable& istio() const { return istio_; }
  uint64_t now_ns() const { return now_ns_; }

 private:
  struct Frame {
    rte_mbuf* m = nullptr;
    IpAddr src, dst;
  };
  struct Listener {
    IpAddr local;
    uint16_t port = 0;  // host order
  };
  static void output(void* ctx, rte_mbuf* m, const tcp::TcpTuple& t);
  static bool port_ok(void* ctx, const tcp::TcpTuple& t);
  bool listening_on(uint16_t port) const {
    return listen_bits_[port >> 6] >> (port & 63) & 1;
  }

  FullnatSource& fullnat_;
  tcp::TimerWheel wheel_;  // the stack's own (tcp_stack.h: advance() owns it)
  std::unique_ptr<tcp::TcpStack> stack_;
  const Snapshot* snap_ = nullptr;
  uint64_t now_ns_ = 0;
  std::vector<Listener> listeners_;  // reserved at setup (max_listeners)
  uint64_t listen_bits_[65536 / 64] = {};
  FullnatChoice* choice_ = nullptr;  // connect()'s choice in progress (port_ok)
  std::unique_ptr<Frame[]> out_;  // ring of kStackOutQueue frames
  uint32_t out_head_ = 0, out_tail_ = 0;
  uint64_t out_dropped_ = 0;
  IstioTable istio_;
};

}  // namespace meshgate::dp
