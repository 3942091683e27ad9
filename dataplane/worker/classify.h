// The burst's way in, per worker: frames are checked (our MAC, VLAN tag restored) and parsed
// into PacketMeta (stage_parse), then classified into their next stage: ARP, NDP, the TCP
// stack (a listener or a connection of its own), ICMP error, tracked (conntrack lookup, its
// buckets prefetched) or untracked (stage_classify). The martian checks are in
// worker/martian.h.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"
#include "dataplane/worker/martian.h"

namespace meshgate::dp {

// in_port: the receiving port's index, or kFromHandoff for packets from another worker.
inline constexpr uint16_t kFromHandoff = 0xffff;

void stage_parse(WorkerCtx& c, Burst& b, uint16_t in_port, rte_mbuf** pkts, uint16_t n);
void stage_classify(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);

}  // namespace meshgate::dp
