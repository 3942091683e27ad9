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

// The Maglev hash of a session-affinity service's new flows: the flow hash of the client's
// address to the service's VIP:port with source port 0, the same on every worker and every
// gateway: lb_flow_hash reproduces it anywhere (tests/support/frames.h expected_backend).
inline uint32_t affinity_hash(const IpAddr& client, const SnapService& svc) {
  return lb_flow_hash(client, svc.vip, 0, svc.port_be, svc.proto);
}

// The Maglev choice of `svc` for a new flow of the packet (its client address for a
// session-affinity service, else its flow hash), or nullptr when no backend may take one.
inline const SnapBackend* maglev_pick(const Snapshot& s, const SnapService& svc,
                                      const PacketMeta& m, uint32_t flow_hash) {
  // Session affinity: the client's address, not its 5-tuple, picks the slot, so every
  // gateway of a fleet makes the same choice for a client it has no state of
  // (lb/affinity.h keeps a choice when the backends change).
  const uint32_t h = MG_UNLIKELY(svc.affinity_timeout_ms != 0)
                         ? affinity_hash(m.src, s.affinity_owner(svc))
                         : flow_hash;
  const uint32_t bi = svc.table_size ? lb_lookup(svc.table, svc.table_size, h) : kNoBackend;
  return bi == kNoBackend ? nullptr : &s.backends[svc.first_backend + bi];
}

struct FlowVerdict;
inline bool move_udp_flow(const Snapshot& s, const PacketMeta& m, uint32_t flow_hash,
                          FlowVerdict* v);

// What the service stage does with a tracked packet.
enum class FlowAction : uint8_t {
  kForward,      // of its flow, client -> backend
  kReverse,      // of its flow, backend -> client
  kRemoveFlow,   // its flow's backend was removed with reset: the flow goes, the packet drops
  kMoveFlow,     // its UDP flow's backend left or is unhealthy: the flow goes, and the packet
                 // starts a new one to `backend` of `service` (nothing dropped)
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
    else if (MG_UNLIKELY(hit.flow->proto == kProtoUdp && hit.dir == FlowDir::kOriginal &&
                         s.stale_backend(hit.flow->stat_id)) &&
             move_udp_flow(s, m, flow_hash, &v))
      v.action = FlowAction::kMoveFlow;
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
  if (const Drop d = new_flow_source(m); MG_UNLIKELY(d != Drop::kNone)) {
    v.drop = d;
    return v;
  }
  if (MG_UNLIKELY(svc->source_ranges != 0) && !s.source_allowed(*svc, m.src)) {
    v.drop = Drop::kSourceDenied;
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
  const SnapBackend* be = maglev_pick(s, *svc, m, flow_hash);
  if (!be) {
    v.drop = svc->all_unhealthy ? Drop::kNoHealthyBackend : Drop::kNoBackend;
    return v;
  }
  if (MG_UNLIKELY(source_is_own_backend(s, *svc, m, *be))) {
    v.drop = Drop::kSourceIsBackend;
    return v;
  }
  v.action = FlowAction::kNewFlow;
  v.service = svc;
  v.backend = be;
  return v;
}

// A client packet of a UDP flow whose backend left its service or is unhealthy: the service
// its destination still names and that service's live choice for it go into `v`; false (the
// flow keeps its backend) when the service is gone, takes no new flows from the client, or has
// no live backend. UDP has no connection a backend could lose: kube-proxy's stale conntrack
// entries black-hole such flows until they time out; here the next packet moves.
inline bool move_udp_flow(const Snapshot& s, const PacketMeta& m, uint32_t flow_hash,
                          FlowVerdict* v) {
  const SnapService* svc = s.find_service(m.dst, m.dport, m.l4_proto);
  if (!svc || svc->mode == Mode::kProxy || !s.source_allowed(*svc, m.src)) return false;
  const SnapBackend* be = maglev_pick(s, *svc, m, flow_hash);
  if (!be) return false;
  v->service = svc;
  v->backend = be;
  return true;
}

}  // namespace meshgate::dp
