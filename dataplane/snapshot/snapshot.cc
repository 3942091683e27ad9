#include "dataplane/snapshot/snapshot.h"

#include <rte_lpm.h>
#include <rte_lpm6.h>

namespace meshgate::dp {

void snapshot_free(Snapshot* s) {
  if (!s) return;
  if (s->lpm4) rte_lpm_free(s->lpm4);
  if (s->lpm6) rte_lpm6_free(s->lpm6);
  delete s;
}

}  // namespace meshgate::dp
