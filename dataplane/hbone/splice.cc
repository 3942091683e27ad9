// The HBONE splice: the bytes of a tunnel, both ways, with flow control. A tunnel (Up) joins an
// HTTP/2 stream to a TCP connection on the stack (the terminator's upstream, or the client of
// an origination) or, for a double hop, to another stream (pump_bridge). A side reads only what
// the other side can take now, so a slow side closes the other's window (HTTP/2 or TCP);
// END_STREAM <-> FIN and RST_STREAM <-> RST carry the ends.
#include <arpa/inet.h>

#include <algorithm>

#include "dataplane/hbone/gateway.h"
#include "dataplane/hbone/gateway_parts.h"
#include "dataplane/packet/wire.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::dp::hbone {

using tcp::TcpConnId;
using tcp::TcpEvent;

void Gateway::on_up(void* user, TcpConnId, TcpEvent ev) {
  Up* u = static_cast<Up*>(user);
  u->gw->up_event(u, ev);
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
      u->saw_end(u->origin);  // the TCP side: the client of an origination, else the backend
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
        log_up(u, ev == TcpEvent::kReset ? AccessEnd::kClientReset : AccessEnd::kClientTimeout);
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
        log_up(u, ev == TcpEvent::kReset ? AccessEnd::kBackendRefused : AccessEnd::kBackendTimeout);
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
        if (ev == TcpEvent::kReset) {
          log_up(u, u->origin ? AccessEnd::kClientReset : AccessEnd::kBackendReset);
        } else {
          log_up(u, u->origin ? AccessEnd::kClientTimeout : AccessEnd::kBackendTimeout);
        }
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
    uint32_t n = uint32_t(std::min(room, sizeof buf));
    if (u->head != nullptr) {
      // The bytes read before the handover go first.
      n = std::min(n, rte_pktmbuf_pkt_len(u->head) - u->head_off);
      const void* p = rte_pktmbuf_read(u->head, u->head_off, n, buf);
      e.stream_write(u->stream, static_cast<const uint8_t*>(p), n);
      u->head_off += n;
      if (u->head_off == rte_pktmbuf_pkt_len(u->head)) {
        rte_pktmbuf_free(u->head);
        u->head = nullptr;
      }
      moved += n;
      continue;
    }
    n = stack_.recv(u->tcp, buf, n);
    if (n == 0) break;
    e.stream_write(u->stream, buf, n);  // n <= room: all taken
    moved += n;
  }
  count(GwCounter::k_bytes_from_upstream, moved);
  u->bytes[u->origin ? 0 : 1] += moved;
  if (u->route != nullptr) counter_add(u->route->bytes_to_backend, moved);
  istio_bytes(u, !u->origin, moved);
  tcp::TcpConnInfo ci;
  if (u->fin_in && u->head == nullptr && (!stack_.info(u->tcp, &ci) || ci.recv_queued == 0)) {
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
      u->bytes[u->origin ? 1 : 0] += moved;
      if (u->route != nullptr) counter_add(u->route->bytes_to_client, moved);
      istio_bytes(u, u->origin, moved);
      const int32_t stream = u->stream;
      Conn* c = u->conn;
      log_up(u, AccessEnd::kNoBuffer);
      drop_up(u, true);
      c->engine->stream_reset(stream, kUpstreamResetCode);
      return;
    }
  }
  count(GwCounter::k_bytes_to_upstream, moved);
  u->bytes[u->origin ? 1 : 0] += moved;
  if (u->route != nullptr) counter_add(u->route->bytes_to_client, moved);
  istio_bytes(u, u->origin, moved);
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
  log_up(u, clean_end(u));
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

// ---- double hop -----------------------------------------------------------------------------

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
  // Both halves of a double hop see the same bytes: toward the client when they come from the
  // origination's stream.
  istio_bytes(from, from->origin, moved);
  istio_bytes(to, from->origin, moved);
  // Toward the double hop's backend when read from the terminated stream (the client's).
  from->bytes[from->origin ? 1 : 0] += moved;
  to->bytes[from->origin ? 1 : 0] += moved;
  if (from->remote_end && !to->stream_end && fe.stream_readable(from->stream) == 0) {
    te.stream_shutdown(to->stream);  // END_STREAM on after the bytes before it
    to->stream_end = true;
  }
  mark(from->conn);  // window updates
  mark(to->conn);
  maybe_finish(from);
}

// ---- Istio metrics (dataplane/common/istio_metrics.h) -----------------------------------------

uint32_t Gateway::istio_open(IstioReporter r, const IpAddr& client, std::string_view principal,
                             int32_t backend, const IpAddr& dst, uint16_t dst_port,
                             const SnapService* svc) {
  IstioTable& t = host_.istio();
  IstioKey k;
  k.reporter = r;
  k.policy = IstioPolicy::kMutualTls;
  k.source_principal = t.principal(principal);
  k.source_workload = snap_->istio_workload_at(client);
  if (backend >= 0 && uint32_t(backend) < snap_->backends.size()) {
    k.destination_workload = snap_->istio_backend(snap_->backends[uint32_t(backend)]);
  } else {
    k.destination_workload = snap_->istio_workload_at(dst);
  }
  if (svc == nullptr) {
    uint32_t n = 0;
    const uint32_t* svcs = snap_->services_of_backend(dst, htons(dst_port), kProtoTcp, &n);
    if (n != 0) svc = &snap_->services[svcs[0]];
  }
  if (svc != nullptr) k.service = snap_->istio_service(*svc);
  return t.open(k);
}

void Gateway::istio_bytes(const Up* u, bool to_client, uint64_t n) {
  if (to_client) {
    host_.istio().sent(u->istio_row, n);
  } else {
    host_.istio().received(u->istio_row, n);
  }
}

void Gateway::abandon_partner(Up* u) {
  Up* p = u->bridge;
  if (p == nullptr) return;
  u->bridge = nullptr;
  p->bridge = nullptr;
  if (p->conn == nullptr) {  // an origination still waiting for a stream
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), p));
    log_up(p, AccessEnd::kClientReset);  // the double hop's client side went away
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

// ---- access log -----------------------------------------------------------------------------

AccessEnd Gateway::clean_end(const Up* u) {
  return u->first_end == 1 ? AccessEnd::kBackendFin : AccessEnd::kClientFin;
}

void Gateway::log_up(const Up* u, AccessEnd why) {
  if (log_ == nullptr || !log_->on()) return;
  AccessRecord* r = log_->begin(u->origin ? AccessKind::kHboneOutbound : AccessKind::kHboneInbound,
                                why, u->created_ms, now_ms());
  if (r == nullptr) return;
  r->tuple = u->tuple;
  r->bytes_from_client = u->bytes[0];
  r->bytes_to_client = u->bytes[1];
  r->names = u->names;
  if (u->origin) {
    // We are the client: our identity, and the one the server had to prove.
    access_copy(r->src_identity, u->key.src_identity);
    if (!u->key.dst_identities.empty()) access_copy(r->dst_identity, u->key.dst_identities[0]);
  } else if (u->conn != nullptr) {
    access_copy(r->src_identity, u->conn->engine->peer_id());
    if (u->conn->tls != nullptr) access_copy(r->dst_identity, u->conn->tls->own_id());
  }
  log_->commit();
}

}  // namespace meshgate::dp::hbone
