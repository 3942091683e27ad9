// The service stage, per worker. A tracked packet (TCP, UDP, echo) with a flow here is
// translated by it, in burst order (a reply right behind the packet that created its flow
// finds it; a later packet may evict it); without one, a service of its VIP may start one
// (Maglev picks the backend) or the packet goes on: handed to the worker that owns its flow,
// to the TCP stack, translated statelessly, to the local stage, or dropped with its reason.
// Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// The service a packet addresses: by VIP:port:protocol, or for an echo request the VIP's echo
// service; nullptr when none.
inline const SnapService* service_of(const Snapshot* snap, const PacketMeta& m) {
  if (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp) {
    return snap->find_service(m.dst, m.dport, m.l4_proto);
  }
  return is_echo_request(m) ? snap->echo_service(m.dst) : nullptr;
}

// What the service stage does with a tracked packet.
enum class FlowAction : uint8_t {
  kForward,      // of its flow, client -> backend
  kReverse,      // of its flow, backend -> client
  kRemoveFlow,   // its flow's backend was removed with reset: the flow goes, the packet drops
  kTtlExceeded,  // its TTL runs out here: an ICMP time exceeded back, the packet drops
  kNewFlow,      // starts a flow to `backend` of `service`
  kStack,        // to the TCP stack (a proxy service)
  kMiss,         // no flow, no service: another worker's flow, local, or nothing
  kDrop,         // `drop` says why
};
struct FlowVerdict {
  FlowAction action = FlowAction::kDrop;
  Drop drop = Drop::kNone;
  const SnapService* service = nullptr;  // kNewFlow
  const SnapBackend* backend = nullptr;  // kNewFlow: Maglev's pick for the packet's hash
};
// The packet's flow in this worker's table, if any, and the packet's direction in it.
struct FlowHit {
  const Flow* flow = nullptr;
  FlowDir dir = FlowDir::kOriginal;
};
// The service stage's decision for a tracked packet (TCP, UDP, echo): a pure function of the
// snapshot, the packet, its flow hash and flow, the drain state and whether this worker runs a
// TCP stack. Tested as a table (tests/unit/service_decision_test.cc).
FlowVerdict decide_flow(const Snapshot& s, const PacketMeta& m, uint32_t flow_hash, FlowHit hit,
                        bool draining, bool stack);

// Packets whose next step is kNextFlow.
void stage_flow(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);
// Packets whose next step is kNextMiss (no flow here) or kNextLookup (untracked).
void stage_lookup(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);

}  // namespace meshgate::dp
