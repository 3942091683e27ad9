// What a snapshot records of the gateway's certificates: identity and validity of each
// certificate of the [hbone] cert_chain and trust_bundle (read on the control thread with
// OpenSSL: control/certs). Metadata only; the keys live in the TLS contexts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshgate::dp {

struct CertMeta {
  std::string file;
  std::string role;                   // "leaf", "intermediate" (cert_chain), "trust_anchor"
  std::string subject;                // RFC 2253 form
  std::string issuer;
  std::string serial;                 // hex
  std::vector<std::string> uri_sans;  // SPIFFE IDs are URI SANs
  std::string identity;               // the first well-formed SPIFFE id, else empty
  int64_t not_before_unix = 0;
  int64_t not_after_unix = 0;
};

}  // namespace meshgate::dp
