// How config errors read: ConfigError's "file:line:col: key: message" form, and the helpers
// the parser and the validator use to name keys and values in their messages.
#include <algorithm>

#include "control/config/config.h"
#include "control/config/config_internal.h"

namespace meshgate::ctl {

std::string echoed_key(std::string_view k) {
  if (k.size() <= kMaxEchoedKey) return std::string(k);
  return std::string(k.substr(0, kMaxEchoedKey)) + "\u2026";
}

std::string ConfigError::str() const {
  std::string s = pos.file;
  if (pos.line) s += ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
  s += ": ";
  if (!key.empty()) s += key + ": ";
  return s + message;
}

std::string ConfigErrors::str() const {
  std::string s;
  for (const auto& e : errors) s += e.str() + "\n";
  return s;
}

namespace config_detail {

std::string join(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  std::string s(path);
  s += '.';
  s += key;
  return s;
}

std::string indexed(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

std::string without_indices(std::string_view key) {
  std::string s;
  bool in_index = false;
  for (char c : key) {
    if (c == '[') in_index = true;
    if (!in_index) s += c;
    if (c == ']') in_index = false;
  }
  return s;
}

std::string quoted(std::string_view s) {
  constexpr size_t kMaxShown = 60;
  if (s.size() > kMaxShown) return "\"" + std::string(s.substr(0, kMaxShown)) + "...\"";
  return "\"" + std::string(s) + "\"";
}

std::string where(const SourcePos& p) {
  if (p.line == 0) return p.file;
  return p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

std::string list(Keys keys) {
  std::string s;
  for (auto k : keys) {
    if (!s.empty()) s += ", ";
    s += k;
  }
  return s;
}

std::string int_expected(const IntSpec& spec) {
  if (spec.what) return std::string("an integer: ") + spec.what;
  return "an integer " + std::to_string(spec.lo) + ".." + std::to_string(spec.hi);
}

std::string family(const IpAddr& a) { return a.is_v4() ? "IPv4" : "IPv6"; }

}  // namespace config_detail

void sort_by_position(std::vector<ConfigError>& errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const ConfigError& a, const ConfigError& b) {
    return std::pair{a.pos.line, a.pos.column} < std::pair{b.pos.line, b.pos.column};
  });
}

}  // namespace meshgate::ctl
