// Connection lookup by 4-tuple: open addressing with linear probing over (hash, index) slots,
// deletion by backward shift (no tombstones, so lookups never slow down with churn). The keys
// live in the TCBs; the caller's `eq(index)` compares them. Capacity is a power of two at least
// twice the connection limit, so the load factor stays at or below 1/2.
//
// Per worker, sized once at setup (the only allocation); no locks.
#pragma once

#include <cstdint>
#include <vector>

namespace meshgate::dp::tcp {

class ConnTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  void init(uint32_t max_entries) {
    uint32_t cap = 16;
    while (cap < 2 * max_entries) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }

  template <class Eq>
  uint32_t find(uint32_t hash, Eq eq) const {
    for (uint32_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.idx1 == 0) return kNone;
      if (s.hash == hash && eq(s.idx1 - 1)) return s.idx1 - 1;
    }
  }

  // The caller guarantees room (at most max_entries) and that the key is not present.
  void insert(uint32_t hash, uint32_t idx) {
    uint32_t i = hash & mask_;
    while (slots_[i].idx1 != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{hash, idx + 1};
  }

  void erase(uint32_t hash, uint32_t idx) {
    uint32_t i = hash & mask_;
    while (slots_[i].idx1 != idx + 1) {
      if (slots_[i].idx1 == 0) return;
      i = (i + 1) & mask_;
    }
    // Backward shift: move later entries of the cluster into the hole when their home slot
    // does not lie cyclically in (hole, j].
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask_; slots_[j].idx1 != 0; j = (j + 1) & mask_) {
      const uint32_t home = slots_[j].hash & mask_;
      const bool stays = ((j - home) & mask_) < ((j - hole) & mask_);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
  }

 private:
  struct Slot {
    uint32_t hash = 0;
    uint32_t idx1 = 0;  // index + 1; 0 = empty
  };
  std::vector<Slot> slots_;
  uint32_t mask_ = 0;
};

}  // namespace meshgate::dp::tcp
