// The access log's control side (docs/CONTROL.md "Access log"): one ring per worker
// (dataplane/accesslog/access_record.h), drained by the control loop, each record formatted as
// one JSON line and written to a file (opened O_APPEND, reopened on SIGUSR1 for logrotate) or
// to stdout.
//
// Threads: the control thread, except the counters (records(), dropped(), write_errors()),
// which any thread may read; the workers only produce into their rings.
#pragma once

#include <atomic>
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

class AccessLogWriter {
 public:
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

 private:
  void write_out(const std::string& buf, size_t records);

  std::vector<std::unique_ptr<dp::AccessRing>> rings_;
  std::string path_;
  int fd_ = -1;
  bool own_fd_ = false;  // not stdout
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> write_errors_{0};
};

}  // namespace meshgate::ctl
