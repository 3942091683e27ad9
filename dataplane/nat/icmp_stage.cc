// ICMP errors in the stages: errors about translated packets translated through their flow,
// and the errors the gateway sends itself (time exceeded, fragmentation needed / packet too
// big), rate limited (dataplane/nat/icmp_stage.h).
#include "dataplane/nat/icmp_stage.h"

#include <rte_mbuf.h>

#include <algorithm>

#include "dataplane/local/local_stage.h"
#include "dataplane/nat/icmp_error.h"
#include "dataplane/packet/wire.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/route/route.h"
#include "dataplane/worker/classify.h"
#include "dataplane/worker/handoff.h"

namespace meshgate::dp {
namespace {

bool icmp_token(WorkerCtx& c) {
  const uint64_t dt = c.now_ns - c.icmp_last_ns;
  c.icmp_last_ns = c.now_ns;
  c.icmp_tokens = std::min<double>(kIcmpErrorBurst,
                                  c.icmp_tokens + double(dt) * kIcmpErrorsPerSecond / 1e9);
  if (c.icmp_tokens < 1) return false;
  c.icmp_tokens -= 1;
  return true;
}

}  // namespace

bool translate_icmp_error(WorkerCtx& c, rte_mbuf* mb, PacketMeta& m, int* target,
                          uint32_t visited) {
  *target = -1;
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  IcmpQuote q;
  if (mb->nb_segs != 1 || !parse_icmp_quote(data, mb->data_len, m, &q)) return false;
  // The quoted packet went the other way: its reverse is a flow tuple we hold.
  const Tuple key{q.dst, q.src, q.dport, q.sport, q.proto};
  FlowDir dir;
  Flow* f = c.flows.lookup(key, FlowTable::hash(key), c.now_ms(), &dir);
  if (!f || is_dsr(f->mode)) {
    if (!f) *target = handoff_target(c, key.src, key.sport, key.dst, key.dport, key.proto, visited);
    return false;
  }
  uint8_t* ip = data + m.l3_off;
  uint8_t* outer_src = ip + (m.l3 == L3::kIpv4 ? 12 : 8);
  uint8_t* outer_dst = ip + (m.l3 == L3::kIpv4 ? 16 : 24);
  const uint32_t alen = m.l3 == L3::kIpv4 ? 4 : 16;
  auto put = [&](uint8_t* field, const IpAddr& a) {
    std::memcpy(field, m.l3 == L3::kIpv4 ? a.v4_ptr() : a.b, alen);
  };
  const IpAddr vip = c.flows.vip(*f);
  const IpAddr client = f->client();
  const IpAddr backend = f->backend();
  if (dir == FlowDir::kReply) {
    // About a packet we sent toward the backend; the error travels to the client.
    rewrite_quote(data, q, false, vip, f->vip_port);
    if (f->mode == Mode::kFullnat) {
      rewrite_quote(data, q, true, client, f->client_port);
      put(outer_dst, client);
      m.dst = client;
    }
    if (m.src == backend) {
      put(outer_src, vip);
      m.src = vip;
    }
  } else {
    // About a reply we sent toward the client; the error travels to the backend.
    rewrite_quote(data, q, true, backend, f->backend_port);
    put(outer_dst, backend);
    m.dst = backend;
    if (f->mode == Mode::kFullnat) {
      rewrite_quote(data, q, false, c.flows.local(*f), f->local_port);
      put(outer_src, c.flows.local(*f));
      m.src = c.flows.local(*f);
    }
  }
  finish_icmp_error(data, m);
  counter_add(c.counters.icmp_errors_translated, 1);
  return true;
}

void stage_icmp_error(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n) {
  if (!b.next_mask(n, kNextIcmpError, kNextIcmpError)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] != kNextIcmpError) continue;
    PacketMeta& m = b.meta[i];
    int target;
    if (translate_icmp_error(c, pkts[i], m, &target, b.visited[i])) {
      if (m.ttl <= 1) {
        b.next[i] = kNextDrop;
        b.drop[i] = Drop::kTtlExceeded;  // RFC 1812 §4.3.2.7: no error about an error
        continue;
      }
      b.egress[i].decrement_ttl = true;
      b.next[i] = kNextRoute;
    } else if (target >= 0) {
      handoff(c, b, i, target, pkts[i]);
    } else if (c.stack && c.stack->icmp_error(rte_pktmbuf_mtod(pkts[i], const uint8_t*),
                                            pkts[i]->data_len, m)) {
      b.next[i] = kNextConsumed;  // about a segment of the proxy's TCP stack
    } else if (to_host_twin(c, b, i)) {
      // about a packet the kernel sent through a host interface
    } else if (is_local_like(*c.snap, m.dst) && !c.snap->is_vip(m.dst) &&
               !c.snap->is_fullnat_address(m.dst)) {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kLocalUnhandled;  // errors about the gateway's own packets
    } else {
      b.next[i] = kNextDrop;
      b.drop[i] = Drop::kIcmpErrorNoFlow;
    }
  }
}

void send_icmp_error(WorkerCtx& c, Burst& b, const rte_mbuf* orig, const PacketMeta& om, uint16_t i,
                             uint8_t type, uint8_t code, uint32_t mtu) {
  // RFC 1812 §4.3.2.7: never about an ICMP error, a non-first fragment, or a multicast source.
  if (om.l4_proto == (om.l3 == L3::kIpv4 ? kProtoIcmp : kProtoIcmp6) && is_icmp_error(om)) return;
  if (om.is_fragment() && !om.has_l4()) return;
  if (!icmp_token(c)) {
    counter_add(c.counters.icmp_rate_limited, 1);
    return;
  }
  const int port = egress_port(*c.snap, om.src);
  const IpPrefix* from = port >= 0 ? source_for(c, uint16_t(port), om.src) : nullptr;
  if (!from) return;
  rte_mbuf* mb = rte_pktmbuf_alloc(c.p.pool);
  counter_add(c.counters.generated, 1);
  if (!mb) {
    counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  const bool v4 = om.l3 == L3::kIpv4;
  uint8_t* out = rte_pktmbuf_mtod(mb, uint8_t*);
  const uint8_t* ip = rte_pktmbuf_mtod_offset(orig, const uint8_t*, om.l3_off);
  const uint32_t ip_len = std::min<uint32_t>(om.ip_len, orig->data_len - om.l3_off);
  // An answer leaves on the VLAN it was asked on: the error carries the packet's tag.
  const bool tagged = om.flags & kPktVlan;
  const uint32_t l2_len = tagged ? kEthHdrLen + kVlanHdrLen : kEthHdrLen;
  const uint32_t len = build_icmp_error(out, rte_pktmbuf_tailroom(mb), l2_len, ip, ip_len, v4,
                                        from->addr, type, code, mtu);
  if (len == 0) {
    rte_pktmbuf_free(mb);
    counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  rte_pktmbuf_append(mb, uint16_t(len));
  if (tagged) {
    wr16(out + 12, kEtherTypeVlan);
    wr16(out + 14, om.vlan_tci);
  }
  wr16(out + l2_len - 2, v4 ? kEtherTypeIpv4 : kEtherTypeIpv6);
  PacketMeta m;
  if (parse_packet(out, len, &m, false) != Drop::kNone) {
    rte_pktmbuf_free(mb);
    counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  // An error about a packet we translated quotes the translated packet: translate it back,
  // as if it came from the path beyond us. (Errors about untranslated packets match no flow.)
  int unused;
  translate_icmp_error(c, mb, m, &unused, ~0u);
  counter_add(c.counters.icmp_errors_sent, 1);
  route_generated(c, b, mb, m, i);
}

void drop_ttl_exceeded(WorkerCtx& c, Burst& b, const rte_mbuf* mb, uint16_t i) {
  const PacketMeta& m = b.meta[i];
  send_icmp_error(c, b, mb, m, i, m.l3 == L3::kIpv4 ? kIcmpTimeExceeded : kIcmp6TimeExceeded, 0, 0);
  b.next[i] = kNextDrop;
  b.drop[i] = Drop::kTtlExceeded;
}


}  // namespace meshgate::dp
