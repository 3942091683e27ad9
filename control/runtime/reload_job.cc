#include "control/runtime/reload_job.h"

#include <pthread.h>
#include <sys/resource.h>

#include <chrono>

namespace meshgate::ctl {
namespace {

std::atomic<int> g_running{0};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int background_tasks_running() { return g_running.load(std::memory_order_acquire); }

namespace detail {

std::thread start_background(std::function<void()> fn, const cpu_set_t* cpus) {
  g_running.fetch_add(1, std::memory_order_acq_rel);
  std::thread t([fn = std::move(fn)] {
    // Linux: the calling thread's nice value only.
    setpriority(PRIO_PROCESS, 0, 10);
    fn();
    g_running.fetch_sub(1, std::memory_order_acq_rel);
  });
  if (cpus) pthread_setaffinity_np(t.native_handle(), sizeof *cpus, cpus);
  return t;
}

}  // namespace detail

ReloadWork run_reload_check(const Config& running, const char* trigger,
                            const std::unordered_set<std::string>& have) {
  ReloadWork w;
  auto t0 = std::chrono::steady_clock::now();
  w.outcome = check_reload(running, trigger, &w.next);
  w.check_ms = ms_since(t0);
  if (w.outcome.result != ReloadResult::kOk || !w.next) return w;
  t0 = std::chrono::steady_clock::now();
  w.names = compile_listener_names(*w.next, have);
  w.compile_ms = ms_since(t0);
  return w;
}

}  // namespace meshgate::ctl
