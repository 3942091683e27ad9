// Sender congestion control: NewReno (RFC 5681 + RFC 3465 byte counting + RFC 6582 fast
// recovery) or CUBIC (RFC 9438), chosen per connection by CcAlgo. One switch per ACK, no
// virtual calls.
//
// Per connection, owned by the worker lcore that owns the connection; no locks, no allocation.
// 96 bytes (static_assert below). Every window is in bytes; CUBIC's formulas are written in
// segments by RFC 9438 and are evaluated here in bytes by scaling W by SMSS (C stays 0.4
// segments/s^3), in double precision: the cube root runs once per congestion epoch, the cubic
// polynomial once per ACK in congestion avoidance.
//
// How the TCB drives it (RFC 5681 §3.2, RFC 6582 §3.2, RFC 6675 §5):
//   ACK of new data, not in recovery  -> on_ack()
//   third duplicate ACK (no SACK)      -> may_fast_retransmit(ack)? on_enter_recovery(), resend
//   SACK loss (SackScoreboard says so) -> on_enter_recovery()
//   duplicate ACK while in recovery    -> on_dup_ack()  (inflation, only without SACK)
//   ACK of new data while in recovery  -> is_full_ack(ack)? on_exit_recovery() : on_partial_ack()
//   retransmission timeout             -> on_rto()
//   the reduction was spurious (D-SACK, RFC 3708; timestamps, RFC 3522) -> undo()
// With SACK the sender clocks out data by pipe (RFC 6675 §5 (C)) against cwnd_bytes().
#pragma once

#include <cstdint>

namespace meshgate::dp::tcp {

enum class CcAlgo : uint8_t { kNewReno, kCubic };

// RFC 3465 §2.2: L, the most slow start may grow cwnd per ACK, in SMSS.
inline constexpr uint32_t kAbcLimitSegments = 2;
// RFC 9438 §5.1: C = 0.4 (segments / s^3) and §4.6: beta_cubic = 0.7.
inline constexpr double kCubicC = 0.4;
inline constexpr double kCubicBeta = 0.7;
// RFC 5681 §3.1: ssthresh starts "arbitrarily high".
inline constexpr uint32_t kInitialSsthresh = 0x7fffffff;

class CongestionControl {
 public:
  // RFC 6928 §2: IW = min(10 * MSS, max(2 * MSS, 14600)).
  static constexpr uint32_t initial_window(uint32_t smss) {
    const uint32_t floor = 2 * smss > 14600 ? 2 * smss : 14600;
    return 10 * smss < floor ? 10 * smss : floor;
  }

  // A new connection. `iss` seeds RFC 6582's `recover` (§3.2 step 1). `sack`: SACK was
  // negotiated, so recovery follows RFC 6675 (no window inflation). `syn_lost`: the SYN or
  // SYN-ACK had to be retransmitted, so the initial window is one segment (RFC 5681 §3.1).
  void init(CcAlgo algo, uint32_t smss, uint32_t iss, bool sack, bool syn_lost = false);

  // An ACK that acknowledged `bytes_acked` new bytes outside recovery: slow start (RFC 5681
  // §3.1 with RFC 3465 byte counting) or congestion avoidance (Reno or CUBIC). `srtt_us` is
  // the smoothed RTT (CUBIC aims at W_cubic(t + RTT), RFC 9438 §4.2). `cwnd_limited` false
  // means the sender had less in flight than cwnd allowed: then the window does not grow
  // (RFC 7661 §4.3; RFC 9438 §5.8, whose time t also skips the application-limited period).
  void on_ack(uint32_t bytes_acked, uint64_t now_us, uint32_t srtt_us, bool cwnd_limited = true);

  // RFC 6582 §3.2 step 2: after the third duplicate ACK, only enter fast retransmit when the
  // cumulative ACK is above `recover` (so one window's losses cause one reduction).
  bool may_fast_retransmit(uint32_t ack) const;
  // Enter fast recovery: `recover` = the highest sequence number sent (SND.MAX - 1),
  // ssthresh per the algorithm (RFC 5681 eq. 4 / RFC 9438 §4.6, §4.7), cwnd = ssthresh + 3 SMSS
  // without SACK (RFC 5681 §3.2 step 3) or ssthresh with SACK (RFC 6675 §5 (4.2)).
  void on_enter_recovery(uint64_t now_us, uint32_t flight_size, uint32_t snd_max);
  // RFC 5681 §3.2 step 4 (RFC 6582 step 3): each further duplicate ACK inflates cwnd by SMSS.
  void on_dup_ack();
  // RFC 6582 §3.2 step 5: does this ACK acknowledge everything up to and including recover?
  bool is_full_ack(uint32_t ack) const;
  // RFC 6582 §3.2 step 5, partial ACK: deflate by the bytes acknowledged, add back one SMSS if
  // at least one SMSS was acknowledged. The caller retransmits the first unacknowledged segment
  // and, on the first partial ACK, restarts the retransmission timer.
  void on_partial_ack(uint32_t bytes_acked);
  // RFC 6582 §3.2 step 5, full ACK: cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS) with the
  // FlightSize left after this ACK; leaves recovery.
  void on_exit_recovery(uint32_t flight_size);
  // Retransmission timeout: ssthresh as on a loss (RFC 5681 eq. 4 / RFC 9438 §4.8), unless this
  // is a repeated timeout of the same data (RFC 5681 §3.1: ssthresh is then held); cwnd = LW =
  // 1 SMSS; recover = SND.MAX - 1 and recovery ends (RFC 6582 §3.2 step 6).
  void on_rto(uint64_t now_us, uint32_t flight_size, uint32_t snd_max);
  // The last reduction was spurious: restore cwnd, ssthresh (and CUBIC's W_max) saved when it
  // happened (RFC 9438 §4.9; the same restore for NewReno, as Linux's undo does). False when
  // there is nothing to undo (no reduction since the last undo).
  bool undo();
  // RFC 5681 §4.1: after an idle period longer than RTO, cwnd = min(RW, cwnd), RW = min(IW,
  // cwnd). The caller detects the idle period.
  void on_idle_restart();
  // The path MTU shrank (RFC 1191 / RFC 8201): later growth is in the new segment size; the
  // window in bytes stays, but never below one segment.
  void set_smss(uint32_t smss) {
    smss_ = smss;
    if (cwnd_ < smss) cwnd_ = smss;
  }

  uint32_t cwnd_bytes() const { return cwnd_; }
  uint32_t ssthresh_bytes() const { return ssthresh_; }
  bool in_recovery() const { return in_recovery_; }
  bool in_slow_start() const { return cwnd_ < ssthresh_; }
  uint32_t recover() const { return recover_; }
  uint32_t smss() const { return smss_; }
  CcAlgo algo() const { return algo_; }
  // CUBIC state (for tests and flow dumps): W_max in bytes, K in seconds.
  uint32_t cubic_w_max_bytes() const { return w_max_; }
  double cubic_k_seconds() const { return k_s_; }

 private:
  void reduce(uint32_t flight_size);
  void slow_start(uint32_t bytes_acked);
  void reno_avoidance(uint32_t bytes_acked);
  void cubic_avoidance(uint32_t bytes_acked, uint64_t now_us, uint32_t srtt_us);
  void cubic_start_epoch(uint64_t now_us);
  double w_cubic_bytes(double t_s) const;

  // CUBIC (RFC 9438 §4): the epoch starts with the first ACK of a congestion avoidance stage.
  double k_s_ = 0;           // K, seconds
  double w_est_ = 0;         // W_est (§4.3), bytes
  double cwnd_frac_ = 0;     // sub-byte growth carried between ACKs
  uint64_t epoch_start_us_ = 0;
  uint64_t last_ack_us_ = 0;
  uint32_t w_max_ = 0;       // W_max, bytes; 0 = none yet, or reset by a timeout (§4.8)
  uint32_t cwnd_epoch_ = 0;  // cwnd at the start of the epoch
  uint32_t cwnd_prior_ = 0;  // cwnd before the last reduction (§4.6)

  uint32_t smss_ = 0;
  uint32_t cwnd_ = 0;
  uint32_t ssthresh_ = kInitialSsthresh;
  uint32_t bytes_acked_ = 0;  // RFC 3465 §2.1 congestion avoidance counter
  uint32_t recover_ = 0;      // RFC 6582 `recover`
  // Saved by each reduction for undo().
  uint32_t undo_cwnd_ = 0;
  uint32_t undo_ssthresh_ = 0;
  uint32_t undo_w_max_ = 0;

  CcAlgo algo_ = CcAlgo::kNewReno;
  bool sack_ = false;
  bool in_recovery_ = false;
  bool epoch_valid_ = false;
  bool rto_repeat_ = false;  // a timeout since the last ACK of new data
  bool after_rto_ = false;   // slow start after a timeout: RFC 3465 §2.3 L = 1 SMSS
  bool undo_valid_ = false;
};
static_assert(sizeof(CongestionControl) <= 96, "CongestionControl is per connection");

}  // namespace meshgate::dp::tcp
