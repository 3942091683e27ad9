// SACK sender scoreboard and loss recovery (RFC 6675, with RFC 2018 blocks and RFC 2883
// D-SACK tolerance).
//
// Per connection, owned by the worker lcore that owns the connection; no locks, no allocation:
// the SACKed ranges live in a fixed array of kMaxSackRanges (16) entries inside the object
// (168 bytes, static_assert below). The scoreboard only knows sequence numbers; the caller's
// retransmission queue holds the data. RFC 2018 §8: SACKed data is advisory (the receiver may
// renege), so the caller frees data only when the cumulative ACK covers it (the `acked_bytes`
// of an AckResult), never because it was SACKed.
//
// Names follow RFC 6675 §2 / §3, with half-open ends instead of the RFC's last octets:
//   HighACK + 1 = snd_una()         HighData + 1 = snd_max()
//   HighRxt + 1 = rxt_next()        RecoveryPoint + 1 = recovery_end()
//
// Driving it (RFC 6675 §5):
//   every ACK                 -> on_ack(); if .enter_recovery: seg = enter_recovery(), resend
//                                seg, cc.on_enter_recovery() (cwnd = ssthresh)
//   in recovery, per ACK      -> pipe = pipe(); while cwnd - pipe >= SMSS: seg = next_seg(),
//                                send it, on_sent(seg), pipe += seg.len   (§5 (C.1)-(C.5))
//   .exit_recovery            -> cc.on_exit_recovery()
//   new data sent outside recovery -> on_sent_new(snd_max)
//   retransmission timeout    -> on_rto()
#pragma once

#include <cstdint>

namespace meshgate::dp::tcp {

// One SACK block as carried in the option (RFC 2018 §3): [start, end), end = the sequence
// number just after the block.
struct SackBlock {
  uint32_t start = 0;
  uint32_t end = 0;
};

// RFC 6675 §2: DupThresh, the duplicate ACKs (or SACKed segments) that signal a loss.
inline constexpr uint32_t kDupThresh = 3;
// The SACKed ranges one connection remembers. A receiver reports at most 4 blocks per ACK
// (RFC 2018 §3) and ranges merge as holes fill, so 16 is 16 simultaneous holes. When full the
// ranges closest to SND.UNA are kept (recovery works upward from there) and the highest is
// forgotten: that data then just looks un-SACKed, which costs at most a spurious
// retransmission, never a missed one; the receiver repeats its recent blocks anyway.
inline constexpr uint32_t kMaxSackRanges = 16;

// Which NextSeg() rule (RFC 6675 §4) chose a segment.
enum class NextSegRule : uint8_t {
  kNone,      // (5) nothing to send
  kLost,      // (1) retransmit a lost segment (also the first retransmission, §5 (4.3))
  kNewData,   // (2) send new data
  kUnsacked,  // (3) retransmit un-SACKed data not yet deemed lost
  kRescue,    // (4) the one rescue retransmission per recovery
};

struct SackSegment {
  uint32_t seq = 0;
  uint32_t len = 0;
  NextSegRule rule = NextSegRule::kNone;
};

struct SackAckResult {
  uint32_t acked_bytes = 0;      // cumulatively acknowledged: the caller may free these
  uint32_t newly_sacked = 0;     // bytes SACKed for the first time by this ACK
  bool dup_ack = false;          // a duplicate ACK in RFC 6675 §2's sense
  bool dsack = false;            // the first block was a D-SACK (RFC 2883 §4)
  bool enter_recovery = false;   // §5 steps (1)-(2): call enter_recovery()
  bool exit_recovery = false;    // §5 (A): the ACK covered RecoveryPoint
};

class SackScoreboard {
 public:
  // A connection whose first unacknowledged (and first unsent) byte is `snd_una`.
  void init(uint32_t snd_una, uint32_t smss);

  // Records an ACK (RFC 6675 §4 Update(), §5 DupAcks and recovery bookkeeping). `ack` must not
  // be above snd_max (the TCB drops such ACKs, RFC 9293 §3.10.7.4); an ACK below snd_una only
  // contributes its SACK blocks. Blocks outside [snd_una, snd_max) are ignored: below snd_una
  // they are D-SACKs or stale (RFC 2883), above snd_max they are bogus.
  SackAckResult on_ack(uint32_t ack, const SackBlock* blocks, uint32_t nblocks);

  // RFC 6675 §4 IsLost(seq): DupThresh discontiguous SACKed ranges above seq, or more than
  // (DupThresh - 1) * SMSS SACKed bytes above it.
  bool is_lost(uint32_t seq) const;
  bool is_sacked(uint32_t seq) const;
  // RFC 6675 §4 SetPipe(): un-SACKed bytes in [snd_una, snd_max) not deemed lost, plus those
  // retransmitted in this recovery (below rxt_next()).
  uint32_t pipe() const;
  // RFC 6675 §4 NextSeg(): the next segment to send, at most SMSS bytes, never overlapping SACKed
  // data. `new_bytes`: how much unsent data the application has and the peer's window allows
  // (rule 2). Rules 3 and 4 only apply in recovery.
  SackSegment next_seg(uint32_t new_bytes) const;
  // The caller sent `seg` (from next_seg() or enter_recovery()): §5 (C.2) HighRxt, (C.3)
  // HighData, rule 4's RescueRxt.
  void on_sent(const SackSegment& seg);
  // New data went out outside recovery: HighData moves to snd_max - 1.
  void on_sent_new(uint32_t snd_max);

  // RFC 6675 §5 (4.1) RecoveryPoint = HighData and (4.3): the segment starting at HighACK + 1
  // to retransmit now; HighRxt and RescueRxt are set to its last byte. Call when on_ack() said
  // enter_recovery.
  SackSegment enter_recovery();
  // Retransmission timeout: RFC 6675 §5.1 (RecoveryPoint = HighData, recovery ends, no new
  // recovery until the cumulative ACK reaches it) and RFC 2018 §8 (forget the SACK information:
  // the timeout may mean the receiver reneged).
  void on_rto();
  // The segment size IsLost() counts in (RFC 6675 §4), after a path MTU change.
  void set_smss(uint32_t smss) { smss_ = smss; }

  bool in_recovery() const { return in_recovery_; }
  uint32_t snd_una() const { return snd_una_; }
  uint32_t snd_max() const { return snd_max_; }
  uint32_t rxt_next() const { return rxt_next_; }
  uint32_t recovery_end() const { return recovery_end_; }
  uint32_t dup_acks() const { return dup_acks_; }
  uint32_t sacked_bytes() const;
  // The SACKed ranges in sequence order, merged, all inside [snd_una, snd_max).
  uint32_t range_count() const { return nranges_; }
  SackBlock range(uint32_t i) const { return ranges_[i]; }
  // Blocks forgotten because the scoreboard was full.
  uint32_t overflows() const { return overflows_; }

 private:
  uint32_t record(uint32_t start, uint32_t end);
  void drop_below(uint32_t seq);
  uint32_t lost_below() const;
  uint32_t hole_end(uint32_t seq) const;
  uint32_t first_unsacked(uint32_t from) const;

  SackBlock ranges_[kMaxSackRanges];
  uint32_t snd_una_ = 0;
  uint32_t snd_max_ = 0;
  uint32_t smss_ = 0;
  uint32_t rxt_next_ = 0;
  uint32_t rescue_end_ = 0;    // RescueRxt + 1
  uint32_t recovery_end_ = 0;  // RecoveryPoint + 1
  uint32_t dup_acks_ = 0;
  uint16_t overflows_ = 0;
  uint8_t nranges_ = 0;
  bool in_recovery_ = false;
  bool rescue_valid_ = false;
  bool hold_after_rto_ = false;  // §5.1: no new recovery until snd_una reaches recovery_end_
};
static_assert(sizeof(SackScoreboard) <= 168, "SackScoreboard is per connection");

}  // namespace meshgate::dp::tcp
