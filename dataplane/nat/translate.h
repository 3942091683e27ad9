// Translation of a flow's packets, per worker: a client's packet toward its backend by the
// flow's mode (dnat rewrite, fullnat source and destination rewrite, DSR: marked for the route
// stage's encapsulation), a backend's packet back to the client, a dnat reply without a flow
// (the table was full) translated statelessly, and the fullnat source choice. Each translated
// packet is counted for its backend and goes to the route stage with its TTL to decrement.
// Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/nat/translate_inline.h"
#include "dataplane/worker/context.h"

namespace meshgate::dp {

// A backend's packet without a flow, of a dnat connection forwarded statelessly (the table
// was full): translated back to the VIP whose Maglev table picks this backend for the
// reversed tuple. False when no service does.
bool reverse_stateless(WorkerCtx& c, Burst& b, rte_mbuf* m, uint16_t i);
// A fullnat source (address id and port of this worker's residue, whose reply RSS steers here
// when it can) for a new flow to `backend`; false with the reason when none is free.
bool pick_fullnat(WorkerCtx& c, const IpAddr& backend, uint16_t backend_port_be, uint8_t proto,
                  uint32_t flow_hash, FlowTarget* to, Drop* why);

}  // namespace meshgate::dp
