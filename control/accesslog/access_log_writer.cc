#include "control/accesslog/access_log_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "control/common/log.h"
#include "control/snapshot/stat_registry.h"
#include "dataplane/snapshot/mode.h"

namespace meshgate::ctl {

namespace {

// endpoint_str, or "" for the zero address (no such side).
std::string access_endpoint(const IpAddr& a, uint16_t port) {
  return a == IpAddr{} ? "" : endpoint_str(a, port);
}

}  // namespace

nlohmann::ordered_json access_record_json(const dp::AccessRecord& r) {
  nlohmann::ordered_json j;
  j["start"] = rfc3339_utc_ms(r.start_unix_ms);
  j["duration_ms"] = r.duration_ms;
  j["kind"] = dp::kAccessKindNames[size_t(r.kind)];
  const dp::AccessTuple& t = r.tuple;
  j["client"] = access_endpoint(t.client, t.client_port);
  j["vip"] = access_endpoint(t.vip, t.vip_port);
  j["backend"] = access_endpoint(t.backend, t.backend_port);
  j["service"] = r.names.service;
  if (r.kind == dp::AccessKind::kListener) j["listener"] = r.names.listener;
  if (r.kind == dp::AccessKind::kFlow) {
    // Packet modes count no bytes per flow: the record says how it was forwarded instead.
    j["mode"] = dp::mode_name(dp::Mode(r.mode));
    j["protocol"] = r.proto == 6 ? "tcp" : r.proto == 17 ? "udp" : std::to_string(r.proto);
  } else {
    j["bytes_from_client"] = r.bytes_from_client;
    j["bytes_to_client"] = r.bytes_to_client;
  }
  if (r.kind == dp::AccessKind::kHboneInbound || r.kind == dp::AccessKind::kHboneOutbound) {
    j["source_principal"] = r.src_identity;
    j["destination_principal"] = r.dst_identity;
  }
  j["end"] = size_t(r.end) < size_t(dp::AccessEnd::kCount) ? dp::kAccessEndNames[size_t(r.end)]
                                                            : "unknown";
  j["worker"] = r.worker;
  return j;
}

AccessLogWriter::AccessLogWriter(uint32_t workers, uint32_t ring_size) : write_fn_(&::write) {
  for (uint32_t w = 0; w < workers; ++w) {
    rings_.push_back(std::make_unique<dp::AccessRing>(ring_size));
  }
}

AccessLogWriter::~AccessLogWriter() {
  if (!tail_.empty() && fd_ >= 0) {
    int err = 0;
    write_some(tail_.data(), tail_.size(), &err);
  }
  if (own_fd_) ::close(fd_);
}

Result<bool> AccessLogWriter::open(const std::string& path) {
  int fd = STDOUT_FILENO;
  const bool own = path != "-";
  if (own) {
    fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Error{"cannot open " + path + ": " + std::strerror(errno)};
  }
  // A cut line belongs to the old file: finished there if it can be, else lost.
  if (!tail_.empty()) {
    int err = 0;
    const bool done = fd_ >= 0 && write_some(tail_.data(), tail_.size(), &err) == tail_.size();
    tail_.clear();
    if (done) {
      records_.fetch_add(1, std::memory_order_relaxed);
    } else {
      lost(1, err);
    }
  }
  if (own_fd_) ::close(fd_);
  fd_ = fd;
  own_fd_ = own;
  path_ = path;
  return true;
}

uint64_t AccessLogWriter::dropped() const {
  uint64_t n = 0;
  for (const auto& r : rings_) n += r->dropped();
  return n;
}

nlohmann::json AccessLogWriter::stats_json() const {
  return {{"path", path_},
          {"records", records()},
          {"dropped", dropped()},
          {"write_errors", write_errors()}};
}

size_t AccessLogWriter::drain(size_t max_records) {
  std::string buf;
  std::vector<size_t> ends;
  for (auto& ring : rings_) {
    for (size_t i = 0; i < max_records; ++i) {
      const dp::AccessRecord* r = ring->front();
      if (r == nullptr) break;
      buf += access_record_json(*r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      buf += '\n';
      ends.push_back(buf.size());
      ring->pop();
    }
  }
  if (!ends.empty() || !tail_.empty()) write_out(buf, ends);
  log_failures();  // what was lost since a line the interval held back
  return ends.size();
}

size_t AccessLogWriter::write_some(const char* p, size_t n, int* err) {
  size_t off = 0;
  while (off < n) {
    const ssize_t k = write_fn_(fd_, p + off, n - off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      *err = k < 0 ? errno : EIO;
      break;
    }
    off += size_t(k);
  }
  return off;
}

void AccessLogWriter::write_out(const std::string& buf, const std::vector<size_t>& ends) {
  const size_t records = ends.size();
  if (fd_ < 0) {
    lost(records, EBADF);
    return;
  }
  int err = 0;
  // The rest of a cut line first, so that it ends before the next record starts. Until it is
  // written nothing else is (the batch is lost), never retried, so the rings keep draining.
  if (!tail_.empty()) {
    tail_.erase(0, write_some(tail_.data(), tail_.size(), &err));
    if (!tail_.empty()) {
      lost(records, err);
      return;
    }
    records_.fetch_add(1, std::memory_order_relaxed);
  }
  const size_t n = write_some(buf.data(), buf.size(), &err);
  const size_t whole = size_t(std::upper_bound(ends.begin(), ends.end(), n) - ends.begin());
  records_.fetch_add(whole, std::memory_order_relaxed);
  if (whole == records) return;
  // Cut inside record `whole`: its tail waits for the next write; the records after it are lost.
  const size_t start = whole == 0 ? 0 : ends[whole - 1];
  uint64_t gone = records - whole;
  if (n > start) {
    tail_.assign(buf, n, ends[whole] - n);
    --gone;
  }
  lost(gone, err);
}

void AccessLogWriter::lost(uint64_t n, int err) {
  if (n == 0) return;
  write_errors_.fetch_add(n, std::memory_order_relaxed);
  unlogged_ += n;
  last_errno_ = err;
  log_failures();
}

void AccessLogWriter::log_failures() {
  if (unlogged_ == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (logged_ && now - last_logged_ < failure_log_interval_) return;
  log(LogLevel::kError, "access_log_write_failed", "path=\"%s\" error=\"%s\" dropped=%lu total=%lu",
      path_.c_str(), std::strerror(last_errno_), (unsigned long)unlogged_,
      (unsigned long)write_errors());
  unlogged_ = 0;
  last_logged_ = now;
  logged_ = true;
}

}  // namespace meshgate::ctl
