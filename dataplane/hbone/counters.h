// HBONE engine counters (hbone_counters.def). Per worker, written only by that worker.
#pragma once

#include <cstdint>

#include "dataplane/common/counter_table.h"

namespace meshgate::dp::hbone {

enum class Counter : uint16_t {
#define MG_COUNTER MG_COUNTER_ENUMERATOR
#include "dataplane/hbone/hbone_counters.def"
#undef MG_COUNTER
  kCount
};
inline constexpr int kNumCounters = int(Counter::kCount);

inline constexpr const char* kCounterNames[] = {
#define MG_COUNTER MG_COUNTER_NAME
#include "dataplane/hbone/hbone_counters.def"
#undef MG_COUNTER
};
inline constexpr const char* kCounterHelp[] = {
#define MG_COUNTER MG_COUNTER_HELP
#include "dataplane/hbone/hbone_counters.def"
#undef MG_COUNTER
};
inline const char* counter_name(Counter c) { return kCounterNames[int(c)]; }
inline const char* counter_help(Counter c) { return kCounterHelp[int(c)]; }

struct Counters {
  uint64_t v[kNumCounters] = {};
  void add(Counter c, uint64_t n = 1) { v[int(c)] += n; }
  uint64_t operator[](Counter c) const { return v[int(c)]; }
};

}  // namespace meshgate::dp::hbone
