#include "control/certs/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstring>
#include <utility>
#include <vector>

#include "control/certs/openssl_ptr.h"
#include "dataplane/tls/spiffe.h"

namespace meshgate::ctl {
namespace {

using dp::tls::openssl_errors;
using dp::tls::parse_spiffe_id;
using dp::tls::spiffe_ids_of;
using dp::tls::SpiffeId;

// The mesh chain is leaf → intermediate → root; a few more levels for CAs plugged into Istio.
constexpr int kMaxVerifyDepth = 8;

// Every certificate of a PEM text (none when one is malformed).
std::vector<X509*> pem_x509s(const std::string& pem) {
  std::vector<X509*> out;
  BIO* b = BIO_new_mem_buf(pem.data(), int(pem.size()));
  if (b == nullptr) return out;
  while (X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) out.push_back(x);
  BIO_free(b);
  const unsigned long e = ERR_peek_last_error();
  if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) ERR_clear_error();
  return out;
}

// Leaf then intermediates, as SSL_CTX_use_certificate_chain_file takes them from a file.
bool use_chain_pem(SSL_CTX* ctx, const std::string& pem) {
  std::vector<X509*> certs = pem_x509s(pem);
  bool ok = !certs.empty() && SSL_CTX_use_certificate(ctx, certs[0]) == 1;
  X509_free(certs.empty() ? nullptr : certs[0]);
  for (size_t i = 1; i < certs.size(); ++i) {
    // add0: the context takes the reference.
    if (ok && SSL_CTX_add0_chain_cert(ctx, certs[i]) == 1) continue;
    ok = false;
    X509_free(certs[i]);
  }
  return ok;
}

bool use_key_pem(SSL_CTX* ctx, const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), int(pem.size()));
  EVP_PKEY* key = b ? PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(b);
  const bool ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  return ok;
}

bool add_roots_pem(SSL_CTX* ctx, const std::string& pem) {
  std::vector<X509*> certs = pem_x509s(pem);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  bool ok = !certs.empty();
  for (X509* x : certs) {
    ok = ok && X509_STORE_add_cert(store, x) == 1;
    X509_free(x);
  }
  return ok;
}

}  // namespace

std::unique_ptr<dp::tls::Context> create_tls_context(const TlsContextConfig& config,
                                                     std::string& error) {
  ERR_clear_error();
  OsslPtr<SSL_CTX> owned(SSL_CTX_new(TLS_method()));
  if (!owned) {
    error = "SSL_CTX_new: " + openssl_errors();
    return nullptr;
  }
  SSL_CTX* ctx = owned.get();
  auto bad = [&](const std::string& what) {
    error = what + ": " + openssl_errors();
    return nullptr;
  };
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1)
    return bad("TLS 1.3 only");
  if (SSL_CTX_set_ciphersuites(ctx, kTlsCipherSuites) != 1) return bad("cipher suites");
  if (SSL_CTX_set1_groups_list(ctx, kTlsGroups) != 1) return bad("key exchange groups");
  // No renegotiation in TLS 1.3 anyway; no resumption: every HBONE connection does a full
  // handshake (as ztunnel does), so no tickets and no session cache to keep per worker.
  // HTTP/2 frames its own end (GOAWAY), so a transport end without close_notify is an end,
  // not an attack on the byte stream.
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify_depth(ctx, kMaxVerifyDepth);
  SSL_CTX_set_alpn_select_cb(ctx, dp::tls::alpn_select_h2, nullptr);

  const bool in_memory = !config.cert_chain_pem.empty();
  const std::string chain_name = in_memory ? "cert_chain (PEM)" : "cert_chain " + config.cert_chain_file;
  const std::string key_name = in_memory ? "private_key (PEM)" : "private_key " + config.private_key_file;
  const std::string bundle_name = in_memory ? "trust_bundle (PEM)" : "trust_bundle " + config.trust_bundle_file;
  if (in_memory) {
    if (!use_chain_pem(ctx, config.cert_chain_pem)) return bad(chain_name);
    if (!use_key_pem(ctx, config.private_key_pem)) return bad(key_name);
  } else {
    if (SSL_CTX_use_certificate_chain_file(ctx, config.cert_chain_file.c_str()) != 1)
      return bad(chain_name);
    if (SSL_CTX_use_PrivateKey_file(ctx, config.private_key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return bad(key_name);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return bad("private_key does not match cert_chain");
  EVP_PKEY* key = SSL_CTX_get0_privatekey(ctx);
  char group[64] = {};
  size_t group_len = 0;
  if (!EVP_PKEY_is_a(key, "EC") ||
      EVP_PKEY_get_group_name(key, group, sizeof group, &group_len) != 1 ||
      std::strcmp(group, "prime256v1") != 0) {
    error = key_name + ": not an ECDSA P-256 key";
    return nullptr;
  }
  if (in_memory ? !add_roots_pem(ctx, config.trust_bundle_pem)
                : SSL_CTX_load_verify_file(ctx, config.trust_bundle_file.c_str()) != 1)
    return bad(bundle_name);
  std::string own_id;
  for (const std::string& id : spiffe_ids_of(SSL_CTX_get0_certificate(ctx))) {
    SpiffeId parsed;
    if (parse_spiffe_id(id, parsed) && parsed.trust_domain == config.trust_domain) {
      own_id = id;
      break;
    }
  }
  if (own_id.empty()) {
    error = chain_name + ": no SPIFFE id in trust domain " + config.trust_domain;
    return nullptr;
  }
  return std::make_unique<dp::tls::Context>(owned.release(), config.trust_domain, std::move(own_id));
}

}  // namespace meshgate::ctl
