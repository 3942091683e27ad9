// Maglev table builds (Maglev, NSDI 2016, §3.4) with weights: the control thread fills one table
// per service into each snapshot; tools/pcapgen and the tests build the same tables to reproduce
// the dataplane's choices. Never run on a worker: a worker only looks a flow up in a built table
// (dataplane/lb/lb.h). Pure C++ (no DPDK), in its own small library (meshgate_maglev) so that
// tools link it without the rest of the control plane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dataplane/common/net_types.h"
#include "dataplane/lb/lb.h"

namespace meshgate::ctl {

// Maglev's recommended table size: a prime well above 100 x backends for < 1% imbalance.
inline constexpr uint32_t kDefaultLbTableSize = 65537;
inline constexpr uint32_t kMinSlotsPerBackend = 100;

struct LbBackend {
  IpAddr address;
  uint16_t port = 0;    // host order
  uint32_t weight = 1;  // 0 = drain: never chosen for new flows
};

// The slot count used when a service does not configure one: kDefaultLbTableSize, or the next
// prime >= 100 x backends when that is larger.
uint32_t lb_auto_table_size(size_t n_backends);
bool is_prime(uint32_t n);
uint32_t next_prime(uint32_t n);

// Builds a Maglev lookup table of `size` slots (size must be prime). Each slot holds a backend
// index; every slot is dp::kNoBackend when no backend has weight > 0. Deterministic: the same
// backends (by address:port, in any order of equal identities) give the same table.
std::vector<uint32_t> lb_build_table(std::span<const LbBackend> backends, uint32_t size);
// The same into `table` (size slots), without allocating per call.
void lb_fill_table(std::span<const LbBackend> backends, uint32_t size, uint32_t* table);

}  // namespace meshgate::ctl
