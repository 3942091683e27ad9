// DSR encapsulation: the client's IP packet, unchanged, inside an outer IP header to the
// backend (IPIP: IPv4-in-IPv4 / IPv6-in-IPv6), or inside outer IP + UDP (GUE variant 1, "direct
// IP encapsulation": the inner IP header follows the UDP header, as Linux's fou/gue decapsulates
// it). The outer UDP source port comes from the flow hash so the backend's RSS spreads flows.
// Worker lcores; pure functions over a contiguous frame with headroom.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/common/compiler.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {

inline constexpr uint8_t kOuterTtl = 64;

// Bytes the encapsulation adds for an inner packet of this family.
inline uint32_t encap_overhead(bool v4, bool gue) {
  return (v4 ? kIpv4HdrLen : kIpv6HdrLen) + (gue ? kUdpHdrLen : 0);
}

// Writes the outer header(s) at `out` (encap_overhead bytes) for an inner IP packet of
// `inner_len` bytes at `out + overhead`. Outer family = inner family.
MG_ALWAYS_INLINE void write_encap(uint8_t* out, const uint8_t* inner, uint32_t inner_len, bool v4,
                                  bool gue, const IpAddr& src, const IpAddr& dst,
                                  uint16_t gue_port_be, uint32_t flow_hash) {
  const uint32_t udp_len = gue ? kUdpHdrLen + inner_len : 0;
  uint8_t* l4 = out + (v4 ? kIpv4HdrLen : kIpv6HdrLen);
  if (v4) {
    out[0] = 0x45;
    out[1] = inner[1];  // TOS / DSCP carried over
    wr16(out + 2, uint16_t(kIpv4HdrLen + (gue ? udp_len : inner_len)));
    wr16(out + 4, 0);
    wr16(out + 6, rd16(inner + 6) & 0x4000);  // DF as the inner packet asked
    out[8] = kOuterTtl;
    out[9] = gue ? kProtoUdp : kProtoIpip;
    std::memcpy(out + 12, src.v4_ptr(), 4);
    std::memcpy(out + 16, dst.v4_ptr(), 4);
    csum_store(out + 10, ipv4_header_csum(out, kIpv4HdrLen));
  } else {
    // Traffic class from the inner header; flow label from the flow hash (RFC 6438).
    const uint32_t tc = (rd32(inner) >> 20) & 0xff;
    wr32(out, 0x60000000u | tc << 20 | (flow_hash & 0xfffff));
    wr16(out + 4, uint16_t(gue ? udp_len : inner_len));
    out[6] = gue ? kProtoUdp : kProtoIpv6;
    out[7] = kOuterTtl;
    std::memcpy(out + 8, src.b, 16);
    std::memcpy(out + 24, dst.b, 16);
  }
  if (!gue) return;
  // Ephemeral range 49152-65535 (RFC 6335), spread by the flow.
  wr16(l4, uint16_t(49152 + (flow_hash >> 16) % 16384));
  std::memcpy(l4 + 2, &gue_port_be, 2);
  wr16(l4 + 4, uint16_t(udp_len));
  wr16(l4 + 6, 0);
  if (!v4) {
    // RFC 8200 §8.1: UDP over IPv6 needs a checksum (Linux only accepts zero with
    // udp6zerocsumrx). It covers the inner packet, contiguous after the UDP header.
    uint32_t sum = csum_pseudo_v6(out + 8, out + 24, kProtoUdp, udp_len);
    sum = csum_partial(l4, kUdpHdrLen, sum);
    sum = csum_partial(inner, inner_len, sum);
    csum_store(l4 + 6, csum_finish(sum));
    udp_csum_fixup(l4 + 6);
  }
  // IPv4: checksum 0 = none (RFC 768), what tunnel endpoints expect for GUE.
}

}  // namespace meshgate::dp
