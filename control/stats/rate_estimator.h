// Per-backend rates for GET /stats and `meshgate-ctl services` (ipvsadm -Ln --rate): the
// estimator of IPVS (net/netfilter/ipvs/ip_vs_est.c in Linux): every kRateInterval the rate of
// each counter over the interval is folded into an exponentially weighted average with weight
// kRateWeight, so a rate follows a change within a few intervals and a single burst does not
// make it jump. The first interval's rate is taken as it is (IPVS starts from 0, which reads as
// "idle" for the first ten seconds).
// Control thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace meshgate::ctl {

inline constexpr std::chrono::seconds kRateInterval{2};  // IPVS's estimator tick
inline constexpr double kRateWeight = 0.25;             // IPVS: avg += (rate - avg) >> 2

// A backend's counters (summed over workers) at one moment.
struct RateSample {
  uint64_t flows = 0;    // flows created
  uint64_t packets = 0;
  uint64_t bytes = 0;        // client to backend
  uint64_t reply_bytes = 0;  // backend to client
};

struct Rates {
  double flows_per_s = 0;
  double packets_per_s = 0;
  double bytes_per_s = 0;
  double reply_bytes_per_s = 0;
};

class RateEstimator {
 public:
  using Clock = std::chrono::steady_clock;

  // True when a kRateInterval passed since the last update (or none happened yet).
  bool due(Clock::time_point now) const { return !last_ || now - *last_ >= kRateInterval; }
  // One sample of every stat id to estimate, taken at `now`. Ids missing from `samples` are
  // forgotten (their backend left the snapshot); a counter that went backwards restarts its
  // estimate.
  void update(Clock::time_point now, const std::vector<std::pair<uint32_t, RateSample>>& samples);
  // Null until two samples of `id` were taken.
  const Rates* rates(uint32_t id) const;

 private:
  struct Entry {
    RateSample last;
    Rates avg;
    bool measured = false;
    bool seen = false;  // in the current update
  };
  std::unordered_map<uint32_t, Entry> entries_;
  std::optional<Clock::time_point> last_;
};

}  // namespace meshgate::ctl
