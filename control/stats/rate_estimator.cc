#include "control/stats/rate_estimator.h"

namespace meshgate::ctl {

void RateEstimator::update(Clock::time_point now,
                           const std::vector<std::pair<uint32_t, RateSample>>& samples) {
  const double secs = last_ ? std::chrono::duration<double>(now - *last_).count() : 0;
  last_ = now;
  for (auto& [id, e] : entries_) e.seen = false;
  for (const auto& [id, s] : samples) {
    auto [it, fresh] = entries_.try_emplace(id);
    Entry& e = it->second;
    e.seen = true;
    const bool reset = s.flows < e.last.flows || s.packets < e.last.packets ||
                       s.bytes < e.last.bytes || s.reply_bytes < e.last.reply_bytes;
    if (!fresh && !reset && secs > 0) {
      const Rates now_rates{double(s.flows - e.last.flows) / secs,
                            double(s.packets - e.last.packets) / secs,
                            double(s.bytes - e.last.bytes) / secs,
                            double(s.reply_bytes - e.last.reply_bytes) / secs};
      if (!e.measured) {
        e.avg = now_rates;
        e.measured = true;
      } else {
        e.avg.flows_per_s += (now_rates.flows_per_s - e.avg.flows_per_s) * kRateWeight;
        e.avg.packets_per_s += (now_rates.packets_per_s - e.avg.packets_per_s) * kRateWeight;
        e.avg.bytes_per_s += (now_rates.bytes_per_s - e.avg.bytes_per_s) * kRateWeight;
        e.avg.reply_bytes_per_s +=
            (now_rates.reply_bytes_per_s - e.avg.reply_bytes_per_s) * kRateWeight;
      }
    } else if (reset) {
      e.measured = false;
      e.avg = Rates{};
    }
    e.last = s;
  }
  std::erase_if(entries_, [](const auto& kv) { return !kv.second.seen; });
}

const Rates* RateEstimator::rates(uint32_t id) const {
  const auto it = entries_.find(id);
  return it == entries_.end() || !it->second.measured ? nullptr : &it->second.avg;
}

}  // namespace meshgate::ctl
