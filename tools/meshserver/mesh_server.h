// A small Istio workload API server for tests and demos: serves a MeshModel over gRPC delta ADS
// (envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources) with the real
// type URLs, per-resource versions (a hash of the resource, stable across restarts) and nonces.
// Wildcard subscriptions only; honours initial_resource_versions (unchanged resources are not
// re-sent, resources the client holds that are gone are removed), pushes every model change to
// every stream, records ACKs / NACKs and what each client sent (for tests). Optional TLS and a
// required bearer token / clusterid.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/common/result.h"
#include "control/mesh/mesh_model.h"

namespace meshgate::tools {

class TestCa;

struct MeshServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 = pick one (start() returns it)
  std::string cert_file;               // PEM; TLS when cert_file and key_file are set
  std::string key_file;
  std::string token;       // required "authorization: Bearer <token>"; "" = not checked
  std::string cluster_id;  // required "clusterid" header; "" = not checked
  // A test Istio CA on the same port (CreateCertificate) when ca_cert_file is set.
  std::string ca_cert_file;
  std::string ca_key_file;
  std::string ca_roots_file;
  int64_t ca_max_ttl_s = 86400;
  // Ends a stream (cancelled) right after it records a NACK, as a server does whose receive
  // limit the NACK exceeded: the client's reconnect backoff under a NACK loop (tests).
  bool reset_after_nack = false;
};

struct MeshServerEvent {
  enum class Kind { kConnect, kRejected, kSubscribe, kPush, kAck, kNack, kDisconnect };
  Kind kind;
  std::string type_url;
  std::string nonce;
  std::string error_detail;   // kNack: error_detail.message; kRejected: why
  std::string node_id;        // kSubscribe
  std::string authorization;  // kConnect / kRejected: the header as received
  std::string cluster_id;     // kConnect / kRejected
  std::map<std::string, std::string> initial_versions;  // kSubscribe
  std::map<std::string, std::string> node_metadata;     // kSubscribe
  std::vector<std::string> names;    // kPush: resources sent
  std::vector<std::string> removed;  // kPush: removals sent
  std::string str() const;           // one key=value line
};

class MeshServer {
 public:
  explicit MeshServer(MeshServerOptions opt);
  ~MeshServer();
  MeshServer(const MeshServer&) = delete;
  MeshServer& operator=(const MeshServer&) = delete;

  // Starts serving `model`; returns the bound port.
  ctl::Result<int> start(const ctl::mesh::MeshModel& model);
  // Cancels every stream and stops; idempotent.
  void stop();
  // Replaces the served model and pushes the differences to every subscribed stream.
  void set_model(const ctl::mesh::MeshModel& model);

  // Called for every event on the stream's thread (e.g. to log); set before start().
  void on_event(std::function<void(const MeshServerEvent&)> fn) { on_event_ = std::move(fn); }
  std::vector<MeshServerEvent> events() const;
  // Blocks up to timeout_ms until an event satisfies `pred`; returns it (or nullopt-like false).
  bool wait_event(const std::function<bool(const MeshServerEvent&)>& pred, int timeout_ms,
                  MeshServerEvent* out = nullptr) const;

  // The test CA (null without ca_cert_file); valid while started.
  TestCa* ca() const { return ca_.get(); }

  class Impl;

 private:
  std::unique_ptr<TestCa> ca_;
  MeshServerOptions opt_;
  std::function<void(const MeshServerEvent&)> on_event_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshgate::tools
