#include "control/snapshot/build_pool.h"

#include <pthread.h>

#include "dataplane/common/compiler.h"

namespace meshgate::ctl {

BuildPool::~BuildPool() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : helpers_) t.join();
}

bool BuildPool::start(uint32_t threads, const cpu_set_t* cpus) {
  MG_CHECK(helpers_.empty() && threads >= 1);
  bool pinned = true;
  for (uint32_t i = 1; i < threads; ++i) {
    helpers_.emplace_back([this, i] { helper_main(i); });
    if (cpus) pinned &= pthread_setaffinity_np(helpers_.back().native_handle(), sizeof *cpus, cpus) == 0;
  }
  // A new thread starts queued on its creator's CPU (the main lcore's, the only one EAL allows
  // it). Under a real-time policy, a creator that keeps its CPU through the first build would
  // leave it there until it blocks: wait until every helper ran once and sleeps where `cpus`
  // lets the scheduler wake it.
  std::unique_lock l(mu_);
  done_.wait(l, [&] { return started_ == threads - 1; });
  return pinned;
}

void BuildPool::run(uint32_t n, const std::function<void(uint32_t)>& fn) {
  MG_CHECK(n >= 1 && n <= threads());
  {
    std::lock_guard l(mu_);
    job_ = &fn;
    n_ = n;
    pending_ = n - 1;
    errors_.assign(n, nullptr);
    ++round_;
  }
  if (n > 1) wake_.notify_all();
  std::exception_ptr first;
  try {
    fn(0);
  } catch (...) {
    first = std::current_exception();
  }
  std::unique_lock l(mu_);
  done_.wait(l, [this] { return pending_ == 0; });
  job_ = nullptr;
  if (!first) {
    for (const auto& e : errors_) {
      if (e) {
        first = e;
        break;
      }
    }
  }
  l.unlock();
  if (first) std::rethrow_exception(first);
}

void BuildPool::helper_main(uint32_t index) {
  uint64_t seen = 0;
  std::unique_lock l(mu_);
  ++started_;
  done_.notify_one();
  for (;;) {
    wake_.wait(l, [&] { return stop_ || round_ != seen; });
    if (stop_) return;
    seen = round_;
    if (index >= n_) continue;  // a small job: not needed this round
    const auto* fn = job_;
    l.unlock();
    std::exception_ptr err;
    try {
      (*fn)(index);
    } catch (...) {
      err = std::current_exception();
    }
    l.lock();
    errors_[index] = err;
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace meshgate::ctl
