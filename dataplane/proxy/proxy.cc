#include "dataplane/proxy/proxy.h"

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include <atomic>
#include <cstddef>

#include "dataplane/lb/lb.h"
#include "dataplane/proxy/proxy_protocol.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/worker/counters.h"
#include "dataplane/worker/flow_dump.h"

namespace meshgate::dp {

using tcp::TcpConnId;
using tcp::TcpEvent;
using tcp::TcpTuple;

namespace {
constexpr int kClient = 0;
constexpr int kBackend = 1;
// Idle timers fired per poll iteration at most (the rest fire on the next one).
constexpr uint32_t kIdleTimerBudget = 256;
}  // namespace

Proxy::Proxy(const ProxyParams& p, const ProxyDeps& d, uint64_t now_ns)
    : p_(p), d_(d), host_(*d.host), stack_(d.host->stack()), now_ns_(now_ns) {
  MG_CHECK(p_.max_sessions > 0);
  idle_wheel_.init(now_ms());
  sessions_ = std::make_unique<Session[]>(p_.max_sessions);
  for (uint32_t i = 0; i < p_.max_sessions; ++i) {
    sessions_[i].next_free = i + 2 <= p_.max_sessions ? i + 2 : 0;
    sessions_[i].proxy = this;
    sessions_[i].idle.fn = &Proxy::on_idle;
  }
  free_head_ = 1;
  listener_counters_ = std::make_unique<ListenerCounters[]>(kMaxListenerStats);
  route_counters_ = std::make_unique<RouteCounters[]>(kMaxRouteStats);
  deny_counters_ = std::make_unique<uint64_t[]>(kMaxDenyStats);
  peek_buf_ = std::make_unique<uint8_t[]>(kMaxPeekBytes);
  peek_name_ = std::make_unique<names::Name>();
  if (d_.access_log != nullptr && d_.access_log->on()) {
    log_ = std::make_unique<SessionLog[]>(p_.max_sessions);
  }
  // Control thread (Worker::init): the arena is the worker's from now on.
  setup_ok_ = !p_.deny || arena_.init(names::kMaxDenyStreamBytes, p_.max_sessions, SOCKET_ID_ANY);
  listening_.reserve(p_.tcp.max_listeners);
  wanted_.reserve(p_.tcp.max_listeners);
}

Proxy::~Proxy() {
  for (uint32_t i = 0; i < p_.max_sessions; ++i) {
    sessions_[i].deny.close();  // before the arena its state is in goes
    for (rte_mbuf* m : sessions_[i].pending) {
      if (m != nullptr) rte_pktmbuf_free(m);
    }
  }
}

// ---- worker interface -----------------------------------------------------------------------

void Proxy::begin(const Snapshot* snap, uint64_t now_ns, bool draining) {
  snap_ = snap;
  if (now_ns > now_ns_) now_ns_ = now_ns;
  draining_ = draining;
  if (snap_ != nullptr && snap_->version != listeners_version_) sync_listeners();
}

void Proxy::advance() { idle_wheel_.advance(now_ms(), kIdleTimerBudget, this); }

void Proxy::publish(bool force) {
  if (!force && now_ms() == published_ms_) return;
  published_ms_ = now_ms();
  auto put = [](uint64_t& dst, uint64_t v) {
    std::atomic_ref<uint64_t>(dst).store(v, std::memory_order_relaxed);
  };
  counters_[kPxTxQueueFull] = host_.output_dropped();
  for (uint32_t i = 0; i < kProxyCounterCount; ++i) put(published_.proxy[i], counters_[i]);
  const tcp::TcpCounters& tc = stack_.counters();
  for (uint32_t i = 0; i < tcp::kTcpCounterCount; ++i) put(published_.tcp[i], tc.v[i]);
  put(published_.sessions_active, sessions_active_);
  put(published_.tcp_connections, stack_.connections());
  put(published_.tcp_mem_bytes, stack_.mem_used());
  put(published_.inspect_bytes, arena_.bytes_in_use());
}

// ---- listeners ------------------------------------------------------------------------------

void Proxy::sync_listeners() {
  listeners_version_ = snap_->version;
  wanted_.clear();
  for (const SnapService& s : snap_->services) {
    if (s.mode != Mode::kProxy || s.proto != kProtoTcp) continue;
    if (wanted_.size() == wanted_.capacity()) break;  // more proxy VIPs than max_listeners
    wanted_.push_back(ListenKey{s.vip, ntohs(s.port_be)});
  }
  auto has = [](const std::vector<ListenKey>& v, const ListenKey& k) {
    for (const ListenKey& x : v) {
      if (x.port == k.port && x.vip == k.vip) return true;
    }
    return false;
  };
  // Gone services stop accepting; their established connections carry on.
  for (size_t i = 0; i < listening_.size();) {
    if (has(wanted_, listening_[i])) {
      ++i;
      continue;
    }
    host_.unlisten(listening_[i].vip, listening_[i].port);
    listening_[i] = listening_.back();
    listening_.pop_back();
  }
  for (const ListenKey& k : wanted_) {
    if (has(listening_, k)) continue;
    if (host_.listen(k.vip, k.port, &Proxy::accept, this) == tcp::TcpError::kOk) {
      listening_.push_back(k);
    }
  }
}

bool Proxy::accept(void* ctx, const TcpTuple& t, tcp::TcpEventFn* fn, void** user) {
  Proxy* p = static_cast<Proxy*>(ctx);
  if (p->draining_) {
    p->count(kPxRefusedDraining);
    return false;
  }
  if (p->entry_of(t) == nullptr) {
    p->count(kPxRefusedNoService);
    return false;
  }
  // No session yet: this SYN may still end in a SYN cookie or a handshake that never
  // completes. The session starts with kConnected (on_accepted).
  *fn = &Proxy::on_accepted;
  *user = p;
  return true;
}

// ---- sessions -------------------------------------------------------------------------------

Proxy::Session* Proxy::alloc_session() {
  if (free_head_ == 0) return nullptr;
  Session* s = &sessions_[free_head_ - 1];
  free_head_ = s->next_free;
  s->conn[0] = s->conn[1] = tcp::kNoConn;
  s->pending[0] = s->pending[1] = nullptr;
  s->fin_in[0] = s->fin_in[1] = false;
  s->shut[0] = s->shut[1] = false;
  s->connected[0] = s->connected[1] = false;
  s->peeking = false;
  s->parsed = 0;
  s->held = s->need = 0;
  s->listener_stat = s->route_stat = 0;
  s->istio_row = kNoIstioRow;
  s->bytes[0] = s->bytes[1] = 0;
  s->first_fin = -1;
  s->used = true;
  ++sessions_active_;
  return s;
}

void Proxy::free_session(Session* s) {
  idle_wheel_.cancel(&s->idle);
  host_.istio().close(s->istio_row);
  s->istio_row = kNoIstioRow;
  s->deny.close();
  for (rte_mbuf*& m : s->pending) {
    if (m != nullptr) rte_pktmbuf_free(m);
    m = nullptr;
  }
  s->used = false;
  s->next_free = free_head_;
  free_head_ = uint32_t(s - sessions_.get()) + 1;
  --sessions_active_;
}

void Proxy::on_accepted(void* user, TcpConnId c, TcpEvent ev) {
  Proxy* p = static_cast<Proxy*>(user);
  if (ev == TcpEvent::kConnected) {
    p->start_session(c);
  } else {
    p->stack_.abort(c);  // not reached: kConnected always comes first
  }
}

void Proxy::start_session(TcpConnId c) {
  tcp::TcpConnInfo ci;
  if (!stack_.info(c, &ci)) return;
  const TcpTuple& t = ci.tuple;  // local: the VIP, remote: the client
  const SnapService* svc = entry_of(t);
  if (svc == nullptr) {
    count(kPxRefusedNoService);
    stack_.abort(c);
    return;
  }
  count(kPxAccepted);
  if (svc->listener != 0) {
    start_peek(c, *svc);
    return;
  }
  if (svc->table_size == 0) {
    count(kPxNoBackend);
    log_refused(t, svc, AccessEnd::kNoBackend);
    stack_.abort(c);
    return;
  }
  uint32_t h = 0;
  const SnapBackend& be = pick(*svc, t, &h);
  if (be.tunnel == Tunnel::kHbone && originate_ != nullptr) {
    count(kPxHboneOriginated);
    originate_(originate_ctx_, c, *svc, be, nullptr, nullptr);  // the originator owns it now
    return;
  }
  Session* s = open_session(c);
  if (s == nullptr) {
    log_refused(t, svc, AccessEnd::kSessionTableFull);
    return;
  }
  if (SessionLog* l = session_log(s)) access_copy(l->names.service, svc->name);
  if (!open_inspection(s, svc->deny)) return;
  connect_backend(s, t, *svc, be, h);
}

const SnapService* Proxy::entry_of(const TcpTuple& t) const {
  const SnapService* svc =
      snap_ != nullptr ? snap_->find_service(t.local, htons(t.local_port), kProtoTcp) : nullptr;
  return svc != nullptr && svc->mode == Mode::kProxy ? svc : nullptr;
}

const SnapBackend& Proxy::pick(const SnapService& svc, const TcpTuple& t, uint32_t* h) const {
  // The same flow hash as the packet modes, so a service keeps its spread when its mode changes.
  *h = lb_flow_hash(t.remote, t.local, htons(t.remote_port), htons(t.local_port), kProtoTcp);
  return snap_->backends[svc.first_backend + lb_lookup(svc.table, svc.table_size, *h)];
}

Proxy::Session* Proxy::open_session(TcpConnId c) {
  Session* s = alloc_session();
  if (s == nullptr) {
    count(kPxSessionTableFull);
    stack_.abort(c);
    return nullptr;
  }
  s->conn[kClient] = c;
  s->connected[kClient] = true;
  stack_.set_user(c, &Proxy::on_client, s);
  s->last_active_ms = s->created_ms = now_ms();
  if (SessionLog* l = session_log(s)) {
    tcp::TcpConnInfo ci;
    *l = SessionLog{};
    if (stack_.info(c, &ci)) {
      l->tuple.set(ci.tuple.remote, ci.tuple.remote_port, ci.tuple.local, ci.tuple.local_port,
                   IpAddr{}, 0);
    }
  }
  return s;
}

bool Proxy::connect_backend(Session* s, const TcpTuple& t, const SnapService& svc,
                            const SnapBackend& be, uint32_t h) {
  s->stat_id = be.stat_id < kMaxBackendStats ? be.stat_id : 0;
  if (SessionLog* l = session_log(s)) {
    l->tuple.backend = be.address;
    l->tuple.backend_port = ntohs(be.port_be);
    access_copy(l->names.service, svc.name);
  }
  TcpConnId b = tcp::kNoConn;
  const tcp::TcpError e = host_.connect(be.address, be.port_be, h, &Proxy::on_backend, s, &b);
  if (e != tcp::TcpError::kOk) {
    count(e == tcp::TcpError::kBadState ? kPxNoLocalAddress
          : e == tcp::TcpError::kNoPort ? kPxNoPort
                                        : kPxSessionTableFull);
    end(s, true, false,
        e == tcp::TcpError::kBadState ? AccessEnd::kNoLocalAddress
        : e == tcp::TcpError::kNoPort ? AccessEnd::kNoPort
                                      : AccessEnd::kSessionTableFull);
    return false;
  }
  s->conn[kBackend] = b;
  count(kPxBackendConnects);
  // Plain TCP on both sides: the gateway reports as the source side, the client's workload
  // known only when its address is a mesh workload's (docs/MESH.md, "Istio metrics").
  IstioKey k;
  k.source_workload = snap_->istio_workload_at(t.remote);
  k.destination_workload = snap_->istio_backend(be);
  k.service = snap_->istio_service(svc);
  s->istio_row = host_.istio().open(k);
  if (d_.backend_counters != nullptr) counter_add(d_.backend_counters[s->stat_id].flows, 1);
  if (svc.proxy_protocol == 2) {
    // Queued before any client byte; sent once the handshake completes.
    uint8_t hdr[kProxyV2MaxLen];
    const uint32_t n = write_proxy_v2(hdr, t.remote, t.remote_port, t.local, t.local_port);
    if (stack_.send(b, hdr, n) == n) count(kPxProxyProtocolSent);
  }
  s->last_active_ms = now_ms();
  idle_wheel_.cancel(&s->idle);
  if (p_.idle_timeout_ms != 0) idle_wheel_.schedule(&s->idle, now_ms() + p_.idle_timeout_ms);
  return true;
}

bool Proxy::session_record(uint32_t i, FlowRecord* o) const {
  const Session& s = sessions_[i];
  tcp::TcpConnInfo c, b;
  if (!s.used || !stack_.info(s.conn[kClient], &c) || !stack_.info(s.conn[kBackend], &b)) {
    return false;
  }
  o->client = c.tuple.remote;
  o->client_port = c.tuple.remote_port;
  o->vip = c.tuple.local;
  o->vip_port = c.tuple.local_port;
  o->backend = b.tuple.remote;
  o->backend_port = b.tuple.remote_port;
  o->local = b.tuple.local;
  o->local_port = b.tuple.local_port;
  o->proto = kProtoTcp;
  // In conntrack's terms: the backend handshake, both ways open, or a direction closed.
  if (!s.connected[kBackend]) {
    o->state = TcpState::kSynSent;
  } else if (s.fin_in[kClient] || s.fin_in[kBackend]) {
    o->state = s.fin_in[kClient] ? TcpState::kFinWait : TcpState::kCloseWait;
  } else {
    o->state = TcpState::kEstablished;
  }
  o->mode = Mode::kProxy;
  o->stat_id = s.stat_id;
  o->expires_in_ms = p_.idle_timeout_ms != 0
                         ? int64_t(s.last_active_ms) + p_.idle_timeout_ms - int64_t(now_ms())
                         : -1;
  o->age_ms = now_ms() - s.created_ms;
  return true;
}

void Proxy::on_client(void* user, TcpConnId, TcpEvent ev) {
  Session* s = static_cast<Session*>(user);
  s->proxy->handle(s, kClient, ev);
}

void Proxy::on_backend(void* user, TcpConnId, TcpEvent ev) {
  Session* s = static_cast<Session*>(user);
  s->proxy->handle(s, kBackend, ev);
}

void Proxy::handle(Session* s, int side, TcpEvent ev) {
  if (s->peeking) {
    switch (ev) {
      case TcpEvent::kReadable:
      case TcpEvent::kPeerFin:
        peek(s, ev == TcpEvent::kPeerFin);
        break;
      case TcpEvent::kReset:
      case TcpEvent::kClosed:
        lcount(s->listener_stat, kLsClientClosed);
        count(ev == TcpEvent::kReset ? kPxClientResets : kPxClientTimeouts);
        end(s, true, false,
            ev == TcpEvent::kReset ? AccessEnd::kClientReset : AccessEnd::kClientTimeout);
        break;
      default:
        break;
    }
    return;
  }
  switch (ev) {
    case TcpEvent::kConnected:
      s->connected[side] = true;
      if (side == kBackend) count(kPxBackendConnected);
      pump(s, kClient);
      pump(s, kBackend);
      break;
    case TcpEvent::kReadable:
      pump(s, side);
      break;
    case TcpEvent::kPeerFin:
      s->fin_in[side] = true;
      if (s->first_fin < 0) s->first_fin = int8_t(side);
      pump(s, side);  // FIN goes on once the data before it has
      break;
    case TcpEvent::kWritable:
      pump(s, 1 - side);
      break;
    case TcpEvent::kReset:
      // The peer reset `side`: reset the other peer too. (abort() on the reset side only
      // releases the handle: that connection is already closed.)
      if (side == kBackend && !s->connected[kBackend]) {
        count(kPxBackendRefused);
        end(s, true, true, AccessEnd::kBackendRefused);
      } else {
        count(side == kClient ? kPxClientResets : kPxBackendResets);
        end(s, true, true, side == kClient ? AccessEnd::kClientReset : AccessEnd::kBackendReset);
      }
      return;
    case TcpEvent::kClosed:
      if (!(s->fin_in[side] && s->shut[side])) {
        // Retransmissions (or the handshake) timed out: the other side cannot be finished.
        count(side == kBackend ? kPxBackendTimeouts : kPxClientTimeouts);
        end(s, true, true,
            side == kBackend ? AccessEnd::kBackendTimeout : AccessEnd::kClientTimeout);
        return;
      }
      break;
  }
  if (s->used && s->fin_in[0] && s->fin_in[1] && s->shut[0] && s->shut[1] &&
      s->pending[0] == nullptr && s->pending[1] == nullptr) {
    // Both directions delivered and closed: the stack finishes both closes in the background.
    count(kPxSessionsClosed);
    end(s, false, false, s->first_fin == kBackend ? AccessEnd::kBackendFin : AccessEnd::kClientFin);
  }
}

void Proxy::pump(Session* s, int from) {
  if (!s->used) return;  // ended by an earlier step of the same event
  const int to = 1 - from;
  if (!s->connected[to]) return;  // client bytes wait (in the client's window) for the backend
  const TcpConnId src = s->conn[from];
  const TcpConnId dst = s->conn[to];
  uint64_t moved = 0;
  for (;;) {
    rte_mbuf* c = s->pending[from];
    if (c == nullptr) {
      uint32_t len = 0;
      // At most what the other side takes now, so send_chain() never refuses it.
      c = stack_.recv_chain(src, &len, stack_.send_space(dst));
      if (c == nullptr) break;
      if (from == kClient && s->deny.active() && !inspect(s, c)) {
        rte_pktmbuf_free(c);
        return;  // the session ended
      }
    }
    const uint32_t len = rte_pktmbuf_pkt_len(c);
    if (!stack_.send_chain(dst, c)) {
      s->pending[from] = c;  // send_chain() asked for kWritable
      break;
    }
    s->pending[from] = nullptr;
    moved += len;
  }
  s->bytes[from] += moved;
  if (moved != 0) {
    s->last_active_ms = now_ms();
    RouteCounters* rc = s->route_stat != 0 ? &route_counters_[s->route_stat] : nullptr;
    if (to == kBackend) {
      count(kPxBytesToBackend, moved);
      if (d_.backend_counters != nullptr) counter_add(d_.backend_counters[s->stat_id].bytes, moved);
      if (rc != nullptr) counter_add(rc->bytes_to_backend, moved);
      host_.istio().received(s->istio_row, moved);
    } else {
      count(kPxBytesToClient, moved);
      if (d_.backend_counters != nullptr) {
        counter_add(d_.backend_counters[s->stat_id].reply_bytes, moved);
      }
      host_.istio().sent(s->istio_row, moved);
      if (rc != nullptr) counter_add(rc->bytes_to_client, moved);
    }
  }
  if (s->pending[from] != nullptr) return;
  tcp::TcpConnInfo ci;
  if (stack_.info(src, &ci) && ci.recv_queued > 0) {
    // Even the first received mbuf does not fit the other side's buffer now.
    stack_.request_writable(dst);
  } else if (s->fin_in[from] && !s->shut[to]) {
    // RFC 9293 §3.10.4: half-close passes through; the other direction keeps flowing.
    stack_.shutdown_write(dst);
    s->shut[to] = true;
  }
}

void Proxy::end(Session* s, bool abort_client, bool abort_backend, AccessEnd why) {
  if (log_ != nullptr) log_session(s, why);
  const bool abort[2] = {abort_client, abort_backend};
  for (int side = 0; side < 2; ++side) {
    const TcpConnId c = s->conn[side];
    if (c == tcp::kNoConn) continue;
    // close() resets by itself when unread data is left (RFC 9293 §3.10.4).
    if (abort[side]) {
      stack_.abort(c);
    } else {
      stack_.close(c);
    }
    s->conn[side] = tcp::kNoConn;
  }
  free_session(s);
}

void Proxy::on_idle(tcp::Timer* t, void* ctx) {
  Proxy* p = static_cast<Proxy*>(ctx);
  Session* s = reinterpret_cast<Session*>(reinterpret_cast<char*>(t) - offsetof(Session, idle));
  if (s->peeking) {
    p->reject(s, kLsPeekTimeout);  // scheduled at the listener's peek_timeout_ms
    return;
  }
  if (p->p_.idle_timeout_ms == 0) return;  // turned off by a config reload
  const uint32_t idle_ms = p->now_ms() - s->last_active_ms;
  if (idle_ms < p->p_.idle_timeout_ms) {
    p->idle_wheel_.schedule(&s->idle, s->last_active_ms + p->p_.idle_timeout_ms);
    return;
  }
  p->count(kPxIdleTimeouts);
  p->end(s, false, false, AccessEnd::kIdleTimeout);
}

// ---- access log -----------------------------------------------------------------------------

void Proxy::log_session(const Session* s, AccessEnd why) {
  const SessionLog& l = *session_log(s);
  const AccessKind kind = l.names.listener[0] != '\0' ? AccessKind::kListener : AccessKind::kProxy;
  AccessRecord* r = d_.access_log->begin(kind, why, s->created_ms, now_ms());
  if (r == nullptr) return;
  r->tuple = l.tuple;
  r->bytes_from_client = s->bytes[kClient];
  r->bytes_to_client = s->bytes[kBackend];
  r->names = l.names;
  d_.access_log->commit();
}

void Proxy::log_refused(const TcpTuple& t, const SnapService* svc, AccessEnd why) {
  if (log_ == nullptr) return;
  const AccessKind kind = svc != nullptr && svc->listener != 0 ? AccessKind::kListener
                                                               : AccessKind::kProxy;
  AccessRecord* r = d_.access_log->begin(kind, why, now_ms(), now_ms());
  if (r == nullptr) return;
  r->tuple.set(t.remote, t.remote_port, t.local, t.local_port, IpAddr{}, 0);
  if (svc != nullptr) access_copy(r->names.service, svc->name);
  d_.access_log->commit();
}

}  // namespace meshgate::dp
