// The service stage: a tracked packet's flow (translated in burst order), or the service and
// backend that start one; packets without a flow here (another worker's, a later fragment,
// a stateless reply, local) (dataplane/lb/service_stage.h).
#include "dataplane/lb/service_stage.h"

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include "dataplane/lb/affinity.h"
#include "dataplane/lb/lb.h"
#include "dataplane/lb/tcp_reset.h"
#include "dataplane/local/local_stage.h"
#include "dataplane/nat/icmp_stage.h"
#include "dataplane/nat/translate.h"
#include "dataplane/worker/classify.h"
#include "dataplane/worker/handoff.h"

namespace meshgate::dp {
namespace {


Drop follow_fragment(WorkerCtx& c, Burst& b, rte_mbuf* mb, uint16_t i) {
  PacketMeta& m = b.meta[i];
  const FragTable::Entry* e = c.frags->find(m.src, m.dst, m.l4_proto, m.ip_id, c.now_ms());
  if (!e) return Drop::kFragmentNoFirst;
  Flow* f = c.flows.mutable_at(e->flow_idx);
  if (!f || c.flows.created_ms(*f) != e->flow_created) return Drop::kFragmentNoFirst;
  if (m.ttl <= 1) return Drop::kTtlExceeded;
  counter_add(c.counters.fragments_followed, 1);
  if (FlowDir(e->dir) == FlowDir::kReply) {
    reverse(c, b, mb, i, f);
  } else {
    forward_flow(c, b, mb, i, f);
  }
  return Drop::kNone;
}

// A first fragment (it has the ports) of a datagram whose first fragment, with other ports,
// started or found a flow that is still there: its later fragments follow that flow, and this
// one would take them to a second (frag.h).
bool duplicate_first_fragment(WorkerCtx& c, const Tuple& t, uint32_t ip_id, uint32_t now_ms) {
  const FragTable::Entry* e = c.frags->find(t.src, t.dst, t.proto, ip_id, now_ms);
  if (!e || (e->sport == t.sport && e->dport == t.dport)) return false;
  const Flow* f = c.flows.mutable_at(e->flow_idx);
  return f && c.flows.created_ms(*f) == e->flow_created;
}

}  // namespace

namespace {

// Starts the flow `v` chose for packet i (or forwards it statelessly when the table is full).
MG_ALWAYS_INLINE void start_flow(WorkerCtx& c, Burst& b, rte_mbuf* mb, uint16_t i, const Tuple& t,
                                 const FlowVerdict& v, uint32_t now_ms) {
  const PacketMeta& m = b.meta[i];
  const uint32_t h = b.hash[i];
  const SnapService& svc = *v.service;
  const SnapBackend& be = *v.backend;
  const bool echo = m.l4_proto == kProtoIcmp || m.l4_proto == kProtoIcmp6;
  FlowTarget to;
  to.backend = be.address;
  // An echo keeps its identifier toward the backend (fullnat picks a new one below).
  to.backend_port = echo ? m.sport : be.port_be;
  to.vip_id = svc.vip_id;
  to.stat_id = WorkerCtx::stat_slot(be);
  to.mode = svc.mode;
  if (to.mode == Mode::kFullnat) {
    Drop why;
    if (!c.fullnat.pick(*c.snap, be.address, to.backend_port, m.l4_proto, h, &to, &why)) {
      b.set_drop(i, why);
      return;
    }
  }
  Flow* f = c.flows.insert(t, to, now_ms);
  if (f) {
    counter_add(c.backend_counters[to.stat_id].flows, 1);
    counter_add(c.counters.flows_created, 1);
    forward_flow(c, b, mb, i, f);
    if (m.is_fragment()) {
      c.frags->remember(t.src, t.dst, t.sport, t.dport, t.proto, m.ip_id, c.flows.index_of(f),
                        c.flows.created_ms(*f), uint8_t(FlowDir::kOriginal), now_ms);
    }
  } else if (to.mode == Mode::kFullnat) {
    // Without an entry a fullnat reply could not be translated back.
    b.set_drop(i, Drop::kFlowTableFull);
  } else {
    // Table full: the packet still goes to the backend Maglev picks, the one it would have
    // had (stateless forwarding, like Katran).
    counter_add(c.counters.stateless_packets, 1);
    if (is_dsr(to.mode)) {
      b.egress[i].gue = to.mode == Mode::kDsrGue;
      b.egress[i].gue_port_be = svc.gue_port_be;
    }
    forward(c, b, mb, i, to, h);
  }
}

}  // namespace

void stage_flow(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n) {
  const uint32_t now_ms = c.now_ms();
  uint32_t started = 0;
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] != kNextFlow) continue;
    const PacketMeta& m = b.meta[i];
    rte_mbuf* mb = pkts[i];
    const Tuple t{m.src, m.dst, m.sport, m.dport, m.l4_proto};
    if (MG_UNLIKELY(m.is_fragment()) && duplicate_first_fragment(c, t, m.ip_id, now_ms)) {
      b.set_drop(i, Drop::kFragmentDuplicateFirst);
      continue;
    }
    FlowDir dir = FlowDir::kOriginal;
    Flow* f = c.flows.lookup(t, b.hash[i], b.bp[i], now_ms, &dir);
    const FlowVerdict v =
        decide_flow(*c.snap, m, b.hash[i], FlowHit{f, dir}, c.draining, c.proxy != nullptr);
    switch (v.action) {
      case FlowAction::kForward:
      case FlowAction::kReverse:
        // Translated now, in burst order with the other direction's packets: the state
        // follows the wire (an ACK right behind its SYN-ACK), and a later packet of this burst
        // may evict the flow to make room.
        if (v.action == FlowAction::kReverse) reverse(c, b, mb, i, f);
        else forward_flow(c, b, mb, i, f);
        if (m.is_fragment()) {
          // Keyed by the addresses as they arrived (`m` now holds the translated ones).
          c.frags->remember(t.src, t.dst, t.sport, t.dport, t.proto, m.ip_id, c.flows.index_of(f),
                            c.flows.created_ms(*f), uint8_t(dir), now_ms);
        }
        break;
      case FlowAction::kRemoveFlow:
        c.flows.remove(f);
        b.set_drop(i, Drop::kBackendRemoved);
        break;
      case FlowAction::kTtlExceeded:
        drop_ttl_exceeded(c, b, mb, i);
        break;
      case FlowAction::kMoveFlow:
        // The old entry goes first: the new one takes the same tuple.
        counter_add(c.counters.flows_moved, 1);
        c.flows.remove(f);
        [[fallthrough]];
      case FlowAction::kNewFlow:
        if (MG_UNLIKELY(v.service->affinity_timeout_ms != 0) && c.p.affinity) {
          FlowVerdict sticky = v;
          sticky.backend = c.p.affinity->choose(*c.snap, *v.service, m.src, v.backend, now_ms);
          start_flow(c, b, mb, i, t, sticky, now_ms);
        } else {
          start_flow(c, b, mb, i, t, v, now_ms);
        }
        ++started;
        break;
      case FlowAction::kStack:
        b.next[i] = kNextStack;
        break;
      case FlowAction::kMiss:
        b.next[i] = kNextMiss;
        break;
      case FlowAction::kDrop:
        // A drain refuses new connections out loud: the client tries another gateway now,
        // not after its SYN retransmission timeouts.
        if (v.drop == Drop::kDraining && refusable_syn(m)) send_tcp_reset(c, b, mb, i);
        b.set_drop(i, v.drop);
        break;
    }
  }
  // A burst of new flows is likely followed by another (a flood, a load test).
  if (started) c.flows.prefetch_evictions(started);
}

void stage_lookup(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n) {
  if (!b.next_mask(n, kNextLookup, kNextMiss)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] != kNextLookup && b.next[i] != kNextMiss) continue;
    const PacketMeta& m = b.meta[i];
    if (b.next[i] == kNextLookup && m.is_fragment() && !m.has_l4()) {
      const Drop d = follow_fragment(c, b, pkts[i], i);
      if (d != Drop::kNone && to_host_twin(c, b, i)) continue;  // the kernel reassembles
      if (d != Drop::kNone) {
        b.next[i] = kNextDrop;
        // To the gateway itself fragments are not reassembled; elsewhere the datagram's first
        // fragment (with the ports) is missing.
        const bool own = c.snap->local_port(m.dst) >= 0;
        b.drop[i] = d == Drop::kFragmentNoFirst && own ? Drop::kFragmentUnsupported : d;
      }
      continue;
    }
    if (b.next[i] == kNextMiss && c.hbone && m.l4_proto == kProtoTcp &&
        m.dport == c.hbone_port_be && c.snap->local_port(m.dst) >= 0 && !m.is_fragment()) {
      // HBONE to a local address: the stack's listener. The client's packets all reach the
      // worker RSS picked for its connection.
      b.next[i] = kNextStack;
      continue;
    }
    if (b.next[i] == kNextMiss && c.p.host_out && !c.snap->is_fullnat_address(m.dst) &&
        !c.snap->is_vip(m.dst) && to_host_twin(c, b, i)) {
      // To the address of a port with a twin, with no flow and no service: the kernel's
      // connection (a health check's SYN-ACK from a backend, a BGP session), never a reply of
      // ours to translate or another worker's.
      continue;
    }
    if (b.next[i] == kNextMiss) {
      // No flow here: another worker's (replies hash independently of their flow's first
      // packet), or none. Echo requests never belong to another worker's flow: they start
      // flows or get answered.
      const int target = is_echo_request(m) ? -1
                                            : handoff_target(c, m.src, m.sport, m.dst, m.dport,
                                                             m.l4_proto, b.visited[i]);
      if (target >= 0) {
        handoff(c, b, i, target, pkts[i]);
        continue;
      }
      if (c.proxy && m.l4_proto == kProtoTcp && c.snap->is_fullnat_address(m.dst) &&
          !m.is_fragment()) {
        b.next[i] = kNextStack;  // the backend side of a proxied connection (or a stray: RST)
        continue;
      }
      if (!is_echo_request(m) &&
          (c.snap->is_fullnat_address(m.dst) || c.snap->is_backend(m.src, m.sport, m.l4_proto))) {
        if (!reverse_stateless(c, b, pkts[i], i)) {
          b.next[i] = kNextDrop;
          b.drop[i] = Drop::kReplyNoFlow;
        }
        continue;
      }
    }
    if (is_local_like(*c.snap, m.dst)) {
      b.next[i] = kNextLocal;
    } else {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kNoService;
    }
  }
}


}  // namespace meshgate::dp
