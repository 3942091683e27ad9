#include "dataplane/hbone/gateway.h"

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>

#include "dataplane/common/compiler.h"
#include "dataplane/common/hash.h"
#include "dataplane/hbone/headers.h"
#include "dataplane/hbone/resolve.h"
#include "dataplane/lb/lb.h"
#include "dataplane/packet/wire.h"
#include "dataplane/policy/policy.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::dp::hbone {

using tcp::TcpConnId;
using tcp::TcpEvent;

namespace {
// Bytes moved per copy between the stack and the engine (both copy anyway: TLS records in,
// stream data out).
constexpr size_t kChunk = 16 * 1024;
// Engine timers (PING every 10 s, handshake timeout) need no finer grain.
constexpr uint32_t kTimerPeriodMs = 100;
// Per-source handshake counts live in this many hashed buckets (a secret seed, so a client
// cannot aim at another's bucket); addresses that share one share its count.
constexpr uint32_t kSourceBuckets = 4096;
// RFC 9113 §8.5: an upstream TCP connection that ends abnormally resets the stream with
// CONNECT_ERROR; a stream reset from the client resets the upstream connection.
constexpr uint32_t kUpstreamResetCode = kH2ConnectError;
}  // namespace

const char* gw_counter_name(GwCounter c) {
  static const char* const kNames[] = {
#define X(name, help) #name,
#include "dataplane/hbone/gateway_counters.def"
#undef X
  };
  return kNames[int(c)];
}

const char* gw_counter_help(GwCounter c) {
  static const char* const kHelp[] = {
#define X(name, help) help,
#include "dataplane/hbone/gateway_counters.def"
#undef X
  };
  return kHelp[int(c)];
}

// One accepted HBONE connection.
struct Gateway::Conn {
  Gateway* gw = nullptr;
  TcpConnId tcp = tcp::kNoConn;
  std::shared_ptr<const tls::Context> tls;  // the context it started with
  std::unique_ptr<Connection> engine;
  IpAddr peer, local;
  uint16_t peer_port = 0;
  uint16_t requests = 0;  // CONNECTs seen: spreads a connection's streams over endpoints
  std::vector<Up*> ups;
  Conn* prev = nullptr;
  Conn* next = nullptr;
  bool dead = false;
  bool dial_queued = false;  // in Gateway::to_dial_: accepted CONNECTs wait for advance()
  // Handshake stage (terminated connections): TLS or the client's SETTINGS not done yet.
  bool handshaking = false;
  uint32_t source_bucket = 0;
  Conn* hs_prev = nullptr;
  Conn* hs_next = nullptr;
  // Origination: a pooled client connection to an endpoint's HBONE port.
  bool client = false;
  bool dialing = false;  // TCP handshake in flight
  Pool::ConnId pool_id = 0;  // 0: not (or no longer) in the pool
  PoolKey key;
};

// One tunnel: an HTTP/2 stream and its upstream TCP connection.
struct Gateway::Up {
  Gateway* gw = nullptr;
  Conn* conn = nullptr;  // null while an origination waits for a stream
  int32_t stream = 0;
  TcpConnId tcp = tcp::kNoConn;
  bool connected = false;   // upstream handshake done (the stream got its 200)
  bool fin_in = false;      // upstream sent FIN (→ END_STREAM once its bytes are in the stream)
  bool stream_end = false;  // we ended the stream's sending side
  bool remote_end = false;  // END_STREAM received (→ FIN upstream once the bytes are out)
  bool shut = false;        // we sent FIN upstream
  bool h2_closed = false;
  // Origination: the TCP side is the client; `connected` means the CONNECT got its 200.
  bool origin = false;
  // Double hop: the other stream of the splice (no TCP side then), or null.
  Up* bridge = nullptr;
  PoolKey key;
  ConnectRequest req;
};

Gateway::Gateway(const GatewayParams& p, StackHost& host, uint16_t worker, uint64_t now_ns)
    : p_(p), host_(host), stack_(host.stack()), worker_(worker), now_ns_(now_ns) {
  last_timer_ms_ = now_ms();
  listening_.reserve(16);
  refused_.reserve(16);
  source_handshakes_.assign(kSourceBuckets, 0);
  budget_.limit_bytes = size_t(p.memory_bytes);
  source_seed_ = p.source_seed ^ uint64_t(worker);
  to_dial_.reserve(64);
}

Gateway::~Gateway() {
  while (conns_ != nullptr) destroy(conns_);
  for (Up* u : waiting_) {  // originations still waiting for a stream (their partners are gone)
    if (u->tcp != tcp::kNoConn) stack_.abort(u->tcp);
    delete u;
  }
  waiting_.clear();
  for (Conn* c : dead_) delete c;
}

// ---- worker interface -----------------------------------------------------------------------

void Gateway::begin(const Snapshot* snap, uint64_t now_ns, bool draining) {
  snap_ = snap;
  if (now_ns > now_ns_) now_ns_ = now_ns;
  if (snap_ == nullptr) return;
  if (snap_->version != version_) {
    version_ = snap_->version;
    sync_listeners();
    // The policies may have changed: every live tunnel is authorized again.
    for (Conn* c = conns_; c != nullptr;) {
      Conn* next = c->next;
      current_ = c;
      c->engine->recheck_authorization();
      service(c);
      c = next;
    }
    settle();
  }
  if (draining && !draining_) {
    draining_ = true;
    for (Conn* c = conns_; c != nullptr;) {
      Conn* next = c->next;
      c->engine->drain();  // GOAWAY(NO_ERROR): open streams finish
      service(c);
      c = next;
    }
    settle();
  }
}

void Gateway::advance() {
  // CONNECTs accepted during the previous poll iteration are dialled now, after one more
  // burst was received: a stream its client reset meanwhile (rapid reset: the RST right behind
  // the HEADERS, often in the next segment) costs no upstream connect. Younger ones wait.
  if (!to_dial_.empty()) {
    size_t kept = 0;
    for (size_t i = 0; i < to_dial_.size(); ++i) {
      Conn* c = to_dial_[i];
      if (c->dead) {
        c->dial_queued = false;
        continue;
      }
      current_ = c;
      c->engine->dispatch_connects(epoch_ - 1);
      service(c);
      if (!c->dead && c->engine->has_pending_connects()) {
        to_dial_[kept++] = c;
      } else {
        c->dial_queued = false;
      }
    }
    to_dial_.resize(kept);
    settle();
  }
  ++epoch_;
  if (budget_.waiting && budget_.used_bytes <= budget_.resume_bytes()) {
    // Memory came back: windows held closed reopen, writers held back resume.
    budget_.waiting = false;
    for (Conn* c = conns_; c != nullptr;) {
      Conn* next = c->next;
      c->engine->budget_room_back();
      service(c);
      c = next;
    }
    settle();
  }
  const uint32_t now = now_ms();
  if (now - last_timer_ms_ >= kTimerPeriodMs) {
    last_timer_ms_ = now;
    for (Conn* c = conns_; c != nullptr;) {
      Conn* next = c->next;
      c->engine->on_timer(now);
      service(c);
      c = next;
    }
    // Pooled connections idle for 5 minutes: GOAWAY, then closed.
    for (const Pool::ConnId id : pool_.expire(now)) {
      const auto it = pool_conns_.find(id);
      if (it == pool_conns_.end()) continue;
      Conn* c = it->second;
      pool_conns_.erase(it);
      c->pool_id = 0;
      c->engine->drain();
      service(c);
    }
    settle();
  }
  for (Conn* c : dead_) delete c;
  dead_.clear();
}

void Gateway::publish(bool force) {
  if (!force && now_ms() == published_ms_) return;
  published_ms_ = now_ms();
  auto put = [](uint64_t& dst, uint64_t v) {
    std::atomic_ref<uint64_t>(dst).store(v, std::memory_order_relaxed);
  };
  for (int i = 0; i < kNumCounters; ++i) put(published_.engine[i], engine_counters_.v[i]);
  for (int i = 0; i < kNumGwCounters; ++i) put(published_.gw[i], gw_[i]);
  put(published_.connections_active, n_conns_);
  put(published_.handshakes_active, n_handshakes_);
  put(published_.buffer_bytes, budget_.used_bytes);
  put(published_.tunnels_active, n_tunnels_);
}

void Gateway::sync_listeners() {
  const std::vector<IpAddr>& want = snap_->local_addresses;
  for (size_t i = 0; i < listening_.size();) {
    if (std::find(want.begin(), want.end(), listening_[i].first) != want.end()) {
      ++i;
      continue;
    }
    host_.unlisten(listening_[i].first, p_.port);  // established connections carry on
    listening_[i] = listening_.back();
    listening_.pop_back();
  }
  for (const IpAddr& a : want) {
    const bool have = std::any_of(listening_.begin(), listening_.end(),
                                  [&](const auto& l) { return l.first == a; });
    if (!have && host_.listen(a, p_.port, &Gateway::accept, this) == tcp::TcpError::kOk) {
      listening_.emplace_back(a, p_.port);
    }
  }
}

// ---- connections ----------------------------------------------------------------------------

bool Gateway::refuse(bool evict) {
  GwCounter why = draining_ ? GwCounter::k_refused_draining
                  : snap_ == nullptr || snap_->tls_contexts.size() <= worker_
                      ? GwCounter::k_refused_no_certificate
                      : GwCounter::kCount;
  // At the connection limit a handshaking connection gives way (established tunnels stay):
  // the limit refuses only when every connection finished its handshake. A SYN only checks
  // (it may never complete); the connection that completed its TCP handshake evicts.
  if (why == GwCounter::kCount && n_conns_ >= p_.max_connections &&
      (evict ? !evict_handshake() : n_handshakes_ == 0)) {
    why = GwCounter::k_refused_limit;
  }
  if (why == GwCounter::kCount) return false;
  count(why);
  return true;
}

uint32_t Gateway::source_bucket(const IpAddr& a) const {
  return uint32_t(hash64(a.b, sizeof a.b, source_seed_) % kSourceBuckets);
}

void Gateway::leave_handshake(Conn* c) {
  if (!c->handshaking) return;
  c->handshaking = false;
  --source_handshakes_[c->source_bucket];
  --n_handshakes_;
  if (c->hs_prev != nullptr) c->hs_prev->hs_next = c->hs_next;
  if (c->hs_next != nullptr) c->hs_next->hs_prev = c->hs_prev;
  if (hs_head_ == c) hs_head_ = c->hs_next;
  if (hs_tail_ == c) hs_tail_ = c->hs_prev;
  c->hs_prev = c->hs_next = nullptr;
}

bool Gateway::evict_handshake() {
  Conn* old = hs_head_;
  if (old == nullptr) return false;
  count(GwCounter::k_handshakes_evicted);
  old->engine->abort();
  if (old->tcp != tcp::kNoConn) {
    stack_.abort(old->tcp);  // RST: its handshake will not finish
    old->tcp = tcp::kNoConn;
  }
  service(old);  // kClosed → destroy()
  return true;
}

bool Gateway::accept(void* ctx, const tcp::TcpTuple& t, tcp::TcpEventFn* fn, void** user) {
  Gateway* g = static_cast<Gateway*>(ctx);
  if (g->refuse(false)) return false;
  if (g->source_handshakes_[g->source_bucket(t.remote)] >= g->p_.max_handshakes_per_source) {
    g->count(GwCounter::k_refused_source_limit);
    return false;
  }
  *fn = &Gateway::on_accepted;
  *user = g;
  return true;
}

void Gateway::on_accepted(void* user, TcpConnId c, TcpEvent ev) {
  Gateway* g = static_cast<Gateway*>(user);
  if (ev == TcpEvent::kConnected) {
    g->start(c);
  } else {
    g->stack_.abort(c);  // not reached: kConnected always comes first
  }
}

void Gateway::start(TcpConnId tc) {
  tcp::TcpConnInfo ci;
  if (!stack_.info(tc, &ci)) return;
  if (refuse(true)) {  // the snapshot or the drain changed since the SYN, or the limit
    stack_.abort(tc);
    return;
  }
  // SYNs of one source may all have passed accept() before any of them got here.
  const uint32_t bucket = source_bucket(ci.tuple.remote);
  if (source_handshakes_[bucket] >= p_.max_handshakes_per_source) {
    count(GwCounter::k_refused_source_limit);
    stack_.abort(tc);
    return;
  }
  if (n_handshakes_ >= p_.max_handshakes) evict_handshake();
  Conn* c = new Conn();
  c->gw = this;
  c->tcp = tc;
  c->tls = snap_->tls_contexts[worker_];
  c->engine = Connection::server(*c->tls, *this, engine_counters_, now_ms(), p_.limits);
  c->engine->set_defer_connects(true);  // dialled in advance()
  c->engine->set_budget(&budget_);
  c->peer = ci.tuple.remote;
  c->peer_port = ci.tuple.remote_port;
  c->local = ci.tuple.local;
  c->next = conns_;
  if (conns_ != nullptr) conns_->prev = c;
  conns_ = c;
  ++n_conns_;
  c->handshaking = true;
  c->source_bucket = bucket;
  ++source_handshakes_[bucket];
  ++n_handshakes_;
  c->hs_prev = hs_tail_;
  if (hs_tail_ != nullptr) hs_tail_->hs_next = c;
  hs_tail_ = c;
  if (hs_head_ == nullptr) hs_head_ = c;
  count(GwCounter::k_accepted);
  stack_.set_user(tc, &Gateway::on_conn, c);
}

void Gateway::on_conn(void* user, TcpConnId, TcpEvent ev) {
  Conn* c = static_cast<Conn*>(user);
  c->gw->conn_event(c, ev);
}

void Gateway::on_up(void* user, TcpConnId, TcpEvent ev) {
  Up* u = static_cast<Up*>(user);
  u->gw->up_event(u, ev);
}

void Gateway::conn_event(Conn* c, TcpEvent ev) {
  if (c->dead) return;
  switch (ev) {
    case TcpEvent::kConnected:
      c->dialing = false;  // an origination's dial: the ClientHello goes out below
      break;
    case TcpEvent::kReadable:
      read_transport(c);
      break;
    case TcpEvent::kWritable:
      break;  // service() below moves the waiting ciphertext
    case TcpEvent::kPeerFin:
      read_transport(c);  // the bytes before the FIN
      if (!c->dead) c->engine->recv_transport_eof(now_ms());
      break;
    case TcpEvent::kReset:
    case TcpEvent::kClosed:
      // The transport is gone: nothing more can be sent (kClosed follows from the engine).
      read_transport(c);
      if (!c->dead) c->engine->abort();
      break;
  }
  service(c);
  settle();
}

void Gateway::read_transport(Conn* c) {
  uint8_t buf[kChunk];
  while (!c->dead && !c->engine->closed()) {
    const uint32_t n = stack_.recv(c->tcp, buf, sizeof buf);
    if (n == 0) break;
    current_ = c;
    c->engine->set_epoch(epoch_);
    c->engine->recv_transport(buf, n, now_ms());
  }
  if (!c->dead && !c->dial_queued && c->engine->has_pending_connects()) {
    c->dial_queued = true;
    to_dial_.push_back(c);
  }
}

void Gateway::settle() {
  while (!refused_.empty() || !dirty_.empty()) {
    std::vector<std::pair<Conn*, int32_t>> refused;
    refused.swap(refused_);
    for (const auto& [c, stream] : refused) {
      if (c->dead) continue;
      c->engine->upstream_connected(stream, false);  // 503
      mark(c);
    }
    std::vector<Conn*> dirty;
    dirty.swap(dirty_);
    for (Conn* c : dirty) service(c);
  }
}

void Gateway::service(Conn* c) {
  if (c->dead) return;
  flush(c);
  process_events(c);
  if (c->handshaking && !c->dead && c->engine->ready()) leave_handshake(c);
}

void Gateway::flush(Conn* c) {
  if (c->tcp == tcp::kNoConn || c->dialing) return;
  const ByteQueue& q = c->engine->transport_out();
  while (!q.empty()) {
    const uint32_t n = stack_.send(c->tcp, q.data(), uint32_t(std::min<size_t>(q.size(), UINT32_MAX)));
    if (n == 0) break;  // kWritable follows when the send buffer has room
    c->engine->transport_out_consumed(n);
  }
}

Gateway::Up* Gateway::find_up(Conn* c, int32_t stream) const {
  for (Up* u : c->ups) {
    if (u->stream == stream) return u;
  }
  return nullptr;
}

void Gateway::process_events(Conn* c) {
  Event ev;
  while (!c->dead && c->engine->poll_event(ev)) {
    Up* u = find_up(c, ev.stream);
    switch (ev.kind) {
      case EventKind::kEstablished:
        if (c->client && c->pool_id != 0) {
          pool_.dial_done(c->pool_id, true, p_.limits.client_max_streams, now_ms());
          retry_waiting();
        }
        break;
      case EventKind::kStreamResponse:
        if (u != nullptr && u->origin && ev.code == 200) {
          u->connected = true;
          count(GwCounter::k_origin_established);
          if (Up* a = u->bridge) {
            // Double hop: the terminated CONNECT gets its 200 now.
            a->connected = true;
            count(GwCounter::k_upstream_connected);
            a->conn->engine->upstream_connected(a->stream, true);
            mark(a->conn);
            pump_bridge(a, u);
            pump_bridge(u, a);
          } else {
            pump_up(u);  // client bytes that waited in its window
            pump_down(u);
          }
        }
        break;  // any other status: the engine resets the stream (kStreamReset follows)
      case EventKind::kGoaway:
        if (c->client && c->pool_id != 0) {
          const bool idle = pool_.retire(c->pool_id);
          pool_conns_.erase(c->pool_id);
          c->pool_id = 0;
          if (idle) c->engine->drain();
        }
        break;
      case EventKind::kStreamReadable:
        if (u != nullptr) pump_from_stream(u);
        break;
      case EventKind::kStreamRemoteEnd:
        if (u == nullptr) break;
        u->remote_end = true;
        pump_from_stream(u);
        break;
      case EventKind::kStreamWritable:
        if (u == nullptr) break;
        if (u->bridge != nullptr) {
          pump_bridge(u->bridge, u);
        } else {
          pump_up(u);
        }
        break;
      case EventKind::kStreamReset:
        if (u == nullptr) break;
        if (u->connected && is_clean_reset(ev.code)) {
          // specs/hbone.md: NO_ERROR or CANCEL is a clean end (nghttpx ends CONNECT streams so
          // once its upstream closed): what the stream delivered goes out, then FIN.
          u->remote_end = true;
          pump_from_stream(u);
        } else {
          count(GwCounter::k_tunnels_closed);
          if (u->origin && u->bridge != nullptr && !u->connected) {
            count(GwCounter::k_upstream_failed);  // double hop: the next hop refused
          } else if (u->origin && u->bridge == nullptr) {
            count(GwCounter::k_origin_client_resets);
          }
          drop_up(u, true);
        }
        break;
      case EventKind::kStreamClosed:
        if (c->client && c->pool_id != 0 && pool_.release(c->pool_id, now_ms())) {
          c->engine->drain();  // retired, and this was its last stream
        }
        if (u == nullptr) {
          c->engine->stream_release(ev.stream);  // rejected (400/401/503), or its upstream is gone
        } else if ((u->tcp == tcp::kNoConn && u->bridge == nullptr) ||
                   (ev.code != 0 && !u->remote_end)) {
          count(GwCounter::k_tunnels_closed);
          drop_up(u, true);
          c->engine->stream_release(ev.stream);
        } else {
          u->h2_closed = true;
          maybe_finish(u);
        }
        break;
      case EventKind::kClosed:
        flush(c);  // a last alert or GOAWAY
        destroy(c);
        return;
    }
  }
  flush(c);
}

void Gateway::destroy(Conn* c) {
  if (c->dead) return;
  c->dead = true;
  leave_handshake(c);
  for (Up* u : c->ups) {
    if (u->tcp != tcp::kNoConn) stack_.abort(u->tcp);
    abandon_partner(u);
    if (u->origin && u->tcp != tcp::kNoConn) count(GwCounter::k_origin_client_resets);
    delete u;
    --n_tunnels_;
  }
  c->ups.clear();
  if (c->client && c->pool_id != 0) {
    pool_conns_.erase(c->pool_id);
    if (c->engine->established()) {
      pool_.retire(c->pool_id);
    } else {
      // The dial failed (TCP, TLS, identity): the clients waiting for it are reset.
      count(GwCounter::k_origin_dial_failed);
      pool_.dial_done(c->pool_id, false, 0, now_ms());
      fail_waiting(c->key);
    }
    c->pool_id = 0;
  }
  if (c->tcp != tcp::kNoConn) {
    // FIN after the last ciphertext (a GOAWAY, an alert): close() resets instead when unread
    // bytes are left, and a RST can make the peer lose what we sent last (RFC 9113 6.8). What
    // the peer sent past our end is of no use: dropped (bounded by the receive buffer).
    uint8_t buf[kChunk];
    while (stack_.recv(c->tcp, buf, sizeof buf) > 0) {
    }
    stack_.close(c->tcp);
    c->tcp = tcp::kNoConn;
  }
  if (c->prev != nullptr) c->prev->next = c->next;
  if (c->next != nullptr) c->next->prev = c->prev;
  if (conns_ == c) conns_ = c->next;
  --n_conns_;
  count(GwCounter::k_connections_closed);
  dead_.push_back(c);  // its engine may still be on the call stack
}

// ---- tunnels --------------------------------------------------------------------------------

Resolution Gateway::resolve(const Authority& a) {
  Conn* c = current_;
  // The peer's address and port and its request count: one client's streams spread over the
  // service's endpoints the way separate connections would.
  const uint32_t h = lb_flow_hash(c->peer, c->local, htons(c->peer_port), htons(++c->requests),
                                  kProtoTcp);
  return hbone::resolve(*snap_, a, h).resolution();
}

bool Gateway::authorize(std::string_view peer_id, const Resolution& dst) {
  policy::Request req;
  policy::set_identity(req, peer_id);
  req.src_ip = current_->peer;
  req.dst_ip = dst.ip;
  req.dst_port = dst.port;
  // The destination's workload in this snapshot (a re-check may run on a newer one than the
  // resolution): its identity's namespace and its selector policies.
  int32_t bi = snap_->find_workload(dst.ip, htons(dst.port), kProtoTcp);
  if (bi < 0) bi = snap_->find_backend(dst.ip, htons(dst.port), kProtoTcp);  // a VIP's static pick
  const std::vector<const policy::Policy*> pols = policies_for(*snap_, bi);
  return policy::evaluate(pols, req).allow;
}

void Gateway::connect(int32_t stream, const Resolution& dst) {
  Conn* c = current_;
  count(GwCounter::k_upstream_connects);
  const uint64_t bi = dst.cookie - 1;  // resolve(): the endpoint's index in this snapshot
  if (dst.cookie != 0 && bi < snap_->backends.size() &&
      snap_->backends[bi].tunnel == Tunnel::kHbone) {
    connect_hbone(c, stream, dst, uint32_t(bi));
    return;
  }
  Up* u = new Up();
  u->gw = this;
  u->conn = c;
  u->stream = stream;
  const uint32_t h = lb_flow_hash(c->peer, dst.ip, htons(c->peer_port), htons(dst.port), kProtoTcp);
  if (host_.connect(dst.ip, htons(dst.port), h, &Gateway::on_up, u, &u->tcp) !=
      tcp::TcpError::kOk) {
    count(GwCounter::k_upstream_failed);
    delete u;
    refused_.emplace_back(c, stream);
    return;
  }
  c->ups.push_back(u);
  ++n_tunnels_;
}

void Gateway::up_event(Up* u, TcpEvent ev) {
  Conn* c = u->conn;
  switch (ev) {
    case TcpEvent::kConnected:
      u->connected = true;
      count(GwCounter::k_upstream_connected);
      c->engine->upstream_connected(u->stream, true);
      pump_down(u);  // bytes that came with the request
      break;
    case TcpEvent::kReadable:
      pump_up(u);
      break;
    case TcpEvent::kPeerFin:
      u->fin_in = true;
      pump_up(u);
      break;
    case TcpEvent::kWritable:
      pump_down(u);
      break;
    case TcpEvent::kReset:
    case TcpEvent::kClosed:
      if (u->origin && !u->connected) {
        // The client went away before its tunnel opened.
        count(GwCounter::k_origin_client_resets);
        if (c == nullptr) {
          waiting_.erase(std::find(waiting_.begin(), waiting_.end(), u));
          stack_.abort(u->tcp);
          delete u;
          return;
        }
        const int32_t stream = u->stream;
        drop_up(u, true);
        c->engine->stream_reset(stream, 8);  // CANCEL
      } else if (!u->connected) {
        // Refused (RST) or the handshake timed out: 503.
        count(GwCounter::k_upstream_failed);
        const int32_t stream = u->stream;
        drop_up(u, false);
        c->engine->upstream_connected(stream, false);
      } else if (ev == TcpEvent::kClosed && u->fin_in && u->shut) {
        // Both directions ended and acknowledged: bytes still unread go on as the stream
        // takes them; maybe_finish() releases the handle.
        pump_up(u);
      } else {
        pump_up(u);  // what arrived before the reset
        count(GwCounter::k_upstream_resets);
        const int32_t stream = u->stream;
        drop_up(u, false);
        c->engine->stream_reset(stream, kUpstreamResetCode);
      }
      break;
  }
  if (c != nullptr) service(c);
  settle();
}

void Gateway::pump_from_stream(Up* u) {
  if (u->bridge != nullptr) {
    pump_bridge(u, u->bridge);
  } else {
    pump_down(u);
  }
}

void Gateway::pump_up(Up* u) {
  if (!u->connected || u->tcp == tcp::kNoConn || u->stream_end) return;
  Connection& e = *u->conn->engine;
  uint8_t buf[kChunk];
  uint64_t moved = 0;
  for (;;) {
    const size_t room = e.stream_send_room(u->stream);
    if (room == 0) {
      // Full send budget: asks for kStreamWritable (takes nothing); the upstream's unread
      // bytes close its TCP window meanwhile.
      e.stream_write(u->stream, buf, 1);
      break;
    }
    const uint32_t n = stack_.recv(u->tcp, buf, uint32_t(std::min(room, sizeof buf)));
    if (n == 0) break;
    e.stream_write(u->stream, buf, n);  // n <= room: all taken
    moved += n;
  }
  count(GwCounter::k_bytes_from_upstream, moved);
  tcp::TcpConnInfo ci;
  if (u->fin_in && (!stack_.info(u->tcp, &ci) || ci.recv_queued == 0)) {
    e.stream_shutdown(u->stream);  // FIN → END_STREAM after the bytes before it
    u->stream_end = true;
  }
}

void Gateway::pump_down(Up* u) {
  if (!u->connected || u->tcp == tcp::kNoConn) return;
  Connection& e = *u->conn->engine;
  uint8_t buf[kChunk];
  uint64_t moved = 0;
  for (;;) {
    const size_t avail = e.stream_readable(u->stream);
    if (avail == 0) break;
    const uint32_t space = stack_.send_space(u->tcp);
    if (space == 0) {
      stack_.request_writable(u->tcp);  // the stream's window stays closed meanwhile
      break;
    }
    const size_t n = e.stream_read(u->stream, buf, std::min({avail, sizeof buf, size_t(space)}));
    if (n == 0) break;
    const uint32_t sent = stack_.send(u->tcp, buf, uint32_t(n));
    moved += sent;
    if (sent < n) {
      // Out of mbufs: the bytes read cannot be put back, so the tunnel cannot stay exact.
      count(GwCounter::k_upstream_resets);
      count(GwCounter::k_bytes_to_upstream, moved);
      const int32_t stream = u->stream;
      Conn* c = u->conn;
      drop_up(u, true);
      c->engine->stream_reset(stream, kUpstreamResetCode);
      return;
    }
  }
  count(GwCounter::k_bytes_to_upstream, moved);
  if (u->remote_end && !u->shut && e.stream_readable(u->stream) == 0) {
    stack_.shutdown_write(u->tcp);  // END_STREAM → FIN; the other direction keeps flowing
    u->shut = true;
  }
  maybe_finish(u);
}

void Gateway::maybe_finish(Up* u) {
  if (!u->h2_closed) return;
  Conn* c = u->conn;
  if (c->engine->stream_readable(u->stream) != 0) return;
  const int32_t stream = u->stream;
  count(GwCounter::k_tunnels_closed);
  drop_up(u, false);  // close(): FIN after what is queued, or RST if upstream bytes are unread
  c->engine->stream_release(stream);
}

void Gateway::drop_up(Up* u, bool reset_tcp) {
  Conn* c = u->conn;
  if (reset_tcp) {
    abandon_partner(u);
  } else if (u->bridge != nullptr) {
    u->bridge->bridge = nullptr;  // both streams ended: the partner finishes on its own
    u->bridge = nullptr;
  }
  if (u->tcp != tcp::kNoConn) {
    if (reset_tcp) {
      stack_.abort(u->tcp);
    } else {
      stack_.close(u->tcp);
    }
  }
  c->ups.erase(std::find(c->ups.begin(), c->ups.end(), u));
  delete u;
  --n_tunnels_;
}

}  // namespace meshgate::dp::hbone

namespace meshgate::dp::hbone {

// ---- origination ----------------------------------------------------------------------------

void Gateway::originate(TcpConnId client, const SnapService& svc, const SnapBackend& be) {
  count(GwCounter::k_originated);
  const std::string& id = snap_->identity_of(be);
  tcp::TcpConnInfo ci;
  if (id.empty() || snap_->tls_contexts.size() <= worker_ || draining_ ||
      !stack_.info(client, &ci)) {
    // Without the endpoint's identity the server cannot be verified; without a certificate we
    // cannot prove ours.
    count(GwCounter::k_origin_no_identity);
    stack_.abort(client);
    return;
  }
  Up* u = new_origin(id, be.address, be.address, ntohs(be.port_be), ci.tuple.remote,
                     ci.tuple.remote_port, svc.hostname);
  u->tcp = client;
  BaggageFields b;
  b.service_name = svc.hostname.empty() ? svc.name : svc.hostname;
  u->req.baggage = baggage_header(b);
  stack_.set_user(client, &Gateway::on_up, u);
  checkout(u);
  settle();
}

Gateway::Up* Gateway::new_origin(const std::string& id, const IpAddr& pod, const IpAddr& target,
                                 uint16_t target_port, const IpAddr& src, uint16_t src_port,
                                 std::string_view host) {
  Up* u = new Up();
  u->gw = this;
  u->origin = true;
  u->key = PoolKey(snap_->tls_contexts[worker_]->own_id(), {id}, pod, p_.port, IpAddr());
  // specs/hbone.md "CONNECT request": the pod address and target port, and where the bytes
  // come from.
  u->req.authority = authority_of(target, target_port);
  u->req.forwarded = forwarded_header(src, src_port, host);
  auto next = [this] {  // xorshift64: trace ids need no secrecy
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  };
  u->req.traceparent = traceparent_header(next(), next(), next());
  return u;
}

void Gateway::checkout(Up* u) {
  const Pool::Checkout co = pool_.acquire(u->key, now_ms());
  if (co.action != Pool::Action::kUse) {
    waiting_.push_back(u);
    if (co.action == Pool::Action::kDial) dial(co.conn, u->key);
    return;
  }
  Conn* c = pool_conns_.at(co.conn);
  const int32_t stream = c->engine->open_stream(u->req);
  if (stream < 0) {
    pool_.release(co.conn, now_ms());
    reset_client(u);
    return;
  }
  count(GwCounter::k_origin_streams);
  u->conn = c;
  u->stream = stream;
  c->ups.push_back(u);
  ++n_tunnels_;
  flush(c);
}

void Gateway::dial(Pool::ConnId id, const PoolKey& key) {
  Conn* c = new Conn();
  c->gw = this;
  c->client = true;
  c->dialing = true;
  c->pool_id = id;
  c->key = key;
  c->tls = snap_->tls_contexts[worker_];
  c->engine = Connection::client(*c->tls, key.dst_identities, engine_counters_, now_ms(), p_.limits);
  c->engine->set_budget(&budget_);
  c->peer = key.dst_ip;
  c->peer_port = key.dst_port;
  count(GwCounter::k_origin_dials);
  const uint32_t h = lb_flow_hash(key.dst_ip, key.dst_ip, htons(uint16_t(id)), htons(key.dst_port),
                                  kProtoTcp);
  if (host_.connect(key.dst_ip, htons(key.dst_port), h, &Gateway::on_conn, c, &c->tcp) !=
      tcp::TcpError::kOk) {
    count(GwCounter::k_origin_dial_failed);
    pool_.dial_done(id, false, 0, now_ms());
    delete c;
    fail_waiting(key);
    return;
  }
  c->next = conns_;
  if (conns_ != nullptr) conns_->prev = c;
  conns_ = c;
  ++n_conns_;
  pool_conns_[id] = c;
}

void Gateway::retry_waiting() {
  std::vector<Up*> w;
  w.swap(waiting_);
  for (Up* u : w) checkout(u);
}

void Gateway::fail_waiting(const PoolKey& key) {
  for (size_t i = 0; i < waiting_.size();) {
    Up* u = waiting_[i];
    if (!(u->key == key)) {
      ++i;
      continue;
    }
    waiting_.erase(waiting_.begin() + ptrdiff_t(i));
    reset_client(u);
  }
}

void Gateway::reset_client(Up* u) {
  if (u->bridge != nullptr) {
    count(GwCounter::k_upstream_failed);
    abandon_partner(u);  // the terminated CONNECT is answered 503
  } else {
    count(GwCounter::k_origin_client_resets);
    stack_.abort(u->tcp);
  }
  delete u;
}

// ---- double hop -----------------------------------------------------------------------------

void Gateway::connect_hbone(Conn* c, int32_t stream, const Resolution& dst, uint32_t bi) {
  const SnapBackend& be = snap_->backends[bi];
  const std::string& id = snap_->identity_of(be);
  if (id.empty() || snap_->tls_contexts.size() <= worker_) {
    count(GwCounter::k_origin_no_identity);
    count(GwCounter::k_upstream_failed);
    refused_.emplace_back(c, stream);
    return;
  }
  count(GwCounter::k_upstream_hbone);
  Up* a = new Up();
  a->gw = this;
  a->conn = c;
  a->stream = stream;
  c->ups.push_back(a);
  ++n_tunnels_;
  Up* b = new_origin(id, be.address, dst.ip, dst.port, c->peer, c->peer_port, "");
  b->bridge = a;
  a->bridge = b;
  checkout(b);
}

void Gateway::pump_bridge(Up* from, Up* to) {
  if (from->bridge != to || !from->connected || !to->connected) return;
  Connection& fe = *from->conn->engine;
  Connection& te = *to->conn->engine;
  uint8_t buf[kChunk];
  uint64_t moved = 0;
  for (;;) {
    const size_t avail = fe.stream_readable(from->stream);
    if (avail == 0) break;
    const size_t room = te.stream_send_room(to->stream);
    if (room == 0) {
      te.stream_write(to->stream, buf, 1);  // asks for kStreamWritable on `to`; takes nothing
      break;
    }
    const size_t n = fe.stream_read(from->stream, buf, std::min({avail, room, sizeof buf}));
    if (n == 0) break;
    te.stream_write(to->stream, buf, n);  // n <= room: all taken
    moved += n;
  }
  count(from->origin ? GwCounter::k_bytes_from_upstream : GwCounter::k_bytes_to_upstream, moved);
  if (from->remote_end && !to->stream_end && fe.stream_readable(from->stream) == 0) {
    te.stream_shutdown(to->stream);  // END_STREAM on after the bytes before it
    to->stream_end = true;
  }
  mark(from->conn);  // window updates
  mark(to->conn);
  maybe_finish(from);
}

void Gateway::abandon_partner(Up* u) {
  Up* p = u->bridge;
  if (p == nullptr) return;
  u->bridge = nullptr;
  p->bridge = nullptr;
  if (p->conn == nullptr) {  // an origination still waiting for a stream
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), p));
    delete p;
    return;
  }
  if (!p->connected && !p->origin) {
    refused_.emplace_back(p->conn, p->stream);  // the terminated CONNECT: 503
  } else {
    p->conn->engine->stream_reset(p->stream, p->connected ? kH2ConnectError : 8);
  }
  mark(p->conn);
}

}  // namespace meshgate::dp::hbone
