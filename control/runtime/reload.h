// Reloads of the static config (config/README.md "Reloading"): the file read and checked
// against the running config, the outcome's log line, counters, admin answer and /config_dump
// status, and the optional watch of the file. The runtime applies an accepted config
// (GatewayRun::reload in runtime.cc). Control thread, except ConfigWatch's own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "control/admin/bridge.h"
#include "control/admin/prometheus.h"
#include "control/config/config.h"
#include "control/config/config_reload.h"
#include "control/mesh/file_watch.h"

namespace meshgate::ctl {

// ok: applied; invalid: the file does not parse or validate (or its snapshot cannot be built);
// restart_required: a key changed that only a restart applies. Only ok changes anything.
enum class ReloadResult : uint8_t { kOk, kInvalid, kRestartRequired };
inline constexpr const char* kReloadResultNames[] = {"ok", "invalid", "restart_required"};
inline constexpr size_t kReloadResults = 3;

struct ReloadOutcome {
  ReloadResult result = ReloadResult::kOk;
  const char* trigger = "";  // sighup | admin | watch
  ConfigErrors errors;       // invalid / restart_required: positioned at the new file's keys
  ConfigChanges changes;     // ok
  std::string sha256;        // of the bytes read ("" when the file could not be read)
  int64_t unix_time = 0;
  // The memory the new snapshot's tables add (estimate_reload_tables, eal.h) and what the host
  // had available, in MiB; 0 until that check ran (available_mb also when it is unknown).
  uint64_t needed_mb = 0;
  uint64_t available_mb = 0;
  bool memory_refused() const { return available_mb != 0 && needed_mb > available_mb; }
  uint64_t id = 0;          // the runtime's count of reloads started, this one's (0: not set)
  double elapsed_ms = 0;    // from the trigger to the outcome (the snapshot published)
};

// Reads `running.path` again and checks it as --check does: parse and validation errors, then
// what the file names outside itself (preflight, preflight.h: referenced files, host services;
// not the devices, which a reload cannot change) are invalid; then restart_only_changes
// (restart_required); then the memory the reload's tables add: beyond `available_mb` (0:
// unknown, not checked) it is invalid, naming both figures. Else ok with the live changes and
// the new config in `*next`. Nothing of the running gateway is touched either way.
ReloadOutcome check_reload(const Config& running, const char* trigger, uint64_t available_mb,
                           std::optional<Config>* next);
// The same with the host's available_memory_mb().
ReloadOutcome check_reload(const Config& running, const char* trigger, std::optional<Config>* next);

// One key=value line per attempt: result, trigger, what changed or every error (and needed_mb,
// available_mb when the memory refused it).
void log_reload(const ReloadOutcome& o);
// POST /reload: 200 (ok), 400 (invalid), 409 (restart_required), with reload_json().
AdminReply reload_reply(const ReloadOutcome& o);
// POST /reload while reload `id` (started by `trigger`) runs: 409 {"result": "in_progress",
// "id", "trigger", "errors": []}. Nothing is started: one reload runs at a time.
AdminReply reload_in_progress_reply(uint64_t id, const char* trigger);
// {"result", "trigger", "sha256", "changes": {...}, "errors": [{"file", "line", "column",
// "key", "message", "text"}]}, and "id", "elapsed_ms" once set.
nlohmann::json reload_json(const ReloadOutcome& o);

// What /metrics and /config_dump say about reloads.
class ReloadStats {
 public:
  explicit ReloadStats(int64_t loaded_unix) : loaded_unix_(loaded_unix) {}
  void count(const ReloadOutcome& o);
  // The "config" object of /config_dump: path, sha256 and load time of the running config, the
  // reload counts and the last attempt.
  nlohmann::json status(const Config& running) const;
  // meshgate_config_reloads_total{result} (every result, zeros included).
  void write_metrics(PromWriter& w) const;

 private:
  uint64_t counts_[kReloadResults] = {};
  int64_t loaded_unix_ = 0;
  std::optional<nlohmann::json> last_;
};

// [gateway] watch_config: a thread waits for changes to the config file (inotify on its
// directory, so an editor's write-and-rename and a ConfigMap swap count; other files in the
// directory do not) and raises a flag the control loop takes. Whether the file really changed
// is the caller's to decide (its hash).
class ConfigWatch {
 public:
  // Events within this long of the first are one change (a save that writes, then renames);
  // never longer, so a file written without pause is still reported every kSettleMs.
  static constexpr int kSettleMs = 200;

  ConfigWatch() = default;
  ~ConfigWatch() { stop(); }
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  // False (errno set) when the directory cannot be watched.
  bool start(const std::string& path);
  void stop();
  bool running() const { return thread_.joinable(); }
  // Control thread: true once per change seen since the last call.
  bool take_change() { return changed_.exchange(false, std::memory_order_acq_rel); }

 private:
  mesh::FileWatch watch_;
  std::thread thread_;
  std::atomic<bool> changed_{false};
  std::atomic<bool> stop_{false};
};

// The hash of the file at `path` as it is now; "" when it cannot be read.
std::string file_sha256(const std::string& path);

}  // namespace meshgate::ctl
