// A hierarchical hashed timer wheel for TCP timers (RTO, delayed ACK, persist, keepalive,
// TIME_WAIT), after Varghese & Lauck's scheme 7 with the cascade of the classic Linux timer
// wheel, so every timer fires at its exact millisecond however far away it was armed.
//
// Threads: one wheel per worker, touched by that worker only. No locks, no allocation: timers
// are intrusive nodes embedded in the caller's structs (a connection holds one Timer per kind
// it runs); the wheel is 449 list heads (7.2 KB) plus a 256-bit map, allocated with the worker.
//
// Levels (1 ms ticks):   level 0  256 slots x 1 ms       (the next 256 ms)
//                        level 1   64 slots x 256 ms     (16.4 s)
//                        level 2   64 slots x 16.384 s   (17.5 min)
//                        level 3   64 slots x 17.5 min   (18.6 h)
// When level 0 wraps, the next level-1 slot is cascaded (its timers re-filed one level down),
// and likewise up the levels. Timers further than 18.6 h wait in level 3 and are re-filed
// until they fit. Delays must stay below 2^31 ms (24.8 days): times are 32-bit milliseconds
// compared by signed difference, so the clock may wrap (every 49.7 days) freely.
//
// Cost: schedule / cancel / reschedule O(1); advance() O(ticks with timers + timers fired +
// timers cascaded), empty ticks skipped 256 at a time, and bounded by `budget` per call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/common/compiler.h"

namespace meshgate::dp::tcp {

struct Timer;
// Runs on the worker inside advance(). `t` is no longer pending: the callback may re-arm it,
// cancel or arm any other timer, or free the struct that holds it.
using TimerFn = void (*)(Timer* t, void* ctx);

struct TimerLink {
  TimerLink* next = nullptr;
  TimerLink* prev = nullptr;
};

// Embed one per timer kind; recover the owner with offsetof (container_of).
struct Timer {
  TimerLink link;  // first member: a link is a Timer
  TimerFn fn = nullptr;
  uint32_t expires_ms = 0;

  bool pending() const { return link.next != nullptr; }
};

class TimerWheel {
 public:
  static constexpr uint32_t kL0Bits = 8;
  static constexpr uint32_t kLnBits = 6;
  static constexpr uint32_t kL0Slots = 1u << kL0Bits;
  static constexpr uint32_t kLnSlots = 1u << kLnBits;
  static constexpr uint32_t kUpperLevels = 3;
  // Delays beyond this are filed at the top of level 3 and re-filed when cascaded.
  static constexpr uint32_t kMaxFiledDelayMs = 1u << (kL0Bits + kUpperLevels * kLnBits);

  TimerWheel() = default;
  TimerWheel(const TimerWheel&) = delete;  // the list heads point at themselves
  TimerWheel& operator=(const TimerWheel&) = delete;

  // Empties the wheel (timers still linked are forgotten, not fired) and sets its clock.
  void init(uint32_t now_ms) {
    for (auto& h : l0_) reset(&h);
    for (auto& lvl : ln_) {
      for (auto& h : lvl) reset(&h);
    }
    reset(&expired_);
    for (auto& w : l0_map_) w = 0;
    now_ = now_ms;
    clock_ms_ = now_ms;
    pending_ = 0;
  }

  // Arms `t` to fire at `expires_ms`, or moves it there if it was pending. `t->fn` must be set.
  // A time already past fires at the next tick advance() processes.
  void schedule(Timer* t, uint32_t expires_ms) {
    if (t->pending()) {
      unlink(&t->link);
    } else {
      ++pending_;
    }
    t->expires_ms = expires_ms;
    file(t);
  }
  // Arms `t` `delay_ms` after the clock of the last advance() (or init()).
  void schedule_in(Timer* t, uint32_t delay_ms) { schedule(t, clock_ms_ + delay_ms); }

  void cancel(Timer* t) {
    if (!t->pending()) return;
    unlink(&t->link);
    --pending_;
  }

  // Fires every timer due at or before `now_ms`, in expiry order (timers due the same
  // millisecond in the order they were armed), doing at most `budget` units of work (a timer
  // fired or a timer moved by a cascade; budget >= 1). What is left is carried over: the next
  // call continues where this one stopped, before anything newer. Returns the timers fired.
  uint32_t advance(uint32_t now_ms, uint32_t budget, void* ctx) {
    if (int32_t(now_ms - clock_ms_) > 0) clock_ms_ = now_ms;
    uint32_t work = 0;
    uint32_t fired = 0;
    for (;;) {
      while (expired_.next != &expired_) {
        if (work >= budget) return fired;
        Timer* t = timer_of(expired_.next);
        unlink(&t->link);
        --pending_;
        ++work;
        ++fired;
        t->fn(t, ctx);
      }
      if (int32_t(now_ms - now_) < 0) return fired;
      if ((now_ & (kL0Slots - 1)) != 0 && skip_empty(now_ms)) continue;
      if (!cascade(&work, budget)) return fired;
      const uint32_t slot = now_ & (kL0Slots - 1);
      splice(&l0_[slot], &expired_);
      l0_map_[slot >> 6] &= ~(uint64_t(1) << (slot & 63));
      ++now_;
    }
  }

  // True when every tick up to the last advance()'s now_ms has been processed and fired.
  bool caught_up() const {
    return expired_.next == &expired_ && int32_t(clock_ms_ - now_) < 0;
  }
  uint32_t pending_count() const { return pending_; }
  uint32_t clock_ms() const { return clock_ms_; }

 private:
  static void reset(TimerLink* h) { h->next = h->prev = h; }
  static Timer* timer_of(TimerLink* l) {
    return reinterpret_cast<Timer*>(reinterpret_cast<char*>(l) - offsetof(Timer, link));
  }
  static void unlink(TimerLink* n) {
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = nullptr;
  }
  static void append(TimerLink* head, TimerLink* n) {
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
  }
  // Moves every node of list `from` to the tail of list `to`, in O(1).
  static void splice(TimerLink* from, TimerLink* to) {
    if (from->next == from) return;
    TimerLink* first = from->next;
    TimerLink* last = from->prev;
    first->prev = to->prev;
    to->prev->next = first;
    last->next = to;
    to->prev = last;
    reset(from);
  }

  // Files a timer by its distance from the next tick to process (now_).
  void file(Timer* t) {
    const int32_t delta = int32_t(t->expires_ms - now_);
    if (delta < int32_t(kL0Slots)) {
      const uint32_t slot = (delta < 0 ? now_ : t->expires_ms) & (kL0Slots - 1);
      append(&l0_[slot], &t->link);
      l0_map_[slot >> 6] |= uint64_t(1) << (slot & 63);
      return;
    }
    uint32_t at = t->expires_ms;
    if (uint32_t(delta) >= kMaxFiledDelayMs) at = now_ + kMaxFiledDelayMs - 1;
    uint32_t level = 0;
    while (level + 1 < kUpperLevels &&
           uint32_t(delta) >= (1u << (kL0Bits + (level + 1) * kLnBits))) {
      ++level;
    }
    const uint32_t shift = kL0Bits + level * kLnBits;
    append(&ln_[level][(at >> shift) & (kLnSlots - 1)], &t->link);
  }

  // At a tick where level 0 wraps, re-files the due slot of each upper level that wraps too,
  // top level first (what it re-files may land in a lower slot due this very tick). Stops when
  // the budget runs out: a later call resumes the same tick, and re-running a cascade that is
  // partly done only moves what is left (nothing new can be filed into a slot that is due).
  bool cascade(uint32_t* work, uint32_t budget) {
    if ((now_ & (kL0Slots - 1)) != 0) return true;
    // ln_[0]'s due slot is cascaded at every level-0 wrap; ln_[k + 1]'s when ln_[k] wraps too.
    uint32_t top = 0;
    while (top + 1 < kUpperLevels && ((now_ >> (kL0Bits + top * kLnBits)) & (kLnSlots - 1)) == 0) {
      ++top;
    }
    for (uint32_t level = top + 1; level-- > 0;) {
      TimerLink* head = &ln_[level][(now_ >> (kL0Bits + level * kLnBits)) & (kLnSlots - 1)];
      while (head->next != head) {
        if (*work >= budget) return false;
        Timer* t = timer_of(head->next);
        unlink(&t->link);
        file(t);
        ++*work;
      }
    }
    return true;
  }

  // From a tick inside a level-0 round: jumps over ticks whose slots are empty, up to the next
  // round boundary (where a cascade is due) or past now_ms. True when it moved.
  bool skip_empty(uint32_t now_ms) {
    const uint32_t from = now_ & (kL0Slots - 1);
    uint32_t next = kL0Slots;  // the first non-empty slot at or after `from`
    for (uint32_t w = from >> 6; w < kL0Slots / 64; ++w) {
      uint64_t bits = l0_map_[w];
      if (w == from >> 6) bits &= ~uint64_t(0) << (from & 63);
      if (bits != 0) {
        next = w * 64 + uint32_t(__builtin_ctzll(bits));
        break;
      }
    }
    if (next == from) return false;
    uint32_t target = now_ - from + next;  // the tick of that slot, or the next boundary
    if (int32_t(target - (now_ms + 1)) > 0) target = now_ms + 1;
    if (target == now_) return false;
    now_ = target;
    return true;
  }

  TimerLink l0_[kL0Slots];
  TimerLink ln_[kUpperLevels][kLnSlots];
  TimerLink expired_;
  uint64_t l0_map_[kL0Slots / 64] = {};  // level-0 slots that may hold timers
  uint32_t now_ = 0;       // the next tick to process
  uint32_t clock_ms_ = 0;  // the latest now_ms given to advance()
  uint32_t pending_ = 0;
};

}  // namespace meshgate::dp::tcp
