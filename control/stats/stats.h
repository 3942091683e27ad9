// Sums per-worker counters into the views operators read: the --stats-json / GET /stats JSON
// and the end-of-run summary. Control thread; reads worker counters with relaxed loads.
#pragma once

#include <nlohmann/json.hpp>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "control/snapshot/stat_registry.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/hbone/gateway.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/worker/port.h"
#include "dataplane/worker/worker.h"

namespace meshgate::ctl {

struct StatsTotals {
  uint64_t packets_in = 0, packets_out = 0, bytes_in = 0, bytes_out = 0;
  uint64_t generated = 0, consumed = 0, drops_total = 0;
  uint64_t drops[dp::kNumDrops] = {};
  uint64_t flows_created = 0, flows_expired = 0, flows_active = 0, flows_established = 0,
           flows_closing = 0, stateless_packets = 0, fast_path_packets = 0, flows_moved = 0;
  uint64_t arp_replies = 0, nd_adverts = 0, echo_replies = 0, arp_requests = 0, nd_solicits = 0;
  uint64_t neighbors_learned = 0, pending = 0;
  uint64_t busy_cycles = 0, busy_loops = 0, loops = 0;
  uint64_t handoff_in = 0, handoff_out = 0, flows_evicted = 0;
  uint64_t host_in = 0, host_out = 0;  // from / to the ports' kernel twins
  uint64_t icmp_errors_translated = 0, icmp_errors_sent = 0, icmp_rate_limited = 0;
  uint64_t resets_sent = 0;
  uint64_t stack_frames_out = 0;
  uint64_t fragments_followed = 0;
  // Every packet is accounted for: what came in, was made here or was handed over left, stayed,
  // was handed on (to another worker or a kernel twin), or was dropped. Summed over workers
  // handoffs cancel out once rings are empty.
  bool balanced() const {
    return packets_in + generated + handoff_in + host_in ==
           packets_out + consumed + drops_total + pending + handoff_out + host_out;
  }
};

StatsTotals sum_counters(const std::vector<const dp::Worker*>& workers);

// A packet costs hundreds to a few thousand cycles; a million (~0.3 ms at 3 GHz) is reached only
// when the polling worker is descheduled in the middle of its bursts: another thread runs on its
// core.
inline constexpr double kSharedCoreCyclesPerPacket = 1e6;
// The summary's hint after cycles/packet when it exceeds kSharedCoreCyclesPerPacket, else "".
std::string cycles_hint(double cycles_per_packet);

// The summary's "generated" line: the total and each kind the gateway originates (ARP requests,
// neighbor solicitations, ICMP errors, drain RSTs, the TCP stack's frames), so that a number
// never stands without what it counts.
std::string generated_text(const StatsTotals& t);
StatsTotals sum_counters(const std::vector<const dp::WorkerCounters*>& counters);

// The L4 proxies' counters (dataplane/proxy, dataplane/tcp) summed over workers; `any` is false
// when no worker runs a proxy.
struct ProxyTotals {
  bool any = false;
  dp::ProxyStats sum;
};
ProxyTotals proxy_totals(const std::vector<const dp::Worker*>& workers);

// The HBONE terminators' counters (dataplane/hbone/gateway.h) summed over workers; `any` is false
// when no worker runs one.
struct HboneTotals {
  bool any = false;
  dp::hbone::GatewayStats sum;
};
HboneTotals hbone_totals(const std::vector<const dp::Worker*>& workers);

// One port's own counters (rte_eth_stats_get): what the NIC or PMD saw, frames lost before
// meshgate included (imissed: the RX ring was full; rx_nombuf: the mbuf pool was empty).
struct PortCounters {
  std::string name;  // [[port]] name
  uint64_t ipackets = 0, opackets = 0, ibytes = 0, obytes = 0;
  uint64_t imissed = 0, ierrors = 0, oerrors = 0, rx_nombuf = 0;
  // The driver's extended counters (rte_eth_xstats_get) that are not zero, in the driver's
  // order, at most kMaxPortXstats of them: /stats only (their names vary by driver).
  std::vector<std::pair<std::string, uint64_t>> xstats;
};
inline constexpr size_t kMaxPortXstats = 64;
// Control thread only (rte_eth_stats_get is not for workers): every port's counters, in
// `ports` order. A port whose driver cannot tell gives zeros.
std::vector<PortCounters> read_port_counters(const std::vector<dp::PortRuntime>& ports);

// One backend's counters (stat id from the snapshot) summed over workers.
dp::BackendCounters backend_totals(const std::vector<const dp::Worker*>& workers, uint32_t stat_id);
// A [[listener]]'s counters (SnapListener::stat_id), a route's (SnapRoute::stat_id) and a deny
// pattern's (SnapDeny::stat_ids) summed over the workers' proxies.
dp::ListenerCounters listener_totals(const std::vector<const dp::Worker*>& workers, uint32_t stat_id);
dp::RouteCounters route_totals(const std::vector<const dp::Worker*>& workers, uint32_t stat_id);
uint64_t deny_totals(const std::vector<const dp::Worker*>& workers, uint32_t stat_id);
// How route `i` of listener `l` is named in stats and metrics: its index in the listener (or
// "default"), and its service's name (a mesh service's hostname; "" when not in `snap`).
struct RouteNames {
  std::string route;
  std::string service;
};
RouteNames route_names(const dp::Snapshot& snap, const dp::SnapListener& l, uint32_t i);

// The stats JSON (--stats-json and GET /stats, README.md "Admin API and meshgate-ctl"), with a "ports" array of `ports`.
nlohmann::json stats_json(const std::vector<const dp::Worker*>& workers,
                          const StatRegistry& registry, const dp::Snapshot* snap,
                          const std::vector<PortCounters>& ports);

// Human-readable end-of-run summary, with a line per port. When more than half the packets
// in were dropped as l2_not_for_us it says how to take them (l2_hint).
std::string summary_text(const std::vector<const dp::Worker*>& workers,
                         const StatRegistry& registry, const dp::Snapshot* snap,
                         const std::vector<PortCounters>& ports);

// The hint line for a run whose input went mostly (more than half of `packets_in`) to other
// MACs, "" otherwise: a capture made elsewhere, replayed without promiscuous mode.
std::string l2_hint(uint64_t packets_in, uint64_t l2_not_for_us);

// A replay's closing lines, as tcpreplay ends its own: "Actual: N packets (B bytes) processed
// in S seconds" and "Rated: X Bps, Y Mbps, Z pps" (Mbps = 10^6 bits per second). `seconds`
// of 0 or less gives rates of 0.
std::string replay_rate_text(uint64_t packets, uint64_t bytes, double seconds);

}  // namespace meshgate::ctl
