// TCP sequence-number arithmetic (RFC 9293 §3.4): comparisons, distances and windows across the
// 2^32 wrap.
#include <gtest/gtest.h>

#include "dataplane/tcp/seq.h"

namespace meshgate::dp::tcp {
namespace {

// The comparisons are constexpr: the TCB may use them in constant expressions.
static_assert(seq_lt(0xfffffff0u, 0x10u));
static_assert(seq_in_range(5, 0xfffffffeu, 10));

TEST(TcpSeq, comparisons_hold_across_the_wrap) {
  const uint32_t before = 0xfffffff0u;  // 16 before the wrap
  const uint32_t after = 0x00000010u;   // 16 after it: 32 bytes later
  EXPECT_TRUE(seq_lt(before, after));
  EXPECT_TRUE(seq_le(before, after));
  EXPECT_FALSE(seq_gt(before, after));
  EXPECT_FALSE(seq_ge(before, after));
  EXPECT_TRUE(seq_gt(after, before));
  EXPECT_TRUE(seq_ge(after, before));
  EXPECT_FALSE(seq_lt(after, before));
  EXPECT_EQ(seq_diff(after, before), 32);
  EXPECT_EQ(seq_diff(before, after), -32);
}

TEST(TcpSeq, equal_numbers_are_le_and_ge_but_not_lt_or_gt) {
  for (uint32_t s : {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu}) {
    EXPECT_TRUE(seq_le(s, s));
    EXPECT_TRUE(seq_ge(s, s));
    EXPECT_FALSE(seq_lt(s, s));
    EXPECT_FALSE(seq_gt(s, s));
    EXPECT_EQ(seq_diff(s, s), 0);
  }
}

TEST(TcpSeq, order_holds_up_to_just_below_half_the_space) {
  // RFC 9293 §3.4 / RFC 7323 §2.3: numbers compared are less than 2^31 apart.
  const uint32_t a = 0xc0000000u;
  const uint32_t b = a + 0x7fffffffu;  // 2^31 - 1 later, past the wrap
  EXPECT_TRUE(seq_lt(a, b));
  EXPECT_TRUE(seq_gt(b, a));
  EXPECT_EQ(seq_distance(a, b), 0x7fffffffu);
}

TEST(TcpSeq, max_and_min_pick_by_sequence_order_not_by_magnitude) {
  EXPECT_EQ(seq_max(0xffffff00u, 0x100u), 0x100u);
  EXPECT_EQ(seq_min(0xffffff00u, 0x100u), 0xffffff00u);
  EXPECT_EQ(seq_max(7, 9), 9u);
  EXPECT_EQ(seq_min(7, 9), 7u);
}

TEST(TcpSeq, distance_counts_bytes_forward_through_the_wrap) {
  EXPECT_EQ(seq_distance(0xfffffffeu, 3), 5u);  // fffffffe, ffffffff, 0, 1, 2
  EXPECT_EQ(seq_distance(100, 100), 0u);
  EXPECT_EQ(seq_distance(100, 1100), 1000u);
}

TEST(TcpSeq, in_window_is_start_inclusive_end_exclusive_across_the_wrap) {
  const uint32_t start = 0xffffff00u;
  const uint32_t len = 0x200;  // ends at 0x100
  EXPECT_TRUE(in_window(start, start, len));
  EXPECT_TRUE(in_window(0xffffffffu, start, len));
  EXPECT_TRUE(in_window(0, start, len));
  EXPECT_TRUE(in_window(0xff, start, len));
  EXPECT_FALSE(in_window(0x100, start, len));         // first byte past the window
  EXPECT_FALSE(in_window(0xfffffeffu, start, len));   // last byte before it
  EXPECT_FALSE(in_window(0x80000000u, start, len));   // far away
}

TEST(TcpSeq, a_zero_length_window_holds_nothing) {
  EXPECT_FALSE(in_window(5, 5, 0));
  EXPECT_FALSE(in_window(4, 5, 0));
}

TEST(TcpSeq, seq_in_range_matches_in_window_with_explicit_ends) {
  const uint32_t lo = 0xfffffff8u;
  const uint32_t hi = 8;
  for (uint32_t s = lo - 4; s != hi + 4; ++s) {
    EXPECT_EQ(seq_in_range(s, lo, hi), in_window(s, lo, hi - lo)) << s;
  }
  EXPECT_FALSE(seq_in_range(3, 3, 3));  // empty range
}

}  // namespace
}  // namespace meshgate::dp::tcp
