// Per-worker dynamic neighbor cache (ARP / NDP results). Owned by one worker. Static neighbors
// live in the Snapshot. (Packets waiting for a next hop: dataplane/route/pending.h.)
#pragma once

#include <cstdint>

#include "dataplane/common/compiler.h"
#include "dataplane/common/net_types.h"

namespace meshgate::dp {

// A learned neighbor, as exchanged between workers and the control thread.
struct NeighborUpdate {
  IpAddr address;
  MacAddr mac;
  uint16_t port_index = 0;
};

class NeighborCache {
 public:
  // Open addressing, never shrinks. 4096 entries cover a large L2 segment's worth of next hops.
  static constexpr uint32_t kCapacity = 4096;
  // Minimum spacing of our requests for one next hop (RFC 1122 §2.3.2.1: at most 1 per second).
  static constexpr uint64_t kRequestIntervalNs = 1'000'000'000ull;

  struct Entry {
    IpAddr address;
    MacAddr mac;
    uint16_t port_index = 0;
    bool resolved = false;
    bool used = false;
    uint64_t last_request_ns = 0;  // rate limit of our ARP requests / solicitations
  };

  // The entry for `a`, or nullptr.
  Entry* find(const IpAddr& a);
  // The entry for `a`, created unresolved if needed; nullptr when the cache is full.
  Entry* find_or_add(const IpAddr& a);
  // Records a resolution; returns true when it changed something.
  bool learn(const IpAddr& a, const MacAddr& mac, uint16_t port_index);
  uint32_t size() const { return size_; }

 private:
  Entry entries_[kCapacity];
  uint32_t size_ = 0;
};

}  // namespace meshgate::dp
