// Publishes snapshots to workers without locks: one atomic pointer store (release), and the
// previous snapshot is freed only after every registered worker reported a quiescent state
// since the swap (rte_rcu_qsbr tokens). Control thread only.
#pragma once

#include <cstdint>
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

 private:
  dp::SnapshotSlot slot_;
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::vector<std::pair<uint64_t, const dp::Snapshot*>> retired_;
};

}  // namespace meshgate::ctl
