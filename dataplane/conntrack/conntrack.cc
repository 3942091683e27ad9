#include "dataplane/conntrack/conntrack.h"

#include <algorithm>
#include <vector>

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

uint32_t bucket_count(uint32_t slots) {
  // Two references per flow, buckets of 8, at most 3/4 full at capacity (the two choices and
  // the cuckoo step fill every slot of the pool at that: FlowTableTest, ct_memory).
  return uint32_t((uint64_t(slots) * 2 * 4 / 3 + FlowTable::kBucketEntries - 1) /
                  FlowTable::kBucketEntries) + 1;
}

uint32_t embryo_count(uint32_t slots) {
  uint32_t n = 1;
  while (n < slots / 2) n <<= 1;
  return n;
}

uint32_t alt_bucket(uint32_t h) { return FlowTable::alt_hash(h); }

// The table's arrays in one allocation, each 64-byte aligned: [offset, bytes) per array.
struct Layout {
  size_t flows, created, buckets, embryo, total;
};

Layout layout_of(uint32_t slots) {
  Layout l{};
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t off = at;
    at = (at + bytes + 63) & ~size_t(63);
    return off;
  };
  l.flows = take(sizeof(Flow) * size_t(slots));
  l.created = take(4ull * slots);
  l.buckets = take(sizeof(FlowTable::Bucket) * size_t(bucket_count(slots)));
  l.embryo = take(4ull * embryo_count(slots));
  l.total = at;
  return l;
}

}  // namespace

size_t FlowTable::memory_bytes(uint32_t max_flows) {
  return layout_of(slot_count(max_flows)).total;
}

void FlowTable::set_timeouts(const ConntrackTimeouts& t) {
  timeouts_ = t;
  unassured_ms_ = std::min(t.tcp_syn_ms, t.tcp_established_ms);
}

bool FlowTable::init(uint32_t max_flows, int socket, const ConntrackTimeouts& t,
                     const AddrTable* addrs) {
  const uint32_t slots = slot_count(max_flows);
  set_timeouts(t);
  addrs_ = addrs;
  const uint32_t nb = bucket_count(slots);
  const uint32_t ne = embryo_count(slots);
  const Layout l = layout_of(slots);
  mem_ = table_alloc("mg_flow_table", l.total, socket);
  if (!mem_.p) return false;
  auto* base = static_cast<uint8_t*>(mem_.p);
  flows_ = reinterpret_cast<Flow*>(base + l.flows);
  created_ = reinterpret_cast<uint32_t*>(base + l.created);
  buckets_ = reinterpret_cast<Bucket*>(base + l.buckets);
  embryo_ = reinterpret_cast<uint32_t*>(base + l.embryo);
  for (uint32_t i = 0; i < nb; ++i) {
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      buckets_[i].sig[j] = 0;
      buckets_[i].ref[j] = kEmpty;
    }
  }
  n_buckets_ = nb;
  n_slots_ = slots;
  // Every line free; pop order = ascending slots: deterministic replays, readable dumps.
  free_pair_head_ = free_single_head_ = kEmpty;
  for (uint32_t e = slots; e >= 2; e -= 2) push_pair(e - 2);
  sweep_period_ms_ = std::max(kSweepMinPeriodMs, (slots + kSweepPerMs - 1) / kSweepPerMs);
  sweep_cursor_ = 0;
  sweep_credit_ = 0;
  sweep_started_ = false;
  embryo_mask_ = ne - 1;
  embryo_head_ = embryo_tail_ = 0;
  active_ = established_ = closing_ = 0;
  return true;
}

void FlowTable::destroy() {
  table_free(&mem_);
  flows_ = nullptr;
  created_ = nullptr;
  buckets_ = nullptr;
  embryo_ = nullptr;
  n_slots_ = 0;
  free_pair_head_ = free_single_head_ = kEmpty;
}

// ---- slots -------------------------------------------------------------------------------

void FlowTable::push_pair(uint32_t even) {
  flows_[even].proto = 0;
  flows_[even + 1].proto = 0;
  flows_[even].expire_ms = free_pair_head_;
  free_pair_head_ = even;
}

void FlowTable::push_single(uint32_t idx) {
  Flow& f = flows_[idx];
  f.proto = 0;
  f.expire_ms = free_single_head_;
  f.client4 = kEmpty;
  if (free_single_head_ != kEmpty) flows_[free_single_head_].client4 = idx;
  free_single_head_ = idx;
}

void FlowTable::unlink_single(uint32_t idx) {
  const uint32_t next = flows_[idx].expire_ms;
  const uint32_t prev = flows_[idx].client4;
  if (prev != kEmpty) flows_[prev].expire_ms = next;
  else free_single_head_ = next;
  if (next != kEmpty) flows_[next].client4 = prev;
}

uint32_t FlowTable::alloc_slots(bool pair) {
  if (!pair && free_single_head_ != kEmpty) {
    const uint32_t idx = free_single_head_;
    unlink_single(idx);
    return idx;
  }
  if (free_pair_head_ == kEmpty) return kEmpty;
  const uint32_t even = free_pair_head_;
  free_pair_head_ = flows_[even].expire_ms;
  if (!pair) push_single(even + 1);
  return even;
}

void FlowTable::free_slots(uint32_t idx, bool pair) {
  if (pair) {
    push_pair(idx);
    return;
  }
  const uint32_t mate = idx ^ 1;
  if (flows_[mate].proto == 0) {
    // The line-mate is a free single (an IPv4 slot's mate is never half of an IPv6 flow).
    unlink_single(mate);
    push_pair(idx & ~1u);
  } else {
    push_single(idx);
  }
}

Tuple FlowTable::original_tuple(const Flow& f) const {
  return Tuple{f.client(), vip(f), f.client_port, f.vip_port, f.proto};
}

Tuple FlowTable::reply_tuple(const Flow& f) const {
  if (f.mode == Mode::kFullnat) {
    return Tuple{f.backend(), local(f), f.backend_port, f.local_port, f.proto};
  }
  return Tuple{f.backend(), f.client(), f.backend_port, f.client_port, f.proto};
}

uint32_t FlowTable::hash_of(const Flow& f, FlowDir dir) const {
  if (f.v6()) return hash(dir == FlowDir::kOriginal ? original_tuple(f) : reply_tuple(f));
  // Ports as a TCP/UDP header holds them, loaded as they lie in memory (lb_flow_hash_v4).
  const auto ports = [](uint16_t sport_be, uint16_t dport_be) {
    uint16_t w[2] = {sport_be, dport_be};
    uint32_t v;
    std::memcpy(&v, w, 4);
    return v;
  };
  if (dir == FlowDir::kOriginal) {
    return lb_flow_hash_v4(f.client4, f.vip4, ports(f.client_port, f.vip_port), f.proto);
  }
  if (f.mode == Mode::kFullnat) {
    uint32_t local4;
    std::memcpy(&local4, local(f).v4_ptr(), 4);
    return lb_flow_hash_v4(f.backend4, local4, ports(f.backend_port, f.local_port), f.proto);
  }
  return lb_flow_hash_v4(f.backend4, f.client4, ports(f.backend_port, f.client_port), f.proto);
}

bool FlowTable::embryonic(const Flow& f) const {
  if (f.proto == kProtoTcp) {
    return f.state == TcpState::kSynSent || f.state == TcpState::kSynRecv ||
           !(f.flags & kFlowSeenReply);
  }
  return !(f.flags & kFlowSeenReply) && !is_dsr(f.mode);
}

uint32_t FlowTable::timeout_ms(const Flow& f) const {
  switch (f.state) {
    case TcpState::kNone: return f.proto == kProtoUdp ? timeouts_.udp_ms : timeouts_.other_ms;
    case TcpState::kSynSent:
    case TcpState::kSynRecv: return timeouts_.tcp_syn_ms;
    case TcpState::kEstablished:
      // Unassured (picked up mid-stream, the other direction not seen yet): a handshake's time.
      return f.flags & kFlowSeenReply ? timeouts_.tcp_established_ms : unassured_ms_;
    case TcpState::kFinWait:
    case TcpState::kCloseWait:
    case TcpState::kLastAck: return timeouts_.tcp_fin_ms;
    case TcpState::kTimeWait: return timeouts_.tcp_time_wait_ms;
    case TcpState::kClose: return timeouts_.tcp_close_ms;
  }
  return timeouts_.other_ms;
}

bool FlowTable::reply_in_use(const Tuple& t, uint32_t h) const {
  const uint32_t b[2] = {bucket_of(h), bucket_of(alt_bucket(h))};
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
  // The first bucket while it is at most half full, so that a lookup finds the key in the
  // bucket it reads first (a key in the second costs a second, dependent cache miss); past
  // that, "power of two choices": the less loaded of the two keeps the fullest bucket near
  // log log n, so inserts do not fail long before the pool is full (first-fit did, at a third
  // of the slots).
  // (The second bucket is read only when the first is more than half full: a cache miss.)
  const uint32_t b[2] = {bucket_of(h), bucket_of(alt_bucket(h))};
  uint32_t fr = free_lanes(buckets_[b[0]]);
  const uint32_t n0 = uint32_t(__builtin_popcount(fr));
  uint32_t k = 0;
  if (n0 < kBucketEntries / 2) {
    const uint32_t free1 = free_lanes(buckets_[b[1]]);
    if (uint32_t(__builtin_popcount(free1)) > n0) {
      fr = free1;
      k = 1;
    }
  }
  if (fr) {
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
      const uint32_t primary = bucket_of(sig);
      const uint32_t other = primary == b[k2] ? bucket_of(alt_bucket(sig)) : primary;
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

FlowTable::IndexOccupancy FlowTable::index_occupancy() const {
  IndexOccupancy o;
  for (uint32_t b = 0; b < n_buckets_; ++b) {
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      if (buckets_[b].ref[j] == kEmpty) continue;
      ++o.refs;
      o.in_first += bucket_of(buckets_[b].sig[j]) == b;  // the signature is the key's hash
    }
  }
  return o;
}

void FlowTable::unlink(uint32_t h, uint32_t ref) {
  const uint32_t b[2] = {bucket_of(h), bucket_of(alt_bucket(h))};
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
    // The index buckets of the flow kEvictAhead evictions on (its slot is in cache:
    // prefetch_evictions), so that unlinking it then does not wait for them.
    if (embryo_tail_ - embryo_head_ > kEvictAhead) {
      const uint32_t ahead = embryo_[(embryo_head_ + kEvictAhead) & embryo_mask_];
      if (heads(ahead)) {
        const Flow& a = flows_[ahead];
        rte_prefetch0(&buckets_[bucket_of(hash_of(a, FlowDir::kOriginal))]);
        if (!is_dsr(a.mode)) rte_prefetch0(&buckets_[bucket_of(hash_of(a, FlowDir::kReply))]);
      }
    }
    const uint32_t idx = embryo_[embryo_head_++ & embryo_mask_];
    if (!heads(idx)) continue;  // freed since (and maybe now the second half of a flow)
    Flow& f = flows_[idx];
    if (embryonic(f)) {
      remove(&f, FlowEnd::kEvicted);
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
  // One slot when every address is IPv4 (the local address follows the backend's family).
  const bool v6 = !(orig.src.is_v4() && orig.dst.is_v4() && to.backend.is_v4() &&
                    (to.local_id == 0 || addrs_->at(to.local_id).is_v4()));
  uint32_t idx = alloc_slots(v6);
  // Full: evict a not-yet-established flow. An IPv6 flow needs a whole line, which an evicted
  // IPv4 flow frees only when its line-mate is free too: a few tries.
  for (uint32_t n = 0; idx == kEmpty && n < (v6 ? 4u : 1u) && evict_one(); ++n) {
    idx = alloc_slots(v6);
  }
  if (idx == kEmpty) {
    ++stats_.insert_failed;
    return nullptr;
  }
  Flow& f = flows_[idx];
  if (v6) {
    f.client4 = f.backend4 = 0;
    f.vip_id = to.vip_id;
    f.addrs6() = FlowAddrs6{orig.src, to.backend};
  } else {
    std::memcpy(&f.client4, orig.src.v4_ptr(), 4);
    std::memcpy(&f.vip4, orig.dst.v4_ptr(), 4);
    std::memcpy(&f.backend4, to.backend.v4_ptr(), 4);
  }
  f.client_port = orig.sport;
  f.vip_port = orig.dport;
  f.backend_port = to.backend_port;
  f.local_port = to.local_port;
  f.local_id = to.local_id;
  f.stat_id = to.stat_id;
  f.proto = orig.proto;
  f.mode = to.mode;
  f.flags = v6 ? kFlowV6 : 0;
  f.state = TcpState::kNone;
  created_[idx] = now_ms;
  const bool dsr = is_dsr(to.mode);
  const uint32_t h0 = hash(orig);
  bool ok = link(h0, idx << 1);
  if (ok && !dsr) {
    ok = link(hash_of(f, FlowDir::kReply), idx << 1 | 1);
    if (!ok) unlink(h0, idx << 1);
  }
  if (!ok) {
    // The index is crowded where this key falls: make room once and retry once.
    free_slots(idx, v6);
    if (retry && evict_one()) return insert_once(orig, to, now_ms, false);
    ++stats_.insert_failed;
    return nullptr;
  }
  ++active_;
  // A TCP flow first seen mid-stream (not a SYN) is taken as established (a restarted gateway
  // or an ECMP change must not break it), but unassured until its other direction shows;
  // touch() refines the state from the flags.
  if (orig.proto == kProtoTcp) set_state(&f, TcpState::kEstablished);
  if (embryonic(f)) push_embryo(idx);  // an eviction candidate until assured
  f.expire_ms = now_ms + timeout_ms(f);
  return &f;
}

void FlowTable::remove(Flow* f, FlowEnd why) {
  const uint32_t idx = index_of(f);
  if (MG_UNLIKELY(end_fn_ != nullptr)) end_fn_(end_ctx_, *f, created_[idx], why);
  const bool v6 = f->v6();
  unlink(hash_of(*f, FlowDir::kOriginal), idx << 1);
  if (!is_dsr(f->mode)) unlink(hash_of(*f, FlowDir::kReply), idx << 1 | 1);
  set_state(f, TcpState::kNone);
  free_slots(idx, v6);
  --active_;
}

void FlowTable::set_state(Flow* f, TcpState s) {
  established_ += (s == TcpState::kEstablished) - (f->state == TcpState::kEstablished);
  closing_ += uint32_t(is_closing(s)) - uint32_t(is_closing(f->state));
  // A SYN reopening an assured flow makes it an eviction candidate again. (An unassured flow
  // is one since insert() filed it: the ring holds half as many entries as slots, so no flow
  // is filed twice.)
  if ((s == TcpState::kSynSent || s == TcpState::kSynRecv) && f->state != TcpState::kSynSent &&
      f->state != TcpState::kSynRecv && (f->flags & kFlowSeenReply)) {
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
        // A SYN opens (or, after a close, reopens) the connection; that includes a flow
        // insert() has just filed as ESTABLISHED and unassured, this SYN being its first
        // packet. On an assured ESTABLISHED flow, or in a closing state, it changes nothing, as
        // Linux conntrack ignores it there (a stale retransmission, or a client out of step):
        // the flow keeps its state and timeout, and stays safe from eviction.
        const bool unassured = s == TcpState::kEstablished && !(f->flags & kFlowSeenReply);
        if (s == TcpState::kClose || s == TcpState::kTimeWait || s == TcpState::kNone ||
            unassured) {
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
      const bool dsr = is_dsr(f->mode);
      if (orig && (s == TcpState::kSynRecv || (dsr && s == TcpState::kSynSent))) {
        // DSR never sees the SYN-ACK: the client's ACK is all the handshake there is to see,
        // and it assures the flow.
        s = TcpState::kEstablished;
        if (dsr) f->flags |= kFlowSeenReply;
      } else if (s == TcpState::kLastAck) {
        // The ACK of the last FIN comes from the side that did not send it.
        const bool last_fin_reply = f->flags & kFlowLastFinReply;
        if (orig == last_fin_reply) s = TcpState::kTimeWait;
      }
    }
    if (s != f->state) set_state(f, s);
  }
  f->expire_ms = now_ms + timeout_ms(*f);
}

const char* FlowTable::audit(uint32_t now_ms) const {
  // 0 = unseen, 1 = in use (a flow's slots), 2 = free single, 3 = free line.
  std::vector<uint8_t> seen(n_slots_, 0);
  uint32_t used = 0;
  for (uint32_t idx = 0; idx < n_slots_; ++idx) {
    if (!heads(idx)) continue;
    seen[idx] = 1;
    ++used;
    if (flows_[idx].v6()) {
      if (idx & 1) return "an IPv6 flow starts in an odd slot";
      seen[idx + 1] = 1;
    }
  }
  if (used != active_) return "active() is not the number of flows";
  uint32_t est = 0, closing = 0;
  for (uint32_t idx = 0; idx < n_slots_; ++idx) {
    if (!heads(idx)) continue;
    est += flows_[idx].state == TcpState::kEstablished;
    closing += is_closing(flows_[idx].state);
  }
  if (est != established_) return "established() is not the number of ESTABLISHED flows";
  if (closing != closing_) return "closing() is not the number of closing flows";
  uint32_t n = 0;
  for (uint32_t e = free_pair_head_; e != kEmpty; e = flows_[e].expire_ms) {
    if (e >= n_slots_ || (e & 1)) return "a free line link points outside the table";
    if (seen[e] || seen[e + 1]) return "a free line is in use or listed twice";
    seen[e] = seen[e + 1] = 3;
    if (++n > n_slots_) return "the free line list loops";
  }
  uint32_t prev = kEmpty;
  n = 0;
  for (uint32_t e = free_single_head_; e != kEmpty; prev = e, e = flows_[e].expire_ms) {
    if (e >= n_slots_) return "a free slot link points outside the table";
    if (seen[e]) return "a free slot is in use or listed twice";
    if (flows_[e].client4 != prev) return "a free slot's back link is wrong";
    if (seen[e ^ 1] != 1) return "a free slot's line-mate is not in use";
    seen[e] = 2;
    if (++n > n_slots_) return "the free slot list loops";
  }
  for (uint32_t idx = 0; idx < n_slots_; ++idx) {
    if (!seen[idx]) return "a slot is neither in use nor free";
  }
  for (uint32_t idx = 0; idx < n_slots_; ++idx) {
    if (!heads(idx)) continue;
    const Flow& f = flows_[idx];
    if (int32_t(f.expire_ms - now_ms) <= 0) continue;  // lookups would not return it
    FlowDir dir;
    const Tuple o = original_tuple(f);
    if (const_cast<FlowTable*>(this)->peek(o, hash(o), buckets_of(hash(o)), now_ms, &dir) != &f) {
      return "a flow is not found by its original tuple";
    }
    if (is_dsr(f.mode)) continue;
    const Tuple r = reply_tuple(f);
    if (const_cast<FlowTable*>(this)->peek(r, hash(r), buckets_of(hash(r)), now_ms, &dir) != &f) {
      return "a flow is not found by its reply tuple";
    }
  }
  return nullptr;
}

// ---- aging -------------------------------------------------------------------------------

uint32_t FlowTable::advance(uint32_t now_ms) {
  if (!sweep_started_) {
    sweep_started_ = true;
    sweep_last_ms_ = now_ms;
    return 0;
  }
  const uint32_t elapsed = now_ms - sweep_last_ms_;
  if (elapsed == 0 || elapsed > 0x7fffffffu) return 0;  // the same millisecond, or backwards
  sweep_last_ms_ = now_ms;
  // Every slot once per period: credit in slots x period, spent in whole slots; a jump of a
  // period or more sweeps the whole table once.
  sweep_credit_ += uint64_t(n_slots_) * elapsed;
  uint64_t n = sweep_credit_ / sweep_period_ms_;
  if (n >= n_slots_) {
    n = n_slots_;
    sweep_credit_ = 0;
  } else {
    sweep_credit_ -= n * sweep_period_ms_;
  }
  uint32_t reclaimed = 0;
  for (; n; --n) {
    const uint32_t idx = sweep_cursor_;
    if (++sweep_cursor_ == n_slots_) sweep_cursor_ = 0;
    if (!heads(idx)) continue;
    Flow& f = flows_[idx];
    if (int32_t(f.expire_ms - now_ms) <= 0) {
      remove(&f, FlowEnd::kExpired);
      ++stats_.expired;
      ++reclaimed;
    }
  }
  return reclaimed;
}

}  // namespace meshgate::dp
