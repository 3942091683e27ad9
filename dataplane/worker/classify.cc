// The burst's way in: frames parsed into PacketMeta, then classified into their next stage;
// the martian checks (dataplane/worker/classify.h).
#include "dataplane/worker/classify.h"

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <cstring>

#include "dataplane/nat/icmp_error.h"
#include "dataplane/packet/wire.h"
#include "dataplane/stack/stack_host.h"

namespace meshgate::dp {
namespace {

// A SYN to the stack: its service (a proxy service's VIP:port) takes connections from its source.
bool stack_source_allowed(const Snapshot& s, const PacketMeta& m) {
  const SnapService* svc = s.find_service(m.dst, m.dport, m.l4_proto);
  return !svc || s.source_allowed(*svc, m.src);
}

}  // namespace

void stage_parse(WorkerCtx& c, Burst& b, uint16_t in_port, rte_mbuf** pkts, uint16_t n) {
  const bool handed = in_port == kFromHandoff;
  // A promiscuous port takes every unicast frame as its own (a capture made elsewhere).
  const MacAddr* our_mac =
      handed || c.p.ports[in_port].promiscuous ? nullptr : &c.p.ports[in_port].mac;
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 2 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 2], void*));
    rte_mbuf* m = pkts[i];
    b.flow[i] = nullptr;
    b.egress[i] = Egress{};
    b.extra[i].m = nullptr;
    b.visited[i] = handed ? m->hash.usr : 0;
    // A NIC that strips 802.1Q tags keeps the tag in the mbuf: put it back in the frame, so
    // that answers written over the request, and forwarded frames, keep their VLAN.
    if (MG_UNLIKELY(m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) && rte_vlan_insert(&pkts[i]) != 0) {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kNoHeadroom;
      continue;
    }
    const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
    if (our_mac && m->data_len >= kEthHdrLen && !(data[0] & 1) &&
        std::memcmp(data, our_mac->b.data(), 6) != 0) {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kL2NotForUs;
      continue;
    }
    const uint64_t ip_ck = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
    Drop d = parse_frame(data, m->data_len, m->pkt_len, &b.meta[i],
                         !handed && ip_ck != RTE_MBUF_F_RX_IP_CKSUM_GOOD);
    if (d == Drop::kNone && !handed && ip_ck == RTE_MBUF_F_RX_IP_CKSUM_BAD &&
        b.meta[i].l3 == L3::kIpv4) {
      d = Drop::kIpv4BadChecksum;
    }
    if (d != Drop::kNone) {
      b.next[i] = kNextDrop;
      b.drop[i] = d;
      continue;
    }
    b.next[i] = b.meta[i].l3 == L3::kArp ? kNextArp : kNextIp;
  }
}

void stage_classify(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n) {
  (void)pkts;
  // The [[deny]] block list, before anything else looks at a packet: every IP packet from a
  // blocked source goes, whatever it is addressed to. Without a list, one predicted branch.
  const bool blocking = !c.snap->blocked_sources.empty();
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] != kNextIp) continue;
    const PacketMeta& m = b.meta[i];
    if (MG_UNLIKELY(blocking) && c.snap->blocked_sources.contains(m.src)) {
      b.set_drop(i, Drop::kSourceBlocked);
      continue;
    }
    // RFC 1812 §5.3.4, RFC 1122 §3.3.6: unicast IP in a frame to a group MAC is neither
    // forwarded nor answered. (stage_fast takes only frames to the port's own MAC.)
    if (MG_UNLIKELY(m.flags & kPktL2Multicast) &&
        !is_group_address(*c.snap, m.dst, m.l3 == L3::kIpv4)) {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kUnicastInL2Broadcast;
      continue;
    }
    if (m.l3 == L3::kIpv6 && m.l4_proto == kProtoIcmp6 && m.has_l4() &&
        m.icmp_type >= kNdpRouterSolicit && m.icmp_type <= kNdpRedirect) {
      b.next[i] = kNextNdp;
      continue;
    }
    if (c.stack && m.l4_proto == kProtoTcp && m.has_l4() && !m.is_fragment() &&
        c.stack->is_local_endpoint(m.dst, m.dport, m.src, m.sport)) {
      // A listener's (proxy VIP:port, the HBONE port) or one of the stack's own connections':
      // decided here, before conntrack, so the segment is looked up once, in the stack's
      // table. What this misses (strays to a fullnat address, listeners past the table's
      // size) still reaches the stack through the service and lookup stages.
      if (const Drop d = martian(*c.snap, m); MG_UNLIKELY(d != Drop::kNone)) {
        b.set_drop(i, d);
      } else if (const Drop l = new_flow_source(m);
                 MG_UNLIKELY(l != Drop::kNone) && c.snap->is_vip(m.dst)) {
        // A listener's or proxy service's VIP (the HBONE port is a port address).
        b.set_drop(i, l);
      } else if (MG_UNLIKELY(c.snap->any_source_ranges) &&
                 (m.tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn &&
                 !stack_source_allowed(*c.snap, m)) {
        // A connection opening to a proxy service from outside its source_ranges. (Other
        // segments from there find no connection: the stack answers them with a reset.)
        b.set_drop(i, Drop::kSourceDenied);
      } else {
        b.next[i] = kNextStack;
      }
      continue;
    }
    const bool l4 = trackable(m);
    if (!l4) {
      // ICMP errors and untracked packets never hit the flow fast path: check them here.
      // Tracked ones are checked by stage_flow when they match no flow.
      if (const Drop d = martian(*c.snap, m); MG_UNLIKELY(d != Drop::kNone)) {
        b.next[i] = kNextDrop;
        b.drop[i] = d;
        continue;
      }
    }
    if ((m.l4_proto == kProtoIcmp || m.l4_proto == kProtoIcmp6) && is_icmp_error(m)) {
      b.next[i] = kNextIcmpError;
      continue;
    }
    // Bulk lookup, first phase: hash every packet and prefetch its two buckets (stage_fast
    // hashed its first b.hashed packets, all TCP/UDP: the same values, and prefetched
    // their first buckets).
    if (l4 && i >= b.hashed) {
      b.hash[i] = FlowTable::hash(Tuple{m.src, m.dst, m.sport, m.dport, m.l4_proto});
      b.bp[i] = c.flows.buckets_of(b.hash[i]);
      c.flows.prefetch_buckets(b.bp[i]);
    } else if (l4) {
      b.bp[i] = c.flows.buckets_of(b.hash[i]);
    }
    b.next[i] = l4 ? kNextFlow : kNextLookup;
  }
  if (b.flows_prefetched) return;
  // Second phase: the buckets have had the rest of the burst to arrive; prefetch the flows
  // whose signatures match.
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] == kNextFlow) c.flows.prefetch_flows(b.hash[i], b.bp[i]);
  }
}

}  // namespace meshgate::dp
