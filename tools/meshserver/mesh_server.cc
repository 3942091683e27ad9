#include "tools/meshserver/mesh_server.h"
#include "tools/meshserver/test_ca.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <deque>
#include <thread>

#include "control/mesh/file_watch.h"
#include "control/mesh/mesh_proto.h"
#include "envoy/service/discovery/v3/ads.grpc.pb.h"

namespace meshgate::tools {
namespace {

using envoy::service::discovery::v3::AggregatedDiscoveryService;
using envoy::service::discovery::v3::DeltaDiscoveryRequest;
using envoy::service::discovery::v3::DeltaDiscoveryResponse;
using envoy::service::discovery::v3::Resource;
namespace mesh = ctl::mesh;

constexpr const char* kTypes[] = {mesh::kAddressTypeUrl, mesh::kAuthorizationTypeUrl};

// Deterministic bytes of a message (map order fixed), so versions are stable across restarts.
std::string stable_bytes(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream s(&out);
    google::protobuf::io::CodedOutputStream c(&s);
    c.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&c);
  }
  return out;
}

// FNV-1a 64 of the resource: equal content, equal version.
std::string version_of(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

struct ResourceSet {
  std::map<std::string, Resource> by_type[2];
};

std::shared_ptr<const ResourceSet> resources_of(const mesh::MeshModel& m) {
  auto set = std::make_shared<ResourceSet>();
  auto add = [&](size_t type, const std::string& name, const google::protobuf::Message& msg) {
    Resource r;
    r.set_name(name);
    r.mutable_resource()->set_type_url(kTypes[type]);
    r.mutable_resource()->set_value(stable_bytes(msg));
    r.set_version(version_of(r.resource().value()));
    set->by_type[type].emplace(name, std::move(r));
  };
  for (const auto& [uid, w] : m.workloads) {
    istio::workload::Address a;
    *a.mutable_workload() = mesh::workload_to_proto(w);
    add(0, uid, a);
  }
  for (const auto& [key, s] : m.services) {
    istio::workload::Address a;
    *a.mutable_service() = mesh::service_to_proto(s);
    add(0, key, a);
  }
  for (const auto& [key, p] : m.policies) add(1, key, mesh::policy_to_proto(p));
  return set;
}

std::string kind_name(MeshServerEvent::Kind k) {
  switch (k) {
    case MeshServerEvent::Kind::kConnect: return "connect";
    case MeshServerEvent::Kind::kRejected: return "rejected";
    case MeshServerEvent::Kind::kSubscribe: return "subscribe";
    case MeshServerEvent::Kind::kPush: return "push";
    case MeshServerEvent::Kind::kAck: return "ack";
    case MeshServerEvent::Kind::kNack: return "nack";
    case MeshServerEvent::Kind::kDisconnect: return "disconnect";
  }
  return "?";
}

std::string short_type(const std::string& t) {
  return t == mesh::kAddressTypeUrl ? "address" : t == mesh::kAuthorizationTypeUrl ? "authorization" : t;
}

}  // namespace

std::string MeshServerEvent::str() const {
  std::string s = "event=meshserver_" + kind_name(kind);
  if (!type_url.empty()) s += " type=" + short_type(type_url);
  if (!nonce.empty()) s += " nonce=" + nonce;
  if (kind == Kind::kConnect || kind == Kind::kRejected) {
    s += " clusterid=\"" + cluster_id + "\" authorization=" + (authorization.empty() ? "none" : "present");
  }
  if (!node_id.empty()) s += " node=\"" + node_id + "\"";
  if (kind == Kind::kSubscribe) s += " initial_versions=" + std::to_string(initial_versions.size());
  if (kind == Kind::kPush) {
    s += " resources=" + std::to_string(names.size()) + " removed=" + std::to_string(removed.size());
  }
  if (!error_detail.empty()) s += " error=\"" + error_detail + "\"";
  return s;
}

class MeshServer::Impl final : public AggregatedDiscoveryService::Service {
 public:
  Impl(const MeshServerOptions& opt, std::function<void(const MeshServerEvent&)> on_event)
      : opt_(opt), on_event_(std::move(on_event)) {}

  void set(std::shared_ptr<const ResourceSet> set) {
    {
      std::lock_guard lock(mu_);
      set_ = std::move(set);
      ++generation_;
    }
    cv_.notify_all();
  }

  void record(MeshServerEvent e) {
    if (on_event_) on_event_(e);
    {
      std::lock_guard lock(events_mu_);
      events_.push_back(std::move(e));
    }
    events_cv_.notify_all();
  }

  grpc::Status DeltaAggregatedResources(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<DeltaDiscoveryResponse, DeltaDiscoveryRequest>* stream) override {
    MeshServerEvent hello{MeshServerEvent::Kind::kConnect};
    for (const auto& [k, v] : ctx->client_metadata()) {
      if (k == "authorization") hello.authorization.assign(v.data(), v.size());
      if (k == "clusterid") hello.cluster_id.assign(v.data(), v.size());
    }
    if (!opt_.token.empty() && hello.authorization != "Bearer " + opt_.token) {
      hello.kind = MeshServerEvent::Kind::kRejected;
      hello.error_detail = "missing or wrong bearer token";
      record(hello);
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, hello.error_detail);
    }
    if (!opt_.cluster_id.empty() && hello.cluster_id != opt_.cluster_id) {
      hello.kind = MeshServerEvent::Kind::kRejected;
      hello.error_detail = "clusterid must be " + opt_.cluster_id;
      record(hello);
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, hello.error_detail);
    }
    record(hello);

    std::deque<DeltaDiscoveryRequest> queue;
    bool done = false;
    std::thread reader([&] {
      DeltaDiscoveryRequest r;
      while (stream->Read(&r)) {
        std::lock_guard lock(mu_);
        queue.push_back(r);
        cv_.notify_all();
      }
      std::lock_guard lock(mu_);
      done = true;
      cv_.notify_all();
    });

    bool subscribed[2] = {false, false};
    std::map<std::string, std::string> client[2];  // what the client holds: name -> version
    uint64_t seen = 0;
    bool reset = false;
    std::shared_ptr<const ResourceSet> set;
    // Sends what differs between `set` and what the client holds (always, when `force`).
    auto push = [&](size_t type, bool force) {
      DeltaDiscoveryResponse resp;
      resp.set_type_url(kTypes[type]);
      MeshServerEvent ev{MeshServerEvent::Kind::kPush};
      ev.type_url = kTypes[type];
      for (const auto& [name, r] : set->by_type[type]) {
        auto it = client[type].find(name);
        if (it != client[type].end() && it->second == r.version()) continue;
        *resp.add_resources() = r;
        client[type][name] = r.version();
        ev.names.push_back(name);
      }
      for (auto it = client[type].begin(); it != client[type].end();) {
        if (set->by_type[type].contains(it->first)) {
          ++it;
          continue;
        }
        resp.add_removed_resources(it->first);
        ev.removed.push_back(it->first);
        it = client[type].erase(it);
      }
      if (!force && resp.resources_size() == 0 && resp.removed_resources_size() == 0) return;
      resp.set_nonce(std::to_string(++nonce_));
      resp.set_system_version_info(std::to_string(seen));
      ev.nonce = resp.nonce();
      record(ev);
      stream->Write(resp);
    };

    for (;;) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return !queue.empty() || done || stopping_ ||
               (generation_ != seen && (subscribed[0] || subscribed[1]));
      });
      if (done || stopping_) break;
      if (!queue.empty()) {
        DeltaDiscoveryRequest req = std::move(queue.front());
        queue.pop_front();
        // Only a subscription pushes (every subscribed type) here; an ACK or NACK must not mark
        // a newer generation as seen, or that change would never be pushed.
        const uint64_t gen = generation_;
        std::shared_ptr<const ResourceSet> cur = set_;
        lock.unlock();
        size_t type = 0;
        while (type < 2 && req.type_url() != kTypes[type]) ++type;
        if (type == 2) continue;  // not a type this server serves
        if (req.response_nonce().empty()) {
          MeshServerEvent ev{MeshServerEvent::Kind::kSubscribe};
          ev.type_url = req.type_url();
          ev.node_id = req.node().id();
          for (const auto& [k, v] : req.node().metadata().fields()) {
            ev.node_metadata[k] = v.string_value();
          }
          for (const auto& [k, v] : req.initial_resource_versions()) ev.initial_versions[k] = v;
          record(ev);
          seen = gen;
          set = std::move(cur);
          const bool first = !subscribed[type];
          if (first) {
            subscribed[type] = true;
            client[type] = ev.initial_versions;
          }
          // Other subscribed types may also be behind the current set.
          push(type, first);
          for (size_t o = 0; o < 2; ++o) {
            if (o != type && subscribed[o]) push(o, false);
          }
        } else {
          MeshServerEvent ev{req.has_error_detail() ? MeshServerEvent::Kind::kNack
                                                    : MeshServerEvent::Kind::kAck};
          ev.type_url = req.type_url();
          ev.nonce = req.response_nonce();
          if (req.has_error_detail()) ev.error_detail = req.error_detail().message();
          record(ev);
          if (req.has_error_detail() && opt_.reset_after_nack) {
            reset = true;
            break;
          }
        }
        continue;
      }
      seen = generation_;
      set = set_;
      lock.unlock();
      for (size_t t = 0; t < 2; ++t) {
        if (subscribed[t]) push(t, false);
      }
    }
    if (stopping_ || reset) ctx->TryCancel();
    reader.join();
    record(MeshServerEvent{MeshServerEvent::Kind::kDisconnect});
    return grpc::Status::OK;
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }

  const MeshServerOptions& opt_;
  std::function<void(const MeshServerEvent&)> on_event_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const ResourceSet> set_;
  uint64_t generation_ = 0;
  uint64_t nonce_ = 0;
  bool stopping_ = false;
  mutable std::mutex events_mu_;
  mutable std::condition_variable events_cv_;
  std::vector<MeshServerEvent> events_;
};

MeshServer::MeshServer(MeshServerOptions opt) : opt_(std::move(opt)) {}

MeshServer::~MeshServer() { stop(); }

ctl::Result<int> MeshServer::start(const mesh::MeshModel& model) {
  impl_ = std::make_unique<Impl>(opt_, on_event_);
  impl_->set(resources_of(model));
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (!opt_.cert_file.empty() && !opt_.key_file.empty()) {
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    if (!mesh::read_file(opt_.key_file, ctl::kMaxPemFileBytes, &pair.private_key) ||
        !mesh::read_file(opt_.cert_file, ctl::kMaxPemFileBytes, &pair.cert_chain)) {
      return ctl::Error{"cannot read " + opt_.cert_file + " / " + opt_.key_file};
    }
    ssl.pem_key_cert_pairs.push_back(pair);
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(opt_.listen, creds, &port);
  b.RegisterService(impl_.get());
  if (!opt_.ca_cert_file.empty()) {
    auto ca = TestCa::create(TestCaOptions{opt_.ca_cert_file, opt_.ca_key_file,
                                           opt_.ca_roots_file, opt_.token, opt_.ca_max_ttl_s});
    if (!ca) return ca.error();
    ca_ = std::move(ca.value());
    b.RegisterService(ca_.get());
  }
  impl_->server_ = b.BuildAndStart();
  if (!impl_->server_ || port == 0) {
    impl_.reset();
    return ctl::Error{"cannot listen on " + opt_.listen};
  }
  return port;
}

void MeshServer::stop() {
  if (!impl_) return;
  impl_->stop();
  if (impl_->server_) impl_->server_->Shutdown(std::chrono::system_clock::now());
  impl_->server_.reset();
}

void MeshServer::set_model(const mesh::MeshModel& model) {
  if (impl_) impl_->set(resources_of(model));
}

std::vector<MeshServerEvent> MeshServer::events() const {
  if (!impl_) return {};
  std::lock_guard lock(impl_->events_mu_);
  return impl_->events_;
}

bool MeshServer::wait_event(const std::function<bool(const MeshServerEvent&)>& pred,
                            int timeout_ms, MeshServerEvent* out) const {
  if (!impl_) return false;
  std::unique_lock lock(impl_->events_mu_);
  size_t checked = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    for (; checked < impl_->events_.size(); ++checked) {
      if (pred(impl_->events_[checked])) {
        if (out) *out = impl_->events_[checked];
        return true;
      }
    }
    if (impl_->events_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      for (; checked < impl_->events_.size(); ++checked) {
        if (pred(impl_->events_[checked])) {
          if (out) *out = impl_->events_[checked];
          return true;
        }
      }
      return false;
    }
  }
}

}  // namespace meshgate::tools
