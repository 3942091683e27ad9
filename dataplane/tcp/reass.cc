#include "dataplane/tcp/reass.h"

#include <rte_mbuf.h>

#include "dataplane/common/compiler.h"
#include "dataplane/tcp/seq.h"

namespace meshgate::dp::tcp {

namespace {

// Removes the first `n` bytes (n < pkt_len) of a chain. Whole leading segments are freed (a
// chained jumbo or LRO segment can overlap by more than its first segment, where
// rte_pktmbuf_adj gives up); the rest is an rte_pktmbuf_adj of the new head.
rte_mbuf* trim_front(rte_mbuf* m, uint32_t n) {
  while (n > 0 && n >= m->data_len && m->next != nullptr) {
    rte_mbuf* next = m->next;
    next->pkt_len = m->pkt_len - m->data_len;
    next->nb_segs = uint16_t(m->nb_segs - 1);
    n -= m->data_len;
    m->next = nullptr;
    rte_pktmbuf_free_seg(m);
    m = next;
  }
  if (n > 0) rte_pktmbuf_adj(m, uint16_t(n));
  return m;
}

// Keeps the first `keep` bytes (0 < keep <= pkt_len) of a chain, freeing trailing segments
// (rte_pktmbuf_trim only trims inside the last one).
void trim_back(rte_mbuf* m, uint32_t keep) {
  uint32_t acc = 0;
  uint16_t segs = 1;
  rte_mbuf* s = m;
  while (acc + s->data_len < keep) {
    acc += s->data_len;
    s = s->next;
    ++segs;
  }
  s->data_len = uint16_t(keep - acc);
  if (s->next != nullptr) {
    rte_pktmbuf_free(s->next);
    s->next = nullptr;
  }
  m->nb_segs = segs;
  m->pkt_len = keep;
}

// Appends chain `b` (head fields valid) after chain `a` whose last segment is `a_tail`.
void chain(rte_mbuf* a, rte_mbuf* a_tail, rte_mbuf* b) {
  a_tail->next = b;
  a->nb_segs = uint16_t(a->nb_segs + b->nb_segs);
  a->pkt_len += b->pkt_len;
}

}  // namespace

void Reassembly::init(uint32_t rcv_nxt, const ReassLimits& limits) {
  rcv_nxt_ = rcv_nxt;
  limits_ = limits;
  if (limits_.max_mbufs > UINT16_MAX) limits_.max_mbufs = UINT16_MAX;  // nb_segs is 16 bits
  queued_bytes_ = 0;
  queued_mbufs_ = 0;
  stamp_ = 0;
  nruns_ = 0;
}

void Reassembly::erase(uint32_t first, uint32_t count) {
  for (uint32_t k = first; k + count < nruns_; ++k) runs_[k] = runs_[k + count];
  nruns_ -= count;
}

ReassResult Reassembly::add(rte_mbuf* m, uint32_t seq, uint32_t rcv_wnd) {
  ReassResult res;
  const uint32_t len = m->pkt_len;
  const uint32_t end = seq + len;
  const uint32_t wnd_end = rcv_nxt_ + rcv_wnd;
  if (len == 0 || seq_le(end, rcv_nxt_)) {
    // RFC 9293 §3.10.7.4: entirely old. RFC 2883 §4: report it as a D-SACK.
    res.dup_seq = seq;
    res.dup_len = len;
    rte_pktmbuf_free(m);
    return res;
  }
  if (!seq_lt(seq, wnd_end)) {
    // RFC 9293 §3.10.7.4: nothing inside the receive window (always so for a zero window).
    res.status = ReassStatus::kOutOfWindow;
    rte_pktmbuf_free(m);
    return res;
  }
  // The part of the segment inside [RCV.NXT, RCV.NXT + RCV.WND) (RFC 9293 §3.10.7.4: only the
  // new part of a segment that straddles RCV.NXT is processed, and data beyond the window is
  // not accepted).
  uint32_t s = seq;
  uint32_t e = seq_min(end, wnd_end);
  if (seq_lt(s, rcv_nxt_)) {
    res.dup_seq = s;
    res.dup_len = rcv_nxt_ - s;
    s = rcv_nxt_;
  }

  // Runs first..j-1 overlap or touch [s, e).
  uint32_t first = 0;
  while (first < nruns_ && seq_lt(runs_[first].end(), s)) ++first;
  uint32_t j = first;
  while (j < nruns_ && seq_le(runs_[j].seq, e)) ++j;
  Run* left = nullptr;   // a run the segment extends to the right
  Run* right = nullptr;  // a run the segment extends to the left
  if (j > first && seq_le(runs_[first].seq, s)) left = &runs_[first];
  if (j > first && seq_ge(runs_[j - 1].end(), e) && &runs_[j - 1] != left) right = &runs_[j - 1];
  if (left != nullptr && seq_ge(left->end(), e)) {
    // Every byte is already queued. RFC 2018 §4: the run it fell in is now the most recent.
    left->stamp = ++stamp_;
    if (res.dup_len == 0) res.dup_seq = s;
    res.dup_len = e - res.dup_seq;
    rte_pktmbuf_free(m);
    return res;
  }
  // The new bytes: [ns, ne). Runs strictly between left and right hold bytes the segment
  // carries too; they are replaced by the segment's copy (one chain instead of pieces).
  const uint32_t ns = left != nullptr ? left->end() : s;
  const uint32_t ne = right != nullptr ? right->seq : e;
  if (left != nullptr && res.dup_len == 0) {
    res.dup_seq = s;
    res.dup_len = ns - s;
  }
  const uint32_t mid_first = first + (left != nullptr ? 1 : 0);
  const uint32_t mid_end = j - (right != nullptr ? 1 : 0);
  uint32_t mid_bytes = 0;
  uint32_t mid_mbufs = 0;
  for (uint32_t k = mid_first; k < mid_end; ++k) {
    mid_bytes += runs_[k].len;
    mid_mbufs += runs_[k].mbufs;
  }

  // Cut the segment to [ns, ne).
  if (ns != seq) m = trim_front(m, ns - seq);
  if (ne != end) trim_back(m, ne - ns);
  const uint32_t piece = ne - ns;
  const uint32_t piece_mbufs = m->nb_segs;
  const bool in_order = ns == rcv_nxt_;

  if (!in_order) {
    const uint32_t runs_after =
        nruns_ - (mid_end - mid_first) + (left == nullptr && right == nullptr ? 1 : 0) -
        (left != nullptr && right != nullptr ? 1 : 0);
    if (queued_bytes_ - mid_bytes + piece > limits_.max_bytes ||
        queued_mbufs_ - mid_mbufs + piece_mbufs > limits_.max_mbufs || runs_after > kMaxRuns) {
      res.status = ReassStatus::kNoRoom;
      res.dup_len = 0;
      rte_pktmbuf_free(m);
      return res;
    }
  }

  for (uint32_t k = mid_first; k < mid_end; ++k) rte_pktmbuf_free(runs_[k].head);
  queued_bytes_ -= mid_bytes;
  queued_mbufs_ -= mid_mbufs;

  // Build the merged run: [left] + piece + [right].
  Run merged{m, rte_pktmbuf_lastseg(m), ns, piece, ++stamp_, piece_mbufs};
  if (left != nullptr) {
    chain(left->head, left->tail, m);
    merged.head = left->head;
    merged.seq = left->seq;
    merged.len = left->len + piece;
    merged.mbufs = left->mbufs + piece_mbufs;
    queued_bytes_ -= left->len;
    queued_mbufs_ -= left->mbufs;
  }
  if (right != nullptr) {
    chain(merged.head, merged.tail, right->head);
    merged.tail = right->tail;
    merged.len += right->len;
    merged.mbufs += right->mbufs;
    queued_bytes_ -= right->len;
    queued_mbufs_ -= right->mbufs;
  }
  erase(first, j - first);

  if (in_order) {
    // RCV.NXT advances over the segment and the run it reached (only the lowest run can start
    // right after it).
    rcv_nxt_ = merged.seq + merged.len;
    res.status = ReassStatus::kDelivered;
    res.data = merged.head;
    res.len = merged.len;
    return res;
  }
  for (uint32_t k = nruns_; k > first; --k) runs_[k] = runs_[k - 1];
  runs_[first] = merged;
  ++nruns_;
  queued_bytes_ += merged.len;
  queued_mbufs_ += merged.mbufs;
  res.status = ReassStatus::kQueued;
  return res;
}

void Reassembly::advance(uint32_t n) {
  rcv_nxt_ += n;
  uint32_t gone = 0;
  while (gone < nruns_ && seq_le(runs_[gone].seq, rcv_nxt_)) {
    rte_pktmbuf_free(runs_[gone].head);
    queued_bytes_ -= runs_[gone].len;
    queued_mbufs_ -= runs_[gone].mbufs;
    ++gone;
  }
  erase(0, gone);
}

uint32_t Reassembly::sack_blocks(SackBlock* out, uint32_t max, const SackBlock* dsack) const {
  uint32_t n = 0;
  uint32_t used = 0;  // bit per run already reported
  if (dsack != nullptr && n < max) {
    out[n++] = *dsack;
    // RFC 2883 §4 (4): the run that holds the duplicate follows it.
    for (uint32_t k = 0; k < nruns_ && n < max; ++k) {
      if (seq_ge(dsack->start, runs_[k].seq) && seq_le(dsack->end, runs_[k].end())) {
        out[n++] = SackBlock{runs_[k].seq, runs_[k].end()};
        used |= 1u << k;
      }
    }
  }
  while (n < max) {
    // RFC 2018 §4: most recently changed first; a run never repeats, runs are disjoint.
    uint32_t best = nruns_;
    for (uint32_t k = 0; k < nruns_; ++k) {
      if ((used & (1u << k)) == 0 && (best == nruns_ || seq_gt(runs_[k].stamp, runs_[best].stamp))) {
        best = k;
      }
    }
    if (best == nruns_) break;
    used |= 1u << best;
    out[n++] = SackBlock{runs_[best].seq, runs_[best].end()};
  }
  return n;
}

void Reassembly::clear() {
  for (uint32_t k = 0; k < nruns_; ++k) rte_pktmbuf_free(runs_[k].head);
  nruns_ = 0;
  queued_bytes_ = 0;
  queued_mbufs_ = 0;
}

}  // namespace meshgate::dp::tcp
