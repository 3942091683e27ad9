// The per-backend rate estimator behind /stats "rates": nothing before two samples, the first
// interval's rate as it is (bytes each way), then IPVS's weighted average (a quarter of each new interval),
// restarts when a counter goes backwards, and forgets backends that left the snapshot.
#include "control/stats/rate_estimator.h"

#include <gtest/gtest.h>

namespace meshgate::ctl {
namespace {

using Clock = RateEstimator::Clock;
using Samples = std::vector<std::pair<uint32_t, RateSample>>;

TEST(RateEstimator, DueEveryIntervalAndNoRatesBeforeTwoSamples) {
  RateEstimator e;
  const Clock::time_point t0{};
  EXPECT_TRUE(e.due(t0));
  e.update(t0, Samples{{7, {10, 100, 6400}}});
  EXPECT_EQ(e.rates(7), nullptr);
  EXPECT_FALSE(e.due(t0 + kRateInterval - std::chrono::milliseconds(1)));
  EXPECT_TRUE(e.due(t0 + kRateInterval));
}

TEST(RateEstimator, FirstIntervalAsMeasuredThenAWeightedAverage) {
  RateEstimator e;
  const Clock::time_point t0{};
  e.update(t0, Samples{{7, {0, 0, 0}}});
  e.update(t0 + std::chrono::seconds(2), Samples{{7, {20, 200, 20000, 60000}}});
  ASSERT_NE(e.rates(7), nullptr);
  EXPECT_DOUBLE_EQ(e.rates(7)->flows_per_s, 10);
  EXPECT_DOUBLE_EQ(e.rates(7)->packets_per_s, 100);
  EXPECT_DOUBLE_EQ(e.rates(7)->bytes_per_s, 10000);
  EXPECT_DOUBLE_EQ(e.rates(7)->reply_bytes_per_s, 30000);
  // Idle for an interval: the average moves a quarter of the way to 0.
  e.update(t0 + std::chrono::seconds(4), Samples{{7, {20, 200, 20000, 60000}}});
  EXPECT_DOUBLE_EQ(e.rates(7)->flows_per_s, 7.5);
  EXPECT_DOUBLE_EQ(e.rates(7)->bytes_per_s, 7500);
  EXPECT_DOUBLE_EQ(e.rates(7)->reply_bytes_per_s, 22500);
  // 50 flows/s over the next (longer) interval: 7.5 + (50 - 7.5) / 4.
  e.update(t0 + std::chrono::seconds(8), Samples{{7, {220, 200, 20000, 60000}}});
  EXPECT_DOUBLE_EQ(e.rates(7)->flows_per_s, 18.125);
}

TEST(RateEstimator, ACounterGoingBackwardsRestartsAndAGoneBackendIsForgotten) {
  RateEstimator e;
  const Clock::time_point t0{};
  e.update(t0, Samples{{1, {100, 100, 100}}, {2, {0, 0, 0}}});
  e.update(t0 + std::chrono::seconds(2), Samples{{1, {120, 120, 120}}, {2, {2, 2, 2}}});
  ASSERT_NE(e.rates(1), nullptr);
  ASSERT_NE(e.rates(2), nullptr);
  // Stat id 1 now counts from 0 again (its slot was given to a new backend); 2 left.
  e.update(t0 + std::chrono::seconds(4), Samples{{1, {4, 4, 4}}});
  EXPECT_EQ(e.rates(1), nullptr);
  EXPECT_EQ(e.rates(2), nullptr);
  e.update(t0 + std::chrono::seconds(6), Samples{{1, {8, 8, 8}}});
  ASSERT_NE(e.rates(1), nullptr);
  EXPECT_DOUBLE_EQ(e.rates(1)->flows_per_s, 2);
}

}  // namespace
}  // namespace meshgate::ctl
