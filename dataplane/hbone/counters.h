// HBONE engine counters (hbone_counters.def). Per worker, written only by that worker.
#pragma once

#include <cstdint>

namespace meshgate::dp::hbone {

enum class Counter : uint16_t {
#define X(name, help) k_##name,
#include "dataplane/hbone/hbone_counters.def"
#undef X
  kCount
};
inline constexpr int kNumCounters = int(Counter::kCount);

const char* counter_name(Counter c);
const char* counter_help(Counter c);

struct Counters {
  uint64_t v[kNumCounters] = {};
  void add(Counter c, uint64_t n = 1) { v[int(c)] += n; }
  uint64_t operator[](Counter c) const { return v[int(c)]; }
};

}  // namespace meshgate::dp::hbone
