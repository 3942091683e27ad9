#include "control/runtime/reload.h"

#include <cstdint>
#include <ctime>
#include <string>
#include <utility>

#include "control/common/file_read.h"
#include "control/common/log.h"
#include "control/common/sha256.h"
#include "control/runtime/eal.h"
#include "control/runtime/preflight.h"

namespace meshgate::ctl {

using nlohmann::json;

namespace {

const char* result_name(ReloadResult r) { return kReloadResultNames[size_t(r)]; }

json changes_json(const ConfigChanges& c) {
  return {{"services_added", c.services_added},
          {"services_removed", c.services_removed},
          {"services_changed", c.services_changed},
          {"listeners_added", c.listeners_added},
          {"listeners_removed", c.listeners_removed},
          {"listeners_changed", c.listeners_changed},
          {"other", c.other}};
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s.empty() ? "none" : s;
}

}  // namespace

ReloadOutcome check_reload(const Config& running, const char* trigger,
                           std::optional<Config>* next) {
  return check_reload(running, trigger, available_memory_mb(), next);
}

ReloadOutcome check_reload(const Config& running, const char* trigger, uint64_t available_mb,
                           std::optional<Config>* next) {
  ReloadOutcome o;
  o.trigger = trigger;
  o.unix_time = int64_t(std::time(nullptr));
  // Read once: the hash is that of the bytes checked, whatever the file holds a moment later.
  auto text = read_regular_file(running.path, kMaxConfigFileBytes);
  if (!text) {
    o.result = ReloadResult::kInvalid;
    o.errors.errors.push_back(ConfigError{SourcePos{running.path, 0, 0}, "",
                                          "config file " + text.error().message});
    return o;
  }
  o.sha256 = sha256_hex(*text);
  auto loaded = parse_config(*text, running.path);
  if (!loaded) {
    o.result = ReloadResult::kInvalid;
    o.errors = std::move(loaded.error());
    return o;
  }
  // A file --check refuses is refused here too, before restart_required: that answer asks for
  // a restart, which would fail on it.
  o.errors = preflight(*loaded, /*replay=*/false, /*devices=*/false);
  if (!o.errors.errors.empty()) {
    o.result = ReloadResult::kInvalid;
    return o;
  }
  o.errors = restart_only_changes(running, *loaded);
  if (!o.errors.errors.empty()) {
    o.result = ReloadResult::kRestartRequired;
    return o;
  }
  // The sizes a start checked cannot change (restart_only_changes): what a reload adds is the
  // tables it builds while the running ones still serve.
  const ReloadTables t = estimate_reload_tables(running, *loaded);
  o.needed_mb = mib_ceil(t.bytes);
  o.available_mb = available_mb;
  if (o.memory_refused()) {
    o.result = ReloadResult::kInvalid;
    const std::string key = t.largest != SIZE_MAX ? table_key(*loaded, t.largest) : "";
    o.errors.errors.push_back(ConfigError{
        key.empty() ? SourcePos{loaded->path, 0, 0} : position_of(*loaded, key), key,
        "memory: the reload needs about " + std::to_string(o.needed_mb) +
            " MiB (Maglev tables of " + std::to_string(t.built) + " services added or changed, "
            "every service's entries), more than the " + std::to_string(available_mb) +
            " MiB this host has available; lower table_size or the service count"});
    return o;
  }
  o.changes = live_changes(running, *loaded);
  loaded->sha256 = o.sha256;
  *next = std::move(loaded.value());
  return o;
}

void log_reload(const ReloadOutcome& o) {
  if (o.result == ReloadResult::kOk) {
    const ConfigChanges& c = o.changes;
    log(LogLevel::kInfo, "config_reload",
        "result=ok trigger=%s services_added=%u services_removed=%u services_changed=%u "
        "listeners_added=%u listeners_removed=%u listeners_changed=%u other=%s sha256=%s "
        "id=%lu elapsed_ms=%.0f",
        o.trigger, c.services_added, c.services_removed, c.services_changed, c.listeners_added,
        c.listeners_removed, c.listeners_changed, joined(c.other).c_str(), o.sha256.c_str(),
        (unsigned long)o.id, o.elapsed_ms);
    return;
  }
  const std::string memory = o.memory_refused() ? " needed_mb=" + std::to_string(o.needed_mb) +
                                                       " available_mb=" +
                                                       std::to_string(o.available_mb)
                                                 : "";
  log(LogLevel::kError, "config_reload",
      "result=%s trigger=%s errors=%zu%s id=%lu elapsed_ms=%.0f action=\"%s\"",
      result_name(o.result), o.trigger, o.errors.errors.size(), memory.c_str(), (unsigned long)o.id,
      o.elapsed_ms,
      "nothing changed; the running config stays");
  for (const ConfigError& e : o.errors.errors) {
    log(LogLevel::kError, "config_reload_error", "result=%s error=\"%s\"", result_name(o.result),
        e.str().c_str());
  }
}

json reload_json(const ReloadOutcome& o) {
  json errors = json::array();
  for (const ConfigError& e : o.errors.errors) {
    errors.push_back({{"file", e.pos.file},
                      {"line", e.pos.line},
                      {"column", e.pos.column},
                      {"key", e.key},
                      {"message", e.message},
                      {"text", e.str()}});
  }
  json j = {{"result", result_name(o.result)},
            {"trigger", o.trigger},
            {"sha256", o.sha256},
            {"errors", errors}};
  if (o.result == ReloadResult::kOk) j["changes"] = changes_json(o.changes);
  if (o.id != 0) {
    j["id"] = o.id;
    j["elapsed_ms"] = int64_t(o.elapsed_ms + 0.5);
  }
  return j;
}

AdminReply reload_in_progress_reply(uint64_t id, const char* trigger) {
  AdminReply r;
  r.status = 409;
  r.body = json{{"result", "in_progress"}, {"id", id}, {"trigger", trigger}, {"errors", json::array()}}
               .dump(2) +
           "\n";
  return r;
}

AdminReply reload_reply(const ReloadOutcome& o) {
  AdminReply r;
  r.status = o.result == ReloadResult::kOk ? 200 : o.result == ReloadResult::kInvalid ? 400 : 409;
  r.body = reload_json(o).dump(2) + "\n";
  return r;
}

void ReloadStats::count(const ReloadOutcome& o) {
  ++counts_[size_t(o.result)];
  json last = reload_json(o);
  last["unix_time"] = o.unix_time;
  last.erase("errors");
  last["errors"] = o.errors.errors.size();
  if (o.result == ReloadResult::kOk) loaded_unix_ = o.unix_time;
  last_ = std::move(last);
}

json ReloadStats::status(const Config& running) const {
  json reloads = json::object();
  for (size_t i = 0; i < kReloadResults; ++i) reloads[kReloadResultNames[i]] = counts_[i];
  return {{"path", running.path},
          {"sha256", running.sha256},
          {"loaded_unix", loaded_unix_},
          {"watch", running.gateway.watch_config},
          {"reloads", reloads},
          {"last_reload", last_ ? *last_ : json(nullptr)}};
}

void ReloadStats::write_metrics(PromWriter& w) const {
  w.family("meshgate_config_reloads_total", MetricType::kCounter,
           "config reloads by result (ok: applied; invalid, restart_required: nothing changed)");
  for (size_t i = 0; i < kReloadResults; ++i) w.sample({{"result", kReloadResultNames[i]}}, counts_[i]);
}

bool ConfigWatch::start(const std::string& path) {
  if (!watch_.open(path)) return false;
  stop_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this] {
    while (!stop_.load(std::memory_order_acquire)) {
      if (watch_.wait(-1, kSettleMs)) changed_.store(true, std::memory_order_release);
    }
  });
  return true;
}

void ConfigWatch::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  watch_.wake();
  thread_.join();
}

std::string file_sha256(const std::string& path) {
  auto text = read_regular_file(path, kMaxConfigFileBytes);
  return text ? sha256_hex(*text) : std::string();
}

}  // namespace meshgate::ctl
