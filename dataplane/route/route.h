// Routing, per worker: the snapshot's LPM tables give a destination's egress port and next hop;
// the next-hop cache (route/nh_cache.h) keeps recent results; a routed packet gets its MTU
// checked (an ICMP error back when it does not fit), its TTL decremented, DSR encapsulation,
// and its L2 header, or waits in the pending queue for its neighbor. Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// Routes packets whose next step is kNextRoute: to kNextTx, kNextPending or kNextDrop.
void stage_route(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);
// Routes one packet: next hop, MTU (with an ICMP error back when it does not fit), TTL,
// DSR encapsulation, neighbor, L2. Returns kNextTx / kNextPending / kNextDrop.
Next route_one(WorkerCtx& c, Burst& b, rte_mbuf* m, PacketMeta& meta, const Egress& eg,
               uint16_t i, uint16_t* out_port, IpAddr* nh, Drop* why);
// Routes `mb`, a packet the gateway made about packet `i` (an ICMP error, a RST; parsed as
// `m`), into slot i's extra packet, so it leaves in i's place; dropped under its reason when
// it cannot be routed.
void route_generated(WorkerCtx& c, Burst& b, rte_mbuf* mb, PacketMeta& m, uint16_t i);
// Sends what waits for a neighbor that resolved; drops what waited too long.
void service_pending(WorkerCtx& c);
// The port a packet to `a` leaves through by the snapshot's routes, or -1 (no route).
int egress_port(const Snapshot& snap, const IpAddr& a);
// Local source address on `port_index` for talking to `peer` (same prefix, else the first of
// its family); nullptr when the port has none of that family.
const IpPrefix* source_for(const WorkerCtx& c, uint16_t port_index, const IpAddr& peer);
bool on_link(const WorkerCtx& c, uint16_t port_index, const IpAddr& a);

}  // namespace meshgate::dp
