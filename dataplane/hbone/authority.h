// The :authority of an HBONE CONNECT (docs/HBONE.md "Client role"): <ipv4>:<port>,
// [<ipv6>]:<port> or <fqdn>:<port>. Strict and allocation-free; any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "dataplane/common/net_types.h"

namespace meshgate::dp::hbone {

// RFC 1035 2.3.4: a name is at most 253 characters in text form (without the final dot).
inline constexpr size_t kMaxHostnameBytes = 253;
inline constexpr size_t kMaxLabelBytes = 63;

struct Authority {
  enum class Kind : uint8_t { kIp, kName };
  Kind kind = Kind::kIp;
  IpAddr ip;                           // kIp (IPv4 stored IPv4-mapped)
  char name[kMaxHostnameBytes + 1] = {};  // kName: lower-cased, NUL-terminated
  uint8_t name_len = 0;
  uint16_t port = 0;                   // 1..65535

  std::string_view hostname() const { return {name, name_len}; }
};

// Accepts exactly:
//   a.b.c.d:port            four decimal octets 0..255 without leading zeros
//   [v6]:port               an RFC 4291 text address in brackets (no zone id)
//   name:port               LDH labels of 1..63 chars (letters folded to lower case), no
//                           leading/trailing '-', 253 chars at most, no trailing dot, last
//                           label not all digits (so "1.2.3.400" is a bad IP, not a name)
// port: 1..65535 in decimal without sign or leading zeros. Nothing else: no user info, no path,
// no spaces, no missing port. Returns false on anything else (the caller answers 400).
bool parse_authority(std::string_view s, Authority& out);

}  // namespace meshgate::dp::hbone
