// Backend selection for services on the worker: a flow's hash picks a slot of the service's
// Maglev table (Maglev, NSDI 2016, §3.4). The tables are built on the control thread
// (control/snapshot/maglev.h) and reach workers in the snapshot; this header holds only what a
// worker runs. Pure C++ (no DPDK) so that tools/pcapgen and tests reproduce the dataplane's
// choices.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/common/hash.h"
#include "dataplane/common/net_types.h"

namespace meshgate::dp {

// A slot no backend holds: every slot of a service whose backends all have weight 0.
inline constexpr uint32_t kNoBackend = 0xffffffffu;

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

// lb_flow_hash of an IPv4 packet from its wire fields, without building the 40-byte key: the
// same CRC over the same bytes (each address IPv4-mapped: 10 zero bytes, ff ff, the address),
// one 64-bit word at a time. `src`, `dst` and `ports` are loaded from the wire as they lie in
// memory (source and destination port together, as in the TCP/UDP header).
inline uint32_t lb_flow_hash_v4(uint32_t src, uint32_t dst, uint32_t ports, uint8_t proto) {
  constexpr uint64_t kMapped = 0xffffull << 16;  // bytes 8..11 of a mapped address: 00 00 ff ff
  uint64_t crc = _mm_crc32_u64(0x6d5a6d5a, 0);
  crc = _mm_crc32_u64(crc, kMapped | uint64_t(src) << 32);
  crc = _mm_crc32_u64(crc, 0);
  crc = _mm_crc32_u64(crc, kMapped | uint64_t(dst) << 32);
  crc = _mm_crc32_u64(crc, ports | uint64_t(proto) << 32);
  return uint32_t(crc);
}

// lb_flow_hash of an IPv6 packet from its header: `addrs` points at the source address, which
// the destination follows (as in the IPv6 header, and as in the key); `ports` as for
// lb_flow_hash_v4. The same CRC over the same bytes.
inline uint32_t lb_flow_hash_v6(const uint8_t* addrs, uint32_t ports, uint8_t proto) {
  uint64_t crc = 0x6d5a6d5a;
  for (uint32_t k = 0; k < 32; k += 8) {
    uint64_t w;
    std::memcpy(&w, addrs + k, 8);
    crc = _mm_crc32_u64(crc, w);
  }
  crc = _mm_crc32_u64(crc, ports | uint64_t(proto) << 32);
  return uint32_t(crc);
}

inline uint32_t lb_lookup(const uint32_t* table, uint32_t size, uint32_t flow_hash) {
  return table[flow_hash % size];
}

}  // namespace meshgate::dp
