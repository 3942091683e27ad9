// A worker lcore: the run-to-completion poll loop. For each port it owns one RX and one TX
// queue; each burst goes through the stages
//   parse -> classify -> l2 (ARP/NDP) -> flow -> lookup -> icmp_error -> local -> reply
//   -> route -> dispatch
// every stage with the same burst signature, writing each packet's next step (STYLE.md rule 2).
// A burst made only of traffic of live flows (any mode, either family) takes a fused path
// instead (stage_fast, fast_path.cc): the same work in a few tight passes, with the same
// result; any other packet in the burst sends the whole burst through the stages.
// Then packets handed over by other workers, timers, neighbor updates, an RCU quiescent state.
//
// Flows belong to the worker that saw their first packet. A packet of a flow owned elsewhere
// (a DNAT reply whose tuple RSS sent to another queue, a fullnat reply, an ICMP error) is passed
// to the owner through a bounded SPSC ring: fullnat source ports encode their owner
// (port % workers); DNAT replies go first to the worker software RSS predicts for the flow's
// original tuple, then to each worker not yet visited (a bit mask travels with the mbuf).
//
// With proxy services (mode = "proxy") the worker also runs the L4 proxy and its TCP stack
// (dataplane/proxy): stage_stack() hands it TCP segments to proxy VIPs and to [fullnat]
// addresses that match no flow; the frames it emits go through the route stage as generated
// packets (send_generated()); its timers run once per poll iteration.
//
// Threads: init() on the control thread before launch; run() / poll_once() on the worker lcore;
// request_stop(), set_draining(), post_flow_dump(), counters() and done() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "dataplane/common/compiler.h"
#include "dataplane/common/limits.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/l2/neighbor.h"
#include "dataplane/nat/frag.h"
#include "dataplane/nat/rss.h"
#include "dataplane/packet/parse.h"
#include "dataplane/snapshot/addr_table.h"
#include "dataplane/snapshot/snapshot_slot.h"
#include "dataplane/worker/counters.h"
#include "dataplane/worker/flow_dump.h"
#include "dataplane/worker/port.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;
struct rte_rcu_qsbr;

namespace meshgate::dp {

class Proxy;
struct ProxyParams;
namespace hbone {
class Gateway;
struct GatewayParams;
}  // namespace hbone

inline constexpr uint16_t kBurst = 32;
// ICMP errors a worker may send per second, and the burst above that (Linux icmp_ratelimit).
inline constexpr uint32_t kIcmpErrorsPerSecond = 1000;
inline constexpr uint32_t kIcmpErrorBurst = 50;
// First port tried for fullnat sources; below are the well-known and registered-low ports.
inline constexpr uint16_t kFullnatFirstPort = 1024;
// Candidates examined for a fullnat source port whose reply RSS steers to this worker; after
// that any free port of this worker's residue is taken (the reply is then handed over).
inline constexpr uint32_t kFullnatRssTries = 64;
inline constexpr uint32_t kFullnatMaxTries = 4096;

// TSC cycles -> nanoseconds as a 32.32 fixed-point multiply. `cycles * 10^9 / hz` overflows 64
// bits after 2^64 / 10^9 cycles (about 7 s at 2.5 GHz) and the clock would jump back.
inline uint64_t ns_per_tsc_q32(uint64_t tsc_hz) {
  return uint64_t((static_cast<unsigned __int128>(1'000'000'000ull) << 32) / tsc_hz);
}
// The worker's millisecond clock (conntrack's) from its nanosecond clock.
inline uint32_t now_ms_of(uint64_t ns) { return uint32_t(ns / 1'000'000); }
inline uint64_t tsc_to_ns(uint64_t cycles, uint64_t ns_per_tsc_q32) {
  return uint64_t((static_cast<unsigned __int128>(cycles) * ns_per_tsc_q32) >> 32);
}

struct WorkerParams {
  uint16_t index = 0;  // worker number; also its RX/TX queue id on every port
  uint16_t n_workers = 1;
  int socket = 0;
  std::vector<PortRuntime> ports;
  SnapshotSlot* snapshot = nullptr;
  const AddrTable* addrs = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;      // may be null (tests)
  rte_mempool* pool = nullptr;       // for packets the worker originates
  uint32_t max_flows = 1024;
  ConntrackTimeouts timeouts;
  rte_ring* neighbor_out = nullptr;  // learned neighbors -> control thread (may be null)
  rte_ring* neighbor_in = nullptr;   // neighbors learned elsewhere -> this worker (may be null)
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
  // Non-null: run the L4 proxy (the worker copies it at init()).
  const ProxyParams* proxy = nullptr;
  // Non-null (with `proxy`): terminate HBONE on the [hbone] port of every local address, on the
  // proxy's TCP stack (copied at init()).
  const hbone::GatewayParams* hbone = nullptr;
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
  // One iteration of the loop; returns packets received from ports.
  uint32_t poll_once();
  // Flushes TX, drops what still waits for a neighbor or sits in handoff rings toward this
  // worker. Called by run() before it returns.
  void finish();

  void request_stop() { stop_.store(true, std::memory_order_relaxed); }
  // Draining: packets of existing flows keep flowing, packets that would start a new flow are
  // dropped (reason "draining").
  void set_draining(bool on) { draining_.store(on, std::memory_order_relaxed); }
  bool done() const { return done_.load(std::memory_order_acquire); }
  uint16_t index() const { return p_.index; }

  // Asks the running worker for a copy of up to r->max flows. False when a request is already
  // pending. The worker sets r->done (release) when r->count is final.
  bool post_flow_dump(FlowDumpRequest* r);
  // Only once done() is true (the worker no longer runs): copies directly.
  void dump_flows_stopped(FlowDumpRequest* r) const;

  const WorkerCounters& counters() const { return counters_; }
  const BackendCounters* backend_counters() const { return backend_counters_; }
  const FlowTable& flows() const { return flows_; }
  // The L4 proxy, or nullptr without proxy services. Its stats() may be read by any thread.
  const Proxy* proxy() const { return proxy_; }
  // The HBONE terminator, or nullptr without [hbone] certificates. Its stats() may be read by
  // any thread.
  const hbone::Gateway* hbone() const { return hbone_; }
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
    kNextIp,        // parsed IPv4/IPv6, to classify
    kNextArp,
    kNextNdp,
    kNextIcmpError, // an ICMP error, translated through the flow it quotes
    kNextFlow,      // TCP/UDP/echo: looked up in conntrack, then a service may start a flow
    kNextMiss,      // a tracked protocol without a flow here: another worker's, local or nothing
    kNextLookup,    // not tracked: a later fragment, local, or nothing
    kNextLocal,     // to a local address, VIP or fullnat address without a flow
    kNextRoute,     // ready for route + neighbor + L2 rewrite
    kNextTx,        // out_[i] says which port
    kNextPending,   // waiting for a neighbor
    kNextHandoff,   // to the worker in out_[i]
    kNextConsumed,  // terminated here, nothing to send
    kNextStack,     // TCP segment for the proxy's TCP stack (which takes the mbuf)
  };
  static constexpr uint16_t kFromHandoff = 0xffff;  // in_port of packets from another worker

  struct TxBuffer {
    rte_mbuf* pkts[2 * kBurst];
    uint64_t bytes = 0;  // of pkts[0, n): tx() adds each length as it queues the packet
    uint16_t n = 0;
  };
  // What the route stage does to a packet besides routing it.
  struct Egress {
    bool decrement_ttl = false;
    bool encap = false;        // DSR: route to `tunnel_dst` inside an outer header
    bool gue = false;
    uint16_t gue_port_be = 0;
    uint32_t flow_hash = 0;
    IpAddr tunnel_dst;
  };

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
  // `hashed`: fast_hash ran on it already (hash_, b0_, hint_, wire_, fast_hashed_,
  // fast_flows_prefetched_).
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
  // earlier: stage_fast starts after them, from hash_, b0_, hint_, wire_, fast_hashed_ and
  // fast_flows_prefetched_.
  uint16_t fast_hash(uint16_t in_port, rte_mbuf** pkts, uint16_t n, uint32_t* hash,
                     uint32_t* b0, FastWire* wire, uint64_t* bytes = nullptr) const;
  void fast_prefetch_flows(const uint32_t* hash, const uint32_t* b0, uint32_t* hint,
                           uint16_t n) const {
    for (uint16_t i = 0; i < n; ++i) hint[i] = flows_.prefetch_flows_or_second(hash[i], b0[i]);
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
  void stage_parse(uint16_t in_port, rte_mbuf** pkts, uint16_t n);
  void stage_classify(rte_mbuf** pkts, uint16_t n);
  void stage_l2(uint16_t in_port, rte_mbuf** pkts, uint16_t n);
  void stage_flow(rte_mbuf** pkts, uint16_t n);
  void stage_lookup(rte_mbuf** pkts, uint16_t n);
  void stage_icmp_error(rte_mbuf** pkts, uint16_t n);
  void stage_local(rte_mbuf** pkts, uint16_t n);
  void stage_route(rte_mbuf** pkts, uint16_t n);
  void stage_dispatch(rte_mbuf** pkts, uint16_t n);
  // Proxy: segments to the TCP stack; the frames it emitted through route and dispatch.
  void stage_stack(rte_mbuf** pkts, uint16_t n);
  void send_generated();

  // Packets of the burst whose next step is `a` or `b`, as a bit mask (bit i = packet i): lets
  // a stage that the common burst does not need cost a compare instead of a pass.
  MG_ALWAYS_INLINE uint32_t next_mask(uint16_t n, uint8_t a, uint8_t b) const {
    static_assert(kBurst == 32, "one bit per packet of a burst");
#if defined(__SSE2__)
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(next_));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(next_ + 16));
    const __m128i va = _mm_set1_epi8(char(a));
    const __m128i vb = _mm_set1_epi8(char(b));
    const uint32_t mask =
        uint32_t(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(lo, va), _mm_cmpeq_epi8(lo, vb)))) |
        uint32_t(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(hi, va), _mm_cmpeq_epi8(hi, vb))))
            << 16;
#else
    uint32_t mask = 0;
    for (uint16_t i = 0; i < kBurst; ++i) mask |= uint32_t(next_[i] == a || next_[i] == b) << i;
#endif
    return n >= kBurst ? mask : mask & ((1u << n) - 1);
  }
  // A translated packet of a backend's flow (either direction): counted for the backend, then
  // routed with its TTL decremented.
  MG_ALWAYS_INLINE void to_route(const rte_mbuf* m, uint16_t i, uint32_t stat_id);
  // Translation of a client packet toward its backend by the flow's (or `to`'s) mode.
  MG_ALWAYS_INLINE void forward(rte_mbuf* m, uint16_t i, const FlowTarget& to,
                                uint32_t flow_hash);
  MG_ALWAYS_INLINE void forward_flow(rte_mbuf* m, uint16_t i, Flow* f);
  // Reverse translation of a backend's packet.
  void reverse(rte_mbuf* m, uint16_t i, Flow* f);
  // Packet i's TTL (hop limit) runs out here: an ICMP time exceeded to its source (rate
  // limited) and the drop.
  void drop_ttl_exceeded(const rte_mbuf* m, uint16_t i);
  // The backend counter slot of a snapshot backend (slot 0 past the table's capacity).
  static uint32_t stat_slot(const SnapBackend& be) {
    return be.stat_id < kMaxBackendStats ? be.stat_id : 0;
  }
  // A backend's packet without a flow, of a dnat connection forwarded statelessly (the table
  // was full): translated back to the VIP whose Maglev table picks this backend for the
  // reversed tuple. False when no service does.
  bool reverse_stateless(rte_mbuf* m, uint16_t i);
  // A later fragment follows its first (kNone) or the reason it cannot.
  Drop follow_fragment(rte_mbuf* m, uint16_t i);
  bool pick_fullnat(const IpAddr& backend, uint16_t backend_port_be, uint8_t proto,
                    uint32_t flow_hash, FlowTarget* to, Drop* why);
  // Where a packet of a flow this worker does not hold goes next (reply view: `src` is the
  // backend, `dst` the client or fullnat address), or -1.
  int handoff_target(const IpAddr& src, uint16_t sport_be, const IpAddr& dst, uint16_t dport_be,
                     uint8_t proto, uint32_t visited) const;
  void handoff(uint16_t i, int target, rte_mbuf* m);
  void drain_handoff();

  void handle_arp(uint16_t in_port, rte_mbuf* m, uint16_t i);
  void handle_ndp(uint16_t in_port, rte_mbuf* m, uint16_t i);
  // Routes one packet: next hop, MTU (with an ICMP error back when it does not fit), TTL,
  // DSR encapsulation, neighbor, L2. Returns kNextTx / kNextPending / kNextDrop.
  MG_ALWAYS_INLINE Next route_one(rte_mbuf* m, PacketMeta& meta, const Egress& eg, uint16_t i,
                                  uint16_t* out_port, IpAddr* nh, Drop* why);
  // Sends an ICMP error about packet `m` at burst position `i` (time exceeded, fragmentation
  // needed / too big), translated through its flow when it quotes a translated packet. It
  // leaves in the position of `m` (which is dropped), so output keeps input order. Rate limited.
  void send_icmp_error(const rte_mbuf* m, const PacketMeta& meta, uint16_t i, uint8_t type,
                       uint8_t code, uint32_t mtu);
  bool icmp_token();
  // Translates the ICMP error in `m` through the flow its quote belongs to; false if none here.
  bool translate_icmp_error(rte_mbuf* m, PacketMeta& meta, int* handoff_to, uint32_t visited);
  bool resolve(const IpAddr& nh, uint16_t port_index, MacAddr* mac);
  void solicit(NeighborCache::Entry* e, uint16_t port_index);
  void learn(const IpAddr& a, const MacAddr& mac, uint16_t port_index, bool from_wire);
  void tx(uint16_t port_index, rte_mbuf* m);
  // The same for a caller that has the packet's length at hand.
  void tx(uint16_t port_index, rte_mbuf* m, uint32_t len);
  void flush_tx();
  void drop(rte_mbuf* m, Drop reason);
  void service_pending();
  void drain_neighbor_ring();
  void update_clock(rte_mbuf** pkts, uint16_t n);
  void serve_flow_dump();
  bool copy_flows(FlowDumpRequest* r, uint32_t budget) const;
  void sync_table_counters();
  // Local source address on `port_index` for talking to `peer` (same prefix, else the first of
  // its family); nullptr when the port has none of that family.
  const IpPrefix* source_for(uint16_t port_index, const IpAddr& peer) const;
  bool on_link(uint16_t port_index, const IpAddr& a) const;
  // The port a packet to `a` leaves through, or -1 (no route).
  int egress_port(const IpAddr& a) const;
  bool is_local_like(const IpAddr& a) const;
  // The martian checks of a packet that would start a flow or reach a local handler: its
  // destination (RFC 1812 §5.3.7, RFC 4291 §2.5, directed broadcasts) and its source against
  // the gateway's own addresses and subnet broadcasts. Drop::kNone when it is neither.
  // A packet of an established flow needs none: its flow passed them when it was created.
  Drop martian(const PacketMeta& m) const;
  // A limited, port-subnet or multicast address: what a frame to a group MAC may carry.
  bool is_group_address(const IpAddr& a, bool v4) const;

  // Next hops of recent destinations: LPM + neighbor results, valid for one epoch: one
  // snapshot version and one generation of the learned-neighbor cache (a learned MAC changed).
  // `tag4` is the epoch and an IPv4 destination's wire word in one (epoch << 32 | wire), 0
  // for an IPv6 one: the fast path checks an IPv4 next hop with one compare.
  struct NhCacheEntry {
    IpAddr dst;
    uint64_t tag4 = 0;
    uint32_t epoch = 0;  // 0: never filled
    uint16_t port = 0;
    uint16_t mtu = 0;   // the port's
    uint8_t macs[12];   // the frame's first 12 bytes: the next hop's MAC, then the port's
  };
  static constexpr uint32_t kNhCacheSize = 1024;
  static uint32_t nh_slot(const IpAddr& a) {
    uint64_t w[2];
    std::memcpy(w, a.b, 16);
    return nh_slot_of(w[0] ^ w[1]);
  }
  // nh_slot of an IPv4 address given as 4 wire bytes loaded as they lie in memory.
  static uint32_t nh_slot_v4(uint32_t wire) { return nh_slot_of(IpAddr::mapped_high_word(wire)); }
  static uint32_t nh_slot_of(uint64_t folded) {
    return uint32_t((folded * 0x9e3779b97f4a7c15ull) >> 54) & (kNhCacheSize - 1);
  }

  WorkerParams p_;
  WorkerCounters counters_;
  NhCacheEntry* nh_cache_ = nullptr;
  uint32_t nh_epoch_ = 1;
  uint64_t nh_epoch_version_ = 0;  // the snapshot version of nh_epoch_
  // Loads the current snapshot into snap_ and starts a new next-hop epoch when its version
  // changed.
  void load_snapshot();
  // A new next-hop epoch: every cached next hop is stale.
  void next_nh_epoch();
  BackendCounters* backend_counters_ = nullptr;
  FlowTable flows_;
  FragTable* frags_ = nullptr;
  Proxy* proxy_ = nullptr;
  hbone::Gateway* hbone_ = nullptr;
  uint16_t hbone_port_be_ = 0;
  NeighborCache* neighbors_ = nullptr;
  PendingQueue* pending_ = nullptr;
  TxBuffer tx_[kMaxPorts];
  const Snapshot* snap_ = nullptr;
  uint64_t now_ns_ = 0;
  uint64_t tsc_hz_ = 0;
  uint64_t tsc_start_ = 0;
  uint64_t ns_per_tsc_q32_ = 0;  // nanoseconds per TSC cycle, 32.32 fixed point
  uint32_t fullnat_cursor_ = 0;
  double icmp_tokens_ = kIcmpErrorBurst;
  uint64_t icmp_last_ns_ = 0;
  std::atomic<uint64_t> run_start_tsc_{0};
  std::atomic<uint64_t> run_end_tsc_{0};
  std::atomic<FlowDumpRequest*> dump_req_{nullptr};
  std::atomic<bool> stop_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> done_{false};

  // Per-burst scratch, indexed by position in the burst.
  PacketMeta meta_[kBurst];
  uint8_t next_[kBurst] = {};
  Drop drop_[kBurst];
  uint16_t out_[kBurst];     // egress port index (kNextTx / kNextPending) or worker (handoff)
  IpAddr nh_[kBurst];        // next hop (kNextPending)
  uint32_t hash_[kBurst];    // flow hash of TCP/UDP packets
  FlowTable::BucketPair bp_[kBurst];  // its two candidate buckets (the stages)
  uint32_t b0_[kBurst];      // its first bucket (the fast path)
  uint32_t hint_[kBurst];    // its flow's likely reference (the fast path)
  uint32_t visited_[kBurst]; // workers a handed-over packet has been to
  Flow* flow_[kBurst];
  Egress egress_[kBurst];
  // A packet the gateway made about packet i (an ICMP error), sent in i's place.
  struct Extra {
    rte_mbuf* m = nullptr;
    Next next = kNextDrop;
    uint16_t port = 0;
    IpAddr nh;
  };
  Extra extra_[kBurst];
  const NhCacheEntry* fast_nh_[kBurst];  // stage_fast: each packet's cached next hop
  // stage_fast, DSR flows: the outer source (route_one's source_for) and the GUE port.
  const IpPrefix* fast_src_[kBurst];
  uint16_t fast_gue_port_[kBurst];
  // What fast_hash read of the burst in hand: wire_own_, or the Prepared burst's.
  FastWire wire_own_;
  const FastWire* wire_ = &wire_own_;
  // A burst stage_fast left to the stages: its first fast_hashed_ packets have hash_ and bp_
  // (their first buckets prefetched), and with fast_flows_prefetched_ their flows (or second
  // buckets) are prefetched: stage_classify need not do that again.
  uint16_t fast_hashed_ = 0;
  bool fast_flows_prefetched_ = false;
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
  void release_held();  // finish(): forwards what is held
};

}  // namespace meshgate::dp
