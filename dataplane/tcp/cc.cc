#include "dataplane/tcp/cc.h"

#include <algorithm>
#include <cmath>

#include "dataplane/common/compiler.h"
#include "dataplane/tcp/seq.h"

namespace meshgate::dp::tcp {

namespace {

// RFC 9438 §4.3: alpha_cubic = 3 * (1 - beta_cubic) / (1 + beta_cubic), the additive increase
// that gives CUBIC's multiplicative decrease (0.7) the same average rate as Reno's AIMD(1, 0.5).
constexpr double kCubicAlpha = 3.0 * (1.0 - kCubicBeta) / (1.0 + kCubicBeta);
// RFC 9438 §4.2: the target is at most 1.5 * cwnd, below slow start's doubling per RTT.
constexpr double kCubicMaxGrowth = 1.5;

}  // namespace

void CongestionControl::init(CcAlgo algo, uint32_t smss, uint32_t iss, bool sack, bool syn_lost) {
  *this = CongestionControl{};
  algo_ = algo;
  sack_ = sack;
  smss_ = smss;
  // RFC 5681 §3.1: one segment after a lost SYN or SYN-ACK, else RFC 6928's IW.
  cwnd_ = syn_lost ? smss : initial_window(smss);
  recover_ = iss;  // RFC 6582 §3.2 step 1
}

void CongestionControl::on_ack(uint32_t bytes_acked, uint64_t now_us, uint32_t srtt_us,
                               bool cwnd_limited) {
  rto_repeat_ = false;
  const uint64_t since_last_us = now_us - last_ack_us_;
  last_ack_us_ = now_us;
  if (MG_UNLIKELY(in_recovery_) || bytes_acked == 0) return;
  if (!cwnd_limited) {
    // RFC 9438 §5.8: an application-limited period does not count in t.
    if (epoch_valid_) epoch_start_us_ += since_last_us;
    return;
  }
  if (cwnd_ < ssthresh_) {
    slow_start(bytes_acked);
    return;
  }
  after_rto_ = false;
  switch (algo_) {
    case CcAlgo::kNewReno: reno_avoidance(bytes_acked); break;
    case CcAlgo::kCubic: cubic_avoidance(bytes_acked, now_us, srtt_us); break;
  }
}

void CongestionControl::slow_start(uint32_t bytes_acked) {
  // RFC 3465 §2.2: cwnd grows by the bytes acknowledged, at most L * SMSS per ACK (L = 2), and
  // §2.3: L = 1 SMSS in the slow start that follows a timeout (one ACK may then cover a whole
  // window of data the receiver already held). Capped at ssthresh, where congestion avoidance
  // takes over (RFC 5681 §3.1).
  const uint32_t limit = (after_rto_ ? 1 : kAbcLimitSegments) * smss_;
  const uint64_t grown = uint64_t(cwnd_) + std::min(bytes_acked, limit);
  cwnd_ = uint32_t(std::min<uint64_t>(grown, ssthresh_));
}

void CongestionControl::reno_avoidance(uint32_t bytes_acked) {
  // RFC 3465 §2.1 (RFC 5681 §3.1): count acknowledged bytes; each full cwnd of them adds one
  // SMSS, so cwnd grows one segment per RTT however the receiver spaces its ACKs.
  bytes_acked_ += bytes_acked;
  if (bytes_acked_ >= cwnd_) {
    bytes_acked_ -= cwnd_;
    cwnd_ += smss_;
  }
}

double CongestionControl::w_cubic_bytes(double t_s) const {
  // RFC 9438 §4.2 Figure 1: W_cubic(t) = C * (t - K)^3 + W_max, scaled from segments to bytes.
  const double d = t_s - k_s_;
  return kCubicC * d * d * d * smss_ + w_max_;
}

void CongestionControl::cubic_start_epoch(uint64_t now_us) {
  epoch_valid_ = true;
  epoch_start_us_ = now_us;
  cwnd_epoch_ = cwnd_;
  cwnd_frac_ = 0;
  // RFC 9438 §4.3: W_est starts at cwnd_epoch.
  w_est_ = cwnd_;
  if (w_max_ <= cwnd_) {
    // RFC 9438 §4.8: the first congestion avoidance stage after a timeout (w_max_ was reset)
    // uses K = 0 and W_max = cwnd at its start. The same when slow start already passed W_max:
    // Figure 2 would give a negative K; K = 0 starts the convex probe from here instead (as
    // Linux and FreeBSD do).
    w_max_ = cwnd_;
    k_s_ = 0;
  } else {
    // RFC 9438 §4.2 Figure 2: K = cbrt((W_max - cwnd_epoch) / C), in segments.
    k_s_ = std::cbrt(double(w_max_ - cwnd_epoch_) / smss_ / kCubicC);
  }
}

void CongestionControl::cubic_avoidance(uint32_t bytes_acked, uint64_t now_us,
                                        uint32_t srtt_us) {
  if (!epoch_valid_) cubic_start_epoch(now_us);
  const double t = double(now_us - epoch_start_us_) * 1e-6;
  const double cwnd = cwnd_;
  // RFC 9438 §4.2: target = W_cubic(t + RTT), clamped to [cwnd, 1.5 * cwnd].
  const double target =
      std::clamp(w_cubic_bytes(t + double(srtt_us) * 1e-6), cwnd, kCubicMaxGrowth * cwnd);
  // RFC 9438 §4.3 Figure 4: W_est += alpha_cubic * segments_acked / cwnd (in segments; times
  // SMSS^2 / SMSS here), alpha_cubic = 1 once W_est reaches cwnd_prior: Reno's own slope.
  const double alpha = w_est_ >= cwnd_prior_ ? 1.0 : kCubicAlpha;
  w_est_ += alpha * double(bytes_acked) * smss_ / cwnd;
  double next;
  if (w_cubic_bytes(t) < w_est_) {
    // RFC 9438 §4.3: Reno-friendly region, cwnd = W_est. Never below the current cwnd: a window
    // does not shrink without a congestion signal.
    next = std::max(w_est_, cwnd + cwnd_frac_);
  } else {
    // RFC 9438 §4.4 (concave, cwnd < W_max) and §4.5 (convex): cwnd += (target - cwnd) / cwnd
    // per segment acknowledged.
    next = cwnd + cwnd_frac_ + (target - cwnd) / cwnd * bytes_acked;
  }
  next = std::min(next, double(kInitialSsthresh));
  cwnd_ = uint32_t(next);
  cwnd_frac_ = next - cwnd_;
}

bool CongestionControl::may_fast_retransmit(uint32_t ack) const {
  return seq_gt(ack, recover_);
}

bool CongestionControl::is_full_ack(uint32_t ack) const { return seq_gt(ack, recover_); }

void CongestionControl::reduce(uint32_t flight_size) {
  undo_cwnd_ = cwnd_;
  undo_ssthresh_ = ssthresh_;
  undo_w_max_ = w_max_;
  undo_valid_ = true;
  bytes_acked_ = 0;
  epoch_valid_ = false;
  switch (algo_) {
    case CcAlgo::kNewReno:
      // RFC 5681 §3.1 eq. 4: ssthresh = max(FlightSize / 2, 2 * SMSS).
      ssthresh_ = std::max(flight_size / 2, 2 * smss_);
      break;
    case CcAlgo::kCubic:
      // RFC 9438 §4.7 fast convergence: a loss below the previous W_max means another flow
      // took bandwidth; release some by remembering a lower W_max.
      if (cwnd_ < w_max_) {
        w_max_ = uint32_t(double(cwnd_) * (1.0 + kCubicBeta) / 2.0);
      } else {
        w_max_ = cwnd_;
      }
      // RFC 9438 §4.6 Figure 5: ssthresh = flight_size * beta_cubic, at least 2 SMSS.
      ssthresh_ = std::max(uint32_t(double(flight_size) * kCubicBeta), 2 * smss_);
      break;
  }
  cwnd_prior_ = cwnd_;
}

void CongestionControl::on_enter_recovery(uint64_t now_us, uint32_t flight_size,
                                          uint32_t snd_max) {
  last_ack_us_ = now_us;
  // RFC 6582 §3.2 step 2 / RFC 6675 §5 (4.1): recover = RecoveryPoint = HighData.
  recover_ = snd_max - 1;
  reduce(flight_size);
  // RFC 5681 §3.2 step 3: cwnd = ssthresh + 3 * SMSS, the three segments that left the network
  // to cause the duplicate ACKs. RFC 6675 §5 (4.2): with SACK, pipe counts them instead.
  cwnd_ = sack_ ? ssthresh_ : ssthresh_ + 3 * smss_;
  in_recovery_ = true;
}

void CongestionControl::on_dup_ack() {
  if (in_recovery_ && !sack_) cwnd_ += smss_;
}

void CongestionControl::on_partial_ack(uint32_t bytes_acked) {
  rto_repeat_ = false;
  if (sack_) return;  // RFC 6675: pipe, not cwnd, accounts for what left the network
  cwnd_ = cwnd_ > bytes_acked ? cwnd_ - bytes_acked : 0;
  if (bytes_acked >= smss_) cwnd_ += smss_;
  // Never below one segment: a zero window would stall the retransmissions recovery needs.
  cwnd_ = std::max(cwnd_, smss_);
}

void CongestionControl::on_exit_recovery(uint32_t flight_size) {
  rto_repeat_ = false;
  // RFC 6582 §3.2 step 5 option (1): deflate so no burst follows the end of recovery.
  cwnd_ = std::min(ssthresh_, std::max(flight_size, smss_) + smss_);
  in_recovery_ = false;
  bytes_acked_ = 0;
}

void CongestionControl::on_rto(uint64_t now_us, uint32_t flight_size, uint32_t snd_max) {
  last_ack_us_ = now_us;
  // RFC 6582 §3.2 step 6.
  recover_ = snd_max - 1;
  in_recovery_ = false;
  if (!rto_repeat_) {
    // RFC 5681 §3.1 eq. 4 (NewReno); RFC 9438 §4.8 uses beta_cubic for ssthresh as in §4.6.
    reduce(flight_size);
    // RFC 9438 §4.8: the next epoch starts with K = 0 and W_max = cwnd at its start.
    if (algo_ == CcAlgo::kCubic) w_max_ = 0;
  }
  // RFC 5681 §3.1: a timeout of a segment the timer already retransmitted holds ssthresh.
  rto_repeat_ = true;
  after_rto_ = true;
  epoch_valid_ = false;
  bytes_acked_ = 0;
  cwnd_ = smss_;  // RFC 5681 §3.1: LW = 1 SMSS
}

bool CongestionControl::undo() {
  if (!undo_valid_) return false;
  undo_valid_ = false;
  cwnd_ = std::max(cwnd_, undo_cwnd_);
  ssthresh_ = std::max(ssthresh_, undo_ssthresh_);
  w_max_ = undo_w_max_;
  in_recovery_ = false;
  after_rto_ = false;
  epoch_valid_ = false;
  bytes_acked_ = 0;
  return true;
}

void CongestionControl::on_idle_restart() {
  // RFC 5681 §4.1: RW = min(IW, cwnd); cwnd = min(RW, cwnd). CUBIC starts a fresh epoch.
  cwnd_ = std::min(cwnd_, initial_window(smss_));
  epoch_valid_ = false;
  bytes_acked_ = 0;
}

}  // namespace meshgate::dp::tcp
