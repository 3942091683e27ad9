// RFC 6675 SACK scoreboard: recording RFC 2018 blocks, IsLost, SetPipe and NextSeg rules 1-4
// on hand-worked scenarios (1000-byte segments, one or two losses, a tail loss), the loss
// recovery entry and exit, D-SACK and bogus blocks, bounded storage, RTO, reneging, and the
// same scenarios with the sequence space wrapping in the middle of the window.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/tcp/sack.h"

namespace meshgate::dp::tcp {
namespace {

constexpr uint32_t kMss = 1000;

// Segment n (1-based) of a flight of 1000-byte segments starting at `base`.
struct Flight {
  uint32_t base;
  uint32_t seg(uint32_t n) const { return base + (n - 1) * kMss; }
  SackBlock segs(uint32_t first, uint32_t last) const { return {seg(first), seg(last + 1)}; }
};

SackAckResult ack(SackScoreboard& sb, uint32_t a, std::vector<SackBlock> blocks = {}) {
  return sb.on_ack(a, blocks.data(), uint32_t(blocks.size()));
}

class TcpSack : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override {
    f_ = Flight{GetParam()};
    sb_.init(f_.seg(1), kMss);
    sb_.on_sent_new(f_.seg(11));  // segments 1..10 in flight
  }
  Flight f_{0};
  SackScoreboard sb_;
};

// 1000 is an ordinary start; 0xfffff800 puts the wrap in the middle of segment 3.
INSTANTIATE_TEST_SUITE_P(Bases, TcpSack, ::testing::Values(1000u, 0xfffff800u));

TEST_P(TcpSack, single_loss_enters_recovery_on_the_third_duplicate_and_exits_on_full_ack) {
  // Segment 2 is lost; 3, 4, 5 arrive and are SACKed one by one.
  SackAckResult r = ack(sb_, f_.seg(2));
  EXPECT_EQ(r.acked_bytes, kMss);
  EXPECT_FALSE(r.dup_ack);

  r = ack(sb_, f_.seg(2), {f_.segs(3, 3)});
  EXPECT_TRUE(r.dup_ack);
  EXPECT_EQ(r.newly_sacked, kMss);
  EXPECT_FALSE(r.enter_recovery);
  EXPECT_FALSE(sb_.is_lost(f_.seg(2)));  // 1000 SACKed bytes above: not > 2 * SMSS

  r = ack(sb_, f_.seg(2), {f_.segs(3, 4)});
  EXPECT_FALSE(r.enter_recovery);
  EXPECT_FALSE(sb_.is_lost(f_.seg(2)));  // 2000 bytes: still not more than 2 * SMSS

  r = ack(sb_, f_.seg(2), {f_.segs(3, 5)});
  EXPECT_TRUE(r.enter_recovery);          // DupAcks = 3, and IsLost(HighACK + 1)
  EXPECT_TRUE(sb_.is_lost(f_.seg(2)));
  EXPECT_EQ(sb_.dup_acks(), 3u);
  ASSERT_EQ(sb_.range_count(), 1u);

  const SackSegment first = sb_.enter_recovery();
  EXPECT_EQ(first.seq, f_.seg(2));
  EXPECT_EQ(first.len, kMss);
  EXPECT_EQ(first.rule, NextSegRule::kLost);
  EXPECT_EQ(sb_.recovery_end(), f_.seg(11));  // RecoveryPoint = HighData
  EXPECT_EQ(sb_.rxt_next(), f_.seg(3));       // HighRxt = last byte of segment 2
  // SetPipe: segment 2 is lost but retransmitted (counted once, by (b)); 3-5 SACKed;
  // 6-10 are neither lost nor SACKed: 1000 + 5000.
  EXPECT_EQ(sb_.pipe(), 6000u);

  // Segments 6..8 are SACKed as they arrive: pipe falls by one segment each time.
  for (uint32_t n = 6; n <= 8; ++n) {
    r = ack(sb_, f_.seg(2), {f_.segs(3, n)});
    EXPECT_FALSE(r.enter_recovery);  // already in recovery
    EXPECT_EQ(sb_.pipe(), 6000u - (n - 5) * kMss) << "after SACK of segment " << n;
  }
  // Nothing lost remains above HighRxt: NextSeg sends new data (rule 2)...
  SackSegment s = sb_.next_seg(5000);
  EXPECT_EQ(s.rule, NextSegRule::kNewData);
  EXPECT_EQ(s.seq, f_.seg(11));
  EXPECT_EQ(s.len, kMss);
  sb_.on_sent(s);
  EXPECT_EQ(sb_.snd_max(), f_.seg(12));
  EXPECT_EQ(sb_.pipe(), 4000u);  // (C.4): the new segment is in the pipe

  // The retransmission of segment 2 is acknowledged together with 3-8: a partial ACK (below
  // RecoveryPoint), recovery continues.
  r = ack(sb_, f_.seg(9));
  EXPECT_EQ(r.acked_bytes, 7 * kMss);
  EXPECT_FALSE(r.exit_recovery);
  EXPECT_TRUE(sb_.in_recovery());
  // The ACK for everything up to RecoveryPoint ends recovery.
  r = ack(sb_, f_.seg(11));
  EXPECT_TRUE(r.exit_recovery);
  EXPECT_FALSE(sb_.in_recovery());
}

TEST_P(TcpSack, second_loss_is_retransmitted_by_rule_one_once_three_segments_are_above) {
  // Segments 2 and 5 lost.
  ack(sb_, f_.seg(2));
  ack(sb_, f_.seg(2), {f_.segs(3, 3)});
  ack(sb_, f_.seg(2), {f_.segs(3, 4)});
  SackAckResult r = ack(sb_, f_.seg(2), {f_.segs(6, 6), f_.segs(3, 4)});
  ASSERT_TRUE(r.enter_recovery);  // third duplicate ACK
  ASSERT_EQ(sb_.range_count(), 2u);
  EXPECT_EQ(sb_.enter_recovery().seq, f_.seg(2));
  // Above segment 5 only segment 6 is SACKed: not lost yet, and rule 3 would pick it only
  // without new data.
  EXPECT_FALSE(sb_.is_lost(f_.seg(5)));
  EXPECT_EQ(sb_.next_seg(1000).rule, NextSegRule::kNewData);
  SackSegment s3 = sb_.next_seg(0);
  EXPECT_EQ(s3.rule, NextSegRule::kUnsacked);
  EXPECT_EQ(s3.seq, f_.seg(5));
  EXPECT_EQ(s3.len, kMss);  // up to the SACKed segment 6
  // Segments 7 and 8 arrive: three SACKed segments above 5, 3000 bytes > 2 * SMSS.
  ack(sb_, f_.seg(2), {f_.segs(6, 8), f_.segs(3, 4)});
  EXPECT_TRUE(sb_.is_lost(f_.seg(5)));
  // SetPipe: seg 2 retransmitted (1000), seg 5 lost (0), segs 9-10 outstanding (2000).
  EXPECT_EQ(sb_.pipe(), 3000u);
  const SackSegment s = sb_.next_seg(1000);
  EXPECT_EQ(s.rule, NextSegRule::kLost);  // rule 1 before rule 2
  EXPECT_EQ(s.seq, f_.seg(5));
  EXPECT_EQ(s.len, kMss);
  sb_.on_sent(s);
  EXPECT_EQ(sb_.rxt_next(), f_.seg(6));
  EXPECT_EQ(sb_.pipe(), 4000u);
  // Nothing un-SACKed is left above HighRxt below the highest SACK (rules 1, 3), and the
  // rescue must wait for HighACK to pass the first retransmission (rule 4).
  EXPECT_EQ(sb_.next_seg(0).rule, NextSegRule::kNone);
}

TEST_P(TcpSack, is_lost_counts_three_discontiguous_ranges_above) {
  // Small SACKed pieces well under 2 * SMSS in total, but three separate ranges.
  const uint32_t b = f_.seg(3);
  ack(sb_, f_.seg(1), {{b, b + 100}, {b + 200, b + 300}});
  EXPECT_FALSE(sb_.is_lost(f_.seg(1)));
  ack(sb_, f_.seg(1), {{b + 400, b + 500}});
  EXPECT_TRUE(sb_.is_lost(f_.seg(1)));      // DupThresh ranges above
  EXPECT_FALSE(sb_.is_lost(b + 150));       // only two above this one
  EXPECT_FALSE(sb_.is_lost(b + 350));
  EXPECT_TRUE(sb_.is_sacked(b + 50));
  EXPECT_FALSE(sb_.is_sacked(b + 150));
  EXPECT_EQ(sb_.sacked_bytes(), 300u);
}

TEST_P(TcpSack, duplicate_acks_of_small_segments_still_enter_recovery) {
  // RFC 6675 §5 step (1): DupAcks >= DupThresh even though IsLost() says no (100 bytes each).
  const uint32_t b = f_.seg(2);
  ack(sb_, f_.seg(1), {{b + 100, b + 200}});
  ack(sb_, f_.seg(1), {{b + 100, b + 300}});
  const SackAckResult r = ack(sb_, f_.seg(1), {{b + 100, b + 400}});
  EXPECT_FALSE(sb_.is_lost(f_.seg(1)));
  EXPECT_TRUE(r.enter_recovery);
  const SackSegment s = sb_.enter_recovery();
  EXPECT_EQ(s.seq, f_.seg(1));
  EXPECT_EQ(s.len, kMss);  // segment 1, up to the first SACKed byte (b + 100 is beyond it)
}

TEST_P(TcpSack, rescue_retransmission_repairs_a_tail_loss_once) {
  // Segments 2 and 10 lost, nothing more to send.
  ack(sb_, f_.seg(2));
  ack(sb_, f_.seg(2), {f_.segs(3, 3)});
  ack(sb_, f_.seg(2), {f_.segs(3, 4)});
  ASSERT_TRUE(ack(sb_, f_.seg(2), {f_.segs(3, 5)}).enter_recovery);
  sb_.enter_recovery();
  ack(sb_, f_.seg(2), {f_.segs(3, 9)});
  // Segment 10 is the highest outstanding byte: no SACK above it, so never IsLost().
  EXPECT_FALSE(sb_.is_lost(f_.seg(10)));
  // Rule 3 finds nothing below the highest SACK above HighRxt (3-9 are SACKed); rule 4 must
  // wait until HighACK passes RescueRxt (the first retransmission).
  EXPECT_EQ(sb_.next_seg(0).rule, NextSegRule::kNone);
  // The retransmission of 2 arrives: cumulative ACK to 10, still below RecoveryPoint.
  SackAckResult r = ack(sb_, f_.seg(10));
  EXPECT_FALSE(r.exit_recovery);
  const SackSegment s = sb_.next_seg(0);
  EXPECT_EQ(s.rule, NextSegRule::kRescue);
  EXPECT_EQ(s.seq, f_.seg(10));
  EXPECT_EQ(s.len, kMss);
  sb_.on_sent(s);
  EXPECT_EQ(sb_.rxt_next(), f_.seg(10));  // rule 4 does not move HighRxt
  EXPECT_EQ(sb_.next_seg(0).rule, NextSegRule::kNone);  // once per recovery
  EXPECT_TRUE(ack(sb_, f_.seg(11)).exit_recovery);
}

TEST_P(TcpSack, dsack_blocks_below_the_ack_are_flagged_and_ignored) {
  ack(sb_, f_.seg(5));
  // RFC 2883 §4: first block below the cumulative ACK.
  SackAckResult r = ack(sb_, f_.seg(5), {f_.segs(2, 2)});
  EXPECT_TRUE(r.dsack);
  EXPECT_FALSE(r.dup_ack);
  EXPECT_EQ(sb_.range_count(), 0u);
  // First block inside the second: a duplicate above the ACK, also D-SACK.
  r = ack(sb_, f_.seg(5), {f_.segs(7, 7), f_.segs(6, 8)});
  EXPECT_TRUE(r.dsack);
  ASSERT_EQ(sb_.range_count(), 1u);
  EXPECT_EQ(sb_.range(0).start, f_.seg(6));
  EXPECT_EQ(sb_.range(0).end, f_.seg(9));
  EXPECT_EQ(r.newly_sacked, 3 * kMss);
}

TEST_P(TcpSack, blocks_straddling_the_ack_are_trimmed_and_bogus_ones_ignored) {
  ack(sb_, f_.seg(3));
  SackAckResult r = ack(sb_, f_.seg(3), {{f_.seg(2), f_.seg(5)}});
  EXPECT_EQ(r.newly_sacked, 2 * kMss);       // segment 2 is below SND.UNA: only 3 and 4 count
  ASSERT_EQ(sb_.range_count(), 1u);
  EXPECT_EQ(sb_.range(0).start, f_.seg(3));  // trimmed to SND.UNA
  r = ack(sb_, f_.seg(3), {{f_.seg(9), f_.seg(12)}});       // beyond SND.MAX
  EXPECT_EQ(sb_.range_count(), 1u);
  r = ack(sb_, f_.seg(3), {{f_.seg(8), f_.seg(7)}});        // inverted
  r = ack(sb_, f_.seg(3), {{f_.seg(8), f_.seg(8)}});        // empty
  EXPECT_EQ(sb_.range_count(), 1u);
  EXPECT_FALSE(r.dup_ack);
  // An ACK above SND.MAX is not processed at all.
  r = ack(sb_, f_.seg(12), {f_.segs(7, 7)});
  EXPECT_EQ(r.acked_bytes, 0u);
  EXPECT_EQ(sb_.snd_una(), f_.seg(3));
}

TEST_P(TcpSack, ranges_merge_when_a_block_bridges_them) {
  ack(sb_, f_.seg(1), {f_.segs(3, 3), f_.segs(5, 5), f_.segs(7, 7)});
  ASSERT_EQ(sb_.range_count(), 3u);
  const SackAckResult r = ack(sb_, f_.seg(1), {{f_.seg(3) + 500, f_.seg(7) + 500}});
  EXPECT_EQ(r.newly_sacked, 2 * kMss);  // segments 4 and 6
  ASSERT_EQ(sb_.range_count(), 1u);
  EXPECT_EQ(sb_.range(0).start, f_.seg(3));
  EXPECT_EQ(sb_.range(0).end, f_.seg(8));
  // Adjacent blocks merge too.
  ack(sb_, f_.seg(1), {f_.segs(8, 8)});
  EXPECT_EQ(sb_.range_count(), 1u);
  EXPECT_EQ(sb_.range(0).end, f_.seg(9));
}

TEST_P(TcpSack, sacked_data_is_not_released_until_cumulatively_acked) {
  // RFC 2018 §8: SACKs are advisory. acked_bytes (what the caller may free) comes only from
  // the cumulative ACK; SACK info survives ACKs that no longer mention it (the receiver may
  // have reneged, or just reports other blocks).
  SackAckResult r = ack(sb_, f_.seg(2), {f_.segs(3, 6)});
  EXPECT_EQ(r.acked_bytes, kMss);
  r = ack(sb_, f_.seg(2));  // no blocks any more
  EXPECT_EQ(r.acked_bytes, 0u);
  EXPECT_TRUE(sb_.is_sacked(f_.seg(4)));
  r = ack(sb_, f_.seg(7));
  EXPECT_EQ(r.acked_bytes, 5 * kMss);  // 2 (retransmitted) and 3-6: only now releasable
  EXPECT_EQ(sb_.range_count(), 0u);
}

TEST_P(TcpSack, timeout_forgets_sack_info_and_holds_off_a_new_recovery) {
  ack(sb_, f_.seg(2), {f_.segs(3, 3)});
  ack(sb_, f_.seg(2), {f_.segs(3, 4)});
  ASSERT_TRUE(ack(sb_, f_.seg(2), {f_.segs(3, 5)}).enter_recovery);
  sb_.enter_recovery();
  sb_.on_rto();
  EXPECT_FALSE(sb_.in_recovery());
  EXPECT_EQ(sb_.range_count(), 0u);       // RFC 2018 §8
  EXPECT_EQ(sb_.recovery_end(), f_.seg(11));
  EXPECT_EQ(sb_.pipe(), 9 * kMss);        // everything outstanding counts again
  // Duplicate ACKs for data sent before the timeout do not start a recovery (RFC 6675 §5.1).
  ack(sb_, f_.seg(2), {f_.segs(3, 3)});
  ack(sb_, f_.seg(2), {f_.segs(3, 4)});
  EXPECT_FALSE(ack(sb_, f_.seg(2), {f_.segs(3, 5)}).enter_recovery);
  // Once the ACK reaches RecoveryPoint, losses may start one again.
  ack(sb_, f_.seg(11));
  sb_.on_sent_new(f_.seg(21));
  ack(sb_, f_.seg(11), {f_.segs(12, 12)});
  ack(sb_, f_.seg(11), {f_.segs(12, 13)});
  EXPECT_TRUE(ack(sb_, f_.seg(11), {f_.segs(12, 14)}).enter_recovery);
}

TEST_P(TcpSack, pipe_outside_recovery_is_unsacked_bytes_not_deemed_lost) {
  EXPECT_EQ(sb_.pipe(), 10 * kMss);
  ack(sb_, f_.seg(1), {f_.segs(3, 3)});
  EXPECT_EQ(sb_.pipe(), 9 * kMss);
  ack(sb_, f_.seg(1), {f_.segs(3, 5)});  // 1 and 2 are now lost
  EXPECT_EQ(sb_.pipe(), 5 * kMss);       // 6-10
}

TEST(TcpSackBounds, a_full_scoreboard_keeps_the_ranges_closest_to_snd_una) {
  SackScoreboard sb;
  sb.init(0, 100);
  sb.on_sent_new(100 * 100);
  // 17 disjoint one-segment blocks: every other segment from 1 upward.
  for (uint32_t i = 0; i < 17; ++i) {
    const SackBlock b{(2 * i + 1) * 100, (2 * i + 2) * 100};
    sb.on_ack(0, &b, 1);
  }
  EXPECT_EQ(sb.range_count(), kMaxSackRanges);
  EXPECT_EQ(sb.overflows(), 1u);
  EXPECT_EQ(sb.range(kMaxSackRanges - 1).start, 3100u);  // block 17 (3300) was forgotten
  // A new low block evicts the highest range instead.
  const SackBlock low{50, 60};
  sb.on_ack(0, &low, 1);
  EXPECT_EQ(sb.range_count(), kMaxSackRanges);
  EXPECT_EQ(sb.range(0).start, 50u);
  EXPECT_EQ(sb.range(kMaxSackRanges - 1).start, 2900u);
  EXPECT_EQ(sb.overflows(), 2u);
}

}  // namespace
}  // namespace meshgate::dp::tcp
