// Translation of a flow's packets, per worker: a client's packet toward its backend by the
// flow's mode (dnat rewrite, fullnat source and destination rewrite, DSR: marked for the route
// stage's encapsulation), a backend's packet back to the client, a dnat reply without a flow
// (the table was full) translated statelessly (the fullnat source choice is nat/fullnat_source.h).
// Each translated packet is counted for its backend and goes to the route stage with its TTL to
// decrement. Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/nat/translate_inline.h"
#include "dataplane/worker/context.h"

namespace meshgate::dp {

// A backend's packet without a flow, of a dnat connection forwarded statelessly (the table
// was full): translated back to the VIP whose Maglev table picks this backend for the
// reversed tuple. False when no service does.
bool reverse_stateless(WorkerCtx& c, Burst& b, rte_mbuf* m, uint16_t i);

}  // namespace meshgate::dp
