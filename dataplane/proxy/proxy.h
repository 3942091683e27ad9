// The L4 proxy of one worker (`mode = "proxy"`, docs/PROXY.md), an application on the
// worker's userspace TCP stack (dataplane/stack/stack_host.h): a listener per proxy VIP:port
// terminates each client connection, Maglev picks the backend, a second connection goes to it
// (StackHost::connect: a [fullnat] local address and a port of this worker, as for conntrack's
// fullnat flows), and the two byte streams are spliced zero-copy (recv_chain -> send_chain) with
// half-close, reset propagation and an idle timeout. Optionally a PROXY protocol v2 header goes
// first to the backend. A client whose Maglev choice is an HBONE endpoint goes to the tunnel
// originator the worker wires in (set_originator()) instead.
//
// Ownership: a client connection lives on the worker RSS
// gave its first packet; its backend connection's replies come back to that worker too (the
// source choice, dataplane/nat/fullnat_source.h).
//
// Buffering is bounded: data stays in the receiving connection's queue until the other side's
// send buffer has room, so a slow reader closes the writer's window (no copy, no extra queue).
// Per-connection buffers and the per-worker memory budget are the TCP stack's.
//
// Threads: built by Worker::init() (setup); every other call on the worker lcore only, except
// stats(), which any thread may read.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/accesslog/access_record.h"
#include "dataplane/common/compiler.h"
#include "dataplane/common/istio_metrics.h"
#include "dataplane/common/counter_table.h"
#include "dataplane/common/limits.h"
#include "dataplane/common/net_types.h"
#include "dataplane/names/deny.h"
#include "dataplane/names/name_extract.h"
#include "dataplane/tcp/tcp_stack.h"
#include "dataplane/tcp/timer_wheel.h"

struct rte_mbuf;

namespace meshgate::dp {

struct Snapshot;
struct SnapService;
struct SnapBackend;
struct FlowRecord;
struct BackendCounters;
struct RouteCounters;
struct SnapListener;
class StackHost;

enum ProxyCounter : uint32_t {
#define MG_COUNTER MG_COUNTER_ENUMERATOR
#include "dataplane/proxy/proxy_counters.def"
#undef MG_COUNTER
  kProxyCounterCount
};
inline constexpr const char* kProxyCounterNames[] = {
#define MG_COUNTER MG_COUNTER_NAME
#include "dataplane/proxy/proxy_counters.def"
#undef MG_COUNTER
};
inline constexpr const char* kProxyCounterHelp[] = {
#define MG_COUNTER MG_COUNTER_HELP
#include "dataplane/proxy/proxy_counters.def"
#undef MG_COUNTER
};

// Per [[listener]] (docs/NAMES.md): connections and each reason one was reset before routing.
enum ListenerCounter : uint32_t {
#define MG_COUNTER MG_COUNTER_ENUMERATOR
#include "dataplane/proxy/listener_counters.def"
#undef MG_COUNTER
  kListenerCounterCount
};
inline constexpr const char* kListenerCounterNames[] = {
#define MG_COUNTER MG_COUNTER_NAME
#include "dataplane/proxy/listener_counters.def"
#undef MG_COUNTER
};
inline constexpr const char* kListenerCounterHelp[] = {
#define MG_COUNTER MG_COUNTER_HELP
#include "dataplane/proxy/listener_counters.def"
#undef MG_COUNTER
};
// The reasons a connection is reset: kLsNoName and the rows after it.
inline constexpr uint32_t kFirstListenerReject = kLsNoName;

struct ListenerCounters {
  uint64_t v[kListenerCounterCount] = {};
};

// Defaults, each with its reason.
// Envoy's TCP proxy idle_timeout default: long enough for idle database and gRPC connections.
inline constexpr uint32_t kDefaultProxyIdleTimeoutMs = 3'600'000;

struct ProxyParams {
  // The worker's TCP stack (StackHost), which runs on workers with proxy services; the control
  // thread sets the secret.
  tcp::TcpConfig tcp;
  uint32_t idle_timeout_ms = kDefaultProxyIdleTimeoutMs;  // 0 = no idle timeout
  // Sessions (client + backend connection pairs); the stack's max_connections also counts
  // TIME-WAIT and half-open connections.
  uint32_t max_sessions = tcp::kDefaultMaxConnections / 2;
  // Deny signatures configured somewhere: every session may inspect, so the worker reserves
  // one stream state block per session (names::kMaxDenyStreamBytes each).
  bool deny = false;
};

// What the proxy needs from its worker; pointers stay valid for the worker's life.
struct ProxyDeps {
  StackHost* host = nullptr;
  BackendCounters* backend_counters = nullptr;
  uint32_t worker = 0;  // this worker's index: its scratch in Snapshot::name_scratch
  AccessLog* access_log = nullptr;  // the worker's access log (null or off: no records)
};

// Takes over `client` (an established connection on the stack to `svc`) whose Maglev choice
// `backend` has tunnel = hbone: the HBONE originator, wired by the worker. `head`: bytes already
// read from the client (a listener's peek), sent first; the originator owns them (nullptr:
// none). `route`: the listener route's counters the tunnel's bytes add to (nullptr: none).
// Worker thread, inside the stack's events.
using TunnelOriginateFn = void (*)(void* ctx, tcp::TcpConnId client, const SnapService& svc,
                                   const SnapBackend& backend, rte_mbuf* head,
                                   RouteCounters* route);

// Counters as published for other threads (relaxed stores by the worker, see publish()). The
// stack's counters and gauges are published here too: the stack runs on proxy workers.
struct ProxyStats {
  uint64_t proxy[kProxyCounterCount] = {};
  uint64_t tcp[tcp::kTcpCounterCount] = {};
  uint64_t sessions_active = 0;     // gauge
  uint64_t tcp_connections = 0;     // gauge: TCBs in use (TIME-WAIT included)
  uint64_t tcp_mem_bytes = 0;       // gauge: send + receive buffers held
  uint64_t inspect_bytes = 0;       // gauge: deny-signature stream states in use (arena bytes)
};

class Proxy {
 public:
  Proxy(const ProxyParams& p, const ProxyDeps& d, uint64_t now_ns);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;
  // False when setup could not reserve its memory (the worker does not start).
  bool setup_ok() const { return setup_ok_; }

  // Once per poll iteration, after StackHost::begin() and before the stack's input: the
  // snapshot for this iteration (listeners follow its proxy services), the clock, and whether
  // new connections are refused (drain).
  void begin(const Snapshot* snap, uint64_t now_ns, bool draining);
  // Idle timers, once per poll iteration after the stack's.
  void advance();
  // The owning worker, between bursts (a config reload): sessions whose idle timer is pending
  // use it from their next check; 0 ends no session for idleness any more. Sessions opened while
  // it was 0 have no idle timer and keep none.
  void set_idle_timeout_ms(uint32_t ms) { p_.idle_timeout_ms = ms; }
  // Copies counters for other threads (at most once per millisecond unless `force`).
  void publish(bool force);

  // Flow dumps (GET /flows): session slot `i` (0..session_slots()) as a flow record of mode
  // proxy; false when the slot is free. Worker thread (or after the worker stopped).
  uint32_t session_slots() const { return p_.max_sessions; }
  bool session_record(uint32_t i, FlowRecord* out) const;

  // Connections whose Maglev choice is an HBONE endpoint (tunnel = hbone) go to `fn(ctx, ...)`
  // instead of a plain backend connection; without one they are served as plain backends. Set
  // by the worker at init.
  void set_originator(TunnelOriginateFn fn, void* ctx) {
    originate_ = fn;
    originate_ctx_ = ctx;
  }

  const ProxyStats& stats() const { return published_; }
  uint32_t sessions_active() const { return sessions_active_; }
  // Counter arrays by stat id (SnapListener / SnapRoute / SnapDeny), kMax*Stats entries each;
  // any thread reads them with counter_read().
  const ListenerCounters* listener_counters() const { return listener_counters_.get(); }
  const RouteCounters* route_counters() const { return route_counters_.get(); }
  const uint64_t* deny_counters() const { return deny_counters_.get(); }

 private:
  struct Session {
    tcp::TcpConnId conn[2] = {tcp::kNoConn, tcp::kNoConn};  // 0: client, 1: backend
    rte_mbuf* pending[2] = {nullptr, nullptr};  // read from side i, not yet taken by 1 - i
    bool fin_in[2] = {false, false};     // side i's peer closed its direction
    bool shut[2] = {false, false};       // we sent FIN on side i
    bool connected[2] = {false, false};
    bool used = false;
    uint32_t stat_id = 0;
    uint32_t istio_row = kNoIstioRow;  // its Istio metrics row (StackHost::istio) once connecting
    // A listener's connection whose name is not read yet: the bytes read so far wait in
    // pending[0] (`held` bytes); the extractor needs `need` before another try helps.
    bool peeking = false;
    uint32_t parsed = 0;  // bytes the extractor was given so far, over all its tries
    uint32_t held = 0;
    uint32_t need = 0;
    uint32_t listener_stat = 0;
    uint32_t route_stat = 0;  // 0: not routed by a listener (no route counters)
    names::DenyStream deny;   // the client's first bytes against the deny signatures
    uint32_t last_active_ms = 0;
    uint32_t created_ms = 0;
    uint64_t bytes[2] = {0, 0};  // received from side i and passed on to the other
    int8_t first_fin = -1;       // the side whose FIN came first (access log end reason)
    uint32_t next_free = 0;  // index + 1
    tcp::Timer idle;
    Proxy* proxy = nullptr;
  };

  static bool accept(void* ctx, const tcp::TcpTuple& t, tcp::TcpEventFn* fn, void** user);
  static void on_accepted(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  static void on_client(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  static void on_backend(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  static void on_idle(tcp::Timer* t, void* ctx);

  void start_session(tcp::TcpConnId client);
  // The proxy-mode entry (a proxy service or a listener) at the local address and port of
  // connection tuple `t` in the current snapshot, or nullptr.
  const SnapService* entry_of(const tcp::TcpTuple& t) const;
  // `svc`'s Maglev choice (it has a table) for the client of `t`; *h gets the flow hash.
  const SnapBackend& pick(const SnapService& svc, const tcp::TcpTuple& t, uint32_t* h) const;
  // A session for the established client `c` (its events come to the session from now on);
  // nullptr when the table is full (the client is reset, counted).
  Session* open_session(tcp::TcpConnId c);
  // Opens the backend connection of `s` (its client connected, tuple `t`) to `be`, `svc`'s
  // Maglev choice for flow hash `h`; false when the session ended instead (counted).
  bool connect_backend(Session* s, const tcp::TcpTuple& t, const SnapService& svc,
                       const SnapBackend& be, uint32_t h);
  // listener.cc: a listener's connection, from accept to routing.
  void start_peek(tcp::TcpConnId client, const SnapService& svc);
  void peek(Session* s, bool fin);
  // Sends the session of client tuple `t` on by route `route` of `l`, counted as `why`.
  void route(Session* s, const tcp::TcpTuple& t, const SnapListener& l, int32_t route,
             ListenerCounter why);
  void reject(Session* s, ListenerCounter why);
  // deny.cc: starts inspecting a session's client bytes when `deny` (1 + index into the
  // snapshot's deny_sets) is set; false when it could not (the session ended, counted).
  bool open_inspection(Session* s, uint32_t deny);
  // Feeds `chain` (client bytes, in order) to the session's inspection; false when a signature
  // matched (the session ended, counted).
  bool inspect(Session* s, rte_mbuf* chain);
  void lcount(uint32_t stat, ListenerCounter c);
  void handle(Session* s, int side, tcp::TcpEvent ev);
  void pump(Session* s, int from);
  // Ends a session: `abort_side[i]` resets side i, otherwise it is closed gracefully; `why`
  // goes to the access log.
  void end(Session* s, bool abort_client, bool abort_backend, AccessEnd why);
  // Access log (proxy.cc): what a session's record needs that its end may no longer know (the
  // tuples of connections already gone, the names of the snapshot it started under), kept
  // beside the sessions when the log is on.
  struct SessionLog {
    AccessNames names;
    AccessTuple tuple;
  };
  SessionLog* session_log(const Session* s) const {
    return log_ != nullptr ? &log_[s - sessions_.get()] : nullptr;
  }
  void log_session(const Session* s, AccessEnd why);
  // A client refused before it had a session (tuple `t`, entry `svc` when known).
  void log_refused(const tcp::TcpTuple& t, const SnapService* svc, AccessEnd why);
  Session* alloc_session();
  void free_session(Session* s);
  void sync_listeners();
  uint32_t now_ms() const { return uint32_t(now_ns_ / 1'000'000); }
  void count(ProxyCounter c, uint64_t n = 1) { counters_[c] += n; }

  ProxyParams p_;
  ProxyDeps d_;
  StackHost& host_;
  tcp::TcpStack& stack_;
  tcp::TimerWheel idle_wheel_;  // session idle timers
  TunnelOriginateFn originate_ = nullptr;
  void* originate_ctx_ = nullptr;
  std::unique_ptr<Session[]> sessions_;
  std::unique_ptr<SessionLog[]> log_;  // per session, when d_.access_log is on
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
  uint64_t counters_[kProxyCounterCount] = {};
  std::unique_ptr<ListenerCounters[]> listener_counters_;
  std::unique_ptr<RouteCounters[]> route_counters_;
  std::unique_ptr<uint64_t[]> deny_counters_;
  bool setup_ok_ = true;
  names::StreamArena arena_;  // deny-signature stream states (ProxyParams::deny)
  // The client's first bytes made contiguous for the name extractors (peek_bytes at most).
  std::unique_ptr<uint8_t[]> peek_buf_;
  std::unique_ptr<names::Name> peek_name_;  // what they name (64 KiB: not on the stack)
  ProxyStats published_;
  uint32_t published_ms_ = 0;
};

}  // namespace meshgate::dp
