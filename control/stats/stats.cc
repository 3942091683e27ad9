#include "control/stats/stats.h"

#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "control/snapshot/builder.h"

namespace meshgate::ctl {
namespace {

dp::BackendCounters backend_sum(const std::vector<const dp::Worker*>& workers, uint32_t id) {
  dp::BackendCounters s;
  for (const auto* w : workers) {
    const dp::BackendCounters& c = w->backend_counters()[id];
    s.packets += dp::counter_read(c.packets);
    s.bytes += dp::counter_read(c.bytes);
    s.flows += dp::counter_read(c.flows);
    s.reply_bytes += dp::counter_read(c.reply_bytes);
  }
  return s;
}

}  // namespace

dp::BackendCounters backend_totals(const std::vector<const dp::Worker*>& workers,
                                   uint32_t stat_id) {
  return backend_sum(workers, stat_id);
}

dp::ListenerCounters listener_totals(const std::vector<const dp::Worker*>& workers,
                                     uint32_t stat_id) {
  dp::ListenerCounters t;
  for (const dp::Worker* w : workers) {
    if (w->proxy() == nullptr) continue;
    const dp::ListenerCounters& c = w->proxy()->listener_counters()[stat_id];
    for (uint32_t i = 0; i < dp::kListenerCounterCount; ++i) t.v[i] += dp::counter_read(c.v[i]);
  }
  return t;
}

dp::RouteCounters route_totals(const std::vector<const dp::Worker*>& workers, uint32_t stat_id) {
  dp::RouteCounters t;
  for (const dp::Worker* w : workers) {
    if (w->proxy() == nullptr) continue;
    const dp::RouteCounters& c = w->proxy()->route_counters()[stat_id];
    t.connections += dp::counter_read(c.connections);
    t.bytes_to_backend += dp::counter_read(c.bytes_to_backend);
    t.bytes_to_client += dp::counter_read(c.bytes_to_client);
  }
  return t;
}

uint64_t deny_totals(const std::vector<const dp::Worker*>& workers, uint32_t stat_id) {
  uint64_t n = 0;
  for (const dp::Worker* w : workers) {
    if (w->proxy() != nullptr) n += dp::counter_read(w->proxy()->deny_counters()[stat_id]);
  }
  return n;
}

RouteNames route_names(const dp::Snapshot& snap, const dp::SnapListener& l, uint32_t i) {
  RouteNames n;
  n.route = int32_t(i) == l.default_route ? "default" : std::to_string(i);
  if (const int32_t si = l.routes[i].service; si >= 0) {
    const dp::SnapService& s = snap.services[uint32_t(si)];
    n.service = s.hostname.empty() ? s.name : s.hostname;
  }
  return n;
}

ProxyTotals proxy_totals(const std::vector<const dp::Worker*>& workers) {
  ProxyTotals t;
  for (const auto* w : workers) {
    const dp::Proxy* p = w->proxy();
    if (p == nullptr) continue;
    t.any = true;
    const dp::ProxyStats& s = p->stats();
    for (uint32_t i = 0; i < dp::kProxyCounterCount; ++i) {
      t.sum.proxy[i] += dp::counter_read(s.proxy[i]);
    }
    for (uint32_t i = 0; i < dp::tcp::kTcpCounterCount; ++i) {
      t.sum.tcp[i] += dp::counter_read(s.tcp[i]);
    }
    t.sum.sessions_active += dp::counter_read(s.sessions_active);
    t.sum.tcp_connections += dp::counter_read(s.tcp_connections);
    t.sum.tcp_mem_bytes += dp::counter_read(s.tcp_mem_bytes);
    t.sum.inspect_bytes += dp::counter_read(s.inspect_bytes);
  }
  return t;
}

HboneTotals hbone_totals(const std::vector<const dp::Worker*>& workers) {
  HboneTotals t;
  for (const auto* w : workers) {
    const dp::hbone::Gateway* g = w->hbone();
    if (g == nullptr) continue;
    t.any = true;
    const dp::hbone::GatewayStats& s = g->stats();
    for (int i = 0; i < dp::hbone::kNumCounters; ++i) t.sum.engine[i] += dp::counter_read(s.engine[i]);
    for (int i = 0; i < dp::hbone::kNumGwCounters; ++i) t.sum.gw[i] += dp::counter_read(s.gw[i]);
    t.sum.connections_active += dp::counter_read(s.connections_active);
    t.sum.tunnels_active += dp::counter_read(s.tunnels_active);
    t.sum.handshakes_active += dp::counter_read(s.handshakes_active);
    t.sum.buffer_bytes += dp::counter_read(s.buffer_bytes);
  }
  return t;
}

StatsTotals sum_counters(const std::vector<const dp::Worker*>& workers) {
  std::vector<const dp::WorkerCounters*> counters;
  counters.reserve(workers.size());
  for (const auto* w : workers) counters.push_back(&w->counters());
  return sum_counters(counters);
}

StatsTotals sum_counters(const std::vector<const dp::WorkerCounters*>& counters) {
  StatsTotals t;
  for (const auto* cp : counters) {
    const dp::WorkerCounters& c = *cp;
    using dp::counter_read;
    t.packets_in += counter_read(c.rx_packets);
    t.packets_out += counter_read(c.tx_packets);
    t.bytes_in += counter_read(c.rx_bytes);
    t.bytes_out += counter_read(c.tx_bytes);
    t.generated += counter_read(c.generated);
    t.consumed += counter_read(c.consumed);
    for (uint32_t r = 1; r < dp::kNumDrops; ++r) {
      const uint64_t n = counter_read(c.drops[r]);
      t.drops[r] += n;
      t.drops_total += n;
    }
    t.flows_created += counter_read(c.flows_created);
    t.flows_moved += counter_read(c.flows_moved);
    t.flows_expired += counter_read(c.flows_expired);
    t.flows_active += counter_read(c.flows_active);
    t.flows_established += counter_read(c.flows_established);
    t.flows_closing += counter_read(c.flows_closing);
    t.stateless_packets += counter_read(c.stateless_packets);
    t.fast_path_packets += counter_read(c.fast_path_packets);
    t.arp_replies += counter_read(c.arp_replies);
    t.nd_adverts += counter_read(c.nd_adverts);
    t.echo_replies += counter_read(c.echo_replies);
    t.arp_requests += counter_read(c.arp_requests);
    t.nd_solicits += counter_read(c.nd_solicits);
    t.neighbors_learned += counter_read(c.neighbors_learned);
    t.pending += counter_read(c.pending_now);
    t.busy_cycles += counter_read(c.busy_cycles);
    t.handoff_in += counter_read(c.handoff_in);
    t.handoff_out += counter_read(c.handoff_out);
    t.host_in += counter_read(c.host_in);
    t.host_out += counter_read(c.host_out);
    t.flows_evicted += counter_read(c.flows_evicted);
    t.icmp_errors_translated += counter_read(c.icmp_errors_translated);
    t.icmp_errors_sent += counter_read(c.icmp_errors_sent);
    t.resets_sent += counter_read(c.resets_sent);
    t.stack_frames_out += counter_read(c.stack_frames_out);
    t.icmp_rate_limited += counter_read(c.icmp_rate_limited);
    t.fragments_followed += counter_read(c.fragments_followed);
    t.busy_loops += counter_read(c.busy_loops);
    t.loops += counter_read(c.loops);
  }
  return t;
}

std::vector<PortCounters> read_port_counters(const std::vector<dp::PortRuntime>& ports) {
  std::vector<PortCounters> out;
  out.reserve(ports.size());
  for (const dp::PortRuntime& p : ports) {
    PortCounters c;
    c.name = p.name;
    rte_eth_stats st{};
    if (rte_eth_stats_get(p.port_id, &st) == 0) {
      c.ipackets = st.ipackets;
      c.opackets = st.opackets;
      c.ibytes = st.ibytes;
      c.obytes = st.obytes;
      c.imissed = st.imissed;
      c.ierrors = st.ierrors;
      c.oerrors = st.oerrors;
      c.rx_nombuf = st.rx_nombuf;
    }
    const int n = rte_eth_xstats_get(p.port_id, nullptr, 0);
    if (n > 0) {
      std::vector<rte_eth_xstat> xs(static_cast<size_t>(n));
      std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
      const int got = rte_eth_xstats_get(p.port_id, xs.data(), uint32_t(n));
      const int named = rte_eth_xstats_get_names(p.port_id, names.data(), uint32_t(n));
      for (int k = 0; k < std::min(got, named); ++k) {
        if (xs[size_t(k)].value == 0 || xs[size_t(k)].id >= uint64_t(named)) continue;
        if (c.xstats.size() == kMaxPortXstats) break;
        c.xstats.emplace_back(names[size_t(xs[size_t(k)].id)].name, xs[size_t(k)].value);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

nlohmann::json stats_json(const std::vector<const dp::Worker*>& workers,
                          const StatRegistry& registry, const dp::Snapshot* snap,
                          const std::vector<PortCounters>& ports) {
  const StatsTotals t = sum_counters(workers);
  nlohmann::json j;
  j["packets_in"] = t.packets_in;
  j["packets_out"] = t.packets_out;
  j["bytes_in"] = t.bytes_in;
  j["bytes_out"] = t.bytes_out;
  j["packets_generated"] = t.generated;
  j["packets_consumed"] = t.consumed;
  j["packets_to_host"] = t.host_out;
  j["packets_from_host"] = t.host_in;
  j["packets_pending"] = t.pending;
  j["drops_total"] = t.drops_total;
  nlohmann::json drops = nlohmann::json::object();
  for (uint32_t r = 1; r < dp::kNumDrops; ++r) drops[dp::kDropNames[r]] = t.drops[r];
  j["drops"] = drops;
  j["flows_created"] = t.flows_created;
  j["flows_moved"] = t.flows_moved;
  j["flows_expired"] = t.flows_expired;
  j["flows_active"] = t.flows_active;
  j["flows_established"] = t.flows_established;
  j["flows_closing"] = t.flows_closing;
  j["stateless_packets"] = t.stateless_packets;
  j["fast_path_packets"] = t.fast_path_packets;
  j["flows_evicted"] = t.flows_evicted;
  j["handoff_in"] = t.handoff_in;
  j["handoff_out"] = t.handoff_out;
  j["icmp_errors_translated"] = t.icmp_errors_translated;
  j["icmp_errors_sent"] = t.icmp_errors_sent;
  j["resets_sent"] = t.resets_sent;
  j["stack_frames_out"] = t.stack_frames_out;
  j["icmp_rate_limited"] = t.icmp_rate_limited;
  j["fragments_followed"] = t.fragments_followed;
  j["arp_replies"] = t.arp_replies;
  j["nd_adverts"] = t.nd_adverts;
  j["echo_replies"] = t.echo_replies;
  j["arp_requests"] = t.arp_requests;
  j["nd_solicits"] = t.nd_solicits;
  j["neighbors_learned"] = t.neighbors_learned;
  j["snapshot_version"] = snap ? snap->version : 0;
  j["tsc_hz"] = rte_get_tsc_hz();  // busy_cycles per second
  nlohmann::json pa = nlohmann::json::array();
  for (const PortCounters& p : ports) {
    nlohmann::json xj = nlohmann::json::object();
    for (const auto& [name, v] : p.xstats) xj[name] = v;
    pa.push_back({{"name", p.name},
                  {"xstats", xj},
                  {"ipackets", p.ipackets},
                  {"opackets", p.opackets},
                  {"ibytes", p.ibytes},
                  {"obytes", p.obytes},
                  {"imissed", p.imissed},
                  {"ierrors", p.ierrors},
                  {"oerrors", p.oerrors},
                  {"rx_nombuf", p.rx_nombuf}});
  }
  j["ports"] = pa;
  if (const ProxyTotals pt = proxy_totals(workers); pt.any) {
    nlohmann::json pj = nlohmann::json::object();
    for (uint32_t i = 0; i < dp::kProxyCounterCount; ++i) {
      pj[dp::kProxyCounterNames[i]] = pt.sum.proxy[i];
    }
    pj["sessions_active"] = pt.sum.sessions_active;
    j["proxy"] = pj;
    nlohmann::json tj = nlohmann::json::object();
    for (uint32_t i = 0; i < dp::tcp::kTcpCounterCount; ++i) {
      tj[dp::tcp::kTcpCounterNames[i]] = pt.sum.tcp[i];
    }
    tj["connections"] = pt.sum.tcp_connections;
    tj["mem_bytes"] = pt.sum.tcp_mem_bytes;
    j["tcp"] = tj;
  }

  if (const HboneTotals ht = hbone_totals(workers); ht.any) {
    nlohmann::json hj = nlohmann::json::object();
    for (int i = 0; i < dp::hbone::kNumCounters; ++i) {
      hj[dp::hbone::counter_name(dp::hbone::Counter(i))] = ht.sum.engine[i];
    }
    for (int i = 0; i < dp::hbone::kNumGwCounters; ++i) {
      hj[dp::hbone::gw_counter_name(dp::hbone::GwCounter(i))] = ht.sum.gw[i];
    }
    hj["connections"] = ht.sum.connections_active;
    hj["tunnels"] = ht.sum.tunnels_active;
    hj["handshakes"] = ht.sum.handshakes_active;
    hj["buffer_bytes"] = ht.sum.buffer_bytes;
    j["hbone"] = hj;
  }

  nlohmann::json services = nlohmann::json::object();
  nlohmann::json listeners = nlohmann::json::object();
  if (snap) {
    for (const dp::SnapService& s : snap->services) {
      if (s.listener == 0) continue;
      const dp::SnapListener& l = snap->listeners[s.listener - 1];
      const dp::ListenerCounters lc = listener_totals(workers, l.stat_id);
      nlohmann::json lj;
      lj["vip"] = s.vip.str();
      lj["port"] = ntohs(s.port_be);
      lj["match"] = l.source == dp::NameSource::kSni ? "sni" : "host";
      nlohmann::json rejected = nlohmann::json::object();
      for (uint32_t i = 0; i < dp::kListenerCounterCount; ++i) {
        (i >= dp::kFirstListenerReject ? rejected : lj)[dp::kListenerCounterNames[i]] = lc.v[i];
      }
      lj["rejected"] = rejected;
      nlohmann::json routes = nlohmann::json::array();
      for (uint32_t i = 0; i < l.routes.size(); ++i) {
        const dp::RouteCounters rc = route_totals(workers, l.routes[i].stat_id);
        const RouteNames names = route_names(*snap, l, i);
        routes.push_back({{"route", names.route},
                          {"service", names.service},
                          {"connections", rc.connections},
                          {"bytes_to_backend", rc.bytes_to_backend},
                          {"bytes_to_client", rc.bytes_to_client}});
      }
      lj["routes"] = routes;
      listeners[l.name] = lj;
    }
    for (const dp::SnapService& s : snap->services) {
      // A node_port entry is its service again: counted there.
      if (s.listener != 0 || s.node_port_of != 0) continue;
      nlohmann::json sj;
      sj["vip"] = s.vip.str();
      sj["port"] = ntohs(s.port_be);
      sj["protocol"] = s.proto == 6 ? "tcp" : "udp";
      sj["mode"] = dp::mode_name(s.mode);
      nlohmann::json backends = nlohmann::json::object();
      uint64_t packets = 0, flows = 0;
      for (uint32_t b = 0; b < s.n_backends; ++b) {
        const dp::SnapBackend& be = snap->backends[s.first_backend + b];
        const dp::BackendCounters c = backend_sum(workers, be.stat_id);
        backends[registry.names()[be.stat_id].backend] = {
            {"packets", c.packets}, {"bytes", c.bytes}, {"reply_bytes", c.reply_bytes},
            {"flows", c.flows}, {"weight", be.weight}};
        packets += c.packets;
        flows += c.flows;
      }
      sj["packets"] = packets;
      sj["flows"] = flows;
      sj["backends"] = backends;
      services[s.name] = sj;
    }
  }
  j["services"] = services;
  if (!listeners.empty()) j["listeners"] = listeners;

  nlohmann::json wj = nlohmann::json::array();
  for (const auto* w : workers) {
    const dp::WorkerCounters& c = w->counters();
    const uint64_t rx = dp::counter_read(c.rx_packets);
    const uint64_t cycles = dp::counter_read(c.busy_cycles);
    const double secs = w->run_seconds();
    wj.push_back({{"index", w->index()},
                  {"run_seconds", secs},
                  {"mpps", secs > 0 ? double(rx) / secs / 1e6 : 0.0},
                  {"packets_in", rx},
                  {"packets_out", dp::counter_read(c.tx_packets)},
                  {"loops", dp::counter_read(c.loops)},
                  {"busy_cycles", cycles},
                  {"cycles_per_packet", rx ? double(cycles) / double(rx) : 0.0},
                  {"flows_active", dp::counter_read(c.flows_active)}});
  }
  j["workers"] = wj;
  return j;
}

std::string l2_hint(uint64_t packets_in, uint64_t l2_not_for_us) {
  if (packets_in == 0 || l2_not_for_us * 2 <= packets_in) return "";
  return "  hint              most frames were for another MAC (l2_not_for_us); replaying a "
         "capture from elsewhere? set promiscuous = true on the port or pass --promiscuous\n";
}

std::string replay_rate_text(uint64_t packets, uint64_t bytes, double seconds) {
  const double bps = seconds > 0 ? double(bytes) / seconds : 0;
  const double pps = seconds > 0 ? double(packets) / seconds : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "Actual: %" PRIu64 " packets (%" PRIu64 " bytes) processed in %.6f seconds\n"
                "Rated: %.1f Bps, %.2f Mbps, %.2f pps\n",
                packets, bytes, seconds > 0 ? seconds : 0.0, bps, bps * 8 / 1e6, pps);
  return buf;
}

std::string cycles_hint(double cycles_per_packet) {
  if (cycles_per_packet <= kSharedCoreCyclesPerPacket) return "";
  return "  hint              cycles/packet this high means the worker was off its CPU while "
         "busy: its core is probably shared with another busy process (a DPDK process on the "
         "same lcores?); give each its own CPUs\n";
}

std::string generated_text(const StatsTotals& t) {
  const uint64_t built =
      t.arp_requests + t.nd_solicits + t.icmp_errors_sent + t.resets_sent + t.stack_frames_out;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "  generated         %12" PRIu64 "  (ARP requests %" PRIu64
                ", neighbor solicitations %" PRIu64 ", ICMP errors %" PRIu64
                ", drain TCP RSTs %" PRIu64 ", TCP stack frames %" PRIu64,
                t.generated, t.arp_requests, t.nd_solicits, t.icmp_errors_sent, t.resets_sent,
                t.stack_frames_out);
  std::string s = buf;
  // A packet is counted as generated before its mbuf is taken; one that could not be built is
  // dropped as mbuf_exhausted and is none of the kinds above.
  if (t.generated > built) {
    std::snprintf(buf, sizeof buf, ", not built for want of an mbuf %" PRIu64,
                  t.generated - built);
    s += buf;
  }
  return s + ")\n";
}

std::string summary_text(const std::vector<const dp::Worker*>& workers,
                         const StatRegistry& registry, const dp::Snapshot* snap,
                         const std::vector<PortCounters>& ports) {
  const StatsTotals t = sum_counters(workers);
  std::string s;
  char line[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    s += line;
  };
  add("meshgate summary\n");
  add("  packets in        %12" PRIu64 "  (%" PRIu64 " bytes)\n", t.packets_in, t.bytes_in);
  add("  packets out       %12" PRIu64 "  (%" PRIu64 " bytes)\n", t.packets_out, t.bytes_out);
  s += generated_text(t);
  add("  consumed          %12" PRIu64 "  (ARP replies / neighbor advertisements learned)\n", t.consumed);
  add("  answered          ARP %" PRIu64 ", NDP %" PRIu64 ", echo %" PRIu64 "\n", t.arp_replies,
      t.nd_adverts, t.echo_replies);
  if (t.host_in || t.host_out) {
    add("  host interfaces   %12" PRIu64 " to the kernel, %" PRIu64 " from it\n", t.host_out,
        t.host_in);
  }
  // The port's own view: frames it lost before meshgate saw them are not in the drops below.
  for (const PortCounters& p : ports) {
    add("  port %-12s in %" PRIu64 ", out %" PRIu64 ", missed %" PRIu64 ", rx errors %" PRIu64
        ", tx errors %" PRIu64 ", no mbuf %" PRIu64 "\n",
        p.name.c_str(), p.ipackets, p.opackets, p.imissed, p.ierrors, p.oerrors, p.rx_nombuf);
  }
  add("  drops             %12" PRIu64 "\n", t.drops_total);
  for (uint32_t r = 1; r < dp::kNumDrops; ++r) {
    if (t.drops[r]) add("    %-26s %10" PRIu64 "\n", dp::kDropNames[r], t.drops[r]);
  }
  s += l2_hint(t.packets_in, t.drops[uint32_t(dp::Drop::kL2NotForUs)]);
  add("  flows created     %12" PRIu64 "\n", t.flows_created);
  add("  flows expired     %12" PRIu64 "\n", t.flows_expired);
  add("  flows active      %12" PRIu64 "\n", t.flows_active);
  if (t.stateless_packets) {
    add("  stateless         %12" PRIu64 "  (forwarded without a flow entry: table full)\n",
        t.stateless_packets);
  }
  if (snap && !snap->services.empty()) {
    add("  services\n");
    for (const dp::SnapService& sv : snap->services) {
      if (sv.node_port_of != 0) continue;
      add("    %-12s %s %s %s\n", sv.name.c_str(),
          endpoint_str(sv.vip, ntohs(sv.port_be)).c_str(), sv.proto == 6 ? "tcp" : "udp",
          dp::mode_name(sv.mode));
      for (uint32_t b = 0; b < sv.n_backends; ++b) {
        const dp::SnapBackend& be = snap->backends[sv.first_backend + b];
        const dp::BackendCounters c = backend_sum(workers, be.stat_id);
        add("      -> %-28s weight %-4u packets %10" PRIu64 "  flows %8" PRIu64 "\n",
            registry.names()[be.stat_id].backend.c_str(), be.weight, c.packets, c.flows);
      }
    }
  }
  if (t.busy_loops) {
    const double per_packet = double(t.busy_cycles) / double(t.packets_in ? t.packets_in : 1);
    add("  cycles/packet     %12.1f  (busy poll iterations only)\n", per_packet);
    s += cycles_hint(per_packet);
  }
  if (t.handoff_out || t.icmp_errors_translated || t.icmp_errors_sent || t.fragments_followed) {
    add("  handed over       %12" PRIu64 "  (to the worker owning the flow)\n", t.handoff_out);
    add("  icmp errors       %12" PRIu64 " translated, %" PRIu64 " sent, %" PRIu64
        " rate-limited\n", t.icmp_errors_translated, t.icmp_errors_sent, t.icmp_rate_limited);
    add("  fragments         %12" PRIu64 " followed their first fragment\n",
        t.fragments_followed);
  }
  if (const ProxyTotals pt = proxy_totals(workers); pt.any) {
    const auto& pc = pt.sum.proxy;
    add("  proxy             %12" PRIu64 " accepted, %" PRIu64 " closed cleanly, %" PRIu64
        " client resets, %" PRIu64 " backend resets, %" PRIu64 " refused by backends, %" PRIu64
        " idle timeouts\n", pc[dp::kPxAccepted], pc[dp::kPxSessionsClosed], pc[dp::kPxClientResets],
        pc[dp::kPxBackendResets], pc[dp::kPxBackendRefused], pc[dp::kPxIdleTimeouts]);
    add("  proxy bytes       %12" PRIu64 " to backends, %" PRIu64 " to clients\n",
        pc[dp::kPxBytesToBackend], pc[dp::kPxBytesToClient]);
    add("  tcp               %12" PRIu64 " segments in, %" PRIu64 " out, %" PRIu64
        " retransmitted, %" PRIu64 " SYN cookies sent, %" PRIu64 " validated\n",
        pt.sum.tcp[dp::tcp::kSegsIn], pt.sum.tcp[dp::tcp::kSegsOut],
        pt.sum.tcp[dp::tcp::kRetransSegs], pt.sum.tcp[dp::tcp::kSyncookiesSent],
        pt.sum.tcp[dp::tcp::kSyncookiesValidated]);
  }
  add("  accounting        in + generated + handed in + from host = out + consumed + drops + "
      "pending + handed out + to host: %s\n",
      t.balanced() ? "ok" : "MISMATCH");
  return s;
}

}  // namespace meshgate::ctl
