#include "dataplane/snapshot/snapshot.h"

#include <rte_lpm.h>
#include <rte_lpm6.h>

#include "dataplane/names/scratch_set.h"

namespace meshgate::dp {

RouteTables::~RouteTables() {
  if (lpm4) rte_lpm_free(lpm4);
  if (lpm6) rte_lpm6_free(lpm6);
}

hs_scratch* Snapshot::name_scratch_for(uint32_t worker) const {
  return name_scratch != nullptr ? name_scratch->for_worker(worker) : nullptr;
}

void snapshot_free(Snapshot* s) { delete s; }

}  // namespace meshgate::dp
