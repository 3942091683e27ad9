#include "dataplane/tcp/sack.h"

#include <algorithm>

#include "dataplane/tcp/seq.h"

namespace meshgate::dp::tcp {

void SackScoreboard::init(uint32_t snd_una, uint32_t smss) {
  *this = SackScoreboard{};
  snd_una_ = snd_max_ = rxt_next_ = recovery_end_ = rescue_end_ = snd_una;
  smss_ = smss;
}

SackAckResult SackScoreboard::on_ack(uint32_t ack, const SackBlock* blocks, uint32_t nblocks) {
  SackAckResult res;
  if (seq_gt(ack, snd_max_)) return res;
  const bool cumulative = seq_gt(ack, snd_una_);
  if (cumulative) {
    res.acked_bytes = ack - snd_una_;
    snd_una_ = ack;
    drop_below(ack);
    rxt_next_ = seq_max(rxt_next_, ack);
  }
  for (uint32_t i = 0; i < nblocks; ++i) {
    const SackBlock& b = blocks[i];
    // An empty, inverted or over-2^31 block cannot be real.
    if (!seq_lt(b.start, b.end)) continue;
    if (seq_le(b.end, snd_una_)) {
      // RFC 2883 §4: a first block below the cumulative ACK reports a duplicate segment. Any
      // other block down here is stale (reordered ACK); either way nothing to record.
      if (i == 0) res.dsack = true;
      continue;
    }
    // RFC 2018 §3 blocks describe data that was sent; one past SND.MAX is forged or corrupt.
    if (seq_gt(b.end, snd_max_)) continue;
    // RFC 2883 §4: a first block inside the second reports a duplicate above the ACK. Its bytes
    // are SACKed by the second block as well, so recording it is harmless.
    if (i == 0 && nblocks > 1 && seq_ge(b.start, blocks[1].start) &&
        seq_le(b.end, blocks[1].end)) {
      res.dsack = true;
    }
    res.newly_sacked += record(seq_max(b.start, snd_una_), b.end);
  }
  // RFC 6675 §2: with SACK, a duplicate ACK is one that SACKs octets not SACKed before (the
  // outstanding-data condition holds: the octets lie in [snd_una, snd_max)).
  res.dup_ack = res.newly_sacked > 0;
  // RFC 6675 §5.1: after a timeout, no new recovery until HighACK >= RecoveryPoint.
  if (hold_after_rto_ && seq_ge(snd_una_, recovery_end_)) hold_after_rto_ = false;

  if (in_recovery_) {
    // RFC 6675 §5 (A): a cumulative ACK beyond RecoveryPoint ends recovery. The scoreboard
    // above the new HighACK is kept (SHOULD NOT be cleared).
    if (seq_ge(snd_una_, recovery_end_)) {
      in_recovery_ = false;
      rescue_valid_ = false;
      dup_acks_ = 0;
      res.exit_recovery = true;
    }
    return res;
  }
  // RFC 6675 §5: a cumulative ACK resets DupAcks; a duplicate ACK (even a cumulative one)
  // then counts.
  if (cumulative) dup_acks_ = 0;
  if (res.dup_ack) {
    ++dup_acks_;
    // §5 (1): DupAcks >= DupThresh (catches runs of small segments IsLost() would not), or
    // (2): IsLost(HighACK + 1).
    if (!hold_after_rto_ && (dup_acks_ >= kDupThresh || is_lost(snd_una_))) {
      res.enter_recovery = true;
    }
  }
  return res;
}

uint32_t SackScoreboard::record(uint32_t start, uint32_t end) {
  // Ranges are kept sorted, disjoint and non-adjacent. Find the first range that overlaps or
  // touches [start, end) and the run of ranges it swallows.
  uint32_t i = 0;
  while (i < nranges_ && seq_lt(ranges_[i].end, start)) ++i;
  uint32_t j = i;
  uint32_t covered = 0;
  uint32_t lo = start;
  uint32_t hi = end;
  for (; j < nranges_ && seq_le(ranges_[j].start, end); ++j) {
    const uint32_t os = seq_max(ranges_[j].start, start);
    const uint32_t oe = seq_min(ranges_[j].end, end);
    if (seq_lt(os, oe)) covered += oe - os;
    lo = seq_min(lo, ranges_[j].start);
    hi = seq_max(hi, ranges_[j].end);
  }
  const uint32_t newly = (end - start) - covered;
  if (j == i) {
    // A new range at index i.
    if (nranges_ == kMaxSackRanges) {
      ++overflows_;
      if (i == nranges_) return 0;  // it would be the highest: forget it
      --nranges_;                   // forget the highest to make room
    }
    for (uint32_t k = nranges_; k > i; --k) ranges_[k] = ranges_[k - 1];
    ranges_[i] = SackBlock{start, end};
    ++nranges_;
    return newly;
  }
  ranges_[i] = SackBlock{lo, hi};
  const uint32_t gone = j - i - 1;
  for (uint32_t k = i + 1; k + gone < nranges_; ++k) ranges_[k] = ranges_[k + gone];
  nranges_ = uint8_t(nranges_ - gone);
  return newly;
}

void SackScoreboard::drop_below(uint32_t seq) {
  uint32_t gone = 0;
  while (gone < nranges_ && seq_le(ranges_[gone].end, seq)) ++gone;
  for (uint32_t k = 0; k + gone < nranges_; ++k) ranges_[k] = ranges_[k + gone];
  nranges_ = uint8_t(nranges_ - gone);
  if (nranges_ > 0 && seq_lt(ranges_[0].start, seq)) ranges_[0].start = seq;
}

bool SackScoreboard::is_lost(uint32_t seq) const {
  uint32_t count = 0;
  uint32_t bytes = 0;
  for (uint32_t i = 0; i < nranges_; ++i) {
    const uint32_t s = seq_max(ranges_[i].start, seq + 1);
    if (seq_lt(s, ranges_[i].end)) {
      ++count;
      bytes += ranges_[i].end - s;
    }
  }
  return count >= kDupThresh || bytes > (kDupThresh - 1) * smss_;
}

bool SackScoreboard::is_sacked(uint32_t seq) const {
  for (uint32_t i = 0; i < nranges_; ++i) {
    if (seq_in_range(seq, ranges_[i].start, ranges_[i].end)) return true;
  }
  return false;
}

uint32_t SackScoreboard::lost_below() const {
  // IsLost() only grows as the sequence number falls, and is constant across a hole (a hole
  // holds no SACKed byte). So there is one boundary: un-SACKed bytes below the start of the
  // highest range that has DupThresh ranges, or more than (DupThresh - 1) * SMSS SACKed bytes,
  // from itself upward are lost; the rest are not. One pass from the top finds it.
  uint32_t count = 0;
  uint32_t bytes = 0;
  for (uint32_t i = nranges_; i-- > 0;) {
    ++count;
    bytes += ranges_[i].end - ranges_[i].start;
    if (count >= kDupThresh || bytes > (kDupThresh - 1) * smss_) return ranges_[i].start;
  }
  return snd_una_;
}

uint32_t SackScoreboard::pipe() const {
  const uint32_t lost_end = lost_below();
  uint32_t pipe = 0;
  for (uint32_t i = 0; i <= nranges_; ++i) {
    const uint32_t hs = i == 0 ? snd_una_ : ranges_[i - 1].end;
    const uint32_t he = i == nranges_ ? snd_max_ : ranges_[i].start;
    if (!seq_lt(hs, he)) continue;
    // RFC 6675 §4 SetPipe (a): an un-SACKed byte not deemed lost is in the network.
    if (seq_gt(he, lost_end)) pipe += he - hs;
    // (b): so is one retransmitted in this recovery (at or below HighRxt).
    if (seq_lt(hs, rxt_next_)) pipe += seq_min(he, rxt_next_) - hs;
  }
  return pipe;
}

uint32_t SackScoreboard::first_unsacked(uint32_t from) const {
  for (uint32_t i = 0; i < nranges_; ++i) {
    if (seq_in_range(from, ranges_[i].start, ranges_[i].end)) return ranges_[i].end;
  }
  return from;
}

uint32_t SackScoreboard::hole_end(uint32_t seq) const {
  for (uint32_t i = 0; i < nranges_; ++i) {
    if (seq_ge(ranges_[i].start, seq)) return ranges_[i].start;
  }
  return snd_max_;
}

SackSegment SackScoreboard::next_seg(uint32_t new_bytes) const {
  if (nranges_ > 0) {
    const uint32_t s2 = first_unsacked(seq_max(rxt_next_, snd_una_));
    // Rule (1): the lowest un-SACKed S2 above HighRxt (1.a) that IsLost() (1.c); (1.b), below
    // the highest SACKed byte, follows from (1.c).
    if (seq_lt(s2, lost_below())) {
      return SackSegment{s2, std::min(hole_end(s2) - s2, smss_), NextSegRule::kLost};
    }
    // Rule (3), after rule (2) below: (1.a) and (1.b) without (1.c).
    if (in_recovery_ && new_bytes == 0 && seq_lt(s2, ranges_[nranges_ - 1].end)) {
      return SackSegment{s2, std::min(hole_end(s2) - s2, smss_), NextSegRule::kUnsacked};
    }
  }
  // Rule (2): new data, as much as allowed, up to SMSS.
  if (new_bytes > 0) return SackSegment{snd_max_, std::min(new_bytes, smss_), NextSegRule::kNewData};
  // Rule (4): one rescue retransmission per recovery, once HighACK > RescueRxt: the segment
  // holding the highest un-SACKed byte, so a tail loss is repaired without waiting for RTO.
  if (!in_recovery_ || (rescue_valid_ && !seq_gt(snd_una_, rescue_end_))) return SackSegment{};
  uint32_t top = snd_max_;
  uint32_t bottom = nranges_ > 0 ? ranges_[nranges_ - 1].end : snd_una_;
  if (nranges_ > 0 && !seq_lt(bottom, top)) {
    top = ranges_[nranges_ - 1].start;
    bottom = nranges_ > 1 ? ranges_[nranges_ - 2].end : snd_una_;
  }
  if (!seq_lt(bottom, top)) return SackSegment{};
  const uint32_t len = std::min(top - bottom, smss_);
  return SackSegment{top - len, len, NextSegRule::kRescue};
}

void SackScoreboard::on_sent(const SackSegment& seg) {
  const uint32_t end = seg.seq + seg.len;
  switch (seg.rule) {
    case NextSegRule::kLost:
    case NextSegRule::kUnsacked:
      // RFC 6675 §5 (C.2): HighRxt = the last byte retransmitted.
      rxt_next_ = seq_max(rxt_next_, end);
      break;
    case NextSegRule::kNewData:
      // (C.3): HighData moves up.
      snd_max_ = seq_max(snd_max_, end);
      break;
    case NextSegRule::kRescue:
      // Rule (4): RescueRxt = RecoveryPoint; HighRxt MUST NOT move.
      rescue_end_ = recovery_end_;
      rescue_valid_ = true;
      break;
    case NextSegRule::kNone: break;
  }
}

void SackScoreboard::on_sent_new(uint32_t snd_max) { snd_max_ = seq_max(snd_max_, snd_max); }

SackSegment SackScoreboard::enter_recovery() {
  in_recovery_ = true;
  recovery_end_ = snd_max_;  // (4.1) RecoveryPoint = HighData
  // (4.3) the segment at HighACK + 1, up to the first SACKed byte. A receiver that SACKs
  // SND.UNA itself contradicts its own cumulative ACK: resend a full segment there anyway.
  uint32_t end = hole_end(snd_una_);
  if (end == snd_una_) end = snd_max_;
  const uint32_t len = std::min(end - snd_una_, smss_);
  // (4.3) HighRxt = RescueRxt = the last byte of that segment.
  rxt_next_ = snd_una_ + len;
  rescue_end_ = rxt_next_;
  rescue_valid_ = true;
  return SackSegment{snd_una_, len, NextSegRule::kLost};
}

void SackScoreboard::on_rto() {
  // RFC 6675 §5.1.
  recovery_end_ = snd_max_;
  hold_after_rto_ = seq_lt(snd_una_, snd_max_);
  in_recovery_ = false;
  rescue_valid_ = false;
  dup_acks_ = 0;
  rxt_next_ = snd_una_;
  // RFC 2018 §8: after a timeout the sender SHOULD turn off all SACKed bits (the receiver may
  // have reneged) and MUST ignore prior SACK information when choosing what to retransmit.
  nranges_ = 0;
}

uint32_t SackScoreboard::sacked_bytes() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < nranges_; ++i) n += ranges_[i].end - ranges_[i].start;
  return n;
}

}  // namespace meshgate::dp::tcp
