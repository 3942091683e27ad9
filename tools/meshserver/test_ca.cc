#include "tools/meshserver/test_ca.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <string_view>

#include "control/certs/openssl_ptr.h"
#include "control/mesh/file_watch.h"

namespace meshgate::tools {
namespace {

template <typename T>
using Ptr = ctl::OsslPtr<T>;

grpc::Status bad(const std::string& why) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}

// The one URI SAN of a CSR, or "".
std::string csr_uri(X509_REQ* req) {
  Ptr<STACK_OF(X509_EXTENSION)> exts(X509_REQ_get_extensions(req));
  if (!exts) return {};
  for (int i = 0; i < sk_X509_EXTENSION_num(exts.get()); ++i) {
    X509_EXTENSION* e = sk_X509_EXTENSION_value(exts.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(e)) != NID_subject_alt_name) continue;
    Ptr<GENERAL_NAMES> names(static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(e)));
    if (!names || sk_GENERAL_NAME_num(names.get()) != 1) return {};
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), 0);
    if (n->type != GEN_URI) return {};
    const ASN1_IA5STRING* u = n->d.uniformResourceIdentifier;
    return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(u)),
                       size_t(ASN1_STRING_length(u)));
  }
  return {};
}

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str());
  if (!e) return false;
  const bool ok = X509_add_ext(cert, e, -1) == 1;
  X509_EXTENSION_free(e);
  return ok;
}

}  // namespace

ctl::Result<std::unique_ptr<TestCa>> TestCa::create(const TestCaOptions& opt) {
  std::unique_ptr<TestCa> ca(new TestCa());
  ca->opt_ = opt;
  std::string key_pem;
  if (!ctl::mesh::read_file(opt.cert_file, ctl::kMaxPemFileBytes, &ca->ca_pem_) ||
      !ctl::mesh::read_file(opt.key_file, ctl::kMaxPemFileBytes, &key_pem) ||
      (!opt.roots_file.empty() &&
       !ctl::mesh::read_file(opt.roots_file, ctl::kMaxPemFileBytes, &ca->roots_pem_))) {
    return ctl::Error{"cannot read the CA files " + opt.cert_file + " / " + opt.key_file + " / " +
                      opt.roots_file};
  }
  Ptr<BIO> cb(BIO_new_mem_buf(ca->ca_pem_.data(), int(ca->ca_pem_.size())));
  Ptr<BIO> kb(BIO_new_mem_buf(key_pem.data(), int(key_pem.size())));
  ca->ca_cert_ = PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr);
  ca->ca_key_ = PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr);
  if (!ca->ca_cert_ || !ca->ca_key_) return ctl::Error{"cannot parse the CA certificate or key"};
  // Only the signing certificate itself goes in the chain (the file may hold more).
  Ptr<BIO> out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(out.get(), static_cast<X509*>(ca->ca_cert_));
  ca->ca_pem_ = ctl::bio_string(out.get());
  if (ca->roots_pem_.empty()) ca->roots_pem_ = ca->ca_pem_;
  return ca;
}

TestCa::~TestCa() {
  X509_free(static_cast<X509*>(ca_cert_));
  EVP_PKEY_free(static_cast<EVP_PKEY*>(ca_key_));
}

grpc::Status TestCa::CreateCertificate(grpc::ServerContext* ctx,
                                       const istio::v1::auth::IstioCertificateRequest* req,
                                       istio::v1::auth::IstioCertificateResponse* resp) {
  if (!available_.load()) {
    refused_.fetch_add(1);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "test CA unavailable");
  }
  if (!opt_.token.empty()) {
    std::string auth;
    for (const auto& [k, v] : ctx->client_metadata()) {
      if (k == "authorization") auth.assign(v.data(), v.size());
    }
    if (auth != "Bearer " + opt_.token) {
      refused_.fetch_add(1);
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong bearer token");
    }
  }
  const std::string& csr = req->csr();
  Ptr<BIO> b(BIO_new_mem_buf(csr.data(), int(csr.size())));
  Ptr<X509_REQ> r(PEM_read_bio_X509_REQ(b.get(), nullptr, nullptr, nullptr));
  if (!r) return bad("the CSR cannot be parsed");
  EVP_PKEY* pub = X509_REQ_get0_pubkey(r.get());
  if (!pub || X509_REQ_verify(r.get(), pub) != 1) return bad("the CSR signature does not verify");
  if (!EVP_PKEY_is_a(pub, "EC") || EVP_PKEY_get_bits(pub) != 256) {
    return bad("the CSR key is not EC P-256");
  }
  const std::string uri = csr_uri(r.get());
  if (uri.rfind("spiffe://", 0) != 0) return bad("the CSR must carry one SPIFFE URI SAN");
  const int64_t ttl = std::clamp<int64_t>(req->validity_duration() > 0 ? req->validity_duration()
                                                                       : opt_.max_ttl_s,
                                          1, opt_.max_ttl_s);
  X509* ca = static_cast<X509*>(ca_cert_);
  Ptr<X509> cert(X509_new());
  X509_set_version(cert.get(), X509_VERSION_3);
  ASN1_INTEGER_set_int64(X509_get_serialNumber(cert.get()), int64_t(serial_.fetch_add(1)));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), long(ttl));
  X509_set_pubkey(cert.get(), pub);
  if (!add_ext(cert.get(), ca, NID_subject_alt_name, "critical,URI:" + uri) ||
      !add_ext(cert.get(), ca, NID_basic_constraints, "critical,CA:FALSE") ||
      !add_ext(cert.get(), ca, NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
      !add_ext(cert.get(), ca, NID_ext_key_usage, "serverAuth,clientAuth") ||
      X509_sign(cert.get(), static_cast<EVP_PKEY*>(ca_key_), EVP_sha256()) <= 0) {
    ERR_clear_error();
    return grpc::Status(grpc::StatusCode::INTERNAL, "signing failed");
  }
  Ptr<BIO> out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(out.get(), cert.get());
  resp->add_cert_chain(ctl::bio_string(out.get()));
  if (ca_pem_ != roots_pem_) resp->add_cert_chain(ca_pem_);
  resp->add_cert_chain(roots_pem_);
  issued_.fetch_add(1);
  return grpc::Status::OK;
}

}  // namespace meshgate::tools
