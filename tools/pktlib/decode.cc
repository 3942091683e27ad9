#include "tools/pktlib/decode.h"

#include <algorithm>
#include <cstring>

#include "tools/pktlib/build.h"
#include "tools/pktlib/checksum.h"

namespace meshgate::pkt {
namespace {

constexpr uint8_t kProtoAh = 51;

bool is_ipv6_ext(uint8_t nh) {
  // RFC 8200 4 plus the later registrations that share its TLV-length layout (RFC 7045).
  switch (nh) {
    case kProtoHopByHop:
    case kProtoRouting:
    case kProtoFragment:
    case kProtoDestOpts:
    case kProtoAh:
    case 135:  // Mobility (RFC 6275)
    case 139:  // HIP (RFC 7401)
    case 140:  // Shim6 (RFC 5533)
      return true;
    default:
      return false;
  }
}

bool bad_ipv4_source(const IpAddr& a) {
  const uint32_t v = a.v4_host();
  return (v >> 24) == 0 ||           // "this network" (RFC 1122 3.2.1.3)
         (v >> 24) == 127 ||         // loopback
         (v >> 28) >= 0xe;           // multicast, class E, limited broadcast
}

bool bad_ipv6_source(const IpAddr& a) {
  static constexpr uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static constexpr uint8_t kZero[16] = {};
  return a.b[0] == 0xff || std::memcmp(a.b, kLoopback, 16) == 0 ||
         std::memcmp(a.b, kZero, 16) == 0;  // RFC 4291 2.5.2 / 2.5.3 / 2.7
}

// RFC 791 3.1: every option but EOL (0) and NOP (1) has a length >= 2 inside the header;
// source routes (131, 137) are refused (RFC 7126 4.3/4.4).
const char* ipv4_option_fault(const uint8_t* o, size_t len) {
  for (size_t i = 0; i < len && o[i] != 0;) {
    if (o[i] == 1) {
      ++i;
      continue;
    }
    if (i + 1 >= len || o[i + 1] < 2 || i + o[i + 1] > len) return "ipv4_bad_option";
    if (o[i] == 131 || o[i] == 137) return "ipv4_source_route";
    i += o[i + 1];
  }
  return nullptr;
}

// Keeps the first fault: a soft fault found earlier stays the one reported.
void fault(Decoded& d, const char* what) {
  if (!d.error) d.error = what;
}

void decode_tcp(Decoded& d, const uint8_t* p, size_t len) {
  if (len < 20) {
    fault(d, "tcp_truncated");
    return;
  }
  d.has_l4 = true;
  d.sport = get16(p);
  d.dport = get16(p + 2);
  d.tcp_seq = get32(p + 4);
  d.tcp_ack = get32(p + 8);
  d.tcp_flags = p[13];
  d.tcp_window = get16(p + 14);
  const size_t hlen = size_t(p[12] >> 4) * 4;
  d.tcp_hdr_len = uint8_t(hlen);
  if (hlen < 20 || hlen > len) {
    fault(d, "tcp_bad_data_offset");
    return;
  }
  for (size_t i = 20; i < hlen;) {
    const uint8_t kind = p[i];
    if (kind == 0) break;  // end of option list
    if (kind == 1) {       // NOP
      ++i;
      continue;
    }
    if (i + 1 >= hlen || p[i + 1] < 2 || i + p[i + 1] > hlen) {
      fault(d, "tcp_bad_option");
      return;
    }
    const uint8_t olen = p[i + 1];
    // RFC 9293 3.2 / RFC 7323 / RFC 2018: fixed lengths of the options we read.
    const uint8_t want = kind == 2 ? 4 : kind == 3 ? 3 : kind == 4 ? 2 : kind == 8 ? 10 : 0;
    if (want && olen != want) {
      fault(d, "tcp_bad_option");
      return;
    }
    if (kind == 2) d.tcp_mss = get16(p + i + 2);
    if (kind == 3) d.tcp_wscale = p[i + 2];
    if (kind == 4) d.tcp_sack_permitted = true;
    if (kind == 8) {
      d.tcp_timestamps = true;
      d.tcp_ts_val = get32(p + i + 2);
      d.tcp_ts_ecr = get32(p + i + 6);
    }
    i += olen;
  }
  d.payload_off = d.l4_off + hlen;
  d.payload_len = len - hlen;
  const uint8_t f = d.tcp_flags;
  if ((f & (kTcpSyn | kTcpFin)) == (kTcpSyn | kTcpFin) ||
      (f & (kTcpSyn | kTcpRst)) == (kTcpSyn | kTcpRst) || f == 0) {
    fault(d, "tcp_bad_flags");
  }
}

void decode_udp(Decoded& d, const uint8_t* p, size_t len) {
  if (len < 8) {
    fault(d, "udp_truncated");
    return;
  }
  d.has_l4 = true;
  d.sport = get16(p);
  d.dport = get16(p + 2);
  d.udp_length = get16(p + 4);
  // A first fragment's length covers the whole datagram, beyond this packet.
  if (d.udp_length < 8 || (d.udp_length > len && !d.fragment)) {
    fault(d, "udp_bad_length");
    return;
  }
  d.payload_off = d.l4_off + 8;
  d.payload_len = std::min<size_t>(d.udp_length, len) - 8;
}

void decode_icmp(Decoded& d, const uint8_t* p, size_t len, bool v6) {
  if (len < 8) {
    fault(d, v6 ? "icmp6_truncated" : "icmp_truncated");
    return;
  }
  d.has_l4 = true;
  d.icmp_type = p[0];
  d.icmp_code = p[1];
  d.icmp_rest = get32(p + 4);
  const bool echo = v6 ? (d.icmp_type == kIcmp6EchoRequest || d.icmp_type == kIcmp6EchoReply)
                       : (d.icmp_type == kIcmpEchoRequest || d.icmp_type == kIcmpEchoReply);
  if (echo) {
    d.icmp_id = get16(p + 4);
    d.icmp_seq = get16(p + 6);
  }
  d.payload_off = d.l4_off + 8;
  d.payload_len = len - 8;
  if (v6 && (d.icmp_type == kIcmp6NeighborSolicit || d.icmp_type == kIcmp6NeighborAdvert) &&
      len >= 24) {
    d.na_flags = d.icmp_type == kIcmp6NeighborAdvert ? p[4] : 0;
    d.nd_target = IpAddr::v6_bytes(p + 8);
    // RFC 4861 4.6: options are type, length in 8-byte units, value.
    for (size_t i = 24; i + 2 <= len && p[i + 1] != 0 && i + p[i + 1] * 8u <= len;
         i += p[i + 1] * 8u) {
      if ((p[i] == 1 || p[i] == 2) && p[i + 1] == 1) {
        d.nd_has_lladdr = true;
        std::memcpy(d.nd_lladdr.b.data(), p + i + 2, 6);
      }
    }
  }
}

void decode_l4(Decoded& d, const uint8_t* f) {
  const uint8_t* p = f + d.l4_off;
  switch (d.l4_proto) {
    case kProtoTcp: decode_tcp(d, p, d.l4_len); break;
    case kProtoUdp: decode_udp(d, p, d.l4_len); break;
    case kProtoIcmp:
      if (d.l3 == L3Kind::kIpv4) decode_icmp(d, p, d.l4_len, false);
      break;
    case kProtoIcmp6:
      if (d.l3 == L3Kind::kIpv6) decode_icmp(d, p, d.l4_len, true);
      break;
    case kProtoSctp:
      if (d.l4_len >= 12) {  // RFC 9260 3.1 common header
        d.sport = get16(p);
        d.dport = get16(p + 2);
      }
      break;
    default:
      break;
  }
}

void decode_ipv4(Decoded& d, const uint8_t* f, size_t avail) {
  const uint8_t* p = f + d.l3_off;
  if (avail < 20) {
    fault(d, "ipv4_truncated");
    return;
  }
  if (p[0] >> 4 != 4) {
    fault(d, "ipv4_bad_version");
    return;
  }
  const size_t ihl = size_t(p[0] & 0x0f) * 4;
  d.ihl_bytes = uint8_t(ihl);
  if (ihl < 20 || ihl > avail) {
    fault(d, "ipv4_bad_ihl");
    return;
  }
  d.ip_len = get16(p + 2);
  if (d.ip_len < ihl || d.ip_len > avail) {
    fault(d, "ipv4_bad_total_length");
    return;
  }
  d.tos = p[1];
  d.ip_id = get16(p + 4);
  const uint16_t frag = get16(p + 6);
  d.df = frag & 0x4000;
  d.mf = frag & 0x2000;
  d.frag_offset = frag & 0x1fff;
  d.fragment = d.mf || d.frag_offset != 0;
  d.ttl = p[8];
  d.l4_proto = p[9];
  d.src = IpAddr::v4_bytes(p + 12);
  d.dst = IpAddr::v4_bytes(p + 16);
  if (!csum_valid({p, ihl})) fault(d, "ipv4_bad_checksum");
  if (bad_ipv4_source(d.src)) fault(d, "ipv4_bad_source");
  if (const char* o = ipv4_option_fault(p + 20, ihl - 20)) fault(d, o);
  d.l4_off = d.l3_off + ihl;
  d.l4_len = d.ip_len - ihl;
  if (d.frag_offset == 1 && d.l4_proto == kProtoTcp) fault(d, "fragment_overlap");
  if (d.frag_offset == 0) decode_l4(d, f);
}

void decode_ipv6(Decoded& d, const uint8_t* f, size_t avail) {
  const uint8_t* p = f + d.l3_off;
  if (avail < 40) {
    fault(d, "ipv6_truncated");
    return;
  }
  if (p[0] >> 4 != 6) {
    fault(d, "ipv6_bad_version");
    return;
  }
  const uint32_t w0 = get32(p);
  d.tos = uint8_t(w0 >> 20);
  d.flow_label = w0 & 0xfffff;
  const size_t plen = get16(p + 4);
  uint8_t nh = p[6];
  d.ttl = p[7];
  d.src = IpAddr::v6_bytes(p + 8);
  d.dst = IpAddr::v6_bytes(p + 24);
  // RFC 2675 jumbograms (payload length 0 + hop-by-hop) cannot fit an Ethernet frame.
  if (40 + plen > avail || (plen == 0 && nh == kProtoHopByHop)) {
    fault(d, "ipv6_bad_payload_length");
    return;
  }
  d.ip_len = uint16_t(40 + plen);
  const size_t end = d.l3_off + 40 + plen;
  size_t off = d.l3_off + 40;
  while (is_ipv6_ext(nh)) {
    if (d.ipv6_ext_count == kDecodeMaxIpv6Ext) {
      fault(d, "ipv6_ext_chain_too_long");
      return;
    }
    const size_t need = nh == kProtoFragment ? 8 : 2;
    if (off + need > end) {
      fault(d, "ipv6_ext_truncated");
      return;
    }
    size_t hlen;
    if (nh == kProtoFragment) hlen = 8;
    else if (nh == kProtoAh) hlen = (size_t(f[off + 1]) + 2) * 4;  // RFC 4302 2.2
    else hlen = (size_t(f[off + 1]) + 1) * 8;
    if (off + hlen > end) {
      fault(d, "ipv6_ext_truncated");
      return;
    }
    if (nh == kProtoFragment) {
      const uint16_t w = get16(f + off + 2);
      d.frag_offset = w >> 3;
      d.mf = w & 1;
      // RFC 6946: an atomic fragment (offset 0, M clear) is a whole packet.
      d.fragment = d.mf || d.frag_offset != 0;
      d.ip_id = uint16_t(get32(f + off + 4));
    }
    d.ipv6_ext[d.ipv6_ext_count++] = nh;
    nh = f[off];
    off += hlen;
  }
  d.l4_proto = nh;
  d.l4_off = off;
  d.l4_len = end - off;
  if (bad_ipv6_source(d.src)) fault(d, "ipv6_bad_source");
  if (d.src.is_v4() || d.dst.is_v4()) fault(d, "ipv6_mapped_address");  // RFC 4291 2.5.5.2
  if (d.frag_offset == 1 && d.l4_proto == kProtoTcp) fault(d, "fragment_overlap");
  if (d.frag_offset == 0) decode_l4(d, f);
}

void decode_arp(Decoded& d, const uint8_t* f, size_t avail) {
  const uint8_t* p = f + d.l3_off;
  if (avail < 28) {
    fault(d, "arp_truncated");
    return;
  }
  d.arp_htype = get16(p);
  d.arp_ptype = get16(p + 2);
  d.arp_op = get16(p + 6);
  std::memcpy(d.arp_sha.b.data(), p + 8, 6);
  d.arp_spa = IpAddr::v4_bytes(p + 14);
  std::memcpy(d.arp_tha.b.data(), p + 18, 6);
  d.arp_tpa = IpAddr::v4_bytes(p + 24);
  if (d.arp_htype != 1 || d.arp_ptype != kEtherIpv4 || p[4] != 6 || p[5] != 4 ||
      (d.arp_op != 1 && d.arp_op != 2)) {
    fault(d, "arp_unsupported");
  }
}

}  // namespace

Decoded decode(std::span<const uint8_t> frame) {
  Decoded d;
  const uint8_t* f = frame.data();
  const size_t len = frame.size();
  d.frame_len = len;
  if (len >= 6) std::memcpy(d.eth_dst.b.data(), f, 6);
  if (len >= 12) std::memcpy(d.eth_src.b.data(), f + 6, 6);
  if (len < kEthHeaderLen) {
    fault(d, "eth_truncated");
    return d;
  }
  size_t off = 12;
  uint16_t type = get16(f + off);
  while (type == kEtherVlan || type == kEtherQinQ) {
    if (d.vlan_tags == 1 || type == kEtherQinQ) {
      fault(d, "vlan_stacked");
      return d;
    }
    if (off + 2 + kVlanTagLen > len) {
      fault(d, "vlan_truncated");
      return d;
    }
    d.vlan_tci = get16(f + off + 2);
    ++d.vlan_tags;
    off += kVlanTagLen;
    type = get16(f + off);
  }
  d.ethertype = type;
  d.l3_off = off + 2;
  const size_t avail = len - d.l3_off;
  switch (type) {
    case kEtherArp:
      d.l3 = L3Kind::kArp;
      decode_arp(d, f, avail);
      break;
    case kEtherIpv4:
      d.l3 = L3Kind::kIpv4;
      decode_ipv4(d, f, avail);
      break;
    case kEtherIpv6:
      d.l3 = L3Kind::kIpv6;
      decode_ipv6(d, f, avail);
      break;
    default:
      d.l3 = L3Kind::kOther;
      fault(d, "ethertype_unsupported");
      break;
  }
  return d;
}

const char* csum_state_name(CsumState s) {
  switch (s) {
    case CsumState::kAbsent: return "absent";
    case CsumState::kValid: return "valid";
    case CsumState::kInvalid: return "invalid";
    case CsumState::kNotChecked: return "not_checked";
  }
  return "?";
}

ChecksumReport verify_checksums(std::span<const uint8_t> frame) {
  ChecksumReport r;
  const Decoded d = decode(frame);
  const uint8_t* f = frame.data();
  if (d.l3 == L3Kind::kIpv4 && d.ihl_bytes >= 20 && d.l3_off + d.ihl_bytes <= frame.size()) {
    r.ipv4 = csum_valid({f + d.l3_off, d.ihl_bytes}) ? CsumState::kValid : CsumState::kInvalid;
  }
  if (!d.is_ip() || d.l4_off == 0 || d.l4_off + d.l4_len > frame.size()) return r;
  r.l4_proto = d.l4_proto;
  const std::span<const uint8_t> l4{f + d.l4_off, d.l4_len};
  const bool v4 = d.l3 == L3Kind::kIpv4;
  uint64_t pseudo = 0;
  switch (d.l4_proto) {
    case kProtoTcp:
      if (l4.size() < 20) return r;
      pseudo = pseudo_header_sum(d.src, d.dst, kProtoTcp, uint32_t(l4.size()));
      break;
    case kProtoUdp:
      if (l4.size() < 8) return r;
      if (get16(l4.data() + 6) == 0) {
        // RFC 768: zero means no checksum over IPv4; RFC 8200 8.1 forbids it over IPv6.
        r.l4 = v4 ? CsumState::kNotChecked : CsumState::kInvalid;
        return r;
      }
      pseudo = pseudo_header_sum(d.src, d.dst, kProtoUdp, uint32_t(l4.size()));
      break;
    case kProtoIcmp:
      if (!v4 || l4.size() < 8) return r;
      break;
    case kProtoIcmp6:
      if (v4 || l4.size() < 8) return r;
      pseudo = pseudo_header_sum(d.src, d.dst, kProtoIcmp6, uint32_t(l4.size()));
      break;
    default:
      r.l4 = CsumState::kNotChecked;
      return r;
  }
  if (d.fragment) {
    r.l4 = CsumState::kNotChecked;  // the checksum covers the reassembled packet
    return r;
  }
  r.l4 = csum_valid(l4, pseudo) ? CsumState::kValid : CsumState::kInvalid;
  return r;
}

}  // namespace meshgate::pkt
