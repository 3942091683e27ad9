// The access log's record of one connection (or packet-mode flow) at its end, as a worker
// writes it into its ring, and the worker's handle on that ring (AccessLog).
//
// A record holds no pointer: addresses and counts by value, and the names it shows (service,
// listener, identities) copied into fixed arrays when the worker writes it, truncated to their
// size. So the control thread formats a record correctly whatever snapshot is current by then
// (the one the connection ran under may be freed) at the cost of a few hundred bytes copied per
// connection end, and of names longer than the arrays being cut (a SPIFFE id keeps its first
// 127 bytes).
//
// Threads: AccessLog on its worker (init() on the control thread before launch); the ring's
// consumer side on the control thread (control/accesslog/access_log_writer.h).
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "dataplane/common/net_types.h"
#include "dataplane/common/spsc_ring.h"

namespace meshgate::dp {

enum class AccessKind : uint8_t { kProxy, kListener, kHboneInbound, kHboneOutbound, kFlow };
inline constexpr const char* kAccessKindNames[] = {"proxy", "listener", "hbone_inbound",
                                                   "hbone_outbound", "flow"};

enum class AccessEnd : uint8_t {
#define MG_ACCESS_END(e, name, help) e,
#include "dataplane/accesslog/access_end.def"
#undef MG_ACCESS_END
  kCount
};
inline constexpr const char* kAccessEndNames[] = {
#define MG_ACCESS_END(e, name, help) name,
#include "dataplane/accesslog/access_end.def"
#undef MG_ACCESS_END
};

// Names as copied into records, NUL-terminated, truncated to fit.
inline constexpr size_t kAccessServiceLen = 64;
inline constexpr size_t kAccessListenerLen = 32;
inline constexpr size_t kAccessIdentityLen = 128;  // SPIFFE ids

template <size_t N>
inline void access_copy(char (&dst)[N], std::string_view s) {
  const size_t n = std::min(s.size(), N - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

// The names of a connection, taken when it starts (the snapshot may change before it ends).
struct AccessNames {
  char service[kAccessServiceLen] = {};
  char listener[kAccessListenerLen] = {};
};

// A connection's three ends. Ports in host order; a zero address is "none" (a connection
// refused before its backend was chosen).
struct AccessTuple {
  IpAddr client, vip, backend;
  uint16_t client_port = 0, vip_port = 0, backend_port = 0;
  void set(const IpAddr& c, uint16_t cp, const IpAddr& v, uint16_t vp, const IpAddr& b,
           uint16_t bp) {
    client = c;
    client_port = cp;
    vip = v;
    vip_port = vp;
    backend = b;
    backend_port = bp;
  }
};

struct AccessRecord {
  int64_t start_unix_ms = 0;  // wall clock (UTC) when the connection started
  uint32_t duration_ms = 0;
  uint16_t worker = 0;
  AccessKind kind = AccessKind::kProxy;
  AccessEnd end = AccessEnd::kClientFin;
  uint8_t proto = 6;  // flows: the IP protocol (6 TCP, 17 UDP, ...)
  uint8_t mode = 0;   // flows: dp::Mode
  AccessTuple tuple;
  uint64_t bytes_from_client = 0;  // payload bytes passed on toward the backend
  uint64_t bytes_to_client = 0;    // payload bytes passed on toward the client
  AccessNames names;
  char src_identity[kAccessIdentityLen] = {};  // HBONE: the client side's SPIFFE id
  char dst_identity[kAccessIdentityLen] = {};  // HBONE: the server side's SPIFFE id
};

using AccessRing = SpscRing<AccessRecord>;

// A worker's handle on its access-log ring. Off (every call a no-op) without a ring.
class AccessLog {
 public:
  void init(AccessRing* ring, uint16_t worker, bool flows) {
    ring_ = ring;
    worker_ = worker;
    flows_ = ring != nullptr && flows;
  }
  bool on() const { return ring_ != nullptr; }
  bool flows() const { return flows_; }

  // A record to fill for a connection of `kind` that ends now (worker clock `now_ms`) after
  // starting at `start_ms` (same clock), or nullptr when the log is off or the ring is full
  // (counted by the ring). Fill it, then commit().
  AccessRecord* begin(AccessKind kind, AccessEnd end, uint32_t start_ms, uint32_t now_ms) {
    if (ring_ == nullptr) return nullptr;
    AccessRecord* r = ring_->reserve();
    if (r == nullptr) return nullptr;
    *r = AccessRecord{};
    r->kind = kind;
    r->end = end;
    r->worker = worker_;
    r->duration_ms = now_ms - start_ms;
    // The worker clock is monotonic (or a replay's packet time): the wall clock, read once per
    // record (vDSO, no system call), dates the end; the start is that minus the duration.
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    r->start_unix_ms = int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000 - r->duration_ms;
    return r;
  }
  void commit() { ring_->commit(); }

 private:
  AccessRing* ring_ = nullptr;
  uint16_t worker_ = 0;
  bool flows_ = false;
};

}  // namespace meshgate::dp
