// Header rewrites for translation: one endpoint (address + port) of a parsed packet, TTL /
// hop-limit decrement. Incremental checksums per RFC 1624. Worker lcores; pure inline.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/common/compiler.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {

// Offset of the transport checksum, or 0 when the packet has none we update.
MG_ALWAYS_INLINE uint32_t l4_csum_offset(uint8_t proto) {
  switch (proto) {
    case kProtoTcp: return 16;
    case kProtoUdp: return 6;
    case kProtoIcmp:
    case kProtoIcmp6: return 2;
    default: return 0;
  }
}

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
  const uint32_t csum_off = l4_csum_offset(m->l4_proto);
  const bool l4_ok = m->has_l4() && csum_off != 0;
  const bool icmp = m->l4_proto == kProtoIcmp || m->l4_proto == kProtoIcmp6;
  uint8_t* l4_csum = l4_ok ? l4 + csum_off : nullptr;
  const bool udp_no_csum =
      l4_ok && m->l4_proto == kProtoUdp && m->l3 == L3::kIpv4 && csum_load(l4_csum) == 0;
  const bool pseudo = l4_ok && !udp_no_csum && m->l4_proto != kProtoIcmp;

  if (m->l3 == L3::kIpv4) {
    uint8_t* field = ip + (kDst ? 16 : 12);
    csum_replace_bytes(ip + 10, field, addr.v4_ptr(), 4);
    if (pseudo) csum_replace_bytes(l4_csum, field, addr.v4_ptr(), 4);
    std::memcpy(field, addr.v4_ptr(), 4);
  } else {
    uint8_t* field = ip + (kDst ? 24 : 8);
    if (pseudo) csum_replace_bytes(l4_csum, field, addr.b, 16);
    std::memcpy(field, addr.b, 16);
  }
  if (l4_ok) {
    uint8_t* pfield = icmp ? l4 + 4 : l4 + (kDst ? 2 : 0);
    const uint16_t old_port = ld16(pfield);
    if (!udp_no_csum) {
      csum_replace2(l4_csum, old_port, port_be);
      if (m->l4_proto == kProtoUdp) udp_csum_fixup(l4_csum);
    }
    st16(pfield, port_be);
  }
  if constexpr (kDst) {
    m->dst = addr;
    m->dport = port_be;
  } else {
    m->src = addr;
    m->sport = port_be;
  }
  if (icmp) m->sport = m->dport = port_be;
}

// Decrements TTL / hop limit. The caller has checked it is > 1.
MG_ALWAYS_INLINE void decrement_ttl(uint8_t* frame, PacketMeta* m) {
  uint8_t* ip = frame + m->l3_off;
  if (m->l3 == L3::kIpv4) {
    const uint16_t old_word = ld16(ip + 8);  // TTL and protocol share one 16-bit word
    ip[8] = uint8_t(ip[8] - 1);
    csum_replace2(ip + 10, old_word, ld16(ip + 8));
  } else {
    ip[7] = uint8_t(ip[7] - 1);
  }
  --m->ttl;
}

}  // namespace meshgate::dp
