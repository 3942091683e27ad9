// Flow table: capacity, both-direction lookup, removal, expiry.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <random>

#include "dataplane/conntrack/conntrack.h"
#include "tests/support/dp_harness.h"

namespace meshgate::dp {
namespace {

class FlowTableTest : public ::testing::Test {
 protected:
  void SetUp() override { test::init_eal_once(); }
  void TearDown() override { table_.destroy(); }
  FlowTable table_;
};

Tuple random_tuple(std::mt19937& rng, bool v6) {
  Tuple t;
  if (v6) {
    for (auto& b : t.src.b) b = uint8_t(rng());
    t.src.b[0] = 0x20;
    t.dst = *IpAddr::parse("2001:db8:100::10");
  } else {
    t.src = IpAddr::v4(0xc0000000u | (rng() & 0xffffff));
    t.dst = IpAddr::v4(0xcb00710a);
  }
  t.sport = uint16_t(rng());
  t.dport = htons(80);
  t.proto = 6;
  return t;
}

TEST_F(FlowTableTest, every_insert_succeeds_until_the_pool_is_full_and_all_flows_are_found) {
  constexpr uint32_t kFlows = 65536;
  ASSERT_TRUE(table_.init(kFlows, 0, ConntrackTimeouts{}));
  std::mt19937 rng(42);
  std::vector<Tuple> tuples;
  const IpAddr backend = IpAddr::v4(0xc633640b);
  for (uint32_t i = 0; i < kFlows; ++i) {
    Tuple t = random_tuple(rng, i % 3 == 0);
    FlowDir dir;
    uint64_t expired = 0;
    if (table_.lookup(t, FlowTable::hash(t), 0, &dir, &expired)) continue;  // duplicate tuple
    ASSERT_NE(table_.insert(t, backend, htons(8080), 1, 0), nullptr) << "insert " << i << " failed";
    tuples.push_back(t);
  }
  for (const Tuple& t : tuples) {
    FlowDir dir;
    uint64_t expired = 0;
    Flow* f = table_.lookup(t, FlowTable::hash(t), 0, &dir, &expired);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(dir, FlowDir::kOriginal);
    const Tuple reply{f->backend, f->client, f->backend_port, f->client_port, f->proto};
    Flow* r = table_.lookup(reply, FlowTable::hash(reply), 0, &dir, &expired);
    EXPECT_EQ(r, f);
    EXPECT_EQ(dir, FlowDir::kReply);
  }
  EXPECT_EQ(table_.active(), tuples.size());
}

TEST_F(FlowTableTest, removed_flows_are_gone_in_both_directions_and_their_slots_reused) {
  ASSERT_TRUE(table_.init(1024, 0, ConntrackTimeouts{}));
  std::mt19937 rng(1);
  const Tuple t = random_tuple(rng, false);
  Flow* f = table_.insert(t, IpAddr::v4(0xc633640b), htons(8080), 1, 0);
  ASSERT_NE(f, nullptr);
  table_.remove(f);
  FlowDir dir;
  uint64_t expired = 0;
  EXPECT_EQ(table_.lookup(t, FlowTable::hash(t), 0, &dir, &expired), nullptr);
  const Tuple reply{IpAddr::v4(0xc633640b), t.src, htons(8080), t.sport, 6};
  EXPECT_EQ(table_.lookup(reply, FlowTable::hash(reply), 0, &dir, &expired), nullptr);
  EXPECT_EQ(table_.active(), 0u);
  for (int i = 0; i < 1024; ++i) {
    ASSERT_NE(table_.insert(random_tuple(rng, false), IpAddr::v4(0xc633640b), htons(8080), 1, 0), nullptr);
  }
}

TEST_F(FlowTableTest, an_expired_flow_is_not_returned_and_is_counted) {
  ConntrackTimeouts to;
  to.udp_ms = 5000;
  ASSERT_TRUE(table_.init(1024, 0, to));
  Tuple t;
  t.src = IpAddr::v4(0xc0000201);
  t.dst = IpAddr::v4(0xcb00710a);
  t.sport = htons(1000);
  t.dport = htons(53);
  t.proto = 17;
  ASSERT_NE(table_.insert(t, IpAddr::v4(0xc633640b), htons(5353), 1, 1000), nullptr);
  FlowDir dir;
  uint64_t expired = 0;
  EXPECT_NE(table_.lookup(t, FlowTable::hash(t), 5999, &dir, &expired), nullptr);
  EXPECT_EQ(table_.lookup(t, FlowTable::hash(t), 6000, &dir, &expired), nullptr);
  EXPECT_EQ(expired, 1u);
  EXPECT_EQ(table_.active(), 0u);
}

}  // namespace
}  // namespace meshgate::dp
