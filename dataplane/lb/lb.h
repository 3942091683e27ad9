// Backend selection for services: Maglev consistent hashing (Maglev, NSDI 2016, §3.4) with
// weights. Table build runs on the control thread (and in tools); lookup runs on workers.
// Pure C++ (no DPDK) so that tools/pcapgen and tests reproduce the dataplane's choices.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dataplane/common/hash.h"
#include "dataplane/common/net_types.h"

namespace meshgate::dp {

inline constexpr uint32_t kNoBackend = 0xffffffffu;
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
// index; every slot is kNoBackend when no backend has weight > 0. Deterministic: the same
// backends (by address:port, in any order of equal identities) give the same table.
std::vector<uint32_t> lb_build_table(std::span<const LbBackend> backends, uint32_t size);
// The same into `table` (size slots), without allocating per call.
void lb_fill_table(std::span<const LbBackend> backends, uint32_t size, uint32_t* table);

// Flow hash of a client packet's 5-tuple (ports in network byte order, as on the wire).
inline uint32_t lb_flow_hash(const IpAddr& src, const IpAddr& dst, uint16_t sport_be,
                             uint16_t dport_be, uint8_t proto) {
  struct {
    uint8_t src[16];
    uint8_t dst[16];
    uint16_t sport, dport;
    uint32_t proto;
  } key;
  std::memcpy(key.src, src.b, 16);
  std::memcpy(key.dst, dst.b, 16);
  key.sport = sport_be;
  key.dport = dport_be;
  key.proto = proto;
  return crc32c(&key, sizeof key, 0x6d5a6d5a);
}

inline uint32_t lb_lookup(const uint32_t* table, uint32_t size, uint32_t flow_hash) {
  return table[flow_hash % size];
}

}  // namespace meshgate::dp
