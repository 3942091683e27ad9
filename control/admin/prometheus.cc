#include "control/admin/prometheus.h"

#include <cinttypes>
#include <cstdio>

#include "control/stats/stats.h"
#include "dataplane/common/compiler.h"
#include "dataplane/drop_reasons.h"

namespace meshgate::ctl {
namespace {

bool name_char(char c, bool first, bool colon_ok) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (alpha || (colon_ok && c == ':')) return true;
  return !first && c >= '0' && c <= '9';
}

bool valid_name(std::string_view name, bool colon_ok) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, colon_ok)) return false;
  }
  return true;
}

}  // namespace

std::string prom_escape_label_value(std::string_view v) {
  std::string s;
  s.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\': s += "\\\\"; break;
      case '"': s += "\\\""; break;
      case '\n': s += "\\n"; break;
      default: s += c;
    }
  }
  return s;
}

std::string prom_escape_help(std::string_view v) {
  std::string s;
  s.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\': s += "\\\\"; break;
      case '\n': s += "\\n"; break;
      default: s += c;
    }
  }
  return s;
}

bool prom_valid_metric_name(std::string_view name) { return valid_name(name, true); }
// Names starting with "__" are reserved for Prometheus itself.
bool prom_valid_label_name(std::string_view name) {
  return valid_name(name, false) && name.substr(0, 2) != "__";
}

void PromWriter::family(std::string_view name, MetricType type, std::string_view help) {
  MG_CHECK(prom_valid_metric_name(name));
  MG_CHECK(type != MetricType::kCounter || name.ends_with("_total"));
  MG_CHECK(families_.emplace(name).second);
  current_ = std::string(name);
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += prom_escape_help(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += type == MetricType::kCounter ? " counter\n" : " gauge\n";
}

void PromWriter::labels(std::initializer_list<PromLabel> labels) {
  MG_CHECK(!current_.empty());
  out_ += current_;
  if (labels.size() == 0) return;
  out_ += '{';
  bool first = true;
  for (const PromLabel& l : labels) {
    MG_CHECK(prom_valid_label_name(l.name));
    if (!first) out_ += ',';
    first = false;
    out_ += l.name;
    out_ += "=\"";
    out_ += prom_escape_label_value(l.value);
    out_ += '"';
  }
  out_ += '}';
}

void PromWriter::sample(std::initializer_list<PromLabel> l, uint64_t value) {
  labels(l);
  char buf[32];
  std::snprintf(buf, sizeof buf, " %" PRIu64 "\n", value);
  out_ += buf;
}

void write_core_metrics(const MetricsInput& in, PromWriter& w) {
  using dp::counter_read;
  const StatsTotals t = sum_counters(in.workers);
  const auto C = MetricType::kCounter;
  const auto G = MetricType::kGauge;

  w.family("meshgate_packets_total", C, "Packets received (in) and transmitted (out) on all ports.");
  w.sample({{"direction", "in"}}, t.packets_in);
  w.sample({{"direction", "out"}}, t.packets_out);
  w.family("meshgate_bytes_total", C, "Bytes received (in) and transmitted (out) on all ports.");
  w.sample({{"direction", "in"}}, t.bytes_in);
  w.sample({{"direction", "out"}}, t.bytes_out);
  w.family("meshgate_packets_generated_total", C,
           "Packets the gateway originated (ARP requests, neighbor solicitations).");
  w.sample(t.generated);
  w.family("meshgate_packets_consumed_total", C,
           "Packets terminated without an answer (ARP replies and advertisements learned).");
  w.sample(t.consumed);
  w.family("meshgate_packets_pending", G, "Packets held in the workers: waiting for a neighbor to resolve, or a full burst held for the next poll.");
  w.sample(t.pending);

  w.family("meshgate_drops_total", C, "Packets dropped, by reason (dataplane/drop_reasons.def).");
  for (uint32_t r = 1; r < dp::kNumDrops; ++r) w.sample({{"reason", dp::kDropNames[r]}}, t.drops[r]);

  w.family("meshgate_flows_active", G, "Tracked flows in the flow tables.");
  w.sample(t.flows_active);
  w.family("meshgate_flows_established", G, "Tracked TCP flows in ESTABLISHED.");
  w.sample(t.flows_established);
  w.family("meshgate_flows_closing", G,
           "Tracked TCP flows closing: FIN_WAIT, CLOSE_WAIT or LAST_ACK.");
  w.sample(t.flows_closing);
  w.family("meshgate_flows_created_total", C, "Tracked flows created.");
  w.sample(t.flows_created);
  w.family("meshgate_flows_expired_total", C, "Tracked flows removed after their idle timeout.");
  w.sample(t.flows_expired);
  w.family("meshgate_flows_moved_total", C,
           "UDP flows moved off a removed or unhealthy backend on their next packet.");
  w.sample(t.flows_moved);
  w.family("meshgate_stateless_packets_total", C,
           "Packets forwarded without a flow entry because the flow table was full.");
  w.sample(t.stateless_packets);
  w.family("meshgate_fast_path_packets_total", C,
           "Packets of established flows forwarded by the fused fast path (the rest take the "
           "stages; the output is the same).");
  w.sample(t.fast_path_packets);

  w.family("meshgate_backend_packets_total", C,
           "Packets of a backend's flows forwarded (both directions; the proxy counts none).");
  for (const auto& b : in.backends) w.sample({{"service", b.service}, {"backend", b.backend}}, b.packets);
  w.family("meshgate_backend_bytes_total", C, "Client bytes forwarded to a backend.");
  for (const auto& b : in.backends) w.sample({{"service", b.service}, {"backend", b.backend}}, b.bytes);
  w.family("meshgate_backend_reply_bytes_total", C,
           "Bytes from a backend forwarded to its clients (replies).");
  for (const auto& b : in.backends) {
    w.sample({{"service", b.service}, {"backend", b.backend}}, b.reply_bytes);
  }
  w.family("meshgate_backend_flows_total", C, "Flows created towards a backend.");
  for (const auto& b : in.backends) w.sample({{"service", b.service}, {"backend", b.backend}}, b.flows);

  w.family("meshgate_snapshot_version", G, "Version of the published snapshot.");
  w.sample(in.snapshot_version);
  w.family("meshgate_ready", G, "1 when GET /ready answers 200.");
  w.sample(in.ready ? 1 : 0);
  w.family("meshgate_draining", G, "1 while the gateway drains (new flows refused).");
  w.sample(in.draining ? 1 : 0);

  // Each port's own counters (rte_eth_stats_get): frames the NIC lost before a worker polled
  // them (imissed, rx_nombuf) appear nowhere else.
  struct PerPort {
    const char* name;
    const char* help;
    uint64_t PortCounters::*field;
  };
  static constexpr PerPort kPerPort[] = {
      {"meshgate_port_ipackets_total", "Packets the port received (its own count).",
       &PortCounters::ipackets},
      {"meshgate_port_opackets_total", "Packets the port transmitted.", &PortCounters::opackets},
      {"meshgate_port_ibytes_total", "Bytes the port received.", &PortCounters::ibytes},
      {"meshgate_port_obytes_total", "Bytes the port transmitted.", &PortCounters::obytes},
      {"meshgate_port_imissed_total",
       "Packets the port dropped because its RX queue was full (never seen by a worker).",
       &PortCounters::imissed},
      {"meshgate_port_ierrors_total", "Erroneous packets the port received.",
       &PortCounters::ierrors},
      {"meshgate_port_oerrors_total", "Packets the port failed to transmit.",
       &PortCounters::oerrors},
      {"meshgate_port_rx_nombuf_total",
       "Packets the port dropped for want of an mbuf (never seen by a worker).",
       &PortCounters::rx_nombuf},
  };
  for (const PerPort& m : kPerPort) {
    w.family(m.name, C, m.help);
    for (const PortCounters& p : in.ports) w.sample({{"port", p.name}}, p.*m.field);
  }

  // Per worker: a stuck or saturated core shows here before it shows in the sums.
  struct PerWorker {
    const char* name;
    MetricType type;
    const char* help;
    uint64_t dp::WorkerCounters::*field;
  };
  static constexpr PerWorker kPerWorker[] = {
      {"meshgate_worker_loops_total", C, "Poll loop iterations of a worker.",
       &dp::WorkerCounters::loops},
      {"meshgate_worker_busy_loops_total", C, "Poll loop iterations that received packets.",
       &dp::WorkerCounters::busy_loops},
      {"meshgate_worker_busy_cycles_total", C,
       "TSC cycles spent in poll loop iterations that received packets.",
       &dp::WorkerCounters::busy_cycles},
      {"meshgate_worker_packets_total", C, "Packets a worker received.",
       &dp::WorkerCounters::rx_packets},
      {"meshgate_worker_snapshot_version", G, "Snapshot version a worker used last.",
       &dp::WorkerCounters::snapshot_version},
  };
  for (const PerWorker& m : kPerWorker) {
    w.family(m.name, m.type, m.help);
    for (size_t i = 0; i < in.workers.size(); ++i) {
      const std::string idx = std::to_string(i);
      w.sample({{"worker", idx}}, counter_read(in.workers[i]->*m.field));
    }
  }
}

}  // namespace meshgate::ctl
