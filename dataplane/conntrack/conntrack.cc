#include "dataplane/conntrack/conntrack.h"

#include <rte_malloc.h>
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
  // Two references per flow, buckets of 8, filled to at most ~60% so that 2-choice placement
  // practically never fails before the pool is exhausted.
  const uint64_t want = (uint64_t(max_flows) * 2 * 10 / 6) / FlowTable::kBucketEntries + 1;
  uint32_t n = 1;
  while (n < want) n <<= 1;
  return n;
}

uint32_t alt_bucket(uint32_t h) { return uint32_t(fmix64(h) >> 32); }

}  // namespace

size_t FlowTable::memory_bytes(uint32_t max_flows) {
  return size_t(max_flows) * (sizeof(Flow) + sizeof(uint32_t)) +
         size_t(bucket_count(max_flows)) * sizeof(Bucket);
}

bool FlowTable::init(uint32_t max_flows, int socket, const ConntrackTimeouts& t) {
  max_flows_ = max_flows;
  timeouts_ = t;
  const uint32_t nb = bucket_count(max_flows);
  flows_ = static_cast<Flow*>(rte_zmalloc_socket("mg_flows", sizeof(Flow) * max_flows, 64, socket));
  free_ = static_cast<uint32_t*>(
      rte_malloc_socket("mg_flow_free", sizeof(uint32_t) * max_flows, 64, socket));
  buckets_ = static_cast<Bucket*>(rte_malloc_socket("mg_flow_idx", sizeof(Bucket) * nb, 64, socket));
  if (!flows_ || !free_ || !buckets_) {
    destroy();
    return false;
  }
  for (uint32_t i = 0; i < nb; ++i) {
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      buckets_[i].sig[j] = 0;
      buckets_[i].ref[j] = kEmpty;
    }
  }
  bucket_mask_ = nb - 1;
  // Pop order = ascending indices, which keeps replays deterministic and dumps readable.
  for (uint32_t i = 0; i < max_flows; ++i) free_[i] = max_flows - 1 - i;
  free_top_ = max_flows;
  active_ = 0;
  return true;
}

void FlowTable::destroy() {
  rte_free(flows_);
  rte_free(free_);
  rte_free(buckets_);
  flows_ = nullptr;
  free_ = nullptr;
  buckets_ = nullptr;
}

uint32_t FlowTable::hash(const Tuple& t) {
  return lb_flow_hash(t.src, t.dst, t.sport, t.dport, t.proto);
}

void FlowTable::prefetch(uint32_t h) const { rte_prefetch0(&buckets_[h & bucket_mask_]); }

Tuple FlowTable::reply_tuple(const Flow& f) {
  return Tuple{f.backend, f.client, f.backend_port, f.client_port, f.proto};
}

bool FlowTable::matches(const Flow& f, FlowDir dir, const Tuple& t) {
  if (f.proto != t.proto) return false;
  if (dir == FlowDir::kOriginal) {
    return f.client_port == t.sport && f.vip_port == t.dport && f.client == t.src &&
           f.vip == t.dst;
  }
  return f.backend_port == t.sport && f.client_port == t.dport && f.backend == t.src &&
         f.client == t.dst;
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

Flow* FlowTable::lookup(const Tuple& t, uint32_t h, uint32_t now_ms, FlowDir* dir,
                        uint64_t* expired) {
  const uint32_t b[2] = {h & bucket_mask_, alt_bucket(h) & bucket_mask_};
  for (uint32_t k = 0; k < 2; ++k) {
    const Bucket& bk = buckets_[b[k]];
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      if (bk.sig[j] != h || bk.ref[j] == kEmpty) continue;
      Flow& f = flows_[bk.ref[j] >> 1];
      const auto d = FlowDir(bk.ref[j] & 1);
      if (!matches(f, d, t)) continue;
      if (int32_t(f.expire_ms - now_ms) <= 0) {
        remove(&f);
        ++*expired;
        return nullptr;
      }
      *dir = d;
      return &f;
    }
  }
  return nullptr;
}

bool FlowTable::link(uint32_t h, uint32_t ref) {
  // "Power of two choices": the less loaded of the two candidate buckets keeps the fullest
  // bucket near log log n, so inserts do not fail long before the pool is full (first-fit
  // did, at a third of the slots).
  const uint32_t b[2] = {h & bucket_mask_, alt_bucket(h) & bucket_mask_};
  int free_slot[2] = {-1, -1};
  uint32_t free_count[2] = {0, 0};
  for (uint32_t k = 0; k < 2; ++k) {
    const Bucket& bk = buckets_[b[k]];
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      if (bk.ref[j] == kEmpty) {
        ++free_count[k];
        if (free_slot[k] < 0) free_slot[k] = int(j);
      }
    }
  }
  const uint32_t k = free_count[1] > free_count[0] ? 1 : 0;
  if (free_count[k]) {
    buckets_[b[k]].sig[free_slot[k]] = h;
    buckets_[b[k]].ref[free_slot[k]] = ref;
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
      for (uint32_t e = 0; e < kBucketEntries; ++e) {
        if (ob.ref[e] != kEmpty) continue;
        ob.sig[e] = sig;
        ob.ref[e] = bk.ref[j];
        bk.sig[j] = h;
        bk.ref[j] = ref;
        return true;
      }
    }
  }
  return false;
}

void FlowTable::unlink(uint32_t h, uint32_t ref) {
  const uint32_t b[2] = {h & bucket_mask_, alt_bucket(h) & bucket_mask_};
  for (uint32_t k = 0; k < 2; ++k) {
    Bucket& bk = buckets_[b[k]];
    for (uint32_t j = 0; j < kBucketEntries; ++j) {
      if (bk.ref[j] == ref) {
        bk.ref[j] = kEmpty;
        return;
      }
    }
  }
}

Flow* FlowTable::insert(const Tuple& orig, const IpAddr& backend, uint16_t backend_port_be,
                        uint32_t stat_id, uint32_t now_ms) {
  if (free_top_ == 0) return nullptr;
  const uint32_t idx = free_[free_top_ - 1];
  Flow& f = flows_[idx];
  f.client = orig.src;
  f.vip = orig.dst;
  f.backend = backend;
  f.client_port = orig.sport;
  f.vip_port = orig.dport;
  f.backend_port = backend_port_be;
  f.proto = orig.proto;
  f.state = TcpState::kNone;
  f.stat_id = stat_id;
  const uint32_t h0 = hash(orig);
  const uint32_t h1 = hash(reply_tuple(f));
  if (!link(h0, idx << 1)) {
    f.proto = 0;
    return nullptr;
  }
  if (!link(h1, idx << 1 | 1)) {
    unlink(h0, idx << 1);
    f.proto = 0;
    return nullptr;
  }
  --free_top_;
  ++active_;
  // A TCP flow first seen mid-stream (not a SYN) is taken as established; touch() refines it.
  if (orig.proto == kProtoTcp) set_state(&f, TcpState::kEstablished);
  f.expire_ms = now_ms + timeout_ms(f);
  return &f;
}

void FlowTable::remove(Flow* f) {
  const uint32_t idx = uint32_t(f - flows_);
  Tuple orig{f->client, f->vip, f->client_port, f->vip_port, f->proto};
  unlink(hash(orig), idx << 1);
  unlink(hash(reply_tuple(*f)), idx << 1 | 1);
  set_state(f, TcpState::kNone);
  f->proto = 0;
  free_[free_top_++] = idx;
  --active_;
}

// A simplified RFC 9293 / nf_conntrack view: enough to pick the timeout for each phase.
void FlowTable::touch(Flow* f, FlowDir dir, uint8_t flags, uint32_t now_ms) {
  if (f->proto == kProtoTcp) {
    const bool orig = dir == FlowDir::kOriginal;
    TcpState s = f->state;
    if (flags & kTcpRst) {
      s = TcpState::kClose;
    } else if (flags & kTcpSyn) {
      if (orig && !(flags & kTcpAck)) {
        if (s == TcpState::kClose || s == TcpState::kTimeWait || s == TcpState::kEstablished) {
          // A new SYN on a reused tuple, or the first packet we saw was a SYN.
          s = TcpState::kSynSent;
        }
      } else if (!orig && (flags & kTcpAck) && s == TcpState::kSynSent) {
        s = TcpState::kSynRecv;
      }
    } else if (flags & kTcpFin) {
      if (s == TcpState::kEstablished || s == TcpState::kSynRecv) {
        s = orig ? TcpState::kFinWait : TcpState::kCloseWait;
      } else if ((s == TcpState::kFinWait && !orig) || (s == TcpState::kCloseWait && orig)) {
        s = TcpState::kLastAck;
      }
    } else if (flags & kTcpAck) {
      if (s == TcpState::kSynRecv && orig) s = TcpState::kEstablished;
      else if (s == TcpState::kLastAck) s = TcpState::kTimeWait;
    }
    set_state(f, s);
  }
  f->expire_ms = now_ms + timeout_ms(*f);
}

void FlowTable::set_state(Flow* f, TcpState s) {
  established_ += (s == TcpState::kEstablished) - (f->state == TcpState::kEstablished);
  f->state = s;
}

uint32_t FlowTable::expire_some(uint32_t now_ms) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < kSweepPerCall; ++i) {
    Flow& f = flows_[sweep_cursor_];
    if (++sweep_cursor_ == max_flows_) sweep_cursor_ = 0;
    if (f.proto != 0 && int32_t(f.expire_ms - now_ms) <= 0) {
      remove(&f);
      ++n;
    }
  }
  return n;
}

}  // namespace meshgate::dp
