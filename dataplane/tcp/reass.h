// Receive-side reassembly of out-of-order TCP segments, zero-copy over rte_mbufs.
//
// Per connection, owned by the worker lcore that owns the connection; no locks, no heap: the
// queue is kMaxRuns (8) entries inside the object (288 bytes, static_assert below), each a
// contiguous run of bytes held as one mbuf chain. Segments that touch or overlap a run are
// trimmed (rte_pktmbuf_adj, or freeing whole leading segments of a chain; tail trimming frees
// trailing segments) and chained onto it, so a run costs one entry however many segments
// filled it, and the SACK blocks (RFC 2018) are exactly the runs.
//
// Ownership: add() always consumes the mbuf. Queued data is never dropped to make room for
// other data (no reneging, RFC 2018 §8): when a limit would be exceeded the *arriving* segment
// is freed and kNoRoom returned; the caller counts it and the sender retransmits it.
// Delivered data (ReassResult::data) belongs to the caller.
//
// Sequence space for SYN and FIN is the TCB's business: it calls advance() for them.
#pragma once

#include <cstdint>

#include "dataplane/tcp/sack.h"

struct rte_mbuf;

namespace meshgate::dp::tcp {

// Per-connection default limits on out-of-order data (caller's config may lower or raise them).
// 256 KiB covers a full window of loss at 2 Gbit/s x 1 ms; 256 mbufs is that many full-size
// 1460-byte segments with room for small ones.
inline constexpr uint32_t kReassDefaultMaxBytes = 256 * 1024;
inline constexpr uint32_t kReassDefaultMaxMbufs = 256;

struct ReassLimits {
  uint32_t max_bytes = kReassDefaultMaxBytes;  // out-of-order payload bytes held
  uint32_t max_mbufs = kReassDefaultMaxMbufs;  // mbuf segments held (at most 65535)
};

enum class ReassStatus : uint8_t {
  kDelivered,    // data at RCV.NXT: `data` holds it and every queued run it reached
  kQueued,       // held out of order (possibly merged with queued runs)
  kDuplicate,    // no byte that was not already received or queued (RFC 2883 D-SACK case)
  kOutOfWindow,  // starts at or beyond RCV.NXT + RCV.WND (a zero window included)
  kNoRoom,       // a byte, mbuf or run limit would be exceeded: dropped
};

struct ReassResult {
  ReassStatus status = ReassStatus::kDuplicate;
  rte_mbuf* data = nullptr;  // in-order chain (kDelivered), owned by the caller
  uint32_t len = 0;          // bytes in `data`: RCV.NXT advanced by this much
  // The first duplicate part of the segment, for a D-SACK block (RFC 2883 §4); dup_len 0 = none.
  uint32_t dup_seq = 0;
  uint32_t dup_len = 0;
};

class Reassembly {
 public:
  static constexpr uint32_t kMaxRuns = 8;

  // An empty queue expecting `rcv_nxt` next (IRS + 1 after the handshake).
  void init(uint32_t rcv_nxt, const ReassLimits& limits = {});

  // Offers one segment: `m`'s data starts at the TCP payload and m->pkt_len is the payload
  // length (link padding trimmed); `seq` is SEG.SEQ of its first payload byte. Bytes below
  // RCV.NXT or at/after RCV.NXT + rcv_wnd are trimmed (RFC 9293 §3.10.7.4). Consumes `m`.
  ReassResult add(rte_mbuf* m, uint32_t seq, uint32_t rcv_wnd);

  // Moves RCV.NXT over sequence space that carries no data (a FIN, RFC 9293 §3.10.7.4 eighth
  // step). Queued runs starting at or below the new RCV.NXT are freed: they could never be
  // delivered in order, and no data can follow a FIN anyway.
  void advance(uint32_t n);

  // Up to `max` SACK blocks (RFC 2018 §4: at most 4, 3 beside timestamps): the run holding the
  // most recently received segment first, then the others from most to least recently
  // changed. With a duplicate (`dsack`, from ReassResult::dup_*) the D-SACK block comes first
  // and, when it lies inside a queued run, that run second (RFC 2883 §4).
  uint32_t sack_blocks(SackBlock* out, uint32_t max, const SackBlock* dsack = nullptr) const;

  // Frees everything queued (reset, close, connection teardown).
  void clear();

  uint32_t rcv_nxt() const { return rcv_nxt_; }
  uint32_t queued_bytes() const { return queued_bytes_; }
  uint32_t queued_mbufs() const { return queued_mbufs_; }
  uint32_t run_count() const { return nruns_; }
  bool empty() const { return nruns_ == 0; }

 private:
  struct Run {
    rte_mbuf* head;
    rte_mbuf* tail;  // last segment of the chain, for O(1) appends
    uint32_t seq;
    uint32_t len;
    uint32_t stamp;  // recency for SACK block order
    uint32_t mbufs;
    uint32_t end() const { return seq + len; }
  };

  void erase(uint32_t first, uint32_t count);

  Run runs_[kMaxRuns];
  uint32_t rcv_nxt_ = 0;
  uint32_t queued_bytes_ = 0;
  uint32_t queued_mbufs_ = 0;
  uint32_t stamp_ = 0;
  ReassLimits limits_;
  uint32_t nruns_ = 0;
};
static_assert(sizeof(Reassembly) <= 288, "Reassembly is per connection");

}  // namespace meshgate::dp::tcp
