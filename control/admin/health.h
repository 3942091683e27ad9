// GET /healthz: a worker is healthy while its poll-loop counter keeps advancing. The control
// loop feeds the counters in every tick; check() says which worker stopped and for how long.
// Control thread only; pure bookkeeping (no DPDK), so it is tested with made-up clocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace meshgate::ctl {

class WorkerHealth {
 public:
  using Clock = std::chrono::steady_clock;
  // A poll loop iteration takes microseconds; a second without one is a stuck core (or a
  // worker that returned), not noise.
  static constexpr std::chrono::milliseconds kDefaultStallAfter{1000};

  explicit WorkerHealth(std::chrono::milliseconds stall_after = kDefaultStallAfter)
      : stall_after_(stall_after) {}

  // `loops`: the worker's loop counter, read now.
  void observe(uint32_t worker, uint64_t loops, Clock::time_point now);

  struct Status {
    bool healthy = false;
    std::string text;  // one line per worker; stuck workers say so first
  };
  Status check(Clock::time_point now) const;

 private:
  struct Entry {
    bool seen = false;
    uint64_t loops = 0;
    Clock::time_point changed{};
  };
  std::chrono::milliseconds stall_after_;
  std::vector<Entry> entries_;
};

}  // namespace meshgate::ctl
