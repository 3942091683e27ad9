// Per-worker counters. Written only by the owning worker; read (summed) by the control thread.
// Single-writer counters need no atomic read-modify-write: a relaxed store of the incremented
// value keeps the compiler from tearing or caching it, and costs the same as a plain add.
#pragma once

#include <atomic>
#include <cstdint>

#include "dataplane/common/compiler.h"
#include "dataplane/drop_reasons.h"

namespace meshgate::dp {

MG_ALWAYS_INLINE void counter_add(uint64_t& c, uint64_t n) {
  std::atomic_ref<uint64_t>(c).store(c + n, std::memory_order_relaxed);
}
MG_ALWAYS_INLINE uint64_t counter_read(const uint64_t& c) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(c)).load(std::memory_order_relaxed);
}

struct MG_CACHE_ALIGNED WorkerCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  // Packets the gateway originated: ARP requests, neighbor solicitations, ICMP errors, drain
  // RSTs and the TCP stack's frames (each counted below too, once built).
  uint64_t generated = 0;
  uint64_t consumed = 0;   // packets terminated here without an answer (ARP replies, NAs learned)
  uint64_t drops[kNumDrops] = {};
  uint64_t flows_created = 0;
  uint64_t flows_moved = 0;  // UDP flows of a stale backend moved to a live one (also created)
  uint64_t flows_expired = 0;
  uint64_t flows_active = 0;  // gauge
  uint64_t flows_established = 0;  // gauge: TCP flows in ESTABLISHED
  uint64_t flows_closing = 0;      // gauge: TCP flows in FIN_WAIT, CLOSE_WAIT or LAST_ACK
  uint64_t stateless_packets = 0;  // forwarded without a flow entry: the table was full
  uint64_t fast_path_packets = 0;  // forwarded by the established-flow fast path (stage_fast)
  uint64_t flows_evicted = 0;      // not-yet-established flows reclaimed to make room
  uint64_t handoff_in = 0;         // packets received from other workers' rings
  uint64_t handoff_out = 0;        // packets sent to the owning worker's ring
  uint64_t host_out = 0;  // packets given to a port's kernel twin (host interface)
  uint64_t host_in = 0;   // packets the kernel sent through a twin, transmitted on its port
  uint64_t icmp_errors_translated = 0;
  uint64_t icmp_errors_sent = 0;   // time exceeded, fragmentation needed / packet too big
  uint64_t icmp_rate_limited = 0;  // errors not sent: over the rate limit
  uint64_t resets_sent = 0;        // TCP RSTs refusing new connections during a drain
  uint64_t fragments_followed = 0; // later fragments translated like their first
  uint64_t stack_frames_out = 0;   // frames the TCP stack (proxy, HBONE) sent
  uint64_t arp_replies = 0;
  uint64_t nd_adverts = 0;
  uint64_t echo_replies = 0;
  uint64_t arp_requests = 0;
  uint64_t nd_solicits = 0;
  uint64_t neighbors_learned = 0;
  uint64_t pending_now = 0;   // gauge: packets waiting for a neighbor, or held for the next poll
  uint64_t loops = 0;         // poll loop iterations (healthz: advances while polling)
  uint64_t busy_loops = 0;    // iterations that received packets
  uint64_t busy_cycles = 0;   // TSC cycles spent in iterations that received packets
  uint64_t snapshot_version = 0;  // version last used by this worker
};

// Per listener route (SnapRoute::stat_id): connections routed and payload bytes each way, by
// the proxy or, for a route into the mesh, the HBONE originator.
struct RouteCounters {
  uint64_t connections = 0;
  uint64_t bytes_to_backend = 0;
  uint64_t bytes_to_client = 0;
};

struct BackendCounters {
  uint64_t packets = 0;      // packets of the backend's flows, both directions
  uint64_t bytes = 0;        // client -> backend
  uint64_t flows = 0;        // flows created (counter)
  uint64_t reply_bytes = 0;  // backend -> client
};

// Backend counter slots per worker; stat ids beyond it share slot 0 ("other").
inline constexpr uint32_t kMaxBackendStats = 1u << 18;

}  // namespace meshgate::dp
