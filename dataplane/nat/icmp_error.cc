#include "dataplane/nat/icmp_error.h"

#include <algorithm>
#include <cstring>

#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {

bool is_icmp_error(const PacketMeta& m) {
  if (!m.has_l4()) return false;
  if (m.l4_proto == kProtoIcmp) {
    return m.icmp_type == kIcmpDestUnreach || m.icmp_type == kIcmpTimeExceeded || m.icmp_type == 12;
  }
  if (m.l4_proto == kProtoIcmp6) return m.icmp_type >= 1 && m.icmp_type <= 4;
  return false;
}

bool parse_icmp_quote(const uint8_t* frame, uint32_t len, const PacketMeta& m, IcmpQuote* q) {
  const uint32_t end = std::min<uint32_t>(len, uint32_t(m.l4_off) + m.l4_len);
  const uint32_t ip = m.l4_off + kIcmpHdrLen;
  q->v4 = m.l3 == L3::kIpv4;
  if (q->v4) {
    if (ip + kIpv4HdrLen > end || (frame[ip] >> 4) != 4) return false;
    const uint32_t ihl = uint32_t(frame[ip] & 0xf) * 4;
    if (ihl < kIpv4HdrLen || ip + ihl + 4 > end) return false;
    if (rd16(frame + ip + 6) & 0x1fff) return false;  // a later fragment quotes no ports
    q->proto = frame[ip + 9];
    q->src = IpAddr::v4_bytes(frame + ip + 12);
    q->dst = IpAddr::v4_bytes(frame + ip + 16);
    q->l4_off = uint16_t(ip + ihl);
  } else {
    if (ip + kIpv6HdrLen + 4 > end || (frame[ip] >> 4) != 6) return false;
    // Only a directly following TCP/UDP header: quotes with extension headers are not
    // translated (they are rare in errors and would be dropped as unmatched).
    q->proto = frame[ip + 6];
    q->src = IpAddr::v6_bytes(frame + ip + 8);
    q->dst = IpAddr::v6_bytes(frame + ip + 24);
    q->l4_off = uint16_t(ip + kIpv6HdrLen);
  }
  if (q->proto != kProtoTcp && q->proto != kProtoUdp) return false;
  q->ip_off = uint16_t(ip);
  q->quoted_l4 = uint16_t(end - q->l4_off);
  std::memcpy(&q->sport, frame + q->l4_off, 2);
  std::memcpy(&q->dport, frame + q->l4_off + 2, 2);
  return true;
}

void rewrite_quote(uint8_t* frame, const IcmpQuote& q, bool src, const IpAddr& addr,
                   uint16_t port_be) {
  uint8_t* ip = frame + q.ip_off;
  uint8_t* l4 = frame + q.l4_off;
  const uint32_t csum_off = q.proto == kProtoTcp ? 16 : 6;
  uint8_t* l4_csum = q.quoted_l4 >= csum_off + 2 ? l4 + csum_off : nullptr;
  if (l4_csum && q.proto == kProtoUdp && q.v4 && csum_load(l4_csum) == 0) l4_csum = nullptr;
  uint8_t* field = q.v4 ? ip + (src ? 12 : 16) : ip + (src ? 8 : 24);
  const uint32_t alen = q.v4 ? 4 : 16;
  const uint8_t* a = q.v4 ? addr.v4_ptr() : addr.b;
  if (q.v4) csum_replace_bytes(ip + 10, field, a, 4);
  if (l4_csum) csum_replace_bytes(l4_csum, field, a, alen);
  std::memcpy(field, a, alen);
  uint8_t* pfield = l4 + (src ? 0 : 2);
  if (l4_csum) csum_replace2(l4_csum, ld16(pfield), port_be);
  st16(pfield, port_be);
}

void finish_icmp_error(uint8_t* frame, const PacketMeta& m) {
  uint8_t* ip = frame + m.l3_off;
  uint8_t* icmp = frame + m.l4_off;
  icmp[2] = icmp[3] = 0;
  if (m.l3 == L3::kIpv4) {
    csum_store(ip + 10, ipv4_header_csum(ip, uint32_t(ip[0] & 0xf) * 4));
    csum_store(icmp + 2, csum_finish(csum_partial(icmp, m.l4_len, 0)));
  } else {
    const uint32_t sum = csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, m.l4_len);
    csum_store(icmp + 2, csum_finish(csum_partial(icmp, m.l4_len, sum)));
  }
}

uint32_t build_icmp_error(uint8_t* out, uint32_t cap, uint32_t l2_len, const uint8_t* offending,
                          uint32_t ip_len, bool v4, const IpAddr& src, uint8_t type, uint8_t code,
                          uint32_t mtu) {
  // RFC 1812 §4.3.2.3: as much as fits in 576 bytes; RFC 4443 §2.4(c): in the minimum MTU.
  const uint32_t ip_hdr = v4 ? kIpv4HdrLen : kIpv6HdrLen;
  const uint32_t max_total = v4 ? 576 : 1280;
  const uint32_t quote = std::min(ip_len, max_total - ip_hdr - kIcmpHdrLen);
  const uint32_t icmp_len = kIcmpHdrLen + quote;
  const uint32_t total = l2_len + ip_hdr + icmp_len;
  if (total > cap) return 0;
  uint8_t* ip = out + l2_len;
  uint8_t* icmp = ip + ip_hdr;
  std::memcpy(icmp + kIcmpHdrLen, offending, quote);
  icmp[0] = type;
  icmp[1] = code;
  icmp[2] = icmp[3] = 0;
  wr32(icmp + 4, 0);
  if (v4) {
    if (type == kIcmpDestUnreach && code == 4) wr16(icmp + 6, uint16_t(mtu));  // RFC 1191
    ip[0] = 0x45;
    ip[1] = 0xc0;  // internetwork control, as routers send errors
    wr16(ip + 2, uint16_t(ip_hdr + icmp_len));
    wr16(ip + 4, 0);
    wr16(ip + 6, 0);
    ip[8] = 64;
    ip[9] = kProtoIcmp;
    std::memcpy(ip + 12, src.v4_ptr(), 4);
    std::memcpy(ip + 16, offending + 12, 4);
    csum_store(ip + 10, ipv4_header_csum(ip, kIpv4HdrLen));
    csum_store(icmp + 2, csum_finish(csum_partial(icmp, icmp_len, 0)));
  } else {
    if (type == kIcmp6PacketTooBig) wr32(icmp + 4, mtu);
    wr32(ip, 0x60000000);
    wr16(ip + 4, uint16_t(icmp_len));
    ip[6] = kProtoIcmp6;
    ip[7] = 64;
    std::memcpy(ip + 8, src.b, 16);
    std::memcpy(ip + 24, offending + 8, 16);
    const uint32_t sum = csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, icmp_len);
    csum_store(icmp + 2, csum_finish(csum_partial(icmp, icmp_len, sum)));
  }
  return total;
}

}  // namespace meshgate::dp
