// The HBONE origination pool (docs/HBONE.md "Pool") with a fake clock.
#include <gtest/gtest.h>

#include "dataplane/hbone/pool.h"

using meshgate::IpAddr;
using namespace meshgate::dp::hbone;
using Action = Pool::Action;

namespace {

const IpAddr kPod = *IpAddr::parse("10.244.1.7");
const IpAddr kSrc = *IpAddr::parse("10.0.0.1");
PoolKey key(const IpAddr& dst = kPod, const char* src_id = "spiffe://cluster.local/ns/gw/sa/gw") {
  return PoolKey(src_id, {"spiffe://cluster.local/ns/demo/sa/server"}, dst, 15008, kSrc);
}

}  // namespace

TEST(HbonePool, first_request_dials_once_and_the_others_wait_for_it) {
  Pool pool;
  const auto first = pool.acquire(key(), 0);
  ASSERT_EQ(first.action, Action::kDial);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(pool.acquire(key(), 0).action, Action::kWait) << "one dial per key";
  EXPECT_EQ(pool.acquire(key(*IpAddr::parse("10.244.1.8")), 0).action, Action::kDial)
      << "another destination is another key";
  pool.dial_done(first.conn, true, 200, 0);
  for (int i = 0; i < 6; ++i) {
    const auto c = pool.acquire(key(), 0);
    EXPECT_EQ(c.action, Action::kUse);
    EXPECT_EQ(c.conn, first.conn);
  }
  EXPECT_EQ(pool.streams(first.conn), 6u);
  EXPECT_EQ(pool.connections(key()), 1u);
}

TEST(HbonePool, key_covers_identities_and_source_and_ignores_identity_order) {
  Pool pool;
  PoolKey a("spiffe://td/ns/a/sa/x", {"spiffe://td/ns/b/sa/1", "spiffe://td/ns/b/sa/2"}, kPod, 15008, kSrc);
  PoolKey b("spiffe://td/ns/a/sa/x", {"spiffe://td/ns/b/sa/2", "spiffe://td/ns/b/sa/1"}, kPod, 15008, kSrc);
  EXPECT_EQ(a, b);
  PoolKey other_src = a;
  other_src.src_ip = *IpAddr::parse("10.0.0.2");
  PoolKey other_id = a;
  other_id.src_identity = "spiffe://td/ns/a/sa/y";
  const auto c = pool.acquire(a, 0);
  pool.dial_done(c.conn, true, 100, 0);
  EXPECT_EQ(pool.acquire(b, 0).action, Action::kUse);
  EXPECT_EQ(pool.acquire(other_src, 0).action, Action::kDial);
  EXPECT_EQ(pool.acquire(other_id, 0).action, Action::kDial);
}

TEST(HbonePool, a_new_connection_is_dialled_when_one_reaches_100_streams) {
  Pool pool;
  const auto c1 = pool.acquire(key(), 0);
  pool.dial_done(c1.conn, true, 1000, 0);
  for (int i = 0; i < 99; ++i) ASSERT_EQ(pool.acquire(key(), 0).conn, c1.conn);  // + the dialler's
  EXPECT_EQ(pool.acquire(key(), 0).conn, c1.conn);
  EXPECT_EQ(pool.streams(c1.conn), 100u);
  const auto c2 = pool.acquire(key(), 0);
  ASSERT_EQ(c2.action, Action::kDial);
  EXPECT_EQ(pool.acquire(key(), 0).action, Action::kWait);
  pool.dial_done(c2.conn, true, 1000, 0);
  EXPECT_EQ(pool.acquire(key(), 0).conn, c2.conn);
  pool.release(c1.conn, 0);
  EXPECT_EQ(pool.acquire(key(), 0).conn, c1.conn) << "the fullest connection with room first";
}

TEST(HbonePool, peer_stream_limit_below_100_binds) {
  Pool pool;
  const auto c = pool.acquire(key(), 0);
  pool.dial_done(c.conn, true, 3, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pool.acquire(key(), 0).action, Action::kUse);
  EXPECT_EQ(pool.acquire(key(), 0).action, Action::kDial);
}

TEST(HbonePool, failed_dial_lets_the_next_request_dial_again) {
  Pool pool;
  const auto c = pool.acquire(key(), 0);
  EXPECT_EQ(pool.acquire(key(), 0).action, Action::kWait);
  pool.dial_done(c.conn, false, 0, 0);
  EXPECT_EQ(pool.connections(key()), 0u);
  const auto again = pool.acquire(key(), 0);
  EXPECT_EQ(again.action, Action::kDial);
  EXPECT_NE(again.conn, c.conn);
}

TEST(HbonePool, idle_connections_are_released_after_5_minutes) {
  Pool pool;
  const auto c = pool.acquire(key(), 1000);
  pool.dial_done(c.conn, true, 100, 1000);
  EXPECT_EQ(pool.acquire(key(), 1000).action, Action::kUse);
  EXPECT_FALSE(pool.release(c.conn, 61'000));  // idle from t = 61 s
  EXPECT_TRUE(pool.expire(61'000 + 299'999).empty());
  EXPECT_EQ(pool.acquire(key(), 100'000).action, Action::kUse) << "busy again: not idle";
  EXPECT_TRUE(pool.expire(400'000).empty());
  pool.release(c.conn, 400'000);
  const auto gone = pool.expire(700'000);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], c.conn);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.acquire(key(), 700'000).action, Action::kDial);
}

TEST(HbonePool, retired_connection_takes_no_new_streams_and_closes_after_its_last) {
  Pool pool;
  const auto c = pool.acquire(key(), 0);
  pool.dial_done(c.conn, true, 100, 0);
  pool.acquire(key(), 0);
  pool.acquire(key(), 0);
  EXPECT_FALSE(pool.retire(c.conn)) << "two streams still run";
  EXPECT_EQ(pool.acquire(key(), 0).action, Action::kDial);
  EXPECT_FALSE(pool.release(c.conn, 0));
  EXPECT_TRUE(pool.release(c.conn, 0)) << "last stream of a retired connection: close it";
  EXPECT_EQ(pool.streams(c.conn), 0u);
}
