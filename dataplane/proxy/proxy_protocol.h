// PROXY protocol version 2 (HAProxy, "The PROXY protocol", section 2.2): the binary header a
// proxy sends first on its connection to a backend, carrying the client's address and the
// address it connected to. Pure function, any thread.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/common/net_types.h"

namespace meshgate::dp {

// 16-byte fixed part + 12 (IPv4) or 36 (IPv6) address bytes.
inline constexpr uint32_t kProxyV2MaxLen = 16 + 36;

// Writes the header for a TCP connection from src:sport to dst:dport (ports in host order,
// both addresses of one family) into `out` (kProxyV2MaxLen bytes); returns its length.
inline uint32_t write_proxy_v2(uint8_t* out, const IpAddr& src, uint16_t sport, const IpAddr& dst,
                               uint16_t dport) {
  static constexpr uint8_t kSig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                       0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
  std::memcpy(out, kSig, sizeof kSig);
  out[12] = 0x21;  // version 2, command PROXY
  const bool v4 = src.is_v4();
  out[13] = v4 ? 0x11 : 0x21;  // AF_INET / AF_INET6, STREAM
  const uint16_t alen = v4 ? 12 : 36;
  out[14] = uint8_t(alen >> 8);
  out[15] = uint8_t(alen);
  uint8_t* a = out + 16;
  const uint32_t n = v4 ? 4 : 16;
  std::memcpy(a, v4 ? src.v4_ptr() : src.b, n);
  std::memcpy(a + n, v4 ? dst.v4_ptr() : dst.b, n);
  a[2 * n] = uint8_t(sport >> 8);
  a[2 * n + 1] = uint8_t(sport);
  a[2 * n + 2] = uint8_t(dport >> 8);
  a[2 * n + 3] = uint8_t(dport);
  return 16u + alen;
}

}  // namespace meshgate::dp
