// What one worker owns: its parameters, counters, flow table, neighbor cache,
// next-hop cache, pending queue, TX buffers, the snapshot and clock of the poll in progress,
// and the L4 applications running on it. The stages of every room (l2/, route/, nat/, lb/,
// local/, worker/) take it with the burst: `stage_x(WorkerCtx&, Burst&, ...)`.
// Worker thread only (init() fills it on the control thread before launch).
#pragma once

#include <cstdint>
#include <vector>

#include "dataplane/accesslog/access_record.h"
#include "dataplane/common/compiler.h"
#include "dataplane/common/limits.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/l2/neighbor.h"
#include "dataplane/nat/frag.h"
#include "dataplane/nat/fullnat_source.h"
#include "dataplane/nat/rss.h"
#include "dataplane/route/nh_cache.h"
#include "dataplane/route/pending.h"
#include "dataplane/snapshot/addr_table.h"
#include "dataplane/snapshot/snapshot_slot.h"
#include "dataplane/worker/burst.h"
#include "dataplane/worker/counters.h"
#include "dataplane/worker/port.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;
struct rte_rcu_qsbr;

namespace meshgate::dp {

class AffinityTable;
class Proxy;
struct ProxyParams;
class StackHost;
namespace hbone {
class Gateway;
struct GatewayParams;
}  // namespace hbone

// ICMP errors a worker may send per second, and the burst above that (Linux icmp_ratelimit).
inline constexpr uint32_t kIcmpErrorsPerSecond = 1000;
inline constexpr uint32_t kIcmpErrorBurst = 50;

// The worker's millisecond clock (conntrack's) from its nanosecond clock.
inline uint32_t now_ms_of(uint64_t ns) { return uint32_t(ns / 1'000'000); }

struct WorkerParams {
  uint16_t index = 0;  // worker number; also its RX/TX queue id on every port
  uint16_t n_workers = 1;
  int socket = 0;
  std::vector<PortRuntime> ports;
  SnapshotSlot* snapshot = nullptr;
  const AddrTable* addrs = nullptr;
  // Session affinity choices, shared by every worker (dataplane/lb/affinity.h); null: services
  // with session affinity pick by the client's address alone, without memory.
  AffinityTable* affinity = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;      // may be null (tests)
  rte_mempool* pool = nullptr;       // for packets the worker originates
  uint32_t max_flows = 1024;
  ConntrackTimeouts timeouts;
  rte_ring* neighbor_out = nullptr;  // learned neighbors -> control thread (may be null)
  rte_ring* neighbor_in = nullptr;   // neighbors learned elsewhere -> this worker (may be null)
  // Host interfaces (control/host/host_interface.h): packets for a port's kernel twin go to
  // `host_out` (shared by the workers; each mbuf's `port` field holds the port index), and
  // worker 0 transmits what the kernel sent through port p's twin from `host_in[p]`. Null:
  // the port has no twin. `host_twin[p]`: port p has one (host_out is then set).
  rte_ring* host_out = nullptr;
  bool host_twin[kMaxPorts] = {};
  rte_ring* host_in[kMaxPorts] = {};
  rte_ring* handoff_to[kMaxWorkers] = {};    // to worker w (null for self)
  rte_ring* handoff_from[kMaxWorkers] = {};  // from worker w (null for self)
  const RssPredictor* rss[kMaxPorts] = {};   // per port index; null without RSS
  // Ports whose NIC steers fullnat replies by rte_flow rules (port % workers -> queue): the
  // source-port choice then needs no RSS prediction.
  bool flow_steered[kMaxPorts] = {};
  // Replay: the clock follows RX timestamps (net_pcap: microseconds) and the worker stops by
  // itself after `replay_packets` packets were received.
  bool replay = false;
  uint64_t replay_packets = 0;
  // Pipeline full bursts of established traffic over two polls (Worker::rx_port). Off for
  // replays (their clock comes from the packets: a held burst would be processed after the
  // next burst moved the clock), for workers that run the TCP stack (init() clears it) and by
  // default in tests that count polls.
  bool pipeline = false;
  int timestamp_offset = -1;  // mbuf dynfield offset of the RX timestamp
  uint64_t timestamp_flag = 0;
  // Non-null: run the TCP stack (ProxyParams::tcp) and the L4 proxy on it (the worker copies
  // it at init()).
  const ProxyParams* proxy = nullptr;
  // Non-null (with `proxy`): run the HBONE gateway on the same stack: terminate HBONE on the
  // [hbone] port of every local address, originate it for tunnel = hbone (copied at init()).
  const hbone::GatewayParams* hbone = nullptr;
  // The access log's ring (this worker the producer; null: no access log) and whether
  // packet-mode flows write flow-end records too.
  AccessRing* access_log = nullptr;
  bool access_log_flows = false;
};

struct TxBuffer {
  rte_mbuf* pkts[2 * kBurst];
  uint64_t bytes = 0;  // of pkts[0, n): tx() adds each length as it queues the packet
  uint16_t n = 0;
};

struct WorkerCtx {
  WorkerParams p;
  WorkerCounters counters;
  BackendCounters* backend_counters = nullptr;  // kMaxBackendStats slots
  FlowTable flows;
  FragTable* frags = nullptr;
  NeighborCache* neighbors = nullptr;
  PendingQueue* pending = nullptr;
  NhCache nh;
  // The TCP stack (with proxy services) and its applications, or null.
  StackHost* stack = nullptr;
  Proxy* proxy = nullptr;
  hbone::Gateway* hbone = nullptr;
  uint16_t hbone_port_be = 0;
  AccessLog access_log;
  // The poll in progress: its snapshot (null between polls), clock and drain state.
  const Snapshot* snap = nullptr;
  uint64_t now_ns = 0;
  bool draining = false;
  // The fullnat source choice conntrack and the stack's active opens share.
  FullnatSource fullnat;
  double icmp_tokens = kIcmpErrorBurst;
  uint64_t icmp_last_ns = 0;
  TxBuffer txq[kMaxPorts];

  uint32_t now_ms() const { return now_ms_of(now_ns); }
  void tx(uint16_t port_index, rte_mbuf* m);
  // The same for a caller that has the packet's length at hand.
  void tx(uint16_t port_index, rte_mbuf* m, uint32_t len) {
    TxBuffer& b = txq[port_index];
    b.pkts[b.n++] = m;
    b.bytes += len;
    if (b.n == sizeof(b.pkts) / sizeof(b.pkts[0])) flush_tx();
  }
  void flush_tx();
  void drop(rte_mbuf* m, Drop reason);
  // The backend counter slot of a snapshot backend (slot 0 past the table's capacity).
  static uint32_t stat_slot(const SnapBackend& be) {
    return be.stat_id < kMaxBackendStats ? be.stat_id : 0;
  }
};

}  // namespace meshgate::dp
