#include "control/runtime/gateway_metrics.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "control/admin/prometheus.h"
#include "control/common/build_info.h"
#include "control/runtime/istio_metrics.h"
#include "control/stats/stats.h"
#include "dataplane/hbone/counters.h"
#include "dataplane/hbone/gateway.h"
#include "dataplane/names/deny.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/tcp/tcp_types.h"

namespace meshgate::ctl {
namespace {

// One counter family per row of a counter table (dataplane/common/counter_table.h):
// <prefix><name>_total with the row's help text and its value summed over workers.
void write_counter_table(PromWriter& w, const char* prefix, const char* const* names,
                         const char* const* help, const uint64_t* values, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    w.family(std::string(prefix) + names[i] + "_total", MetricType::kCounter, help[i]);
    w.sample(values[i]);
  }
}

void write_gauge(PromWriter& w, const char* name, const char* help, uint64_t v) {
  w.family(name, MetricType::kGauge, help);
  w.sample(v);
}

void write_counter(PromWriter& w, const char* name, const char* help, uint64_t v) {
  w.family(name, MetricType::kCounter, help);
  w.sample(v);
}

}  // namespace

void add_cert_metrics(Admin& admin, const CertCounters& counters) {
  admin.add_metrics_source([c = &counters](PromWriter& w) {
    write_counter(w, "meshgate_cert_issued_total",
                  "certificates taken (from the Istio CA or reloaded files)",
                  c->issued.load(std::memory_order_relaxed));
    write_counter(w, "meshgate_cert_failures_total",
                  "certificate requests or reloads that failed (the old certificate stays)",
                  c->failures.load(std::memory_order_relaxed));
    write_gauge(w, "meshgate_cert_expiry_unix_seconds",
                "not-after of the certificate in use (0: none)",
                uint64_t(std::max<int64_t>(0, c->not_after_unix.load(std::memory_order_relaxed))));
  });
}

void add_xds_metrics(Admin& admin, const mesh::XdsCounters& counters) {
  admin.add_metrics_source([c = &counters](PromWriter& w) {
    const auto v = mesh::XdsCountersView::of(*c);
    write_counter(w, "meshgate_xds_connects_total", "xDS streams that got a first response",
                  v.connects);
    write_counter(w, "meshgate_xds_connect_failures_total",
                  "xDS attempts that ended before a response", v.connect_failures);
    write_counter(w, "meshgate_xds_disconnects_total", "connected xDS streams that ended",
                  v.disconnects);
    w.family("meshgate_xds_responses_total", MetricType::kCounter, "xDS responses by type");
    w.sample({{"type", "address"}}, v.responses_address);
    w.sample({{"type", "authorization"}}, v.responses_authorization);
    write_counter(w, "meshgate_xds_acks_total", "responses ACKed", v.acks);
    write_counter(w, "meshgate_xds_nacks_total", "responses NACKed (some resources rejected)",
                  v.nacks);
    write_counter(w, "meshgate_xds_resources_rejected_total", "resources named in NACKs",
                  v.resources_rejected);
    write_counter(w, "meshgate_xds_resources_applied_total", "resources added or updated",
                  v.resources_applied);
    write_counter(w, "meshgate_xds_resources_removed_total", "resources removed",
                  v.resources_removed);
    w.family("meshgate_xds_resources", MetricType::kGauge, "resources held now by kind");
    w.sample({{"kind", "workload"}}, v.workloads);
    w.sample({{"kind", "service"}}, v.services);
    w.sample({{"kind", "authorization"}}, v.authorizations);
    write_gauge(w, "meshgate_xds_connected", "1 while an xDS stream is up", v.connected);
    write_gauge(w, "meshgate_xds_synced", "1 once every type had a first response", v.synced);
    write_gauge(w, "meshgate_xds_backoff_ms", "wait before the next connection attempt",
                v.backoff_ms);
    write_gauge(w, "meshgate_xds_last_sync_unix_ms",
                "wall-clock time of the last applied response", uint64_t(v.last_sync_unix_ms));
  });
}

void add_proxy_metrics(Admin& admin, const std::vector<const dp::Worker*>& views) {
  admin.add_metrics_source([&views](PromWriter& w) {
    const ProxyTotals pt = proxy_totals(views);
    write_counter_table(w, "meshgate_tcp_", dp::tcp::kTcpCounterNames, dp::tcp::kTcpCounterHelp,
                        pt.sum.tcp, dp::tcp::kTcpCounterCount);
    write_gauge(w, "meshgate_tcp_connections",
                "TCP connections held by the proxies' stacks (TIME-WAIT and half-open included).",
                pt.sum.tcp_connections);
    write_gauge(w, "meshgate_tcp_buffer_bytes",
                "Bytes in the TCP send and receive buffers of the proxies' stacks.",
                pt.sum.tcp_mem_bytes);
    write_counter_table(w, "meshgate_proxy_", dp::kProxyCounterNames, dp::kProxyCounterHelp,
                        pt.sum.proxy, dp::kProxyCounterCount);
    write_gauge(w, "meshgate_proxy_sessions",
                "Proxy sessions open (client and backend connection pairs).",
                pt.sum.sessions_active);
    write_gauge(w, "meshgate_proxy_inspect_state_bytes",
                "Deny-signature stream state held by open sessions (blocks of the workers' "
                "preallocated arenas, one per session at most).",
                pt.sum.inspect_bytes);
  });
}

void add_listener_metrics(Admin& admin, const std::vector<const dp::Worker*>& views,
                          const SnapshotPublisher& publisher) {
  admin.add_metrics_source([&views, &publisher](PromWriter& w) {
    const dp::Snapshot* snap = publisher.current();
    if (snap == nullptr || (snap->listeners.empty() && snap->deny_sets.empty())) return;
    w.family("meshgate_listener_connections_total", MetricType::kCounter,
             "listener connections: accepted, routed (a service with a backend was chosen), "
             "defaulted (routed to default_service), client_closed (before the name was read)");
    for (const dp::SnapListener& l : snap->listeners) {
      const dp::ListenerCounters lc = listener_totals(views, l.stat_id);
      for (uint32_t c : {dp::kLsAccepted, dp::kLsRouted, dp::kLsDefaulted, dp::kLsClientClosed}) {
        w.sample({{"listener", l.name}, {"outcome", dp::kListenerCounterNames[c]}}, lc.v[c]);
      }
    }
    w.family("meshgate_listener_rejected_total", MetricType::kCounter,
             "listener connections reset before reaching a backend, by reason");
    for (const dp::SnapListener& l : snap->listeners) {
      const dp::ListenerCounters lc = listener_totals(views, l.stat_id);
      for (uint32_t c = dp::kFirstListenerReject; c < dp::kListenerCounterCount; ++c) {
        w.sample({{"listener", l.name}, {"reason", dp::kListenerCounterNames[c]}}, lc.v[c]);
      }
    }
    w.family("meshgate_listener_route_connections_total", MetricType::kCounter,
             "connections a listener route sent on (route: its index in the listener, or "
             "\"default\")");
    for (const dp::SnapListener& l : snap->listeners) {
      for (uint32_t i = 0; i < l.routes.size(); ++i) {
        const RouteNames n = route_names(*snap, l, i);
        w.sample({{"listener", l.name}, {"route", n.route}, {"service", n.service}},
                 route_totals(views, l.routes[i].stat_id).connections);
      }
    }
    w.family("meshgate_listener_route_bytes_total", MetricType::kCounter,
             "payload bytes of a listener route's connections, by direction");
    for (const dp::SnapListener& l : snap->listeners) {
      for (uint32_t i = 0; i < l.routes.size(); ++i) {
        const RouteNames n = route_names(*snap, l, i);
        const dp::RouteCounters rc = route_totals(views, l.routes[i].stat_id);
        w.sample({{"listener", l.name}, {"route", n.route}, {"service", n.service},
                  {"direction", "to_backend"}},
                 rc.bytes_to_backend);
        w.sample({{"listener", l.name}, {"route", n.route}, {"service", n.service},
                  {"direction", "to_client"}},
                 rc.bytes_to_client);
      }
    }
    w.family("meshgate_signature_blocked_total", MetricType::kCounter,
             "connections reset because a deny signature matched the client's bytes");
    auto deny_samples = [&](const char* owner_label, const std::string& owner, uint32_t deny) {
      if (deny == 0) return;
      const dp::SnapDeny& d = snap->deny_sets[deny - 1];
      for (uint32_t i = 0; i < d.stat_ids.size(); ++i) {
        w.sample({{owner_label, owner}, {"pattern", d.set->pattern(i)}},
                 deny_totals(views, d.stat_ids[i]));
      }
    };
    for (const dp::SnapListener& l : snap->listeners) deny_samples("listener", l.name, l.deny);
    for (const dp::SnapService& s : snap->services) {
      if (s.listener == 0) deny_samples("service", s.name, s.deny);
    }
  });
}

void add_hbone_metrics(Admin& admin, const std::vector<const dp::Worker*>& views) {
  admin.add_metrics_source([&views](PromWriter& w) {
    const HboneTotals ht = hbone_totals(views);
    write_counter_table(w, "meshgate_hbone_", dp::hbone::kCounterNames, dp::hbone::kCounterHelp,
                        ht.sum.engine, uint32_t(dp::hbone::kNumCounters));
    write_counter_table(w, "meshgate_hbone_", dp::hbone::kGwCounterNames,
                        dp::hbone::kGwCounterHelp, ht.sum.gw, uint32_t(dp::hbone::kNumGwCounters));
    write_gauge(w, "meshgate_hbone_connections", "HBONE connections open on the [hbone] port.",
                ht.sum.connections_active);
    write_gauge(w, "meshgate_hbone_tunnels",
                "HBONE tunnels open (streams with an upstream connection).",
                ht.sum.tunnels_active);
    write_gauge(w, "meshgate_hbone_handshakes",
                "HBONE connections still in their handshake (TLS or before the client's SETTINGS).",
                ht.sum.handshakes_active);
    write_gauge(w, "meshgate_hbone_buffer_bytes",
                "Bytes held in HBONE buffers (queued toward clients, received and not yet sent "
                "upstream).",
                ht.sum.buffer_bytes);
  });
}

void add_istio_metrics(Admin& admin, const std::vector<const dp::Worker*>& views,
                       const IstioLabelRegistry& labels) {
  admin.add_metrics_source([&views, l = &labels](PromWriter& w) {
    std::vector<const dp::IstioTable*> tables;
    for (const dp::Worker* v : views) {
      if (v != nullptr && v->stack() != nullptr) tables.push_back(&v->stack()->istio());
    }
    write_istio_metrics(w, tables, *l);
  });
}

void add_host_metrics(Admin& admin, const HostInterfaces& host) {
  admin.add_metrics_source([h = &host](PromWriter& w) {
    constexpr auto kRelaxed = std::memory_order_relaxed;
    w.family("meshgate_host_packets_total", MetricType::kCounter,
             "packets between a port and its kernel twin (host interface)");
    for (const auto& t : h->twins()) {
      w.sample({{"port", t->port}, {"direction", "to_kernel"}}, t->counters.to_kernel.load(kRelaxed));
      w.sample({{"port", t->port}, {"direction", "from_kernel"}},
               t->counters.from_kernel.load(kRelaxed));
    }
    w.family("meshgate_host_drops_total", MetricType::kCounter,
             "packets lost between a port and its kernel twin: tap_full (the kernel did not "
             "take them), port_queue_full (the queue to the port was full); the workers' own "
             "are meshgate_drops_total{reason=\"host_queue_full\"}");
    for (const auto& t : h->twins()) {
      w.sample({{"port", t->port}, {"reason", "tap_full"}}, t->counters.tap_full.load(kRelaxed));
      w.sample({{"port", t->port}, {"reason", "port_queue_full"}},
               t->counters.port_queue_full.load(kRelaxed));
    }
  });
}

void add_bgp_metrics(Admin& admin, const BgpSpeaker& bgp) {
  admin.add_metrics_source([b = &bgp](PromWriter& w) {
    const BgpStatus st = b->status();
    w.family("meshgate_bgp_session_up", MetricType::kGauge,
             "1 while the BGP session with the peer is Established");
    for (const auto& s : st.sessions) w.sample({{"peer", s.peer.str()}}, s.up ? 1 : 0);
    w.family("meshgate_bgp_announced", MetricType::kGauge,
             "1 while the VIP is announced to the BGP peers, 0 while it is withdrawn");
    for (const auto& v : st.vips) {
      const bool on = std::binary_search(st.announced.begin(), st.announced.end(), v);
      w.sample({{"vip", v.str()}}, on ? 1 : 0);
    }
  });
}

void add_flow_rule_metrics(Admin& admin, const FlowRuleManager& m) {
  admin.add_metrics_source([m = &m](PromWriter& w) {
    constexpr FlowRuleState kStates[] = {FlowRuleState::kInstalled, FlowRuleState::kRefused,
                                         FlowRuleState::kStale};
    const std::vector<FlowRuleStatus> status = m->status();
    w.family("meshgate_flow_rules", MetricType::kGauge,
             "rte_flow rules by port, kind and state (refused: the software check alone)");
    for (const FlowPortFacts& p : m->ports()) {
      for (uint32_t k = 0; k < kFlowRuleKinds; ++k) {
        for (FlowRuleState st : kStates) {
          uint64_t n = 0;
          for (const FlowRuleStatus& s : status) {
            n += s.spec.port_id == p.port_id && uint32_t(s.spec.kind) == k && s.state == st;
          }
          if (n == 0 && st == FlowRuleState::kStale) continue;
          w.sample({{"port", p.name},
                    {"kind", flow_rule_kind_name(FlowRuleKind(k))},
                    {"state", flow_rule_state_name(st)}},
                   n);
        }
      }
    }
    const FlowRuleCounters& c = m->counters();
    w.family("meshgate_flow_rule_refusals_total", MetricType::kCounter,
             "rules a port refused (rte_flow_validate or rte_flow_create) by kind");
    for (uint32_t k = 0; k < kFlowRuleKinds; ++k) {
      w.sample({{"kind", flow_rule_kind_name(FlowRuleKind(k))}}, c.refusals[k]);
    }
    write_counter(w, "meshgate_flow_rule_destroy_failures_total",
                  "rte_flow_destroy calls that failed (the port is then flushed and refilled)",
                  c.destroy_failures);
  });
}

void add_health_metrics(Admin& admin, const std::unique_ptr<health::HealthMonitor>& health) {
  admin.add_metrics_source([holder = &health](PromWriter& w) {
    const health::HealthMonitor* h = holder->get();
    if (!h) return;
    w.family("meshgate_backend_up", MetricType::kGauge,
             "1 while the backend passes its service's health check, 0 while it is taken out");
    for (const health::BackendHealthView& b : h->view()) {
      w.sample({{"service", b.service}, {"backend", b.backend}}, b.up ? 1 : 0);
    }
    w.family("meshgate_health_checks_total", MetricType::kCounter,
             "health check probes that ended, by result");
    for (uint32_t o = 0; o < health::kProbeOutcomes; ++o) {
      const auto outcome = health::ProbeOutcome(o);
      w.sample({{"result", health::outcome_name(outcome)}}, h->checks(outcome));
    }
    write_counter(w, "meshgate_health_checks_deferred_total",
                  "probes that waited for the gateway-wide rate or open-socket bound",
                  h->deferred());
  });
  admin.set_health_source([holder = &health] {
    return *holder ? health_json(**holder) : nlohmann::json::array();
  });
}

nlohmann::json health_json(const health::HealthMonitor& health) {
  nlohmann::json out = nlohmann::json::array();
  for (const health::BackendHealthView& b : health.view()) {
    out.push_back({{"service", b.service},
                   {"backend", b.backend},
                   {"type", b.type == HealthCheckType::kHttp ? "http" : "tcp"},
                   {"probe_port", b.probe_port},
                   {"state", b.up ? "up" : "down"},
                   {"consecutive_successes", b.successes},
                   {"consecutive_failures", b.failures},
                   {"last_result", b.probed ? health::outcome_name(b.last) : "none"}});
  }
  return out;
}

void add_affinity_metrics(Admin& admin, const dp::AffinityTable& table) {
  admin.add_metrics_source([t = &table](PromWriter& w) {
    w.family("meshgate_affinity_entries", MetricType::kGauge,
             "Session affinity table slots in use (expired ones are reused in place)");
    w.sample(t->entries());
    w.family("meshgate_affinity_capacity", MetricType::kGauge, "Session affinity table slots");
    w.sample(t->capacity());
    w.family("meshgate_affinity_full_total", MetricType::kCounter,
             "New flows of session-affinity services whose bucket was full (not remembered)");
    w.sample(t->full());
  });
}

void add_build_info_metric(Admin& admin) {
  admin.add_metrics_source([info = linked_build_info()](PromWriter& w) {
    w.family("meshgate_build_info", MetricType::kGauge,
             "Always 1; the labels say what runs: meshgate's version and git commit, the DPDK, "
             "OpenSSL and Hyperscan versions loaded.");
    w.sample({{"version", info.version},
              {"commit", info.commit},
              {"dpdk", info.dpdk},
              {"openssl", info.openssl},
              {"hyperscan", info.hyperscan}},
             1);
  });
}

void add_access_log_metrics(Admin& admin, const AccessLogWriter& writer) {
  admin.add_metrics_source([w = &writer](PromWriter& p) {
    p.family("meshgate_access_log_records_total", MetricType::kCounter,
             "Access-log records written");
    p.sample(w->records());
    p.family("meshgate_access_log_dropped_total", MetricType::kCounter,
             "Access-log records dropped by the workers because their ring was full");
    p.sample(w->dropped());
    p.family("meshgate_access_log_write_errors_total", MetricType::kCounter,
             "Access-log records lost because writing them failed");
    p.sample(w->write_errors());
  });
}

}  // namespace meshgate::ctl
