#include "dataplane/route/pending.h"

namespace meshgate::dp {

bool PendingQueue::push(rte_mbuf* m, const IpAddr& nh, uint16_t port_index, uint64_t now_ns) {
  if (n_ == kCapacity) return false;
  items_[n_++] = Item{m, nh, port_index, now_ns + kTimeoutNs};
  return true;
}

void PendingQueue::erase(uint32_t i) {
  for (uint32_t j = i + 1; j < n_; ++j) items_[j - 1] = items_[j];
  --n_;
}

}  // namespace meshgate::dp
