// What /config_dump shows of the gateway's certificates: identity and validity of each
// certificate of a PEM file (the [hbone] cert_chain and trust_bundle), read with OpenSSL.
#pragma once

#include <string>
#include <vector>

#include "control/common/result.h"
#include "dataplane/snapshot/cert_meta.h"

namespace meshgate::ctl {

using CertInfo = dp::CertMeta;

// Every certificate of a PEM text, in order. A text with no certificate or a certificate
// OpenSSL cannot parse is an error naming `file` (also CertInfo::file). `first_role` is the
// role of the first certificate, `rest_role` of the others.
Result<std::vector<CertInfo>> pem_certs_info(const std::string& pem, const std::string& file,
                                             const std::string& first_role,
                                             const std::string& rest_role);

// RFC 3339 UTC ("2026-11-22T01:02:03Z").
std::string unix_to_rfc3339(int64_t t);

}  // namespace meshgate::ctl
