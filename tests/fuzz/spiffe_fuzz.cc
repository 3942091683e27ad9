// libFuzzer target for the SPIFFE id parser. On success the parts must rebuild the input
// exactly (nothing skipped, nothing normalised) and hold only allowed characters.
#include <cstdint>
#include <string>

#include "dataplane/tls/spiffe.h"

using meshgate::dp::tls::parse_spiffe_id;
using meshgate::dp::tls::SpiffeId;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  SpiffeId id;
  if (!parse_spiffe_id(s, id)) return 0;
  const std::string rebuilt = "spiffe://" + std::string(id.trust_domain) + "/ns/" +
                              std::string(id.ns) + "/sa/" + std::string(id.service_account);
  if (rebuilt != s) __builtin_trap();
  if (id.principal != std::string_view(s).substr(9)) __builtin_trap();
  // Only the scheme's colon; no escapes, queries, fragments or user info.
  if (s.find(':', 7) != std::string::npos) __builtin_trap();
  if (s.find_first_of("%?#@") != std::string::npos) __builtin_trap();
  if (id.trust_domain.empty() || id.ns.empty() || id.service_account.empty()) __builtin_trap();
  return 0;
}
