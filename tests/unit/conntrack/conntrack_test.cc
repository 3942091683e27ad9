// Flow table: capacity, both-direction lookup, removal, expiry by the sweep, eviction of
// not-yet-established flows when full, and the TCP state machine.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_eal.h>

#include <cstring>
#include <map>
#include <random>
#include <string>

#include "dataplane/conntrack/conntrack.h"
#include "dataplane/packet/wire.h"
#include "tests/support/dp_harness.h"

namespace meshgate::dp {
namespace {

constexpr uint32_t kVipId = 1;
constexpr uint32_t kLocalId = 2;
constexpr uint32_t kVip6Id = 3;

class FlowTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::init_eal_once();
    addrs_[kVipId] = IpAddr::v4(0xcb00710a);  // 203.0.113.10
    addrs_[kLocalId] = IpAddr::v4(0xc6336402);  // 198.51.100.2
    addrs_[kVip6Id] = *IpAddr::parse("2001:db8:100::10");
    table_addrs_.addrs = addrs_.data();
  }
  void TearDown() override { table_.destroy(); }
  bool init(uint32_t n, ConntrackTimeouts to = {}) { return table_.init(n, 0, to, &table_addrs_); }

  Tuple client(uint32_t i, uint8_t proto = kProtoTcp) const {
    return Tuple{IpAddr::v4(0xc0000200u + (i >> 16)), addrs_[kVipId], htons(uint16_t(i)),
                 htons(80), proto};
  }
  static FlowTarget dnat(Mode mode = Mode::kDnat) {
    FlowTarget to;
    to.backend = IpAddr::v4(0xc633640b);
    to.backend_port = htons(8080);
    to.vip_id = kVipId;
    to.stat_id = 1;
    to.mode = mode;
    return to;
  }
  // The same toward an IPv6 backend of the IPv6 VIP.
  static FlowTarget dnat6() {
    FlowTarget to = dnat();
    to.backend = *IpAddr::parse("2001:db8:1::11");
    to.vip_id = kVip6Id;
    return to;
  }
  // A flow whose reply was seen: assured, never evicted for room (the capacity tests).
  Flow* insert_assured(const Tuple& t, const FlowTarget& to, uint32_t now = 0) {
    Flow* f = table_.insert(t, to, now);
    if (f) table_.touch(f, FlowDir::kReply, kTcpAck, now);
    return f;
  }
  Flow* find(const Tuple& t, uint32_t now, FlowDir* dir = nullptr) {
    FlowDir d;
    return table_.lookup(t, FlowTable::hash(t), now, dir ? dir : &d);
  }

  std::vector<IpAddr> addrs_ = std::vector<IpAddr>(16);
  AddrTable table_addrs_;
  FlowTable table_;
};

// An IPv4 flow is one 32-byte slot with its addresses inline; an IPv6 flow is a whole line:
// the header in the even slot, the client and backend addresses in the odd one, which dumps and
// the sweep never take for a flow.
TEST_F(FlowTableTest, an_ipv4_flow_is_half_a_cache_line_and_an_ipv6_flow_a_whole_one) {
  EXPECT_EQ(sizeof(Flow), 32u);
  ASSERT_TRUE(init(64));
  Flow* a = table_.insert(client(1), dnat(), 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(table_.index_of(a), 0u);
  EXPECT_FALSE(a->v6());
  EXPECT_EQ(a->client(), client(1).src);
  EXPECT_EQ(a->backend(), dnat().backend);
  EXPECT_EQ(table_.vip(*a), addrs_[kVipId]);
  const Tuple t6{*IpAddr::parse("2001:db8:2::7"), addrs_[kVip6Id], htons(4000), htons(443),
                 kProtoTcp};
  const FlowTarget to6 = dnat6();
  Flow* b = table_.insert(t6, to6, 5);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->v6());
  EXPECT_EQ(table_.index_of(b), 2u) << "a whole line: slot 1 stays for the next IPv4 flow";
  EXPECT_EQ(b->client(), t6.src);
  EXPECT_EQ(b->backend(), to6.backend);
  EXPECT_EQ(table_.vip(*b), addrs_[kVip6Id]);
  EXPECT_EQ(table_.created_ms(*b), 5u);
  EXPECT_EQ(table_.at(2), b);
  EXPECT_EQ(table_.at(3), nullptr) << "the second half of an IPv6 flow is not a flow";
  FlowDir dir;
  EXPECT_EQ(find(t6, 0, &dir), b);
  EXPECT_EQ(find(table_.reply_tuple(*b), 0, &dir), b);
  EXPECT_EQ(dir, FlowDir::kReply);
  Flow* c = table_.insert(client(2), dnat(), 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(table_.index_of(c), 1u);
  EXPECT_EQ(table_.active(), 3u);
  // Removing the IPv6 flow frees its line whole.
  table_.remove(b);
  EXPECT_EQ(table_.at(2), nullptr);
  EXPECT_EQ(table_.at(3), nullptr);
  Flow* d = table_.insert(t6, to6, 0);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(table_.index_of(d), 2u);
}

// The tests' EAL runs without hugepages: the table is then its own anonymous mapping, on a
// 2 MiB boundary and a whole number of 2 MiB pages, advised for transparent huge pages (the
// "hg" flag), so that the kernel can back a random-access index with huge pages.
TEST_F(FlowTableTest, without_hugepages_the_table_is_a_2mib_aligned_mapping_advised_for_thp) {
  ASSERT_FALSE(rte_eal_has_hugepages());
  ASSERT_TRUE(init(1u << 16));
  const TableMemory& m = table_.memory();
  ASSERT_NE(m.p, nullptr);
  EXPECT_EQ(m.bytes, FlowTable::memory_bytes(1u << 16));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.p) % (2u << 20), 0u);
  EXPECT_EQ(m.mapped % (2u << 20), 0u);
  EXPECT_GE(m.mapped, m.bytes);
  const std::string block = smaps_block(m.p);
  ASSERT_FALSE(block.empty());
  const size_t flags = block.find("VmFlags:");
  ASSERT_NE(flags, std::string::npos);
  EXPECT_NE(block.find(" hg", flags), std::string::npos) << block;
  // The whole table was written at init (faulted in on this thread, not on the worker's first
  // packets): every page is resident.
  const size_t rss = block.find("\nRss:");
  ASSERT_NE(rss, std::string::npos);
  EXPECT_GE(std::stoull(block.substr(rss + 5)) << 10, m.mapped);
  // And it works: the pool fills.
  for (uint32_t i = 0; i < (1u << 16); ++i) ASSERT_NE(table_.insert(client(i), dnat(), 1000), nullptr) << i;
  EXPECT_EQ(table_.active(), 1u << 16);
  table_.destroy();
  EXPECT_EQ(table_.memory().p, nullptr);
  EXPECT_TRUE(smaps_block(m.p).empty());  // unmapped
}

// Every slot is usable: IPv4 flows take one, flows with an IPv6 address two (a third of them
// here), and inserts succeed until the slots run out.
TEST_F(FlowTableTest, every_insert_succeeds_until_the_pool_is_full_and_all_flows_are_found) {
  constexpr uint32_t kSlots = 65536;
  ASSERT_TRUE(init(kSlots));
  std::mt19937 rng(42);
  std::vector<Tuple> tuples;
  uint32_t used = 0;
  for (uint32_t i = 0; used < kSlots; ++i) {
    Tuple t = client(0);
    t.src = IpAddr::v4(0xc0000000u | (rng() & 0xffffff));
    const bool v6 = i % 3 == 0 && used + 2 <= kSlots;
    if (v6) {
      for (auto& b : t.src.b) b = uint8_t(rng());
      t.src.b[0] = 0x20;
    }
    t.sport = uint16_t(rng());
    if (find(t, 0)) continue;  // duplicate tuple
    ASSERT_NE(insert_assured(t, dnat()), nullptr) << "insert " << i << " failed";
    tuples.push_back(t);
    used += v6 ? 2 : 1;
  }
  EXPECT_EQ(table_.insert(client(0), dnat(), 0), nullptr) << "every slot is taken";
  EXPECT_EQ(table_.stats().insert_failed, 1u);
  for (const Tuple& t : tuples) {
    FlowDir dir;
    Flow* f = find(t, 0, &dir);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(dir, FlowDir::kOriginal);
    EXPECT_EQ(find(table_.reply_tuple(*f), 0, &dir), f);
    EXPECT_EQ(dir, FlowDir::kReply);
  }
  EXPECT_EQ(table_.active(), tuples.size());
}

// A key goes to its first bucket while that bucket is at most half full, so that a lookup in
// a table below half its capacity reads one bucket (a key in the second bucket costs a
// second, dependent cache miss); past that the less loaded bucket takes it, and an all-IPv4
// table still fills to the last slot.
TEST_F(FlowTableTest, keys_stay_in_their_first_bucket_until_it_is_half_full_and_the_table_fills) {
  constexpr uint32_t kSlots = 65536;
  ASSERT_TRUE(init(kSlots));
  std::mt19937 rng(7);
  uint32_t inserted = 0;
  auto insert_until = [&](uint32_t n) {
    while (inserted < n) {
      Tuple t = client(0);
      t.src = IpAddr::v4(0xc0000000u | (rng() & 0xffffff));
      t.sport = uint16_t(rng());
      if (find(t, 0)) continue;  // duplicate tuple
      ASSERT_NE(insert_assured(t, dnat()), nullptr) << "insert " << inserted << " failed";
      ++inserted;
    }
  };
  // A tenth of the capacity, as a gateway sized for its peak mostly runs (the benchmark's
  // 100k flows in a 1M table): two references per flow, about one per three buckets.
  insert_until(kSlots / 10);
  FlowTable::IndexOccupancy o = table_.index_occupancy();
  EXPECT_EQ(o.refs, 2u * inserted);
  // Two-choice placement alone puts about a fifth of them in the second bucket here.
  EXPECT_GE(double(o.in_first), 0.999 * double(o.refs));
  insert_until(kSlots / 2);
  o = table_.index_occupancy();
  EXPECT_GE(double(o.in_first), 0.95 * double(o.refs));
  insert_until(kSlots);
  EXPECT_EQ(table_.insert(client(0), dnat(), 0), nullptr) << "every slot is taken";
  EXPECT_EQ(table_.stats().insert_failed, 1u);
  o = table_.index_occupancy();
  EXPECT_EQ(o.refs, 2u * kSlots);
  EXPECT_GT(o.in_first, o.refs / 2);
}

TEST_F(FlowTableTest, fullnat_reply_key_uses_the_local_address_and_dsr_has_none) {
  ASSERT_TRUE(init(1024));
  FlowTarget fn = dnat(Mode::kFullnat);
  fn.local_id = kLocalId;
  fn.local_port = htons(40001);
  Flow* f = table_.insert(client(1), fn, 0);
  ASSERT_NE(f, nullptr);
  const Tuple reply{fn.backend, addrs_[kLocalId], htons(8080), htons(40001), kProtoTcp};
  FlowDir dir;
  EXPECT_EQ(find(reply, 0, &dir), f);
  EXPECT_EQ(dir, FlowDir::kReply);
  EXPECT_TRUE(table_.reply_in_use(reply, FlowTable::hash(reply)));
  // A DSR flow has no reply reference.
  Flow* d = table_.insert(client(2), dnat(Mode::kDsrIpip), 0);
  ASSERT_NE(d, nullptr);
  const Tuple dsr_reply{fn.backend, client(2).src, htons(8080), client(2).sport, kProtoTcp};
  EXPECT_EQ(find(dsr_reply, 0), nullptr);
  table_.remove(f);
  EXPECT_FALSE(table_.reply_in_use(reply, FlowTable::hash(reply)));
}

TEST_F(FlowTableTest, removed_flows_are_gone_in_both_directions_and_their_slots_reused) {
  ASSERT_TRUE(init(1024));
  Flow* f = table_.insert(client(1), dnat(), 0);
  ASSERT_NE(f, nullptr);
  const Tuple reply = table_.reply_tuple(*f);
  table_.remove(f);
  EXPECT_EQ(find(client(1), 0), nullptr);
  EXPECT_EQ(find(reply, 0), nullptr);
  EXPECT_EQ(table_.active(), 0u);
  for (uint32_t i = 0; i < 1024; ++i) ASSERT_NE(table_.insert(client(100 + i), dnat(), 0), nullptr);
}

TEST_F(FlowTableTest, lookup_does_not_return_an_expired_flow_and_counts_it) {
  ConntrackTimeouts to;
  to.udp_ms = 5000;
  ASSERT_TRUE(init(1024, to));
  ASSERT_NE(table_.insert(client(1, kProtoUdp), dnat(), 1000), nullptr);
  EXPECT_NE(find(client(1, kProtoUdp), 5999), nullptr);
  EXPECT_EQ(find(client(1, kProtoUdp), 6000), nullptr);
  EXPECT_EQ(table_.stats().expired, 1u);
  EXPECT_EQ(table_.active(), 0u);
}

TEST_F(FlowTableTest, peek_finds_what_lookup_finds_and_leaves_an_expired_flow_to_lookup) {
  ConntrackTimeouts to;
  to.udp_ms = 5000;
  ASSERT_TRUE(init(1024, to));
  Flow* f = table_.insert(client(1, kProtoUdp), dnat(), 1000);
  ASSERT_NE(f, nullptr);
  const Tuple reply = table_.reply_tuple(*f);
  for (const Tuple& t : {client(1, kProtoUdp), reply}) {
    const uint32_t h = FlowTable::hash(t);
    FlowDir pd, ld;
    EXPECT_EQ(table_.peek(t, h, table_.buckets_of(h), 5999, &pd), f);
    EXPECT_EQ(table_.lookup(t, h, 5999, &ld), f);
    EXPECT_EQ(pd, ld);
  }
  const Tuple other = client(2, kProtoUdp);
  FlowDir d;
  EXPECT_EQ(table_.peek(other, FlowTable::hash(other),
                        table_.buckets_of(FlowTable::hash(other)), 5999, &d), nullptr);
  const uint32_t h = FlowTable::hash(client(1, kProtoUdp));
  EXPECT_EQ(table_.peek(client(1, kProtoUdp), h, table_.buckets_of(h), 6000, &d), nullptr);
  EXPECT_EQ(table_.stats().expired, 0u);
  EXPECT_EQ(table_.active(), 1u);
  EXPECT_EQ(find(client(1, kProtoUdp), 6000), nullptr);
  EXPECT_EQ(table_.stats().expired, 1u);
  EXPECT_EQ(table_.active(), 0u);
}

// peek_v4 takes the wire fields of an IPv4 packet and must find what peek finds for the same
// tuple: flows of every mode in both directions, near misses (one field off) and strangers.
// The table nearly full, so that some keys sit in their second bucket; each probe with no
// hint, and with the hint prefetch_flows_or_second gives (the first signature match).
// hash_of (what insert links and remove unlinks) is the hash of the tuple each direction's
// packets carry, for every mode and family.
TEST_F(FlowTableTest, hash_of_a_stored_flow_is_the_hash_of_its_tuples) {
  ASSERT_TRUE(init(1024));
  std::mt19937 rng(5);
  int checked = 0;
  for (uint32_t i = 0; i < 400; ++i) {
    const Mode mode = Mode(i % 4);
    const bool v6 = i % 5 == 0;
    FlowTarget to = v6 ? dnat6() : dnat(mode);
    to.mode = mode;
    to.backend_port = uint16_t(rng());
    if (!v6) to.backend = IpAddr::v4(0xc6336400 | (rng() & 0xff));
    if (mode == Mode::kFullnat) {
      to.local_id = v6 ? kVip6Id : kLocalId;
      to.local_port = uint16_t(rng());
    }
    const IpAddr src = v6 ? *IpAddr::parse("2001:db8:7::" + std::to_string(i + 1))
                          : IpAddr::v4(0xc0000000 | (rng() & 0xffff));
    const Tuple t{src, addrs_[v6 ? kVip6Id : kVipId], uint16_t(rng()), uint16_t(rng()),
                  i % 3 ? kProtoTcp : kProtoUdp};
    Flow* f = table_.insert(t, to, 0);
    ASSERT_NE(f, nullptr) << i;
    EXPECT_EQ(table_.hash_of(*f, FlowDir::kOriginal), FlowTable::hash(t)) << i;
    if (!is_dsr(mode)) {
      EXPECT_EQ(table_.hash_of(*f, FlowDir::kReply), FlowTable::hash(table_.reply_tuple(*f))) << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 400);
}

TEST_F(FlowTableTest, peek_v4_finds_what_peek_finds_from_the_wire_fields) {
  ASSERT_TRUE(init(1024));
  std::mt19937 rng(3);
  std::vector<Tuple> probes;
  for (uint32_t i = 0; i < 1000; ++i) {
    const Mode mode = i % 4 == 0 ? Mode::kFullnat : i % 4 == 1 ? Mode::kDsrIpip : Mode::kDnat;
    FlowTarget to = dnat(mode);
    to.backend = IpAddr::v4(0xc6336400 | (rng() & 0xff));
    to.backend_port = uint16_t(rng());
    if (mode == Mode::kFullnat) {
      to.local_id = kLocalId;
      to.local_port = uint16_t(rng());
    }
    const Tuple t{IpAddr::v4(0xc0000000 | (rng() & 0xffff)), addrs_[kVipId], uint16_t(rng()),
                  uint16_t(rng()), i % 3 ? kProtoTcp : kProtoUdp};
    Flow* f = table_.insert(t, to, 0);
    ASSERT_NE(f, nullptr);
    probes.push_back(t);
    if (mode != Mode::kDsrIpip) probes.push_back(table_.reply_tuple(*f));
  }
  for (size_t n = probes.size(), k = 0; k < n; ++k) {  // near misses
    Tuple t = probes[k];
    switch (rng() % 5) {
      case 0: t.src.b[15] ^= 1; break;
      case 1: t.dst.b[12] ^= 0x80; break;
      case 2: t.sport ^= 0x100; break;
      case 3: t.dport ^= 1; break;
      default: t.proto = t.proto == kProtoTcp ? kProtoUdp : kProtoTcp; break;
    }
    probes.push_back(t);
  }
  int found = 0, hinted = 0;
  for (const Tuple& t : probes) {
    uint64_t addrs;  // source, destination: as loaded from the wire
    std::memcpy(&addrs, t.src.v4_ptr(), 4);
    std::memcpy(reinterpret_cast<uint8_t*>(&addrs) + 4, t.dst.v4_ptr(), 4);
    const uint32_t ports = uint32_t(t.sport) | uint32_t(t.dport) << 16;  // as loaded from the wire
    const uint32_t h = FlowTable::hash(t);
    FlowDir d1 = FlowDir::kOriginal, d2 = FlowDir::kReply, d3 = FlowDir::kReply;
    Flow* a = table_.peek(t, h, table_.buckets_of(h), 1, &d1);
    const uint32_t b0 = table_.first_bucket(h);
    Flow* b = table_.peek_v4(addrs, ports, t.proto, h, b0, FlowTable::kEmpty, 1, &d2);
    const uint32_t hint = table_.prefetch_flows_or_second(h, b0);
    hinted += hint != FlowTable::kEmpty;
    Flow* c = table_.peek_v4(addrs, ports, t.proto, h, b0, hint, 1, &d3);
    ASSERT_EQ(a, b);
    ASSERT_EQ(a, c);
    if (a) {
      EXPECT_EQ(d1, d2);
      EXPECT_EQ(d1, d3);
      ++found;
    }
  }
  EXPECT_GE(found, 1750);  // every inserted key (1000 originals, 750 replies), few near misses
  EXPECT_GE(hinted, 1400);  // keys found in their first bucket, and near misses of them
  const FlowTable::IndexOccupancy o = table_.index_occupancy();
  EXPECT_LT(o.in_first, o.refs) << "some keys must sit in their second bucket";
}

TEST_F(FlowTableTest, the_sweep_reclaims_idle_flows_without_lookups_and_keeps_refreshed_ones) {
  ConntrackTimeouts to;
  to.udp_ms = 10'000;
  ASSERT_TRUE(init(4096, to));
  table_.advance(0);
  for (uint32_t i = 0; i < 3000; ++i) ASSERT_NE(table_.insert(client(i, kProtoUdp), dnat(), 0), nullptr);
  // Keep every tenth flow alive by touching it at 8 s.
  for (uint32_t i = 0; i < 3000; i += 10) table_.touch(find(client(i, kProtoUdp), 8000), FlowDir::kOriginal, 0, 8000);
  uint32_t reclaimed = 0;
  for (uint32_t t = 0; t <= 12'000; t += 100) reclaimed += table_.advance(t);
  EXPECT_EQ(reclaimed, 2700u);
  EXPECT_EQ(table_.active(), 300u);
  for (uint32_t t = 12'000; t <= 20'000; t += 100) reclaimed += table_.advance(t);
  EXPECT_EQ(table_.active(), 0u);
  EXPECT_EQ(table_.stats().expired, 3000u);
}

TEST_F(FlowTableTest, flows_with_hour_long_timeouts_expire_on_time) {
  ConntrackTimeouts to;
  to.tcp_established_ms = 7'200'000;  // 2 h
  ASSERT_TRUE(init(64, to));
  table_.advance(0);
  Flow* f = insert_assured(client(1), dnat());  // mid-stream, then a reply: established
  ASSERT_EQ(f->state, TcpState::kEstablished);
  for (uint32_t t = 0; t < 7'190'000; t += 10'000) ASSERT_EQ(table_.advance(t), 0u) << t;
  uint32_t reclaimed = 0;
  for (uint32_t t = 7'190'000; t <= 7'210'000; t += 500) reclaimed += table_.advance(t);
  EXPECT_EQ(reclaimed, 1u);
}

// The sweep covers the table once per period, in proportion to the time that passes: an
// expired flow is reclaimed within a period of its expiry, never before it, and the work per
// millisecond is bounded (at most kSweepPerMs entries: a longer period for big tables).
TEST_F(FlowTableTest, the_sweep_reclaims_each_flow_within_a_period_of_its_expiry_and_never_early) {
  ConntrackTimeouts to;
  to.udp_ms = 5'000;
  ASSERT_TRUE(init(4096, to));
  const uint32_t period = table_.sweep_period_ms();
  EXPECT_EQ(period, FlowTable::kSweepMinPeriodMs);
  table_.advance(0);
  // Flow i is created at i ms: due at 5000 + i.
  for (uint32_t i = 0; i < 2000; ++i) {
    ASSERT_NE(table_.insert(client(i, kProtoUdp), dnat(), i), nullptr);
    table_.advance(i);
  }
  EXPECT_EQ(table_.stats().expired, 0u);
  for (uint32_t t = 2000; t <= 5000 + 2000 + period; ++t) {
    const uint64_t before = table_.stats().expired;
    table_.advance(t);
    // Never early: every flow due after t is still there.
    for (uint32_t i = t >= 5000 ? t - 4999 : 0; i < 2000; i += 97) {
      ASSERT_NE(find(client(i, kProtoUdp), std::min<uint32_t>(t, 4999 + i)), nullptr) << t << " " << i;
    }
    // Within a period: every flow due a period ago or more is gone.
    if (t >= 5000 + period) {
      const uint32_t gone = std::min<uint32_t>(2000, t - 5000 - period + 1);
      ASSERT_GE(table_.stats().expired, gone) << t;
    }
    // Bounded work: a millisecond sweeps 4096 / period entries (4), so reclaims at most that.
    ASSERT_LE(table_.stats().expired - before, 4096u / period + 1) << t;
  }
  EXPECT_EQ(table_.active(), 0u);
  EXPECT_EQ(table_.stats().expired, 2000u);
  // A big table sweeps at most kSweepPerMs entries a millisecond.
  table_.destroy();
  ASSERT_TRUE(init(1u << 20, to));
  EXPECT_EQ(table_.sweep_period_ms(), (1u << 20) / FlowTable::kSweepPerMs);
}

// What an IPv4 flow costs: its slot (32), its created-at time (4), its share of the index (two
// 8-byte references at 3/4 fill, any bucket count: 21.3) and of the eviction ring (at most 4 B:
// a power of two of at least half the slots). At most 64 B at every size (64-byte entries cost
// 89 B).
TEST_F(FlowTableTest, an_ipv4_flow_costs_at_most_64_bytes_of_table_at_capacity) {
  for (uint32_t cap : {1u << 14, 100'000u, (1u << 16) + 2, 1u << 20, 3'000'000u}) {
    const double per_flow = double(FlowTable::memory_bytes(cap)) / cap;
    EXPECT_LE(per_flow, 32 + 4 + 2 * 8 * 4 / 3.0 + 4 + 0.1) << cap;
    EXPECT_LE(per_flow, 64.0) << cap;
    EXPECT_GT(per_flow, 32 + 4 + 2 * 8 * 4 / 3.0) << cap;  // slot, time and index at least
  }
}

// Random inserts and removals of IPv4 and IPv6 flows against a model: the table holds exactly
// the model's flows (both directions found, dumps by slot see each flow once), an IPv4 flow
// finds room whenever a slot is free and an IPv6 flow whenever a whole line is, and the sweep
// reclaims both kinds and leaves every line whole again.
TEST_F(FlowTableTest, ipv4_and_ipv6_flows_share_the_slots_without_losing_one) {
  constexpr uint32_t kSlots = 512;
  ASSERT_TRUE(init(kSlots));
  const IpAddr backend6 = dnat6().backend;
  struct Live {
    Tuple t;
    bool v6;
  };
  std::map<uint32_t, Live> live;  // first slot -> flow
  uint32_t next_port = 1;
  auto tuple_of = [&](bool v6) {
    const uint16_t port = htons(uint16_t(next_port++));  // every flow its own client port
    if (v6) {
      return Tuple{*IpAddr::parse("2001:db8:2::7"), addrs_[kVip6Id], port, htons(443), kProtoTcp};
    }
    return Tuple{IpAddr::v4(0xc0000207), addrs_[kVipId], port, htons(80), kProtoTcp};
  };
  std::mt19937 rng(7);
  uint32_t inserted[2] = {0, 0}, refused[2] = {0, 0};
  for (int step = 0; step < 20000; ++step) {
    std::vector<uint8_t> used(kSlots);
    for (const auto& [idx, l] : live) {
      used[idx] = 1;
      if (l.v6) used[idx + 1] = 1;
    }
    uint32_t free_slots = 0;
    bool free_line = false;
    for (uint32_t i = 0; i < kSlots; ++i) {
      free_slots += !used[i];
      if (i % 2 == 0 && !used[i] && !used[i + 1]) free_line = true;
    }
    // Inserts a little more often than removals: the table runs full and stays there.
    if (rng() % 100 < 55) {
      const bool v6 = rng() % 3 == 0;
      const Tuple t = tuple_of(v6);
      Flow* f = insert_assured(t, v6 ? dnat6() : dnat());
      ASSERT_EQ(f != nullptr, v6 ? free_line : free_slots > 0) << "step " << step;
      ++(f ? inserted : refused)[v6];
      if (!f) continue;
      const uint32_t idx = table_.index_of(f);
      ASSERT_FALSE(used[idx]) << step;
      if (v6) {
        ASSERT_EQ(idx % 2, 0u);
        ASSERT_FALSE(used[idx + 1]);
      }
      live[idx] = Live{t, v6};
    } else if (!live.empty()) {
      auto it = std::next(live.begin(), long(rng() % live.size()));
      Flow* f = table_.mutable_at(it->first);
      ASSERT_NE(f, nullptr) << step;
      table_.remove(f);
      live.erase(it);
    }
    if (step % 250 != 0) continue;
    ASSERT_EQ(table_.active(), live.size()) << step;
    for (uint32_t i = 0; i < kSlots; ++i) ASSERT_EQ(table_.at(i) != nullptr, live.count(i) == 1) << i;
    for (const auto& [idx, l] : live) {
      FlowDir dir;
      const Flow* f = find(l.t, 0, &dir);
      ASSERT_EQ(f, table_.at(idx));
      EXPECT_EQ(f->v6(), l.v6);
      EXPECT_EQ(f->client(), l.t.src);
      EXPECT_EQ(f->backend(), l.v6 ? backend6 : dnat().backend);
      EXPECT_EQ(find(table_.reply_tuple(*f), 0, &dir), f);
      EXPECT_EQ(dir, FlowDir::kReply);
    }
  }
  // Both kinds ran into a full table and were refused, and both were let in again.
  EXPECT_GT(inserted[0], 1000u);
  EXPECT_GT(inserted[1], 500u);
  EXPECT_GT(refused[0], 0u);
  EXPECT_GT(refused[1], refused[0]) << "a line is rarer than a slot";
  EXPECT_EQ(table_.stats().insert_failed, refused[0] + refused[1]);
  // The sweep reclaims every flow (established: due after 2 h) and frees whole lines.
  table_.advance(0);
  EXPECT_EQ(table_.advance(ConntrackTimeouts{}.tcp_established_ms + 1), live.size());
  EXPECT_EQ(table_.active(), 0u);
  for (uint32_t i = 0; i < kSlots / 2; ++i) {
    ASSERT_NE(table_.insert(tuple_of(true), dnat6(), 0), nullptr) << i;
  }
}

// Free entries are handed out lowest index first after init (deterministic replays, readable
// dumps) and the last freed first after that.
TEST_F(FlowTableTest, free_entries_are_reused_lowest_first_then_last_freed_first) {
  ASSERT_TRUE(init(64));
  std::vector<Flow*> f;
  for (uint32_t i = 0; i < 5; ++i) {
    f.push_back(table_.insert(client(i), dnat(), 0));
    ASSERT_NE(f.back(), nullptr);
    EXPECT_EQ(table_.index_of(f.back()), i);
  }
  table_.remove(f[1]);
  table_.remove(f[3]);
  EXPECT_EQ(table_.index_of(table_.insert(client(10), dnat(), 0)), 3u);
  EXPECT_EQ(table_.index_of(table_.insert(client(11), dnat(), 0)), 1u);
  EXPECT_EQ(table_.index_of(table_.insert(client(12), dnat(), 0)), 5u);
  EXPECT_EQ(table_.active(), 6u);
  EXPECT_NE(find(client(0), 0), nullptr);
  EXPECT_EQ(find(client(1), 0), nullptr);
  EXPECT_NE(find(client(11), 0), nullptr);
}

// Linux conntrack ignores a SYN in ESTABLISHED (a stale retransmission, or the client's view
// out of step): the connection keeps its state, so it keeps the established timeout and is
// never evicted for room. So does the gateway.
TEST_F(FlowTableTest, a_syn_in_established_keeps_the_state_the_timeout_and_the_protection) {
  ConntrackTimeouts to;
  to.tcp_syn_ms = 1000;
  to.tcp_established_ms = 100000;
  ASSERT_TRUE(init(64, to));
  Flow* a = table_.insert(client(0), dnat(), 0);
  ASSERT_NE(a, nullptr);
  table_.touch(a, FlowDir::kOriginal, kTcpSyn, 0);
  table_.touch(a, FlowDir::kReply, kTcpSyn | kTcpAck, 0);
  table_.touch(a, FlowDir::kOriginal, kTcpAck, 0);
  ASSERT_EQ(a->state, TcpState::kEstablished);
  table_.touch(a, FlowDir::kOriginal, kTcpSyn, 10);
  EXPECT_EQ(tcp_state_name(a->state), std::string("ESTABLISHED"));
  EXPECT_EQ(table_.established(), 1u);
  EXPECT_EQ(find(client(0), 5000), a) << "not on the handshake's timeout";
  // The backend's answer to that SYN and the client's ACK leave it established too.
  table_.touch(a, FlowDir::kReply, kTcpSyn | kTcpAck, 5000);
  table_.touch(a, FlowDir::kOriginal, kTcpAck, 5000);
  EXPECT_EQ(a->state, TcpState::kEstablished);
  // A SYN flood through the full table evicts half-open flows, never this one.
  uint32_t inserted = 0;
  for (uint32_t i = 1; i < 500; ++i) {
    if (Flow* f = table_.insert(client(i), dnat(), 5000)) {
      table_.touch(f, FlowDir::kOriginal, kTcpSyn, 5000);
      ++inserted;
    }
  }
  EXPECT_EQ(inserted, 499u);
  EXPECT_GT(table_.stats().evicted, 400u);
  EXPECT_EQ(find(client(0), 5000), a);
}

TEST_F(FlowTableTest, a_full_table_evicts_half_open_flows_first_and_never_established_ones) {
  ASSERT_TRUE(init(1024));
  // 512 established flows (handshake seen) and 512 half-open ones (SYN only).
  for (uint32_t i = 0; i < 1024; ++i) {
    Flow* f = table_.insert(client(i), dnat(), 0);
    ASSERT_NE(f, nullptr);
    table_.touch(f, FlowDir::kOriginal, kTcpSyn, 0);
    if (i % 2 == 0) {
      table_.touch(f, FlowDir::kReply, kTcpSyn | kTcpAck, 0);
      table_.touch(f, FlowDir::kOriginal, kTcpAck, 0);
    }
  }
  EXPECT_EQ(table_.established(), 512u);
  // A SYN flood of 2000 new flows: each takes the place of a half-open one while any is left.
  uint32_t inserted = 0;
  for (uint32_t i = 0; i < 2000; ++i) {
    Flow* f = table_.insert(client(5000 + i), dnat(), 0);
    if (f) {
      table_.touch(f, FlowDir::kOriginal, kTcpSyn, 0);
      ++inserted;
    }
  }
  EXPECT_EQ(table_.established(), 512u);
  for (uint32_t i = 0; i < 1024; i += 2) EXPECT_NE(find(client(i), 0), nullptr) << i;
  EXPECT_EQ(inserted, 2000u) << "the flood keeps replacing its own half-open flows";
  EXPECT_EQ(table_.stats().evicted, 2000u);
  // Only established flows left? Then there is nothing to evict: the insert fails (the caller
  // forwards statelessly).
  table_.destroy();
  ASSERT_TRUE(init(64));
  for (uint32_t i = 0; i < 64; ++i) ASSERT_NE(insert_assured(client(i), dnat()), nullptr);
  EXPECT_EQ(table_.insert(client(999), dnat(), 0), nullptr);
  EXPECT_EQ(table_.stats().insert_failed, 1u);
}

// The connection's states as the gateway sees them (RFC 9293 §3.3.2 names).
TEST_F(FlowTableTest, tcp_states_follow_handshake_close_simultaneous_close_and_reset) {
  ASSERT_TRUE(init(64));
  const auto O = FlowDir::kOriginal, R = FlowDir::kReply;
  struct Step {
    FlowDir dir;
    uint8_t flags;
    TcpState want;
  };
  const std::vector<std::pair<const char*, std::vector<Step>>> cases = {
      {"handshake and client-first close",
       {{O, kTcpSyn, TcpState::kSynSent}, {R, kTcpSyn | kTcpAck, TcpState::kSynRecv},
        {O, kTcpAck, TcpState::kEstablished}, {O, kTcpFin | kTcpAck, TcpState::kFinWait},
        {R, kTcpAck, TcpState::kFinWait}, {R, kTcpFin | kTcpAck, TcpState::kLastAck},
        {R, kTcpAck, TcpState::kLastAck}, {O, kTcpAck, TcpState::kTimeWait}}},
      {"backend-first close",
       {{O, kTcpSyn, TcpState::kSynSent}, {R, kTcpSyn | kTcpAck, TcpState::kSynRecv},
        {O, kTcpAck, TcpState::kEstablished}, {R, kTcpFin | kTcpAck, TcpState::kCloseWait},
        {O, kTcpFin | kTcpAck, TcpState::kLastAck}, {R, kTcpAck, TcpState::kTimeWait}}},
      {"simultaneous close (FINs cross)",
       {{O, kTcpSyn, TcpState::kSynSent}, {R, kTcpSyn | kTcpAck, TcpState::kSynRecv},
        {O, kTcpAck, TcpState::kEstablished}, {O, kTcpFin | kTcpAck, TcpState::kFinWait},
        {R, kTcpFin | kTcpAck, TcpState::kLastAck}, {O, kTcpAck, TcpState::kTimeWait}}},
      {"reset", {{O, kTcpSyn, TcpState::kSynSent}, {R, kTcpRst | kTcpAck, TcpState::kClose}}},
      {"new SYN after TIME_WAIT reopens",
       {{O, kTcpSyn, TcpState::kSynSent}, {R, kTcpRst, TcpState::kClose},
        {O, kTcpSyn, TcpState::kSynSent}}},
      {"mid-stream pickup", {{O, kTcpAck, TcpState::kEstablished}}},
  };
  uint32_t n = 0;
  for (const auto& [name, steps] : cases) {
    SCOPED_TRACE(name);
    Flow* f = table_.insert(client(++n), dnat(), 0);
    ASSERT_NE(f, nullptr);
    for (const Step& s : steps) {
      table_.touch(f, s.dir, s.flags, 0);
      EXPECT_EQ(tcp_state_name(f->state), std::string(tcp_state_name(s.want)));
    }
  }
  EXPECT_EQ(table_.established(), 1u) << "only the mid-stream flow is established";
}

// A drain waits for established and closing connections: closing() counts FIN_WAIT,
// CLOSE_WAIT and LAST_ACK, until the last ACK (TIME_WAIT), a reset or the flow's removal.
TEST_F(FlowTableTest, closing_counts_connections_between_the_first_fin_and_the_last_ack) {
  ASSERT_TRUE(init(64));
  const auto O = FlowDir::kOriginal, R = FlowDir::kReply;
  Flow* a = table_.insert(client(1), dnat(), 0);
  Flow* b = table_.insert(client(2), dnat(), 0);
  ASSERT_TRUE(a && b);
  for (Flow* f : {a, b}) {
    table_.touch(f, O, kTcpSyn, 0);
    table_.touch(f, R, kTcpSyn | kTcpAck, 0);
    table_.touch(f, O, kTcpAck, 0);
  }
  EXPECT_EQ(table_.established(), 2u);
  EXPECT_EQ(table_.closing(), 0u);
  table_.touch(a, R, kTcpFin | kTcpAck, 0);  // the backend is done; the client may still send
  EXPECT_EQ(table_.established(), 1u);
  EXPECT_EQ(table_.closing(), 1u);
  table_.touch(b, O, kTcpFin | kTcpAck, 0);
  EXPECT_EQ(table_.closing(), 2u);
  table_.touch(a, O, kTcpFin | kTcpAck, 0);  // LAST_ACK: still closing
  EXPECT_EQ(table_.closing(), 2u);
  table_.touch(a, R, kTcpAck, 0);  // TIME_WAIT
  EXPECT_EQ(a->state, TcpState::kTimeWait);
  EXPECT_EQ(table_.closing(), 1u);
  table_.remove(b);
  EXPECT_EQ(table_.closing(), 0u);
  EXPECT_EQ(table_.established(), 0u);
  EXPECT_EQ(table_.audit(0), nullptr);
}

TEST_F(FlowTableTest, timeouts_follow_the_state) {
  ConntrackTimeouts to;
  to.tcp_syn_ms = 1000;
  to.tcp_established_ms = 100000;
  to.tcp_fin_ms = 2000;
  to.tcp_time_wait_ms = 3000;
  to.tcp_close_ms = 500;
  ASSERT_TRUE(init(64, to));
  Flow* f = table_.insert(client(1), dnat(), 0);
  table_.touch(f, FlowDir::kOriginal, kTcpSyn, 0);
  EXPECT_EQ(f->expire_ms, 1000u);
  table_.touch(f, FlowDir::kReply, kTcpSyn | kTcpAck, 0);
  table_.touch(f, FlowDir::kOriginal, kTcpAck, 0);
  EXPECT_EQ(f->expire_ms, 100000u);
  table_.touch(f, FlowDir::kOriginal, kTcpFin | kTcpAck, 0);
  EXPECT_EQ(f->expire_ms, 2000u);
  table_.touch(f, FlowDir::kReply, kTcpFin | kTcpAck, 0);
  table_.touch(f, FlowDir::kOriginal, kTcpAck, 0);
  EXPECT_EQ(f->expire_ms, 3000u);
  table_.touch(f, FlowDir::kOriginal, kTcpRst, 0);
  EXPECT_EQ(f->expire_ms, 500u);
}

}  // namespace
}  // namespace meshgate::dp

namespace meshgate::dp {
namespace {

TEST_F(FlowTableTest, a_timeout_that_gets_shorter_is_honoured_by_the_sweep) {
  ConntrackTimeouts to;
  to.tcp_established_ms = 100'000;
  to.tcp_close_ms = 2'000;
  ASSERT_TRUE(init(64, to));
  table_.advance(0);
  Flow* f = table_.insert(client(1), dnat(), 0);  // established: due at 100 s
  table_.touch(f, FlowDir::kOriginal, kTcpRst, 10'000);  // reset at 10 s: due at 12 s
  uint32_t reclaimed = 0;
  for (uint32_t t = 0; t <= 14'000; t += 100) reclaimed += table_.advance(t);
  EXPECT_EQ(reclaimed, 1u);
  EXPECT_EQ(table_.active(), 0u);
}

}  // namespace
}  // namespace meshgate::dp
