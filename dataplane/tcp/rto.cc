#include "dataplane/tcp/rto.h"

#include <algorithm>

namespace meshgate::dp::tcp {

namespace {

// RFC 6298 §2.3: alpha = 1/8, beta = 1/4 as shifts; §2.2-2.3: K = 4.
constexpr uint32_t kAlphaShift = 3;
constexpr uint32_t kBetaShift = 2;
constexpr uint64_t kK = 4;
// Backoffs past this many doublings are all at max_us (1 µs << 40 is far beyond any RTO).
constexpr uint32_t kMaxShift = 40;

}  // namespace

void RtoEstimator::init(const RtoConfig& cfg) {
  min_us_ = cfg.min_us;
  max_us_ = std::max(cfg.max_us, cfg.min_us);
  granularity_us_ = cfg.granularity_us;
  srtt_q_ = 0;
  rttvar_q_ = 0;
  sampled_ = false;
  backoffs_ = 0;
  base_us_ = std::clamp(cfg.initial_us, min_us_, max_us_);
}

void RtoEstimator::on_rtt_sample(uint32_t rtt_us) {
  const uint64_t r_q = uint64_t(rtt_us) << kFracBits;
  if (!sampled_) {
    // RFC 6298 §2.2: SRTT <- R, RTTVAR <- R/2.
    srtt_q_ = r_q;
    rttvar_q_ = r_q >> 1;
    sampled_ = true;
  } else {
    // RFC 6298 §2.3: RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'| first, with the SRTT
    // from before this sample, then SRTT <- (1 - alpha) * SRTT + alpha * R'.
    const uint64_t dev = srtt_q_ > r_q ? srtt_q_ - r_q : r_q - srtt_q_;
    rttvar_q_ = rttvar_q_ - (rttvar_q_ >> kBetaShift) + (dev >> kBetaShift);
    srtt_q_ = srtt_q_ - (srtt_q_ >> kAlphaShift) + (r_q >> kAlphaShift);
  }
  backoffs_ = 0;
  update_base();
}

void RtoEstimator::update_base() {
  // RFC 6298 §2.3: RTO <- SRTT + max(G, K * RTTVAR), rounded up so a timer is never early.
  const uint64_t var_q = std::max(uint64_t(granularity_us_) << kFracBits, kK * rttvar_q_);
  const uint64_t rto = (srtt_q_ + var_q + (uint64_t(1) << kFracBits) - 1) >> kFracBits;
  // RFC 6298 §2.4 (floor, see kMinRtoUs for why ours is below 1 s) and §2.5 (ceiling).
  base_us_ = uint32_t(std::clamp<uint64_t>(rto, min_us_, max_us_));
}

bool RtoEstimator::on_timestamp_echo(uint32_t now_ts, uint32_t ts_ecr, uint32_t ts_tick_us) {
  const int32_t ticks = int32_t(now_ts - ts_ecr);
  if (ticks < 0) return false;
  const uint64_t rtt = uint64_t(uint32_t(ticks)) * ts_tick_us;
  if (rtt > max_us_) return false;
  on_rtt_sample(uint32_t(rtt));
  return true;
}

void RtoEstimator::on_timeout() {
  // RFC 6298 §5.5: RTO <- RTO * 2, bounded by the §2.5 maximum (applied in rto_us()).
  if (backoffs_ != UINT32_MAX) ++backoffs_;
}

void RtoEstimator::on_handshake_done(bool syn_retransmitted) {
  if (!syn_retransmitted || sampled_) return;
  base_us_ = std::clamp(kHandshakeFallbackRtoUs, min_us_, max_us_);
  backoffs_ = 0;
}

uint32_t RtoEstimator::rto_us() const {
  const uint64_t rto = uint64_t(base_us_) << std::min(backoffs_, kMaxShift);
  return uint32_t(std::min<uint64_t>(rto, max_us_));
}

}  // namespace meshgate::dp::tcp
