// Packets to the gateway's own addresses (port addresses, VIPs, fullnat addresses) that no
// flow, service or application took: echo requests are answered in place, the rest dropped
// with their reason. Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// Packets whose next step is kNextLocal.
void stage_local(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);

}  // namespace meshgate::dp
