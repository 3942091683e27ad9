#include "control/admin/health.h"

#include <cinttypes>
#include <cstdio>

namespace meshgate::ctl {

void WorkerHealth::observe(uint32_t worker, uint64_t loops, Clock::time_point now) {
  if (worker >= entries_.size()) entries_.resize(worker + 1);
  Entry& e = entries_[worker];
  if (!e.seen || loops != e.loops) {
    e.seen = true;
    e.loops = loops;
    e.changed = now;
  }
}

WorkerHealth::Status WorkerHealth::check(Clock::time_point now) const {
  Status st;
  if (entries_.empty()) {
    st.text = "unhealthy: no worker is running\n";
    return st;
  }
  std::string stuck, lines;
  char buf[160];
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!e.seen) {
      std::snprintf(buf, sizeof buf, "worker %zu stuck: never observed polling\n", i);
      stuck += buf;
      continue;
    }
    const auto idle =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - e.changed).count();
    if (idle >= stall_after_.count()) {
      std::snprintf(buf, sizeof buf,
                    "worker %zu stuck: loop counter %" PRIu64 " unchanged for %lld ms\n", i,
                    e.loops, static_cast<long long>(idle));
      stuck += buf;
    } else {
      std::snprintf(buf, sizeof buf, "worker %zu ok: loops %" PRIu64 "\n", i, e.loops);
      lines += buf;
    }
  }
  st.healthy = stuck.empty();
  st.text = (st.healthy ? "ok\n" : "unhealthy\n") + stuck + lines;
  return st;
}

}  // namespace meshgate::ctl
