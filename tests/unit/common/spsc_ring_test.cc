// SpscRing (dataplane/common/spsc_ring.h): order, a full ring's counted drops, wrap-around,
// and one producer and one consumer thread passing records.
#include "dataplane/common/spsc_ring.h"

#include <gtest/gtest.h>

#include <thread>

namespace meshgate::dp {
namespace {

struct Rec {
  uint64_t seq;
  char pad[56];
};

bool push(SpscRing<Rec>& r, uint64_t seq) {
  Rec* s = r.reserve();
  if (s == nullptr) return false;
  s->seq = seq;
  r.commit();
  return true;
}

TEST(SpscRing, CapacityRoundsUpToAPowerOfTwo) {
  EXPECT_EQ(SpscRing<Rec>(5).capacity(), 8u);
  EXPECT_EQ(SpscRing<Rec>(8).capacity(), 8u);
  EXPECT_EQ(SpscRing<Rec>(0).capacity(), 2u);
}

TEST(SpscRing, RecordsComeOutInTheOrderTheyWentIn) {
  SpscRing<Rec> r(8);
  EXPECT_EQ(r.front(), nullptr);
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(push(r, i));
  EXPECT_EQ(r.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    const Rec* f = r.front();
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->seq, i);
    r.pop();
  }
  EXPECT_EQ(r.front(), nullptr);
  EXPECT_EQ(r.dropped(), 0u);
}

TEST(SpscRing, FullRingRefusesAndCountsEachDrop) {
  SpscRing<Rec> r(4);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(push(r, i));
  EXPECT_FALSE(push(r, 4));
  EXPECT_FALSE(push(r, 5));
  EXPECT_EQ(r.dropped(), 2u);
  // The records already in are untouched; one popped makes room for exactly one.
  ASSERT_EQ(r.front()->seq, 0u);
  r.pop();
  EXPECT_TRUE(push(r, 6));
  EXPECT_FALSE(push(r, 7));
  EXPECT_EQ(r.dropped(), 3u);
  const uint64_t want[] = {1, 2, 3, 6};
  for (uint64_t w : want) {
    ASSERT_NE(r.front(), nullptr);
    EXPECT_EQ(r.front()->seq, w);
    r.pop();
  }
  EXPECT_EQ(r.front(), nullptr);
}

TEST(SpscRing, WrapsAroundManyTimesKeepingOrder) {
  SpscRing<Rec> r(4);
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    const int n = 1 + round % 4;  // 1..4 records in, then all out
    for (int i = 0; i < n; ++i) ASSERT_TRUE(push(r, next_in++));
    while (const Rec* f = r.front()) {
      ASSERT_EQ(f->seq, next_out++);
      r.pop();
    }
  }
  EXPECT_EQ(next_out, next_in);
  EXPECT_EQ(r.dropped(), 0u);
}

TEST(SpscRing, ProducerAndConsumerThreadsLoseNothingButCountedDrops) {
  SpscRing<Rec> r(64);
  constexpr uint64_t kN = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) push(r, i);
  });
  uint64_t got = 0, last = 0;
  bool first = true;
  bool ordered = true;
  while (true) {
    const Rec* f = r.front();
    if (f == nullptr) {
      if (got + r.dropped() == kN) break;
      continue;
    }
    // Drops leave gaps, never reorderings.
    if (!first && f->seq <= last) ordered = false;
    last = f->seq;
    first = false;
    ++got;
    r.pop();
  }
  producer.join();
  EXPECT_TRUE(ordered);
  EXPECT_EQ(got + r.dropped(), kN);
}

}  // namespace
}  // namespace meshgate::dp
