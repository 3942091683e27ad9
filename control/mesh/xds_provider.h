// [mesh] source = "xds": the Istio workload API over gRPC delta ADS, as ztunnel speaks it
// (docs/MESH.md): wildcard subscriptions to istio.workload.Address and
// istio.security.Authorization, ACK / per-resource NACK, removals, reconnect with backoff
// 10 ms -> 15 s carrying initial_resource_versions. The stream runs on the provider's own thread
// (plus gRPC's helper threads), all on the control side.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>


#include "control/config/config.h"
#include "control/mesh/mesh_provider.h"

namespace grpc {
class ClientContext;
}

namespace meshgate::ctl::mesh {

// Backoff and channel settings of the spec (ztunnel's).
inline constexpr uint32_t kXdsInitialBackoffMs = 10;
inline constexpr uint32_t kXdsMaxBackoffMs = 15000;
inline constexpr uint32_t kXdsConnectTimeoutMs = 5000;
inline constexpr uint32_t kXdsKeepaliveTimeMs = 30000;
inline constexpr uint32_t kXdsKeepaliveTimeoutMs = 10000;
inline constexpr int kXdsMaxMessageBytes = 200 << 20;  // 200 MiB max decode

struct XdsOptions {
  std::string address;  // "host:port"
  bool tls = true;      // TLS, server authentication only; false = plaintext (tests)
  std::string ca_file;  // PEM roots verifying the server; "" = the system's roots
  std::string token_file;  // bearer token, re-read at every connect; "" = no authorization header
  std::string cluster_id = "Kubernetes";
  std::string node_id;                             // Node.id
  std::map<std::string, std::string> node_metadata;  // Node.metadata (a Struct of strings)
  uint32_t initial_backoff_ms = kXdsInitialBackoffMs;
  uint32_t max_backoff_ms = kXdsMaxBackoffMs;
};

// Options from [mesh], with the ztunnel-style node identity when node_id is not configured:
// "ztunnel~<INSTANCE_IP>~<POD_NAME>.<POD_NAMESPACE>~<POD_NAMESPACE>.svc.cluster.local", taken
// from the environment (Kubernetes downward API names) or, outside a pod, from the first port
// address, the host name and "istio-system". Metadata: NAME, NAMESPACE, INSTANCE_IPS, NODE_NAME.
XdsOptions xds_options_from_config(const Config& cfg);

// Spec §2 "Backoff": whether a stream that ended with this gRPC status reconnects after the
// initial backoff instead of doubling it: a clean end (OK), Unknown, Cancelled, DeadlineExceeded,
// and Unavailable with "transport is closing" / "received prior goaway" (MaxConnectionAge
// rotation).
bool xds_quick_reconnect(int grpc_code, const std::string& message);

// meshgate_xds_* metrics. Written by the provider thread, read by anyone (relaxed atomics).
struct XdsCounters {
  std::atomic<uint64_t> connects{0};          // streams that got a first response
  std::atomic<uint64_t> connect_failures{0};  // attempts that ended before any response
  std::atomic<uint64_t> disconnects{0};       // connected streams that ended
  std::atomic<uint64_t> responses_address{0};
  std::atomic<uint64_t> responses_authorization{0};
  std::atomic<uint64_t> acks{0};
  std::atomic<uint64_t> nacks{0};
  std::atomic<uint64_t> resources_rejected{0};  // resources named in NACKs
  std::atomic<uint64_t> resources_applied{0};   // added or updated
  std::atomic<uint64_t> resources_removed{0};
  std::atomic<uint64_t> workloads{0};  // held now, by type
  std::atomic<uint64_t> services{0};
  std::atomic<uint64_t> authorizations{0};
  std::atomic<int64_t> last_sync_unix_ms{0};  // last response applied (wall clock)
  std::atomic<uint64_t> backoff_ms{0};        // the wait before the next attempt
  std::atomic<bool> connected{false};
  std::atomic<bool> synced{false};
};

// A plain copy of the counters, for /metrics.
struct XdsCountersView {
  uint64_t connects = 0, connect_failures = 0, disconnects = 0;
  uint64_t responses_address = 0, responses_authorization = 0;
  uint64_t acks = 0, nacks = 0, resources_rejected = 0, resources_applied = 0,
           resources_removed = 0;
  uint64_t workloads = 0, services = 0, authorizations = 0;
  int64_t last_sync_unix_ms = 0;
  uint64_t backoff_ms = 0;
  bool connected = false, synced = false;
  static XdsCountersView of(const XdsCounters& c);
};

class XdsProvider : public MeshProvider {
 public:
  explicit XdsProvider(XdsOptions opt);
  ~XdsProvider() override;
  Result<bool> start() override;
  void stop() override;
  const XdsCounters& counters() const { return counters_; }
  const XdsOptions& options() const { return opt_; }

 private:
  struct StreamEnd;
  class State;
  void run();
  StreamEnd run_stream();

  XdsOptions opt_;
  std::string ca_pem_;
  std::unique_ptr<State> state_;
  XdsCounters counters_;
  std::thread thread_;
  std::mutex mu_;  // guards ctx_ and stopping_ against stop()
  std::condition_variable cv_;
  bool stopping_ = false;
  grpc::ClientContext* ctx_ = nullptr;
};

}  // namespace meshgate::ctl::mesh
