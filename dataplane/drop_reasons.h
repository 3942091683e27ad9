// Drop reasons as an enum plus names, generated from drop_reasons.def. Any thread.
#pragma once

#include <cstdint>

#include "dataplane/common/counter_table.h"

namespace meshgate::dp {

enum class Drop : uint8_t {
  kNone = 0,
#define MG_COUNTER MG_COUNTER_ENUMERATOR
#include "dataplane/drop_reasons.def"
#undef MG_COUNTER
  kCount
};

inline constexpr uint32_t kNumDrops = uint32_t(Drop::kCount);

inline constexpr const char* kDropNames[] = {
    "none",
#define MG_COUNTER MG_COUNTER_NAME
#include "dataplane/drop_reasons.def"
#undef MG_COUNTER
};

inline constexpr const char* kDropDescriptions[] = {
    "not dropped",
#define MG_COUNTER MG_COUNTER_HELP
#include "dataplane/drop_reasons.def"
#undef MG_COUNTER
};

inline const char* drop_name(Drop d) { return kDropNames[uint32_t(d)]; }

}  // namespace meshgate::dp
