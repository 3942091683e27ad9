#include "control/config/config.h"

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

}  // namespace meshgate::ctl
