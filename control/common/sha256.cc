#include "control/common/sha256.h"

#include <openssl/evp.h>

#include "dataplane/common/compiler.h"

namespace meshgate::ctl {

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  // EVP_Digest fails only when OpenSSL cannot run SHA-256 at all (no default provider): a
  // broken installation, not something a config file controls.
  MG_CHECK(EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr) == 1);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 0xf];
  }
  return out;
}

}  // namespace meshgate::ctl
