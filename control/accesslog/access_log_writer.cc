#include "control/accesslog/access_log_writer.h"

#include <fcntl.h>
#include <unistd.h>

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

AccessLogWriter::AccessLogWriter(uint32_t workers, uint32_t ring_size) {
  for (uint32_t w = 0; w < workers; ++w) {
    rings_.push_back(std::make_unique<dp::AccessRing>(ring_size));
  }
}

AccessLogWriter::~AccessLogWriter() {
  if (own_fd_) ::close(fd_);
}

Result<bool> AccessLogWriter::open(const std::string& path) {
  int fd = STDOUT_FILENO;
  const bool own = path != "-";
  if (own) {
    fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Error{"cannot open " + path + ": " + std::strerror(errno)};
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

size_t AccessLogWriter::drain(size_t max_records) {
  std::string buf;
  size_t taken = 0;
  for (auto& ring : rings_) {
    for (size_t i = 0; i < max_records; ++i) {
      const dp::AccessRecord* r = ring->front();
      if (r == nullptr) break;
      buf += access_record_json(*r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      buf += '\n';
      ring->pop();
      ++taken;
    }
  }
  if (taken != 0) write_out(buf, taken);
  return taken;
}

void AccessLogWriter::write_out(const std::string& buf, size_t records) {
  if (fd_ < 0) {
    write_errors_.fetch_add(records, std::memory_order_relaxed);
    return;
  }
  size_t off = 0;
  while (off < buf.size()) {
    const ssize_t n = ::write(fd_, buf.data() + off, buf.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The rest of the batch is lost (disk full, a closed stdout): counted, never retried, so
      // the rings keep draining.
      write_errors_.fetch_add(records, std::memory_order_relaxed);
      return;
    }
    off += size_t(n);
  }
  records_.fetch_add(records, std::memory_order_relaxed);
}

}  // namespace meshgate::ctl
