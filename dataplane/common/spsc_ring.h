// A bounded single-producer / single-consumer ring of fixed-size records, filled in place.
//
// The producer (a worker) reserves the next slot, writes the record into it and commits; the
// consumer (the control thread) peeks at the oldest committed slot, reads it and pops it. A
// full ring refuses the reservation and counts a drop: the producer never waits.
//
// Why not rte_ring: an rte_ring carries pointers (or small elements copied in), so records of a
// few hundred bytes would need a second pool with its own free list shared by both threads;
// here the slots are the records, written once by the producer and read once by the consumer,
// and the ring needs no EAL (unit tests build it on the heap).
//
// Threads: reserve() / commit() on the one producer thread; front() / pop() on the one
// consumer thread; dropped(), size() from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace meshgate::dp {

template <typename T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "ring records are copied without constructors");

 public:
  // `capacity` records, rounded up to a power of two (at least 2).
  explicit SpscRing(uint32_t capacity) {
    uint32_t n = 2;
    while (n < capacity) n <<= 1;
    mask_ = n - 1;
    slots_.reset(new T[n]());
  }
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  uint32_t capacity() const { return mask_ + 1; }

  // Producer: the slot for the next record, or nullptr when the ring is full (counted in
  // dropped()). Nothing is visible to the consumer until commit().
  T* reserve() {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ > mask_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ > mask_) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return nullptr;
      }
    }
    return &slots_[head & mask_];
  }
  // Producer: publishes the slot reserve() returned last.
  void commit() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Consumer: the oldest committed record, or nullptr when the ring is empty.
  const T* front() {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_cache_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (tail == head_cache_) return nullptr;
    }
    return &slots_[tail & mask_];
  }
  // Consumer: frees the record front() returned.
  void pop() { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Records refused because the ring was full.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Committed records not popped yet (a moment's view).
  uint64_t size() const {
    return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire);
  }

 private:
  // Producer and consumer indices on their own cache lines, each with its copy of the other's
  // (refreshed only when the ring looks full / empty), so neither side's steady state reads the
  // other's line.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  uint64_t head_cache_ = 0;
  alignas(64) uint32_t mask_ = 0;
  std::unique_ptr<T[]> slots_;
};

}  // namespace meshgate::dp
