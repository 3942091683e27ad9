// The snapshot builder's helper threads: a fixed pool, started once, that fills the Maglev
// tables of one build beside the control thread (docs/PERFORMANCE.md, control plane). Helpers
// sleep between builds. Control thread only (start, run, destruction).
#pragma once

#include <sched.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace meshgate::ctl {

class BuildPool {
 public:
  BuildPool() = default;
  ~BuildPool();
  BuildPool(const BuildPool&) = delete;
  BuildPool& operator=(const BuildPool&) = delete;

  // `threads` in all, the calling thread included: starts threads - 1 helpers (1: none, every
  // build is serial). `cpus`: where the helpers may run (nullptr: where the calling thread may;
  // the runtime passes the cores no worker polls). Once per pool. False when the helpers could
  // not be pinned to `cpus` (they run anyway, where the calling thread may).
  bool start(uint32_t threads, const cpu_set_t* cpus = nullptr);
  uint32_t threads() const { return uint32_t(helpers_.size()) + 1; }

  // Runs fn(0) .. fn(n - 1), n in 1..threads(): fn(0) on the calling thread, the others on
  // helpers. Returns when all returned; rethrows the first exception (by index) any of them threw.
  void run(uint32_t n, const std::function<void(uint32_t)>& fn);

 private:
  void helper_main(uint32_t index);

  std::mutex mu_;
  std::condition_variable wake_;  // helpers: a new job or stop
  std::condition_variable done_;  // start(): a helper started; run(): the last helper finished
  std::vector<std::thread> helpers_;
  // The current job, under mu_.
  const std::function<void(uint32_t)>* job_ = nullptr;
  uint32_t n_ = 0;
  uint64_t round_ = 0;    // run() calls so far: helpers wake for each new one
  uint32_t pending_ = 0;  // helpers of this round not done yet
  std::vector<std::exception_ptr> errors_;  // per index
  uint32_t started_ = 0;  // helpers running helper_main()
  bool stop_ = false;
};

}  // namespace meshgate::ctl
