// The bounded queue of packets waiting for their next hop's ARP / NDP answer (the route
// stage queues them, service_pending in route.cc sends or expires them). Owned by one worker.
#pragma once

#include <cstdint>

#include "dataplane/common/net_types.h"

struct rte_mbuf;

namespace meshgate::dp {

// Packets waiting for ARP / NDP. Bounded: when full, the newest packet is dropped (counted), so
// earlier work completes first.
class PendingQueue {
 public:
  static constexpr uint32_t kCapacity = 256;
  // How long a packet waits for its next hop (Linux: 3 probes x 1 s).
  static constexpr uint64_t kTimeoutNs = 3'000'000'000ull;

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
