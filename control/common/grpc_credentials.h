// Channel credentials for the control plane's gRPC clients (xDS, Istio CA): TLS with the given
// roots ("" = gRPC's default roots; no client certificate), or plaintext for tests.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace meshgate::ctl {

inline std::shared_ptr<grpc::ChannelCredentials> channel_credentials(bool tls,
                                                                     const std::string& roots_pem) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = roots_pem;
  return grpc::SslCredentials(ssl);
}

}  // namespace meshgate::ctl
