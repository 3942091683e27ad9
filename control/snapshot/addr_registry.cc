#include "control/snapshot/addr_registry.h"

#include <rte_malloc.h>

namespace meshgate::ctl {

AddrRegistry::AddrRegistry() {
  table_.addrs = static_cast<IpAddr*>(
      rte_zmalloc("mg_addrs", sizeof(IpAddr) * dp::kAddrTableCapacity, 64));
}

AddrRegistry::~AddrRegistry() { rte_free(table_.addrs); }

uint32_t AddrRegistry::id_for(const IpAddr& a) {
  auto it = ids_.find(a);
  if (it != ids_.end()) return it->second;
  if (!table_.addrs || next_ >= dp::kAddrTableCapacity) return 0;
  const uint32_t id = next_++;
  // Written before the snapshot that uses the id is published (release store).
  table_.addrs[id] = a;
  ids_.emplace(a, id);
  return id;
}

}  // namespace meshgate::ctl
