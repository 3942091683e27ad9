// The HBONE gateway of one worker: its construction, the worker interface (begin, advance,
// publish) and the machinery every HBONE connection shares, terminated or originated: transport
// bytes between the stack and the engine, the engine's events, settle() and destroy().
// Listeners and admission are in terminator.cc, origination and the pool in originator.cc,
// tunnel bytes in splice.cc.
#include "dataplane/hbone/gateway.h"

#include <algorithm>
#include <atomic>

#include "dataplane/hbone/gateway_parts.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::dp::hbone {

using tcp::TcpConnId;
using tcp::TcpEvent;

namespace {
// Engine timers (PING every 10 s, handshake timeout) need no finer grain.
constexpr uint32_t kTimerPeriodMs = 100;
}  // namespace

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

// ---- connections ----------------------------------------------------------------------------

void Gateway::on_conn(void* user, TcpConnId, TcpEvent ev) {
  Conn* c = static_cast<Conn*>(user);
  c->gw->conn_event(c, ev);
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
        u->saw_end(!u->origin);  // the stream's peer: the client of a terminated tunnel
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
          // NO_ERROR or CANCEL is a clean end (nghttpx ends CONNECT streams so
          // once its upstream closed): what the stream delivered goes out, then FIN.
          u->remote_end = true;
          u->saw_end(!u->origin);
          pump_from_stream(u);
        } else {
          count(GwCounter::k_tunnels_closed);
          if (u->origin && u->bridge != nullptr && !u->connected) {
            count(GwCounter::k_upstream_failed);  // double hop: the next hop refused
          } else if (u->origin && u->bridge == nullptr) {
            count(GwCounter::k_origin_client_resets);
          }
          // The stream's peer reset it: the server of an origination (before its 200: a
          // refusal), else the client.
          log_up(u, !u->origin      ? AccessEnd::kClientReset
                    : u->connected ? AccessEnd::kBackendReset
                                   : AccessEnd::kBackendRefused);
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
          log_up(u, AccessEnd::kStreamReset);
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
    log_up(u, AccessEnd::kConnectionClosed);
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

}  // namespace meshgate::dp::hbone
