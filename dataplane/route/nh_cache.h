// Next hops of recent destinations, per worker: LPM + neighbor results, valid for one epoch
// (one snapshot version and one generation of the learned-neighbor cache: a learned MAC
// changed). Most packets go to a few backends and routers; the cache saves the LPM lookup and
// the neighbor hashing per packet, and lets the fast path check an IPv4 next hop with one
// compare. Worker thread only.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/common/net_types.h"

namespace meshgate::dp {

struct NhCacheEntry {
  IpAddr dst;
  // The epoch and an IPv4 destination's wire word in one (epoch << 32 | wire), 0 for an IPv6
  // one.
  uint64_t tag4 = 0;
  uint32_t epoch = 0;  // 0: never filled
  uint16_t port = 0;
  uint16_t mtu = 0;   // the port's
  uint8_t macs[12];   // the frame's first 12 bytes: the next hop's MAC, then the port's
  // The gateway's address on `port` for `dst` (source_for): a DSR tunnel's outer source.
  // Null when the port has no address of dst's family.
  const IpPrefix* src = nullptr;
};

struct NhCache {
  static constexpr uint32_t kSize = 1024;

  NhCacheEntry* entries = nullptr;  // kSize of them, on the worker's socket
  uint32_t epoch = 1;
  uint64_t epoch_version = 0;  // the snapshot version of `epoch`

  static uint32_t slot(const IpAddr& a) {
    uint64_t w[2];
    std::memcpy(w, a.b, 16);
    return slot_of(w[0] ^ w[1]);
  }
  // slot() of an IPv4 address given as 4 wire bytes loaded as they lie in memory.
  static uint32_t slot_v4(uint32_t wire) { return slot_of(IpAddr::mapped_high_word(wire)); }
  static uint32_t slot_of(uint64_t folded) {
    return uint32_t((folded * 0x9e3779b97f4a7c15ull) >> 54) & (kSize - 1);
  }
  // A new epoch: every cached next hop is stale.
  void next_epoch() {
    if (++epoch != 0) return;
    // Wrapped (after 2^32 epochs): forget every entry rather than risk an old one matching.
    std::memset(static_cast<void*>(entries), 0, sizeof(NhCacheEntry) * kSize);
    epoch = 1;
  }
};

}  // namespace meshgate::dp
