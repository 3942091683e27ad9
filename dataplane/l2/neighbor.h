// Per-worker dynamic neighbor cache (ARP / NDP results) and the bounded queue of packets waiting
// for a next hop to resolve. Owned by one worker. Static neighbors live in the Snapshot.
#pragma once

#include <cstdint>

#include "dataplane/common/compiler.h"
#include "dataplane/common/net_types.h"

struct rte_mbuf;

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

// Packets waiting for ARP / NDP. Bounded: when full, the newest packet is dropped (counted), so
// earlier work completes first.
class PendingQueue {
 public:
  static constexpr uint32_t kCapacity = 256;
  // How long a packet waits for its next hop (Linux: 3 probes x 1 s).
  static constexpr uint64_t kTimeoutNs = 3'000'000'000ull;
  // Minimum spacing of our requests for one next hop (RFC 1122 §2.3.2.1: at most 1 per second).
  static constexpr uint64_t kRequestIntervalNs = 1'000'000'000ull;

  struct Item {
    rte_mbuf* m = nullptr;
    IpAddr next_hop;
    uint16_t port_index = 0;
    uint64_t deadline_ns = 0;
  };

  bool push(rte_mbuf* m, const IpAddr& nh, uint16_t port_index, uint64_t now_ns);
  uint32_t size() const { return n_; }
  Item& at(uint32_t i) { return items_[i]; }
  // Removes item i (order of the rest is kept, so packets to one next hop stay in order).
  void erase(uint32_t i);

 private:
  Item items_[kCapacity];
  uint32_t n_ = 0;
};

}  // namespace meshgate::dp
