// ICMP errors in the stages, per worker: an error about a packet the gateway translated is
// translated back through the flow it quotes (or handed to the worker owning that flow); the
// gateway's own errors (time exceeded, fragmentation needed / packet too big) are built,
// translated the same way, rate limited (Linux icmp_ratelimit) and sent in the place of the
// packet they are about, so output keeps input order. Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// Translates or hands over packets whose next step is kNextIcmpError.
void stage_icmp_error(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);
// Translates the ICMP error in `m` through the flow its quote belongs to; false if none here
// (then *handoff_to is the worker to try, or -1).
bool translate_icmp_error(WorkerCtx& c, rte_mbuf* m, PacketMeta& meta, int* handoff_to,
                          uint32_t visited);
// Sends an ICMP error about packet `m` at burst position `i`. It leaves in the position of
// `m` (which the caller drops). Rate limited.
void send_icmp_error(WorkerCtx& c, Burst& b, const rte_mbuf* m, const PacketMeta& meta,
                     uint16_t i, uint8_t type, uint8_t code, uint32_t mtu);
// Packet i's TTL (hop limit) runs out here: an ICMP time exceeded to its source (rate
// limited) and the drop.
void drop_ttl_exceeded(WorkerCtx& c, Burst& b, const rte_mbuf* m, uint16_t i);

}  // namespace meshgate::dp
