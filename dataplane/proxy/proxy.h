// The L4 proxy of one worker (`mode = "proxy"`, ARCHITECTURE.md role 4): the worker's userspace
// TCP stack terminates each client connection to a proxy VIP, Maglev picks the backend, a
// second connection goes to it from a [fullnat] local address, and the two byte streams are
// spliced zero-copy (recv_chain -> send_chain) with half-close, reset propagation and an idle
// timeout. Optionally a PROXY protocol v2 header goes first to the backend.
//
// Packets in: the worker steers TCP segments to a proxy VIP, and TCP segments to a [fullnat]
// address that match no conntrack flow (the backend side of our connections), to input().
// Frames out: IPv4/IPv6 packets queued here, taken by the worker with take_output() and sent
// through its route stage (next hop, neighbor, L2) like every other packet.
//
// Ownership (ARCHITECTURE.md "port selection"): a client connection lives on the worker RSS
// gave its first packet. The backend connection's local port is chosen so that port %
// workers == this worker (any worker that receives a reply hands it over by that rule, as for
// fullnat) and, when the port's RSS is predictable, so that the reply's RSS queue is this
// worker's.
//
// Buffering is bounded: data stays in the receiving connection's queue until the other side's
// send buffer has room, so a slow reader closes the writer's window (no copy, no extra queue).
// Per-connection buffers and the per-worker memory budget are the TCP stack's.
//
// Threads: built by Worker::init() (setup); every other call on the worker lcore only, except
// counters(), which any thread may read.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/common/compiler.h"
#include "dataplane/common/net_types.h"
#include "dataplane/tcp/tcp_stack.h"
#include "dataplane/tcp/timer_wheel.h"

struct rte_mbuf;
struct rte_mempool;

namespace meshgate::dp {

struct PacketMeta;
struct Snapshot;
struct FlowRecord;
struct BackendCounters;
class FlowTable;
class RssPredictor;
namespace hbone {
class Gateway;
}

enum ProxyCounter : uint32_t {
#define MG_PROXY_COUNTER(e, name, desc) e,
#include "dataplane/proxy/proxy_counters.def"
#undef MG_PROXY_COUNTER
  kProxyCounterCount
};
inline constexpr const char* kProxyCounterNames[] = {
#define MG_PROXY_COUNTER(e, name, desc) name,
#include "dataplane/proxy/proxy_counters.def"
#undef MG_PROXY_COUNTER
};
inline constexpr const char* kProxyCounterHelp[] = {
#define MG_PROXY_COUNTER(e, name, desc) desc,
#include "dataplane/proxy/proxy_counters.def"
#undef MG_PROXY_COUNTER
};

// Defaults, each with its reason.
// Envoy's TCP proxy idle_timeout default: long enough for idle database and gRPC connections.
inline constexpr uint32_t kDefaultProxyIdleTimeoutMs = 3'600'000;
// Frames the stack may emit between two drains by the worker: a burst of ACKs that each open a
// full 256 KiB window (~180 segments) on a few connections.
inline constexpr uint32_t kProxyOutQueue = 2048;
// Local-port candidates whose reply must hash to this worker's RSS queue before any port of
// this worker's residue is taken (the reply is then handed over), as for fullnat.
inline constexpr uint32_t kProxyRssTries = 64;

struct ProxyParams {
  tcp::TcpConfig tcp;  // per worker; the control thread sets the secret
  uint32_t idle_timeout_ms = kDefaultProxyIdleTimeoutMs;  // 0 = no idle timeout
  // Sessions (client + backend connection pairs); the stack's max_connections also counts
  // TIME-WAIT and half-open connections.
  uint32_t max_sessions = tcp::kDefaultMaxConnections / 2;
};

// What the proxy needs from its worker; pointers stay valid for the worker's life.
struct ProxyDeps {
  uint16_t index = 0;
  uint16_t n_workers = 1;
  rte_mempool* pool = nullptr;
  const FlowTable* flows = nullptr;           // conntrack: fullnat tuples in use
  BackendCounters* backend_counters = nullptr;
  const RssPredictor* const* rss = nullptr;   // per port index (kMaxPorts), may hold nulls
  const bool* flow_steered = nullptr;         // per port index
};

// Counters as published for other threads (relaxed stores by the worker, see publish()).
struct ProxyStats {
  uint64_t proxy[kProxyCounterCount] = {};
  uint64_t tcp[tcp::kTcpCounterCount] = {};
  uint64_t sessions_active = 0;     // gauge
  uint64_t tcp_connections = 0;     // gauge: TCBs in use (TIME-WAIT included)
  uint64_t tcp_mem_bytes = 0;       // gauge: send + receive buffers held
};

class Proxy {
 public:
  Proxy(const ProxyParams& p, const ProxyDeps& d, uint64_t now_ns);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Once per poll iteration, before input(): the snapshot for this iteration (listeners follow
  // its proxy services), the clock, and whether new connections are refused (drain).
  void begin(const Snapshot* snap, uint64_t now_ns, bool draining);
  // One parsed TCP segment (parse_frame meta); consumes the mbuf.
  void input(rte_mbuf* m, const PacketMeta& meta);
  // Timers (TCP and idle), once per poll iteration after the bursts.
  void advance();
  // An ICMP error (the worker's parse of `frame`) that may quote one of the stack's segments:
  // "fragmentation needed" (RFC 1191) / "packet too big" (RFC 8201) lowers that connection's
  // MSS (TcpStack::icmp_too_big checks the quoted sequence number). True when the quote is
  // one of the stack's connections (the worker consumes the error).
  bool icmp_error(const uint8_t* frame, uint32_t len, const PacketMeta& meta);
  // Frames waiting to be routed, oldest first; returns how many were moved to `out`.
  uint16_t take_output(rte_mbuf** out, uint16_t max);
  bool has_output() const { return out_head_ != out_tail_; }
  // Copies counters for other threads (at most once per millisecond unless `force`).
  void publish(bool force);

  // True when the stack has a connection (any state) with this tuple: pick_fullnat() must not
  // reuse it. `local_port_be` / `remote_port_be` in network order.
  bool tuple_in_use(const IpAddr& local, uint16_t local_port_be, const IpAddr& remote,
                    uint16_t remote_port_be) const;

  // Flow dumps (GET /flows): session slot `i` (0..session_slots()) as a flow record of mode
  // proxy; false when the slot is free. Worker thread (or after the worker stopped).
  uint32_t session_slots() const { return p_.max_sessions; }
  bool session_record(uint32_t i, FlowRecord* out) const;

  // An active open from this worker to `to`:`port_be` for another user of the stack (the HBONE
  // terminator's upstreams): a [fullnat] address of the destination's family picked by `hash`,
  // a local port this worker owns (port % workers, and the reply's RSS queue when predictable),
  // as for the proxy's own backend connections. kBadState: no [fullnat] address of that family;
  // kNoPort / kTableFull as TcpStack::connect(). Worker thread, after begin().
  tcp::TcpError connect_upstream(const IpAddr& to, uint16_t port_be, uint32_t hash,
                                 tcp::TcpEventFn fn, void* user, tcp::TcpConnId* out);

  // Connections whose Maglev choice is an HBONE endpoint (tunnel = hbone) go to `g`'s
  // originator instead of a plain backend connection. Set by the worker at init.
  void set_hbone(hbone::Gateway* g) { hbone_ = g; }

  const ProxyStats& stats() const { return published_; }
  uint32_t sessions_active() const { return sessions_active_; }
  tcp::TcpStack& stack() { return *stack_; }

 private:
  struct Session {
    tcp::TcpConnId conn[2] = {tcp::kNoConn, tcp::kNoConn};  // 0: client, 1: backend
    rte_mbuf* pending[2] = {nullptr, nullptr};  // read from side i, not yet taken by 1 - i
    bool fin_in[2] = {false, false};     // side i's peer closed its direction
    bool shut[2] = {false, false};       // we sent FIN on side i
    bool connected[2] = {false, false};
    bool used = false;
    uint32_t stat_id = 0;
    uint32_t last_active_ms = 0;
    uint32_t created_ms = 0;
    uint32_t next_free = 0;  // index + 1
    tcp::Timer idle;
    Proxy* proxy = nullptr;
  };

  static void output(void* ctx, rte_mbuf* m, const tcp::TcpTuple& t);
  static bool accept(void* ctx, const tcp::TcpTuple& t, tcp::TcpEventFn* fn, void** user);
  static bool port_ok(void* ctx, const tcp::TcpTuple& t);
  static void on_accepted(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  static void on_client(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  static void on_backend(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  static void on_idle(tcp::Timer* t, void* ctx);

  void start_session(tcp::TcpConnId client);
  void handle(Session* s, int side, tcp::TcpEvent ev);
  void pump(Session* s, int from);
  // Ends a session: `abort_side[i]` resets side i, otherwise it is closed gracefully.
  void end(Session* s, bool abort_client, bool abort_backend);
  Session* alloc_session();
  void free_session(Session* s);
  void sync_listeners();
  int egress_port(const IpAddr& a) const;
  uint32_t now_ms() const { return uint32_t(now_ns_ / 1'000'000); }
  void count(ProxyCounter c, uint64_t n = 1) { counters_[c] += n; }

  ProxyParams p_;
  ProxyDeps d_;
  tcp::TimerWheel wheel_;       // the stack's own (tcp_stack.h: advance() owns it)
  tcp::TimerWheel idle_wheel_;  // session idle timers
  std::unique_ptr<tcp::TcpStack> stack_;
  hbone::Gateway* hbone_ = nullptr;
  std::unique_ptr<Session[]> sessions_;
  uint32_t free_head_ = 0;  // index + 1
  uint32_t sessions_active_ = 0;
  const Snapshot* snap_ = nullptr;
  uint64_t listeners_version_ = 0;
  struct ListenKey {
    IpAddr vip;
    uint16_t port = 0;  // host order
  };
  std::vector<ListenKey> listening_;  // reserved at setup (max_listeners)
  std::vector<ListenKey> wanted_;
  uint64_t now_ns_ = 0;
  bool draining_ = false;
  // connect()'s port predicate state for the open in progress.
  const RssPredictor* conn_rss_ = nullptr;
  uint32_t conn_rss_fixed_ = 0;
  uint32_t conn_rss_tries_ = 0;
  uint64_t counters_[kProxyCounterCount] = {};
  ProxyStats published_;
  uint32_t published_ms_ = 0;
  std::unique_ptr<rte_mbuf*[]> out_;  // ring of kProxyOutQueue frames
  uint32_t out_head_ = 0, out_tail_ = 0;
};

}  // namespace meshgate::dp
