#include "tools/pktlib/malformed.h"

#include <array>

#include "tools/pktlib/checksum.h"

namespace meshgate::pkt {
namespace {

constexpr uint16_t kVlanA = 100;
constexpr uint16_t kVlanB = 200;
constexpr uint16_t kEtherLocalExperimental = 0x88b5;  // IEEE 802 local experimental 1
constexpr uint16_t kArpHtypeIeee802 = 6;              // a hardware type that is not Ethernet
constexpr size_t kEchoPayload = 56;                   // ping(8)'s default

EthHdr eth_of(const MalformedContext& c, bool pad = true) {
  EthHdr e;
  e.dst = c.gateway_mac;
  e.src = c.peer_mac;
  e.pad = pad;
  return e;
}

Endpoint dst4(const MalformedContext& c) {
  return c.service4 ? *c.service4 : Endpoint{c.local4.value_or(IpAddr{}), 80};
}
Endpoint dst6(const MalformedContext& c) {
  return c.service6 ? *c.service6 : Endpoint{c.local6.value_or(IpAddr{}), 80};
}

IpHdr ip_to(const MalformedContext& c, const IpAddr& dst) {
  IpHdr ip;
  ip.dst = dst;
  if (dst.is_v4()) {
    ip.src = c.client4;
    ip.id = uint16_t(c.seq);
    ip.df = true;
  } else {
    ip.src = c.client6;
    ip.flow_label = c.seq & 0xfffff;
  }
  return ip;
}

TcpHdr syn_to(const MalformedContext& c, uint16_t dport) {
  TcpHdr t;
  t.sport = c.client_port;
  t.dport = dport;
  t.seq = c.seq;
  t.flags = kTcpSyn;
  t.window = 64240;
  t.options = tcp_options({.mss = 1460, .wscale = 7, .sack_permitted = true});
  return t;
}

// A well-formed SYN from the client to `to`, the base most kinds damage in one place.
Bytes syn(const MalformedContext& c, const Endpoint& to, bool pad = true) {
  return build_tcp(eth_of(c, pad), ip_to(c, to.addr), syn_to(c, to.port));
}

Bytes cut(Bytes f, size_t len) {
  f.resize(len);
  return f;
}

// --- L2 ---

Bytes eth_truncated(const MalformedContext& c) {
  return cut(syn(c, dst4(c), false), 10);  // destination MAC and part of the source
}

Bytes vlan_truncated(const MalformedContext& c) {
  Bytes f = eth_frame(eth_of(c, false), kEtherVlan, std::array<uint8_t, 2>{0, kVlanA});
  return f;  // the tag's TCI but no inner EtherType
}

Bytes vlan_stacked(const MalformedContext& c) {
  EthHdr e = eth_of(c);
  e.vlan_tci = kVlanA;
  const Endpoint to = dst4(c);
  Bytes f = build_tcp(e, ip_to(c, to.addr), syn_to(c, to.port));
  const uint8_t inner[4] = {uint8_t(kEtherVlan >> 8), uint8_t(kEtherVlan), 0, kVlanB};
  f.insert(f.begin() + 16, inner, inner + 4);  // a second C-tag after the first TCI
  return f;
}

Bytes l2_not_for_us(const MalformedContext& c) {
  EthHdr e = eth_of(c);
  e.dst = c.other_mac;
  const Endpoint to = dst4(c);
  return build_tcp(e, ip_to(c, to.addr), syn_to(c, to.port));
}

Bytes ethertype_unsupported(const MalformedContext& c) {
  Bytes payload(46, 0);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i);
  return eth_frame(eth_of(c), kEtherLocalExperimental, payload);
}

// --- ARP ---

ArpHdr arp_request(const MalformedContext& c) {
  ArpHdr a;
  a.op = 1;
  a.sha = c.peer_mac;
  a.spa = c.peer4.value_or(c.client4);
  a.tpa = c.local4 ? *c.local4 : dst4(c).addr;
  return a;
}

Bytes arp_truncated(const MalformedContext& c) {
  return cut(build_arp(eth_of(c, false), arp_request(c)), kEthHeaderLen + 20);
}

Bytes arp_unsupported(const MalformedContext& c) {
  ArpHdr a = arp_request(c);
  a.htype = kArpHtypeIeee802;
  return build_arp(eth_of(c), a);
}

// --- IPv4 ---

constexpr size_t kL3 = kEthHeaderLen;

Bytes ipv4_truncated(const MalformedContext& c) {
  return cut(syn(c, dst4(c), false), kL3 + 12);
}

Bytes ipv4_bad_version(const MalformedContext& c) {
  Bytes f = syn(c, dst4(c));
  f[kL3] = 0x60 | (f[kL3] & 0x0f);
  ipv4_update_checksum(f, kL3);
  return f;
}

Bytes ipv4_bad_ihl(const MalformedContext& c) {
  Bytes f = syn(c, dst4(c));
  f[kL3] = 0x44;  // IHL 4: 16 bytes, below the 20-byte minimum
  ipv4_update_checksum(f, kL3);
  return f;
}

Bytes ipv4_bad_total_length(const MalformedContext& c) {
  Bytes f = syn(c, dst4(c));
  put16(&f[kL3 + 2], uint16_t(get16(&f[kL3 + 2]) + 100));  // beyond the frame
  ipv4_update_checksum(f, kL3);
  return f;
}

Bytes ipv4_bad_checksum(const MalformedContext& c) {
  const Endpoint to = dst4(c);
  IpHdr ip = ip_to(c, to.addr);
  ip.csum = Csum::kCorrupt;
  return build_tcp(eth_of(c), ip, syn_to(c, to.port));
}

Bytes ipv4_bad_source(const MalformedContext& c) {
  const Endpoint to = dst4(c);
  IpHdr ip = ip_to(c, to.addr);
  ip.src = IpAddr::v4(0xe0000001);  // 224.0.0.1: multicast
  return build_tcp(eth_of(c), ip, syn_to(c, to.port));
}

// --- IPv6 ---

Bytes ipv6_truncated(const MalformedContext& c) {
  return cut(syn(c, dst6(c), false), kL3 + 30);
}

Bytes ipv6_bad_version(const MalformedContext& c) {
  Bytes f = syn(c, dst6(c));
  f[kL3] = 0x40 | (f[kL3] & 0x0f);
  return f;
}

Bytes ipv6_bad_payload_length(const MalformedContext& c) {
  Bytes f = syn(c, dst6(c));
  put16(&f[kL3 + 4], uint16_t(get16(&f[kL3 + 4]) + 100));  // beyond the frame
  return f;
}

Bytes ipv6_ext_truncated(const MalformedContext& c) {
  // A hop-by-hop header claiming 16 bytes (length field 1) of which the payload holds 8.
  Ipv6Ext hbh;
  hbh.type = kProtoHopByHop;
  hbh.bytes = {0, 1, 1, 4, 0, 0, 0, 0};
  IpHdr ip = ip_to(c, dst6(c).addr);
  ip.ext.push_back(hbh);
  return build_ip(eth_of(c, false), ip, kProtoTcp, {});
}

Bytes ipv6_ext_chain_too_long(const MalformedContext& c) {
  const Endpoint to = dst6(c);
  IpHdr ip = ip_to(c, to.addr);
  // One more destination-options header than the walk allows (kMaxIpv6ExtHeaders = 8).
  for (int i = 0; i < 9; ++i) ip.ext.push_back(ipv6_dest_opts());
  return build_tcp(eth_of(c), ip, syn_to(c, to.port));
}

Bytes ipv6_bad_source(const MalformedContext& c) {
  const Endpoint to = dst6(c);
  IpHdr ip = ip_to(c, to.addr);
  ip.src = *IpAddr::parse("ff02::1");  // multicast
  return build_tcp(eth_of(c), ip, syn_to(c, to.port));
}

// --- L4 ---

Bytes tcp_truncated(const MalformedContext& c) {
  const Endpoint to = dst4(c);
  const IpHdr ip = ip_to(c, to.addr);
  const Bytes seg = tcp_segment(ip.src, ip.dst, syn_to(c, to.port));
  return build_ip(eth_of(c, false), ip, kProtoTcp, std::span(seg).first(12));
}

Bytes tcp_bad_data_offset(const MalformedContext& c) {
  const Endpoint to = dst4(c);
  TcpHdr t = syn_to(c, to.port);
  t.options.clear();
  t.data_offset = 4;  // 16 bytes: below the 20-byte header
  return build_tcp(eth_of(c), ip_to(c, to.addr), t);
}

Bytes tcp_bad_option(const MalformedContext& c) {
  const Endpoint to = dst4(c);
  TcpHdr t = syn_to(c, to.port);
  t.options = {2, 12, 0x05, 0xb4};  // MSS claiming 12 bytes in a 4-byte option area
  return build_tcp(eth_of(c), ip_to(c, to.addr), t);
}

Bytes tcp_bad_flags(const MalformedContext& c) {
  const Endpoint to = dst4(c);
  TcpHdr t = syn_to(c, to.port);
  t.flags = kTcpSyn | kTcpFin;
  return build_tcp(eth_of(c), ip_to(c, to.addr), t);
}

Endpoint udp_dst(const MalformedContext& c) {
  return c.udp_service4 ? *c.udp_service4 : dst4(c);
}

Bytes udp_truncated(const MalformedContext& c) {
  const Endpoint to = udp_dst(c);
  uint8_t part[4];
  put16(part, c.client_port);
  put16(part + 2, to.port);
  return build_ip(eth_of(c, false), ip_to(c, to.addr), kProtoUdp, part);
}

Bytes udp_bad_length(const MalformedContext& c) {
  const Endpoint to = udp_dst(c);
  UdpHdr u;
  u.sport = c.client_port;
  u.dport = to.port;
  u.length = 8 + 16 + 100;  // beyond the IP payload
  const Bytes payload(16, 0x61);
  return build_udp(eth_of(c), ip_to(c, to.addr), u, payload);
}

Bytes icmp_truncated(const MalformedContext& c) {
  const uint8_t part[3] = {kIcmpEchoRequest, 0, 0};  // shorter than a 4-byte header, too
  return build_ip(eth_of(c, false), ip_to(c, *c.local4), kProtoIcmp, part);
}

Bytes icmp6_truncated(const MalformedContext& c) {
  const uint8_t part[3] = {kIcmp6EchoRequest, 0, 0};
  return build_ip(eth_of(c, false), ip_to(c, *c.local6), kProtoIcmp6, part);
}

Bytes icmp_bad_checksum(const MalformedContext& c) {
  IcmpHdr h;
  h.type = kIcmpEchoRequest;
  h.rest = c.seq;
  h.csum = Csum::kCorrupt;
  Bytes payload(kEchoPayload);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(0x10 + i);
  return build_icmp(eth_of(c), ip_to(c, *c.local4), h, payload);
}

// --- Decisions ---

Bytes fragment_unsupported(const MalformedContext& c) {
  // A later fragment to the gateway's own address: the gateway does not reassemble.
  IpHdr ip = ip_to(c, *c.local4);
  ip.frag_offset = 3;  // 24 bytes in: no transport header in this fragment
  return build_ip(eth_of(c), ip, kProtoUdp, Bytes(24, 0x62));
}

Bytes fragment_no_first(const MalformedContext& c) {
  // A later fragment of a datagram to a VIP whose first fragment (with the ports) never came.
  const Endpoint to = *c.service4;
  IpHdr ip = ip_to(c, to.addr);
  ip.frag_offset = 3;
  return build_ip(eth_of(c), ip, kProtoTcp, Bytes(24, 0x63));
}

Bytes l4_unsupported(const MalformedContext& c) {
  // SCTP INIT (RFC 9260 3.3.2) to the VIP's port: a transport no service carries.
  const Endpoint to = *c.service4;
  Bytes s(32, 0);
  put16(&s[0], c.client_port);
  put16(&s[2], to.port);
  // verification tag 0 (an INIT), checksum filled last
  s[12] = 1;           // INIT
  put16(&s[14], 20);   // chunk length
  put32(&s[16], c.seq | 1);  // initiate tag, nonzero
  put32(&s[20], 106496);     // a_rwnd
  put16(&s[24], 10);         // outbound streams
  put16(&s[26], 65535);      // inbound streams
  put32(&s[28], c.seq);      // initial TSN
  const uint32_t crc = sctp_crc32c(s);
  s[8] = uint8_t(crc);  // RFC 9260 Appendix A: stored least significant byte first
  s[9] = uint8_t(crc >> 8);
  s[10] = uint8_t(crc >> 16);
  s[11] = uint8_t(crc >> 24);
  return build_ip(eth_of(c), ip_to(c, to.addr), kProtoSctp, s);
}

Bytes no_service(const MalformedContext& c) { return syn(c, c.transit4); }

Bytes ttl_exceeded(const MalformedContext& c) {
  const Endpoint to = *c.service4;
  IpHdr ip = ip_to(c, to.addr);
  ip.ttl = 1;
  return build_tcp(eth_of(c), ip, syn_to(c, to.port));
}

constexpr MalformedKind kKinds[] = {
    {"eth_truncated", "10-byte frame: shorter than an Ethernet header", kNeedDst4, eth_truncated},
    {"vlan_truncated", "802.1Q tag without its inner EtherType", 0, vlan_truncated},
    {"vlan_stacked", "two 802.1Q tags (QinQ) before a valid SYN", kNeedDst4, vlan_stacked},
    {"l2_not_for_us", "valid SYN unicast to another MAC", kNeedDst4, l2_not_for_us},
    {"ethertype_unsupported", "EtherType 0x88b5 (local experimental)", 0, ethertype_unsupported},
    {"arp_truncated", "ARP request cut to 20 of 28 bytes", kNeedDst4, arp_truncated},
    {"arp_unsupported", "ARP request with hardware type 6 (IEEE 802)", kNeedDst4, arp_unsupported},
    {"ipv4_truncated", "12 bytes of IPv4 header", kNeedDst4, ipv4_truncated},
    {"ipv4_bad_version", "IPv4 EtherType, version 6", kNeedDst4, ipv4_bad_version},
    {"ipv4_bad_ihl", "IHL 4 (16-byte header)", kNeedDst4, ipv4_bad_ihl},
    {"ipv4_bad_total_length", "total length 100 bytes beyond the frame", kNeedDst4,
     ipv4_bad_total_length},
    {"ipv4_bad_checksum", "wrong IPv4 header checksum", kNeedDst4, ipv4_bad_checksum},
    {"ipv4_bad_source", "source 224.0.0.1 (multicast)", kNeedDst4, ipv4_bad_source},
    {"ipv6_truncated", "30 bytes of IPv6 header", kNeedDst6, ipv6_truncated},
    {"ipv6_bad_version", "IPv6 EtherType, version 4", kNeedDst6, ipv6_bad_version},
    {"ipv6_bad_payload_length", "payload length 100 bytes beyond the frame", kNeedDst6,
     ipv6_bad_payload_length},
    {"ipv6_ext_truncated", "hop-by-hop header of 16 bytes in an 8-byte payload", kNeedDst6,
     ipv6_ext_truncated},
    {"ipv6_ext_chain_too_long", "9 destination-options headers before a SYN", kNeedDst6,
     ipv6_ext_chain_too_long},
    {"ipv6_bad_source", "source ff02::1 (multicast)", kNeedDst6, ipv6_bad_source},
    {"tcp_truncated", "12 bytes of TCP header", kNeedDst4, tcp_truncated},
    {"tcp_bad_data_offset", "data offset 4", kNeedDst4, tcp_bad_data_offset},
    {"tcp_bad_option", "MSS option of length 12 in a 4-byte option area", kNeedDst4,
     tcp_bad_option},
    {"tcp_bad_flags", "SYN+FIN", kNeedDst4, tcp_bad_flags},
    {"udp_truncated", "4 bytes of UDP header", kNeedDst4, udp_truncated},
    {"udp_bad_length", "UDP length 100 bytes beyond the IP payload", kNeedDst4, udp_bad_length},
    {"icmp_truncated", "3 bytes of ICMP to a local address", kNeedLocal4, icmp_truncated},
    {"icmp6_truncated", "3 bytes of ICMPv6 to a local address", kNeedLocal6, icmp6_truncated},
    {"icmp_bad_checksum", "echo request to a local address, wrong ICMP checksum", kNeedLocal4,
     icmp_bad_checksum},
    {"fragment_unsupported", "later IPv4 fragment to the gateway's address", kNeedLocal4,
     fragment_unsupported},
    {"fragment_no_first", "later IPv4 fragment to a VIP, its first fragment never sent",
     kNeedService4, fragment_no_first},
    {"l4_unsupported", "SCTP INIT to a VIP", kNeedService4, l4_unsupported},
    {"no_service", "valid SYN to a transit address that is no VIP", 0, no_service},
    {"ttl_exceeded", "SYN to a VIP with TTL 1 (answered with ICMP time exceeded)", kNeedService4,
     ttl_exceeded},
};

}  // namespace

std::span<const MalformedKind> malformed_kinds() { return kKinds; }

const MalformedKind* find_malformed(std::string_view name) {
  for (const auto& k : kKinds) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

bool malformed_possible(const MalformedKind& kind, const MalformedContext& ctx) {
  const uint8_t n = kind.needs;
  if ((n & kNeedDst4) && !ctx.service4 && !ctx.local4) return false;
  if ((n & kNeedDst6) && !ctx.service6 && !ctx.local6) return false;
  if ((n & kNeedService4) && !ctx.service4) return false;
  if ((n & kNeedLocal4) && !ctx.local4) return false;
  if ((n & kNeedLocal6) && !ctx.local6) return false;
  return true;
}

}  // namespace meshgate::pkt
