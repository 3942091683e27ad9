// The HBONE originator: a client connection the proxy hands over (originate()) or a terminated
// CONNECT whose endpoint has tunnel = hbone (connect_hbone(), the double hop) becomes a stream
// on a pooled HBONE connection to the endpoint's [hbone] port: checkout from the pool, a dial
// through StackHost::connect when the pool has none, and the originations waiting for one.
#include <arpa/inet.h>

#include <algorithm>

#include "dataplane/hbone/gateway.h"
#include "dataplane/hbone/gateway_parts.h"
#include "dataplane/hbone/headers.h"
#include "dataplane/lb/lb.h"
#include "dataplane/packet/wire.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::dp::hbone {

using tcp::TcpConnId;
using tcp::TcpEvent;

// ---- origination ----------------------------------------------------------------------------

void Gateway::originate(TcpConnId client, const SnapService& svc, const SnapBackend& be,
                        rte_mbuf* head, RouteCounters* route) {
  count(GwCounter::k_originated);
  const std::string& id = snap_->identity_of(be);
  tcp::TcpConnInfo ci;
  if (id.empty() || snap_->tls_contexts.size() <= worker_ || draining_ ||
      !stack_.info(client, &ci)) {
    // Without the endpoint's identity the server cannot be verified; without a certificate we
    // cannot prove ours.
    count(GwCounter::k_origin_no_identity);
    stack_.abort(client);
    if (head != nullptr) rte_pktmbuf_free(head);
    return;
  }
  Up* u = new_origin(id, be.address, be.address, ntohs(be.port_be), ci.tuple.remote,
                     ci.tuple.remote_port, svc.hostname);
  u->tcp = client;
  u->head = head;
  u->route = route;
  u->istio_row = istio_open(IstioReporter::kSource, ci.tuple.remote,
                            snap_->tls_contexts[worker_]->own_id(),
                            int32_t(&be - snap_->backends.data()), be.address,
                            ntohs(be.port_be), &svc);
  u->tuple.set(ci.tuple.remote, ci.tuple.remote_port, ci.tuple.local, ci.tuple.local_port,
               be.address, ntohs(be.port_be));
  access_copy(u->names.service, svc.name);
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
  u->created_ms = now_ms();
  u->key = PoolKey(snap_->tls_contexts[worker_]->own_id(), {id}, pod, p_.port, IpAddr());
  // docs/HBONE.md "Client role": the pod address and target port, and where the bytes
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
  log_up(u, AccessEnd::kUpstreamFailed);
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
  a->created_ms = now_ms();
  a->tuple.set(c->peer, c->peer_port, c->local, p_.port, dst.ip, dst.port);
  access_copy(a->names.service, resolved_service_);
  c->ups.push_back(a);
  ++n_tunnels_;
  Up* b = new_origin(id, be.address, dst.ip, dst.port, c->peer, c->peer_port, "");
  // The second hop's client is the HBONE peer; we dial the pod's HBONE port for its target.
  b->tuple = a->tuple;
  b->names = a->names;
  b->bridge = a;
  a->bridge = b;
  // Each half reports: the terminated CONNECT as the destination, the hop on as the source.
  a->istio_row = istio_open(IstioReporter::kDestination, c->peer, c->engine->peer_id(),
                            int32_t(bi), dst.ip, dst.port, nullptr);
  b->istio_row = istio_open(IstioReporter::kSource, c->peer,
                            snap_->tls_contexts[worker_]->own_id(), int32_t(bi), dst.ip,
                            dst.port, nullptr);
  checkout(b);
}

}  // namespace meshgate::dp::hbone
