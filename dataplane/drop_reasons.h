// Drop reasons as an enum plus names, generated from drop_reasons.def. Any thread.
#pragma once

#include <cstdint>

namespace meshgate::dp {

enum class Drop : uint8_t {
  kNone = 0,
#define MG_DROP(e, name, desc) e,
#include "dataplane/drop_reasons.def"
#undef MG_DROP
  kCount
};

inline constexpr uint32_t kNumDrops = uint32_t(Drop::kCount);

inline constexpr const char* kDropNames[] = {
    "none",
#define MG_DROP(e, name, desc) name,
#include "dataplane/drop_reasons.def"
#undef MG_DROP
};

inline constexpr const char* kDropDescriptions[] = {
    "not dropped",
#define MG_DROP(e, name, desc) desc,
#include "dataplane/drop_reasons.def"
#undef MG_DROP
};

inline const char* drop_name(Drop d) { return kDropNames[uint32_t(d)]; }

}  // namespace meshgate::dp
