// Addresses that flows refer to by id (VIPs, fullnat source addresses), so that a flow entry
// stays one cache line for IPv6 too. Append-only: the control thread writes an entry before it
// publishes the first snapshot that uses its id (the snapshot's release store orders the two),
// and ids are never reused, so a flow's id stays valid for the life of the process. Workers
// only read. Id 0 means "none".
#pragma once

#include <cstdint>

#include "dataplane/common/net_types.h"

namespace meshgate::dp {

// Capacity: VIPs plus local addresses over the life of the process.
inline constexpr uint32_t kAddrTableCapacity = 1u << 18;

struct AddrTable {
  IpAddr* addrs = nullptr;  // kAddrTableCapacity entries, rte_malloc'd by the control thread
  const IpAddr& at(uint32_t id) const { return addrs[id]; }
};

}  // namespace meshgate::dp
