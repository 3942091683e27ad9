// The per-worker timer wheel: exact-millisecond firing in expiry order across every level
// (including 2*MSL and a 2 h keepalive), cancel and re-arm from inside callbacks, the work
// budget carried over between calls (fires and cascades), re-arming a pending timer, and the
// 32-bit millisecond clock wrapping.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "dataplane/tcp/timer_wheel.h"

namespace meshgate::dp::tcp {
namespace {

struct Fired {
  int id;
  uint32_t at_ms;       // the now_ms of the advance() that fired it
  uint32_t expires_ms;
};

struct Ctx {
  std::vector<Fired> fired;
  uint32_t now_ms = 0;
  TimerWheel* wheel = nullptr;
};

struct Item {
  Timer timer;  // first member: a Timer* is an Item*
  int id = 0;
  Timer* cancel_other = nullptr;   // cancelled from this one's callback
  uint32_t rearm_ms = 0;           // re-armed this much later from its callback (0 = no)
  int rearms_left = 0;
};

void on_fire(Timer* t, void* vctx) {
  auto* ctx = static_cast<Ctx*>(vctx);
  auto* item = reinterpret_cast<Item*>(t);
  ctx->fired.push_back({item->id, ctx->now_ms, t->expires_ms});
  if (item->cancel_other != nullptr) ctx->wheel->cancel(item->cancel_other);
  if (item->rearm_ms != 0 && item->rearms_left-- > 0) {
    ctx->wheel->schedule(t, t->expires_ms + item->rearm_ms);
  }
}

class TcpTimerWheel : public ::testing::Test {
 protected:
  void start(uint32_t now_ms) {
    wheel_ = std::make_unique<TimerWheel>();
    wheel_->init(now_ms);
    ctx_.wheel = wheel_.get();
    ctx_.now_ms = now_ms;
  }
  Item* item(int id) {
    items_.push_back(std::make_unique<Item>());
    Item* it = items_.back().get();
    it->id = id;
    it->timer.fn = on_fire;
    return it;
  }
  uint32_t advance(uint32_t now_ms, uint32_t budget = 1u << 30) {
    ctx_.now_ms = now_ms;
    return wheel_->advance(now_ms, budget, &ctx_);
  }
  // Advances one millisecond at a time from the current clock to `to_ms` (inclusive).
  void step_to(uint32_t to_ms) {
    for (uint32_t t = ctx_.now_ms + 1; int32_t(to_ms - t) >= 0; ++t) advance(t);
  }

  std::unique_ptr<TimerWheel> wheel_;
  std::vector<std::unique_ptr<Item>> items_;
  Ctx ctx_;
};

TEST_F(TcpTimerWheel, timers_fire_at_their_exact_millisecond_in_expiry_order) {
  start(0);
  std::mt19937 rng(7);
  std::vector<uint32_t> expiry;
  for (int i = 0; i < 2000; ++i) {
    // Spread over all levels: < 256 ms, < 16 s, < 17 min, and up to 40 min.
    const uint32_t range[] = {256, 16384, 1u << 20, 2'400'000};
    const uint32_t e = 1 + rng() % range[i % 4];
    Item* it = item(i);
    wheel_->schedule(&it->timer, e);
    expiry.push_back(e);
  }
  EXPECT_EQ(wheel_->pending_count(), 2000u);
  // Every millisecond up to 40 minutes: 2.4 million calls, mostly empty.
  step_to(2'400'001);
  ASSERT_EQ(ctx_.fired.size(), 2000u);
  for (size_t k = 0; k < ctx_.fired.size(); ++k) {
    const Fired& f = ctx_.fired[k];
    EXPECT_EQ(f.at_ms, expiry[f.id]) << "timer " << f.id;
    if (k > 0) {
      const Fired& prev = ctx_.fired[k - 1];
      ASSERT_LE(prev.expires_ms, f.expires_ms);
      if (prev.expires_ms == f.expires_ms) {
        ASSERT_LT(prev.id, f.id) << "same ms: arm order";
      }
    }
  }
  EXPECT_EQ(wheel_->pending_count(), 0u);
  EXPECT_TRUE(wheel_->caught_up());
}

TEST_F(TcpTimerWheel, large_steps_fire_everything_due_and_nothing_early) {
  start(1000);
  std::mt19937 rng(11);
  std::vector<uint32_t> expiry;
  for (int i = 0; i < 3000; ++i) {
    const uint32_t e = 1000 + 1 + rng() % 5'000'000;
    wheel_->schedule(&item(i)->timer, e);
    expiry.push_back(e);
  }
  uint32_t now = 1000;
  while (ctx_.fired.size() < 3000) {
    now += 1 + rng() % 20000;
    const size_t before = ctx_.fired.size();
    advance(now);
    for (size_t k = before; k < ctx_.fired.size(); ++k) {
      ASSERT_LE(ctx_.fired[k].expires_ms, now) << "fired early";
    }
    // Everything due has fired: the next pending expiry is in the future.
    for (int i = 0; i < 3000; ++i) {
      if (items_[i]->timer.pending()) {
        ASSERT_GT(expiry[i], now) << "late timer " << i;
      }
    }
    ASSERT_LT(now, 6'000'000u);
  }
}

TEST_F(TcpTimerWheel, cancel_inside_a_callback_stops_a_timer_due_the_same_tick) {
  start(0);
  Item* a = item(1);
  Item* b = item(2);
  Item* far = item(3);
  a->cancel_other = &b->timer;
  wheel_->schedule(&a->timer, 50);
  wheel_->schedule(&b->timer, 50);
  wheel_->schedule(&far->timer, 120'000);  // 2 * MSL, level 2
  wheel_->cancel(&far->timer);
  EXPECT_FALSE(far->timer.pending());
  step_to(200'000);
  ASSERT_EQ(ctx_.fired.size(), 1u);
  EXPECT_EQ(ctx_.fired[0].id, 1);
  EXPECT_FALSE(b->timer.pending());
  wheel_->cancel(&b->timer);  // cancelling an idle timer is harmless
  EXPECT_EQ(wheel_->pending_count(), 0u);
}

TEST_F(TcpTimerWheel, a_callback_can_rearm_its_own_timer) {
  start(0);
  Item* tick = item(1);
  tick->rearm_ms = 300;  // crosses level-0 rounds each time
  tick->rearms_left = 9;
  wheel_->schedule(&tick->timer, 100);
  step_to(5000);
  ASSERT_EQ(ctx_.fired.size(), 10u);
  for (uint32_t k = 0; k < 10; ++k) EXPECT_EQ(ctx_.fired[k].at_ms, 100 + 300 * k);
}

TEST_F(TcpTimerWheel, a_timer_armed_in_the_past_fires_on_the_next_tick) {
  start(1000);
  Item* late = item(1);
  wheel_->schedule(&late->timer, 900);
  advance(1000);  // tick 1000 is processed: the overdue timer fires with it
  ASSERT_EQ(ctx_.fired.size(), 1u);
  // Armed for the tick just processed: it runs with the next tick, not again in this one.
  wheel_->schedule(&late->timer, 1000);
  advance(1000);
  EXPECT_EQ(ctx_.fired.size(), 1u);
  advance(1001);
  EXPECT_EQ(ctx_.fired.size(), 2u);
}

TEST_F(TcpTimerWheel, rescheduling_a_pending_timer_moves_it) {
  start(0);
  Item* it = item(1);
  wheel_->schedule(&it->timer, 20'000);  // level 1
  wheel_->schedule(&it->timer, 30);      // now level 0
  EXPECT_EQ(wheel_->pending_count(), 1u);
  step_to(100);
  ASSERT_EQ(ctx_.fired.size(), 1u);
  EXPECT_EQ(ctx_.fired[0].at_ms, 30u);
  wheel_->schedule_in(&it->timer, 5000);  // relative to the clock: 100 + 5000
  step_to(30'000);
  ASSERT_EQ(ctx_.fired.size(), 2u);
  EXPECT_EQ(ctx_.fired[1].at_ms, 5100u);
}

TEST_F(TcpTimerWheel, two_msl_and_keepalive_fire_on_time) {
  start(5);
  Item* time_wait = item(1);
  Item* keepalive = item(2);
  Item* very_long = item(3);  // 20 days: beyond the wheel's 18.6 h, re-filed until it fits
  wheel_->schedule_in(&time_wait->timer, 120'000);
  wheel_->schedule_in(&keepalive->timer, 7'200'000);
  wheel_->schedule_in(&very_long->timer, 20u * 86'400'000u);
  advance(120'004);
  EXPECT_EQ(ctx_.fired.size(), 0u);
  advance(120'005);
  ASSERT_EQ(ctx_.fired.size(), 1u);
  EXPECT_EQ(ctx_.fired[0].id, 1);
  advance(7'200'004);
  EXPECT_EQ(ctx_.fired.size(), 1u);
  advance(7'200'005);
  ASSERT_EQ(ctx_.fired.size(), 2u);
  EXPECT_EQ(ctx_.fired[1].id, 2);
  advance(20u * 86'400'000u + 4);
  EXPECT_EQ(ctx_.fired.size(), 2u);
  advance(20u * 86'400'000u + 5);
  ASSERT_EQ(ctx_.fired.size(), 3u);
  EXPECT_EQ(ctx_.fired[2].id, 3);
}

TEST_F(TcpTimerWheel, the_budget_bounds_each_call_and_the_rest_carries_over) {
  start(0);
  for (int i = 0; i < 100; ++i) wheel_->schedule(&item(i)->timer, 10);
  Item* later = item(100);
  wheel_->schedule(&later->timer, 11);
  EXPECT_EQ(advance(20, 30), 30u);
  EXPECT_FALSE(wheel_->caught_up());
  EXPECT_EQ(advance(20, 30), 30u);
  EXPECT_EQ(advance(20, 30), 30u);
  EXPECT_EQ(advance(20, 30), 11u);  // the last 10 of tick 10, then tick 11
  EXPECT_TRUE(wheel_->caught_up());
  ASSERT_EQ(ctx_.fired.size(), 101u);
  for (int i = 0; i < 101; ++i) EXPECT_EQ(ctx_.fired[i].id, i);  // order kept across calls
}

TEST_F(TcpTimerWheel, cascades_count_against_the_budget_too) {
  start(0);
  // 1000 timers in one level-1 slot ([512, 768)): moved to level 0 when the clock reaches 512.
  for (int i = 0; i < 1000; ++i) wheel_->schedule(&item(i)->timer, 600 + i % 100);
  uint32_t calls = 0;
  while (ctx_.fired.size() < 1000) {
    ctx_.now_ms = 1000;
    const uint32_t n = wheel_->advance(1000, 64, &ctx_);
    ASSERT_LE(n, 64u);
    ASSERT_LT(++calls, 100u);
  }
  EXPECT_GE(calls, 1000u * 2 / 64);  // 1000 moves + 1000 fires, 64 per call
  for (size_t k = 1; k < ctx_.fired.size(); ++k) {
    ASSERT_LE(ctx_.fired[k - 1].expires_ms, ctx_.fired[k].expires_ms);
  }
  wheel_->advance(1000, 64, &ctx_);  // the empty ticks left up to 1000
  EXPECT_TRUE(wheel_->caught_up());
}

TEST_F(TcpTimerWheel, the_millisecond_clock_may_wrap) {
  const uint32_t start_ms = 0xffffff00u;  // 256 ms before the 32-bit wrap
  start(start_ms);
  Item* a = item(1);
  Item* b = item(2);
  Item* c = item(3);
  wheel_->schedule(&a->timer, start_ms + 200);      // before the wrap
  wheel_->schedule(&b->timer, start_ms + 500);      // 244 ms after it
  wheel_->schedule(&c->timer, start_ms + 7'200'000);  // keepalive across the wrap
  step_to(start_ms + 600);
  ASSERT_EQ(ctx_.fired.size(), 2u);
  EXPECT_EQ(ctx_.fired[0].at_ms, start_ms + 200);
  EXPECT_EQ(ctx_.fired[1].at_ms, uint32_t(start_ms + 500));
  EXPECT_EQ(ctx_.fired[1].at_ms, 244u);
  advance(start_ms + 7'199'999);
  EXPECT_EQ(ctx_.fired.size(), 2u);
  advance(start_ms + 7'200'000);
  ASSERT_EQ(ctx_.fired.size(), 3u);
  EXPECT_EQ(ctx_.fired[2].id, 3);
}

}  // namespace
}  // namespace meshgate::dp::tcp
