// Congestion control: RFC 6928 initial windows, RFC 5681 / RFC 3465 slow start and congestion
// avoidance, RFC 6582 fast recovery, RTO handling, and CUBIC (RFC 9438): the window after a
// loss follows W_cubic(t) computed here from the RFC's formulas, the Reno-friendly region at
// short RTTs, fast convergence, the K = 0 epoch after a timeout, undo.
#include <gtest/gtest.h>

#include <cmath>

#include "dataplane/tcp/cc.h"

namespace meshgate::dp::tcp {
namespace {

constexpr uint32_t kMss = 1000;
constexpr uint32_t kIss = 0xfffff000u;  // recover starts here; data crosses the wrap

CongestionControl make(CcAlgo algo, bool sack = false) {
  CongestionControl cc;
  cc.init(algo, kMss, kIss, sack);
  return cc;
}

// Acknowledges one whole window (cwnd at the start of the round) in ACKs of `per_ack` bytes
// (the last one carries the remainder) spread evenly over one RTT starting at *now_us; returns
// with *now_us one RTT later.
void ack_round(CongestionControl& cc, uint64_t* now_us, uint32_t rtt_us, uint32_t per_ack = kMss) {
  const uint32_t window = cc.cwnd_bytes();
  const uint32_t acks = (window + per_ack - 1) / per_ack;
  for (uint32_t i = 0; i < acks; ++i) {
    const uint32_t bytes = i + 1 == acks ? window - i * per_ack : per_ack;
    cc.on_ack(bytes, *now_us + uint64_t(rtt_us) * (i + 1) / acks, rtt_us);
  }
  *now_us += rtt_us;
}

TEST(TcpCc, initial_window_follows_rfc_6928) {
  // IW = min(10 * MSS, max(2 * MSS, 14600)).
  EXPECT_EQ(CongestionControl::initial_window(1460), 14600u);  // 10 * 1460 = 14600
  EXPECT_EQ(CongestionControl::initial_window(536), 5360u);    // 10 * 536 < 14600
  EXPECT_EQ(CongestionControl::initial_window(1000), 10000u);
  EXPECT_EQ(CongestionControl::initial_window(4000), 14600u);  // 14600 < 10 * 4000
  EXPECT_EQ(CongestionControl::initial_window(8960), 17920u);  // 2 * MSS > 14600
  CongestionControl cc = make(CcAlgo::kNewReno);
  EXPECT_EQ(cc.cwnd_bytes(), 10000u);
  EXPECT_TRUE(cc.in_slow_start());
}

TEST(TcpCc, lost_syn_means_an_initial_window_of_one_segment) {
  CongestionControl cc;
  cc.init(CcAlgo::kCubic, kMss, kIss, true, /*syn_lost=*/true);
  EXPECT_EQ(cc.cwnd_bytes(), kMss);  // RFC 5681 §3.1
}

TEST(TcpCc, slow_start_doubles_cwnd_every_rtt) {
  for (CcAlgo algo : {CcAlgo::kNewReno, CcAlgo::kCubic}) {
    CongestionControl cc = make(algo);
    uint64_t now = 1'000'000;
    uint32_t expect = 10000;
    for (int round = 0; round < 5; ++round) {
      ack_round(cc, &now, 50'000);
      expect *= 2;
      EXPECT_EQ(cc.cwnd_bytes(), expect) << "round " << round;
    }
  }
}

TEST(TcpCc, byte_counting_keeps_doubling_with_delayed_acks) {
  // One ACK per two segments: RFC 3465 §2.2 counts bytes (L = 2 SMSS), so the window still
  // doubles, where counting ACKs would grow it by half.
  CongestionControl cc = make(CcAlgo::kNewReno);
  uint64_t now = 0;
  ack_round(cc, &now, 50'000, 2 * kMss);
  EXPECT_EQ(cc.cwnd_bytes(), 20000u);
  ack_round(cc, &now, 50'000, 2 * kMss);
  EXPECT_EQ(cc.cwnd_bytes(), 40000u);
}

TEST(TcpCc, one_ack_grows_slow_start_by_at_most_two_segments) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  cc.on_ack(8 * kMss, 1000, 50'000);  // a stretch ACK of 8 segments
  EXPECT_EQ(cc.cwnd_bytes(), 10000u + 2 * kMss);  // RFC 3465 §2.2: L = 2 * SMSS
}

TEST(TcpCc, reno_congestion_avoidance_adds_one_segment_per_rtt) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  cc.on_enter_recovery(0, 40000, kIss + 1 + 40000);  // ssthresh = 20000
  cc.on_exit_recovery(20000);                         // cwnd = min(20000, 21000)
  ASSERT_EQ(cc.cwnd_bytes(), 20000u);
  ASSERT_FALSE(cc.in_slow_start());
  uint64_t now = 0;
  for (uint32_t round = 1; round <= 5; ++round) {
    ack_round(cc, &now, 50'000);
    EXPECT_EQ(cc.cwnd_bytes(), 20000u + round * kMss) << "round " << round;
  }
  // Delayed ACKs do not slow it down (RFC 3465 §2.1 counts bytes, not ACKs).
  ack_round(cc, &now, 50'000, 2 * kMss);
  ack_round(cc, &now, 50'000, 2 * kMss);
  EXPECT_EQ(cc.cwnd_bytes(), 27000u);
}

TEST(TcpCc, newreno_fast_recovery_inflates_deflates_and_exits) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  const uint32_t snd_max = kIss + 1 + 20000;
  ASSERT_TRUE(cc.may_fast_retransmit(kIss + 1));  // recover = ISS, ACK = ISS + 1 is above
  cc.on_enter_recovery(0, 20000, snd_max);
  EXPECT_TRUE(cc.in_recovery());
  EXPECT_EQ(cc.recover(), snd_max - 1);
  EXPECT_EQ(cc.ssthresh_bytes(), 10000u);           // FlightSize / 2
  EXPECT_EQ(cc.cwnd_bytes(), 13000u);               // ssthresh + 3 * SMSS
  cc.on_dup_ack();
  cc.on_dup_ack();
  cc.on_dup_ack();
  EXPECT_EQ(cc.cwnd_bytes(), 16000u);               // + SMSS per duplicate ACK
  EXPECT_FALSE(cc.is_full_ack(kIss + 1 + 3000));
  cc.on_partial_ack(3000);
  EXPECT_EQ(cc.cwnd_bytes(), 14000u);               // 16000 - 3000 + SMSS
  cc.on_partial_ack(500);
  EXPECT_EQ(cc.cwnd_bytes(), 13500u);               // less than SMSS acked: no add-back
  EXPECT_TRUE(cc.in_recovery());
  EXPECT_TRUE(cc.is_full_ack(snd_max));
  cc.on_exit_recovery(5000);
  EXPECT_FALSE(cc.in_recovery());
  EXPECT_EQ(cc.cwnd_bytes(), 6000u);                // min(ssthresh, FlightSize + SMSS)
}

TEST(TcpCc, full_ack_with_much_in_flight_deflates_to_ssthresh) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  cc.on_enter_recovery(0, 20000, kIss + 1 + 20000);
  cc.on_exit_recovery(15000);
  EXPECT_EQ(cc.cwnd_bytes(), 10000u);  // min(10000, 16000)
}

TEST(TcpCc, duplicate_acks_below_recover_do_not_start_another_recovery) {
  // RFC 6582 §3.2 step 2 / §4: after a timeout, recover = SND.MAX - 1; duplicate ACKs that do
  // not cover it are echoes of the go-back-N retransmissions, not a new loss.
  CongestionControl cc = make(CcAlgo::kNewReno);
  const uint32_t snd_max = kIss + 1 + 30000;
  cc.on_rto(0, 30000, snd_max);
  EXPECT_EQ(cc.recover(), snd_max - 1);
  EXPECT_FALSE(cc.may_fast_retransmit(kIss + 1 + 5000));
  EXPECT_FALSE(cc.may_fast_retransmit(snd_max - 1));
  EXPECT_TRUE(cc.may_fast_retransmit(snd_max));
}

TEST(TcpCc, sack_recovery_sets_cwnd_to_ssthresh_without_inflation) {
  CongestionControl cc = make(CcAlgo::kNewReno, /*sack=*/true);
  cc.on_enter_recovery(0, 20000, kIss + 1 + 20000);
  EXPECT_EQ(cc.cwnd_bytes(), 10000u);  // RFC 6675 §5 (4.2)
  cc.on_dup_ack();
  cc.on_partial_ack(3000);
  EXPECT_EQ(cc.cwnd_bytes(), 10000u);  // pipe does the accounting
}

TEST(TcpCc, rto_collapses_cwnd_to_one_segment) {
  CongestionControl reno = make(CcAlgo::kNewReno);
  reno.on_rto(0, 30000, kIss + 1 + 30000);
  EXPECT_EQ(reno.cwnd_bytes(), kMss);             // RFC 5681 §3.1: LW = 1 SMSS
  EXPECT_EQ(reno.ssthresh_bytes(), 15000u);       // max(FlightSize / 2, 2 * SMSS)
  CongestionControl cubic = make(CcAlgo::kCubic);
  cubic.on_rto(0, 30000, kIss + 1 + 30000);
  EXPECT_EQ(cubic.cwnd_bytes(), kMss);
  EXPECT_EQ(cubic.ssthresh_bytes(), 21000u);      // RFC 9438 §4.8: FlightSize * 0.7
  CongestionControl tiny = make(CcAlgo::kNewReno);
  tiny.on_rto(0, 1000, kIss + 1 + 1000);
  EXPECT_EQ(tiny.ssthresh_bytes(), 2 * kMss);     // the 2 * SMSS floor
}

TEST(TcpCc, repeated_timeouts_of_the_same_data_hold_ssthresh) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  cc.on_rto(0, 30000, kIss + 1 + 30000);
  ASSERT_EQ(cc.ssthresh_bytes(), 15000u);
  cc.on_rto(1000, 1000, kIss + 1 + 30000);  // FlightSize is now the one retransmission
  EXPECT_EQ(cc.ssthresh_bytes(), 15000u);   // RFC 5681 §3.1: held, not 2 * SMSS
  EXPECT_EQ(cc.cwnd_bytes(), kMss);
  cc.on_ack(kMss, 2000, 50'000);            // progress, then a new timeout reduces again
  cc.on_rto(3000, 4000, kIss + 1 + 30000);
  EXPECT_EQ(cc.ssthresh_bytes(), 2 * kMss);
}

TEST(TcpCc, slow_start_after_a_timeout_counts_one_segment_per_ack) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  cc.on_rto(0, 30000, kIss + 1 + 30000);
  cc.on_ack(5 * kMss, 1000, 50'000);  // the receiver held the rest of the window
  EXPECT_EQ(cc.cwnd_bytes(), 2 * kMss);  // RFC 3465 §2.3: L = 1 SMSS after an RTO
}

TEST(TcpCc, application_limited_acks_do_not_grow_the_window) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  cc.on_ack(kMss, 1000, 50'000, /*cwnd_limited=*/false);
  EXPECT_EQ(cc.cwnd_bytes(), 10000u);
}

TEST(TcpCc, idle_restart_brings_cwnd_back_to_the_initial_window) {
  CongestionControl cc = make(CcAlgo::kNewReno);
  uint64_t now = 0;
  ack_round(cc, &now, 50'000);
  ASSERT_EQ(cc.cwnd_bytes(), 20000u);
  cc.on_idle_restart();  // RFC 5681 §4.1
  EXPECT_EQ(cc.cwnd_bytes(), 10000u);
}

TEST(TcpCc, undo_restores_the_window_before_a_spurious_reduction) {
  CongestionControl cc = make(CcAlgo::kNewReno, true);
  uint64_t now = 0;
  ack_round(cc, &now, 50'000);
  ack_round(cc, &now, 50'000);
  ASSERT_EQ(cc.cwnd_bytes(), 40000u);
  cc.on_enter_recovery(now, 40000, kIss + 1 + 70000);
  ASSERT_EQ(cc.cwnd_bytes(), 20000u);
  EXPECT_TRUE(cc.undo());
  EXPECT_EQ(cc.cwnd_bytes(), 40000u);
  EXPECT_TRUE(cc.in_slow_start());  // ssthresh back to "arbitrarily high"
  EXPECT_FALSE(cc.in_recovery());
  EXPECT_FALSE(cc.undo());          // nothing left to undo
}

// --- CUBIC -------------------------------------------------------------------------------

constexpr double kC = 0.4;
constexpr double kBeta = 0.7;

// Grows a CUBIC connection in slow start to `segments` and takes a loss there (SACK recovery,
// cwnd = ssthresh, then a full ACK): the start of a congestion avoidance epoch.
CongestionControl cubic_after_loss(uint32_t segments, uint64_t* now) {
  CongestionControl cc = make(CcAlgo::kCubic, true);
  while (cc.cwnd_bytes() < segments * kMss) cc.on_ack(kMss, *now, 100'000);
  EXPECT_EQ(cc.cwnd_bytes(), segments * kMss);
  const uint32_t flight = cc.cwnd_bytes();
  cc.on_enter_recovery(*now, flight, kIss + 1 + flight);
  cc.on_exit_recovery(flight);
  return cc;
}

// RFC 9438 §4.2 Figure 1 in segments.
double w_cubic(double t, double k, double w_max) {
  return kC * std::pow(t - k, 3) + w_max;
}

TEST(TcpCcCubic, loss_sets_w_max_and_multiplies_the_window_by_beta) {
  uint64_t now = 0;
  CongestionControl cc = cubic_after_loss(100, &now);
  EXPECT_EQ(cc.cubic_w_max_bytes(), 100000u);  // the cwnd at the loss
  EXPECT_EQ(cc.ssthresh_bytes(), 70000u);      // RFC 9438 §4.6: FlightSize * 0.7
  EXPECT_EQ(cc.cwnd_bytes(), 70000u);
}

TEST(TcpCcCubic, window_after_loss_follows_the_cubic_curve) {
  uint64_t now = 10'000'000;
  CongestionControl cc = cubic_after_loss(100, &now);
  // 100 ms: the Reno-friendly estimate stays below the curve for the first ~5.7 s (W_est
  // reaches W_max after (100 - 70) / alpha_cubic RTTs); past that it takes over (§4.3).
  const uint32_t rtt = 100'000;
  // RFC 9438 Figure 2: K = cbrt((W_max - cwnd_epoch) / C) = cbrt((100 - 70) / 0.4).
  const double k = std::cbrt((100.0 - 70.0) / kC);
  const double alpha = 3.0 * (1.0 - kCubicBeta) / (1.0 + kCubicBeta);
  const uint64_t epoch = now;
  ack_round(cc, &now, rtt);  // the first ACK starts the epoch
  EXPECT_NEAR(cc.cubic_k_seconds(), k, 1e-9);
  // RFC 9438 §4.3 Figure 4 per RTT: W_est grows by alpha_cubic segments, by 1 past cwnd_prior.
  double w_est = 70.0 + alpha;
  double max_err = 0;
  bool reno_friendly_seen = false;
  while (now - epoch < 7'000'000) {
    ack_round(cc, &now, rtt);
    w_est += w_est >= 100.0 ? 1.0 : alpha;
    const double t = double(now - epoch) / 1e6;
    const double curve = w_cubic(t, k, 100.0);  // segments
    const double expect = std::max(curve, w_est);
    reno_friendly_seen |= w_est > curve + 1.0;
    const double got = cc.cwnd_bytes() / double(kMss);
    // cwnd chases W_cubic(t + RTT) one ACK at a time (§4.2, §4.4-4.5), so it lags the curve by
    // at most about one RTT's worth of growth.
    const double slope = 3 * kC * (t - k) * (t - k);  // segments per second
    EXPECT_NEAR(got, expect, 1.0 + slope * rtt / 1e6) << "t = " << t << " s";
    max_err = std::max(max_err, std::fabs(got - expect));
    // Concave below W_max before K, convex above it after (RFC 9438 §4.4, §4.5).
    if (t < k - 0.5) {
      EXPECT_LT(got, 100.0);
    }
    if (t > k + 0.5) {
      EXPECT_GT(got, 100.0);
    }
  }
  EXPECT_LT(max_err, 3.0);
  EXPECT_TRUE(reno_friendly_seen) << "the run never reached the Reno-friendly region";
}

TEST(TcpCcCubic, reno_friendly_region_dominates_at_short_rtts) {
  uint64_t now = 10'000'000;
  CongestionControl cc = cubic_after_loss(100, &now);
  const uint32_t rtt = 10'000;  // 10 ms: Reno would add 0.53 segments per 10 ms
  const uint64_t epoch = now;
  // RFC 9438 §4.3: alpha_cubic = 3 (1 - beta) / (1 + beta); W_est(t) = cwnd_epoch + alpha *
  // t / RTT (segments), while W_est < cwnd_prior.
  const double alpha = 3 * (1 - kBeta) / (1 + kBeta);
  const double k = std::cbrt((100.0 - 70.0) / kC);
  for (int round = 1; round <= 50; ++round) {
    ack_round(cc, &now, rtt);
    const double t = double(now - epoch) / 1e6;
    const double w_est = 70.0 + alpha * round;
    const double got = cc.cwnd_bytes() / double(kMss);
    EXPECT_NEAR(got, w_est, 1.0) << "round " << round;
    if (round >= 10) {
      EXPECT_GT(got, w_cubic(t, k, 100.0) + 3) << "round " << round;
    }
  }
}

TEST(TcpCcCubic, fast_convergence_lowers_w_max_when_losses_come_earlier) {
  uint64_t now = 10'000'000;
  CongestionControl cc = cubic_after_loss(100, &now);
  while (cc.cwnd_bytes() < 80000) ack_round(cc, &now, 100'000);
  const uint32_t cwnd = cc.cwnd_bytes();  // below W_max = 100 segments
  ASSERT_LT(cwnd, 100000u);
  cc.on_enter_recovery(now, cwnd, kIss + 1 + 200000);
  // RFC 9438 §4.7: W_max = cwnd * (1 + beta) / 2.
  EXPECT_NEAR(cc.cubic_w_max_bytes(), cwnd * (1 + kBeta) / 2, 1.0);
  EXPECT_NEAR(cc.ssthresh_bytes(), cwnd * kBeta, 1.0);
  cc.on_exit_recovery(cwnd);
  ack_round(cc, &now, 100'000);
  const double w_max = cwnd * (1 + kBeta) / 2 / kMss;
  const double epoch_cwnd = std::floor(cwnd * kBeta) / kMss;
  EXPECT_NEAR(cc.cubic_k_seconds(), std::cbrt((w_max - epoch_cwnd) / kC), 1e-3);
}

TEST(TcpCcCubic, a_loss_above_w_max_keeps_the_full_window_as_w_max) {
  uint64_t now = 10'000'000;
  CongestionControl cc = cubic_after_loss(50, &now);
  while (cc.cwnd_bytes() < 60000) ack_round(cc, &now, 100'000);
  const uint32_t cwnd = cc.cwnd_bytes();
  cc.on_enter_recovery(now, cwnd, kIss + 1 + 200000);
  EXPECT_EQ(cc.cubic_w_max_bytes(), cwnd);
}

TEST(TcpCcCubic, the_epoch_after_a_timeout_starts_with_k_zero) {
  uint64_t now = 10'000'000;
  CongestionControl cc = cubic_after_loss(100, &now);
  cc.on_rto(now, 70000, kIss + 1 + 200000);
  ASSERT_EQ(cc.ssthresh_bytes(), 49000u);  // 70000 * 0.7
  while (cc.in_slow_start()) cc.on_ack(kMss, now += 1000, 100'000);
  ASSERT_EQ(cc.cwnd_bytes(), 49000u);
  cc.on_ack(kMss, now += 1000, 100'000);  // first ACK of congestion avoidance
  // RFC 9438 §4.8: K = 0 and W_max = the cwnd at the start of the stage.
  EXPECT_EQ(cc.cubic_k_seconds(), 0.0);
  EXPECT_EQ(cc.cubic_w_max_bytes(), 49000u);
  // From there the window only grows (convex region).
  const uint32_t start = cc.cwnd_bytes();
  ack_round(cc, &now, 100'000);
  EXPECT_GE(cc.cwnd_bytes(), start);
}

TEST(TcpCcCubic, the_target_is_capped_at_one_and_a_half_windows) {
  uint64_t now = 10'000'000;
  CongestionControl cc = cubic_after_loss(20, &now);
  cc.on_ack(kMss, now, 100'000);  // the epoch starts
  const uint32_t before = cc.cwnd_bytes();
  // A minute later W_cubic(t + RTT) is thousands of segments; RFC 9438 §4.2 clamps the target
  // to 1.5 * cwnd, so one ACK of one segment adds (1.5 cwnd - cwnd) / cwnd = half a segment.
  cc.on_ack(kMss, now + 60'000'000, 100'000);
  EXPECT_NEAR(double(cc.cwnd_bytes()), before + kMss / 2.0, 1.0);  // + carried fraction
}

}  // namespace
}  // namespace meshgate::dp::tcp
