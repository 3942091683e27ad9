#include "control/mesh/xds_provider.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <set>

#include "control/common/file_read.h"
#include "control/common/grpc_credentials.h"
#include "control/common/log.h"
#include "control/mesh/file_watch.h"
#include "control/mesh/mesh_proto.h"
#include "envoy/service/discovery/v3/ads.grpc.pb.h"

namespace meshgate::ctl::mesh {
namespace {

using envoy::service::discovery::v3::AggregatedDiscoveryService;
using envoy::service::discovery::v3::DeltaDiscoveryRequest;
using envoy::service::discovery::v3::DeltaDiscoveryResponse;

// The two wildcard subscriptions, in the order ztunnel opens them.
constexpr const char* kTypes[] = {kAddressTypeUrl, kAuthorizationTypeUrl};
constexpr size_t kAddress = 0;
constexpr size_t kAuthorization = 1;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// `s` cut to at most `max` bytes, ending in "..." when cut, never inside a UTF-8 sequence
// (error_detail.message is a proto3 string: it must stay valid UTF-8).
std::string cut(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t n = max - 3;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

// Room kept for the "; and N more (M rejected)" tail.
constexpr size_t kNackTailBytes = 64;

}  // namespace

void NackDetail::add(std::string_view name, std::string_view why) {
  ++count_;
  if (full_) return;
  const std::string entry =
      cut(name, kXdsNackNameMaxBytes) + ": " + cut(why, kXdsNackReasonMaxBytes);
  const size_t sep = named_.empty() ? 0 : 2;
  if (shown_ == kXdsNackMaxNamed ||
      named_.size() + sep + entry.size() > kXdsNackDetailMaxBytes - kNackTailBytes) {
    full_ = true;
    return;
  }
  if (sep) named_ += "; ";
  named_ += entry;
  ++shown_;
}

std::string NackDetail::message() const {
  if (shown_ == count_) return named_;
  return named_ + "; and " + std::to_string(count_ - shown_) + " more (" +
         std::to_string(count_) + " rejected)";
}

// The client's view of the server's resources: the model, and per type the version of every
// resource it holds (sent back as initial_resource_versions after a reconnect). Provider thread.
class XdsProvider::State {
 public:
  DeltaDiscoveryRequest initial_request(size_t type, const envoy::config::core::v3::Node& node) {
    DeltaDiscoveryRequest r;
    *r.mutable_node() = node;
    r.set_type_url(kTypes[type]);
    // Empty resource_names_subscribe on the first request of a stream = wildcard.
    for (const auto& [name, version] : versions_[type]) {
      (*r.mutable_initial_resource_versions())[name] = version;
    }
    return r;
  }

  // Applies one response: every resource that decodes and validates is stored, the others are
  // named in the NACK's error_detail (NackDetail: bounded). Returns the ACK or NACK.
  DeltaDiscoveryRequest apply(const DeltaDiscoveryResponse& resp, size_t type, bool* changed,
                              size_t* rejected) {
    DeltaDiscoveryRequest req;
    req.set_type_url(resp.type_url());
    req.set_response_nonce(resp.nonce());
    NackDetail errors;
    auto reject = [&](const std::string& name, const std::string& why) { errors.add(name, why); };
    for (const auto& r : resp.resources()) {
      const std::string& name = r.name();
      if (!r.has_resource()) {
        reject(name, "no resource");
        continue;
      }
      if (r.resource().type_url() != kTypes[type]) {
        reject(name, "resource of type " + r.resource().type_url() + " in a " + kTypes[type] +
                         " response");
        continue;
      }
      if (type == kAddress) {
        istio::workload::Address a;
        if (!r.resource().UnpackTo(&a)) {
          reject(name, "cannot decode istio.workload.Address");
          continue;
        }
        if (a.has_workload()) {
          auto w = workload_from_proto(a.workload());
          if (!w) {
            reject(name, w.error().message);
            continue;
          }
          if (w->uid != name) {
            reject(name, "resource name does not match the workload uid \"" + w->uid + "\"");
            continue;
          }
          // A name is either a workload or a service, never both.
          model_.services.erase(name);
          auto& slot = model_.workloads[name];
          *changed |= !(slot == *w);
          slot = std::move(w.value());
        } else if (a.has_service()) {
          auto s = service_from_proto(a.service());
          if (!s) {
            reject(name, s.error().message);
            continue;
          }
          if (s->key() != name) {
            reject(name, "resource name does not match the service's namespace/hostname \"" +
                             s->key() + "\"");
            continue;
          }
          model_.workloads.erase(name);
          auto& slot = model_.services[name];
          *changed |= !(slot == *s);
          slot = std::move(s.value());
        } else {
          reject(name, "address with neither workload nor service");
          continue;
        }
      } else {
        istio::security::Authorization a;
        if (!r.resource().UnpackTo(&a)) {
          reject(name, "cannot decode istio.security.Authorization");
          continue;
        }
        auto p = policy_from_proto(a);
        if (!p) {
          reject(name, p.error().message);
          continue;
        }
        if (p->key() != name) {
          reject(name, "resource name does not match the policy's namespace/name \"" + p->key() +
                           "\"");
          continue;
        }
        auto& slot = model_.policies[name];
        *changed |= !(slot == *p);
        slot = std::move(p.value());
      }
      versions_[type][name] = r.version();
      ++applied_;
    }
    for (const std::string& name : resp.removed_resources()) {
      size_t n = 0;
      if (type == kAddress) {
        n += model_.workloads.erase(name);
        n += model_.services.erase(name);
      } else {
        n += model_.policies.erase(name);
      }
      versions_[type].erase(name);
      *changed |= n > 0;
      removed_ += n;
    }
    *rejected = errors.count();
    if (!errors.empty()) req.mutable_error_detail()->set_message(errors.message());
    got_first_[type] = true;
    return req;
  }

  const MeshModel& model() const { return model_; }
  bool synced() const { return got_first_[kAddress] && got_first_[kAuthorization]; }
  uint64_t applied() const { return applied_; }
  uint64_t removed() const { return removed_; }

 private:
  MeshModel model_;
  std::map<std::string, std::string> versions_[2];
  bool got_first_[2] = {false, false};
  uint64_t applied_ = 0;
  uint64_t removed_ = 0;
};

struct XdsProvider::StreamEnd {
  bool connected = false;
  bool after_nack = false;  // it ended within kXdsNackResetWindowMs of sending a NACK
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
};

bool xds_quick_reconnect(int grpc_code, const std::string& message) {
  switch (grpc::StatusCode(grpc_code)) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return true;
    case grpc::StatusCode::UNAVAILABLE:
      return message.find("transport is closing") != std::string::npos ||
             message.find("received prior goaway") != std::string::npos;
    default: return false;
  }
}

XdsOptions xds_options_from_config(const Config& cfg) {
  XdsOptions o;
  o.address = cfg.mesh.address;
  o.tls = cfg.mesh.tls;
  o.ca_file = cfg.mesh.ca_file;
  o.token_file = cfg.mesh.token_file;
  o.cluster_id = cfg.mesh.cluster_id;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string ip = env("INSTANCE_IP");
  std::string ips = ip;
  for (const auto& p : cfg.ports) {
    for (const auto& a : p.addresses) {
      if (ip.empty() && a.addr.is_v4()) ip = a.addr.str();
      ips += (ips.empty() ? "" : ",") + a.addr.str();
    }
  }
  if (ip.empty()) ip = "127.0.0.1";
  std::string pod = env("POD_NAME");
  if (pod.empty()) pod = host;
  std::string ns = env("POD_NAMESPACE");
  if (ns.empty()) ns = "istio-system";
  std::string node = env("NODE_NAME");
  if (node.empty()) node = host;
  o.node_id = !cfg.mesh.node_id.empty()
                  ? cfg.mesh.node_id
                  : "ztunnel~" + ip + "~" + pod + "." + ns + "~" + ns + ".svc.cluster.local";
  o.node_metadata = {{"NAME", pod}, {"NAMESPACE", ns}, {"INSTANCE_IPS", ips}, {"NODE_NAME", node}};
  return o;
}

XdsCountersView XdsCountersView::of(const XdsCounters& c) {
  XdsCountersView v;
  v.connects = c.connects;
  v.connect_failures = c.connect_failures;
  v.disconnects = c.disconnects;
  v.responses_address = c.responses_address;
  v.responses_authorization = c.responses_authorization;
  v.acks = c.acks;
  v.nacks = c.nacks;
  v.resources_rejected = c.resources_rejected;
  v.resources_applied = c.resources_applied;
  v.resources_removed = c.resources_removed;
  v.workloads = c.workloads;
  v.services = c.services;
  v.authorizations = c.authorizations;
  v.last_sync_unix_ms = c.last_sync_unix_ms;
  v.backoff_ms = c.backoff_ms;
  v.connected = c.connected;
  v.synced = c.synced;
  return v;
}

XdsProvider::XdsProvider(XdsOptions opt) : opt_(std::move(opt)), state_(std::make_unique<State>()) {}

XdsProvider::~XdsProvider() { stop(); }

Result<bool> XdsProvider::start() {
  std::string why;
  if (opt_.tls && !opt_.ca_file.empty() &&
      !read_file(opt_.ca_file, kMaxPemFileBytes, &ca_pem_, &why)) {
    return Error{"cannot read [mesh] ca_file " + why};
  }
  log(LogLevel::kInfo, "xds_start", "address=%s tls=%s node_id=%s cluster_id=%s",
      opt_.address.c_str(), opt_.tls ? "true" : "false", opt_.node_id.c_str(),
      opt_.cluster_id.c_str());
  thread_ = std::thread([this] { run(); });
  return true;
}

void XdsProvider::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (ctx_) ctx_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void XdsProvider::run() {
  uint32_t backoff = opt_.initial_backoff_ms;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const StreamEnd end = run_stream();
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    (end.connected ? counters_.disconnects : counters_.connect_failures)++;
    // Quick ends reconnect at once; everything else doubles the wait up to the cap. A stream
    // that was connected starts the doubling afresh, unless it ended soon after a NACK
    // (kXdsNackResetWindowMs): a server that resets the stream on our NACK would send the same
    // resources again at once, so such ends keep doubling whatever their status.
    const bool after_nack = end.connected && end.after_nack;
    const bool quick = !after_nack && xds_quick_reconnect(int(end.code), end.message);
    if (quick || (end.connected && !after_nack)) backoff = opt_.initial_backoff_ms;
    const uint32_t wait_ms = backoff;
    if (!quick) backoff = std::min(backoff * 2, opt_.max_backoff_ms);
    counters_.backoff_ms = wait_ms;
    log(end.connected ? LogLevel::kWarn : LogLevel::kInfo,
        end.connected ? "xds_disconnected" : "xds_connect_failed",
        "address=%s code=%d message=\"%s\" after_nack=%s retry_ms=%u", opt_.address.c_str(),
        int(end.code), cut(end.message, kXdsNackDetailMaxBytes).c_str(),
        after_nack ? "true" : "false", wait_ms);
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return stopping_; });
  }
}

XdsProvider::StreamEnd XdsProvider::run_stream() {
  StreamEnd end;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kXdsMaxMessageBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kXdsKeepaliveTimeMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kXdsKeepaliveTimeoutMs);
  // gRPC core takes its connect timeout from the minimum reconnect backoff.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kXdsConnectTimeoutMs);
  // Our loop owns the backoff: a fresh channel per attempt, sharing no subchannel (and no
  // subchannel backoff state) with earlier attempts.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel =
      grpc::CreateCustomChannel(opt_.address, channel_credentials(opt_.tls, ca_pem_), args);
  auto stub = AggregatedDiscoveryService::NewStub(channel);

  grpc::ClientContext ctx;
  if (!opt_.token_file.empty()) {
    std::string token;
    std::string why;
    if (read_token_file(opt_.token_file, &token, &why)) {
      ctx.AddMetadata("authorization", "Bearer " + token);
    } else {
      log(LogLevel::kWarn, "xds_token_unreadable", "path=\"%s\" error=\"%s\"",
          opt_.token_file.c_str(), why.c_str());
    }
  }
  ctx.AddMetadata("clusterid", opt_.cluster_id);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return end;
    ctx_ = &ctx;
  }
  envoy::config::core::v3::Node node;
  node.set_id(opt_.node_id);
  for (const auto& [k, v] : opt_.node_metadata) {
    (*node.mutable_metadata()->mutable_fields())[k].set_string_value(v);
  }

  auto stream = stub->DeltaAggregatedResources(&ctx);
  bool ok = true;
  for (size_t t = 0; t < 2 && ok; ++t) ok = stream->Write(state_->initial_request(t, node));
  DeltaDiscoveryResponse resp;
  std::optional<std::chrono::steady_clock::time_point> last_nack;
  while (ok && stream->Read(&resp)) {
    if (!end.connected) {
      end.connected = true;
      counters_.connects++;
      counters_.connected = true;
      log(LogLevel::kInfo, "xds_connected", "address=%s", opt_.address.c_str());
    }
    size_t type = 0;
    while (type < 2 && resp.type_url() != kTypes[type]) ++type;
    DeltaDiscoveryRequest reply;
    bool changed = false;
    size_t rejected = 0;
    if (type == 2) {
      // Not something we subscribed to: NACK it whole, keep the stream.
      reply.set_type_url(resp.type_url());
      reply.set_response_nonce(resp.nonce());
      reply.mutable_error_detail()->set_message("unsubscribed type " +
                                                cut(resp.type_url(), kXdsNackReasonMaxBytes));
      rejected = size_t(resp.resources_size());
    } else {
      (type == kAddress ? counters_.responses_address : counters_.responses_authorization)++;
      const bool was_synced = state_->synced();
      reply = state_->apply(resp, type, &changed, &rejected);
      changed |= state_->synced() != was_synced;
    }
    const bool nack = reply.has_error_detail();
    (nack ? counters_.nacks : counters_.acks)++;
    counters_.resources_rejected += rejected;
    // The type URL and nonce are the server's: cut like the names in the (bounded) detail.
    const std::string type_url = cut(resp.type_url(), kXdsNackReasonMaxBytes);
    const std::string nonce = cut(resp.nonce(), kXdsNackNameMaxBytes);
    if (nack) {
      log(LogLevel::kWarn, "xds_nack", "type=%s nonce=%s rejected=%zu error=\"%s\"",
          type_url.c_str(), nonce.c_str(), rejected, reply.error_detail().message().c_str());
    }
    log(LogLevel::kDebug, "xds_response", "type=%s nonce=%s resources=%d removed=%d %s",
        type_url.c_str(), nonce.c_str(), resp.resources_size(),
        resp.removed_resources_size(), nack ? "nack" : "ack");
    const bool sent = stream->Write(reply);
    if (nack) last_nack = std::chrono::steady_clock::now();
    const MeshModel& m = state_->model();
    counters_.resources_applied = state_->applied();
    counters_.resources_removed = state_->removed();
    counters_.workloads = m.workloads.size();
    counters_.services = m.services.size();
    counters_.authorizations = m.policies.size();
    counters_.last_sync_unix_ms = unix_ms();
    if (changed) {
      counters_.synced = state_->synced();
      deliver(std::make_shared<const MeshModel>(m), state_->synced());
    }
    // A failed write ends the stream; the next Read sees the end.
    if (!sent) break;
  }
  const grpc::Status st = stream->Finish();
  {
    std::lock_guard lock(mu_);
    ctx_ = nullptr;
  }
  counters_.connected = false;
  end.after_nack = last_nack && std::chrono::steady_clock::now() - *last_nack <
                                    std::chrono::milliseconds(kXdsNackResetWindowMs);
  end.code = st.error_code();
  end.message = st.error_message();
  return end;
}

}  // namespace meshgate::ctl::mesh
