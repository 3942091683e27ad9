// The burst's way in, per worker: frames are checked (our MAC, VLAN tag restored) and parsed
// into PacketMeta (stage_parse), then classified into their next stage: ARP, NDP, ICMP error,
// tracked (conntrack lookup, its buckets prefetched) or untracked (stage_classify). The martian
// checks are pure functions of the snapshot (tests/unit/martian_test.cc).
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// in_port: the receiving port's index, or kFromHandoff for packets from another worker.
inline constexpr uint16_t kFromHandoff = 0xffff;

void stage_parse(WorkerCtx& c, Burst& b, uint16_t in_port, rte_mbuf** pkts, uint16_t n);
void stage_classify(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);

// A port address, VIP or fullnat address of the gateway.
bool is_local_like(const Snapshot& s, const IpAddr& a);
// A limited, port-subnet or multicast address: what a frame to a group MAC may carry.
bool is_group_address(const Snapshot& s, const IpAddr& a, bool v4);
// The martian checks of a packet that would start a flow or reach a local handler: its
// destination (RFC 1812 §5.3.7, RFC 4291 §2.5, directed broadcasts) and its source against
// the gateway's own addresses and subnet broadcasts. Drop::kNone when it is neither.
// A packet of an established flow needs none: its flow passed them when it was created.
Drop martian(const Snapshot& s, const PacketMeta& m);

}  // namespace meshgate::dp
