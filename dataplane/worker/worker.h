// A worker lcore: the run-to-completion poll loop. For each port it owns one RX and one TX
// queue; each burst goes through the stages parse -> classify -> l4 (conntrack + NAT, local
// responders) -> route (LPM + neighbor) -> dispatch (TX / pending / drop), every stage with the
// same burst signature writing each packet's next step (STYLE.md rule 2). Then timers, handoff
// of neighbor updates, and an RCU quiescent-state report.
//
// Threads: init() on the control thread before launch; run() / poll_once() on the worker lcore;
// request_stop(), counters() and done() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "dataplane/common/compiler.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/l2/neighbor.h"
#include "dataplane/packet/parse.h"
#include "dataplane/snapshot/snapshot_slot.h"
#include "dataplane/worker/counters.h"
#include "dataplane/worker/flow_dump.h"
#include "dataplane/worker/port.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;
struct rte_rcu_qsbr;

namespace meshgate::dp {

inline constexpr uint16_t kBurst = 32;

struct WorkerParams {
  uint16_t index = 0;  // worker number; also its RX/TX queue id on every port
  int socket = 0;
  std::vector<PortRuntime> ports;
  SnapshotSlot* snapshot = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;      // may be null (tests)
  rte_mempool* pool = nullptr;       // for packets the worker originates
  uint32_t max_flows = 1024;
  ConntrackTimeouts timeouts;
  rte_ring* neighbor_out = nullptr;  // learned neighbors -> control thread (may be null)
  rte_ring* neighbor_in = nullptr;   // neighbors learned elsewhere -> this worker (may be null)
  // Replay: the clock follows RX timestamps (net_pcap: microseconds) and the worker stops by
  // itself after `replay_packets` packets were received.
  bool replay = false;
  uint64_t replay_packets = 0;
  int timestamp_offset = -1;  // mbuf dynfield offset of the RX timestamp
  uint64_t timestamp_flag = 0;
};

class Worker {
 public:
  Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  bool init(const WorkerParams& p);

  // The lcore entry: polls until stopped (or until the replay input is consumed), then finish().
  int run();
  // One iteration of the loop; returns packets received.
  uint32_t poll_once();
  // Flushes TX, drops what still waits for a neighbor. Called by run() before it returns.
  void finish();

  void request_stop() { stop_.store(true, std::memory_order_relaxed); }
  // Draining: packets of existing flows keep flowing, packets that would start a new flow are
  // dropped (reason "draining"). Any thread.
  void set_draining(bool on) { draining_.store(on, std::memory_order_relaxed); }

  // Control thread: asks the running worker for a copy of up to r->max flows. False when a
  // request is already pending. The worker sets r->done (release) when r->count is final.
  bool post_flow_dump(FlowDumpRequest* r);
  // Control thread, only once done() is true (the worker no longer runs): copies directly.
  void dump_flows_stopped(FlowDumpRequest* r) const;
  bool done() const { return done_.load(std::memory_order_acquire); }
  uint16_t index() const { return p_.index; }

  const WorkerCounters& counters() const { return counters_; }
  const BackendCounters* backend_counters() const { return backend_counters_; }
  // Conntrack; read by the control thread only while the worker is stopped, or for gauges.
  const FlowTable& flows() const { return flows_; }
  uint64_t now_ns() const { return now_ns_; }
  // Seconds run() has been polling (until now, or until it returned).
  double run_seconds() const;
  // Replay clock: moves it forward to `ns` (never back). The replay follows packet timestamps;
  // this lets a driver with no packet to deliver (tests, idle replays) let timers run.
  void advance_clock(uint64_t ns) {
    if (ns > now_ns_) now_ns_ = ns;
  }

 private:
  enum Next : uint8_t {
    kNextDrop,
    kNextIp,       // parsed IPv4/IPv6, to classify
    kNextArp,
    kNextNdp,
    kNextLookup,   // not a service: a flow's reply, local, or nothing (after kNextService)
    kNextLocal,    // to a local address or VIP without a service
    kNextService,  // to a service VIP:port
    kNextReply,    // reply of a tracked flow
    kNextRoute,    // ready for route + neighbor + L2 rewrite
    kNextTx,       // out_[i] says which port
    kNextPending,  // waiting for a neighbor
    kNextConsumed, // terminated here, nothing to send
  };

  struct TxBuffer {
    rte_mbuf* pkts[2 * kBurst];
    uint16_t n = 0;
  };

  void process_burst(uint16_t in_port, rte_mbuf** pkts, uint16_t n);
  void stage_parse(uint16_t in_port, rte_mbuf** pkts, uint16_t n);
  void stage_classify(rte_mbuf** pkts, uint16_t n);
  void stage_l2(uint16_t in_port, rte_mbuf** pkts, uint16_t n);
  void stage_local(rte_mbuf** pkts, uint16_t n);
  void stage_service(rte_mbuf** pkts, uint16_t n);
  void stage_lookup(rte_mbuf** pkts, uint16_t n);
  void stage_reply(rte_mbuf** pkts, uint16_t n);
  // DNAT of a client packet to its flow's backend (`f` may be null: stateless, to `be`).
  void forward(rte_mbuf* m, uint16_t i, Flow* f, const IpAddr& backend, uint16_t backend_port,
               uint32_t stat_id);
  void stage_route(rte_mbuf** pkts, uint16_t n);
  void stage_dispatch(rte_mbuf** pkts, uint16_t n);

  void handle_arp(uint16_t in_port, rte_mbuf* m, uint16_t i);
  void handle_ndp(uint16_t in_port, rte_mbuf* m, uint16_t i);
  // Resolves the next hop's MAC; false when unresolved (an ARP/NS request may have been sent).
  bool resolve(const IpAddr& nh, uint16_t port_index, MacAddr* mac);
  void solicit(NeighborCache::Entry* e, uint16_t port_index);
  void learn(const IpAddr& a, const MacAddr& mac, uint16_t port_index, bool from_wire);
  void write_l2(rte_mbuf* m, const PacketMeta& meta, uint16_t port_index, const MacAddr& dst);
  void tx(uint16_t port_index, rte_mbuf* m);
  void flush_tx();
  void drop(rte_mbuf* m, Drop reason);
  void service_pending();
  void drain_neighbor_ring();
  void update_clock(rte_mbuf** pkts, uint16_t n);
  void serve_flow_dump();
  // Copies flows from r->cursor into r until `budget` pool slots were visited or r is full;
  // true when the request is complete.
  bool copy_flows(FlowDumpRequest* r, uint32_t budget) const;
  // Local source address on `port_index` for talking to `peer` (same prefix, else the first of
  // its family); nullptr when the port has none of that family.
  const IpPrefix* source_for(uint16_t port_index, const IpAddr& peer) const;
  bool on_link(uint16_t port_index, const IpAddr& a) const;
  int port_index_of(uint16_t port_id) const;

  WorkerParams p_;
  WorkerCounters counters_;
  BackendCounters* backend_counters_ = nullptr;
  FlowTable flows_;
  NeighborCache* neighbors_ = nullptr;
  PendingQueue* pending_ = nullptr;
  TxBuffer tx_[kMaxPorts];
  const Snapshot* snap_ = nullptr;
  uint64_t now_ns_ = 0;
  uint64_t tsc_hz_ = 0;
  uint64_t tsc_start_ = 0;
  std::atomic<uint64_t> run_start_tsc_{0};
  std::atomic<uint64_t> run_end_tsc_{0};
  int8_t port_index_by_id_[256];
  std::atomic<FlowDumpRequest*> dump_req_{nullptr};
  std::atomic<bool> stop_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> done_{false};

  // Per-burst scratch, indexed by position in the burst.
  PacketMeta meta_[kBurst];
  uint8_t next_[kBurst];
  Drop drop_[kBurst];
  uint16_t out_[kBurst];     // egress port index (kNextTx / kNextPending)
  bool forward_[kBurst];     // transit packet: decrement TTL in route
  IpAddr nh_[kBurst];        // next hop (kNextPending)
  Flow* flow_[kBurst];
  uint8_t dir_[kBurst];
};

}  // namespace meshgate::dp
