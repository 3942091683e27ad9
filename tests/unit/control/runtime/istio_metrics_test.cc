// Istio's TCP metrics from the workers' tables to GET /metrics: the per-worker table
// (dataplane/common/istio_metrics.h: rows by label-set key, principal slots, the overflow rows
// past its caps), the control thread's label interning (control/snapshot/istio_labels.h) and the
// rendering with ztunnel's label set (control/runtime/istio_metrics.h).
#include "control/runtime/istio_metrics.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "control/admin/prometheus.h"
#include "control/snapshot/istio_labels.h"
#include "dataplane/common/istio_metrics.h"

namespace meshgate::ctl {
namespace {

// The sample line of `family` with exactly these labels, or "" when there is none.
std::string sample_of(const std::string& text, const std::string& family,
                      const std::string& labels) {
  const std::string head = family + "{" + labels + "} ";
  const size_t at = text.find("\n" + head);
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at + 1);
  return text.substr(at + 1 + head.size(), end - at - 1 - head.size());
}

std::string render(const std::vector<const dp::IstioTable*>& tables,
                   const IstioLabelRegistry& reg) {
  PromWriter w;
  write_istio_metrics(w, tables, reg);
  return w.text();
}

const IstioWorkloadLabels kClient{"sleep", "sleep", "v1", "client-ns",
                                  "spiffe://cluster.local/ns/client-ns/sa/sleep", "Kubernetes"};
const IstioWorkloadLabels kServer{"httpbin-v2", "httpbin", "v2", "web",
                                  "spiffe://cluster.local/ns/web/sa/httpbin", "Kubernetes"};
const IstioServiceLabels kService{"httpbin.web.svc.cluster.local", "web", "httpbin"};

TEST(IstioLabels, SameLabelsSameIdEmptyIsUnknownAndTheCapGivesUnknown) {
  IstioLabelRegistry reg;
  const uint32_t a = reg.workload_id(kClient);
  EXPECT_NE(a, 0u);
  EXPECT_EQ(reg.workload_id(kClient), a);
  EXPECT_NE(reg.workload_id(kServer), a);
  EXPECT_EQ(reg.workload_id(IstioWorkloadLabels{}), 0u);
  EXPECT_EQ(reg.workload(a), kClient);
  EXPECT_EQ(reg.workload(0), IstioWorkloadLabels{});
  EXPECT_EQ(reg.workload(999999), IstioWorkloadLabels{}) << "an id never given is unknown";
  for (uint32_t i = 0; reg.services() < kMaxIstioServices; ++i) {
    EXPECT_NE(reg.service_id(IstioServiceLabels{"s" + std::to_string(i), "ns", "s"}), 0u);
  }
  EXPECT_EQ(reg.full(), 0u);
  EXPECT_EQ(reg.service_id(IstioServiceLabels{"one-too-many", "ns", "s"}), 0u);
  EXPECT_EQ(reg.full(), 1u);
  EXPECT_NE(reg.service_id(IstioServiceLabels{"s0", "ns", "s"}), 0u) << "old sets keep their ids";
}

TEST(IstioTable, RowsAreFoundByKeyAndCountOpenCloseAndBothByteDirections) {
  auto t = std::make_unique<dp::IstioTable>();
  dp::IstioKey k;
  k.source_workload = 3;
  k.destination_workload = 4;
  k.service = 5;
  const uint32_t r = t->open(k);
  EXPECT_EQ(t->open(k), r) << "the same label set is the same row";
  t->received(r, 100);
  t->sent(r, 7);
  t->close(r);
  t->close(dp::kNoIstioRow);  // a connection that never opened counts nowhere
  t->sent(dp::kNoIstioRow, 5);
  EXPECT_EQ(t->row(r).opened, 2u);
  EXPECT_EQ(t->row(r).closed, 1u);
  EXPECT_EQ(t->row(r).received_bytes, 100u);
  EXPECT_EQ(t->row(r).sent_bytes, 7u);
  k.reporter = dp::IstioReporter::kDestination;
  EXPECT_NE(t->open(k), r) << "the reporter is part of the label set";
  EXPECT_EQ(t->rows_used(), dp::kIstioOverflowRows + 2);
  EXPECT_EQ(t->overflow(), 0u);
}

TEST(IstioTable, PrincipalsAreKeptOnceUpToTheCap) {
  auto t = std::make_unique<dp::IstioTable>();
  EXPECT_EQ(t->principal(""), 0u);
  const uint16_t a = t->principal("spiffe://cluster.local/ns/a/sa/x");
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(t->principal("spiffe://cluster.local/ns/a/sa/x"), a);
  EXPECT_EQ(t->principal_name(a), "spiffe://cluster.local/ns/a/sa/x");
  EXPECT_EQ(t->principal(std::string(dp::kIstioPrincipalBytes + 1, 'p')), 0u) << "too long";
  for (uint32_t i = 1; i < dp::kIstioPrincipals; ++i) {
    EXPECT_NE(t->principal("spiffe://td/ns/n/sa/" + std::to_string(i)), 0u);
  }
  EXPECT_EQ(t->principal("spiffe://td/ns/n/sa/full"), 0u);
  EXPECT_EQ(t->overflow(), 2u);
}

TEST(IstioMetrics, TerminatedHboneConnectionHasZtunnelsLabelsWithThePeerPrincipal) {
  IstioLabelRegistry reg;
  auto t = std::make_unique<dp::IstioTable>();
  dp::IstioKey k;
  k.reporter = dp::IstioReporter::kDestination;
  k.policy = dp::IstioPolicy::kMutualTls;
  k.source_principal = t->principal("spiffe://cluster.local/ns/client-ns/sa/sleep");
  k.destination_workload = reg.workload_id(kServer);
  k.service = reg.service_id(kService);
  const uint32_t r = t->open(k);
  t->received(r, 1234);
  t->sent(r, 56);
  t->close(r);
  const std::string text = render({t.get()}, reg);
  // The source is not a workload the snapshot knows: only its principal (from the peer
  // certificate) is, as ztunnel reports a derived source without baggage.
  const std::string labels =
      "reporter=\"destination\",source_workload=\"unknown\",source_canonical_service=\"unknown\","
      "source_canonical_revision=\"unknown\",source_workload_namespace=\"unknown\","
      "source_principal=\"spiffe://cluster.local/ns/client-ns/sa/sleep\",source_app=\"unknown\","
      "source_version=\"unknown\",source_cluster=\"unknown\","
      "destination_service=\"httpbin.web.svc.cluster.local\","
      "destination_service_namespace=\"web\",destination_service_name=\"httpbin\","
      "destination_workload=\"httpbin-v2\",destination_canonical_service=\"httpbin\","
      "destination_canonical_revision=\"v2\",destination_workload_namespace=\"web\","
      "destination_principal=\"spiffe://cluster.local/ns/web/sa/httpbin\","
      "destination_app=\"httpbin\",destination_version=\"v2\","
      "destination_cluster=\"Kubernetes\",request_protocol=\"tcp\",response_flags=\"-\","
      "connection_security_policy=\"mutual_tls\"";
  EXPECT_EQ(sample_of(text, "istio_tcp_connections_opened_total", labels), "1") << text;
  EXPECT_EQ(sample_of(text, "istio_tcp_connections_closed_total", labels), "1");
  EXPECT_EQ(sample_of(text, "istio_tcp_received_bytes_total", labels), "1234");
  EXPECT_EQ(sample_of(text, "istio_tcp_sent_bytes_total", labels), "56");
  EXPECT_NE(text.find("# TYPE istio_tcp_sent_bytes_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("\nmeshgate_istio_label_overflow_total 0\n"), std::string::npos);
}

TEST(IstioMetrics, WorkersRowsOfOneLabelSetAreSummedAndKnownSourcesNamed) {
  IstioLabelRegistry reg;
  auto t0 = std::make_unique<dp::IstioTable>();
  auto t1 = std::make_unique<dp::IstioTable>();
  dp::IstioKey k;
  k.source_workload = reg.workload_id(kClient);
  k.destination_workload = reg.workload_id(kServer);
  k.service = reg.service_id(kService);
  // The same principal at different slots of the two workers is one label set.
  t1->principal("spiffe://other/ns/x/sa/y");
  k.source_principal = t0->principal("spiffe://cluster.local/ns/client-ns/sa/sleep");
  t0->received(t0->open(k), 10);
  k.source_principal = t1->principal("spiffe://cluster.local/ns/client-ns/sa/sleep");
  EXPECT_EQ(k.source_principal, 2u);
  t1->received(t1->open(k), 5);
  const std::string text = render({t0.get(), t1.get()}, reg);
  const size_t at = text.find("istio_tcp_received_bytes_total{reporter=\"source\","
                              "source_workload=\"sleep\",source_canonical_service=\"sleep\","
                              "source_canonical_revision=\"v1\","
                              "source_workload_namespace=\"client-ns\","
                              "source_principal=\"spiffe://cluster.local/ns/client-ns/sa/sleep\","
                              "source_app=\"sleep\",source_version=\"v1\","
                              "source_cluster=\"Kubernetes\",");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.substr(text.find("} ", at) + 2, 3), "15\n");
}

TEST(IstioMetrics, PastTheRowCapConnectionsCountOnTheAllUnknownRow) {
  IstioLabelRegistry reg;
  auto t = std::make_unique<dp::IstioTable>();
  dp::IstioKey k;
  const uint32_t fits = dp::kIstioRows - dp::kIstioOverflowRows;
  for (uint32_t i = 0; i < fits; ++i) {
    k.destination_workload = i + 1;
    EXPECT_GE(t->open(k), dp::kIstioOverflowRows);
  }
  EXPECT_EQ(t->overflow(), 0u);
  k.destination_workload = fits + 1;
  const uint32_t r = t->open(k);
  EXPECT_EQ(r, 0u) << "reporter source, policy unknown: overflow row 0";
  t->received(r, 42);
  k.reporter = dp::IstioReporter::kDestination;
  k.policy = dp::IstioPolicy::kMutualTls;
  EXPECT_EQ(t->open(k), 3u);
  EXPECT_EQ(t->overflow(), 2u);
  k.reporter = dp::IstioReporter::kSource;
  k.policy = dp::IstioPolicy::kUnknown;
  k.destination_workload = 1;
  EXPECT_GE(t->open(k), dp::kIstioOverflowRows) << "label sets already counted keep their row";

  const std::string text = render({t.get()}, reg);
  const std::string unknown =
      "reporter=\"source\",source_workload=\"unknown\",source_canonical_service=\"unknown\","
      "source_canonical_revision=\"unknown\",source_workload_namespace=\"unknown\","
      "source_principal=\"unknown\",source_app=\"unknown\",source_version=\"unknown\","
      "source_cluster=\"unknown\",destination_service=\"unknown\","
      "destination_service_namespace=\"unknown\",destination_service_name=\"unknown\","
      "destination_workload=\"unknown\",destination_canonical_service=\"unknown\","
      "destination_canonical_revision=\"unknown\",destination_workload_namespace=\"unknown\","
      "destination_principal=\"unknown\",destination_app=\"unknown\","
      "destination_version=\"unknown\",destination_cluster=\"unknown\","
      "request_protocol=\"tcp\",response_flags=\"-\",connection_security_policy=\"unknown\"";
  // Destination ids past the registry are unknown too, so the rows of the first workloads
  // (ids never interned here) fall on the same label set as the overflow row: summed.
  EXPECT_EQ(sample_of(text, "istio_tcp_connections_opened_total", unknown),
            std::to_string(fits + 2));
  EXPECT_EQ(sample_of(text, "istio_tcp_received_bytes_total", unknown), "42");
  EXPECT_NE(text.find("\nmeshgate_istio_label_overflow_total 2\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace meshgate::ctl
