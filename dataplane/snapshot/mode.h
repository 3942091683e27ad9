// The forwarding modes and their one name table: the config's `mode` values, the names in error
// messages, /config_dump, flow dumps, --stats-json and the summary. Any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace meshgate::dp {

enum class Mode : uint8_t { kDnat, kFullnat, kDsrIpip, kDsrGue, kProxy };

struct ModeName {
  const char* name;
  Mode value;
};

// name <-> value for every mode, in enum order (mode_name indexes it). The config parser reads
// `mode` through it and lists it in its messages.
inline constexpr ModeName kModeNames[] = {{"dnat", Mode::kDnat},
                                          {"fullnat", Mode::kFullnat},
                                          {"dsr-ipip", Mode::kDsrIpip},
                                          {"dsr-gue", Mode::kDsrGue},
                                          {"proxy", Mode::kProxy}};

static_assert(std::size(kModeNames) == size_t(Mode::kProxy) + 1 && [] {
  for (size_t i = 0; i < std::size(kModeNames); ++i) {
    if (size_t(kModeNames[i].value) != i) return false;
  }
  return true;
}());

constexpr const char* mode_name(Mode m) {
  return size_t(m) < std::size(kModeNames) ? kModeNames[size_t(m)].name : "?";
}

// Direct server return: the backend answers the client itself; no reply direction to track.
constexpr bool is_dsr(Mode m) { return m == Mode::kDsrIpip || m == Mode::kDsrGue; }

}  // namespace meshgate::dp
