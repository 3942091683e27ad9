// The HBONE gateway of one worker: two applications on the worker's userspace TCP stack
// (dataplane/stack/stack_host.h), peers of the L4 proxy, sharing one engine pool, one buffer
// budget and one set of counters.
//
// Terminator (terminator.cc): the [hbone] port on every local address.
//
//   client ──TCP──► stack ──► hbone::Connection (mTLS 1.3 + HTTP/2, server role)
//                                 │ CONNECT :authority
//                                 ├─ resolve   dp::hbone::resolve on the worker's snapshot
//                                 ├─ authorize policies_for + policy::evaluate (401)
//                                 └─ connect   StackHost::connect from a [fullnat] address
//   stream bytes ◄──────────────► upstream TCP connection (flow control both ways)
//
// END_STREAM ↔ FIN, RST_STREAM ↔ RST, GOAWAY on drain. A new snapshot version re-checks every
// live tunnel against the policies it carries (Connection::recheck_authorization). New
// connections take the snapshot's TLS context for this worker; a connection keeps its own.
//
// Originator (originator.cc): a client connection the proxy accepted for a VIP whose Maglev
// choice is an HBONE endpoint comes here (originate(), wired by the worker as the proxy's
// TunnelOriginateFn); it takes a stream on a pooled HBONE connection to <pod IP>:[hbone] port
// (hbone::Pool: one dial per key at a time, up to 100 streams per connection, 5 min idle
// release), dialled through StackHost::connect, with the endpoint's SPIFFE identity as the only
// accepted server identity, and CONNECTs <pod IP>:<target port> with baggage, forwarded and
// traceparent. Client bytes wait in the client's TCP window until the 200; anything else resets
// the client. A terminated CONNECT whose endpoint has tunnel = hbone goes on the same way (the
// double hop).
//
// Splice (splice.cc): tunnel bytes are read from the upstream connection only as far as the
// stream's send budget allows, and from the stream only as far as the upstream's send buffer
// has room, so a slow side closes the other side's window (HTTP/2 or TCP). Ciphertext goes to
// the stack as the connection's send buffer takes it (gateway.cc, with the engine's events).
//
// Threads: built by Worker::init(); every other call on the worker lcore only, except stats(),
// which any thread may read.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "dataplane/common/istio_metrics.h"
#include "dataplane/accesslog/access_record.h"
#include "dataplane/common/net_types.h"
#include "dataplane/hbone/connection.h"
#include "dataplane/hbone/counters.h"
#include "dataplane/hbone/pool.h"
#include "dataplane/tcp/tcp_types.h"
#include "dataplane/tls/tls.h"
#include "dataplane/worker/counters.h"

namespace meshgate::dp {
struct Snapshot;
struct SnapService;
struct SnapBackend;
class StackHost;
namespace tcp {
class TcpStack;
}
}  // namespace meshgate::dp

namespace meshgate::dp::hbone {

enum class GwCounter : uint16_t {
#define MG_COUNTER MG_COUNTER_ENUMERATOR
#include "dataplane/hbone/gateway_counters.def"
#undef MG_COUNTER
  kCount
};
inline constexpr int kNumGwCounters = int(GwCounter::kCount);
inline constexpr const char* kGwCounterNames[] = {
#define MG_COUNTER MG_COUNTER_NAME
#include "dataplane/hbone/gateway_counters.def"
#undef MG_COUNTER
};
inline constexpr const char* kGwCounterHelp[] = {
#define MG_COUNTER MG_COUNTER_HELP
#include "dataplane/hbone/gateway_counters.def"
#undef MG_COUNTER
};
inline const char* gw_counter_name(GwCounter c) { return kGwCounterNames[int(c)]; }
inline const char* gw_counter_help(GwCounter c) { return kGwCounterHelp[int(c)]; }

struct GatewayParams {
  uint16_t port = 15008;
  // HBONE connections per worker (each holds a TLS session and HTTP/2 state).
  uint32_t max_connections = 4096;
  // Connections still in their handshake (TLS, then the client's HTTP/2 SETTINGS), per worker:
  // counted apart from established ones. Past the cap the oldest handshaking connection is
  // closed for the new one, so silent connects cannot hold the listener.
  uint32_t max_handshakes = 1024;
  // Handshaking connections from one client address, per worker: past it new connections
  // from that address are refused (RST).
  uint32_t max_handshakes_per_source = 32;
  // Key of the hash that puts client addresses in their per-source buckets: random (the
  // runtime's getrandom), so a client cannot pick addresses that share another's bucket.
  uint64_t source_seed = 0;
  // HBONE buffers per worker (bytes queued toward clients, received bytes not yet passed
  // upstream): past it upstream reads stop and no HTTP/2 window is granted.
  uint64_t memory_bytes = 256ull << 20;
  Limits limits;
};

// Counters as published for other threads (relaxed stores by the worker, see publish()).
struct GatewayStats {
  uint64_t engine[kNumCounters] = {};
  uint64_t gw[kNumGwCounters] = {};
  uint64_t connections_active = 0;  // gauge
  uint64_t handshakes_active = 0;   // gauge: connections still in their handshake
  uint64_t buffer_bytes = 0;        // gauge: bytes held against GatewayParams::memory_bytes
  uint64_t tunnels_active = 0;      // gauge: streams with an upstream connection
};

class Gateway final : private ServerHooks {
 public:
  // `worker`: the index of this worker's TLS context in Snapshot::tls_contexts.
  Gateway(const GatewayParams& p, StackHost& host, uint16_t worker, uint64_t now_ns);
  ~Gateway() override;
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Once per poll iteration, after StackHost::begin() and before the stack's input: listeners
  // follow the snapshot's local addresses, a new version re-checks live tunnels, `draining`
  // sends GOAWAY once.
  void begin(const Snapshot* snap, uint64_t now_ns, bool draining);
  // Engine timers (PING, handshake timeout), at most every 100 ms; frees finished connections.
  void advance();
  void publish(bool force);

  // Takes over `client` (an established connection on the stack to `svc`), whose Maglev
  // choice `backend` has tunnel = hbone, and `head` (client bytes already read, sent first;
  // nullptr: none); the tunnel's bytes add to `route` (a listener route's counters, or
  // nullptr). Worker thread, inside the stack's events.
  void originate(tcp::TcpConnId client, const SnapService& svc, const SnapBackend& backend,
                 rte_mbuf* head, RouteCounters* route);
  // originate() as a TunnelOriginateFn (dataplane/proxy/proxy.h), `ctx` the Gateway.
  static void originate_fn(void* ctx, tcp::TcpConnId client, const SnapService& svc,
                           const SnapBackend& backend, rte_mbuf* head, RouteCounters* route) {
    static_cast<Gateway*>(ctx)->originate(client, svc, backend, head, route);
  }

  // The worker's access log: every tunnel (terminated stream or origination) writes a record
  // when it ends. Setup, before the worker starts.
  void set_access_log(AccessLog* log) { log_ = log; }

  uint16_t port() const { return p_.port; }
  const GatewayStats& stats() const { return published_; }
  uint32_t connections_active() const { return n_conns_; }

 private:
  struct Conn;
  struct Up;

  // ---- gateway.cc: HBONE connections (terminated or originated) ----
  static void on_conn(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  void conn_event(Conn* c, tcp::TcpEvent ev);
  void read_transport(Conn* c);
  // Ciphertext → the stack, then the engine's events; reports refused connects first.
  void service(Conn* c);
  void flush(Conn* c);
  void process_events(Conn* c);
  // A connection whose engine was given work by another one's events: serviced by settle().
  void mark(Conn* c) { dirty_.push_back(c); }
  // At the end of every entry point: answers refused connects, services marked connections.
  void settle();
  void destroy(Conn* c);
  Up* find_up(Conn* c, int32_t stream) const;

  // ---- terminator.cc: listeners, admission, the CONNECT hooks ----
  void sync_listeners();
  static bool accept(void* ctx, const tcp::TcpTuple& t, tcp::TcpEventFn* fn, void** user);
  static void on_accepted(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  void start(tcp::TcpConnId c);
  // Handshake-stage accounting: per-source counts in hashed buckets, oldest-first list.
  uint32_t source_bucket(const IpAddr& a) const;
  void leave_handshake(Conn* c);
  // Makes room for one more handshaking connection (closing the oldest); false when none can
  // be closed.
  bool evict_handshake();
  // Counts and says so when a new connection must be refused (drain, no certificate, limit).
  // `evict`: at the connection limit, close the oldest handshaking connection to make room.
  bool refuse(bool evict);
  // ServerHooks (inside recv_transport / recheck_authorization of `current_`).
  Resolution resolve(const Authority& authority) override;
  bool authorize(std::string_view peer_id, const Resolution& dst) override;
  void connect(int32_t stream, const Resolution& dst) override;

  // ---- originator.cc: origination, the pool, the double hop ----
  // An origination toward `pod` (its SPIFFE id `id`): pool key and CONNECT target:port with
  // `forwarded` naming src:port (and `host`) and a fresh traceparent.
  Up* new_origin(const std::string& id, const IpAddr& pod, const IpAddr& target,
                 uint16_t target_port, const IpAddr& src, uint16_t src_port,
                 std::string_view host);
  // A stream for `u` on a pooled connection (or a dial, or a wait).
  void checkout(Up* u);
  void dial(Pool::ConnId id, const PoolKey& key);
  void retry_waiting();
  void fail_waiting(const PoolKey& key);
  void reset_client(Up* u);  // an origination that cannot go on: RST the client
  // Double hop: a terminated CONNECT whose endpoint has tunnel = hbone goes on as a stream of a
  // pooled HBONE connection; the two streams are spliced (pump_bridge).
  void connect_hbone(Conn* c, int32_t stream, const Resolution& dst, uint32_t backend);

  // ---- splice.cc: tunnel bytes ----
  static void on_up(void* user, tcp::TcpConnId c, tcp::TcpEvent ev);
  void up_event(Up* u, tcp::TcpEvent ev);
  void pump_from_stream(Up* u);  // u's stream → its TCP side or bridged stream
  void pump_up(Up* u);    // upstream TCP → stream
  void pump_down(Up* u);  // stream → upstream TCP
  void maybe_finish(Up* u);
  void drop_up(Up* u, bool reset_tcp);
  void pump_bridge(Up* from, Up* to);
  // Istio metrics: opens the row of a tunnel (reporter `r`, TLS peer or own principal
  // `principal`) from `client` to backend `backend` (index into the snapshot's backends; -1:
  // the workload at `dst`) of service `svc` (null: the first service with that backend at
  // dst:dst_port).
  uint32_t istio_open(IstioReporter r, const IpAddr& client, std::string_view principal,
                      int32_t backend, const IpAddr& dst, uint16_t dst_port,
                      const SnapService* svc);
  // `n` bytes of `u` moved toward the client (`to_client`) or toward the server.
  void istio_bytes(const Up* u, bool to_client, uint64_t n);
  // `u` ends abnormally: its partner stream is reset (or answered 503, or forgotten if it had
  // no stream yet).
  void abandon_partner(Up* u);
  // The access log's record of `u`, which ends now for `why` (before it is freed).
  void log_up(const Up* u, AccessEnd why);
  // A clean end's reason: whichever side finished first.
  static AccessEnd clean_end(const Up* u);

  uint32_t now_ms() const { return uint32_t(now_ns_ / 1'000'000); }
  void count(GwCounter c, uint64_t n = 1) { gw_[int(c)] += n; }

  GatewayParams p_;
  StackHost& host_;
  tcp::TcpStack& stack_;
  uint16_t worker_;
  const Snapshot* snap_ = nullptr;
  uint64_t version_ = 0;
  uint64_t now_ns_ = 0;
  uint64_t last_timer_ms_ = 0;
  bool draining_ = false;
  std::vector<std::pair<IpAddr, uint16_t>> listening_;
  Conn* conns_ = nullptr;  // doubly linked, live connections
  std::vector<Conn*> dead_;  // ended: freed in advance()
  std::vector<Conn*> to_dial_;  // connections with accepted CONNECTs to dial in advance()
  uint64_t epoch_ = 1;          // poll iterations (advance() calls): the age of a CONNECT
  uint32_t n_conns_ = 0;
  uint32_t n_handshakes_ = 0;
  Conn* hs_head_ = nullptr;  // handshaking connections, oldest first
  Conn* hs_tail_ = nullptr;
  std::vector<uint16_t> source_handshakes_;  // kSourceBuckets, by source_bucket()
  uint64_t source_seed_ = 0;
  uint32_t n_tunnels_ = 0;
  Conn* current_ = nullptr;  // the connection whose hooks run
  Pool pool_;
  std::unordered_map<Pool::ConnId, Conn*> pool_conns_;
  std::vector<Up*> waiting_;  // originations without a stream yet
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;  // traceparent ids (new_origin)
  std::vector<std::pair<Conn*, int32_t>> refused_;  // connects that failed (answered 503)
  std::vector<Conn*> dirty_;
  AccessLog* log_ = nullptr;
  // The service resolve() chose for the CONNECT in progress, for connect() (the access log).
  char resolved_service_[kAccessServiceLen] = {};
  Counters engine_counters_;
  BufferBudget budget_;  // every connection's stream buffers ([hbone] memory_mb)
  uint64_t gw_[kNumGwCounters] = {};
  GatewayStats published_;
  uint32_t published_ms_ = 0;
};

}  // namespace meshgate::dp::hbone
