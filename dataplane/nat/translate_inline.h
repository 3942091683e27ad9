// The hot part of a flow's translation (nat/translate.h), inline in the stages that call it per
// packet: client to backend by the flow's mode, backend to client. Worker thread only.
#pragma once

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include "dataplane/lb/service_decision.h"
#include "dataplane/nat/nat.h"
#include "dataplane/worker/context.h"

namespace meshgate::dp {

// A translated packet of a backend's flow (either direction, `kReply`: backend to client):
// counted for the backend, then routed with its TTL decremented.
template <bool kReply = false>
MG_ALWAYS_INLINE void to_route(WorkerCtx& c, Burst& b, const rte_mbuf* m, uint16_t i,
                                      uint32_t stat_id) {
  BackendCounters& bc = c.backend_counters[stat_id];
  counter_add(bc.packets, 1);
  counter_add(kReply ? bc.reply_bytes : bc.bytes, m->pkt_len);
  b.egress[i].decrement_ttl = true;
  b.next[i] = kNextRoute;
}

// Translation of a client packet toward its backend by `to`'s mode.
MG_ALWAYS_INLINE void forward(WorkerCtx& c, Burst& b, rte_mbuf* mb, uint16_t i,
                                     const FlowTarget& to, uint32_t flow_hash) {
  PacketMeta& m = b.meta[i];
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  switch (to.mode) {
    case Mode::kFullnat:
      nat_rewrite<false>(data, &m, c.p.addrs->at(to.local_id), to.local_port);
      nat_rewrite<true>(data, &m, to.backend, to.backend_port);
      break;
    case Mode::kDsrIpip:
    case Mode::kDsrGue:
      // The packet stays addressed to the VIP; the route stage wraps it toward the backend.
      b.egress[i].encap = true;
      b.egress[i].tunnel_dst = to.backend;
      b.egress[i].flow_hash = flow_hash;
      break;
    default:
      nat_rewrite<true>(data, &m, to.backend, to.backend_port);
      break;
  }
  to_route(c, b, mb, i, to.stat_id);
}

// The same by the packet's flow (touched first).
MG_ALWAYS_INLINE void forward_flow(WorkerCtx& c, Burst& b, rte_mbuf* mb, uint16_t i,
                                          Flow* f) {
  PacketMeta& m = b.meta[i];
  c.flows.touch(f, FlowDir::kOriginal, m.tcp_flags, c.now_ms());
  if (MG_LIKELY(f->mode == Mode::kDnat)) {
    // forward() for the commonest case, straight from the flow.
    nat_rewrite<true>(rte_pktmbuf_mtod(mb, uint8_t*), &m, f->backend(), f->backend_port);
    to_route(c, b, mb, i, f->stat_id);
    return;
  }
  FlowTarget to;
  to.backend = f->backend();
  to.backend_port = f->backend_port;
  to.stat_id = f->stat_id;
  to.mode = f->mode;
  to.local_id = f->local_id;
  to.local_port = f->local_port;
  uint32_t flow_hash = 0;
  if (is_dsr(f->mode)) {
    const SnapService* svc = service_of(c.snap, m);
    b.egress[i].gue = f->mode == Mode::kDsrGue;
    // The GUE port of the service as it is now; a service gone from the snapshot keeps the
    // default so its flows still reach their backend.
    b.egress[i].gue_port_be = svc ? svc->gue_port_be : uint16_t(htons(6080));
    // Only the tunnel needs the flow hash (outer source port, flow label). A later fragment
    // has no ports to hash: the flow's own tuple gives the same value as its first packet.
    flow_hash = FlowTable::hash(c.flows.original_tuple(*f));
  }
  forward(c, b, mb, i, to, flow_hash);
}

// Reverse translation of a backend's packet by its flow (touched first).
inline void reverse(WorkerCtx& c, Burst& b, rte_mbuf* mb, uint16_t i, Flow* f) {
  PacketMeta& m = b.meta[i];
  c.flows.touch(f, FlowDir::kReply, m.tcp_flags, c.now_ms());
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  nat_rewrite<false>(data, &m, c.flows.vip(*f), f->vip_port);
  if (f->mode == Mode::kFullnat) nat_rewrite<true>(data, &m, f->client(), f->client_port);
  to_route<true>(c, b, mb, i, f->stat_id);
}

}  // namespace meshgate::dp
