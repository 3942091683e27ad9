// Control-plane work that takes seconds, off the control thread: a config reload's check and
// Hyperscan compile (config/README.md "Reloading"), and the first snapshot's compile at start.
// The control loop keeps ticking meanwhile (admin answers, probes, signals, the access log) and
// takes the result on its own thread once done(); whatever the result touches of the runtime
// (the registries, the snapshot) is applied there. A Hyperscan compile cannot be interrupted: a
// task still running when the process stops is abandoned (detached). It owns copies of all it
// reads, so it touches nothing the runtime frees, and the process exits without waiting for it
// (background_tasks_running()).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>

#include "control/config/config.h"
#include "control/runtime/reload.h"
#include "control/snapshot/listeners.h"

namespace meshgate::ctl {

// Tasks whose function has not returned yet, abandoned ones included. Any thread.
int background_tasks_running();

namespace detail {
// Starts `fn` on a thread of its own, on `cpus` (nullptr: where the caller may run), at a lower
// priority than the control thread (nice 10), so that a compile on the control thread's CPU
// never delays its 1 ms tick for long. `done` is set when fn returned.
std::thread start_background(std::function<void()> fn, const cpu_set_t* cpus);
}  // namespace detail

// fn() on a background thread; its value once done(). Control thread (start, done, take,
// destruction).
template <typename T>
class BackgroundTask {
 public:
  BackgroundTask(std::function<T()> fn, const cpu_set_t* cpus) : state_(std::make_shared<State>()) {
    thread_ = detail::start_background(
        [s = state_, fn = std::move(fn)] {
          s->value.emplace(fn());
          s->done.store(true, std::memory_order_release);
        },
        cpus);
  }
  // Abandons a task that has not finished (see above).
  ~BackgroundTask() {
    if (!thread_.joinable()) return;
    if (done()) thread_.join();
    else thread_.detach();
  }
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  bool done() const { return state_->done.load(std::memory_order_acquire); }
  // Once done(): fn's value.
  T take() {
    thread_.join();
    return std::move(*state_->value);
  }

 private:
  struct State {
    std::atomic<bool> done{false};
    std::optional<T> value;
  };
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// What a reload's background half found: check_reload's outcome, and when it is ok the new
// config and the databases its listeners need that the cache lacked.
struct ReloadWork {
  ReloadOutcome outcome;
  std::optional<Config> next;
  CompiledNames names;
  double check_ms = 0;    // check_reload
  double compile_ms = 0;  // compile_listener_names
};

// check_reload(running) then, when ok, compile_listener_names(next, have). Any thread.
ReloadWork run_reload_check(const Config& running, const char* trigger,
                            const std::unordered_set<std::string>& have);

}  // namespace meshgate::ctl
