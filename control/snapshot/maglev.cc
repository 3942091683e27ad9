#include "control/snapshot/maglev.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "dataplane/common/hash.h"

namespace meshgate::ctl {

using dp::kNoBackend;

bool is_prime(uint32_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (uint32_t d = 3; uint64_t(d) * d <= n; d += 2) {
    if (n % d == 0) return false;
  }
  return true;
}

uint32_t next_prime(uint32_t n) {
  while (!is_prime(n)) ++n;
  return n;
}

uint32_t lb_auto_table_size(size_t n_backends) {
  const uint64_t want = uint64_t(n_backends) * kMinSlotsPerBackend;
  if (want <= kDefaultLbTableSize) return kDefaultLbTableSize;
  return next_prime(uint32_t(std::min<uint64_t>(want, 0x7fffffffu)));
}

namespace {

// Scratch of the fill, kept per thread: a mesh snapshot fills thousands of small tables.
struct FillScratch {
  std::vector<uint32_t> order, pos, skip;
  std::vector<uint64_t> credit;
};

}  // namespace

std::vector<uint32_t> lb_build_table(std::span<const LbBackend> backends, uint32_t size) {
  std::vector<uint32_t> table(size);
  lb_fill_table(backends, size, table.data());
  return table;
}

void lb_fill_table(std::span<const LbBackend> backends, uint32_t size, uint32_t* t) {
  std::fill(t, t + size, kNoBackend);
  const size_t n = backends.size();
  if (n == 0 || size == 0) return;
  thread_local FillScratch sc;

  // Maglev §3.4: offset = h1(b) mod M, skip = h2(b) mod (M-1) + 1; permutation[j] =
  // (offset + j*skip) mod M. The hashes are over the backend's identity (address:port) so the
  // table depends only on the set of backends, not on the order or on the process.
  // Turns are taken in identity order, not input order, so that two control planes that list
  // the same backends differently still build the same table.
  auto& order = sc.order;
  order.resize(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (backends[a].address != backends[b].address) return backends[a].address < backends[b].address;
    return backends[a].port < backends[b].port;
  });
  // pos[i] is backend i's next candidate, (offset + j*skip) mod M for its j-th probe, kept
  // incrementally: one add and a conditional subtract per probe instead of a 64-bit division
  // (the build is dominated by probes: 4.6 per slot for 10 backends in 1009 slots, most near
  // the end of the fill, where a walk crosses long runs of slots other backends took).
  auto& pos = sc.pos;
  auto& skip = sc.skip;
  auto& credit = sc.credit;
  pos.resize(n);
  skip.resize(n);
  credit.assign(n, 0);
  uint32_t max_weight = 0;
  for (size_t i = 0; i < n; ++i) {
    const LbBackend& b = backends[order[i]];
    uint8_t id[18];
    std::memcpy(id, b.address.b, 16);
    id[16] = uint8_t(b.port >> 8);
    id[17] = uint8_t(b.port);
    pos[i] = uint32_t(hash64(id, sizeof id, 0xa5a5) % size);
    skip[i] = uint32_t(hash64(id, sizeof id, 0x5a5a) % (size - 1) + 1);
    max_weight = std::max(max_weight, b.weight);
  }
  if (max_weight == 0) return;

  // Weighted turns: every round each backend earns `weight` credit and takes one slot per
  // `max_weight` of credit, so slot counts are proportional to weights.
  uint32_t filled = 0;
  while (filled < size) {
    for (size_t i = 0; i < n && filled < size; ++i) {
      credit[i] += backends[order[i]].weight;
      if (credit[i] < max_weight) continue;
      uint32_t p = pos[i];
      const uint32_t s = skip[i];
      while (credit[i] >= max_weight && filled < size) {
        credit[i] -= max_weight;
        uint32_t c;
        do {
          c = p;
          p += s;  // p, s < size <= 2^31: no overflow
          if (p >= size) p -= size;
        } while (t[c] != kNoBackend);
        t[c] = order[i];
        ++filled;
      }
      pos[i] = p;
    }
  }
}

}  // namespace meshgate::ctl
