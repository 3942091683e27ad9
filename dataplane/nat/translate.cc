// Translation of a flow's packets: client to backend by the flow's mode (dnat, fullnat, DSR),
// backend to client, stateless replies, and the fullnat source choice
// (dataplane/nat/translate.h).
#include "dataplane/nat/translate.h"

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include "dataplane/lb/lb.h"
#include "dataplane/lb/service_stage.h"
#include "dataplane/nat/icmp_stage.h"
#include "dataplane/nat/nat.h"
#include "dataplane/packet/parse.h"
#include "dataplane/proxy/proxy.h"
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
    to_route(c, b, mb, i, WorkerCtx::stat_slot(be));
    return true;
  }
  return false;
}

bool pick_fullnat(WorkerCtx& c, const IpAddr& backend, uint16_t backend_port_be, uint8_t proto,
                          uint32_t flow_hash, FlowTarget* to, Drop* why) {
  const std::vector<LocalNat>& pool = backend.is_v4() ? c.snap->fullnat_v4 : c.snap->fullnat_v6;
  if (pool.empty()) {
    *why = Drop::kFullnatNoAddress;
    return false;
  }
  const LocalNat& local = pool[flow_hash % pool.size()];
  // The reply (backend -> local:port) arrives on the port toward the backend; its RSS decides
  // which queue, i.e. which worker, sees it.
  const int port = egress_port(c, backend);
  const RssPredictor* rss = port >= 0 && !c.p.flow_steered[port] ? c.p.rss[port] : nullptr;
  const uint32_t fixed = rss ? rss->fixed_hash(backend, local.address, backend_port_be) : 0;
  const bool v4 = backend.is_v4();
  // Only ports of this worker's residue (port % workers == index): any worker receiving a
  // reply knows its owner from the destination port alone.
  const uint32_t nw = c.p.n_workers;
  const uint32_t first = kFullnatFirstPort + (c.p.index + nw - kFullnatFirstPort % nw) % nw;
  const uint32_t count = (65535 - first) / nw + 1;
  for (uint32_t tries = 0; tries < kFullnatMaxTries; ++tries) {
    c.fullnat_cursor = (c.fullnat_cursor + 1) % count;
    const uint16_t port_host = uint16_t(first + c.fullnat_cursor * nw);
    if (rss && tries < kFullnatRssTries &&
        rss->queue_of(rss->with_dport(fixed, v4, port_host)) != c.p.index) {
      continue;
    }
    const uint16_t port_be = htons(port_host);
    // An echo's identifier is its port in both directions: the backend answers to it.
    const bool echo = proto == kProtoIcmp || proto == kProtoIcmp6;
    const Tuple reply{backend, local.address, echo ? port_be : backend_port_be, port_be, proto};
    if (c.flows.reply_in_use(reply, FlowTable::hash(reply))) continue;
    // The proxy's backend connections use the same local addresses.
    if (c.proxy && proto == kProtoTcp &&
        c.proxy->tuple_in_use(local.address, port_be, backend, backend_port_be)) {
      continue;
    }
    to->local_id = local.id;
    to->local_port = port_be;
    if (echo) to->backend_port = port_be;
    return true;
  }
  *why = Drop::kFullnatNoPort;
  return false;
}


}  // namespace meshgate::dp
