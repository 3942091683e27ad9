// The one pointer through which workers see the current Snapshot (immutable, swapped whole,
// freed after a grace period): the control thread stores with release, workers load with
// acquire once per burst.
#pragma once

#include <atomic>

#include "dataplane/snapshot/snapshot.h"

namespace meshgate::dp {

struct SnapshotSlot {
  std::atomic<const Snapshot*> current{nullptr};
  const Snapshot* load() const { return current.load(std::memory_order_acquire); }
};

}  // namespace meshgate::dp
