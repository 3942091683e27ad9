// The access log's control side (docs/CONTROL.md "Access log"): one ring per worker
// (dataplane/accesslog/access_record.h), drained by the control loop, each record formatted as
// one JSON line and written to a file (opened O_APPEND, reopened on SIGUSR1 for logrotate) or
// to stdout.
//
// Records are written whole or not at all: a write that stops inside a line (a disk filling up)
// keeps the line's unwritten tail and writes it first when writing works again, so every line
// of the file is one JSON object; the records after it in that batch are lost and counted. A
// failing write is logged (access_log_write_failed), at most once per failure log interval.
//
// Threads: the control thread, except the counters (records(), dropped(), write_errors()),
// which any thread may read; the workers only produce into their rings.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/common/result.h"
#include "dataplane/accesslog/access_record.h"

namespace meshgate::ctl {

// One record as the JSON object of its line (fields in docs/CONTROL.md "Access log").
nlohmann::ordered_json access_record_json(const dp::AccessRecord& r);

// How often, at most, a failing access-log write is logged: a full disk fails every drain.
inline constexpr std::chrono::milliseconds kAccessLogFailureLogInterval{10000};

class AccessLogWriter {
 public:
  // The write(2) the writer calls, replaceable so tests can return short writes and ENOSPC.
  using WriteFn = ssize_t (*)(int fd, const void* buf, size_t n);

  // `workers` rings of `ring_size` records (rounded up to a power of two).
  AccessLogWriter(uint32_t workers, uint32_t ring_size);
  ~AccessLogWriter();
  AccessLogWriter(const AccessLogWriter&) = delete;
  AccessLogWriter& operator=(const AccessLogWriter&) = delete;

  // Worker w's ring (the worker is its producer).
  dp::AccessRing* ring(uint32_t w) { return rings_[w].get(); }
  uint32_t rings() const { return uint32_t(rings_.size()); }

  // Writes to `path` from now on ("-": stdout); a file is created when missing (0644) and
  // appended to. On failure the previous destination stays.
  Result<bool> open(const std::string& path);
  // Opens the same path again (after logrotate moved the file away).
  Result<bool> reopen() { return open(path_); }
  const std::string& path() const { return path_; }

  // Formats and writes what the rings hold (at most `max_records` from each, so one busy worker
  // cannot hold the control loop); the number of records taken.
  size_t drain(size_t max_records = 4096);

  uint64_t records() const { return records_.load(std::memory_order_relaxed); }
  uint64_t write_errors() const { return write_errors_.load(std::memory_order_relaxed); }
  // Records the workers dropped because their ring was full, summed.
  uint64_t dropped() const;
  // {"path", "records", "dropped", "write_errors"}: the access log's part of --stats-json.
  nlohmann::json stats_json() const;

  void set_write_fn(WriteFn fn) { write_fn_ = fn; }
  void set_failure_log_interval(std::chrono::milliseconds d) { failure_log_interval_ = d; }

 private:
  // Writes `buf`, whose records end at the offsets `ends` (each just past its newline).
  void write_out(const std::string& buf, const std::vector<size_t>& ends);
  // Writes what it can of [p, p + n); the bytes written, with the error that stopped it in `*err`.
  size_t write_some(const char* p, size_t n, int* err);
  // `n` records lost to error `err`: counted, and logged when the interval allows.
  void lost(uint64_t n, int err);
  void log_failures();

  std::vector<std::unique_ptr<dp::AccessRing>> rings_;
  std::string path_;
  int fd_ = -1;
  bool own_fd_ = false;  // not stdout
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> write_errors_{0};
  // The unwritten end of a line a write cut short: the file ends with the line's head.
  std::string tail_;
  WriteFn write_fn_;
  std::chrono::milliseconds failure_log_interval_ = kAccessLogFailureLogInterval;
  uint64_t unlogged_ = 0;  // records lost since the last access_log_write_failed line
  int last_errno_ = 0;
  std::chrono::steady_clock::time_point last_logged_{};
  bool logged_ = false;
};

}  // namespace meshgate::ctl
