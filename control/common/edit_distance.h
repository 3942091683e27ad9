// The edit distance behind every "did you mean" (config keys and enum values, mesh file keys,
// DPDK driver names). Any thread.
#pragma once

#include <cstddef>
#include <string_view>

namespace meshgate::ctl {

// Optimal string alignment distance (Damerau-Levenshtein restricted to adjacent
// transpositions): a swapped pair of letters, the most common typo, counts as one edit.
// Suggestions only want small distances, so when the lengths alone differ by more than
// kMaxExactLengthGap the gap is returned (a lower bound) instead of filling a table of
// |a| x |b| cells: a megabyte-long key costs nothing.
inline constexpr size_t kMaxExactLengthGap = 16;
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace meshgate::ctl
