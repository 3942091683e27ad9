#include "control/certs/cert_info.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>

#include "control/certs/openssl_ptr.h"
#include "control/common/file_read.h"
#include "dataplane/tls/tls.h"

namespace meshgate::ctl {
namespace {

std::string name_str(const X509_NAME* n) {
  OsslPtr<BIO> b(BIO_new(BIO_s_mem()));
  if (!b || X509_NAME_print_ex(b.get(), n, 0, XN_FLAG_RFC2253) < 0) return {};
  return bio_string(b.get());
}

int64_t asn1_unix(const ASN1_TIME* t) {
  struct tm tm {};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return int64_t(timegm(&tm));
}

std::string serial_hex(const X509* x) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr);
  if (!bn) return {};
  char* hex = BN_bn2hex(bn);
  std::string s = hex ? hex : "";
  OPENSSL_free(hex);
  BN_free(bn);
  return s;
}

}  // namespace

namespace {

// Every certificate read from `bio`; `label` names the source in errors and CertInfo::file.
Result<std::vector<CertInfo>> certs_from_bio(BIO* bio, const std::string& label,
                                             const std::string& first_role,
                                             const std::string& rest_role) {
  std::vector<CertInfo> out;
  for (;;) {
    OsslPtr<X509> x(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
    if (!x) {
      // The end of the input, or a PEM block OpenSSL cannot parse.
      const unsigned long e = ERR_peek_last_error();
      const bool eof = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
      ERR_clear_error();
      if (eof && !out.empty()) break;
      return Error{out.empty() && eof ? label + ": no PEM certificate"
                                      : label + ": certificate " + std::to_string(out.size() + 1) +
                                            " cannot be parsed"};
    }
    CertInfo c;
    c.file = label;
    c.role = out.empty() ? first_role : rest_role;
    c.subject = name_str(X509_get_subject_name(x.get()));
    c.issuer = name_str(X509_get_issuer_name(x.get()));
    c.serial = serial_hex(x.get());
    c.uri_sans = dp::tls::uri_sans_of(x.get());
    // The SPIFFE id as the TLS layer would verify it.
    const std::vector<std::string> ids = dp::tls::spiffe_ids_of(x.get());
    if (!ids.empty()) c.identity = ids.front();
    c.not_before_unix = asn1_unix(X509_get0_notBefore(x.get()));
    c.not_after_unix = asn1_unix(X509_get0_notAfter(x.get()));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Result<std::vector<CertInfo>> pem_certs_info(const std::string& pem, const std::string& file,
                                             const std::string& first_role,
                                             const std::string& rest_role) {
  OsslPtr<BIO> bio(BIO_new_mem_buf(pem.data(), int(pem.size())));
  if (!bio) return Error{file + ": out of memory"};
  return certs_from_bio(bio.get(), file, first_role, rest_role);
}

std::string unix_to_rfc3339(int64_t t) {
  const time_t tt = time_t(t);
  struct tm tm {};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace meshgate::ctl
