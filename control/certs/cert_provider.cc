#include "control/certs/cert_provider.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <set>
#include <vector>

#include "control/common/file_read.h"
#include "control/common/grpc_credentials.h"
#include "control/common/log.h"
#include "control/mesh/file_watch.h"
#include "security/v1alpha1/ca.grpc.pb.h"

namespace meshgate::ctl {
namespace {

constexpr int kCaDeadlineMs = 10000;

int64_t now_unix() { return int64_t(std::time(nullptr)); }

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

Result<CertBundle> request_certificate(const CaOptions& o) {
  auto kc = make_key_and_csr(o.identity);
  if (!kc) return kc.error();
  std::string roots;
  std::string why;
  if (o.tls && !o.ca_file.empty() && !mesh::read_file(o.ca_file, kMaxPemFileBytes, &roots, &why)) {
    return Error{"cannot read " + why};
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(o.address, channel_credentials(o.tls, roots), args);
  auto stub = istio::v1::auth::IstioCertificateService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(kCaDeadlineMs));
  if (!o.token_file.empty()) {
    std::string token;
    if (!mesh::read_token_file(o.token_file, &token, &why)) return Error{"cannot read " + why};
    ctx.AddMetadata("authorization", "Bearer " + token);
  }
  if (!o.cluster_id.empty()) ctx.AddMetadata("clusterid", o.cluster_id);
  istio::v1::auth::IstioCertificateRequest req;
  req.set_csr(kc->csr_pem);
  req.set_validity_duration(int64_t(o.ttl_s));
  istio::v1::auth::IstioCertificateResponse resp;
  const grpc::Status st = stub->CreateCertificate(&ctx, req, &resp);
  if (!st.ok()) {
    return Error{"CreateCertificate at " + o.address + ": code " +
                 std::to_string(int(st.error_code())) + ": " + st.error_message()};
  }
  const std::vector<std::string> chain(resp.cert_chain().begin(), resp.cert_chain().end());
  return bundle_from_ca_response(chain, kc->key_pem, o.identity, "CreateCertificate at " + o.address);
}

std::unique_ptr<CertProvider> CertProvider::create(const Config& cfg) {
  const HboneConfig& h = cfg.hbone;
  if (!h.ca_address.empty()) {
    CaOptions o;
    o.address = h.ca_address;
    o.tls = h.ca_tls.value_or(cfg.mesh.tls);
    o.ca_file = h.ca_file.empty() ? cfg.mesh.ca_file : h.ca_file;
    o.token_file = h.token_file.empty() ? cfg.mesh.token_file : h.token_file;
    o.cluster_id = h.cluster_id.empty() ? cfg.mesh.cluster_id : h.cluster_id;
    o.identity = h.identity;
    o.ttl_s = h.cert_ttl;
    return for_ca(std::move(o));
  }
  if (!h.cert_chain.empty()) {
    return for_files(h.cert_chain, h.private_key,
                     h.trust_bundle.empty() ? h.cert_chain : h.trust_bundle);
  }
  return nullptr;
}

std::unique_ptr<CertProvider> CertProvider::for_ca(CaOptions o) {
  std::unique_ptr<CertProvider> p(new CertProvider());
  p->ca_ = std::move(o);
  return p;
}

std::unique_ptr<CertProvider> CertProvider::for_files(std::string chain, std::string key,
                                                      std::string roots) {
  std::unique_ptr<CertProvider> p(new CertProvider());
  p->chain_file_ = std::move(chain);
  p->key_file_ = std::move(key);
  p->roots_file_ = std::move(roots);
  return p;
}

CertProvider::~CertProvider() { stop(); }

bool CertProvider::start() {
  if (from_ca()) {
    log(LogLevel::kInfo, "cert_ca_start", "address=%s tls=%s identity=%s ttl_s=%u",
        ca_.address.c_str(), ca_.tls ? "true" : "false", ca_.identity.c_str(), ca_.ttl_s);
    thread_ = std::thread([this] { run_ca(); });
    return true;
  }
  // Watches first, then the first load: a change in between is seen, not lost.
  std::set<std::string> dirs = {dir_of(chain_file_), dir_of(key_file_), dir_of(roots_file_)};
  for (const std::string& d : dirs) {
    auto w = std::make_unique<mesh::FileWatch>();
    if (!w->open(d + "/.")) {
      log(LogLevel::kWarn, "cert_watch_failed", "dir=\"%s\"", d.c_str());
      continue;
    }
    watches_.push_back(std::move(w));
  }
  const bool ok = load_files(true);
  thread_ = std::thread([this] { run_files(); });
  return ok;
}

void CertProvider::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<CertBundle> CertProvider::poll() {
  std::lock_guard lock(mu_);
  std::optional<CertBundle> out = std::move(pending_);
  pending_.reset();
  return out;
}

void CertProvider::offer(CertBundle b) {
  counters_.issued.fetch_add(1, std::memory_order_relaxed);
  counters_.not_after_unix.store(b.not_after_unix, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  pending_ = std::move(b);
}

bool CertProvider::sleep_ms(int64_t ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(ms, 0)),
               [this] { return stopping_; });
  return !stopping_;
}

void CertProvider::run_ca() {
  uint32_t backoff = ca_.backoff_min_ms;
  int64_t held_not_after = 0;  // expiry of the certificate held (kept while renewal fails)
  bool expired_logged = false;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    auto r = request_certificate(ca_);
    if (r) {
      // Renew at half-life (Istio rotates workload certificates so), measured from now if the clocks disagree.
      const int64_t life = std::max<int64_t>(r->not_after_unix - r->not_before_unix, 2);
      const int64_t now = now_unix();
      const int64_t renew_at = std::max(now + 1, std::min(r->not_before_unix, now) + life / 2);
      log(LogLevel::kInfo, "cert_issued", "identity=%s serial=%s not_after=%s renew_in_s=%ld",
          r->identity.c_str(), r->info.front().serial.c_str(),
          unix_to_rfc3339(r->not_after_unix).c_str(), long(renew_at - now));
      held_not_after = r->not_after_unix;
      expired_logged = false;
      counters_.next_renewal_unix.store(renew_at, std::memory_order_relaxed);
      offer(std::move(r.value()));
      backoff = ca_.backoff_min_ms;
      if (!sleep_ms((renew_at - now) * 1000)) return;
      continue;
    }
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    const int64_t now = now_unix();
    if (held_not_after != 0 && now >= held_not_after && !expired_logged) {
      log(LogLevel::kError, "cert_expired", "identity=%s not_after=%s", ca_.identity.c_str(),
          unix_to_rfc3339(held_not_after).c_str());
      expired_logged = true;
    }
    log(LogLevel::kWarn, "cert_request_failed", "error=\"%s\" retry_ms=%u keeping=%s",
        r.error().message.c_str(), backoff, held_not_after > now ? "true" : "false");
    counters_.next_renewal_unix.store(now + backoff / 1000, std::memory_order_relaxed);
    if (!sleep_ms(backoff)) return;
    backoff = std::min(backoff * 2, ca_.backoff_max_ms);
  }
}

bool CertProvider::load_files(bool initial) {
  std::string chain, key, roots, why;
  if (!mesh::read_file(chain_file_, kMaxPemFileBytes, &chain, &why) ||
      !mesh::read_file(key_file_, kMaxPemFileBytes, &key, &why) ||
      !mesh::read_file(roots_file_, kMaxPemFileBytes, &roots, &why)) {
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    log(LogLevel::kWarn, "cert_files_unreadable", "cert_chain=\"%s\" private_key=\"%s\" "
        "trust_bundle=\"%s\" error=\"%s\"", chain_file_.c_str(), key_file_.c_str(),
        roots_file_.c_str(), why.c_str());
    return false;
  }
  const std::string all = chain + '\0' + key + '\0' + roots;
  if (!initial && all == loaded_) return true;  // another file in the directory changed
  auto b = bundle_from_files(chain_file_, key_file_, roots_file_);
  if (!b) {
    // A half-written set (the chain renamed in before its key) fails here; the next change
    // event brings the rest. The certificate in use stays.
    counters_.failures.fetch_add(1, std::memory_order_relaxed);
    log(LogLevel::kWarn, "cert_files_invalid", "error=\"%s\" keeping=%s",
        b.error().message.c_str(), loaded_.empty() ? "none" : "the previous certificate");
    return false;
  }
  loaded_ = all;
  log(LogLevel::kInfo, initial ? "cert_loaded" : "cert_reloaded",
      "identity=%s serial=%s not_after=%s", b->identity.c_str(), b->info.front().serial.c_str(),
      unix_to_rfc3339(b->not_after_unix).c_str());
  offer(std::move(b.value()));
  return true;
}

void CertProvider::run_files() {
  auto& watches = watches_;
  for (;;) {
    bool changed = false;
    for (auto& w : watches) changed |= w->wait(watches.size() > 1 ? 100 : 200);
    if (watches.empty() && !sleep_ms(1000)) return;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (changed) load_files(false);
  }
}

}  // namespace meshgate::ctl
