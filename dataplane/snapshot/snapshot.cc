#include "dataplane/snapshot/snapshot.h"

#include <rte_lpm.h>
#include <rte_lpm6.h>

namespace meshgate::dp {

RouteTables::~RouteTables() {
  if (lpm4) rte_lpm_free(lpm4);
  if (lpm6) rte_lpm6_free(lpm6);
}

void snapshot_free(Snapshot* s) { delete s; }

}  // namespace meshgate::dp
