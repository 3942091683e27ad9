// A burst in the stages: the packets' parsed view, and what each stage decided for each packet
// (its next step), indexed by position in the burst. Stages read and write it in burst order;
// the dispatch stage acts on `next` once per burst. Worker thread only.
#pragma once

#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dataplane/common/compiler.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/drop_reasons.h"
#include "dataplane/packet/parse.h"

struct rte_mbuf;

namespace meshgate::dp {

inline constexpr uint16_t kBurst = 32;

enum Next : uint8_t {
  kNextDrop,
  kNextIp,        // parsed IPv4/IPv6, to classify
  kNextArp,
  kNextNdp,
  kNextIcmpError, // an ICMP error, translated through the flow it quotes
  kNextFlow,      // TCP/UDP/echo: looked up in conntrack, then a service may start a flow
  kNextMiss,      // a tracked protocol without a flow here: another worker's, local or nothing
  kNextLookup,    // not tracked: a later fragment, local, or nothing
  kNextLocal,     // to a local address, VIP or fullnat address without a flow
  kNextRoute,     // ready for route + neighbor + L2 rewrite
  kNextTx,        // out[i] says which port
  kNextPending,   // waiting for a neighbor
  kNextHandoff,   // to the worker in out[i]
  kNextConsumed,  // terminated here, nothing to send
  kNextStack,     // TCP segment for the TCP stack (which takes the mbuf)
  kNextHost,      // to the kernel twin of port out[i] (its host interface)
};

// What the route stage does to a packet besides routing it.
struct Egress {
  bool decrement_ttl = false;
  bool encap = false;        // DSR: route to `tunnel_dst` inside an outer header
  bool gue = false;
  uint16_t gue_port_be = 0;
  uint32_t flow_hash = 0;
  IpAddr tunnel_dst;
};

// A packet the gateway made about packet i (an ICMP error), sent in i's place.
struct Extra {
  rte_mbuf* m = nullptr;
  Next next = kNextDrop;
  uint16_t port = 0;
  IpAddr nh;
};

struct Burst {
  PacketMeta meta[kBurst];
  uint8_t next[kBurst] = {};
  Drop drop[kBurst];
  uint16_t out[kBurst];      // egress port index (kNextTx / kNextPending) or worker (handoff)
  IpAddr nh[kBurst];         // next hop (kNextPending)
  uint32_t hash[kBurst];     // flow hash of TCP/UDP packets
  FlowTable::BucketPair bp[kBurst];  // its two candidate buckets
  uint32_t visited[kBurst];  // workers a handed-over packet has been to
  Flow* flow[kBurst];
  Egress egress[kBurst];
  Extra extra[kBurst];
  // The fast path's first pass ran on the first `hashed` packets (all TCP/UDP): `hash`
  // is set and their first buckets are prefetched; with `flows_prefetched` their flows (or
  // second buckets) too, so the classify stage need not do that again.
  uint16_t hashed = 0;
  bool flows_prefetched = false;

  void set_drop(uint16_t i, Drop why) {
    next[i] = kNextDrop;
    drop[i] = why;
  }

  // Packets whose next step is `a` or `b`, as a bit mask (bit i = packet i): lets a stage that
  // the common burst does not need cost a compare instead of a pass.
  MG_ALWAYS_INLINE uint32_t next_mask(uint16_t n, uint8_t a, uint8_t b) const {
    static_assert(kBurst == 32, "one bit per packet of a burst");
#if defined(__SSE2__)
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(next));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(next + 16));
    const __m128i va = _mm_set1_epi8(char(a));
    const __m128i vb = _mm_set1_epi8(char(b));
    const uint32_t mask =
        uint32_t(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(lo, va), _mm_cmpeq_epi8(lo, vb)))) |
        uint32_t(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(hi, va), _mm_cmpeq_epi8(hi, vb))))
            << 16;
#else
    uint32_t mask = 0;
    for (uint16_t i = 0; i < kBurst; ++i) mask |= uint32_t(next[i] == a || next[i] == b) << i;
#endif
    return n >= kBurst ? mask : mask & ((1u << n) - 1);
  }
};

}  // namespace meshgate::dp
