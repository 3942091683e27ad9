// Maglev table properties (Maglev, NSDI 2016, §3.4 and §5.3) of the control thread's build
// (control/snapshot/maglev.h), and the worker's flow hash (dataplane/lb/lb.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "control/snapshot/maglev.h"
#include "dataplane/lb/lb.h"

namespace meshgate::ctl {
namespace {

using dp::kNoBackend;
using dp::lb_flow_hash;
using dp::lb_flow_hash_v4;

std::vector<LbBackend> backends(size_t n, uint32_t weight = 1) {
  std::vector<LbBackend> v;
  for (size_t i = 0; i < n; ++i) {
    v.push_back({IpAddr::v4(0xc6336400 + uint32_t(i)), uint16_t(8000 + i % 7), weight});
  }
  return v;
}

std::vector<uint64_t> slot_counts(const std::vector<uint32_t>& t, size_t n) {
  std::vector<uint64_t> c(n, 0);
  for (uint32_t b : t) c.at(b)++;
  return c;
}

TEST(Maglev, table_sizes_are_prime_and_at_least_100_slots_per_backend) {
  EXPECT_EQ(lb_auto_table_size(3), kDefaultLbTableSize);
  EXPECT_TRUE(is_prime(kDefaultLbTableSize));
  const uint32_t big = lb_auto_table_size(1000);
  EXPECT_TRUE(is_prime(big));
  EXPECT_GE(big, 100000u);
}

TEST(Maglev, every_slot_is_filled_and_balance_is_within_one_percent_up_to_1000_backends) {
  for (size_t n : {1, 2, 3, 10, 100, 1000}) {
    const auto b = backends(n);
    const uint32_t m = lb_auto_table_size(n);
    const auto t = lb_build_table(b, m);
    const auto c = slot_counts(t, n);
    const double ideal = double(m) / double(n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_LE(std::abs(double(c[i]) - ideal) / ideal, 0.01) << "n=" << n << " backend " << i;
    }
  }
}

TEST(Maglev, weights_are_honoured_and_weight_zero_gets_no_slots) {
  auto b = backends(4);
  b[0].weight = 1;
  b[1].weight = 2;
  b[2].weight = 3;
  b[3].weight = 0;
  const auto t = lb_build_table(b, kDefaultLbTableSize);
  const auto c = slot_counts(t, 4);
  EXPECT_EQ(c[3], 0u);
  EXPECT_NEAR(double(c[0]) / kDefaultLbTableSize, 1.0 / 6, 0.01);
  EXPECT_NEAR(double(c[1]) / kDefaultLbTableSize, 2.0 / 6, 0.01);
  EXPECT_NEAR(double(c[2]) / kDefaultLbTableSize, 3.0 / 6, 0.01);
}

TEST(Maglev, all_weights_zero_gives_an_empty_table) {
  const auto t = lb_build_table(backends(3, 0), 251);
  EXPECT_TRUE(std::all_of(t.begin(), t.end(), [](uint32_t s) { return s == kNoBackend; }));
}

TEST(Maglev, table_does_not_depend_on_backend_order) {
  auto b = backends(50);
  const auto t1 = lb_build_table(b, kDefaultLbTableSize);
  std::vector<LbBackend> shuffled = b;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(3));
  const auto t2 = lb_build_table(shuffled, kDefaultLbTableSize);
  for (size_t s = 0; s < t1.size(); ++s) {
    ASSERT_EQ(b[t1[s]].address, shuffled[t2[s]].address);
    ASSERT_EQ(b[t1[s]].port, shuffled[t2[s]].port);
  }
}

TEST(Maglev, removing_one_of_n_backends_moves_about_one_nth_of_the_slots) {
  for (size_t n : {10, 100}) {
    auto b = backends(n);
    const uint32_t m = kDefaultLbTableSize;
    const auto before = lb_build_table(b, m);
    auto removed = b;
    removed.erase(removed.begin() + 3);
    const auto after = lb_build_table(removed, m);
    size_t moved = 0;
    for (uint32_t s = 0; s < m; ++s) {
      const LbBackend& x = b[before[s]];
      const LbBackend& y = removed[after[s]];
      if (!(x.address == y.address && x.port == y.port)) ++moved;
    }
    const double frac = double(moved) / m;
    RecordProperty("moved_fraction_n" + std::to_string(n), std::to_string(frac));
    std::printf("maglev disruption: n=%zu removed 1 -> %.4f of slots moved (ideal %.4f)\n", n, frac, 1.0 / n);
    // Slots of the removed backend must move (1/n); Maglev bounds the collateral churn.
    EXPECT_GE(frac, 1.0 / n * 0.99);
    EXPECT_LE(frac, 2.0 / n);
  }
}

// Maglev §3.4 as written: permutation[j] = (offset + j * skip) mod M with a division per probe,
// turns in address:port order, weighted credit. lb_build_table keeps the position incrementally
// instead; the tables must be the same slot for slot (gateways of different versions side by
// side, and the golden captures, depend on it).
std::vector<uint32_t> reference_table(const std::vector<LbBackend>& bs, uint32_t size) {
  std::vector<uint32_t> table(size, kNoBackend), order(bs.size());
  for (uint32_t i = 0; i < bs.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return bs[a].address != bs[b].address ? bs[a].address < bs[b].address : bs[a].port < bs[b].port;
  });
  std::vector<uint64_t> offset(bs.size()), skip(bs.size()), next(bs.size(), 0), credit(bs.size(), 0);
  uint32_t max_w = 0;
  for (size_t i = 0; i < bs.size(); ++i) {
    const LbBackend& b = bs[order[i]];
    uint8_t id[18];
    std::memcpy(id, b.address.b, 16);
    id[16] = uint8_t(b.port >> 8);
    id[17] = uint8_t(b.port);
    offset[i] = hash64(id, sizeof id, 0xa5a5) % size;
    skip[i] = hash64(id, sizeof id, 0x5a5a) % (size - 1) + 1;
    max_w = std::max(max_w, b.weight);
  }
  if (max_w == 0) return table;
  for (uint32_t filled = 0; filled < size;) {
    for (size_t i = 0; i < bs.size() && filled < size; ++i) {
      for (credit[i] += bs[order[i]].weight; credit[i] >= max_w && filled < size; credit[i] -= max_w) {
        uint64_t c;
        do c = (offset[i] + next[i]++ * skip[i]) % size;
        while (table[c] != kNoBackend);
        table[c] = order[i];
        ++filled;
      }
    }
  }
  return table;
}

TEST(Maglev, the_fill_gives_the_papers_table_slot_for_slot) {
  std::mt19937 rng(7);
  for (uint32_t size : {7u, 251u, 1009u, 2027u, 65537u}) {
    for (int r = 0; r < 20; ++r) {
      std::vector<LbBackend> bs(1 + rng() % std::min<uint32_t>(size, 40));
      for (auto& b : bs) {
        for (auto& byte : b.address.b) byte = uint8_t(rng());
        b.port = uint16_t(rng());
        b.weight = rng() % 4;
      }
      ASSERT_EQ(lb_build_table(bs, size), reference_table(bs, size)) << size << " slots";
    }
  }
}

// Few and many backends, equal and mixed weights, drained backends, and sizes from mesh
// services (1009 slots for 10 endpoints) to large static ones, against the paper's fill.
TEST(Maglev, the_fill_gives_the_papers_table_for_many_backends_and_sizes) {
  std::mt19937 rng(11);
  struct Case {
    uint32_t size;
    size_t n;
  };
  for (const Case c : {Case{1009, 10}, Case{1009, 1}, Case{1009, 2}, Case{1009, 1009},
                       Case{10007, 100}, Case{100003, 1000}, Case{65537, 3}, Case{13, 13}}) {
    for (int r = 0; r < 3; ++r) {
      std::vector<LbBackend> bs(c.n);
      for (auto& b : bs) {
        for (auto& byte : b.address.b) byte = uint8_t(rng());
        b.port = uint16_t(rng());
        b.weight = r == 0 ? 1 : rng() % 5;  // r > 0: mixed weights, some drained
      }
      ASSERT_EQ(lb_build_table(bs, c.size), reference_table(bs, c.size))
          << c.n << " backends, " << c.size << " slots, round " << r;
    }
  }
}

TEST(Maglev, fill_into_a_buffer_matches_the_built_table_and_overwrites_it) {
  const auto b = backends(10);
  std::vector<uint32_t> buf(1009, 12345);
  lb_fill_table(b, 1009, buf.data());
  EXPECT_EQ(buf, lb_build_table(b, 1009));
  auto drained = b;
  for (auto& x : drained) x.weight = 0;
  lb_fill_table(drained, 1009, buf.data());
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](uint32_t s) { return s == kNoBackend; }));
}

TEST(Maglev, flow_hash_is_stable_across_builds) {
  // A fixed vector pins the hash definition: two gateways (or a newer build) must agree.
  const uint32_t h = lb_flow_hash(IpAddr::v4(0xc0000201), IpAddr::v4(0xcb00710a), 0x3930, 0x5000, 6);
  // CRC32C (Castagnoli) of the 40-byte key with seed 0x6d5a6d5a, computed once and pinned.
  EXPECT_EQ(h, 0xcbfc0f11u);
  EXPECT_NE(h, lb_flow_hash(IpAddr::v4(0xc0000201), IpAddr::v4(0xcb00710a), 0x3931, 0x5000, 6));
}

TEST(Maglev, the_ipv4_flow_hash_from_wire_fields_is_the_flow_hash) {
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t src = rng(), dst = rng(), ports = rng();
    const uint8_t proto = uint8_t(rng());
    IpAddr s = IpAddr::v4(0), d = IpAddr::v4(0);
    std::memcpy(&s.b[12], &src, 4);
    std::memcpy(&d.b[12], &dst, 4);
    const uint16_t sport = uint16_t(ports), dport = uint16_t(ports >> 16);  // as in memory
    ASSERT_EQ(lb_flow_hash_v4(src, dst, ports, proto), lb_flow_hash(s, d, sport, dport, proto))
        << i;
  }
  // The pinned vector above, from the wire bytes 192.0.2.1:0x3930 -> 203.0.113.10:0x5000.
  const uint8_t wire[12] = {192, 0, 2, 1, 203, 0, 113, 10, 0x30, 0x39, 0x00, 0x50};
  uint32_t src, dst, ports;
  std::memcpy(&src, wire, 4);
  std::memcpy(&dst, wire + 4, 4);
  std::memcpy(&ports, wire + 8, 4);
  EXPECT_EQ(lb_flow_hash_v4(src, dst, ports, 6), 0xcbfc0f11u);
}

}  // namespace
}  // namespace meshgate::ctl
