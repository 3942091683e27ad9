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
#include <string_view>
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
// A stream that ends this soon after we sent a NACK is taken for one the server reset because
// of it (a NACK over its receive limit, a server that drops clients that NACK): the reconnect
// backs off as after a failure instead of starting again at the initial backoff. A server
// reacts at once; a stream that lived on past this ended for some other reason.
inline constexpr uint32_t kXdsNackResetWindowMs = 5000;

// A NACK's error_detail.message is bounded whatever the response held: a server's gRPC receive
// limit (Istiod's and gRPC's default: 4 MiB) resets a stream whose NACK is larger, and the client
// would reconnect, be sent the same resources and NACK them again. The first rejections are
// named (each name and reason cut to a bounded length), the rest counted.
inline constexpr size_t kXdsNackDetailMaxBytes = 4096;
inline constexpr size_t kXdsNackMaxNamed = 16;
inline constexpr size_t kXdsNackNameMaxBytes = 200;
inline constexpr size_t kXdsNackReasonMaxBytes = 200;

// The error_detail of one NACK, built one rejected resource at a time. Any thread (one owner).
class NackDetail {
 public:
  void add(std::string_view name, std::string_view why);
  // How many resources were rejected.
  size_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  // "" when none; else "name: why; name: why" for the first rejections that fit, then
  // "; and N more (M rejected)" when some were left out. At most kXdsNackDetailMaxBytes.
  std::string message() const;

 private:
  std::string named_;  // the entries shown, "; "-separated
  size_t shown_ = 0;
  bool full_ = false;  // no more entries are shown, only counted
  size_t count_ = 0;
};

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
