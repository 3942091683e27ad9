// The L2 stage and neighbor resolution, per worker: ARP requests and neighbor solicitations for
// the gateway's addresses (port addresses, VIPs, fullnat addresses) are answered in place;
// replies, advertisements and requests teach the neighbor cache (RFC 826 merge, RFC 4861);
// next hops are solicited at most once a second. On a port with a kernel twin (host
// interface), ARP replies and neighbor advertisements go on to the twin once learned, and
// solicitations of a link-local target go to it. Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// Answers or learns from packets whose next step is kNextArp / kNextNdp.
void stage_l2(WorkerCtx& c, Burst& b, uint16_t in_port, rte_mbuf** pkts, uint16_t n);
// The MAC of next hop `nh` on port `port_index` (static neighbors, then the cache); false while
// unresolved (a request goes out, rate limited).
bool resolve(WorkerCtx& c, const IpAddr& nh, uint16_t port_index, MacAddr* mac);
// Records a neighbor; `from_wire`: seen on this worker's port, shared with the other workers.
void learn(WorkerCtx& c, const IpAddr& a, const MacAddr& mac, uint16_t port_index,
           bool from_wire);
// Neighbors learned by other workers.
void drain_neighbor_ring(WorkerCtx& c);

}  // namespace meshgate::dp
