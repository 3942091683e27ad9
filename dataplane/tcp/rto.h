// Retransmission timeout estimator (RFC 6298), in microseconds.
//
// Per connection, owned by the worker lcore that owns the connection; no locks, no allocation,
// no floating point. 40 bytes (static_assert below).
//
// What the caller (the TCB) must do:
//  - Karn's algorithm (RFC 6298 §3): never feed on_rtt_sample() a sample from a segment that
//    was retransmitted: the ACK may answer either transmission. Without timestamps that means
//    timing one never-retransmitted segment at a time (§3 asks for at least one sample per RTT).
//  - With RFC 7323 timestamps, use on_timestamp_echo() instead: TSecr echoes the TSval of the
//    very transmission the peer is acknowledging (RFC 7323 §4.1), so the sample is not
//    ambiguous and Karn's restriction does not apply. RFC 7323 §4.2 (RTTM rule): only take it
//    from an ACK that advances SND.UNA.
//  - Arm the retransmission timer with rto_us() (§5.1, §5.6); on expiry call on_timeout()
//    before re-arming (§5.5, §5.6); stop the timer when all data is acknowledged (§5.2).
#pragma once

#include <cstdint>

namespace meshgate::dp::tcp {

// RFC 6298 §2.1: RTO before the first measurement.
inline constexpr uint32_t kInitialRtoUs = 1'000'000;
// RFC 6298 §2.4 says RTO SHOULD be rounded up to 1 s, a value chosen in 1988-era networks to
// stay clear of delayed ACKs (up to 500 ms) and coarse clocks. Inside a datacenter the RTT is
// tens of microseconds, so a 1 s floor turns every tail loss into a second of silence; Linux
// (TCP_RTO_MIN), FreeBSD (rexmit_min, 30 ms) and most datacenter stacks use less. 200 ms is
// Linux's floor: it stays above the peer's delayed-ACK timer (RFC 9293 §3.8.6.3: < 0.5 s,
// 40-200 ms in practice), so a delayed ACK is not mistaken for a loss.
inline constexpr uint32_t kMinRtoUs = 200'000;
// RFC 6298 §2.5: a maximum MAY be placed on RTO provided it is at least 60 s.
inline constexpr uint32_t kMaxRtoUs = 60'000'000;
// RFC 6298 §2 "G": the clock granularity. Retransmission timers fire from the 1 ms timer wheel
// (timer_wheel.h), so a timer is late by up to 1 ms whatever the RTT clock says.
inline constexpr uint32_t kClockGranularityUs = 1000;
// RFC 6298 §5.7: RTO after the handshake when the SYN (or SYN-ACK) timed out.
inline constexpr uint32_t kHandshakeFallbackRtoUs = 3'000'000;

struct RtoConfig {
  uint32_t initial_us = kInitialRtoUs;
  uint32_t min_us = kMinRtoUs;
  uint32_t max_us = kMaxRtoUs;
  uint32_t granularity_us = kClockGranularityUs;
};

class RtoEstimator {
 public:
  // The connection's state before any measurement (RFC 6298 §2.1). `cfg` is copied.
  void init(const RtoConfig& cfg = {});

  // RFC 6298 §2.2 (first sample) / §2.3 (later samples), then §2.4-2.5 bounds. Also ends any
  // backoff: RTO is recomputed from SRTT and RTTVAR (§5.5's doubling lasts only until then).
  void on_rtt_sample(uint32_t rtt_us);

  // An RTT sample from an RFC 7323 timestamp echo: (now_ts - ts_ecr) ticks of `ts_tick_us`
  // microseconds (our TSval clock). Rejects (returns false, state unchanged) an echo from the
  // future or one older than max_us: a peer echoing garbage must not inflate RTO.
  bool on_timestamp_echo(uint32_t now_ts, uint32_t ts_ecr, uint32_t ts_tick_us);

  // RFC 6298 §5.5: the retransmission timer expired; back off (RTO doubles, up to max_us).
  void on_timeout();

  // RFC 6298 §5.7: when the SYN or SYN-ACK had to be retransmitted and no RTT was measured,
  // RTO is re-initialized to 3 s once data transmission begins. Call when the handshake ends.
  void on_handshake_done(bool syn_retransmitted);

  // The current timeout, backoff included: what to arm the retransmission timer with.
  uint32_t rto_us() const;
  bool has_sample() const { return sampled_; }
  // Smoothed RTT and variance, rounded to microseconds (0 before the first sample).
  uint32_t srtt_us() const { return uint32_t((srtt_q_ + kHalf) >> kFracBits); }
  uint32_t rttvar_us() const { return uint32_t((rttvar_q_ + kHalf) >> kFracBits); }
  // Consecutive timeouts without a new sample (the caller's R1/R2 thresholds, RFC 9293 §3.8.3).
  uint32_t backoffs() const { return backoffs_; }

 private:
  // SRTT and RTTVAR in fixed point (1/256 µs): the 1/8 and 1/4 gains of §2.3 lose at most
  // 1/256 µs a step instead of up to 7/8 µs with integer microseconds.
  static constexpr uint32_t kFracBits = 8;
  static constexpr uint64_t kHalf = uint64_t(1) << (kFracBits - 1);

  void update_base();

  uint64_t srtt_q_ = 0;
  uint64_t rttvar_q_ = 0;
  uint32_t base_us_ = kInitialRtoUs;  // RTO before backoff, bounds applied
  uint32_t backoffs_ = 0;
  uint32_t min_us_ = kMinRtoUs;
  uint32_t max_us_ = kMaxRtoUs;
  uint32_t granularity_us_ = kClockGranularityUs;
  bool sampled_ = false;
};
static_assert(sizeof(RtoEstimator) <= 40, "RtoEstimator is per connection: keep it small");

}  // namespace meshgate::dp::tcp
