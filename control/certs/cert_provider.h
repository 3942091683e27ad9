// The gateway's own certificate (as Istio issues them: P-256, 24 h, rotated at half-life), from the
// [hbone] files (reloaded when they change) or from the Istio CA (CreateCertificate with a
// P-256 CSR for [hbone] identity and the bearer token, renewed at half-life; on failure retried
// with backoff from 500 ms to 150 s while the old certificate is kept). A thread of its own does
// the waiting and the gRPC calls; the control thread takes each new certificate with poll().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/certs/ca_cert.h"
#include "control/common/result.h"
#include "control/config/config.h"

namespace meshgate::ctl {
namespace mesh {
class FileWatch;
}

struct CertCounters {
  std::atomic<uint64_t> issued{0};          // certificates taken (first and renewals, or reloads)
  std::atomic<uint64_t> failures{0};        // CA requests or file reloads that failed
  std::atomic<int64_t> not_after_unix{0};   // expiry of the certificate in use (0: none)
  std::atomic<int64_t> next_renewal_unix{0};  // CA: when the next request is due
};

struct CaOptions {
  std::string address;
  bool tls = true;
  std::string ca_file;     // roots verifying the CA's server certificate ("" = system roots)
  std::string token_file;  // "authorization: Bearer <token>", read for every request
  std::string cluster_id;
  std::string identity;    // the SPIFFE id requested
  uint32_t ttl_s = 86400;
  // Retry backoff after a failure (as Istio's CA clients: 500 ms doubling to 150 s).
  uint32_t backoff_min_ms = 500;
  uint32_t backoff_max_ms = 150000;
};

// One CreateCertificate call: a fresh key and CSR, the answer checked (bundle_from_ca_response).
Result<CertBundle> request_certificate(const CaOptions& o);

class CertProvider {
 public:
  // For [hbone]: the CA when ca_address is set, else the files when cert_chain is set; nullptr
  // when neither is configured.
  static std::unique_ptr<CertProvider> create(const Config& cfg);
  static std::unique_ptr<CertProvider> for_ca(CaOptions o);
  static std::unique_ptr<CertProvider> for_files(std::string chain, std::string key,
                                                 std::string roots);
  ~CertProvider();
  CertProvider(const CertProvider&) = delete;
  CertProvider& operator=(const CertProvider&) = delete;

  // Files: loads them now (false with the error logged when they are unusable: the gateway runs
  // without a certificate until a valid set appears) and watches them. CA: starts requesting.
  bool start();
  void stop();
  // Control thread: a certificate newer than the last one taken, else nullopt.
  std::optional<CertBundle> poll();
  const CertCounters& counters() const { return counters_; }
  bool from_ca() const { return !ca_.address.empty(); }

 private:
  CertProvider() = default;
  void run_ca();
  void run_files();
  bool load_files(bool initial);
  void offer(CertBundle b);
  // Waits up to `ms` or until stop(); false when stopping.
  bool sleep_ms(int64_t ms);

  CaOptions ca_;
  std::string chain_file_, key_file_, roots_file_;
  std::string loaded_;  // the PEMs last taken from the files (chain + key + roots)
  std::vector<std::unique_ptr<mesh::FileWatch>> watches_;  // the files' directories
  CertCounters counters_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::optional<CertBundle> pending_;  // guarded by mu_
};

}  // namespace meshgate::ctl
