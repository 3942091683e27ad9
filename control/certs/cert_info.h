// What /config_dump shows of the gateway's certificates: identity and validity of each
// certificate of a PEM file (the [hbone] cert_chain and trust_bundle), read with OpenSSL.
#pragma once

#include <string>
#include <vector>

#include "control/common/result.h"
#include "dataplane/snapshot/cert_meta.h"

namespace meshgate::ctl {

using CertInfo = dp::CertMeta;

// Every certificate of a PEM file, in file order. An unreadable file, a file with no
// certificate or a certificate OpenSSL cannot parse is an error naming the file.
// `first_role` is the role of the first certificate, `rest_role` of the others.
Result<std::vector<CertInfo>> read_pem_certs(const std::string& path, const std::string& first_role,
                                            const std::string& rest_role);

// The same for a PEM text; `file` names it in errors and CertInfo::file.
Result<std::vector<CertInfo>> pem_certs_info(const std::string& pem, const std::string& file,
                                             const std::string& first_role,
                                             const std::string& rest_role);

// RFC 3339 UTC ("2026-11-22T01:02:03Z").
std::string unix_to_rfc3339(int64_t t);

}  // namespace meshgate::ctl
