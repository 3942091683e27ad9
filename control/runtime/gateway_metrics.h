// The metric families the gateway's optional parts add to GET /metrics after the core ones
// (control/admin/prometheus.cc): certificates, the xDS client, the proxies' TCP stacks and the
// HBONE terminators. Each registers a source on the Admin; the sources run on the control
// thread when /metrics is queried and read the counters summed over workers.
#pragma once

#include <vector>

#include "control/accesslog/access_log_writer.h"
#include "control/admin/admin.h"
#include "control/bgp/bgp_speaker.h"
#include "control/certs/cert_provider.h"
#include "control/flowsteer/flow_rule_manager.h"
#include "control/health/health_check.h"
#include "control/host/host_interface.h"
#include "control/mesh/xds_provider.h"
#include "control/snapshot/istio_labels.h"
#include "control/snapshot/publisher.h"
#include "dataplane/lb/affinity.h"
#include "dataplane/worker/worker.h"

namespace meshgate::ctl {

// meshgate_cert_*. `c` must outlive the Admin.
void add_cert_metrics(Admin& admin, const CertCounters& c);
// meshgate_xds_*, read from the provider's relaxed atomics. `c` must outlive the Admin.
void add_xds_metrics(Admin& admin, const mesh::XdsCounters& c);
// meshgate_tcp_* (dataplane/tcp/tcp_counters.def) and meshgate_proxy_*
// (dataplane/proxy/proxy_counters.def). `views` must outlive the Admin.
void add_proxy_metrics(Admin& admin, const std::vector<const dp::Worker*>& views);
// [[listener]]s and deny signatures, from the published snapshot's names and the workers'
// proxies: meshgate_listener_connections_total{listener,outcome},
// meshgate_listener_rejected_total{listener,reason}, meshgate_listener_route_connections_total
// and meshgate_listener_route_bytes_total{listener,route,service[,direction]},
// meshgate_signature_blocked_total{listener|service,pattern}. Both must outlive the Admin.
void add_listener_metrics(Admin& admin, const std::vector<const dp::Worker*>& views,
                          const SnapshotPublisher& publisher);
// meshgate_hbone_* (dataplane/hbone/hbone_counters.def: the engine; gateway_counters.def: the
// terminator on the workers). `views` must outlive the Admin.
void add_hbone_metrics(Admin& admin, const std::vector<const dp::Worker*>& views);
// Istio's istio_tcp_* families and meshgate_istio_label_overflow_total
// (control/runtime/istio_metrics.h) from the workers' stacks. Both must outlive the Admin.
void add_istio_metrics(Admin& admin, const std::vector<const dp::Worker*>& views,
                       const IstioLabelRegistry& labels);
// meshgate_host_packets_total{port,direction} and meshgate_host_drops_total{port,reason}: the
// ports' kernel twins. `host` must outlive the Admin.
void add_host_metrics(Admin& admin, const HostInterfaces& host);
// meshgate_bgp_session_up{peer} and meshgate_bgp_announced{vip} (1 while announced, 0 while
// withdrawn). `bgp` must outlive the Admin.
void add_bgp_metrics(Admin& admin, const BgpSpeaker& bgp);
// meshgate_flow_rules{port,kind,state} (rules held now, state installed|refused|stale; every
// port and kind has an installed and a refused sample), meshgate_flow_rule_refusals_total{kind},
// meshgate_flow_rule_destroy_failures_total. `m` must outlive the Admin.
void add_flow_rule_metrics(Admin& admin, const FlowRuleManager& m);
// Backend health checks: meshgate_backend_up{service,backend} (1 up, 0 down),
// meshgate_health_checks_total{result} and meshgate_health_checks_deferred_total; and the
// "health_checks" list of GET /config_dump, of whatever monitor `health` holds when asked (a
// reload replaces it; none: no backend is checked). `health` must outlive the Admin.
void add_health_metrics(Admin& admin, const std::unique_ptr<health::HealthMonitor>& health);
// One entry per checked backend: service, backend, state, counts, the last probe's result.
nlohmann::json health_json(const health::HealthMonitor& health);
// meshgate_affinity_entries, meshgate_affinity_capacity and meshgate_affinity_full_total: the
// session affinity table the workers share. `table` must outlive the Admin.
void add_affinity_metrics(Admin& admin, const dp::AffinityTable& table);
// meshgate_build_info{version,commit,dpdk,openssl,hyperscan} 1 (control/common/build_info.h:
// the library versions loaded at run time).
void add_build_info_metric(Admin& admin);

// meshgate_access_log_records_total, meshgate_access_log_dropped_total (rings full, summed over
// workers) and meshgate_access_log_write_errors_total. `w` must outlive the Admin.
void add_access_log_metrics(Admin& admin, const AccessLogWriter& w);

}  // namespace meshgate::ctl
