// Control-plane logging: one line per event on stderr; anything an operator watches is a metric.
//
// A line is an RFC 3339 UTC timestamp with milliseconds, the level, the event and key=value
// fields, as text
//   ts=2026-11-27T05:50:00.123Z level=info event=port_started port=net0 link="up"
// or as one JSON object (--log-format json)
//   {"ts":"2026-11-27T05:50:00.123Z","level":"info","event":"port_started","port":"net0",...}
// whose members after "event" are the fields, parsed (see format_log_line).
//
// Threads: any thread except workers (the control thread, the admin server's threads, DPDK's
// own threads through the EAL log stream, eal.h). Each line is written whole, under one lock;
// the level and the format are atomics, so the admin API may change the level at any time.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>
#include <string_view>

namespace meshgate::ctl {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };
enum class LogFormat { kText = 0, kJson = 1 };

void set_log_level(LogLevel l);
LogLevel log_level();
// Whether a line at `l` would be written now.
bool log_enabled(LogLevel l);
// "error" | "warn" | "info" | "debug"; false on anything else.
bool parse_log_level(const std::string& s, LogLevel* out);
const char* log_level_name(LogLevel l);

void set_log_format(LogFormat f);
LogFormat log_format();
// "text" | "json"; false on anything else.
bool parse_log_format(const std::string& s, LogFormat* out);
const char* log_format_name(LogFormat f);

// log(kInfo, "port_started", "port=%s link=\"%s\"", ...) writes the line above. Values with
// spaces are written in double quotes.
void log(LogLevel l, const char* event, const char* fmt = "", ...)
    __attribute__((format(printf, 3, 4)));

// One line with free text as its only field (msg="..."): text from elsewhere (DPDK's log) that
// is not key=value. In the text format `"` and `\` in it are escaped with a backslash.
void log_message(LogLevel l, const char* event, std::string_view msg);

// The line log() writes, without its newline. `fields` is the key=value text. In JSON every
// field is a member: quoted values as strings (backslash escapes undone; a `"` closes the value
// only where a space and the next key= or the end follow, so unescaped quotes inside stay
// text), unquoted integers and decimals as numbers, true and false as booleans, anything else
// as a string. Words that are not key=value are joined into "msg". A field named ts, level or
// event does not replace the line's own.
std::string format_log_line(LogFormat f, int64_t unix_ms, LogLevel l, std::string_view event,
                            std::string_view fields);
// 2026-11-27T05:50:00.123Z: RFC 3339 section 5.6 date-time in UTC with milliseconds.
std::string rfc3339_utc_ms(int64_t unix_ms);

}  // namespace meshgate::ctl
