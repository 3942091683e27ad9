// unique_ptr owners for the OpenSSL objects the control side handles (certificates, CSRs, keys,
// TLS contexts being built),
// and the contents of a memory BIO as a string.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

namespace meshgate::ctl {

struct OpensslFree {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_REQ* p) const { X509_REQ_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
  void operator()(STACK_OF(X509)* p) const { sk_X509_pop_free(p, X509_free); }
  void operator()(STACK_OF(X509_EXTENSION)* p) const {
    sk_X509_EXTENSION_pop_free(p, X509_EXTENSION_free);
  }
};
template <typename T>
using OsslPtr = std::unique_ptr<T, OpensslFree>;

// What a memory BIO (BIO_s_mem) holds.
inline std::string bio_string(BIO* b) {
  char* p = nullptr;
  const long len = BIO_get_mem_data(b, &p);
  return len > 0 ? std::string(p, size_t(len)) : std::string();
}

}  // namespace meshgate::ctl
