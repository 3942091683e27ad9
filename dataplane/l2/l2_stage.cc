// The L2 stage and neighbor resolution: ARP and NDP answers for the gateway's addresses,
// learning from requests and advertisements, solicitation of next hops; a port's kernel twin
// gets the answers too, and solicitations of its link-local address (dataplane/l2/l2_stage.h).
#include "dataplane/l2/l2_stage.h"

#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "dataplane/local/local_stage.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"
#include "dataplane/route/route.h"

namespace meshgate::dp {
namespace {

constexpr uint8_t kNdpHopLimit = 255;  // RFC 4861 §7.1: NDP must arrive with hop limit 255
constexpr uint32_t kNdpMinLen = 24;    // NS / NA without options

// A neighbor's answer the gateway learned from: the port's kernel twin learns from it too
// (its own requests went out through the port), else it ends here.
void consumed(const WorkerCtx& c, Burst& b, uint16_t in_port, uint16_t i) {
  if (!give_to_twin(c, b, i, in_port)) b.next[i] = kNextConsumed;
}

void handle_arp(WorkerCtx& c, Burst& b, uint16_t in_port, rte_mbuf* mb, uint16_t i) {
  const PacketMeta& m = b.meta[i];
  const PortRuntime& port = c.p.ports[in_port];
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  uint8_t* a = data + m.l3_off;
  // A sender claiming one of our addresses or a subnet broadcast is spoofing or in conflict:
  // neither learned nor answered (Linux validates the sender like an IP source, and is silent).
  if (const AddrClass cls = c.snap->addr_class(m.arp_spa); MG_UNLIKELY(cls != AddrClass::kOther)) {
    b.next[i] = kNextDrop;
    b.drop[i] = cls == AddrClass::kGateway ? Drop::kSourceIsLocal : Drop::kSourceIsBroadcast;
    return;
  }
  const bool sender_ok = !m.arp_spa.is_zero() && on_link(c, in_port, m.arp_spa) &&
                         !m.arp_sha.is_multicast() && !m.arp_sha.is_zero();
  if (m.arp_op == kArpOpReply) {
    if (sender_ok) learn(c, m.arp_spa, m.arp_sha, in_port, true);
    consumed(c, b, in_port, i);
    return;
  }
  const bool ours = c.snap->local_port(m.arp_tpa) == int32_t(in_port) ||
                    c.snap->is_vip(m.arp_tpa) || c.snap->is_fullnat_address(m.arp_tpa);
  // RFC 826 merge: refresh a sender we already know; learn it when it asks for us.
  if (sender_ok && (ours || c.neighbors->find(m.arp_spa)))
    learn(c, m.arp_spa, m.arp_sha, in_port, true);
  if (!ours) {
    b.next[i] = kNextDrop;
    b.drop[i] = Drop::kArpNotForUs;
    return;
  }
  wr16(a + 6, kArpOpReply);
  std::memcpy(a + 18, a + 8, 6);             // target hardware = requester
  std::memcpy(a + 24, a + 14, 4);            // target protocol = requester
  std::memcpy(a + 8, port.mac.b.data(), 6);  // sender hardware = us
  std::memcpy(a + 14, m.arp_tpa.v4_ptr(), 4);
  std::memcpy(data, m.arp_sha.b.data(), 6);
  std::memcpy(data + 6, port.mac.b.data(), 6);
  counter_add(c.counters.arp_replies, 1);
  b.out[i] = in_port;
  b.next[i] = kNextTx;
}

void handle_ndp(WorkerCtx& c, Burst& b, uint16_t in_port, rte_mbuf* mb, uint16_t i) {
  PacketMeta& m = b.meta[i];
  const PortRuntime& port = c.p.ports[in_port];
  const uint8_t type = m.icmp_type;
  if (type != kNdpNeighborSolicit && type != kNdpNeighborAdvert) {
    b.next[i] = kNextDrop;
    b.drop[i] = Drop::kNdpIgnored;
    return;
  }
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  uint8_t* ip = data + m.l3_off;
  uint8_t* icmp = data + m.l4_off;
  const uint32_t len = m.l4_len;
  // RFC 4861 §7.1.1 / §7.1.2 validity checks.
  if (m.ttl != kNdpHopLimit || m.icmp_code != 0 || len < kNdpMinLen || m.is_fragment() ||
      m.l4_off + len > mb->data_len || icmp[8] == 0xff /* multicast target */) {
    b.next[i] = kNextDrop;
    b.drop[i] = Drop::kNdpInvalid;
    return;
  }
  if (csum_fold(csum_partial(icmp, len, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, len))) !=
      0xffff) {
    b.next[i] = kNextDrop;
    b.drop[i] = Drop::kIcmpBadChecksum;
    return;
  }
  // Link-layer address option: source (1) in NS, target (2) in NA.
  const uint8_t want_opt = type == kNdpNeighborSolicit ? 1 : 2;
  const uint8_t* lla = nullptr;
  for (uint32_t off = kNdpMinLen; off + 2 <= len;) {
    const uint32_t olen = uint32_t(icmp[off + 1]) * 8;
    if (olen == 0 || off + olen > len) {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kNdpInvalid;
      return;
    }
    if (icmp[off] == want_opt && olen >= 8) lla = icmp + off + 2;
    off += olen;
  }
  const IpAddr target = IpAddr::v6_bytes(icmp + 8);
  const bool src_unspecified = m.src.is_zero();
  // As for ARP: a node using one of our addresses is spoofing or in conflict; its solicitation
  // is not answered and its advertisement of our address not learned.
  const bool claims_ours = c.snap->addr_class(type == kNdpNeighborAdvert ? target : m.src) !=
                           AddrClass::kOther;

  if (type == kNdpNeighborAdvert) {
    if (lla && on_link(c, in_port, target) && !claims_ours) {
      MacAddr mac;
      std::memcpy(mac.b.data(), lla, 6);
      learn(c, target, mac, in_port, true);
    }
    consumed(c, b, in_port, i);
    return;
  }

  if (claims_ours) {
    b.next[i] = kNextDrop;
    b.drop[i] = Drop::kSourceIsLocal;
    return;
  }
  if (lla && !src_unspecified && on_link(c, in_port, m.src)) {
    MacAddr mac;
    std::memcpy(mac.b.data(), lla, 6);
    learn(c, m.src, mac, in_port, true);
  }
  const bool ours = c.snap->local_port(target) == int32_t(in_port) || c.snap->is_vip(target) ||
                    c.snap->is_fullnat_address(target);
  if (!ours) {
    // A link-local target may be the kernel twin's own address (fe80::/10): it answers.
    const bool link_local = target.b[0] == 0xfe && (target.b[1] & 0xc0) == 0x80;
    if (link_local && give_to_twin(c, b, i, in_port)) return;
    b.next[i] = kNextDrop;
    b.drop[i] = Drop::kNdpIgnored;
    return;
  }
  // Answer in place: NA (32 bytes with the target link-layer address option).
  constexpr uint32_t kNaLen = kNdpMinLen + 8;
  const uint32_t want = m.l4_off + kNaLen;
  if (mb->pkt_len < want) {
    if (!rte_pktmbuf_append(mb, uint16_t(want - mb->pkt_len))) {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kMbufExhausted;
      return;
    }
  } else if (mb->pkt_len > want) {
    rte_pktmbuf_trim(mb, uint16_t(mb->pkt_len - want));
  }
  static constexpr uint8_t kAllNodes[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  uint8_t eth_dst[6];
  if (src_unspecified) {
    // RFC 4861 §7.2.4: answer a DAD probe to all-nodes.
    std::memcpy(ip + 24, kAllNodes, 16);
    static constexpr uint8_t kAllNodesMac[6] = {0x33, 0x33, 0, 0, 0, 1};
    std::memcpy(eth_dst, kAllNodesMac, 6);
  } else {
    std::memcpy(ip + 24, ip + 8, 16);
    std::memcpy(eth_dst, data + 6, 6);
  }
  std::memcpy(ip + 8, target.b, 16);
  wr32(ip, 0x60000000);
  wr16(ip + 4, kNaLen);
  ip[7] = kNdpHopLimit;
  icmp[0] = kNdpNeighborAdvert;
  icmp[1] = 0;
  icmp[2] = icmp[3] = 0;
  icmp[4] = uint8_t((src_unspecified ? 0 : 0x40) | 0x20);  // Solicited, Override
  icmp[5] = icmp[6] = icmp[7] = 0;
  icmp[24] = 2;  // target link-layer address
  icmp[25] = 1;
  std::memcpy(icmp + 26, port.mac.b.data(), 6);
  csum_store(icmp + 2, csum_finish(csum_partial(
                           icmp, kNaLen, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, kNaLen))));
  std::memcpy(data, eth_dst, 6);
  std::memcpy(data + 6, port.mac.b.data(), 6);
  counter_add(c.counters.nd_adverts, 1);
  b.out[i] = in_port;
  b.next[i] = kNextTx;
}

void solicit(WorkerCtx& c, NeighborCache::Entry* e, uint16_t port_index) {
  e->last_request_ns = c.now_ns ? c.now_ns : 1;
  const PortRuntime& port = c.p.ports[port_index];
  const IpPrefix* src = source_for(c, port_index, e->address);
  if (!src) return;  // no address of that family on the port: the packet times out
  counter_add(c.counters.generated, 1);
  rte_mbuf* mb = rte_pktmbuf_alloc(c.p.pool);
  if (!mb) {
    counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  const IpAddr& t = e->address;
  if (t.is_v4()) {
    constexpr uint16_t kLen = 60;  // minimum Ethernet frame without FCS
    uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(mb, kLen));
    if (!d) {
      rte_pktmbuf_free(mb);
      counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
      return;
    }
    std::memset(d, 0, kLen);
    std::memset(d, 0xff, 6);
    std::memcpy(d + 6, port.mac.b.data(), 6);
    wr16(d + 12, kEtherTypeArp);
    uint8_t* a = d + kEthHdrLen;
    wr16(a, 1);
    wr16(a + 2, kEtherTypeIpv4);
    a[4] = 6;
    a[5] = 4;
    wr16(a + 6, kArpOpRequest);
    std::memcpy(a + 8, port.mac.b.data(), 6);
    std::memcpy(a + 14, src->addr.v4_ptr(), 4);
    std::memcpy(a + 24, t.v4_ptr(), 4);
    counter_add(c.counters.arp_requests, 1);
  } else {
    constexpr uint32_t kNsLen = kNdpMinLen + 8;
    constexpr uint16_t kLen = kEthHdrLen + kIpv6HdrLen + kNsLen;
    uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(mb, kLen));
    if (!d) {
      rte_pktmbuf_free(mb);
      counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
      return;
    }
    std::memset(d, 0, kLen);
    // RFC 4291 §2.7.1 solicited-node multicast ff02::1:ffXX:XXXX and its MAC 33:33:ff:XX:XX:XX.
    d[0] = 0x33;
    d[1] = 0x33;
    d[2] = 0xff;
    std::memcpy(d + 3, t.b + 13, 3);
    std::memcpy(d + 6, port.mac.b.data(), 6);
    wr16(d + 12, kEtherTypeIpv6);
    uint8_t* ip = d + kEthHdrLen;
    wr32(ip, 0x60000000);
    wr16(ip + 4, kNsLen);
    ip[6] = kProtoIcmp6;
    ip[7] = kNdpHopLimit;
    std::memcpy(ip + 8, src->addr.b, 16);
    ip[24] = 0xff;
    ip[25] = 0x02;
    ip[35] = 0x01;
    ip[36] = 0xff;
    std::memcpy(ip + 37, t.b + 13, 3);
    uint8_t* icmp = ip + kIpv6HdrLen;
    icmp[0] = kNdpNeighborSolicit;
    std::memcpy(icmp + 8, t.b, 16);
    icmp[24] = 1;  // source link-layer address
    icmp[25] = 1;
    std::memcpy(icmp + 26, port.mac.b.data(), 6);
    csum_store(icmp + 2, csum_finish(csum_partial(
                             icmp, kNsLen, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, kNsLen))));
    counter_add(c.counters.nd_solicits, 1);
  }
  c.tx(port_index, mb);
}

}  // namespace

void stage_l2(WorkerCtx& c, Burst& b, uint16_t in_port, rte_mbuf** pkts, uint16_t n) {
  if (!b.next_mask(n, kNextArp, kNextNdp)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] == kNextArp) handle_arp(c, b, in_port, pkts[i], i);
    else if (b.next[i] == kNextNdp) handle_ndp(c, b, in_port, pkts[i], i);
  }
}

bool resolve(WorkerCtx& c, const IpAddr& nh, uint16_t port_index, MacAddr* mac) {
  if (const StaticNeighbor* s = c.snap ? c.snap->find_neighbor(nh) : nullptr) {
    *mac = s->mac;
    return true;
  }
  NeighborCache::Entry* e = c.neighbors->find_or_add(nh);
  if (e && e->resolved) {
    *mac = e->mac;
    return true;
  }
  if (e && (e->last_request_ns == 0 ||
            c.now_ns - e->last_request_ns >= NeighborCache::kRequestIntervalNs)) {
    solicit(c, e, port_index);
  }
  return false;
}

void learn(WorkerCtx& c, const IpAddr& a, const MacAddr& mac, uint16_t port_index, bool from_wire) {
  if (!c.neighbors->learn(a, mac, port_index)) return;
  c.nh.next_epoch();  // cached next hops may name the old MAC
  counter_add(c.counters.neighbors_learned, 1);
  if (from_wire && c.p.neighbor_out) {
    NeighborUpdate u{a, mac, port_index};
    // Best effort: other workers learn on their own if the control ring is full.
    rte_ring_enqueue_elem(c.p.neighbor_out, &u, sizeof u);
  }
}

void drain_neighbor_ring(WorkerCtx& c) {
  NeighborUpdate u;
  while (rte_ring_dequeue_elem(c.p.neighbor_in, &u, sizeof u) == 0) {
    learn(c, u.address, u.mac, u.port_index, false);
  }
}

}  // namespace meshgate::dp
