// unique_ptr owners for the OpenSSL objects the control side handles (certificates, CSRs, keys).
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace meshgate::ctl {

struct OpensslFree {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
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

}  // namespace meshgate::ctl
