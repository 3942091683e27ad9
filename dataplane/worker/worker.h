// A worker lcore: the run-to-completion poll loop. For each port it owns one RX and one TX
// queue; each burst goes through the stages
//   parse -> classify -> l2 (ARP/NDP) -> flow -> lookup -> [stack] -> icmp_error -> local
//   -> route -> dispatch
// each a function `stage_x(WorkerCtx&, Burst&, ...)` in the room that owns its logic
// (worker/classify, l2/, lb/service_stage, nat/icmp_stage, local/, route/), writing each
// packet's next step; the worker runs the chain and acts on the verdicts.
// A burst made only of traffic of live flows (any mode, either family) takes a fused path
// instead (worker/fast_path.cc): the same work in a few tight passes, with the same result; any
// other packet in the burst sends the whole burst through the stages.
// Then packets handed over by other workers (worker/handoff.h), timers, neighbor updates, an
// RCU quiescent state.
//
// With proxy services (mode = "proxy") the worker also runs a userspace TCP stack
// (dataplane/stack/stack_host.h) and its applications, the L4 proxy (dataplane/proxy) and the
// HBONE gateway (dataplane/hbone): stage_stack() hands the stack TCP segments to proxy VIPs, to
// the [hbone] port and to [fullnat] addresses that match no flow; the frames it emits go through
// the route stage as generated packets with their L3 metadata (send_generated()); its timers
// run once per poll iteration.
//
// Threads: init() on the control thread before launch; run() / poll_once() on the worker lcore;
// request_stop(), set_draining(), post_flow_dump(), counters() and done() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "dataplane/common/compiler.h"
#include "dataplane/worker/burst.h"
#include "dataplane/worker/context.h"
#include "dataplane/worker/flow_dump.h"

namespace meshgate::dp {

// TSC cycles -> nanoseconds as a 32.32 fixed-point multiply. `cycles * 10^9 / hz` overflows 64
// bits after 2^64 / 10^9 cycles (about 7 s at 2.5 GHz) and the clock would jump back.
inline uint64_t ns_per_tsc_q32(uint64_t tsc_hz) {
  return uint64_t((static_cast<unsigned __int128>(1'000'000'000ull) << 32) / tsc_hz);
}
inline uint64_t tsc_to_ns(uint64_t cycles, uint64_t ns_per_tsc_q32) {
  return uint64_t((static_cast<unsigned __int128>(cycles) * ns_per_tsc_q32) >> 32);
}

class Worker {
 public:
  Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  bool init(const WorkerParams& p);

  // The lcore entry: polls until stopped (or until the replay input is consumed), then finish().
  int run();
  // One iteration of the loop; returns packets received from ports.
  uint32_t poll_once();
  // Flushes TX, drops what still waits for a neighbor. Called by run() before it returns.
  void finish();
  // Drops (counted in, reason handoff_full) what other workers handed to this one after it
  // stopped polling. Control thread, once every worker has stopped: a sibling's last poll may
  // come after this worker's finish().
  void drop_late_handoffs();

  void request_stop() { stop_.store(true, std::memory_order_relaxed); }
  // Draining: packets of existing flows keep flowing, packets that would start a new flow are
  // dropped (reason "draining").
  void set_draining(bool on) { draining_.store(on, std::memory_order_relaxed); }
  bool done() const { return done_.load(std::memory_order_acquire); }
  uint16_t index() const { return c_.p.index; }

  // Asks the running worker for a copy of up to r->max flows. False when a request is already
  // pending. The worker sets r->done (release) when r->count is final.
  bool post_flow_dump(FlowDumpRequest* r);
  // Only once done() is true (the worker no longer runs): copies directly.
  void dump_flows_stopped(FlowDumpRequest* r) const;

  const WorkerCounters& counters() const { return c_.counters; }
  const BackendCounters* backend_counters() const { return c_.backend_counters; }
  const FlowTable& flows() const { return c_.flows; }
  // The L4 proxy, or nullptr without proxy services. Its stats() (which carry the TCP stack's
  // counters) may be read by any thread.
  const Proxy* proxy() const { return c_.proxy; }
  // The TCP stack and its owner, or nullptr without proxy services. Worker thread only (or
  // after the worker stopped).
  const StackHost* stack() const { return c_.stack; }
  // The HBONE terminator, or nullptr without [hbone] certificates. Its stats() may be read by
  // any thread.
  const hbone::Gateway* hbone() const { return c_.hbone; }
  uint64_t now_ns() const { return c_.now_ns; }
  // Seconds run() has been polling (until now, or until it returned).
  double run_seconds() const;
  // Replay clock: moves it forward to `ns` (never back). The replay follows packet timestamps;
  // this lets a driver with no packet to deliver (tests, idle replays) let timers run.
  void advance_clock(uint64_t ns) {
    if (ns > c_.now_ns) c_.now_ns = ns;
  }

 private:
  // What stage_fast's first pass (fast_hash) read of each packet it took, for the later passes:
  // they need not load the mbuf or the header again (each load of a fresh mbuf's fields
  // waits for the driver's copy of the frame, which the first pass already waited for).
  struct FastWire {
    uint8_t* l3[kBurst];      // the IPv4 header
    uint64_t addrs[kBurst];   // its source and destination, as loaded from the header
    uint32_t ports[kBurst];   // the transport source and destination ports, likewise
    uint32_t len[kBurst];     // the frame's length (pkt_len)
    uint16_t total[kBurst];   // the datagram's length (IPv4 total length, IPv6 40 + payload)
    uint8_t proto[kBurst];
    uint8_t tcp_flags[kBurst];  // TCP: the segment's flags; UDP: 0 (PacketMeta::tcp_flags)
    bool v6 = false;  // the burst's family (l3 is then the IPv6 header; addrs is not set)
    bool syn = false;  // a SYN without ACK among them
  };
  // A received burst and what stage_fast's first pass found: `hashed` packets (all of them
  // when the burst may take the fast path) with their flow hash and first bucket, prefetched;
  // `flows_prefetched` once the second pass has prefetched their flows (and set `hint`).
  struct Prepared {
    rte_mbuf* pkts[kBurst];
    uint32_t hash[kBurst];
    uint32_t b0[kBurst];
    uint32_t hint[kBurst];
    FastWire wire;
    uint16_t n = 0;
    uint16_t hashed = 0;
    bool flows_prefetched = false;
  };
  // `hashed`: fast_hash ran on it already (b_.hash, b0_, hint_, wire_, b_.hashed,
  // b_.flows_prefetched).
  void process_burst(uint16_t in_port, rte_mbuf** pkts, uint16_t n, bool hashed = false);
  // process_burst for a burst whose first fast pass ran already (rx_port's pipeline).
  void process_prepared(uint16_t in_port, Prepared& b);
  // Receives one burst from port `pi`, pipelined (see poll_once).
  uint32_t rx_port(uint16_t pi);
  // The established-flow fast path: returns n when it forwarded the whole burst, 0 when it
  // left the burst, unchanged, to the stages. Its first pass (fast_hash: check, hash and
  // prefetch the first bucket, note what the later passes need in `wire`; returns how many
  // packets it hashed before one that cannot take the fast path, and adds their lengths to
  // *bytes when given) and its second (fast_prefetch_flows: the flows' hints) may have run
  // earlier: stage_fast starts after them, from b_.hash, b0_, hint_, wire_, b_.hashed and
  // b_.flows_prefetched.
  uint16_t fast_hash(uint16_t in_port, rte_mbuf** pkts, uint16_t n, uint32_t* hash,
                     uint32_t* b0, FastWire* wire, uint64_t* bytes = nullptr) const;
  void fast_prefetch_flows(const uint32_t* hash, const uint32_t* b0, uint32_t* hint,
                           uint16_t n) const {
    for (uint16_t i = 0; i < n; ++i) hint[i] = c_.flows.prefetch_flows_or_second(hash[i], b0[i]);
  }
  uint16_t stage_fast(uint16_t in_port, rte_mbuf** pkts, uint16_t n, bool hashed);
  // fast_hash for a burst of one family (the first packet's).
  template <bool kV6>
  uint16_t fast_hash_family(uint16_t in_port, rte_mbuf** pkts, uint16_t n, uint32_t* hash,
                            uint32_t* b0, FastWire* wire, uint64_t* bytes) const;
  // stage_fast's third pass (n when it forwarded the burst, else 0) and its last: touch,
  // translate (or encapsulate), count, L2 and TX, for flows of mode kMode, or of any mode per
  // packet with kMixed.
  template <bool kV6>
  uint16_t fast_check(rte_mbuf** pkts, uint16_t n);
  template <bool kV6, Mode kMode, bool kMixed>
  void fast_send(rte_mbuf** pkts, uint16_t n, uint32_t now_ms, uint32_t reply);
  void stage_dispatch(rte_mbuf** pkts, uint16_t n);
  // Proxy: segments to the TCP stack; the frames it emitted through route and dispatch.
  void stage_stack(rte_mbuf** pkts, uint16_t n);
  void send_generated();
  void drain_handoff();
  // Worker 0: transmits what the kernel sent through the ports' twins (WorkerParams::host_in).
  void drain_host();
  void update_clock(rte_mbuf** pkts, uint16_t n);
  void serve_flow_dump();
  bool copy_flows(FlowDumpRequest* r, uint32_t budget) const;
  void sync_table_counters();
  // Loads the current snapshot into c_.snap and starts a new next-hop epoch when its version
  // changed.
  void load_snapshot();
  // A new snapshot version's WorkerSettings into this worker's own tables (config reloads).
  void apply_settings(const WorkerSettings& s);
  void release_held();  // finish(): forwards what is held
  // The access log's flow-end record of a packet-mode flow leaving the flow table
  // ([access_log] flows = true; FlowTable::set_end_hook).
  static void on_flow_end(void* ctx, const Flow& f, uint32_t created_ms, FlowEnd why);

  WorkerCtx c_;
  Burst b_;
  uint64_t tsc_hz_ = 0;
  uint64_t tsc_start_ = 0;
  uint64_t ns_per_tsc_q32_ = 0;  // nanoseconds per TSC cycle, 32.32 fixed point
  std::atomic<uint64_t> run_start_tsc_{0};
  std::atomic<uint64_t> run_end_tsc_{0};
  std::atomic<FlowDumpRequest*> dump_req_{nullptr};
  std::atomic<bool> stop_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> done_{false};

  // The fast path's per-burst scratch, indexed by position in the burst.
  uint32_t b0_[kBurst];      // the flow's first bucket
  uint32_t hint_[kBurst];    // its flow's likely reference
  const NhCacheEntry* fast_nh_[kBurst];  // each packet's cached next hop
  // DSR flows: the outer source (route_one's source_for) and the GUE port.
  const IpPrefix* fast_src_[kBurst];
  uint16_t fast_gue_port_[kBurst];
  // What fast_hash read of the burst in hand: wire_own_, or the Prepared burst's.
  FastWire wire_own_;
  const FastWire* wire_ = &wire_own_;
  // Bursts to leave to the stages without trying stage_fast, after bursts it could not take
  // because a packet past its first pass had no flow (new flows: a flood of mid-stream
  // packets; fast_flow_miss_); doubles (up to kFastBackoffMax) with each such burst, 0 after
  // one it takes. (A next hop not cached yet is no reason: the stages cache it.) Only costs:
  // both paths give the same result.
  uint8_t fast_skip_ = 0;
  uint8_t fast_backoff_ = 0;
  static constexpr uint8_t kFastBackoffMax = 16;
  bool fast_flow_miss_ = false;
  // A SYN (without ACK) is a fast-path candidate: on a live flow it takes the fast path; a
  // SYN that opens a new flow sends its burst to the stages, and then the first pass turns
  // SYNs away for fast_syn_skip_ bursts (doubling up to kFastBackoffMax with each such burst,
  // 0 after a burst taken), so that a SYN flood costs what it did before SYNs were candidates.
  uint8_t fast_syn_skip_ = 0;
  uint8_t fast_syn_backoff_ = 0;
  // The last burst with such a SYN that stage_fast saw was taken (its SYNs were of live
  // flows): rx_port holds full bursts with SYNs only then.
  bool fast_syn_live_ = false;
  // Per port: a full burst of fast-path candidates received in the last poll and held for
  // this one (held_[p][held_cur_[p]] when its n is not 0), and the buffer for the next.
  Prepared held_[kMaxPorts][2];
  uint8_t held_cur_[kMaxPorts] = {};
  uint32_t held_packets_ = 0;  // in held bursts (counted as pending)
};

}  // namespace meshgate::dp
