#include "control/config/config.h"

namespace meshgate::ctl {

const char* forward_mode_name(ForwardMode m) {
  switch (m) {
    case ForwardMode::kDnat: return "dnat";
    case ForwardMode::kFullnat: return "fullnat";
    case ForwardMode::kDsrIpip: return "dsr-ipip";
    case ForwardMode::kDsrGue: return "dsr-gue";
    case ForwardMode::kProxy: return "proxy";
  }
  return "?";
}

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
