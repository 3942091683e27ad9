#include "control/snapshot/publisher.h"

#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

namespace meshgate::ctl {

SnapshotPublisher::~SnapshotPublisher() { shutdown(); }

bool SnapshotPublisher::init(uint32_t max_workers) {
  const size_t sz = rte_rcu_qsbr_get_memsize(max_workers);
  qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("mg_qsbr", sz, RTE_CACHE_LINE_SIZE));
  if (!qsbr_) return false;
  return rte_rcu_qsbr_init(qsbr_, max_workers) == 0;
}

void SnapshotPublisher::publish(dp::Snapshot* s) {
  const dp::Snapshot* old = slot_.current.exchange(s, std::memory_order_acq_rel);
  if (old) {
    const uint64_t token = rte_rcu_qsbr_start(qsbr_);
    retired_.emplace_back(token, old);
    if (on_retire_) on_retire_(old, token);
  }
  reclaim();
}

size_t SnapshotPublisher::reclaim() {
  size_t kept = 0;
  for (auto& [token, snap] : retired_) {
    // Non-blocking check: 1 when every online worker passed a quiescent state since `token`.
    if (rte_rcu_qsbr_check(qsbr_, token, false) == 1) {
      if (on_free_) on_free_(snap);
      dp::snapshot_free(const_cast<dp::Snapshot*>(snap));
    } else {
      retired_[kept++] = {token, snap};
    }
  }
  retired_.resize(kept);
  return kept;
}

void SnapshotPublisher::shutdown() {
  for (auto& [token, snap] : retired_) {
    if (on_free_) on_free_(snap);
    dp::snapshot_free(const_cast<dp::Snapshot*>(snap));
  }
  retired_.clear();
  dp::snapshot_free(const_cast<dp::Snapshot*>(slot_.current.exchange(nullptr)));
  rte_free(qsbr_);
  qsbr_ = nullptr;
}

}  // namespace meshgate::ctl
