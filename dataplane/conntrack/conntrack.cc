#include "dataplane/conntrack/conntrack.h"

#include <rte_prefetch.h>

#include "dataplane/common/hash.h"
#include "dataplane/lb/lb.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {

const char* tcp_state_name(TcpState s) {
  switch (s) {
    case TcpState::kNone: return "NONE";
    case TcpState::kSynSent: return "SYN_SENT";
    case TcpState::kSynRecv: return "SYN_RECV";
    case TcpState::kEstablished: return "ESTABLISHED";
    case TcpState::kFinWait: return "FIN_WAIT";
    case TcpState::kCloseWait: return "CLOSE_WAIT";
    case TcpState::kLastAck: return "LAST_ACK";
    case TcpState::kTimeWait: return "TIME_WAIT";
    case TcpState::kClose: return "CLOSE";
  }
  return "?";
}

namespace {

uint32_t bucket_count(uint32_t max_flows) {
  // Two references per flow, buckets of 8, at most ~60% full.
  const uint64_t want = (uint64_t(max_flows) * 2 * 10 / 6) / FlowTable::kBucketEntries + 1;
  uint32_t n = 1;
  while (n < want) n <<= 1;
  return n;
}

uint32_t embryo_count(uint32_t max_flows) {
  uint32_t n = 1;
  while (n < max_flows) n <<= 1;
  return n;
}

uint32_t alt_bucket(uint32_t h) { return FlowTable::alt_hash(h); }
uint32_t tick_of(uint32_t ms) { return ms >> FlowTable::kTickShift; }

constexpr uint32_t kNoSlot = 0xffff;

}  // namespace

namespace {

// The table's arrays in one allocation, each 64-byte aligned: [offset, bytes) per array.
struct Layout {
  size_t flows, free, buckets, wheel_head, wheel_next, wheel_prev, wheel_slot, wheel_filed,
      embryo, total;
};

Layout layout_of(uint32_t max_flows) {
  Layout l{};
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t off = at;
    at = (at + bytes + 63) & ~size_t(63);
    return off;
  };
  l.flows = take(sizeof(Flow) * size_t(max_flows));
  l.buckets = take(sizeof(FlowTable::Bucket) * size_t(bucket_count(max_flows)));
  l.free = take(4ull * max_flows);
  l.wheel_head = take(4ull * (FlowTable::kWheelSlots + 1));
  l.wheel_next = take(4ull * max_flows);
  l.wheel_prev = take(4ull * max_flows);
  l.wheel_slot = take(2ull * max_flows);
  l.wheel_filed = take(4ull * max_flows);
  l.embryo = take(4ull * embryo_count(max_flows));
  l.total = at;
  return l;
}

}  // namespace

size_t FlowTable::memory_bytes(uint32_t max_flows) { return layout_of(max_flows).total; }

bool FlowTable::init(uint32_t max_flows, int socket, const ConntrackTimeouts& t,
                     const AddrTable* addrs) {
  max_flows_ = max_flows;
  timeouts_ = t;
  addrs_ = addrs;
  const uint32_t nb = bucket_count(max_flows);
  const uint32_t ne = embryo_count(max_flows);
  const Layout l = layout_of(max_flows);
  mem_ = table_alloc("mg_flow_table", l.total, socket);
  if (!mem_.p) return false;
  auto* base = static_cast<uint8_t*>(mem_.p);
  flows_ = reinterpret_cast<Flow*>(base + l.flows);
  free_ = reinterpret_cast<uint32_t*>(base + l.free);
  buckets_ = reinterpret_cast<Bucket*>(base + l.buckets);
  wheel_head_ = reinterpret_cast<uint32_t*>(base + l.wheel_head);
  wheel_next_ = reinterpret_cast<uint32_t*>(base + l.wheel_next);
  wheel_prev_ = reinterpret_cast<uint32_t*>(base + l.wheel_prev);
  wheel_slot_ = reinterpret_cast<uint16_t*>(base + l.wheel_slot);
  wheel_filed_ = reinterpret_cast<uint32_t*>(base + l.wheel_filed);
  embryo_ = reinterpret_cast<uint32_t*>(base + l.embryo);
  for (uint32_t i = 0; i < nb; ++i) {
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      buckets_[i].sig[j] = 0;
      buckets_[i].ref[j] = kEmpty;
    }
  }
  bucket_mask_ = nb - 1;
  for (uint32_t i = 0; i <= kWheelSlots; ++i) wheel_head_[i] = kEmpty;
  for (uint32_t i = 0; i < max_flows; ++i) wheel_slot_[i] = kNoSlot;
  // Pop order = ascending indices: deterministic replays, readable dumps.
  for (uint32_t i = 0; i < max_flows; ++i) free_[i] = max_flows - 1 - i;
  free_top_ = max_flows;
  embryo_mask_ = ne - 1;
  embryo_head_ = embryo_tail_ = 0;
  active_ = established_ = 0;
  wheel_started_ = false;
  return true;
}

void FlowTable::destroy() {
  table_free(&mem_);
  flows_ = nullptr;
  free_ = nullptr;
  buckets_ = nullptr;
  wheel_head_ = wheel_next_ = wheel_prev_ = nullptr;
  wheel_slot_ = nullptr;
  wheel_filed_ = nullptr;
  embryo_ = nullptr;
}

Tuple FlowTable::original_tuple(const Flow& f) const {
  return Tuple{f.client, vip(f), f.client_port, f.vip_port, f.proto};
}

Tuple FlowTable::reply_tuple(const Flow& f) const {
  if (f.mode == Mode::kFullnat) {
    return Tuple{f.backend, local(f), f.backend_port, f.local_port, f.proto};
  }
  return Tuple{f.backend, f.client, f.backend_port, f.client_port, f.proto};
}

bool FlowTable::embryonic(const Flow& f) const {
  if (f.proto == kProtoTcp) return f.state == TcpState::kSynSent || f.state == TcpState::kSynRecv;
  return !(f.flags & kFlowSeenReply) && f.mode != Mode::kDsrIpip && f.mode != Mode::kDsrGue;
}

uint32_t FlowTable::timeout_ms(const Flow& f) const {
  switch (f.state) {
    case TcpState::kNone: return f.proto == kProtoUdp ? timeouts_.udp_ms : timeouts_.other_ms;
    case TcpState::kSynSent:
    case TcpState::kSynRecv: return timeouts_.tcp_syn_ms;
    case TcpState::kEstablished: return timeouts_.tcp_established_ms;
    case TcpState::kFinWait:
    case TcpState::kCloseWait:
    case TcpState::kLastAck: return timeouts_.tcp_fin_ms;
    case TcpState::kTimeWait: return timeouts_.tcp_time_wait_ms;
    case TcpState::kClose: return timeouts_.tcp_close_ms;
  }
  return timeouts_.other_ms;
}

bool FlowTable::reply_in_use(const Tuple& t, uint32_t h) const {
  const uint32_t b[2] = {h & bucket_mask_, alt_bucket(h) & bucket_mask_};
  for (uint32_t k = 0; k < 2; ++k) {
    const Bucket& bk = buckets_[b[k]];
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      if (bk.sig[j] != h || bk.ref[j] == kEmpty) continue;
      const Flow& f = flows_[bk.ref[j] >> 1];
      if (matches(f, FlowDir(bk.ref[j] & 1), t)) return true;
    }
  }
  return false;
}

bool FlowTable::link(uint32_t h, uint32_t ref) {
  // "Power of two choices": the less loaded of the two candidate buckets keeps the fullest
  // bucket near log log n, so inserts do not fail long before the pool is full (first-fit
  // did, at a third of the slots).
  const uint32_t b[2] = {h & bucket_mask_, alt_bucket(h) & bucket_mask_};
  const uint32_t free0 = free_lanes(buckets_[b[0]]);
  const uint32_t free1 = free_lanes(buckets_[b[1]]);
  const uint32_t k = __builtin_popcount(free1) > __builtin_popcount(free0) ? 1 : 0;
  if (const uint32_t fr = k ? free1 : free0) {
    const uint32_t j = uint32_t(__builtin_ctz(fr));
    buckets_[b[k]].sig[j] = h;
    buckets_[b[k]].ref[j] = ref;
    return true;
  }
  // Both full: move one resident to its other bucket (one cuckoo step). A resident's two
  // buckets follow from its signature, which is the full hash.
  for (uint32_t k2 = 0; k2 < 2; ++k2) {
    Bucket& bk = buckets_[b[k2]];
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      const uint32_t sig = bk.sig[j];
      const uint32_t primary = sig & bucket_mask_;
      const uint32_t other = primary == b[k2] ? alt_bucket(sig) & bucket_mask_ : primary;
      if (other == b[k2]) continue;
      Bucket& ob = buckets_[other];
      const uint32_t fr = free_lanes(ob);
      if (!fr) continue;
      const uint32_t e = uint32_t(__builtin_ctz(fr));
      ob.sig[e] = sig;
      ob.ref[e] = bk.ref[j];
      bk.sig[j] = h;
      bk.ref[j] = ref;
      return true;
    }
  }
  return false;
}

void FlowTable::unlink(uint32_t h, uint32_t ref) {
  const uint32_t b[2] = {h & bucket_mask_, alt_bucket(h) & bucket_mask_};
  for (uint32_t k = 0; k < 2; ++k) {
    Bucket& bk = buckets_[b[k]];
    if (const uint32_t at = lanes_equal(bk.ref, ref)) {
      bk.ref[__builtin_ctz(at)] = kEmpty;
      return;
    }
  }
}

bool FlowTable::evict_one() {
  // Oldest not-yet-established flows first: under a SYN flood these are the flood, and an
  // established flow is never reclaimed for room.
  for (uint32_t tries = 0; tries < kEvictTries && embryo_head_ != embryo_tail_; ++tries) {
    const uint32_t idx = embryo_[embryo_head_++ & embryo_mask_];
    Flow& f = flows_[idx];
    if (f.proto != 0 && embryonic(f)) {
      remove(&f);
      ++stats_.evicted;
      return true;
    }
  }
  return false;
}

Flow* FlowTable::insert(const Tuple& orig, const FlowTarget& to, uint32_t now_ms) {
  return insert_once(orig, to, now_ms, true);
}

Flow* FlowTable::insert_once(const Tuple& orig, const FlowTarget& to, uint32_t now_ms,
                             bool retry) {
  if (free_top_ == 0 && !evict_one()) {
    ++stats_.insert_failed;
    return nullptr;
  }
  const uint32_t idx = free_[free_top_ - 1];
  Flow& f = flows_[idx];
  f.client = orig.src;
  f.backend = to.backend;
  f.client_port = orig.sport;
  f.vip_port = orig.dport;
  f.backend_port = to.backend_port;
  f.local_port = to.local_port;
  f.vip_id = to.vip_id;
  f.local_id = to.local_id;
  f.stat_id = to.stat_id;
  f.created_ms = now_ms;
  f.proto = orig.proto;
  f.mode = to.mode;
  f.flags = 0;
  f.state = TcpState::kNone;
  const bool dsr = to.mode == Mode::kDsrIpip || to.mode == Mode::kDsrGue;
  const uint32_t h0 = hash(orig);
  bool ok = link(h0, idx << 1);
  if (ok && !dsr) {
    ok = link(hash(reply_tuple(f)), idx << 1 | 1);
    if (!ok) unlink(h0, idx << 1);
  }
  if (!ok) {
    // The index is crowded where this key falls: make room once and retry once.
    f.proto = 0;
    if (retry && evict_one()) return insert_once(orig, to, now_ms, false);
    ++stats_.insert_failed;
    return nullptr;
  }
  --free_top_;
  ++active_;
  // A TCP flow first seen mid-stream (not a SYN) is taken as established (a restarted gateway
  // or an ECMP change must not break it); touch() refines the state from the flags.
  if (orig.proto == kProtoTcp) {
    set_state(&f, TcpState::kEstablished);
  } else if (!dsr) {
    push_embryo(idx);  // until a reply is seen
  }
  f.expire_ms = now_ms + timeout_ms(f);
  wheel_insert(idx);
  return &f;
}

void FlowTable::remove(Flow* f) {
  const uint32_t idx = uint32_t(f - flows_);
  unlink(hash(original_tuple(*f)), idx << 1);
  if (f->mode != Mode::kDsrIpip && f->mode != Mode::kDsrGue) {
    unlink(hash(reply_tuple(*f)), idx << 1 | 1);
  }
  wheel_unlink(idx);
  set_state(f, TcpState::kNone);
  f->proto = 0;
  free_[free_top_++] = idx;
  --active_;
}

void FlowTable::set_state(Flow* f, TcpState s) {
  established_ += (s == TcpState::kEstablished) - (f->state == TcpState::kEstablished);
  if ((s == TcpState::kSynSent || s == TcpState::kSynRecv) && f->state != TcpState::kSynSent &&
      f->state != TcpState::kSynRecv) {
    push_embryo(uint32_t(f - flows_));
  }
  f->state = s;
}

void FlowTable::push_embryo(uint32_t idx) {
  embryo_[embryo_tail_++ & embryo_mask_] = idx;
  // The ring holds at least as many entries as the pool; an overrun forgets the oldest.
  if (embryo_tail_ - embryo_head_ > embryo_mask_ + 1) embryo_head_ = embryo_tail_ - embryo_mask_ - 1;
}

void FlowTable::touch_slow(Flow* f, FlowDir dir, uint8_t flags, uint32_t now_ms) {
  const bool orig = dir == FlowDir::kOriginal;
  if (!orig && !(f->flags & kFlowSeenReply)) {
    f->flags |= kFlowSeenReply;
  }
  if (f->proto == kProtoTcp) {
    TcpState s = f->state;
    if (flags & kTcpRst) {
      s = TcpState::kClose;
    } else if (flags & kTcpSyn) {
      if (orig && !(flags & kTcpAck)) {
        // A SYN opens (or, after a close, reopens) the connection; on an established flow it
        // is the first packet we saw being a SYN, or a retransmission.
        if (s == TcpState::kEstablished || s == TcpState::kClose || s == TcpState::kTimeWait ||
            s == TcpState::kNone) {
          s = TcpState::kSynSent;
          f->flags &= uint8_t(~(kFlowFinOrig | kFlowFinReply | kFlowLastFinReply));
        }
      } else if (!orig && (flags & kTcpAck) && s == TcpState::kSynSent) {
        s = TcpState::kSynRecv;
      }
    } else if (flags & kTcpFin) {
      f->flags |= orig ? kFlowFinOrig : kFlowFinReply;
      if ((f->flags & kFlowFinOrig) && (f->flags & kFlowFinReply)) {
        // The second FIN, whether the closes crossed (simultaneous close) or not.
        if (s != TcpState::kLastAck && s != TcpState::kTimeWait) {
          s = TcpState::kLastAck;
          if (!orig) f->flags |= kFlowLastFinReply;
        }
      } else if (s != TcpState::kClose) {
        s = orig ? TcpState::kFinWait : TcpState::kCloseWait;
      }
    } else if (flags & kTcpAck) {
      const bool dsr = f->mode == Mode::kDsrIpip || f->mode == Mode::kDsrGue;
      if (orig && (s == TcpState::kSynRecv || (dsr && s == TcpState::kSynSent))) {
        // DSR never sees the SYN-ACK: the client's ACK is all the handshake there is to see.
        s = TcpState::kEstablished;
      } else if (s == TcpState::kLastAck) {
        // The ACK of the last FIN comes from the side that did not send it.
        const bool last_fin_reply = f->flags & kFlowLastFinReply;
        if (orig == last_fin_reply) s = TcpState::kTimeWait;
      }
    }
    if (s != f->state) set_state(f, s);
  }
  const uint32_t old_expire = f->expire_ms;
  f->expire_ms = now_ms + timeout_ms(*f);
  // A shorter timeout than before (TIME_WAIT, a reset) may leave the flow filed for a later
  // tick: file it again. The common case, an extension, touches only the entry.
  if (MG_UNLIKELY(int32_t(f->expire_ms - old_expire) < 0)) {
    const uint32_t idx = index_of(f);
    if (wheel_slot_[idx] != kNoSlot && wheel_slot_[idx] != kWheelSlots &&
        int32_t(tick_of(f->expire_ms) - wheel_filed_[idx]) < 0) {
      wheel_unlink(idx);
      wheel_insert(idx);
    }
  }
}

// ---- timer wheel --------------------------------------------------------------------------

void FlowTable::wheel_insert(uint32_t idx) {
  uint32_t tick = tick_of(flows_[idx].expire_ms);
  // A flow due in a tick the wheel has reached (its expiry falls later in that tick) goes to
  // the next tick, not a round later.
  if (wheel_started_ && int32_t(tick - wheel_tick_) <= 0) tick = wheel_tick_ + 1;
  const uint32_t slot = tick & (kWheelSlots - 1);
  wheel_slot_[idx] = uint16_t(slot);
  wheel_filed_[idx] = tick;
  wheel_prev_[idx] = kEmpty;
  wheel_next_[idx] = wheel_head_[slot];
  if (wheel_head_[slot] != kEmpty) wheel_prev_[wheel_head_[slot]] = idx;
  wheel_head_[slot] = idx;
}

void FlowTable::wheel_unlink(uint32_t idx) {
  const uint32_t slot = wheel_slot_[idx];
  if (slot == kNoSlot) return;
  const uint32_t prev = wheel_prev_[idx], next = wheel_next_[idx];
  if (prev != kEmpty) wheel_next_[prev] = next;
  else wheel_head_[slot] = next;
  if (next != kEmpty) wheel_prev_[next] = prev;
  wheel_slot_[idx] = kNoSlot;
}

uint32_t FlowTable::advance(uint32_t now_ms) {
  const uint32_t now_tick = tick_of(now_ms);
  if (!wheel_started_) {
    wheel_tick_ = now_tick - 1;
    wheel_started_ = true;
  }
  uint32_t budget = kWheelBudget, reclaimed = 0;
  constexpr uint32_t kWork = kWheelSlots;  // the list of the slot being processed
  // After a jump of more than a round (a replay gap), one round visits every slot.
  if (wheel_head_[kWork] == kEmpty && int32_t(now_tick - wheel_tick_) > int32_t(kWheelSlots)) {
    wheel_tick_ = now_tick - kWheelSlots;
  }
  while (budget) {
    if (wheel_head_[kWork] == kEmpty) {
      if (int32_t(now_tick - wheel_tick_) <= 0) break;
      --budget;  // an empty tick costs too: bounds the loop after a clock jump
      // Take the next tick's slot as the work list; flows re-filed into the same slot while it
      // is processed land in the (new, empty) slot list, not in the work list.
      ++wheel_tick_;
      const uint32_t slot = wheel_tick_ & (kWheelSlots - 1);
      const uint32_t head = wheel_head_[slot];
      wheel_head_[slot] = kEmpty;
      wheel_head_[kWork] = head;
      for (uint32_t i = head; i != kEmpty; i = wheel_next_[i]) wheel_slot_[i] = uint16_t(kWork);
      continue;
    }
    const uint32_t idx = wheel_head_[kWork];
    wheel_unlink(idx);
    --budget;
    Flow& f = flows_[idx];
    if (int32_t(f.expire_ms - now_ms) <= 0) {
      // remove() unlinks from the wheel again: a no-op for an unlinked flow.
      remove(&f);
      ++stats_.expired;
      ++reclaimed;
    } else {
      wheel_insert(idx);  // refreshed since it was filed: file it under its new expiry
    }
  }
  return reclaimed;
}

}  // namespace meshgate::dp
