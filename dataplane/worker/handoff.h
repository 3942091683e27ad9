// Packets of flows another worker owns. Flows belong to the worker that saw their first
// packet; a packet of a flow owned elsewhere (a DNAT reply whose tuple RSS sent to another
// queue, a fullnat reply, an ICMP error) is passed to the owner through a bounded SPSC ring:
// fullnat source ports encode their owner (port % workers); DNAT replies go first to the
// worker software RSS predicts for the flow's original tuple, then to each worker not yet
// visited (a bit mask travels with the mbuf). Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// Where a packet of a flow this worker does not hold goes next (reply view: `src` is the
// backend, `dst` the client or fullnat address), or -1.
int handoff_target(const WorkerCtx& c, const IpAddr& src, uint16_t sport_be, const IpAddr& dst,
                   uint16_t dport_be, uint8_t proto, uint32_t visited);
// Packet i goes to worker `target` (marked visited by this one).
void handoff(WorkerCtx& c, Burst& b, uint16_t i, int target, rte_mbuf* m);

}  // namespace meshgate::dp
