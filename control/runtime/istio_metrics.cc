#include "control/runtime/istio_metrics.h"

#include <array>
#include <iterator>
#include <map>
#include <string>
#include <string_view>

namespace meshgate::ctl {
namespace {

// ztunnel's CommonTrafficLabels, in its order.
constexpr const char* kLabelNames[] = {
    "reporter",
    "source_workload",
    "source_canonical_service",
    "source_canonical_revision",
    "source_workload_namespace",
    "source_principal",
    "source_app",
    "source_version",
    "source_cluster",
    "destination_service",
    "destination_service_namespace",
    "destination_service_name",
    "destination_workload",
    "destination_canonical_service",
    "destination_canonical_revision",
    "destination_workload_namespace",
    "destination_principal",
    "destination_app",
    "destination_version",
    "destination_cluster",
    "request_protocol",
    "response_flags",
    "connection_security_policy",
};
constexpr size_t kNumLabels = std::size(kLabelNames);
using LabelValues = std::array<std::string_view, kNumLabels>;

struct RowSum {
  LabelValues values;
  uint64_t opened = 0, closed = 0, sent = 0, received = 0;
};

std::string_view or_unknown(std::string_view v) { return v.empty() ? "unknown" : v; }

// The label values of a row; `principal` is the worker's own slot's name. Its
// source_principal is the TLS peer's (or, reporting as the source over mTLS, its own), never
// the source workload's, as ztunnel sets it.
LabelValues values_of(const dp::IstioKey& k, std::string_view principal,
                      const IstioLabelRegistry& labels) {
  const IstioWorkloadLabels& src = labels.workload(k.source_workload);
  const IstioWorkloadLabels& dst = labels.workload(k.destination_workload);
  const IstioServiceLabels& svc = labels.service(k.service);
  return LabelValues{
      k.reporter == dp::IstioReporter::kSource ? "source" : "destination",
      or_unknown(src.workload),
      or_unknown(src.canonical_service),
      or_unknown(src.canonical_revision),
      or_unknown(src.ns),
      or_unknown(principal),
      or_unknown(src.canonical_service),
      or_unknown(src.canonical_revision),
      or_unknown(src.cluster),
      or_unknown(svc.hostname),
      or_unknown(svc.ns),
      or_unknown(svc.name),
      or_unknown(dst.workload),
      or_unknown(dst.canonical_service),
      or_unknown(dst.canonical_revision),
      or_unknown(dst.ns),
      or_unknown(dst.principal),
      or_unknown(dst.canonical_service),
      or_unknown(dst.canonical_revision),
      or_unknown(dst.cluster),
      "tcp",
      "-",
      k.policy == dp::IstioPolicy::kMutualTls ? "mutual_tls" : "unknown",
  };
}

}  // namespace

void write_istio_metrics(PromWriter& w, const std::vector<const dp::IstioTable*>& tables,
                         const IstioLabelRegistry& labels) {
  // By the label values joined: rows of different workers (and the overflow row and a row
  // whose labels are all unknown) with the same labels are one sample.
  std::map<std::string, RowSum> rows;
  uint64_t overflow = labels.full();
  for (const dp::IstioTable* t : tables) {
    if (t == nullptr) continue;
    overflow += t->overflow();
    const uint32_t n = t->rows_used();
    for (uint32_t i = 0; i < n; ++i) {
      const dp::IstioRow& r = t->row(i);
      const uint64_t opened = dp::counter_read(r.opened);
      if (opened == 0) continue;  // an overflow row nothing used
      const LabelValues v = values_of(r.key, t->principal_name(r.key.source_principal), labels);
      std::string key;
      for (std::string_view x : v) {
        key += x;
        key += '\0';
      }
      RowSum& s = rows[key];
      s.values = v;
      s.opened += opened;
      s.closed += dp::counter_read(r.closed);
      s.sent += dp::counter_read(r.sent_bytes);
      s.received += dp::counter_read(r.received_bytes);
    }
  }
  struct Family {
    const char* name;
    const char* help;  // ztunnel's
    uint64_t RowSum::*value;
  };
  static constexpr Family kFamilies[] = {
      {"istio_tcp_connections_opened_total", "The total number of TCP connections opened",
       &RowSum::opened},
      {"istio_tcp_connections_closed_total", "The total number of TCP connections closed",
       &RowSum::closed},
      {"istio_tcp_received_bytes_total",
       "The size of total bytes received during request in case of a TCP connection",
       &RowSum::received},
      {"istio_tcp_sent_bytes_total",
       "The size of total bytes sent during response in case of a TCP connection", &RowSum::sent},
  };
  for (const Family& f : kFamilies) {
    w.family(f.name, MetricType::kCounter, f.help);
    for (const auto& [key, sum] : rows) {
      const LabelValues& v = sum.values;
      static_assert(kNumLabels == 23);
      w.sample({{kLabelNames[0], v[0]},   {kLabelNames[1], v[1]},   {kLabelNames[2], v[2]},
                {kLabelNames[3], v[3]},   {kLabelNames[4], v[4]},   {kLabelNames[5], v[5]},
                {kLabelNames[6], v[6]},   {kLabelNames[7], v[7]},   {kLabelNames[8], v[8]},
                {kLabelNames[9], v[9]},   {kLabelNames[10], v[10]}, {kLabelNames[11], v[11]},
                {kLabelNames[12], v[12]}, {kLabelNames[13], v[13]}, {kLabelNames[14], v[14]},
                {kLabelNames[15], v[15]}, {kLabelNames[16], v[16]}, {kLabelNames[17], v[17]},
                {kLabelNames[18], v[18]}, {kLabelNames[19], v[19]}, {kLabelNames[20], v[20]},
                {kLabelNames[21], v[21]}, {kLabelNames[22], v[22]}},
               sum.*f.value);
    }
  }
  w.family("meshgate_istio_label_overflow_total", MetricType::kCounter,
           "Connections counted on the all-unknown Istio label set, peer principals not kept "
           "and label sets not interned, because a label-set cap was reached.");
  w.sample(overflow);
}

}  // namespace meshgate::ctl
