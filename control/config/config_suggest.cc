// Suggestions attached to config errors: the nearest valid name to a misspelt key, table, enum
// value or port name (edit distance), and where a key written at the wrong level belongs.
#include <algorithm>
#include <cctype>

#include "control/common/edit_distance.h"
#include "control/config/config_internal.h"

namespace meshgate::ctl::config_detail {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}


}  // namespace

std::string closest(std::string_view got, std::span<const std::string_view> candidates) {
  constexpr size_t kShortWord = 4;
  const size_t max_distance = got.size() <= kShortWord ? 1 : 2;
  const std::string g = lower(got);
  std::string best;
  size_t best_d = max_distance + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(g, lower(c));
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best;
}

std::string did_you_mean(const std::string& suggestion) {
  return suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)";
}

std::string unknown_key_hint(std::string_view name, std::string_view path, bool is_table,
                             Keys valid) {
  // No valid key is anywhere near that long: skip the edit distances.
  const bool too_long = name.size() > kMaxEchoedKey;
  std::string hint = too_long ? "" : did_you_mean(closest(name, valid));
  if (hint.empty() && path.empty() && !is_table && !too_long) {
    // A table's key written at the top level: say which table it belongs to.
    for (const auto& [table, keys] : kSingleTables) {
      if (std::find(keys.begin(), keys.end(), name) != keys.end()) {
        hint = " (did you mean '" + std::string(table) + "." + std::string(name) +
               "'? put it under [" + std::string(table) + "])";
        break;
      }
    }
  }
  if (hint.empty()) {
    hint = std::string(" (valid ") + (is_table && path.empty() ? "tables" : "keys") + ": " +
           list(valid) + ")";
  }
  return hint;
}

}  // namespace meshgate::ctl::config_detail
