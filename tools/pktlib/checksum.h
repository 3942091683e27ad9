// Internet checksum (RFC 1071) and the TCP/UDP/ICMPv6 pseudo-header sums (RFC 9293 3.1,
// RFC 768, RFC 8200 8.1). Pure functions, any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/common/net_types.h"

namespace meshgate::pkt {

// One's-complement partial sum of `data` read as big-endian 16-bit words (an odd last byte is
// padded with zero), added to `sum`. Not folded: chain calls, then csum_finish().
uint64_t csum_add(std::span<const uint8_t> data, uint64_t sum = 0);

// Folds a partial sum to 16 bits and complements it: the value to store in a checksum field
// (host order).
uint16_t csum_finish(uint64_t sum);

// RFC 1071 checksum of `data`.
inline uint16_t inet_checksum(std::span<const uint8_t> data) { return csum_finish(csum_add(data)); }

// True when `data` (checksum field included) sums to 0xffff, i.e. its checksum is right.
bool csum_valid(std::span<const uint8_t> data, uint64_t sum = 0);

// Partial sum of the pseudo-header for an upper-layer packet of `l4_len` bytes: the IPv4 one
// (RFC 9293 3.1) when both addresses are IPv4, the IPv6 one (RFC 8200 8.1) otherwise.
uint64_t pseudo_header_sum(const IpAddr& src, const IpAddr& dst, uint8_t proto, uint32_t l4_len);

// Checksum of an upper-layer packet (its checksum field must hold zero) with the pseudo-header.
inline uint16_t l4_checksum(const IpAddr& src, const IpAddr& dst, uint8_t proto,
                            std::span<const uint8_t> l4) {
  return csum_finish(csum_add(l4, pseudo_header_sum(src, dst, proto, uint32_t(l4.size()))));
}

// A value that is wrong for any packet whose right checksum is `good`. One's-complement sums
// treat 0x0000 and 0xffff as equal, so flip one bit (never both values of that pair), and
// avoid 0 because a zero UDP checksum means "none" (RFC 768).
inline uint16_t corrupt_checksum(uint16_t good) {
  const uint16_t bad = good ^ 0x0001;
  return bad == 0 ? uint16_t(good ^ 0x0002) : bad;
}

// CRC32c (Castagnoli) as SCTP uses it (RFC 9260 Appendix A): the value to store, little-endian,
// in the common header's checksum field (computed with that field zero). Table-driven software
// version so tools do not depend on SSE4.2.
uint32_t sctp_crc32c(std::span<const uint8_t> data);

}  // namespace meshgate::pkt
