// The service stage's decision for a tracked packet (lb/service_stage.h), a pure function of
// published state: what the packet's flow, or the service its VIP:port names, makes of it.
// Inline: the service stage runs it for every tracked packet on the stages' path.
#pragma once

#include <cstdint>

#include "dataplane/common/compiler.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/lb/lb.h"
#include "dataplane/packet/parse.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/worker/martian.h"

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
// TCP stack. Tested as a table (tests/unit/lb/service_decision_test.cc).
inline FlowVerdict decide_flow(const Snapshot& s, const PacketMeta& m, uint32_t flow_hash,
                               FlowHit hit, bool draining, bool stack) {
  FlowVerdict v;
  if (hit.flow) {
    // Established traffic: the flow says everything; no service lookup. (A tracked flow keeps
    // going after its service left the snapshot.)
    if (m.ttl <= 1)
      v.action = FlowAction::kTtlExceeded;
    else if (s.reset_flows_of(hit.flow->stat_id))
      v.action = FlowAction::kRemoveFlow;
    else
      v.action = hit.dir == FlowDir::kReply ? FlowAction::kReverse : FlowAction::kForward;
    return v;
  }
  // No flow: the packet may start one. (Established flows passed this when created.)
  if (const Drop d = martian(s, m); MG_UNLIKELY(d != Drop::kNone)) {
    v.drop = d;
    return v;
  }
  const SnapService* svc = service_of(&s, m);
  if (!svc) {
    v.action = FlowAction::kMiss;
    return v;
  }
  if (svc->mode == Mode::kProxy) {
    // Terminated by the TCP stack: no conntrack entry.
    if (stack && m.l4_proto == kProtoTcp && !m.is_fragment())
      v.action = FlowAction::kStack;
    else
      v.drop = m.is_fragment() ? Drop::kFragmentUnsupported : Drop::kL4Unsupported;
    return v;
  }
  if (m.ttl <= 1) {
    v.action = FlowAction::kTtlExceeded;
    return v;
  }
  if (draining) {
    v.drop = Drop::kDraining;
    return v;
  }
  const uint32_t bi =
      svc->table_size ? lb_lookup(svc->table, svc->table_size, flow_hash) : kNoBackend;
  if (bi == kNoBackend) {
    v.drop = Drop::kNoBackend;
    return v;
  }
  v.action = FlowAction::kNewFlow;
  v.service = svc;
  v.backend = &s.backends[svc->first_backend + bi];
  return v;
}

}  // namespace meshgate::dp
