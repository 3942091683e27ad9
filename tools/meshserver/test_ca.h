// A test Istio CA (istio.v1.auth.IstioCertificateService/CreateCertificate) for tests and demos:
// signs a P-256 CSR carrying one SPIFFE URI SAN with a CA certificate and key from files (e.g.
// tools/mkpki's intermediate), for the requested lifetime (capped), and answers
// [leaf, signing CA, root(s)] with the root last, as istiod does. Checks the bearer token when
// one is required. Not a real CA: it signs whatever identity the CSR asks for.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "control/common/result.h"
#include "security/v1alpha1/ca.grpc.pb.h"

namespace meshgate::tools {

struct TestCaOptions {
  std::string cert_file;   // the signing CA certificate
  std::string key_file;    // its key
  std::string roots_file;  // the root(s), sent last; "" when the signing CA is the root
  std::string token;       // required "authorization: Bearer <token>"; "" = not checked
  int64_t max_ttl_s = 86400;
};

class TestCa final : public istio::v1::auth::IstioCertificateService::Service {
 public:
  static ctl::Result<std::unique_ptr<TestCa>> create(const TestCaOptions& opt);
  ~TestCa() override;

  grpc::Status CreateCertificate(grpc::ServerContext* ctx,
                                 const istio::v1::auth::IstioCertificateRequest* req,
                                 istio::v1::auth::IstioCertificateResponse* resp) override;

  // While false, every request fails with UNAVAILABLE (a CA outage).
  void set_available(bool on) { available_.store(on); }
  uint64_t issued() const { return issued_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  TestCa() = default;
  TestCaOptions opt_;
  std::string ca_pem_, roots_pem_;
  void* ca_cert_ = nullptr;  // X509*
  void* ca_key_ = nullptr;   // EVP_PKEY*
  std::atomic<bool> available_{true};
  std::atomic<uint64_t> issued_{0}, refused_{0}, serial_{1};
};

}  // namespace meshgate::tools
