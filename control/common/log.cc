#include "control/common/log.h"

#include <cstdio>

namespace meshgate::ctl {
namespace {
LogLevel g_level = LogLevel::kInfo;
constexpr const char* kNames[] = {"error", "warn", "info", "debug"};
}  // namespace

void set_log_level(LogLevel l) { g_level = l; }
LogLevel log_level() { return g_level; }

bool parse_log_level(const std::string& s, LogLevel* out) {
  for (int i = 0; i < 4; ++i) {
    if (s == kNames[i]) {
      *out = LogLevel(i);
      return true;
    }
  }
  return false;
}

void log(LogLevel l, const char* event, const char* fmt, ...) {
  if (int(l) > int(g_level)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "meshgate: level=%s event=%s%s%s\n", kNames[int(l)], event,
               buf[0] ? " " : "", buf);
}

}  // namespace meshgate::ctl
