// Translation of a flow's packets: client to backend by the flow's mode (dnat, fullnat, DSR),
// backend to client and stateless replies
// (dataplane/nat/translate.h).
#include "dataplane/nat/translate.h"

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include "dataplane/lb/lb.h"
#include "dataplane/lb/service_stage.h"
#include "dataplane/nat/icmp_stage.h"
#include "dataplane/nat/nat.h"
#include "dataplane/packet/parse.h"
#include "dataplane/route/route.h"
#include "dataplane/worker/classify.h"

namespace meshgate::dp {

bool reverse_stateless(WorkerCtx& c, Burst& b, rte_mbuf* mb, uint16_t i) {
  PacketMeta& m = b.meta[i];
  // A client is never one of the gateway's own addresses (a reply to a fullnat address
  // without a flow is just that).
  if (m.is_fragment() || (m.l4_proto != kProtoTcp && m.l4_proto != kProtoUdp) ||
      is_local_like(*c.snap, m.dst)) {
    return false;
  }
  uint32_t count = 0;
  const uint32_t* svcs = c.snap->services_of_backend(m.src, m.sport, m.l4_proto, &count);
  for (uint32_t k = 0; k < count; ++k) {
    const SnapService& s = c.snap->services[svcs[k]];
    if (s.mode != Mode::kDnat || !s.table_size || s.vip.is_v4() != m.dst.is_v4()) continue;
    // The client's packets hashed (client, VIP, ports) to pick their backend: the same pick
    // for the reversed reply says it is this service's connection (a backend serving several
    // VIPs is told apart by it, unless two of them pick it for the same client tuple).
    const uint32_t h = FlowTable::hash(Tuple{m.dst, s.vip, m.dport, s.port_be, m.l4_proto});
    const uint32_t bi = lb_lookup(s.table, s.table_size, h);
    if (bi == kNoBackend) continue;
    const SnapBackend& be = c.snap->backends[s.first_backend + bi];
    if (be.port_be != m.sport || !(be.address == m.src)) continue;
    if (m.ttl <= 1) {
      drop_ttl_exceeded(c, b, mb, i);
      return true;
    }
    counter_add(c.counters.stateless_packets, 1);
    nat_rewrite<false>(rte_pktmbuf_mtod(mb, uint8_t*), &m, s.vip, s.port_be);
    to_route<true>(c, b, mb, i, WorkerCtx::stat_slot(be));
    return true;
  }
  return false;
}



}  // namespace meshgate::dp
