#include "control/certs/ca_cert.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <memory>

#include "control/certs/openssl_ptr.h"
#include "control/common/file_read.h"
#include "control/mesh/file_watch.h"
#include "dataplane/tls/tls.h"

namespace meshgate::ctl {
namespace {

template <typename T>
using Ptr = OsslPtr<T>;

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// Every certificate of a PEM text, in order (empty when there is none or one is malformed).
std::vector<Ptr<X509>> read_x509s(const std::string& pem) {
  std::vector<Ptr<X509>> out;
  Ptr<BIO> b(BIO_new_mem_buf(pem.data(), int(pem.size())));
  if (!b) return out;
  for (;;) {
    Ptr<X509> x(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
    if (!x) break;
    out.push_back(std::move(x));
  }
  ERR_clear_error();
  return out;
}

// Checks leaf ↔ key, SPIFFE id, chain to the roots; fills the bundle's metadata.
Result<CertBundle> check_bundle(CertBundle b, const std::string& want_id, const std::string& source) {
  const auto chain = read_x509s(b.chain_pem);
  const auto roots = read_x509s(b.roots_pem);
  if (chain.empty()) return Error{source + ": no certificate in the chain"};
  if (roots.empty()) return Error{source + ": no trust anchor"};
  X509* leaf = chain.front().get();
  Ptr<BIO> kb(BIO_new_mem_buf(b.key_pem.data(), int(b.key_pem.size())));
  Ptr<EVP_PKEY> key(kb ? PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return Error{source + ": the private key cannot be parsed: " + openssl_error()};
  if (!EVP_PKEY_is_a(key.get(), "EC") || EVP_PKEY_get_bits(key.get()) != 256) {
    return Error{source + ": the private key is not EC P-256"};
  }
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return Error{source + ": the leaf certificate does not match the private key"};
  }
  const std::vector<std::string> ids = dp::tls::spiffe_ids_of(leaf);
  if (ids.empty()) return Error{source + ": the leaf certificate has no SPIFFE URI SAN"};
  if (!want_id.empty() && std::find(ids.begin(), ids.end(), want_id) == ids.end()) {
    return Error{source + ": the leaf certificate is for " + ids.front() + ", not " + want_id};
  }
  b.identity = want_id.empty() ? ids.front() : want_id;
  Ptr<X509_STORE> store(X509_STORE_new());
  for (const auto& r : roots) X509_STORE_add_cert(store.get(), r.get());
  Ptr<STACK_OF(X509)> untrusted(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) {
    X509_up_ref(chain[i].get());
    sk_X509_push(untrusted.get(), chain[i].get());
  }
  Ptr<X509_STORE_CTX> ctx(X509_STORE_CTX_new());
  if (!store || !untrusted || !ctx ||
      X509_STORE_CTX_init(ctx.get(), store.get(), leaf, untrusted.get()) != 1) {
    return Error{source + ": " + openssl_error()};
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    return Error{source + ": the chain does not verify against the trust anchors: " +
                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()))};
  }
  auto ci = pem_certs_info(b.chain_pem, source, "leaf", "intermediate");
  if (!ci) return ci.error();
  auto ri = pem_certs_info(b.roots_pem, source, "trust_anchor", "trust_anchor");
  if (!ri) return ri.error();
  b.info = std::move(ci.value());
  b.not_before_unix = b.info.front().not_before_unix;
  b.not_after_unix = b.info.front().not_after_unix;
  for (auto& r : *ri) b.info.push_back(std::move(r));
  return b;
}

}  // namespace

Result<KeyAndCsr> make_key_and_csr(const std::string& spiffe_id) {
  Ptr<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) return Error{"cannot generate a P-256 key: " + openssl_error()};
  Ptr<X509_REQ> req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), X509_REQ_VERSION_1) != 1 ||
      X509_REQ_set_pubkey(req.get(), key.get()) != 1) {
    return Error{"cannot make a CSR: " + openssl_error()};
  }
  const std::string san = "URI:" + spiffe_id;
  Ptr<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, san.c_str()));
  Ptr<STACK_OF(X509_EXTENSION)> exts(sk_X509_EXTENSION_new_null());
  if (!ext || !exts) return Error{"cannot encode the SAN " + spiffe_id + ": " + openssl_error()};
  sk_X509_EXTENSION_push(exts.get(), ext.release());
  if (X509_REQ_add_extensions(req.get(), exts.get()) != 1 ||
      X509_REQ_sign(req.get(), key.get(), EVP_sha256()) <= 0) {
    return Error{"cannot sign the CSR: " + openssl_error()};
  }
  Ptr<BIO> kb(BIO_new(BIO_s_mem()));
  Ptr<BIO> cb(BIO_new(BIO_s_mem()));
  if (!kb || !cb ||
      PEM_write_bio_PrivateKey(kb.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_X509_REQ(cb.get(), req.get()) != 1) {
    return Error{"cannot write the key or CSR: " + openssl_error()};
  }
  return KeyAndCsr{bio_string(kb.get()), bio_string(cb.get())};
}

Result<CertBundle> bundle_from_ca_response(const std::vector<std::string>& cert_chain,
                                           const std::string& key_pem, const std::string& spiffe_id,
                                           const std::string& source) {
  if (cert_chain.size() < 2) {
    return Error{source + ": the answer has " + std::to_string(cert_chain.size()) +
                 " chain entries; expected the leaf, any intermediates and the root last"};
  }
  CertBundle b;
  for (size_t i = 0; i + 1 < cert_chain.size(); ++i) {
    b.chain_pem += cert_chain[i];
    if (!b.chain_pem.empty() && b.chain_pem.back() != '\n') b.chain_pem += '\n';
  }
  b.roots_pem = cert_chain.back();
  b.key_pem = key_pem;
  return check_bundle(std::move(b), spiffe_id, source);
}

Result<CertBundle> bundle_from_files(const std::string& chain_file, const std::string& key_file,
                                     const std::string& roots_file) {
  CertBundle b;
  std::string why;
  if (!mesh::read_file(chain_file, kMaxPemFileBytes, &b.chain_pem, &why) ||
      !mesh::read_file(key_file, kMaxPemFileBytes, &b.key_pem, &why) ||
      !mesh::read_file(roots_file, kMaxPemFileBytes, &b.roots_pem, &why)) {
    return Error{"cannot read " + why};
  }
  auto r = check_bundle(std::move(b), "", chain_file);
  if (!r) return r;
  // Metadata names the file each certificate came from.
  for (auto& c : r->info) c.file = c.role == "trust_anchor" ? roots_file : chain_file;
  return r;
}

}  // namespace meshgate::ctl
