#include "dataplane/l2/neighbor.h"

#include "dataplane/common/hash.h"

namespace meshgate::dp {

NeighborCache::Entry* NeighborCache::find(const IpAddr& a) {
  uint32_t s = crc32c(a.b, 16, 0) & (kCapacity - 1);
  for (uint32_t probes = 0; probes < kCapacity; ++probes) {
    Entry& e = entries_[s];
    if (!e.used) return nullptr;
    if (e.address == a) return &e;
    s = (s + 1) & (kCapacity - 1);
  }
  return nullptr;
}

NeighborCache::Entry* NeighborCache::find_or_add(const IpAddr& a) {
  // Keep a quarter free so probe sequences stay short.
  uint32_t s = crc32c(a.b, 16, 0) & (kCapacity - 1);
  for (uint32_t probes = 0; probes < kCapacity; ++probes) {
    Entry& e = entries_[s];
    if (!e.used) {
      if (size_ >= kCapacity * 3 / 4) return nullptr;
      e = Entry{};
      e.used = true;
      e.address = a;
      ++size_;
      return &e;
    }
    if (e.address == a) return &e;
    s = (s + 1) & (kCapacity - 1);
  }
  return nullptr;
}

bool NeighborCache::learn(const IpAddr& a, const MacAddr& mac, uint16_t port_index) {
  Entry* e = find_or_add(a);
  if (!e) return false;
  const bool changed = !e->resolved || !(e->mac == mac) || e->port_index != port_index;
  e->mac = mac;
  e->port_index = port_index;
  e->resolved = true;
  return changed;
}

}  // namespace meshgate::dp
