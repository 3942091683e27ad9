// TcpStack: setup, connection pool and table, the application API, event dispatch.
// Segment input is in tcp_input.cc, segment output and timers in tcp_output.cc.
#include "dataplane/tcp/tcp_stack.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "dataplane/common/compiler.h"
#include "dataplane/common/hash.h"
#include "dataplane/tcp/seq.h"

namespace meshgate::dp::tcp {

namespace {

// Free worker memory that wakes connections blocked on the worker budget (see advance()).
constexpr uint64_t kMemWakeBytes = 64 * 1024;

}  // namespace

const char* state_name(TcpState s) {
  static constexpr const char* kNames[] = {"CLOSED",     "LISTEN",     "SYN-SENT",   "SYN-RECEIVED",
                                           "ESTABLISHED", "FIN-WAIT-1", "FIN-WAIT-2", "CLOSE-WAIT",
                                           "CLOSING",    "LAST-ACK",   "TIME-WAIT"};
  return kNames[uint32_t(s)];
}

TcpStack::TcpStack(const TcpConfig& cfg, const TcpStackDeps& deps, uint64_t now_ns)
    : cfg_(cfg), deps_(deps), now_ns_(now_ns) {
  MG_CHECK(deps_.pool != nullptr && deps_.wheel != nullptr && deps_.output != nullptr);
  MG_CHECK(cfg_.max_connections > 0 && cfg_.ephemeral_lo <= cfg_.ephemeral_hi);
  tcbs_ = std::make_unique<Tcb[]>(cfg_.max_connections);
  for (uint32_t i = 0; i < cfg_.max_connections; ++i) {
    tcbs_[i].next_free = i + 2 <= cfg_.max_connections ? i + 2 : 0;
    tcbs_[i].gen = 1;
  }
  free_head_ = 1;
  table_.init(cfg_.max_connections);
  tw_fifo_ = std::make_unique<uint64_t[]>(cfg_.max_connections);
  active_refs_ = std::make_unique<uint32_t[]>(65536);
  listeners_.resize(cfg_.max_listeners);
  cookies_.set_secret(cfg_.secret);
  hash_seed_ = uint32_t(cfg_.secret.k0 ^ (cfg_.secret.k1 >> 7));
  next_port_ = uint32_t(fmix64(cfg_.secret.k1 ^ now_ns));
}

TcpStack::~TcpStack() {
  for (uint32_t i = 0; i < cfg_.max_connections; ++i) {
    Tcb* t = &tcbs_[i];
    if (t->state != TcpState::kClosed || t->app_owned) free_tcb(t);
  }
}

void TcpStack::set_now(uint64_t now_ns) {
  if (now_ns > now_ns_) now_ns_ = now_ns;
}

void TcpStack::advance(uint64_t now_ns, uint32_t budget) {
  set_now(now_ns);
  deps_.wheel->advance(now_ms(), budget, this);
  // Connections whose send() the worker budget cut short get no ACK to wake them (they may have
  // nothing in flight): once a useful amount of memory is free again, tell them all.
  if (mem_blocked_ && mem_room() >= std::min<uint64_t>(cfg_.snd_buf_bytes, kMemWakeBytes)) {
    mem_blocked_ = false;
    for (uint32_t i = 0; i < cfg_.max_connections; ++i) {
      Tcb* t = &tcbs_[i];
      if (!t->app_owned || !t->want_writable || t->sb.bytes >= cfg_.snd_buf_bytes) continue;
      t->want_writable = false;
      t->events |= kEvWritable;
      dispatch(t);
    }
  }
  // Receivers whose offered window the budget cut (their own buffer had room) hear of freed
  // memory from nobody else: their peers may sit on a small window, or probe a zero one at a
  // long backoff. Tell them once the window can grow usefully (window_update_after_read).
  if (wnd_mem_limited_ && mem_room() >= std::min<uint64_t>(cfg_.rcv_buf_bytes, kMemWakeBytes)) {
    wnd_mem_limited_ = false;
    for (uint32_t i = 0; i < cfg_.max_connections; ++i) {
      Tcb* t = &tcbs_[i];
      if (!t->wnd_mem_limited) continue;
      t->wnd_mem_limited = false;
      window_update_after_read(t);
    }
  }
}

// ---- Pool, table ------------------------------------------------------------------------------

uint32_t TcpStack::hash_of(const TcpTuple& tp) const {
  uint8_t k[36];
  std::memcpy(k, tp.local.b, 16);
  std::memcpy(k + 16, tp.remote.b, 16);
  std::memcpy(k + 32, &tp.local_port, 2);
  std::memcpy(k + 34, &tp.remote_port, 2);
  return crc32c(k, sizeof(k), hash_seed_);
}

Tcb* TcpStack::lookup(const TcpTuple& tp) const {
  const uint32_t h = hash_of(tp);
  const uint32_t i = table_.find(h, [&](uint32_t idx) { return tcbs_[idx].tuple == tp; });
  return i == ConnTable::kNone ? nullptr : &tcbs_[i];
}

TcpState TcpStack::state_of(const TcpTuple& tp) const {
  const Tcb* t = lookup(tp);
  return t == nullptr ? TcpState::kClosed : t->state;
}

bool TcpStack::recycle_time_wait() {
  while (tw_head_ != tw_tail_) {
    const uint64_t e = tw_fifo_[tw_head_++ % cfg_.max_connections];
    Tcb* t = &tcbs_[uint32_t(e)];
    if (t->gen != uint32_t(e >> 32) || t->state != TcpState::kTimeWait || t->app_owned ||
        t->stack == nullptr) {
      continue;  // left TIME-WAIT since, or the application still holds it
    }
    free_tcb(t);
    count(kTimeWaitRecycled);
    return true;
  }
  return false;
}

Tcb* TcpStack::alloc_tcb(const TcpTuple& tp) {
  if (free_head_ == 0 && !recycle_time_wait()) {
    count(kDropTableFull);
    return nullptr;
  }
  Tcb* t = &tcbs_[free_head_ - 1];
  free_head_ = t->next_free;
  const uint32_t gen = t->gen;
  t->~Tcb();
  new (t) Tcb{};
  t->gen = gen;
  t->stack = this;
  t->tuple = tp;
  t->hash = hash_of(tp);
  t->rtx_timer.fn = timer_cb<offsetof(Tcb, rtx_timer), &TcpStack::on_rtx_timer>;
  t->delack_timer.fn = timer_cb<offsetof(Tcb, delack_timer), &TcpStack::on_delack_timer>;
  t->keep_timer.fn = timer_cb<offsetof(Tcb, keep_timer), &TcpStack::on_keep_timer>;
  t->last_rcv_ms = now_ms();
  table_.insert(t->hash, uint32_t(t - tcbs_.get()));
  ++used_;
  return t;
}

void TcpStack::free_tcb(Tcb* t) {
  TimerWheel* w = deps_.wheel;
  w->cancel(&t->rtx_timer);
  w->cancel(&t->delack_timer);
  w->cancel(&t->keep_timer);
  if (t->syn_counted && t->listener != 0) {
    --listeners_[t->listener - 1].syn_recv;
    t->syn_counted = false;
  }
  mem_used_ -= t->sb.bytes + t->rq_bytes + t->reass.queued_bytes();
  if (t->sb.head != nullptr) rte_pktmbuf_free(t->sb.head);
  if (t->rq_head != nullptr) rte_pktmbuf_free(t->rq_head);
  t->reass.clear();
  t->sb = SendBuf{};
  t->rq_head = t->rq_tail = nullptr;
  t->rq_bytes = 0;
  t->rq_mbufs = 0;
  const bool in_table = t->stack != nullptr;
  if (in_table && t->active_open) {
    const uint16_t p = t->tuple.local_port;
    if (--active_refs_[p] == 0) active_bits_[p >> 6] &= ~(uint64_t(1) << (p & 63));
  }
  t->active_open = false;
  if (in_table) {
    table_.erase(t->hash, uint32_t(t - tcbs_.get()));
    --used_;
    count(kClosed);
    t->next_free = free_head_;
    free_head_ = uint32_t(t - tcbs_.get()) + 1;
  }
  t->stack = nullptr;
  t->state = TcpState::kClosed;
  t->wnd_mem_limited = false;
  t->app_owned = false;
  ++t->gen;
  if (t->gen == 0) t->gen = 1;
}

void TcpStack::init_tcb_common(Tcb* t, bool v6) {
  t->v6 = v6;
  t->rto.init();
  // Our window scale depends only on the configured buffer (SYN cookies recompute it).
  t->rcv_wscale = our_wscale();
}

TcpStack::Listener* TcpStack::find_listener(const IpAddr& local, uint16_t port) {
  Listener* any = nullptr;
  for (Listener& l : listeners_) {
    if (!l.used || l.port != port) continue;
    if (l.local == local) return &l;
    if (l.local.is_zero() && (l.local.is_v4() == local.is_v4() || !l.local.is_v4())) any = &l;
  }
  return any;
}

uint32_t TcpStack::make_isn(const TcpTuple& tp) {
  if (deps_.isn != nullptr) return deps_.isn(deps_.isn_ctx, tp, now_ns_);
  // RFC 6528 §3: ISN = M + F(localip, localport, remoteip, remoteport, secretkey), M a 4 µs
  // timer.
  uint8_t k[36];
  std::memcpy(k, tp.local.b, 16);
  std::memcpy(k + 16, tp.remote.b, 16);
  std::memcpy(k + 32, &tp.local_port, 2);
  std::memcpy(k + 34, &tp.remote_port, 2);
  return uint32_t(siphash24(cfg_.secret, k, sizeof(k))) + uint32_t(now_ns_ / 4000);
}

// ---- Handles ----------------------------------------------------------------------------------

TcpConnId TcpStack::id_of(const Tcb* t) const {
  return (uint64_t(t->gen) << 32) | uint64_t(t - tcbs_.get() + 1);
}

Tcb* TcpStack::tcb_of(TcpConnId c) const {
  const uint64_t idx1 = c & 0xffffffffu;
  if (idx1 == 0 || idx1 > cfg_.max_connections) return nullptr;
  Tcb* t = &tcbs_[idx1 - 1];
  if (t->gen != uint32_t(c >> 32) || !t->app_owned) return nullptr;
  return t;
}

// ---- Lifecycle --------------------------------------------------------------------------------

void TcpStack::terminate(Tcb* t, uint8_t event) {
  TimerWheel* w = deps_.wheel;
  w->cancel(&t->rtx_timer);
  w->cancel(&t->delack_timer);
  w->cancel(&t->keep_timer);
  t->rtx_kind = RtxKind::kNone;
  if (!t->app_owned) {
    free_tcb(t);
    return;
  }
  // The application still holds the handle: keep the TCB (received data stays readable) but
  // out of the table, so the tuple is free for a new connection.
  if (t->syn_counted && t->listener != 0) {
    --listeners_[t->listener - 1].syn_recv;
    t->syn_counted = false;
  }
  mem_used_ -= t->sb.bytes + t->reass.queued_bytes();
  if (t->sb.head != nullptr) rte_pktmbuf_free(t->sb.head);
  t->sb = SendBuf{};
  t->reass.clear();
  table_.erase(t->hash, uint32_t(t - tcbs_.get()));
  t->state = TcpState::kClosed;
  t->events |= event;
}

void TcpStack::enter_time_wait(Tcb* t) {
  t->state = TcpState::kTimeWait;
  deps_.wheel->cancel(&t->delack_timer);
  deps_.wheel->cancel(&t->keep_timer);
  mem_used_ -= t->sb.bytes;
  if (t->sb.head != nullptr) rte_pktmbuf_free(t->sb.head);
  const uint32_t end = t->data_end();
  t->sb = SendBuf{};
  t->sb.seq = end;
  // RFC 9293 §3.10.7.4: TIME-WAIT lasts 2 MSL (kDefaultTimeWaitMs explains ours).
  t->rtx_kind = RtxKind::kTimeWait;
  deps_.wheel->schedule(&t->rtx_timer, now_ms() + cfg_.time_wait_ms);
  // Oldest first for recycle_time_wait(); a full FIFO forgets its oldest entry.
  if (tw_tail_ - tw_head_ == cfg_.max_connections) ++tw_head_;
  tw_fifo_[tw_tail_++ % cfg_.max_connections] =
      uint64_t(t->gen) << 32 | uint32_t(t - tcbs_.get());
  // Both directions are closed and acknowledged: for the application the connection is over.
  t->events |= kEvClosed;
}

void TcpStack::dispatch(Tcb* t) {
  // Events go out after the segment (or timer, or call) that caused them, so the callback sees
  // a consistent TCB and may call back into the stack. It may release the handle: check the
  // generation and ownership before each event.
  if (t->events == 0 || t->fn == nullptr) return;
  const uint32_t gen = t->gen;
  const TcpConnId id = id_of(t);
  static constexpr struct {
    uint8_t bit;
    TcpEvent ev;
  } kOrder[] = {{kEvConnected, TcpEvent::kConnected}, {kEvReadable, TcpEvent::kReadable},
                {kEvPeerFin, TcpEvent::kPeerFin},     {kEvWritable, TcpEvent::kWritable},
                {kEvReset, TcpEvent::kReset},         {kEvClosed, TcpEvent::kClosed}};
  for (const auto& e : kOrder) {
    if (t->gen != gen || !t->app_owned) break;
    if ((t->events & e.bit) == 0) continue;
    t->events &= uint8_t(~e.bit);
    t->fn(t->user, id, e.ev);
  }
  if (t->gen == gen && !t->app_owned) t->events = 0;
}

// ---- Listen / connect -------------------------------------------------------------------------

TcpError TcpStack::listen(const IpAddr& local, uint16_t port, TcpAcceptFn accept, void* ctx) {
  Listener* free_slot = nullptr;
  for (Listener& l : listeners_) {
    if (l.used && l.port == port && l.local == local) return TcpError::kListenerExists;
    if (!l.used && free_slot == nullptr) free_slot = &l;
  }
  if (free_slot == nullptr) return TcpError::kTableFull;
  *free_slot = Listener{local, port, true, accept, ctx, 0, 0};
  return TcpError::kOk;
}

void TcpStack::unlisten(const IpAddr& local, uint16_t port) {
  for (uint32_t i = 0; i < listeners_.size(); ++i) {
    Listener& l = listeners_[i];
    if (!l.used || l.port != port || !(l.local == local)) continue;
    l.used = false;
    // Half-open connections of this listener no longer count toward any backlog.
    for (uint32_t k = 0; k < cfg_.max_connections; ++k) {
      Tcb& t = tcbs_[k];
      if (t.listener == i + 1) {
        t.syn_counted = false;
        t.listener = 0;
      }
    }
  }
}

TcpError TcpStack::connect(const IpAddr& local, const IpAddr& remote, uint16_t remote_port,
                           TcpPortOkFn port_ok, void* port_ctx, TcpEventFn fn, void* user,
                           TcpConnId* out) {
  if (free_head_ == 0 && !recycle_time_wait()) {
    count(kDropTableFull);
    return TcpError::kTableFull;
  }
  const uint32_t range = uint32_t(cfg_.ephemeral_hi - cfg_.ephemeral_lo) + 1;
  TcpTuple tp{local, remote, 0, remote_port};
  bool found = false;
  for (uint32_t i = 0; i < range; ++i) {
    tp.local_port = uint16_t(cfg_.ephemeral_lo + (next_port_ + i) % range);
    if (port_ok != nullptr && !port_ok(port_ctx, tp)) continue;
    if (lookup(tp) != nullptr) continue;
    next_port_ += i + 1;
    found = true;
    break;
  }
  if (!found) return TcpError::kNoPort;
  Tcb* t = alloc_tcb(tp);
  if (t == nullptr) return TcpError::kTableFull;
  init_tcb_common(t, !local.is_v4());
  t->active_open = true;
  if (active_refs_[tp.local_port]++ == 0) {
    active_bits_[tp.local_port >> 6] |= uint64_t(1) << (tp.local_port & 63);
  }
  t->fn = fn;
  t->user = user;
  t->app_owned = true;
  t->iss = make_isn(tp);
  t->snd_una = t->iss;
  t->snd_nxt = t->snd_max = t->iss + 1;
  t->sb.seq = t->iss + 1;
  t->state = TcpState::kSynSent;
  t->rtt_start_ns = now_ns_;
  count(kActiveOpens);
  send_syn(t);
  arm_rtx(t);
  *out = id_of(t);
  return TcpError::kOk;
}

// ---- Data API ---------------------------------------------------------------------------------

namespace {

bool can_queue_data(const Tcb* t) {
  if (t->shut_wr) return false;
  switch (t->state) {
    case TcpState::kSynSent:
    case TcpState::kSynReceived:
    case TcpState::kEstablished:
    case TcpState::kCloseWait: return true;
    default: return false;
  }
}

}  // namespace

uint32_t TcpStack::send_space(TcpConnId c) const {
  const Tcb* t = tcb_of(c);
  if (t == nullptr || !can_queue_data(t)) return 0;
  const uint64_t room = cfg_.snd_buf_bytes > t->sb.bytes ? cfg_.snd_buf_bytes - t->sb.bytes : 0;
  return uint32_t(std::min<uint64_t>(room, mem_room()));
}

uint32_t TcpStack::send(TcpConnId c, const void* data, uint32_t len) {
  Tcb* t = tcb_of(c);
  if (t == nullptr || len == 0) return 0;
  const uint32_t room = send_space(c);
  const uint32_t want = std::min(len, room);
  const auto* src = static_cast<const uint8_t*>(data);
  uint32_t done = 0;
  SendBuf& sb = t->sb;
  // Fill the tail's room first when it is ours to write (a direct, unshared mbuf).
  if (sb.tail != nullptr && RTE_MBUF_DIRECT(sb.tail) && rte_mbuf_refcnt_read(sb.tail) == 1) {
    const uint32_t n = std::min<uint32_t>(want, rte_pktmbuf_tailroom(sb.tail));
    std::memcpy(rte_pktmbuf_mtod_offset(sb.tail, uint8_t*, sb.tail->data_len), src, n);
    sb.tail->data_len = uint16_t(sb.tail->data_len + n);
    done = n;
  }
  while (done < want) {
    rte_mbuf* m = rte_pktmbuf_alloc(deps_.pool);
    if (m == nullptr) {
      count(kDropNoMbuf);
      break;
    }
    // The send buffer holds data only: no headroom needed.
    m->data_off = 0;
    const uint32_t n = std::min<uint32_t>(want - done, rte_pktmbuf_tailroom(m));
    std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), src + done, n);
    m->data_len = uint16_t(n);
    m->pkt_len = n;
    if (sb.tail == nullptr) {
      sb.head = m;
    } else {
      sb.tail->next = m;
    }
    sb.tail = m;
    done += n;
  }
  sb.bytes += done;
  mem_used_ += done;
  if (done < len) {
    t->want_writable = true;
    if (cfg_.snd_buf_bytes > sb.bytes) mem_blocked_ = true;
  }
  if (done > 0) output(t);
  return done;
}

bool TcpStack::send_chain(TcpConnId c, rte_mbuf* chain) {
  Tcb* t = tcb_of(c);
  if (t == nullptr || chain == nullptr) return false;
  const uint32_t len = rte_pktmbuf_pkt_len(chain);
  if (len > send_space(c)) {
    t->want_writable = true;
    return false;
  }
  SendBuf& sb = t->sb;
  if (sb.tail == nullptr) {
    sb.head = chain;
  } else {
    sb.tail->next = chain;
  }
  sb.tail = rte_pktmbuf_lastseg(chain);
  sb.bytes += len;
  mem_used_ += len;
  output(t);
  return true;
}

void TcpStack::request_writable(TcpConnId c) {
  Tcb* t = tcb_of(c);
  if (t == nullptr) return;
  t->want_writable = true;
  // When the worker budget, not this connection's buffer, is what limits it, no ACK of this
  // connection may come to wake it: advance() does.
  if (mem_room() < cfg_.snd_buf_bytes - std::min(cfg_.snd_buf_bytes, t->sb.bytes)) mem_blocked_ = true;
}

rte_mbuf* TcpStack::recv_chain(TcpConnId c, uint32_t* len, uint32_t max_bytes) {
  Tcb* t = tcb_of(c);
  *len = 0;
  if (t == nullptr || t->rq_head == nullptr) return nullptr;
  // Whole mbufs from the front while they fit; the chain's head carries the totals.
  rte_mbuf* head = t->rq_head;
  rte_mbuf* last = nullptr;
  uint32_t bytes = 0;
  uint16_t segs = 0;
  for (rte_mbuf* s = head; s != nullptr && bytes + s->data_len <= max_bytes && segs < UINT16_MAX;
       s = s->next) {
    bytes += s->data_len;
    ++segs;
    last = s;
  }
  if (last == nullptr) return nullptr;
  t->rq_head = last->next;
  if (t->rq_head == nullptr) t->rq_tail = nullptr;
  last->next = nullptr;
  head->pkt_len = bytes;
  head->nb_segs = segs;
  t->rq_bytes -= bytes;
  t->rq_mbufs -= segs;
  mem_used_ -= bytes;
  *len = bytes;
  window_update_after_read(t);
  return head;
}

void TcpStack::window_update_after_read(Tcb* t) {
  // Reading opened the window: tell the peer once it grew by enough to be worth a segment
  // (RFC 9293 §3.8.6.2.2), at once when it was closed.
  if (!t->synchronized() || t->state == TcpState::kTimeWait || t->state == TcpState::kClosed) return;
  const uint32_t adv = t->rcv_adv - t->rcv_nxt;
  const uint32_t wnd = rcv_window(t);
  if (wnd > adv && wnd - adv >= std::min<uint32_t>(cfg_.rcv_buf_bytes / 2, 2u * t->smss)) {
    send_ack(t);
  }
}

uint32_t TcpStack::recv(TcpConnId c, void* buf, uint32_t len) {
  Tcb* t = tcb_of(c);
  if (t == nullptr || t->rq_head == nullptr) return 0;
  auto* dst = static_cast<uint8_t*>(buf);
  uint32_t done = 0;
  while (done < len && t->rq_head != nullptr) {
    rte_mbuf* s = t->rq_head;
    const uint32_t n = std::min<uint32_t>(len - done, s->data_len);
    std::memcpy(dst + done, rte_pktmbuf_mtod(s, uint8_t*), n);
    done += n;
    if (n == s->data_len) {
      t->rq_head = s->next;
      s->next = nullptr;
      rte_pktmbuf_free_seg(s);
      --t->rq_mbufs;
    } else {
      s->data_off = uint16_t(s->data_off + n);
      s->data_len = uint16_t(s->data_len - n);
    }
  }
  if (t->rq_head == nullptr) t->rq_tail = nullptr;
  t->rq_bytes -= done;
  mem_used_ -= done;
  window_update_after_read(t);
  return done;
}

TcpError TcpStack::shutdown_write(TcpConnId c) {
  Tcb* t = tcb_of(c);
  if (t == nullptr) return TcpError::kStale;
  if (t->shut_wr) return TcpError::kOk;
  switch (t->state) {
    case TcpState::kSynSent:
      // RFC 9293 §3.10.4: CLOSE in SYN-SENT deletes the TCB (nothing was sent yet). The
      // caller asked for it: no event.
      terminate(t, 0);
      return TcpError::kOk;
    case TcpState::kSynReceived:
    case TcpState::kEstablished:
      t->shut_wr = true;
      // RFC 9293 §3.10.4: queue the FIN after the data; FIN-WAIT-1 from now (SYN-RECEIVED
      // moves there once established).
      if (t->state == TcpState::kEstablished) t->state = TcpState::kFinWait1;
      break;
    case TcpState::kCloseWait:
      t->shut_wr = true;
      t->state = TcpState::kLastAck;
      break;
    default: return TcpError::kBadState;
  }
  output(t);
  return TcpError::kOk;
}

void TcpStack::close(TcpConnId c) {
  Tcb* t = tcb_of(c);
  if (t == nullptr) return;
  if (t->rq_bytes > 0 || t->state == TcpState::kSynSent) {
    // RFC 9293 §3.10.4 / RFC 2525 2.17: closing with unread data resets the connection.
    abort(c);
    return;
  }
  shutdown_write(c);
  t = tcb_of(c);
  if (t == nullptr) return;
  t->app_owned = false;
  t->orphaned = true;
  t->events = 0;
  if (t->state == TcpState::kClosed) {
    free_tcb(t);
  } else if (t->state == TcpState::kFinWait2 && t->rtx_kind == RtxKind::kNone) {
    t->rtx_kind = RtxKind::kFinWait2;
    deps_.wheel->schedule(&t->rtx_timer, now_ms() + cfg_.fin_wait2_ms);
  }
}

void TcpStack::abort(TcpConnId c) {
  Tcb* t = tcb_of(c);
  if (t == nullptr) return;
  // RFC 9293 §3.10.5: ABORT sends a RST in the synchronized states (and SYN-RECEIVED).
  if (t->state != TcpState::kClosed && t->state != TcpState::kSynSent &&
      t->state != TcpState::kTimeWait) {
    send_rst(t);
  }
  t->app_owned = false;
  t->events = 0;
  free_tcb(t);
}

TcpError TcpStack::set_user(TcpConnId c, TcpEventFn fn, void* user) {
  Tcb* t = tcb_of(c);
  if (t == nullptr) return TcpError::kStale;
  t->fn = fn;
  t->user = user;
  return TcpError::kOk;
}

TcpError TcpStack::set_keepalive(TcpConnId c, bool on, uint32_t idle_ms, uint32_t interval_ms,
                                 uint32_t probes) {
  Tcb* t = tcb_of(c);
  if (t == nullptr) return TcpError::kStale;
  t->ka_enabled = on;
  t->ka_idle_ms = idle_ms != 0 ? idle_ms : kDefaultKeepaliveIdleMs;
  t->ka_interval_ms = interval_ms != 0 ? interval_ms : kDefaultKeepaliveIntervalMs;
  t->ka_max_probes = uint8_t(std::min<uint32_t>(probes != 0 ? probes : kDefaultKeepaliveProbes, 255));
  if (!on) {
    deps_.wheel->cancel(&t->keep_timer);
  } else if (t->synchronized()) {
    deps_.wheel->schedule(&t->keep_timer, t->last_rcv_ms + t->ka_idle_ms);
  }
  return TcpError::kOk;
}

// ---- ICMP -------------------------------------------------------------------------------------

void TcpStack::icmp_too_big(const TcpTuple& tp, uint32_t seq, uint32_t mtu) {
  Tcb* t = lookup(tp);
  if (t == nullptr || !t->synchronized() || !seq_in_range(seq, t->snd_una, t->snd_max)) {
    count(kDropIcmpIgnored);
    return;
  }
  // RFC 8200 §5: 1280 is every IPv6 link's minimum; for IPv4 we do not go below 576 (RFC 9293
  // §3.7.1's default datagram) whatever a forged ICMP says (RFC 5927 §7.3).
  const uint32_t min_mtu = t->v6 ? 1280 : 576;
  const uint32_t hdrs = (t->v6 ? 40 : 20) + 20 + (t->ts_ok ? 12 : 0);
  const uint32_t smss = std::max(mtu, min_mtu) - hdrs;
  if (smss >= t->smss) return;
  t->smss = uint16_t(smss);
  t->cc.set_smss(smss);
  t->sack.set_smss(smss);
  count(kPmtuUpdates);
  // RFC 1191 §6.5: resend at once what was sent too big; this is not congestion.
  t->snd_nxt = t->snd_una;
  t->rtt_timing = false;
  output(t);
}

// ---- Introspection ----------------------------------------------------------------------------

TcpState TcpStack::state(TcpConnId c) const {
  const Tcb* t = tcb_of(c);
  return t == nullptr ? TcpState::kClosed : t->state;
}

bool TcpStack::info(TcpConnId c, TcpConnInfo* out) const {
  Tcb* t = tcb_of(c);
  if (t == nullptr) return false;
  out->state = t->state;
  out->tuple = t->tuple;
  out->snd_una = t->snd_una;
  out->snd_nxt = t->snd_nxt;
  out->snd_wnd = t->snd_wnd;
  out->rcv_nxt = t->rcv_nxt;
  out->rcv_wnd = t->rcv_adv - t->rcv_nxt;
  out->cwnd = t->cc.cwnd_bytes();
  out->ssthresh = t->cc.ssthresh_bytes();
  out->srtt_us = t->rto.srtt_us();
  out->rto_us = t->rto.rto_us();
  out->send_queued = t->sb.bytes;
  out->recv_queued = t->rq_bytes;
  out->mss = t->smss;
  out->snd_wscale = t->snd_wscale;
  out->rcv_wscale = t->rcv_wscale;
  out->ts = t->ts_ok;
  out->sack = t->sack_ok;
  out->ws = t->ws_ok;
  return true;
}

}  // namespace meshgate::dp::tcp
