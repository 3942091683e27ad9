// Header rewrites for translation: one endpoint (address + port) of a parsed packet, TTL /
// hop-limit decrement. Incremental checksums per RFC 1624. Worker lcores; pure inline.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "dataplane/common/compiler.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {

// Rewrites the source (kDst = false) or destination (kDst = true) address and port of a parsed
// TCP/UDP packet, or of an ICMP/ICMPv6 echo whose identifier plays the port (both directions
// name the same identifier), in place. Updates the IPv4 header checksum and the transport
// checksum: over the pseudo-header for TCP, UDP and ICMPv6 (not ICMPv4, which has none). An
// IPv4 UDP checksum of 0 ("none", RFC 768) stays 0. `m` is updated to describe the result.
template <bool kDst>
MG_ALWAYS_INLINE void nat_rewrite(uint8_t* frame, PacketMeta* m, const IpAddr& addr,
                                  uint16_t port_be) {
  uint8_t* ip = frame + m->l3_off;
  uint8_t* l4 = frame + m->l4_off;
  // The address change, as one RFC 1624 delta: it goes into the IPv4 header checksum and, through
  // the pseudo-header, into the transport checksum (with the port change added).
  uint64_t addr_delta;
  if (m->l3 == L3::kIpv4) {
    uint8_t* field = ip + (kDst ? 16 : 12);
    addr_delta = csum_delta32(field, addr.v4_ptr());
    csum_apply_delta(ip + 10, addr_delta);
    std::memcpy(field, addr.v4_ptr(), 4);
  } else {
    uint8_t* field = ip + (kDst ? 24 : 8);
    addr_delta = csum_delta32(field, addr.b) + csum_delta32(field + 4, addr.b + 4) +
                 csum_delta32(field + 8, addr.b + 8) + csum_delta32(field + 12, addr.b + 12);
    std::memcpy(field, addr.b, 16);
  }
  if (m->has_l4()) {
    switch (m->l4_proto) {
      case kProtoTcp: {
        uint8_t* pfield = l4 + (kDst ? 2 : 0);
        csum_apply_delta(l4 + 16, addr_delta + csum_delta16(ld16(pfield), port_be));
        st16(pfield, port_be);
        break;
      }
      case kProtoUdp: {
        uint8_t* pfield = l4 + (kDst ? 2 : 0);
        uint8_t* csum = l4 + 6;
        // An IPv4 UDP checksum of 0 means "none" (RFC 768) and stays 0.
        if (m->l3 != L3::kIpv4 || csum_load(csum) != 0) {
          csum_apply_delta(csum, addr_delta + csum_delta16(ld16(pfield), port_be));
          udp_csum_fixup(csum);
        }
        st16(pfield, port_be);
        break;
      }
      case kProtoIcmp:
      case kProtoIcmp6: {
        // The echo identifier plays the port in both directions. ICMPv4 has no pseudo-header.
        uint8_t* pfield = l4 + 4;
        const uint64_t id_delta = csum_delta16(ld16(pfield), port_be);
        csum_apply_delta(l4 + 2, m->l4_proto == kProtoIcmp ? id_delta : addr_delta + id_delta);
        st16(pfield, port_be);
        break;
      }
      default:
        break;
    }
  }
  if constexpr (kDst) {
    m->dst = addr;
  } else {
    m->src = addr;
  }
  if (m->l4_proto == kProtoIcmp || m->l4_proto == kProtoIcmp6) {
    m->sport = m->dport = port_be;
  } else if constexpr (kDst) {
    m->dport = port_be;
  } else {
    m->sport = port_be;
  }
}

// csum_apply_delta for a delta under 2^35 (a few 32-bit and 16-bit terms): three 16-bit folds
// take the sum to 16 bits. Folding keeps the value modulo 0xffff and never makes
// a non-zero sum zero, so any order of folds ends on the same 16-bit value.
MG_ALWAYS_INLINE void csum_apply_small_delta(uint8_t* csum, uint64_t delta) {
  uint64_t s = uint64_t(uint16_t(~csum_load(csum))) + delta;  // < 2^35
  s = (s & 0xffff) + (s >> 16);                                 // < 2^16 + 2^19
  s = (s & 0xffff) + (s >> 16);                                 // < 2^16 + 2^4
  s = (s & 0xffff) + (s >> 16);                                 // < 2^16
  csum_store(csum, uint16_t(~s));
}

// TTL and protocol share one 16-bit word, the TTL first: with the TTL above 0 the decrement
// takes the word (memory order) from w to w - u, u being the TTL byte's unit (1 on a
// little-endian host), so its delta ~w + (w - u) is the constant 0xffff - u.
inline constexpr uint64_t kTtlDecDelta =
    std::endian::native == std::endian::little ? 0xfffe : 0xfeff;

// The transport checksum's part of a rewrite: TCP's, or UDP's unless it is 0 ("none",
// RFC 768), with csum_apply_small_delta.
MG_ALWAYS_INLINE void apply_l4_small_delta(uint8_t* l4, uint8_t proto, uint64_t delta) {
  if (proto == kProtoTcp) {
    csum_apply_small_delta(l4 + 16, delta);
  } else if (csum_load(l4 + 6) != 0) {
    csum_apply_small_delta(l4 + 6, delta);
    udp_csum_fixup(l4 + 6);
  }
}

// nat_rewrite<kDst> followed by decrement_ttl, for an IPv4 TCP or UDP packet whose header
// (at `ip`, 20 bytes or more) and transport header (at `l4`) are known good: the same bytes,
// with the address change and the TTL change folded into one IPv4 header checksum update
// (one's-complement addition is associative, and a sum of non-zero terms never folds to 0).
// `addr4` is the new address as on the wire. The caller has checked the TTL is > 1.
template <bool kDst>
MG_ALWAYS_INLINE void nat_rewrite_ipv4_ttl(uint8_t* ip, uint8_t* l4, uint8_t proto,
                                           const uint8_t* addr4, uint16_t port_be) {
  uint8_t* field = ip + (kDst ? 16 : 12);
  const uint64_t addr_delta = csum_delta32(field, addr4);
  ip[8] = uint8_t(ip[8] - 1);
  csum_apply_small_delta(ip + 10, addr_delta + kTtlDecDelta);
  std::memcpy(field, addr4, 4);
  uint8_t* pfield = l4 + (kDst ? 2 : 0);
  apply_l4_small_delta(l4, proto, addr_delta + csum_delta16(ld16(pfield), port_be));
  st16(pfield, port_be);
}

// Both endpoints and the TTL at once, for fullnat (either direction): nat_rewrite<false> to
// `src4`:`sport_be`, nat_rewrite<true> to `dst4`:`dport_be`, then decrement_ttl, on an IPv4
// TCP or UDP packet as nat_rewrite_ipv4_ttl takes it. The same bytes: each of those steps
// adds a positive delta (~m + m' is never 0) to the one's-complement sum, and adding positive
// terms one fold at a time or all at once ends on the same 16-bit value. The delta (two 32-bit,
// two 16-bit terms and the TTL's) stays under 2^35, as csum_apply_small_delta needs.
MG_ALWAYS_INLINE void nat_rewrite_ipv4_both_ttl(uint8_t* ip, uint8_t* l4, uint8_t proto,
                                                const uint8_t* src4, uint16_t sport_be,
                                                const uint8_t* dst4, uint16_t dport_be) {
  const uint64_t addr_delta = csum_delta32(ip + 12, src4) + csum_delta32(ip + 16, dst4);
  ip[8] = uint8_t(ip[8] - 1);
  csum_apply_small_delta(ip + 10, addr_delta + kTtlDecDelta);
  std::memcpy(ip + 12, src4, 4);
  std::memcpy(ip + 16, dst4, 4);
  apply_l4_small_delta(l4, proto,
                       addr_delta + csum_delta16(ld16(l4), sport_be) +
                           csum_delta16(ld16(l4 + 2), dport_be));
  st16(l4, sport_be);
  st16(l4 + 2, dport_be);
}

// nat_rewrite<kDst> of an IPv6 TCP or UDP packet whose headers are known good (the transport
// header right after the 40-byte IPv6 header, at `l4`): the same bytes, from the header alone.
// `addr16` is the new address. The hop limit is the caller's.
template <bool kDst>
MG_ALWAYS_INLINE void nat_rewrite_ipv6(uint8_t* ip, uint8_t* l4, uint8_t proto,
                                       const uint8_t* addr16, uint16_t port_be) {
  uint8_t* field = ip + (kDst ? 24 : 8);
  const uint64_t addr_delta =
      csum_delta32(field, addr16) + csum_delta32(field + 4, addr16 + 4) +
      csum_delta32(field + 8, addr16 + 8) + csum_delta32(field + 12, addr16 + 12);
  std::memcpy(field, addr16, 16);
  uint8_t* pfield = l4 + (kDst ? 2 : 0);
  const uint64_t l4_delta = addr_delta + csum_delta16(ld16(pfield), port_be);
  if (proto == kProtoTcp) {
    csum_apply_delta(l4 + 16, l4_delta);
  } else {  // UDP over IPv6 always has a checksum (RFC 8200 §8.1)
    csum_apply_delta(l4 + 6, l4_delta);
    udp_csum_fixup(l4 + 6);
  }
  st16(pfield, port_be);
}

// Decrements TTL / hop limit. The caller has checked it is > 1.
MG_ALWAYS_INLINE void decrement_ttl(uint8_t* frame, PacketMeta* m) {
  uint8_t* ip = frame + m->l3_off;
  if (m->l3 == L3::kIpv4) {
    // TTL and protocol share one 16-bit word. The new word is built, not read back after the
    // byte store (a wide load of a narrower store stalls store forwarding).
    const uint16_t old_word = ld16(ip + 8);
    const uint8_t ttl_proto[2] = {uint8_t(ip[8] - 1), ip[9]};
    ip[8] = ttl_proto[0];
    csum_replace2(ip + 10, old_word, ld16(ttl_proto));
  } else {
    ip[7] = uint8_t(ip[7] - 1);
  }
  --m->ttl;
}

}  // namespace meshgate::dp
