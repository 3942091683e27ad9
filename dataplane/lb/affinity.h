// Session affinity (session_affinity = "client_ip"): the backend each client address of a
// service was given, shared by every worker so a client's connections agree whichever worker
// RSS hands them to. Consulted only when a flow starts, never per packet of a flow.
//
// A fixed array of buckets of kWays entries, each bucket behind its own spinlock: two workers
// wait for each other only when they start flows whose (service, client) hash to one bucket at
// once, for the few dozen cycles of a bucket scan; there is no global lock and no allocation
// after creation. A full bucket (every entry live) is counted and the flow goes to the Maglev
// choice without an entry. The backend is remembered by address and port, not by index, so an
// entry outlives snapshots: a backend being added does not move a client within its timeout,
// and an entry whose backend left the service, is unhealthy or drained (weight 0) is replaced
// by the Maglev choice. docs/DATAPLANE.md "Session affinity".
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "dataplane/common/compiler.h"
#include "dataplane/common/hash.h"
#include "dataplane/common/net_types.h"
#include "dataplane/snapshot/snapshot.h"

namespace meshgate::dp {

// The table's size for a gateway tracking `max_flows` flows: a quarter of them (clients
// usually open several connections each), at least 4096, at most 2^22 entries. 64 bytes of
// memory per entry: 16 MiB for the default [conntrack] max_flows.
inline uint32_t affinity_entries_for(uint32_t max_flows) {
  return std::min<uint32_t>(std::max<uint32_t>(max_flows / 4, 4096), 1u << 22);
}

class AffinityTable {
 public:
  static constexpr uint32_t kWays = 4;

  // Room for at least `entries` (rounded up to whole buckets, a power of two). Control thread.
  explicit AffinityTable(uint32_t entries) {
    uint32_t n = 1;
    while (uint64_t(n) * kWays < entries) n <<= 1;
    mask_ = n - 1;
    buckets_ = std::make_unique<Bucket[]>(n);
  }
  uint32_t capacity() const { return (mask_ + 1) * kWays; }

  // The backend of `svc` for a new flow of `client` at `now_ms`: the one remembered for the
  // client when it is unexpired and still eligible, else `pick` (Maglev's choice), remembered.
  // Either way the entry's timeout starts again. Any worker.
  const SnapBackend* choose(const Snapshot& s, const SnapService& svc, const IpAddr& client,
                            const SnapBackend* pick, uint32_t now_ms) {
    const Key k = key_of(s.affinity_owner(svc), client);
    Bucket& b = buckets_[crc32c(&k, sizeof k, 0x5a17) & mask_];
    const uint32_t expiry = now_ms + svc.affinity_timeout_ms;
    lock(b);
    Entry* free_slot = nullptr;
    for (Entry& e : b.e) {
      const bool live = e.used && int32_t(e.expiry_ms - now_ms) > 0;
      if (live && e.key == k) {
        const SnapBackend* be = eligible(s, svc, e);
        if (be) {
          e.expiry_ms = expiry;
          unlock(b);
          return be;
        }
        free_slot = &e;  // its backend is gone: the entry takes the new choice
        break;
      }
      if (!live && !free_slot) free_slot = &e;
    }
    if (free_slot) {
      if (!free_slot->used) entries_.fetch_add(1, std::memory_order_relaxed);
      free_slot->key = k;
      free_slot->backend = pick->address;
      free_slot->backend_port_be = pick->port_be;
      free_slot->hint = uint16_t(pick - &s.backends[svc.first_backend]);
      free_slot->expiry_ms = expiry;
      free_slot->used = 1;
      unlock(b);
    } else {
      unlock(b);
      full_.fetch_add(1, std::memory_order_relaxed);
    }
    return pick;
  }

  // Slots ever filled (expired ones are reused in place, not emptied), and choices that found
  // their bucket full. Both change rarely (a slot's first use, a full bucket), so shared
  // counters cost no steady cache-line traffic. Any thread (relaxed: for metrics).
  uint64_t entries() const { return entries_.load(std::memory_order_relaxed); }
  uint64_t full() const { return full_.load(std::memory_order_relaxed); }

 private:
  // The service by its VIP's address id (stable for the process), port and protocol: an entry
  // keeps meaning the same service across snapshots. Padding-free (hashed as bytes).
  struct Key {
    IpAddr client;
    uint32_t vip_id = 0;
    uint16_t port_be = 0;
    uint8_t proto = 0;
    uint8_t pad = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };
  static_assert(sizeof(Key) == 24, "Key must be padding-free");
  struct Entry {
    Key key;
    IpAddr backend;
    uint16_t backend_port_be = 0;
    uint16_t hint = 0;  // index of the backend in its service when remembered
    uint32_t expiry_ms = 0;
    uint32_t used = 0;
  };
  struct alignas(64) Bucket {
    std::atomic<uint32_t> lock{0};
    Entry e[kWays];
  };

  static Key key_of(const SnapService& svc, const IpAddr& client) {
    Key k;
    k.client = client;
    k.vip_id = svc.vip_id;
    k.port_be = svc.port_be;
    k.proto = svc.proto;
    return k;
  }
  // The entry's backend in `svc` of this snapshot, if it may take new flows (weight > 0: not
  // drained, not unhealthy), else nullptr.
  static const SnapBackend* eligible(const Snapshot& s, const SnapService& svc, const Entry& e) {
    const SnapBackend* first = &s.backends[svc.first_backend];
    auto same = [&](const SnapBackend& b) {
      return b.address == e.backend && b.port_be == e.backend_port_be;
    };
    const SnapBackend* be = nullptr;
    if (e.hint < svc.n_backends && same(first[e.hint])) {
      be = &first[e.hint];
    } else {
      for (uint32_t i = 0; i < svc.n_backends && !be; ++i) {
        if (same(first[i])) be = &first[i];
      }
    }
    return be && be->weight > 0 ? be : nullptr;
  }
  static void lock(Bucket& b) {
    while (b.lock.exchange(1, std::memory_order_acquire) != 0) {
      while (b.lock.load(std::memory_order_relaxed) != 0) _mm_pause();
    }
  }
  static void unlock(Bucket& b) { b.lock.store(0, std::memory_order_release); }

  uint32_t mask_ = 0;
  std::unique_ptr<Bucket[]> buckets_;
  alignas(64) std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> full_{0};
};

}  // namespace meshgate::dp
