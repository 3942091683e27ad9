// libFuzzer target for the HBONE :authority parser. On success the parsed form, printed back
// canonically, must parse again to the same value (no state leaks between parses, no
// out-of-bounds read on any input).
#include <cstdint>
#include <cstring>
#include <string>

#include "dataplane/hbone/authority.h"

using meshgate::dp::hbone::Authority;
using meshgate::dp::hbone::parse_authority;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  Authority a;
  if (!parse_authority(s, a)) return 0;
  if (a.port == 0) __builtin_trap();
  std::string again;
  if (a.kind == Authority::Kind::kName) {
    if (a.name_len == 0 || a.name_len > meshgate::dp::hbone::kMaxHostnameBytes) __builtin_trap();
    if (std::strlen(a.name) != a.name_len) __builtin_trap();
    again = std::string(a.hostname()) + ":" + std::to_string(a.port);
  } else {
    const std::string ip = a.ip.str();
    again = (a.ip.is_v4() ? ip : "[" + ip + "]") + ":" + std::to_string(a.port);
  }
  Authority b;
  if (!parse_authority(again, b)) __builtin_trap();
  if (b.kind != a.kind || b.port != a.port || !(b.ip == a.ip) || b.hostname() != a.hostname())
    __builtin_trap();
  return 0;
}
