// What the Istio CA client needs from OpenSSL: a P-256 key and a CSR for one SPIFFE id, and the
// check of a CreateCertificate answer (Istio CA service). Control side, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/certs/cert_info.h"
#include "control/common/result.h"

namespace meshgate::ctl {

struct KeyAndCsr {
  std::string key_pem;  // PKCS#8 EC P-256 private key
  std::string csr_pem;  // subject empty, SAN URI = the SPIFFE id, signed with the key
};
Result<KeyAndCsr> make_key_and_csr(const std::string& spiffe_id);

// A certificate the gateway holds: PEMs for the TLS contexts and the metadata snapshots carry.
struct CertBundle {
  std::string chain_pem;  // leaf then intermediates
  std::string key_pem;
  std::string roots_pem;  // the trust anchors
  std::vector<CertInfo> info;  // leaf, intermediates, trust anchors
  int64_t not_before_unix = 0;  // the leaf's
  int64_t not_after_unix = 0;
  std::string identity;         // the leaf's SPIFFE id
};

// Checks a CreateCertificate answer: `cert_chain` is [leaf, intermediates..., root(s)] with the
// root last (an entry may hold several PEMs); the leaf must carry `spiffe_id` as its SPIFFE URI
// SAN and match `key_pem`, and must verify against the roots through the intermediates.
Result<CertBundle> bundle_from_ca_response(const std::vector<std::string>& cert_chain,
                                           const std::string& key_pem, const std::string& spiffe_id,
                                           const std::string& source);

// The same checks for the [hbone] files: chain (leaf first), key, trust bundle.
Result<CertBundle> bundle_from_files(const std::string& chain_file, const std::string& key_file,
                                     const std::string& roots_file);

}  // namespace meshgate::ctl
