// RFC 6298 retransmission timeout: hand-computed SRTT / RTTVAR / RTO sequences, the bounds
// (min, max, clock granularity), exponential backoff and its reset, timestamp samples, the
// 3 s fallback after a lost SYN, and a long random sequence against the RFC formulas in
// floating point.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "dataplane/tcp/rto.h"

namespace meshgate::dp::tcp {
namespace {

RtoEstimator make(RtoConfig cfg = {}) {
  RtoEstimator r;
  r.init(cfg);
  return r;
}

TEST(TcpRto, before_any_sample_rto_is_one_second) {
  RtoEstimator r = make();
  EXPECT_FALSE(r.has_sample());
  EXPECT_EQ(r.rto_us(), 1'000'000u);  // RFC 6298 §2.1
  EXPECT_EQ(r.srtt_us(), 0u);
}

TEST(TcpRto, first_sample_sets_srtt_r_and_rttvar_half_r) {
  RtoEstimator r = make();
  r.on_rtt_sample(100'000);
  // RFC 6298 §2.2: SRTT = 100 ms, RTTVAR = 50 ms, RTO = 100 + max(G, 4 * 50) = 300 ms.
  EXPECT_TRUE(r.has_sample());
  EXPECT_EQ(r.srtt_us(), 100'000u);
  EXPECT_EQ(r.rttvar_us(), 50'000u);
  EXPECT_EQ(r.rto_us(), 300'000u);
}

TEST(TcpRto, later_samples_follow_the_hand_computed_sequence) {
  RtoEstimator r = make();
  r.on_rtt_sample(100'000);
  // R' = 200 ms. RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 37.5 + 25 = 62.5 ms (old SRTT);
  // SRTT = 7/8 * 100 + 1/8 * 200 = 112.5 ms; RTO = 112.5 + 4 * 62.5 = 362.5 ms.
  r.on_rtt_sample(200'000);
  EXPECT_EQ(r.rttvar_us(), 62'500u);
  EXPECT_EQ(r.srtt_us(), 112'500u);
  EXPECT_EQ(r.rto_us(), 362'500u);
  // R' = 100 ms. RTTVAR = 3/4 * 62.5 + 1/4 * 12.5 = 50 ms; SRTT = 7/8 * 112.5 + 12.5 =
  // 110.9375 ms; RTO = 110.9375 + 200 = 310.9375 ms, rounded up to 310938 µs.
  r.on_rtt_sample(100'000);
  EXPECT_EQ(r.rttvar_us(), 50'000u);
  EXPECT_EQ(r.srtt_us(), 110'938u);  // 110937.5 rounded
  EXPECT_EQ(r.rto_us(), 310'938u);
}

TEST(TcpRto, small_rtts_are_floored_at_the_configured_minimum) {
  RtoEstimator linux_like = make();
  linux_like.on_rtt_sample(10'000);  // 10 + 4 * 5 = 30 ms < 200 ms
  EXPECT_EQ(linux_like.rto_us(), 200'000u);

  RtoConfig rfc;
  rfc.min_us = 1'000'000;  // RFC 6298 §2.4's SHOULD
  RtoEstimator strict = make(rfc);
  strict.on_rtt_sample(10'000);
  EXPECT_EQ(strict.rto_us(), 1'000'000u);
}

TEST(TcpRto, clock_granularity_bounds_the_variance_term) {
  RtoConfig cfg;
  cfg.min_us = 0;
  cfg.granularity_us = 1000;
  RtoEstimator r = make(cfg);
  r.on_rtt_sample(100);  // SRTT 100 µs, RTTVAR 50 µs: 4 * RTTVAR = 200 µs < G = 1 ms
  EXPECT_EQ(r.rto_us(), 1100u);
  cfg.granularity_us = 10;
  RtoEstimator fine = make(cfg);
  fine.on_rtt_sample(100);  // now K * RTTVAR = 200 µs wins
  EXPECT_EQ(fine.rto_us(), 300u);
}

TEST(TcpRto, rto_is_capped_at_sixty_seconds) {
  RtoEstimator r = make();
  r.on_rtt_sample(30'000'000);  // 30 s + 4 * 15 s = 90 s
  EXPECT_EQ(r.rto_us(), 60'000'000u);  // RFC 6298 §2.5
}

TEST(TcpRto, each_timeout_doubles_rto_up_to_the_maximum) {
  RtoEstimator r = make();
  r.on_rtt_sample(100'000);  // 300 ms
  const uint32_t expect[] = {600'000, 1'200'000, 2'400'000, 4'800'000, 9'600'000,
                             19'200'000, 38'400'000, 60'000'000, 60'000'000};
  for (uint32_t i = 0; i < std::size(expect); ++i) {
    r.on_timeout();  // RFC 6298 §5.5
    EXPECT_EQ(r.rto_us(), expect[i]) << "after timeout " << i + 1;
    EXPECT_EQ(r.backoffs(), i + 1);
  }
  for (int i = 0; i < 100; ++i) r.on_timeout();  // no overflow however long it lasts
  EXPECT_EQ(r.rto_us(), 60'000'000u);
}

TEST(TcpRto, a_new_sample_ends_the_backoff) {
  RtoEstimator r = make();
  r.on_rtt_sample(100'000);
  r.on_timeout();
  r.on_timeout();
  ASSERT_EQ(r.rto_us(), 1'200'000u);
  // A sample of 100 ms again: RTTVAR = 3/4 * 50 + 0 = 37.5, SRTT = 100, RTO = 250 ms.
  r.on_rtt_sample(100'000);
  EXPECT_EQ(r.backoffs(), 0u);
  EXPECT_EQ(r.rto_us(), 250'000u);
}

TEST(TcpRto, the_initial_rto_backs_off_too) {
  RtoEstimator r = make();
  r.on_timeout();  // a lost SYN
  EXPECT_EQ(r.rto_us(), 2'000'000u);
}

TEST(TcpRto, timestamp_echo_gives_the_same_estimate_as_a_timed_segment) {
  RtoEstimator r = make();
  // TSval clock in ms: sent at 900, echoed back at 1000 -> 100 ms.
  EXPECT_TRUE(r.on_timestamp_echo(1000, 900, 1000));
  EXPECT_EQ(r.srtt_us(), 100'000u);
  EXPECT_EQ(r.rto_us(), 300'000u);
}

TEST(TcpRto, timestamp_echo_works_across_the_tsval_wrap) {
  RtoEstimator r = make();
  EXPECT_TRUE(r.on_timestamp_echo(50, 0xffffffceu, 1000));  // 50 - (-50) = 100 ticks
  EXPECT_EQ(r.srtt_us(), 100'000u);
}

TEST(TcpRto, bogus_timestamp_echoes_are_rejected) {
  RtoEstimator r = make();
  EXPECT_FALSE(r.on_timestamp_echo(1000, 1001, 1000));      // from the future
  EXPECT_FALSE(r.on_timestamp_echo(1'000'000, 1, 1000));    // ~1000 s: above max RTO
  EXPECT_FALSE(r.has_sample());
  EXPECT_EQ(r.rto_us(), 1'000'000u);
}

TEST(TcpRto, lost_syn_without_a_sample_restarts_data_at_three_seconds) {
  RtoEstimator r = make();
  r.on_timeout();
  r.on_handshake_done(true);  // RFC 6298 §5.7
  EXPECT_EQ(r.rto_us(), 3'000'000u);
  EXPECT_EQ(r.backoffs(), 0u);

  RtoEstimator measured = make();
  measured.on_rtt_sample(100'000);  // e.g. from a timestamp on the SYN-ACK
  measured.on_handshake_done(true);
  EXPECT_EQ(measured.rto_us(), 300'000u);

  RtoEstimator clean = make();
  clean.on_handshake_done(false);
  EXPECT_EQ(clean.rto_us(), 1'000'000u);
}

TEST(TcpRto, long_random_sequence_matches_the_rfc_formulas_in_floating_point) {
  RtoConfig cfg;
  cfg.min_us = 0;
  RtoEstimator r = make(cfg);
  std::mt19937 rng(6298);
  std::uniform_int_distribution<uint32_t> sample(50, 400'000);
  double srtt = 0;
  double rttvar = 0;
  for (int i = 0; i < 10000; ++i) {
    const uint32_t rtt = sample(rng);
    if (i == 0) {
      srtt = rtt;
      rttvar = rtt / 2.0;
    } else {
      rttvar = 0.75 * rttvar + 0.25 * std::fabs(srtt - rtt);
      srtt = 0.875 * srtt + 0.125 * rtt;
    }
    r.on_rtt_sample(rtt);
    const double rto = std::min(srtt + std::max(1000.0, 4 * rttvar), 60e6);
    ASSERT_NEAR(r.srtt_us(), srtt, 1.0) << "sample " << i;
    ASSERT_NEAR(r.rttvar_us(), rttvar, 1.0) << "sample " << i;
    ASSERT_NEAR(r.rto_us(), rto, 2.0) << "sample " << i;
  }
}

}  // namespace
}  // namespace meshgate::dp::tcp
