// Prometheus text exposition (format 0.0.4) for GET /metrics.
//
// PromWriter is the only way text is produced: it writes each family's HELP and TYPE once,
// checks metric and label names, and escapes label values, so other control modules (the mesh
// provider's `meshgate_xds_*` family) append to the same page without breaking it.
// write_core_metrics() emits the gateway's own families from per-worker counters, summed.
//
// Threads: pure formatting, no shared state. The admin responder calls it on the control
// thread, the only thread allowed to read the counters and names it is given.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "control/stats/stats.h"
#include "dataplane/worker/counters.h"

namespace meshgate::ctl {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType : uint8_t { kCounter, kGauge };

struct PromLabel {
  std::string_view name;   // [a-zA-Z_][a-zA-Z0-9_]*
  std::string_view value;  // any UTF-8; escaped on output
};

// Label value escaping of the text format: backslash, double quote and line feed.
std::string prom_escape_label_value(std::string_view v);
// HELP text escaping: backslash and line feed.
std::string prom_escape_help(std::string_view v);
bool prom_valid_metric_name(std::string_view name);
bool prom_valid_label_name(std::string_view name);

class PromWriter {
 public:
  // Starts family `name` ("# HELP" and "# TYPE" lines). Counters must end in "_total". A name
  // that is invalid or already declared is a programmer error (MG_CHECK).
  void family(std::string_view name, MetricType type, std::string_view help);
  // One sample of the family declared last. Integers are written exactly.
  void sample(std::initializer_list<PromLabel> labels, uint64_t value);
  void sample(uint64_t value) { sample({}, value); }

  const std::string& text() const { return out_; }

 private:
  void labels(std::initializer_list<PromLabel> labels);

  std::string out_;
  std::string current_;
  std::set<std::string, std::less<>> families_;
};

// Extra families from other control modules, appended after the core ones on each scrape.
// Runs on the control thread. The `meshgate_xds_` prefix is reserved for the xDS provider.
using MetricsSource = std::function<void(PromWriter&)>;

// One backend of the current snapshot, its counters already summed over workers.
struct BackendSample {
  std::string service;
  std::string backend;  // "ip:port", IPv6 as "[v6]:port"
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t flows = 0;
  uint64_t reply_bytes = 0;
};

struct MetricsInput {
  // One entry per worker, index = worker number. Read with dp::counter_read.
  std::vector<const dp::WorkerCounters*> workers;
  std::vector<BackendSample> backends;
  std::vector<PortCounters> ports;  // read_port_counters(), on the control thread
  uint64_t snapshot_version = 0;
  bool ready = false;
  bool draining = false;
};

// The gateway's own families (every name starts with "meshgate_"; never "meshgate_xds_"):
//   meshgate_packets_total{direction}  meshgate_bytes_total{direction}  (in | out)
//   meshgate_packets_generated_total  meshgate_packets_consumed_total  meshgate_packets_pending
//   meshgate_drops_total{reason}  (every reason of dataplane/drop_reasons.def, zeros included)
//   meshgate_flows_active  meshgate_flows_established  meshgate_flows_closing
//   meshgate_flows_created_total
//   meshgate_flows_expired_total  meshgate_stateless_packets_total
//   meshgate_fast_path_packets_total
//   meshgate_backend_packets_total{service,backend}  meshgate_backend_bytes_total{...}
//   meshgate_backend_reply_bytes_total{...}  meshgate_backend_flows_total{service,backend}
//   meshgate_snapshot_version  meshgate_ready  meshgate_draining
//   meshgate_worker_loops_total{worker}  meshgate_worker_busy_loops_total{worker}
//   meshgate_worker_busy_cycles_total{worker}  meshgate_worker_snapshot_version{worker}
//   meshgate_port_{ipackets,opackets,ibytes,obytes,imissed,ierrors,oerrors,rx_nombuf}_total{port}
void write_core_metrics(const MetricsInput& in, PromWriter& w);

}  // namespace meshgate::ctl
