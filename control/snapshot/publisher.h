// Publishes snapshots to workers without locks: one atomic pointer store (release), and the
// previous snapshot is freed only after every registered worker reported a quiescent state
// since the swap (rte_rcu_qsbr tokens). Control thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "dataplane/snapshot/snapshot_slot.h"

struct rte_rcu_qsbr;

namespace meshgate::ctl {

class SnapshotPublisher {
 public:
  ~SnapshotPublisher();
  // `max_workers`: QSBR thread ids are worker indices 0..max_workers-1.
  bool init(uint32_t max_workers);

  dp::SnapshotSlot* slot() { return &slot_; }
  rte_rcu_qsbr* qsbr() { return qsbr_; }
  const dp::Snapshot* current() const { return slot_.load(); }

  // Takes ownership of `s` and makes it current; the old one is retired.
  void publish(dp::Snapshot* s);
  // Frees retired snapshots whose grace period has passed. Returns how many remain retired.
  size_t reclaim();
  // Frees everything; only after the workers stopped.
  void shutdown();
  // Snapshots replaced and not yet freed.
  size_t retired_count() const { return retired_.size(); }

  // Observers (tests): `on_retire(s, token)` right after `s` was replaced, with the
  // rte_rcu_qsbr_start() token its grace period waits for; `on_free(s)` just before a retired
  // snapshot is freed. Called on the control thread.
  using RetireHook = std::function<void(const dp::Snapshot*, uint64_t token)>;
  using FreeHook = std::function<void(const dp::Snapshot*)>;
  void set_hooks(RetireHook on_retire, FreeHook on_free) {
    on_retire_ = std::move(on_retire);
    on_free_ = std::move(on_free);
  }

 private:
  dp::SnapshotSlot slot_;
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::vector<std::pair<uint64_t, const dp::Snapshot*>> retired_;
  RetireHook on_retire_;
  FreeHook on_free_;
};

}  // namespace meshgate::ctl
