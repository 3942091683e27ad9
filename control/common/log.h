// Control-plane logging: one key=value line per event on stderr; anything an operator watches is a metric.
// Control thread (and main before EAL init). Never called from workers.
#pragma once

#include <cstdarg>
#include <string>

namespace meshgate::ctl {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(LogLevel l);
LogLevel log_level();
// "error" | "warn" | "info" | "debug"; false on anything else.
bool parse_log_level(const std::string& s, LogLevel* out);

// log(kInfo, "port_started", "port=%s link=%s", ...) prints
//   level=info event=port_started port=net0 link=up
void log(LogLevel l, const char* event, const char* fmt = "", ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace meshgate::ctl
