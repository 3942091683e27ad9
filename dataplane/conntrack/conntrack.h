// Per-worker connection tracking. Owned and touched by exactly one worker; the control thread
// only allocates it before the worker starts and reads gauges.
//
// Entries: one cache line (64 bytes) for IPv4 and IPv6 alike. A flow stores the client and
// backend endpoints in full (16-byte addresses, IPv4 mapped) and the VIP and fullnat source
// address as AddrTable ids: storing all four addresses would take 72 bytes for IPv6.
// Index: buckets of 8 (signature, reference) pairs, 64 bytes each, two candidate buckets per key
// (less loaded first, one cuckoo step), sized for 3/4 fill at capacity (any bucket count: keys
// map to buckets by multiply-shift, not by a power-of-two mask). A flow has one reference per
// direction it can be seen in: original (client -> VIP) and, except for DSR, reply (backend ->
// client or fullnat source).
// Aging: an incremental sweep over the entries (advance()): the whole table once per sweep
// period (1.024 s, longer for tables over 256k flows: at most 256 entries per millisecond), so
// a flow is reclaimed at most a period after it expires; lookups reclaim expired flows they
// meet at once. No per-flow links: a refresh only writes the expiry.
// Free entries are a list threaded through the entries themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <rte_prefetch.h>

#include "dataplane/common/compiler.h"
#include "dataplane/common/hash.h"
#include "dataplane/common/net_types.h"
#include "dataplane/common/table_memory.h"
#include "dataplane/lb/lb.h"
#include "dataplane/packet/wire.h"
#include "dataplane/snapshot/addr_table.h"
#include "dataplane/snapshot/snapshot.h"

namespace meshgate::dp {

enum class TcpState : uint8_t {
  kNone,  // UDP / other protocols
  kSynSent,
  kSynRecv,
  kEstablished,
  kFinWait,    // the client sent the first FIN
  kCloseWait,  // the backend sent the first FIN
  kLastAck,    // both sent FIN; waiting for the ACK of the last one
  kTimeWait,
  kClose,      // reset
};
const char* tcp_state_name(TcpState s);

// Flow::flags
inline constexpr uint8_t kFlowSeenReply = 1 << 0;
inline constexpr uint8_t kFlowFinOrig = 1 << 1;
inline constexpr uint8_t kFlowFinReply = 1 << 2;
inline constexpr uint8_t kFlowLastFinReply = 1 << 3;  // the second FIN came from the backend

struct Flow {
  IpAddr client;
  IpAddr backend;
  uint16_t client_port = 0;   // network order
  uint16_t vip_port = 0;      // network order
  uint16_t backend_port = 0;  // network order
  uint16_t local_port = 0;    // fullnat: our source port toward the backend (network order)
  uint32_t vip_id = 0;        // AddrTable id of the VIP
  uint32_t local_id = 0;      // AddrTable id of the fullnat source address; 0 = none
  uint32_t stat_id = 0;       // backend counter slot
  uint32_t expire_ms = 0;     // worker clock, compared by signed difference (wraps in 49 days);
                              // in a free entry: the next free entry
  uint32_t created_ms = 0;    // worker clock, for the age in dumps
  uint8_t proto = 0;          // 0 = free slot
  TcpState state = TcpState::kNone;
  Mode mode = Mode::kDnat;
  uint8_t flags = 0;
};
static_assert(sizeof(Flow) == 64, "a flow must stay one cache line");
static_assert(offsetof(Flow, vip_port) == offsetof(Flow, client_port) + 2,
              "FlowTable::matches_v4 compares both ports as one word, as they lie on the wire");

enum class FlowDir : uint8_t { kOriginal = 0, kReply = 1 };

struct ConntrackTimeouts {
  uint32_t tcp_syn_ms = 30000;
  uint32_t tcp_established_ms = 7200000;
  uint32_t tcp_fin_ms = 60000;
  uint32_t tcp_time_wait_ms = 60000;
  uint32_t tcp_close_ms = 10000;  // after RST, like Linux nf_conntrack_tcp_timeout_close
  uint32_t udp_ms = 60000;
  uint32_t other_ms = 30000;
};

// A packet's 5-tuple as seen on the wire.
struct Tuple {
  IpAddr src;
  IpAddr dst;
  uint16_t sport = 0;  // network order
  uint16_t dport = 0;
  uint8_t proto = 0;
};

// What a new flow is translated to.
struct FlowTarget {
  IpAddr backend;
  uint16_t backend_port = 0;  // network order
  uint32_t vip_id = 0;
  uint32_t stat_id = 0;
  Mode mode = Mode::kDnat;
  uint32_t local_id = 0;      // fullnat
  uint16_t local_port = 0;    // fullnat, network order
};

struct FlowTableStats {
  uint64_t expired = 0;   // reclaimed by timeout (sweep or lookup)
  uint64_t evicted = 0;   // not-yet-established flows reclaimed to make room
  uint64_t insert_failed = 0;
};

class FlowTable {
 public:
  static constexpr uint32_t kBucketEntries = 8;
  static constexpr uint32_t kEmpty = 0xffffffffu;
  // The sweep covers the table once per period: kSweepMinPeriodMs, or longer so that it
  // examines at most kSweepPerMs entries per millisecond.
  static constexpr uint32_t kSweepMinPeriodMs = 1024;
  static constexpr uint32_t kSweepPerMs = 256;
  // Candidates examined to find a not-yet-established flow to evict when full.
  static constexpr uint32_t kEvictTries = 16;

  struct alignas(64) Bucket {
    uint32_t sig[kBucketEntries];
    uint32_t ref[kBucketEntries];  // flow index << 1 | direction, kEmpty when free
  };

  // Bytes needed for `max_flows` (for EAL memory sizing).
  static size_t memory_bytes(uint32_t max_flows);
  // The allocation (transparent huge pages without the EAL's hugepages: table_memory.h).
  const TableMemory& memory() const { return mem_; }

  // Control thread, before the worker starts: one table_alloc on `socket` (table_memory.h).
  bool init(uint32_t max_flows, int socket, const ConntrackTimeouts& t, const AddrTable* addrs);
  void destroy();

  static uint32_t hash(const Tuple& t) {
    return lb_flow_hash(t.src, t.dst, t.sport, t.dport, t.proto);
  }
  // A key's second candidate bucket follows from its hash alone (cuckoo moves need that).
  static uint32_t alt_hash(uint32_t h) { return uint32_t(fmix64(h) >> 32); }

  // Bulk lookups: prefetch both candidate buckets of every packet first, then the flows whose
  // signatures match, then look up. The pair of bucket indices is computed once per packet.
  struct BucketPair {
    uint32_t b[2];
  };
  BucketPair buckets_of(uint32_t h) const {
    return BucketPair{{bucket_of(h), bucket_of(alt_hash(h))}};
  }
  void prefetch_buckets(uint32_t h) const { prefetch_buckets(buckets_of(h)); }
  void prefetch_flows(uint32_t h) const { prefetch_flows(h, buckets_of(h)); }
  void prefetch_buckets(const BucketPair& bp) const {
    rte_prefetch0(&buckets_[bp.b[0]]);
    rte_prefetch0(&buckets_[bp.b[1]]);
  }
  void prefetch_flows(uint32_t h, const BucketPair& bp) const {
    for (uint32_t k = 0; k < 2; ++k) {
      const Bucket& bk = buckets_[bp.b[k]];
      for (uint32_t bits = sig_matches(bk, h); bits; bits &= bits - 1) {
        const uint32_t ref = bk.ref[__builtin_ctz(bits)];
        if (ref != kEmpty) rte_prefetch0(&flows_[ref >> 1]);
      }
    }
  }

  // The same in two steps that touch the second bucket only when it may be needed: with the
  // index mostly empty, inserts leave most keys in their first bucket (the less loaded of the
  // two, ties to the first), and a prefetch of the second would only queue another miss.
  // First the first bucket; then, once it is in, the flows its signatures name, or when none
  // matches the second bucket.
  void prefetch_first_bucket(const BucketPair& bp) const { rte_prefetch0(&buckets_[bp.b[0]]); }
  void prefetch_flows_or_second(uint32_t h, const BucketPair& bp) const {
    const Bucket& bk = buckets_[bp.b[0]];
    bool any = false;
    for (uint32_t bits = sig_matches(bk, h); bits; bits &= bits - 1) {
      const uint32_t ref = bk.ref[__builtin_ctz(bits)];
      if (ref == kEmpty) continue;
      rte_prefetch0(&flows_[ref >> 1]);
      any = true;
    }
    if (!any) rte_prefetch0(&buckets_[bp.b[1]]);
  }

  // The flow a packet belongs to, in either direction. Expired flows are reclaimed on the way.
  Flow* lookup(const Tuple& t, uint32_t h, uint32_t now_ms, FlowDir* dir) {
    return lookup(t, h, buckets_of(h), now_ms, dir);
  }
  MG_ALWAYS_INLINE Flow* lookup(const Tuple& t, uint32_t h, const BucketPair& bp, uint32_t now_ms,
                                FlowDir* dir) {
    return find<true>(t, h, bp, now_ms, dir);
  }
  // The same without side effects: an expired flow is left for lookup() (or the sweep) to
  // reclaim and reported as absent. For a caller that may still hand the packet to lookup().
  MG_ALWAYS_INLINE Flow* peek(const Tuple& t, uint32_t h, const BucketPair& bp, uint32_t now_ms,
                              FlowDir* dir) {
    return find<false>(t, h, bp, now_ms, dir);
  }
  // peek() for an IPv4 packet from its wire fields, loaded as they lie in memory: the
  // addresses, and the source and destination ports together (as in the TCP/UDP header).
  MG_ALWAYS_INLINE Flow* peek_v4(uint32_t src, uint32_t dst, uint32_t ports, uint8_t proto,
                                 uint32_t h, const BucketPair& bp, uint32_t now_ms,
                                 FlowDir* dir) const {
    for (uint32_t k = 0; k < 2; ++k) {
      const Bucket& bk = buckets_[bp.b[k]];
      for (uint32_t bits = sig_matches(bk, h); bits; bits &= bits - 1) {
        const uint32_t ref = bk.ref[__builtin_ctz(bits)];
        if (ref == kEmpty) continue;
        Flow& f = flows_[ref >> 1];
        const auto d = FlowDir(ref & 1);
        if (!matches_v4(f, d, src, dst, ports, proto)) continue;
        if (MG_UNLIKELY(int32_t(f.expire_ms - now_ms) <= 0)) return nullptr;
        *dir = d;
        return &f;
      }
    }
    return nullptr;
  }

  // Adds a flow for the original tuple `orig`. When full, a not-yet-established flow is evicted
  // first; nullptr when that fails too (the caller forwards statelessly).
  Flow* insert(const Tuple& orig, const FlowTarget& to, uint32_t now_ms);
  void remove(Flow* f);

  // Advances TCP state from a segment's flags (RFC 9293 §3.3.2 states, seen from the middle)
  // and refreshes the expiry.
  MG_ALWAYS_INLINE void touch(Flow* f, FlowDir dir, uint8_t tcp_flags, uint32_t now_ms) {
    // Most segments are data or ACKs of an established connection: nothing but the expiry
    // moves (further out: the clock only goes forward), and nothing else needs to hear of it.
    if (MG_LIKELY(f->state == TcpState::kEstablished &&
                  !(tcp_flags & (kTcpSyn | kTcpFin | kTcpRst)) &&
                  (dir == FlowDir::kOriginal || (f->flags & kFlowSeenReply)))) {
      touch_established(f, now_ms);
      return;
    }
    touch_slow(f, dir, tcp_flags, now_ms);
  }
  // That inline case alone, for a caller that has checked its conditions: a TCP flow in
  // ESTABLISHED, a segment without SYN, FIN or RST, from the client or after a reply was seen.
  MG_ALWAYS_INLINE void touch_established(Flow* f, uint32_t now_ms) {
    f->expire_ms = now_ms + timeouts_.tcp_established_ms;
  }

  // Sweeps as many entries as the time since the last call asks for (all of them after a
  // jump of a period or more), reclaiming the expired ones. Returns the number reclaimed.
  uint32_t advance(uint32_t now_ms);
  uint32_t sweep_period_ms() const { return sweep_period_ms_; }

  // True when a flow is seen with this reply tuple (fullnat source-port choice).
  bool reply_in_use(const Tuple& reply, uint32_t h) const;

  uint32_t active() const { return active_; }
  uint32_t established() const { return established_; }
  uint32_t capacity() const { return max_flows_; }
  const FlowTableStats& stats() const { return stats_; }
  // Flow by pool index, or nullptr when the slot is free (dumps).
  const Flow* at(uint32_t idx) const { return flows_[idx].proto ? &flows_[idx] : nullptr; }
  Flow* mutable_at(uint32_t idx) { return idx < max_flows_ && flows_[idx].proto ? &flows_[idx] : nullptr; }
  uint32_t index_of(const Flow* f) const { return uint32_t(f - flows_); }
  const IpAddr& vip(const Flow& f) const { return addrs_->at(f.vip_id); }
  const IpAddr& local(const Flow& f) const { return addrs_->at(f.local_id); }
  // The tuple replies of `f` carry (f must not be DSR).
  Tuple reply_tuple(const Flow& f) const;
  Tuple original_tuple(const Flow& f) const;

 private:
  uint32_t timeout_ms(const Flow& f) const;
  bool embryonic(const Flow& f) const;
  // A 32-bit key's bucket: multiply-shift onto [0, n_buckets_) (Lemire's fastrange).
  uint32_t bucket_of(uint32_t x) const { return uint32_t((uint64_t(x) * n_buckets_) >> 32); }
  bool link(uint32_t h, uint32_t ref);
  void unlink(uint32_t h, uint32_t ref);
  void touch_slow(Flow* f, FlowDir dir, uint8_t tcp_flags, uint32_t now_ms);
  bool evict_one();
  void push_embryo(uint32_t idx);
  Flow* insert_once(const Tuple& orig, const FlowTarget& to, uint32_t now_ms, bool retry);
  // Bit j set when v[j] == x, for the 8 lanes of a bucket array (16-byte aligned).
  static MG_ALWAYS_INLINE uint32_t lanes_equal(const uint32_t* v, uint32_t x) {
#if defined(__SSE2__)
    const __m128i key = _mm_set1_epi32(int(x));
    const __m128i lo = _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(v)), key);
    const __m128i hi =
        _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(v + 4)), key);
    return uint32_t(_mm_movemask_ps(_mm_castsi128_ps(lo))) |
           uint32_t(_mm_movemask_ps(_mm_castsi128_ps(hi))) << 4;
#else
    uint32_t bits = 0;
    for (uint32_t j = 0; j < kBucketEntries; ++j) bits |= uint32_t(v[j] == x) << j;
    return bits;
#endif
  }
  // Bit j set when bucket entry j's signature is `h` (the entry may still be free).
  static MG_ALWAYS_INLINE uint32_t sig_matches(const Bucket& bk, uint32_t h) {
    return lanes_equal(bk.sig, h);
  }
  // Bit j set when bucket entry j is free.
  static MG_ALWAYS_INLINE uint32_t free_lanes(const Bucket& bk) {
    return lanes_equal(bk.ref, kEmpty);
  }
  MG_ALWAYS_INLINE bool matches(const Flow& f, FlowDir dir, const Tuple& t) const {
    if (f.proto != t.proto) return false;
    if (dir == FlowDir::kOriginal) {
      return f.client_port == t.sport && f.vip_port == t.dport && f.client == t.src &&
             vip(f) == t.dst;
    }
    if (f.backend_port != t.sport || !(f.backend == t.src)) return false;
    if (f.mode == Mode::kFullnat) return f.local_port == t.dport && local(f) == t.dst;
    return f.client_port == t.dport && f.client == t.dst;
  }
  template <bool kReclaim>
  MG_ALWAYS_INLINE Flow* find(const Tuple& t, uint32_t h, const BucketPair& bp, uint32_t now_ms,
                              FlowDir* dir) {
    for (uint32_t k = 0; k < 2; ++k) {
      const Bucket& bk = buckets_[bp.b[k]];
      for (uint32_t bits = sig_matches(bk, h); bits; bits &= bits - 1) {
        const uint32_t ref = bk.ref[__builtin_ctz(bits)];
        if (ref == kEmpty) continue;
        Flow& f = flows_[ref >> 1];
        const auto d = FlowDir(ref & 1);
        if (!matches(f, d, t)) continue;
        if (MG_UNLIKELY(int32_t(f.expire_ms - now_ms) <= 0)) {
          if constexpr (kReclaim) {
            remove(&f);
            ++stats_.expired;
          }
          return nullptr;
        }
        *dir = d;
        return &f;
      }
    }
    return nullptr;
  }
  // `a` is the IPv4-mapped form of `v4` (4 bytes as on the wire, loaded as they lie in memory).
  static MG_ALWAYS_INLINE bool is_mapped(const IpAddr& a, uint32_t v4) {
#if defined(__SSE2__)
    const __m128i want = _mm_set_epi32(int(v4), int(0xffff0000u), 0, 0);
    const __m128i got = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.b));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(got, want)) == 0xffff;
#else
    uint64_t w[2];
    std::memcpy(w, a.b, 16);
    return w[0] == 0 && w[1] == (uint64_t(0xffff) << 16 | uint64_t(v4) << 32);
#endif
  }
  // matches() for an IPv4 tuple given as peek_v4 takes it.
  MG_ALWAYS_INLINE bool matches_v4(const Flow& f, FlowDir dir, uint32_t src, uint32_t dst,
                                   uint32_t ports, uint8_t proto) const {
    if (f.proto != proto) return false;
    uint32_t fports;
    if (dir == FlowDir::kOriginal) {
      std::memcpy(&fports, &f.client_port, 4);  // client_port, vip_port
      return fports == ports && is_mapped(f.client, src) && is_mapped(vip(f), dst);
    }
    const uint32_t dport = ports >> 16;
    if (f.backend_port != uint16_t(ports) || !is_mapped(f.backend, src)) return false;
    if (f.mode == Mode::kFullnat) return f.local_port == dport && is_mapped(local(f), dst);
    return f.client_port == dport && is_mapped(f.client, dst);
  }
  void set_state(Flow* f, TcpState s);

  TableMemory mem_;  // every array below, in one allocation
  Flow* flows_ = nullptr;
  // Free entries (proto 0): a stack threaded through their expire_ms fields, kEmpty-terminated.
  uint32_t free_head_ = kEmpty;
  Bucket* buckets_ = nullptr;
  uint32_t n_buckets_ = 0;
  uint32_t max_flows_ = 0;
  uint32_t active_ = 0;
  uint32_t established_ = 0;
  const AddrTable* addrs_ = nullptr;
  ConntrackTimeouts timeouts_;
  FlowTableStats stats_;

  // Sweep: the next entry to examine, the clock of the last advance(), and the entries owed
  // (times the period) for the time since.
  uint32_t sweep_cursor_ = 0;
  uint32_t sweep_last_ms_ = 0;
  uint64_t sweep_credit_ = 0;
  uint32_t sweep_period_ms_ = kSweepMinPeriodMs;
  bool sweep_started_ = false;

  // Recently created not-yet-established flows, oldest first: eviction candidates.
  uint32_t* embryo_ = nullptr;
  uint32_t embryo_mask_ = 0;
  uint32_t embryo_head_ = 0;
  uint32_t embryo_tail_ = 0;
};

}  // namespace meshgate::dp
