// The HBONE terminator: the [hbone] port's listeners on every local address, admission
// (drain, certificates, the connection and handshake limits, per-source handshake buckets), and
// the server hooks a CONNECT runs through: resolve, authorize, and connect (an upstream TCP
// connection through StackHost::connect, or a double hop through the originator).
#include <arpa/inet.h>

#include <algorithm>

#include "dataplane/common/hash.h"
#include "dataplane/hbone/gateway.h"
#include "dataplane/hbone/gateway_parts.h"
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

// ---- listeners ------------------------------------------------------------------------------

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

// ---- admission ------------------------------------------------------------------------------

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

// ---- CONNECT --------------------------------------------------------------------------------

Resolution Gateway::resolve(const Authority& a) {
  Conn* c = current_;
  // The peer's address and port and its request count: one client's streams spread over the
  // service's endpoints the way separate connections would.
  const uint32_t h = lb_flow_hash(c->peer, c->local, htons(c->peer_port), htons(++c->requests),
                                  kProtoTcp);
  const Destination d = hbone::resolve(*snap_, a, h, snap_->name_scratch_for(worker_));
  access_copy(resolved_service_, d.service != nullptr ? std::string_view(d.service->name) : "");
  return d.resolution();
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
  u->created_ms = now_ms();
  u->tuple.set(c->peer, c->peer_port, c->local, p_.port, dst.ip, dst.port);
  access_copy(u->names.service, resolved_service_);
  const uint32_t h = lb_flow_hash(c->peer, dst.ip, htons(c->peer_port), htons(dst.port), kProtoTcp);
  if (host_.connect(dst.ip, htons(dst.port), h, &Gateway::on_up, u, &u->tcp) !=
      tcp::TcpError::kOk) {
    count(GwCounter::k_upstream_failed);
    log_up(u, AccessEnd::kUpstreamFailed);
    delete u;
    refused_.emplace_back(c, stream);
    return;
  }
  c->ups.push_back(u);
  ++n_tunnels_;
  u->istio_row = istio_open(IstioReporter::kDestination, c->peer, c->engine->peer_id(),
                            dst.cookie != 0 ? int32_t(bi) : -1, dst.ip, dst.port, nullptr);
}

}  // namespace meshgate::dp::hbone
