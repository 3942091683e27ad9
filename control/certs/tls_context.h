// Building the TLS contexts of HBONE's mutual TLS 1.3 (docs/HBONE.md): one SSL_CTX from the
// workload's certificate chain, key and trust bundle, with the mesh's protocol policy.
// Control thread only (or a tool's setup): it reads files, parses PEM and checks the key. The
// built dp::tls::Context is handed to one worker, which only reads it to make sessions
// (dataplane/tls/tls.h). Its own small library (meshgate_tls_context) so that the HBONE tools,
// benchmarks and fuzzer build contexts without linking the rest of the control plane.
#pragma once

#include <memory>
#include <string>

#include "dataplane/tls/tls.h"

namespace meshgate::ctl {

// TLS 1.3 AES-GCM suites only (no ChaCha20), the order ztunnel prefers.
inline constexpr const char* kTlsCipherSuites = "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256";
// Key exchange: P-256 first (the workload keys' curve, so one curve's code is hot), X25519 for
// peers that prefer it.
inline constexpr const char* kTlsGroups = "P-256:X25519";

struct TlsContextConfig {
  std::string cert_chain_file;   // PEM: leaf then intermediates
  std::string private_key_file;  // PEM: an ECDSA P-256 key
  std::string trust_bundle_file; // PEM: one or more mesh roots
  std::string trust_domain = "cluster.local";
  // The same in memory (a certificate from the Istio CA, or files read and checked once):
  // when cert_chain_pem is set, the three *_pem fields are used instead of the files.
  std::string cert_chain_pem;
  std::string private_key_pem;
  std::string trust_bundle_pem;
};

// nullptr with `error` set when a file is unreadable, the key is not P-256, the key does not
// match the leaf, or the leaf carries no SPIFFE id in `trust_domain`.
std::unique_ptr<dp::tls::Context> create_tls_context(const TlsContextConfig& config,
                                                     std::string& error);

}  // namespace meshgate::ctl
