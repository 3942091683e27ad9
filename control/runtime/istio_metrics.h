// Istio's standard TCP metrics in GET /metrics (docs/MESH.md, "Istio metrics"): the workers'
// rows (dataplane/common/istio_metrics.h) summed by label set, with the names the snapshot
// builder interned (control/snapshot/istio_labels.h). Control thread.
#pragma once

#include <vector>

#include "control/admin/prometheus.h"
#include "control/snapshot/istio_labels.h"
#include "dataplane/common/istio_metrics.h"

namespace meshgate::ctl {

// istio_tcp_connections_opened_total, istio_tcp_connections_closed_total,
// istio_tcp_sent_bytes_total and istio_tcp_received_bytes_total with ztunnel's labels (one
// sample per label set that counted a connection), and meshgate_istio_label_overflow_total.
void write_istio_metrics(PromWriter& w, const std::vector<const dp::IstioTable*>& tables,
                         const IstioLabelRegistry& labels);

}  // namespace meshgate::ctl
