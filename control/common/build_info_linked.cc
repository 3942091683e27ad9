// linked_build_info(): asks the loaded libraries (control/common/build_info.h).
#include <hs/hs.h>
#include <openssl/crypto.h>
#include <rte_version.h>

#include <string_view>

#include "control/common/build_info.h"

namespace meshgate {

namespace {

// "DPDK 22.11.11" -> "22.11.11"; "5.4.0 2023-01-11" -> "5.4.0": the version number alone, as
// the header macros give it.
std::string version_word(std::string_view s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) == prefix) s.remove_prefix(prefix.size());
  return std::string(s.substr(0, s.find(' ')));
}

}  // namespace

BuildInfo linked_build_info() {
  BuildInfo b = compiled_build_info();
  b.dpdk = version_word(rte_version(), "DPDK ");
  b.openssl = OpenSSL_version(OPENSSL_VERSION_STRING);
  b.hyperscan = version_word(hs_version(), "");
  return b;
}

}  // namespace meshgate
