// The RST refusing a new connection (dataplane/lb/tcp_reset.h).
#include "dataplane/lb/tcp_reset.h"

#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"
#include "dataplane/route/route.h"

namespace meshgate::dp {

uint32_t build_tcp_reset(uint8_t* out, uint32_t cap, uint32_t l2_len, const uint8_t* frame,
                         const PacketMeta& m) {
  const bool v4 = m.l3 == L3::kIpv4;
  const uint32_t ip_hdr = v4 ? kIpv4HdrLen : kIpv6HdrLen;
  const uint32_t total = l2_len + ip_hdr + kTcpHdrLen;
  if (total > cap) return 0;
  const uint8_t* syn = frame + m.l4_off;
  uint8_t* ip = out + l2_len;
  uint8_t* tcp = ip + ip_hdr;
  // SEG.LEN counts the SYN (and a FIN, which parse refuses on a SYN) besides the payload.
  const uint32_t seg_len = uint32_t(m.l4_len - m.l4_hdr_len) + 1;
  std::memcpy(tcp, syn + 2, 2);  // ports swapped
  std::memcpy(tcp + 2, syn, 2);
  wr32(tcp + 4, 0);
  wr32(tcp + 8, rd32(syn + 4) + seg_len);
  tcp[12] = uint8_t((kTcpHdrLen / 4) << 4);
  tcp[13] = kTcpRst | kTcpAck;
  wr16(tcp + 14, 0);  // window
  wr16(tcp + 16, 0);  // checksum, below
  wr16(tcp + 18, 0);  // urgent pointer
  const uint8_t* in_ip = frame + m.l3_off;
  uint32_t sum;
  if (v4) {
    ip[0] = 0x45;
    ip[1] = 0;
    wr16(ip + 2, uint16_t(ip_hdr + kTcpHdrLen));
    wr16(ip + 4, 0);
    wr16(ip + 6, 0x4000);  // DF: 40 bytes need no fragmenting
    ip[8] = 64;
    ip[9] = kProtoTcp;
    std::memcpy(ip + 12, in_ip + 16, 4);
    std::memcpy(ip + 16, in_ip + 12, 4);
    csum_store(ip + 10, ipv4_header_csum(ip, kIpv4HdrLen));
    sum = csum_pseudo_v4(ip + 12, ip + 16, kProtoTcp, kTcpHdrLen);
  } else {
    wr32(ip, 0x60000000);
    wr16(ip + 4, uint16_t(kTcpHdrLen));
    ip[6] = kProtoTcp;
    ip[7] = 64;
    std::memcpy(ip + 8, in_ip + 24, 16);
    std::memcpy(ip + 24, in_ip + 8, 16);
    sum = csum_pseudo_v6(ip + 8, ip + 24, kProtoTcp, kTcpHdrLen);
  }
  csum_store(tcp + 16, csum_finish(csum_partial(tcp, kTcpHdrLen, sum)));
  return total;
}

void send_tcp_reset(WorkerCtx& c, Burst& b, const rte_mbuf* orig, uint16_t i) {
  const PacketMeta& om = b.meta[i];
  rte_mbuf* mb = rte_pktmbuf_alloc(c.p.pool);
  counter_add(c.counters.generated, 1);
  if (!mb) {
    counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  uint8_t* out = rte_pktmbuf_mtod(mb, uint8_t*);
  // The answer leaves on the VLAN it was asked on.
  const bool tagged = om.flags & kPktVlan;
  const uint32_t l2_len = tagged ? kEthHdrLen + kVlanHdrLen : kEthHdrLen;
  const uint32_t len = om.l4_off + kTcpHdrLen <= orig->data_len
                           ? build_tcp_reset(out, rte_pktmbuf_tailroom(mb), l2_len,
                                             rte_pktmbuf_mtod(orig, const uint8_t*), om)
                           : 0;
  PacketMeta m;
  if (len != 0) {
    rte_pktmbuf_append(mb, uint16_t(len));
    if (tagged) {
      wr16(out + 12, kEtherTypeVlan);
      wr16(out + 14, om.vlan_tci);
    }
    wr16(out + l2_len - 2, om.l3 == L3::kIpv4 ? kEtherTypeIpv4 : kEtherTypeIpv6);
  }
  if (len == 0 || parse_packet(out, len, &m, false) != Drop::kNone) {
    rte_pktmbuf_free(mb);
    counter_add(c.counters.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  counter_add(c.counters.resets_sent, 1);
  route_generated(c, b, mb, m, i);
}

}  // namespace meshgate::dp
