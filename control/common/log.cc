#include "control/common/log.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>

namespace meshgate::ctl {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};
// One line at a time on stderr: DPDK's threads and the admin server log alongside the control
// thread, and a partial write() must be finished before another line starts.
std::mutex g_write_mu;

constexpr const char* kLevelNames[] = {"error", "warn", "info", "debug"};
constexpr const char* kFormatNames[] = {"text", "json"};

template <typename Enum, size_t N>
bool parse_name(const char* const (&names)[N], const std::string& s, Enum* out) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      *out = Enum(i);
      return true;
    }
  }
  return false;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

// Length of the key at s[i] when a key=value starts there, else 0.
size_t key_length(std::string_view s, size_t i) {
  size_t j = i;
  while (j < s.size() && is_key_char(s[j])) ++j;
  return j > i && j < s.size() && s[j] == '=' ? j - i : 0;
}

// Whether the `"` at s[i] ends a quoted value: the end of the text or whitespace and then the
// next key=value follow. Callers print quoted values without escaping them, so a quote
// followed by anything else is part of the value.
bool closes_value(std::string_view s, size_t i) {
  size_t j = i + 1;
  if (j == s.size()) return true;
  if (!is_space(s[j])) return false;
  while (j < s.size() && is_space(s[j])) ++j;
  return j == s.size() || key_length(s, j) > 0;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?: the numbers JSON and printf agree on (no hex, no exponent, no
// leading zeros that would read as something else).
bool is_plain_number(std::string_view v, bool* decimal) {
  size_t i = v.size() && v[0] == '-' ? 1 : 0;
  const size_t digits = i;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  if (i == digits || (v[digits] == '0' && i - digits > 1)) return false;
  *decimal = false;
  if (i == v.size()) return true;
  if (v[i] != '.') return false;
  const size_t frac = ++i;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  *decimal = true;
  return i > frac && i == v.size();
}

nlohmann::ordered_json typed_value(std::string_view v) {
  if (v == "true") return true;
  if (v == "false") return false;
  bool decimal = false;
  if (!is_plain_number(v, &decimal)) return std::string(v);
  const char* b = v.data();
  const char* e = v.data() + v.size();
  if (decimal) {
    double d = 0;
    auto [end, ec] = std::from_chars(b, e, d);
    if (ec == std::errc() && end == e && std::isfinite(d)) return d;
  } else if (v[0] == '-') {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(b, e, n);
    if (ec == std::errc() && end == e) return n;
  } else {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(b, e, n);
    if (ec == std::errc() && end == e) return n;
  }
  return std::string(v);
}

void add_field(nlohmann::ordered_json& j, std::string key, nlohmann::ordered_json value) {
  if (key == "ts" || key == "level" || key == "event") key = "_" + key;
  j[key] = std::move(value);
}

void add_word(nlohmann::ordered_json& j, std::string_view word) {
  auto it = j.find("msg");
  if (it != j.end() && it->is_string()) {
    it->get_ref<std::string&>().append(" ").append(word);
  } else {
    j["msg"] = std::string(word);
  }
}

void parse_fields(std::string_view s, nlohmann::ordered_json& j) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i == s.size()) break;
    const size_t klen = key_length(s, i);
    if (klen == 0) {
      size_t e = i;
      while (e < s.size() && !is_space(s[e])) ++e;
      add_word(j, s.substr(i, e - i));
      i = e;
      continue;
    }
    std::string key(s.substr(i, klen));
    i += klen + 1;
    if (i < s.size() && s[i] == '"') {
      std::string v;
      for (++i; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '"' || s[i + 1] == '\\')) {
          v += s[++i];
        } else if (s[i] == '"' && closes_value(s, i)) {
          ++i;
          break;
        } else {
          v += s[i];
        }
      }
      add_field(j, std::move(key), std::move(v));
    } else {
      size_t e = i;
      while (e < s.size() && !is_space(s[e])) ++e;
      add_field(j, std::move(key), typed_value(s.substr(i, e - i)));
      i = e;
    }
  }
}

int64_t now_unix_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void write_line(LogLevel l, const char* event, std::string_view fields) {
  std::string line = format_log_line(log_format(), now_unix_ms(), l, event, fields);
  line += '\n';
  std::lock_guard<std::mutex> lk(g_write_mu);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // stderr closed or full: nothing better to do with a log line
    p += w;
    left -= size_t(w);
  }
}

}  // namespace

void set_log_level(LogLevel l) { g_level.store(l, std::memory_order_relaxed); }
LogLevel log_level() { return g_level.load(std::memory_order_relaxed); }
bool log_enabled(LogLevel l) { return int(l) <= int(log_level()); }

bool parse_log_level(const std::string& s, LogLevel* out) { return parse_name(kLevelNames, s, out); }
const char* log_level_name(LogLevel l) { return kLevelNames[int(l)]; }

void set_log_format(LogFormat f) { g_format.store(f, std::memory_order_relaxed); }
LogFormat log_format() { return g_format.load(std::memory_order_relaxed); }

bool parse_log_format(const std::string& s, LogFormat* out) {
  return parse_name(kFormatNames, s, out);
}
const char* log_format_name(LogFormat f) { return kFormatNames[int(f)]; }

std::string rfc3339_utc_ms(int64_t unix_ms) {
  int64_t secs = unix_ms / 1000;
  int64_t ms = unix_ms % 1000;
  if (ms < 0) {
    ms += 1000;
    --secs;
  }
  const time_t t = time_t(secs);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::string out(buf, n);
  out += '.';
  out += char('0' + ms / 100);
  out += char('0' + ms / 10 % 10);
  out += char('0' + ms % 10);
  out += 'Z';
  return out;
}

std::string format_log_line(LogFormat f, int64_t unix_ms, LogLevel l, std::string_view event,
                            std::string_view fields) {
  if (f == LogFormat::kText) {
    std::string line = "ts=" + rfc3339_utc_ms(unix_ms) + " level=" + log_level_name(l) +
                       " event=";
    line += event;
    if (!fields.empty()) line.append(" ").append(fields);
    return line;
  }
  nlohmann::ordered_json j;
  j["ts"] = rfc3339_utc_ms(unix_ms);
  j["level"] = log_level_name(l);
  j["event"] = std::string(event);
  parse_fields(fields, j);
  // Paths and peer text need not be UTF-8: such bytes become U+FFFD rather than an exception.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void log(LogLevel l, const char* event, const char* fmt, ...) {
  if (!log_enabled(l)) return;
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string fields(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(fields.data(), fields.size() + 1, fmt, again);
  va_end(again);
  write_line(l, event, fields);
}

void log_message(LogLevel l, const char* event, std::string_view msg) {
  if (!log_enabled(l)) return;
  std::string fields = "msg=\"";
  for (char c : msg) {
    if (c == '"' || c == '\\') fields += '\\';
    fields += c;
  }
  fields += '"';
  write_line(l, event, fields);
}

}  // namespace meshgate::ctl
