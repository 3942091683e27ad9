// Istio's standard TCP metrics (istio_tcp_connections_opened_total, _closed_total,
// istio_tcp_sent_bytes_total, istio_tcp_received_bytes_total; docs/MESH.md, "Istio metrics"),
// counted by one worker for its proxied and HBONE connections.
//
// A connection's labels are a small key of ids, never strings: the source and destination
// workloads and the destination service as label-set ids the control thread interned
// (control/snapshot/istio_labels.h; Snapshot::backend_istio / service_istio carry them, stable
// for the process), the peer principal of a terminated HBONE connection as a slot of this
// worker's principal table, the reporter and the security policy. The key is looked up once,
// when the connection opens; its row index then rides with the connection and bytes are added
// to the row as they move. Rows are never reused, so counters keep their labels across snapshot
// swaps. Past kIstioRows keys (or kIstioPrincipals principals) new connections count on an
// overflow row whose labels are all "unknown" (one per reporter and policy), and `overflow`
// counts them.
//
// Threads: the owning worker writes; any thread reads rows below rows_used() (acquire) with
// counter_read, and principal slots below principals_used().
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "dataplane/worker/counters.h"

namespace meshgate::dp {

enum class IstioReporter : uint8_t { kSource = 0, kDestination = 1 };
enum class IstioPolicy : uint8_t { kUnknown = 0, kMutualTls = 1 };

// Distinct label sets per worker: a gateway's peers are services' workloads, so a few hundred
// source x destination pairs cover a large mesh; the rest is counted, not dropped.
inline constexpr uint32_t kIstioRows = 1024;
// Distinct HBONE peer principals per worker (a SPIFFE id of up to kIstioPrincipalBytes).
inline constexpr uint32_t kIstioPrincipals = 64;
inline constexpr uint32_t kIstioPrincipalBytes = 255;
// Rows 0..3: the overflow rows (reporter * 2 + policy), all other labels unknown.
inline constexpr uint32_t kIstioOverflowRows = 4;
// A connection that counts nowhere (not yet opened).
inline constexpr uint32_t kNoIstioRow = UINT32_MAX;

struct IstioKey {
  uint32_t source_workload = 0;       // label-set id (0: unknown)
  uint32_t destination_workload = 0;  // label-set id (0: unknown)
  uint32_t service = 0;               // service label-set id (0: unknown)
  uint16_t source_principal = 0;      // 1 + principal slot of this worker (0: none)
  IstioReporter reporter = IstioReporter::kSource;
  IstioPolicy policy = IstioPolicy::kUnknown;
  friend bool operator==(const IstioKey&, const IstioKey&) = default;
};

struct IstioRow {
  IstioKey key;
  uint64_t opened = 0;
  uint64_t closed = 0;
  uint64_t sent_bytes = 0;      // server -> client (ztunnel: upstream to downstream)
  uint64_t received_bytes = 0;  // client -> server (ztunnel: downstream to upstream)
};

class IstioTable {
 public:
  IstioTable() {
    for (uint32_t i = 0; i < kIstioOverflowRows; ++i) {
      rows_[i].key.reporter = IstioReporter(i >> 1);
      rows_[i].key.policy = IstioPolicy(i & 1);
    }
    used_.store(kIstioOverflowRows, std::memory_order_relaxed);
  }
  IstioTable(const IstioTable&) = delete;
  IstioTable& operator=(const IstioTable&) = delete;

  // Worker, once per connection: the row of `k` (added when new), opened counted.
  uint32_t open(const IstioKey& k) {
    const uint32_t r = row_of(k);
    counter_add(rows_[r].opened, 1);
    return r;
  }
  void close(uint32_t row) {
    if (row != kNoIstioRow) counter_add(rows_[row].closed, 1);
  }
  void sent(uint32_t row, uint64_t n) {
    if (row != kNoIstioRow && n != 0) counter_add(rows_[row].sent_bytes, n);
  }
  void received(uint32_t row, uint64_t n) {
    if (row != kNoIstioRow && n != 0) counter_add(rows_[row].received_bytes, n);
  }

  // Worker, once per terminated HBONE connection: 1 + the slot of `principal` (copied into the
  // table when new), or 0 when it is empty, too long or the table is full (counted).
  uint16_t principal(std::string_view principal) {
    if (principal.empty()) return 0;
    const uint32_t n = principals_used_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i) {
      if (principal_len_[i] == principal.size() &&
          std::memcmp(principals_[i], principal.data(), principal.size()) == 0) {
        return uint16_t(i + 1);
      }
    }
    if (principal.size() > kIstioPrincipalBytes || n == kIstioPrincipals) {
      counter_add(overflow_, 1);
      return 0;
    }
    std::memcpy(principals_[n], principal.data(), principal.size());
    principal_len_[n] = uint8_t(principal.size());
    principals_used_.store(n + 1, std::memory_order_release);
    return uint16_t(n + 1);
  }

  // Any thread.
  uint32_t rows_used() const { return used_.load(std::memory_order_acquire); }
  const IstioRow& row(uint32_t i) const { return rows_[i]; }
  uint32_t principals_used() const { return principals_used_.load(std::memory_order_acquire); }
  std::string_view principal_name(uint16_t id) const {
    return id == 0 ? std::string_view() : std::string_view(principals_[id - 1], principal_len_[id - 1]);
  }
  // Connections counted on an overflow row, and principals not kept.
  uint64_t overflow() const { return counter_read(overflow_); }

 private:
  // Rows are found by a linear scan from a hash over an index of kIndexSlots (twice the rows):
  // once per connection, never per packet.
  static constexpr uint32_t kIndexSlots = 2 * kIstioRows;
  static uint32_t hash(const IstioKey& k) {
    uint64_t h = (uint64_t(k.source_workload) << 32 | k.destination_workload) * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t(k.service) << 24 | uint64_t(k.source_principal) << 8 |
          uint64_t(k.reporter) << 1 | uint64_t(k.policy)) * 0xc2b2ae3d27d4eb4full;
    return uint32_t(h >> 40);
  }
  uint32_t row_of(const IstioKey& k) {
    uint32_t s = hash(k) & (kIndexSlots - 1);
    for (;;) {
      const uint16_t r = index_[s];
      if (r == 0) break;
      if (rows_[r].key == k) return r;
      s = (s + 1) & (kIndexSlots - 1);
    }
    const uint32_t n = used_.load(std::memory_order_relaxed);
    if (n == kIstioRows) {
      counter_add(overflow_, 1);
      return uint32_t(k.reporter) * 2 + uint32_t(k.policy);
    }
    rows_[n].key = k;
    index_[s] = uint16_t(n);
    used_.store(n + 1, std::memory_order_release);  // the key is written before readers see it
    return n;
  }

  IstioRow rows_[kIstioRows];
  uint16_t index_[kIndexSlots] = {};  // row numbers (0: empty; row 0 is never indexed)
  std::atomic<uint32_t> used_{0};
  uint64_t overflow_ = 0;
  char principals_[kIstioPrincipals][kIstioPrincipalBytes];
  uint8_t principal_len_[kIstioPrincipals] = {};
  std::atomic<uint32_t> principals_used_{0};
};

}  // namespace meshgate::dp
