// Handoff of packets to the worker that owns their flow (dataplane/worker/handoff.h).
#include "dataplane/worker/handoff.h"

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include "dataplane/route/route.h"

namespace meshgate::dp {

int handoff_target(const WorkerCtx& c, const IpAddr& src, uint16_t sport_be, const IpAddr& dst,
                           uint16_t dport_be, uint8_t proto, uint32_t visited) {
  if (c.p.n_workers == 1) return -1;
  visited |= 1u << c.p.index;
  if (c.snap->is_fullnat_address(dst)) {
    // Fullnat source ports encode their owner.
    const uint32_t owner = ntohs(dport_be) % c.p.n_workers;
    return visited >> owner & 1 ? -1 : int(owner);
  }
  uint32_t count = 0;
  const uint32_t* svcs = c.snap->services_of_backend(src, sport_be, proto, &count);
  // Echo pseudo-flows have no backend port to look up: when some VIP forwards echoes, an
  // unknown echo reply goes round the workers.
  const bool echo = (proto == kProtoIcmp || proto == kProtoIcmp6) && !c.snap->echo_services.empty();
  if (!svcs && !echo) return -1;
  // The client's packets reached the worker RSS picked for (client -> VIP): predict it.
  const int port = egress_port(*c.snap, dst);
  const RssPredictor* rss = port >= 0 ? c.p.rss[port] : nullptr;
  for (uint32_t k = 0; rss && k < count && k < 4; ++k) {
    const SnapService& s = c.snap->services[svcs[k]];
    const uint32_t q = rss->queue(dst, s.vip, dport_be, s.port_be);
    if (q < c.p.n_workers && !(visited >> q & 1)) return int(q);
  }
  // Otherwise every worker in turn (bounded by the visited mask).
  for (uint32_t w = 0; w < c.p.n_workers; ++w) {
    if (!(visited >> w & 1)) return int(w);
  }
  return -1;
}

void handoff(WorkerCtx& c, Burst& b, uint16_t i, int target, rte_mbuf* m) {
  m->hash.usr = b.visited[i] | 1u << c.p.index;
  b.out[i] = uint16_t(target);
  b.next[i] = kNextHandoff;
}


}  // namespace meshgate::dp
