// Per-worker connection tracking: a flow pool of one-cache-line entries and a bucketized hash
// index that finds a flow from either direction. Owned and touched by exactly one worker; the
// control thread only allocates it before the worker starts and reads the gauges.
//
// Entry layout: client, VIP and backend endpoints (IPv4-mapped or IPv6) in 64 bytes, so IPv4 and
// IPv6 cost the same one cache line. Index: 2-choice buckets of 8 (signature, reference) pairs,
// 64 bytes each; every flow has two references (original and reply direction).
#pragma once

#include <cstdint>

#include "dataplane/common/compiler.h"
#include "dataplane/common/net_types.h"

namespace meshgate::dp {

enum class TcpState : uint8_t {
  kNone,  // UDP / other protocols
  kSynSent,
  kSynRecv,
  kEstablished,
  kFinWait,    // client sent FIN
  kCloseWait,  // backend sent FIN
  kLastAck,    // both sent FIN, waiting for the last ACK
  kTimeWait,
  kClose,      // reset
};
const char* tcp_state_name(TcpState s);

struct Flow {
  IpAddr client;
  IpAddr vip;
  IpAddr backend;
  uint16_t client_port = 0;   // network order
  uint16_t vip_port = 0;      // network order
  uint16_t backend_port = 0;  // network order
  uint8_t proto = 0;
  TcpState state = TcpState::kNone;
  uint32_t stat_id = 0;    // backend counter slot
  uint32_t expire_ms = 0;  // worker clock, ms; compared by signed difference (wraps in 49 days)
};
static_assert(sizeof(Flow) == 64, "a flow must stay one cache line");

enum class FlowDir : uint8_t { kOriginal = 0, kReply = 1 };

struct ConntrackTimeouts {
  uint32_t tcp_syn_ms = 30000;
  uint32_t tcp_established_ms = 7200000;
  uint32_t tcp_fin_ms = 60000;
  uint32_t tcp_time_wait_ms = 60000;
  uint32_t tcp_close_ms = 10000;  // after RST, like Linux nf_conntrack_tcp_timeout_close
  uint32_t udp_ms = 60000;
  uint32_t other_ms = 30000;
};

// A packet's 5-tuple as seen on the wire.
struct Tuple {
  IpAddr src;
  IpAddr dst;
  uint16_t sport = 0;  // network order
  uint16_t dport = 0;
  uint8_t proto = 0;
};

class FlowTable {
 public:
  static constexpr uint32_t kBucketEntries = 8;
  static constexpr uint32_t kEmpty = 0xffffffffu;
  // Flows examined by each expire_some() call: bounds the per-iteration cost.
  static constexpr uint32_t kSweepPerCall = 32;

  struct alignas(64) Bucket {
    uint32_t sig[kBucketEntries];
    uint32_t ref[kBucketEntries];  // flow index << 1 | direction, kEmpty when free
  };

  // Bytes needed for `max_flows` (for EAL memory sizing).
  static size_t memory_bytes(uint32_t max_flows);

  // Control thread, before the worker starts: memory from rte_zmalloc_socket on `socket`.
  bool init(uint32_t max_flows, int socket, const ConntrackTimeouts& t);
  void destroy();

  // Hash of a tuple; lookups and inserts take it so the caller can prefetch buckets.
  static uint32_t hash(const Tuple& t);
  void prefetch(uint32_t h) const;

  // Finds the flow a packet belongs to, in either direction. Expired flows are reclaimed on
  // the way (counted in *expired) and not returned.
  Flow* lookup(const Tuple& t, uint32_t h, uint32_t now_ms, FlowDir* dir, uint64_t* expired);

  // Adds a flow (client -> vip, translated to backend). nullptr when the index or the pool is
  // full; the caller then forwards statelessly.
  Flow* insert(const Tuple& orig, const IpAddr& backend, uint16_t backend_port_be,
               uint32_t stat_id, uint32_t now_ms);

  void remove(Flow* f);

  // Updates TCP state from a segment's flags and refreshes the expiry.
  void touch(Flow* f, FlowDir dir, uint8_t tcp_flags, uint32_t now_ms);

  // Reclaims up to kSweepPerCall expired flows from a rotating cursor. Returns how many.
  uint32_t expire_some(uint32_t now_ms);

  uint32_t active() const { return active_; }
  // Flows in ESTABLISHED (TCP) right now: what a drain waits for.
  uint32_t established() const { return established_; }
  uint32_t capacity() const { return max_flows_; }
  // Iteration for dumps (control thread, worker stopped) and tests: flow by pool index.
  const Flow* at(uint32_t idx) const { return in_use(idx) ? &flows_[idx] : nullptr; }

 private:
  bool in_use(uint32_t idx) const { return flows_[idx].proto != 0; }
  uint32_t timeout_ms(const Flow& f) const;
  bool link(uint32_t h, uint32_t ref);
  void unlink(uint32_t h, uint32_t ref);
  void set_state(Flow* f, TcpState s);
  static Tuple reply_tuple(const Flow& f);
  static bool matches(const Flow& f, FlowDir dir, const Tuple& t);

  Flow* flows_ = nullptr;
  uint32_t* free_ = nullptr;  // stack of free pool indices
  uint32_t free_top_ = 0;
  Bucket* buckets_ = nullptr;
  uint32_t bucket_mask_ = 0;
  uint32_t max_flows_ = 0;
  uint32_t active_ = 0;
  uint32_t established_ = 0;
  uint32_t sweep_cursor_ = 0;
  ConntrackTimeouts timeouts_;
};

}  // namespace meshgate::dp
