// The service stage, per worker. A tracked packet (TCP, UDP, echo) with a flow here is
// translated by it, in burst order (a reply right behind the packet that created its flow
// finds it; a later packet may evict it); without one, a service of its VIP may start one
// (Maglev picks the backend) or the packet goes on: handed to the worker that owns its flow,
// to the TCP stack, translated statelessly, to the local stage, or dropped with its reason.
// Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/lb/service_decision.h"
#include "dataplane/worker/context.h"

namespace meshgate::dp {

// Packets whose next step is kNextFlow.
void stage_flow(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);
// Packets whose next step is kNextMiss (no flow here) or kNextLookup (untracked).
void stage_lookup(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);

}  // namespace meshgate::dp
