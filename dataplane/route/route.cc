// Routing: LPM to the egress port and next hop, the next-hop cache, MTU (with the ICMP error
// back), TTL, DSR encapsulation, the L2 header; packets waiting for a neighbor
// (dataplane/route/route.h).
#include "dataplane/route/route.h"

#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_mbuf.h>

#include "dataplane/l2/l2_stage.h"
#include "dataplane/nat/encap.h"
#include "dataplane/nat/icmp_stage.h"
#include "dataplane/nat/nat.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {

int egress_port(const Snapshot& snap, const IpAddr& a) {
  uint32_t nh_idx = 0;
  const int rc = a.is_v4() ? rte_lpm_lookup(snap.lpm4, a.v4_host(), &nh_idx)
                           : rte_lpm6_lookup(snap.lpm6, a.b, &nh_idx);
  if (rc != 0 || nh_idx >= snap.next_hops.size()) return -1;
  return snap.next_hops[nh_idx].port_index;
}

const IpPrefix* source_for(const WorkerCtx& c, uint16_t port_index, const IpAddr& peer) {
  const IpPrefix* first = nullptr;
  for (const IpPrefix& a : c.p.ports[port_index].addresses) {
    if (a.addr.is_v4() != peer.is_v4()) continue;
    if (a.contains(peer)) return &a;
    if (!first) first = &a;
  }
  return first;
}

bool on_link(const WorkerCtx& c, uint16_t port_index, const IpAddr& a) {
  for (const IpPrefix& p : c.p.ports[port_index].addresses) {
    if (p.contains(a)) return true;
  }
  return false;
}

namespace {

// route_one, inline in the route stage.
MG_ALWAYS_INLINE Next route_packet(WorkerCtx& c, Burst& b, rte_mbuf* mb, PacketMeta& m,
                                   const Egress& eg, uint16_t i, uint16_t* out_port, IpAddr* nh_out,
                                   Drop* why) {
  const IpAddr& dst = eg.encap ? eg.tunnel_dst : m.dst;
  // Most packets go to a few backends and routers: a small cache of next hops saves the LPM
  // lookup and the neighbor hashing per packet.
  NhCacheEntry& ce = c.nh.entries[NhCache::slot(dst)];
  const bool cached = ce.epoch == c.nh.epoch && ce.dst == dst;
  uint16_t port_index;
  const NextHop* nh = nullptr;
  if (cached) {
    port_index = ce.port;
  } else {
    uint32_t nh_idx = 0;
    const int rc = dst.is_v4() ? rte_lpm_lookup(c.snap->lpm4, dst.v4_host(), &nh_idx)
                               : rte_lpm6_lookup(c.snap->lpm6, dst.b, &nh_idx);
    if (rc != 0 || nh_idx >= c.snap->next_hops.size()) {
      *why = Drop::kNoRoute;
      return kNextDrop;
    }
    nh = &c.snap->next_hops[nh_idx];
    port_index = nh->port_index;
  }
  const bool v4 = m.l3 == L3::kIpv4;
  const uint32_t overhead = eg.encap ? encap_overhead(v4, eg.gue) : 0;
  const uint32_t mtu = c.p.ports[port_index].mtu;
  if (m.ip_len + overhead > mtu) {
    // RFC 1191 / RFC 8201: tell the sender the size that fits, unless it allowed fragmenting
    // (IPv4 without DF), which the gateway does not do.
    uint8_t* ip = rte_pktmbuf_mtod_offset(mb, uint8_t*, m.l3_off);
    const bool df = !v4 || (rd16(ip + 6) & 0x4000);
    // Not for the errors we make ourselves (they fit any IP MTU: 576 / 1280 bytes).
    if (df && mtu > overhead && !b.extra[i].m) {
      send_icmp_error(c, b, mb, m, i, v4 ? kIcmpDestUnreach : kIcmp6PacketTooBig, v4 ? 4 : 0,
                      mtu - overhead);
    }
    *why = Drop::kMtuExceeded;
    return kNextDrop;
  }
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  if (eg.decrement_ttl) decrement_ttl(data, &m);
  if (eg.encap) {
    // The outer source is the gateway's address on the port toward the backend.
    const IpPrefix* from = cached ? ce.src : source_for(c, port_index, eg.tunnel_dst);
    if (!from) {
      *why = Drop::kNoRoute;
      return kNextDrop;
    }
    const IpAddr src = from->addr;
    const uint32_t l2 = m.l3_off;
    uint8_t* front = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(mb, uint16_t(overhead)));
    if (!front) {
      *why = Drop::kNoHeadroom;
      return kNextDrop;
    }
    std::memmove(front, front + overhead, l2);
    write_encap(front + l2, front + l2 + overhead, m.ip_len, v4, eg.gue, src, eg.tunnel_dst,
                eg.gue_port_be, eg.flow_hash);
    m.ip_len = uint16_t(m.ip_len + overhead);
    m.dst = eg.tunnel_dst;
    m.src = src;
    data = front;
  }
  *out_port = port_index;
  if (cached) {
    std::memcpy(data, ce.macs, 12);
    return kNextTx;
  }
  const IpAddr& nh_ip = nh->on_link ? dst : nh->gateway;
  MacAddr mac;
  if (resolve(c, nh_ip, port_index, &mac)) {
    ce.dst = dst;
    ce.epoch = c.nh.epoch;
    ce.tag4 = 0;
    if (dst.is_v4()) {
      uint32_t wire;
      std::memcpy(&wire, dst.v4_ptr(), 4);
      ce.tag4 = uint64_t(c.nh.epoch) << 32 | wire;
    }
    ce.port = port_index;
    ce.mtu = c.p.ports[port_index].mtu;
    ce.src = source_for(c, port_index, dst);
    std::memcpy(ce.macs, mac.b.data(), 6);
    std::memcpy(ce.macs + 6, c.p.ports[port_index].mac.b.data(), 6);
    std::memcpy(data, ce.macs, 12);
    return kNextTx;
  }
  *nh_out = nh_ip;
  return kNextPending;
}

}  // namespace

Next route_one(WorkerCtx& c, Burst& b, rte_mbuf* mb, PacketMeta& m, const Egress& eg, uint16_t i,
               uint16_t* out_port, IpAddr* nh_out, Drop* why) {
  return route_packet(c, b, mb, m, eg, i, out_port, nh_out, why);
}

void route_generated(WorkerCtx& c, Burst& b, rte_mbuf* mb, PacketMeta& m, uint16_t i) {
  Drop why = Drop::kNone;
  Extra& x = b.extra[i];
  x.next = route_packet(c, b, mb, m, Egress{}, i, &x.port, &x.nh, &why);
  if (x.next == kNextDrop) {
    c.drop(mb, why);
    return;
  }
  x.m = mb;
}

void stage_route(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] != kNextRoute) continue;
    Drop why = Drop::kNone;
    b.next[i] = route_packet(c, b, pkts[i], b.meta[i], b.egress[i], i, &b.out[i], &b.nh[i], &why);
    if (b.next[i] == kNextDrop) b.drop[i] = why;
  }
}

void service_pending(WorkerCtx& c) {
  for (uint32_t i = 0; i < c.pending->size();) {
    PendingQueue::Item& it = c.pending->at(i);
    MacAddr mac;
    if (resolve(c, it.next_hop, it.port_index, &mac)) {
      uint8_t* d = rte_pktmbuf_mtod(it.m, uint8_t*);
      std::memcpy(d, mac.b.data(), 6);
      std::memcpy(d + 6, c.p.ports[it.port_index].mac.b.data(), 6);
      c.tx(it.port_index, it.m);
      c.pending->erase(i);
    } else if (c.now_ns >= it.deadline_ns) {
      c.drop(it.m, Drop::kNeighborUnresolved);
      c.pending->erase(i);
    } else {
      ++i;
    }
  }
}


}  // namespace meshgate::dp
