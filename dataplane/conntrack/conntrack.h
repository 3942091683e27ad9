// Per-worker connection tracking. Owned and touched by exactly one worker; the control thread
// only allocates it before the worker starts and reads gauges.
//
// Entries: 32-byte slots, two to a cache line. An IPv4 flow is one slot: its client, VIP and
// backend addresses in the slot as on the wire (the fullnat source address as an AddrTable
// id). An IPv6 flow is a whole line: the same header in the even slot (the VIP by AddrTable id)
// and the client and backend addresses in the odd one. The capacity counts IPv4 flows; an
// IPv6 flow takes the room of two. Free slots are two lists threaded through the slots: whole
// free lines, and single slots whose line-mate is in use (IPv4 flows take those first, so
// lines stay whole for IPv6 flows).
// Created-at times (dumps, fragment generations) live in a side array: cold, 4 B per slot.
// Index: buckets of 8 (signature, reference) pairs, 64 bytes each, two candidate buckets per key
// (the first while it is at most half full, else the less loaded; one cuckoo step), sized for
// 3/4 fill at capacity (any bucket count: keys map to buckets by multiply-shift, not by a
// power-of-two mask). A flow has one reference per direction it can be seen in: original
// (client -> VIP) and, except for DSR, reply (backend -> client or fullnat source).
// Aging: an incremental sweep over the slots (advance()): the whole table once per sweep
// period (1.024 s, longer for tables over 256k slots: at most 256 slots per millisecond), so
// a flow is reclaimed at most a period after it expires; lookups reclaim expired flows they
// meet at once. No per-flow links: a refresh only writes the expiry.
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
// Both directions of the connection are known to exist: a reply was seen, or (DSR, whose
// replies never pass here) the client completed a handshake whose SYN we saw. Until then the
// flow is unassured, as Linux conntrack calls it: a TCP flow picked up mid-stream lives only as
// long as a handshake (tcp_syn_ms) and, like a half-open one, is evicted first when the table
// is full, so packets that start no connection cannot squat the table.
inline constexpr uint8_t kFlowSeenReply = 1 << 0;
inline constexpr uint8_t kFlowFinOrig = 1 << 1;
inline constexpr uint8_t kFlowFinReply = 1 << 2;
inline constexpr uint8_t kFlowLastFinReply = 1 << 3;  // the second FIN came from the backend
inline constexpr uint8_t kFlowV6 = 1 << 4;            // a two-slot flow (FlowAddrs6 follows)

// The second slot of an IPv6 flow (or of any flow whose addresses are not all IPv4).
struct FlowAddrs6 {
  IpAddr client;
  IpAddr backend;
};

struct Flow {
  uint32_t client4 = 0;       // IPv4 flows: the client address as on the wire
  union {
    uint32_t vip4 = 0;        // IPv4 flows: the VIP as on the wire
    uint32_t vip_id;          // IPv6 flows: the VIP's AddrTable id
  };
  uint16_t client_port = 0;   // network order
  uint16_t vip_port = 0;      // network order
  uint32_t backend4 = 0;      // IPv4 flows: the backend address as on the wire
  uint16_t backend_port = 0;  // network order
  uint16_t local_port = 0;    // fullnat: our source port toward the backend (network order)
  uint32_t expire_ms = 0;     // worker clock, compared by signed difference (wraps in 49 days);
                              // in a free slot: the next free one
  uint8_t proto = 0;          // 0 = free slot
  uint8_t flags : 5 = 0;      // next to proto: matches_v4 checks both with one 16-bit load
  Mode mode : 3 = Mode::kDnat;
  TcpState state = TcpState::kNone;
  uint64_t stat_id : 18 = 0;   // backend counter slot (kMaxBackendStats)
  uint64_t local_id : 18 = 0;  // AddrTable id of the fullnat source address; 0 = none

  bool v6() const { return flags & kFlowV6; }
  IpAddr client() const {
    return v6() ? addrs6().client : IpAddr::v4_bytes(reinterpret_cast<const uint8_t*>(&client4));
  }
  IpAddr backend() const {
    return v6() ? addrs6().backend
                : IpAddr::v4_bytes(reinterpret_cast<const uint8_t*>(&backend4));
  }
  // IPv6 flows only: the addresses, in the flow's second slot.
  const FlowAddrs6& addrs6() const { return *reinterpret_cast<const FlowAddrs6*>(this + 1); }
  FlowAddrs6& addrs6() { return *reinterpret_cast<FlowAddrs6*>(this + 1); }
};
static_assert(sizeof(Flow) == 32, "an IPv4 flow must stay half a cache line");
static_assert(sizeof(FlowAddrs6) == sizeof(Flow), "an IPv6 flow is two slots");
static_assert(offsetof(Flow, vip4) == offsetof(Flow, client4) + 4,
              "FlowTable::matches_v4 compares both addresses as one word, as they lie on the wire");
static_assert(offsetof(Flow, vip_port) == offsetof(Flow, client_port) + 2,
              "FlowTable::matches_v4 compares both ports as one word, as they lie on the wire");
static_assert(offsetof(Flow, state) == offsetof(Flow, proto) + 2,
              "the flags byte follows proto (FlowTable::matches_v4)");

enum class FlowDir : uint8_t { kOriginal = 0, kReply = 1 };

// Why a flow left the table (FlowTable::set_end_hook).
enum class FlowEnd : uint8_t {
  kExpired,  // its timeout passed (the state says how it ended: open, closing, reset)
  kEvicted,  // reclaimed early for a new flow in a full table
  kRemoved,  // removed by the worker (backend removed, the tuple moved to another backend)
};
// Called with the flow about to be freed and its creation time (worker clock, ms).
using FlowEndFn = void (*)(void* ctx, const Flow& f, uint32_t created_ms, FlowEnd why);

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
  uint64_t evicted = 0;   // half-open or unassured flows reclaimed to make room
  uint64_t insert_failed = 0;
};

class FlowTable {
 public:
  static constexpr uint32_t kBucketEntries = 8;
  static constexpr uint32_t kEmpty = 0xffffffffu;
  // The sweep covers the table once per period: kSweepMinPeriodMs, or longer so that it
  // examines at most kSweepPerMs slots per millisecond.
  static constexpr uint32_t kSweepMinPeriodMs = 1024;
  static constexpr uint32_t kSweepPerMs = 256;
  // Candidates examined to find a half-open or unassured flow to evict when full.
  static constexpr uint32_t kEvictTries = 16;
  static constexpr uint32_t kEvictAhead = 4;  // evict_one's bucket prefetch distance

  struct alignas(64) Bucket {
    uint32_t sig[kBucketEntries];
    uint32_t ref[kBucketEntries];  // slot index << 1 | direction, kEmpty when free
  };

  // Slots for `max_flows` IPv4 flows (an even number: whole lines).
  static uint32_t slot_count(uint32_t max_flows) { return (max_flows + 1) & ~1u; }
  // Bytes needed for `max_flows` (for EAL memory sizing).
  static size_t memory_bytes(uint32_t max_flows);
  // The allocation (transparent huge pages without the EAL's hugepages: table_memory.h).
  const TableMemory& memory() const { return mem_; }

  // Control thread, before the worker starts: one table_alloc on `socket` (table_memory.h).
  // Room for `max_flows` IPv4 flows, or half as many IPv6 flows.
  bool init(uint32_t max_flows, int socket, const ConntrackTimeouts& t, const AddrTable* addrs);
  // The owning worker, between bursts: timeouts for flows created or refreshed from now on (a
  // config reload); flows keep the expiry they have until their next packet.
  void set_timeouts(const ConntrackTimeouts& t);
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
  // index up to half full, inserts leave nearly all keys in their first bucket (link()), and a
  // prefetch of the second would only queue another miss. First the first bucket (its index
  // alone: the second's costs a hash mix, and is computed when needed); then, once it is in,
  // the flows its signatures name, or when none matches the second bucket. That returns the
  // first reference whose signature matches (kEmpty when none), the hint peek_v4 tries first.
  uint32_t first_bucket(uint32_t h) const { return bucket_of(h); }
  void prefetch_first_bucket(uint32_t b0) const { rte_prefetch0(&buckets_[b0]); }
  uint32_t prefetch_flows_or_second(uint32_t h, uint32_t b0) const {
    const Bucket& bk = buckets_[b0];
    uint32_t hint = kEmpty;
    for (uint32_t bits = sig_matches(bk, h); bits; bits &= bits - 1) {
      const uint32_t ref = bk.ref[__builtin_ctz(bits)];
      if (ref == kEmpty) continue;
      rte_prefetch0(&flows_[ref >> 1]);
      if (hint == kEmpty) hint = ref;
    }
    if (hint == kEmpty) rte_prefetch0(&buckets_[bucket_of(alt_hash(h))]);
    return hint;
  }

  // A full table makes room by evicting the oldest half-open flows, in order: prefetches the
  // slots of the next `n` of them, a burst ahead of the new flows that will evict them.
  void prefetch_evictions(uint32_t n) const {
    if (free_pair_head_ != kEmpty || free_single_head_ != kEmpty) return;  // not full
    for (uint32_t k = 0; k < n && embryo_head_ + k != embryo_tail_; ++k) {
      rte_prefetch0(&flows_[embryo_[(embryo_head_ + k) & embryo_mask_]]);
    }
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
  // addresses (source and destination together, as in the IPv4 header), and the source and
  // destination ports together (as in the TCP/UDP header). `b0` is first_bucket(h); `hint`
  // what prefetch_flows_or_second returned since the index last changed (or kEmpty): the
  // first matching reference of the first bucket, which the scan would meet first, so a hint
  // that matches is the answer without another look at the bucket.
  MG_ALWAYS_INLINE Flow* peek_v4(uint64_t addrs, uint32_t ports, uint8_t proto, uint32_t h,
                                 uint32_t b0, uint32_t hint, uint32_t now_ms,
                                 FlowDir* dir) const {
    if (MG_LIKELY(hint != kEmpty)) {
      Flow& f = flows_[hint >> 1];
      const auto d = FlowDir(hint & 1);
      if (MG_LIKELY(matches_v4(f, d, addrs, ports, proto))) {
        if (MG_UNLIKELY(int32_t(f.expire_ms - now_ms) <= 0)) return nullptr;
        *dir = d;
        return &f;
      }
    }
    for (uint32_t k = 0; k < 2; ++k) {
      const Bucket& bk = buckets_[k ? bucket_of(alt_hash(h)) : b0];
      for (uint32_t bits = sig_matches(bk, h); bits; bits &= bits - 1) {
        const uint32_t ref = bk.ref[__builtin_ctz(bits)];
        if (ref == kEmpty) continue;
        Flow& f = flows_[ref >> 1];
        const auto d = FlowDir(ref & 1);
        if (!matches_v4(f, d, addrs, ports, proto)) continue;
        if (MG_UNLIKELY(int32_t(f.expire_ms - now_ms) <= 0)) return nullptr;
        *dir = d;
        return &f;
      }
    }
    return nullptr;
  }

  // Adds a flow for the original tuple `orig`. When full, a half-open or unassured flow is
  // evicted first; nullptr when that fails too (the caller forwards statelessly).
  Flow* insert(const Tuple& orig, const FlowTarget& to, uint32_t now_ms);
  void remove(Flow* f, FlowEnd why = FlowEnd::kRemoved);
  // Every flow removed from now on is shown to `fn(ctx, ...)` first (the access log's flow-end
  // records); nullptr: none. Set before the worker starts.
  void set_end_hook(FlowEndFn fn, void* ctx) {
    end_fn_ = fn;
    end_ctx_ = ctx;
  }

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
  // An unassured flow (no reply yet) stays unassured and lives a handshake's time.
  MG_ALWAYS_INLINE void touch_established(Flow* f, uint32_t now_ms) {
    f->expire_ms = now_ms + ((f->flags & kFlowSeenReply) ? timeouts_.tcp_established_ms
                                                          : unassured_ms_);
  }

  // Sweeps as many slots as the time since the last call asks for (all of them after a
  // jump of a period or more), reclaiming the expired flows. Returns the number reclaimed.
  uint32_t advance(uint32_t now_ms);
  uint32_t sweep_period_ms() const { return sweep_period_ms_; }

  // True when a flow is seen with this reply tuple (fullnat source-port choice).
  bool reply_in_use(const Tuple& reply, uint32_t h) const;

  // Index occupancy (tests, tools; scans the whole index): references, and how many sit in
  // their key's first bucket, where a lookup finds them with one bucket read.
  struct IndexOccupancy {
    uint64_t refs = 0;
    uint64_t in_first = 0;
  };
  IndexOccupancy index_occupancy() const;

  // Walks the whole table (tests): every slot is in use or on exactly one free list, the
  // lists' links agree, the counts add up, and every flow is found by its tuples. nullptr when
  // sound, else what is wrong.
  const char* audit(uint32_t now_ms) const;

  uint32_t active() const { return active_; }
  uint32_t established() const { return established_; }
  // TCP flows closing: one side or both sent a FIN, the last ACK is still to come (FIN_WAIT,
  // CLOSE_WAIT, LAST_ACK). A drain waits for them as for established ones: a half-closed
  // connection may still carry data the other way.
  uint32_t closing() const { return closing_; }
  static bool is_closing(TcpState s) {
    return s == TcpState::kFinWait || s == TcpState::kCloseWait || s == TcpState::kLastAck;
  }
  // Slots: the number of IPv4 flows the table holds (an IPv6 flow takes two).
  uint32_t capacity() const { return n_slots_; }
  const FlowTableStats& stats() const { return stats_; }
  // The flow whose first slot is `idx`, or nullptr when the slot is free or the second half
  // of an IPv6 flow (dumps, fragments).
  const Flow* at(uint32_t idx) const {
    return idx < n_slots_ && heads(idx) ? &flows_[idx] : nullptr;
  }
  Flow* mutable_at(uint32_t idx) { return idx < n_slots_ && heads(idx) ? &flows_[idx] : nullptr; }
  uint32_t index_of(const Flow* f) const { return uint32_t(f - flows_); }
  // When the flow was created (worker clock): dumps, and a generation for fragments.
  uint32_t created_ms(const Flow& f) const { return created_[index_of(&f)]; }
  IpAddr vip(const Flow& f) const {
    return f.v6() ? addrs_->at(f.vip_id)
                  : IpAddr::v4_bytes(reinterpret_cast<const uint8_t*>(&f.vip4));
  }
  const IpAddr& local(const Flow& f) const { return addrs_->at(f.local_id); }
  // The tuple replies of `f` carry (f must not be DSR).
  Tuple reply_tuple(const Flow& f) const;
  Tuple original_tuple(const Flow& f) const;
  // hash() of the tuple `f` is seen with in direction `dir` (reply: f must not be DSR); an
  // IPv4 flow's from its stored words, without building the tuple.
  uint32_t hash_of(const Flow& f, FlowDir dir) const;

 private:
  uint32_t timeout_ms(const Flow& f) const;
  bool embryonic(const Flow& f) const;
  // Slot `idx` holds the first (or only) slot of a flow.
  bool heads(uint32_t idx) const {
    if ((idx & 1) && flows_[idx - 1].proto && flows_[idx - 1].v6()) return false;
    return flows_[idx].proto != 0;
  }
  // A 32-bit key's bucket: multiply-shift onto [0, n_buckets_) (Lemire's fastrange).
  uint32_t bucket_of(uint32_t x) const { return uint32_t((uint64_t(x) * n_buckets_) >> 32); }
  bool link(uint32_t h, uint32_t ref);
  void unlink(uint32_t h, uint32_t ref);
  void touch_slow(Flow* f, FlowDir dir, uint8_t tcp_flags, uint32_t now_ms);
  bool evict_one();
  void push_embryo(uint32_t idx);
  Flow* insert_once(const Tuple& orig, const FlowTarget& to, uint32_t now_ms, bool retry);
  // Slot allocation: one slot (IPv4) or a whole line (IPv6, `pair`); kEmpty when none is free.
  uint32_t alloc_slots(bool pair);
  void free_slots(uint32_t idx, bool pair);
  void push_pair(uint32_t even);
  void push_single(uint32_t idx);
  void unlink_single(uint32_t idx);
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
    if (!f.v6()) {
      // The tuple's addresses must be IPv4-mapped and equal to the flow's wire words.
      if (dir == FlowDir::kOriginal) {
        return f.client_port == t.sport && f.vip_port == t.dport &&
               t.src.is_v4_wire(f.client4) && t.dst.is_v4_wire(f.vip4);
      }
      if (f.backend_port != t.sport || !t.src.is_v4_wire(f.backend4)) return false;
      if (f.mode == Mode::kFullnat) return f.local_port == t.dport && local(f) == t.dst;
      return f.client_port == t.dport && t.dst.is_v4_wire(f.client4);
    }
    const FlowAddrs6& a = f.addrs6();
    if (dir == FlowDir::kOriginal) {
      return f.client_port == t.sport && f.vip_port == t.dport && a.client == t.src &&
             addrs_->at(f.vip_id) == t.dst;
    }
    if (f.backend_port != t.sport || !(a.backend == t.src)) return false;
    if (f.mode == Mode::kFullnat) return f.local_port == t.dport && local(f) == t.dst;
    return f.client_port == t.dport && a.client == t.dst;
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
            remove(&f, FlowEnd::kExpired);
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
  // matches() for an IPv4 tuple given as peek_v4 takes it. An IPv6 flow never matches.
  MG_ALWAYS_INLINE bool matches_v4(const Flow& f, FlowDir dir, uint64_t addrs, uint32_t ports,
                                   uint8_t proto) const {
    // proto and the flags byte in one load: the protocol, and not an IPv6 flow.
    uint16_t proto_flags;
    std::memcpy(&proto_flags, &f.proto, 2);
    if ((proto_flags & (uint16_t(kFlowV6) << 8 | 0xff)) != proto) return false;
    if (dir == FlowDir::kOriginal) {
      uint64_t faddrs;
      uint32_t fports;
      std::memcpy(&faddrs, &f.client4, 8);      // client4, vip4
      std::memcpy(&fports, &f.client_port, 4);  // client_port, vip_port
      return faddrs == addrs && fports == ports;
    }
    if (f.backend_port != uint16_t(ports) || f.backend4 != uint32_t(addrs)) return false;
    if (f.mode == Mode::kFullnat) {
      return f.local_port == ports >> 16 && local(f).is_v4_wire(uint32_t(addrs >> 32));
    }
    return f.client_port == ports >> 16 && f.client4 == uint32_t(addrs >> 32);
  }
  void set_state(Flow* f, TcpState s);

  TableMemory mem_;  // every array below, in one allocation
  Flow* flows_ = nullptr;
  uint32_t* created_ = nullptr;  // per slot
  FlowEndFn end_fn_ = nullptr;
  void* end_ctx_ = nullptr;
  uint32_t n_slots_ = 0;
  // Free slots (proto 0): whole free lines, a stack threaded through the even slot's
  // expire_ms; and single free slots whose line-mate is in use, a doubly linked list (next in
  // expire_ms, previous in client4). kEmpty-terminated.
  uint32_t free_pair_head_ = kEmpty;
  uint32_t free_single_head_ = kEmpty;
  Bucket* buckets_ = nullptr;
  uint32_t n_buckets_ = 0;
  uint32_t active_ = 0;
  uint32_t established_ = 0;
  uint32_t closing_ = 0;
  const AddrTable* addrs_ = nullptr;
  ConntrackTimeouts timeouts_;
  uint32_t unassured_ms_ = 0;  // an ESTABLISHED flow without a reply: min(syn, established)
  FlowTableStats stats_;

  // Sweep: the next slot to examine, the clock of the last advance(), and the slots owed
  // (times the period) for the time since.
  uint32_t sweep_cursor_ = 0;
  uint32_t sweep_last_ms_ = 0;
  uint64_t sweep_credit_ = 0;
  uint32_t sweep_period_ms_ = kSweepMinPeriodMs;
  bool sweep_started_ = false;

  // Recently created half-open or unassured flows (first slots), oldest first: eviction
  // candidates. A power of two of at least half the slots; an overrun forgets the oldest.
  uint32_t* embryo_ = nullptr;
  uint32_t embryo_mask_ = 0;
  uint32_t embryo_head_ = 0;
  uint32_t embryo_tail_ = 0;
};

}  // namespace meshgate::dp
