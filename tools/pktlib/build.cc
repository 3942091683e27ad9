#include "tools/pktlib/build.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "tools/pktlib/checksum.h"

namespace meshgate::pkt {
namespace {

constexpr size_t kIpv4HeaderLen = 20;
constexpr size_t kIpv6HeaderLen = 40;
constexpr size_t kTcpHeaderLen = 20;
constexpr size_t kUdpHeaderLen = 8;
constexpr size_t kIcmpHeaderLen = 8;
// RFC 1812 4.3.2.3: an ICMP error should quote as much as fits in a 576-byte datagram.
constexpr size_t kIcmpErrorMaxIpv4 = 576;
// RFC 4443 2.4(c): as much as fits in the IPv6 minimum MTU.
constexpr size_t kIcmpErrorMaxIpv6 = 1280;

uint16_t pick_checksum(Csum mode, uint16_t good) {
  switch (mode) {
    case Csum::kValid: return good;
    case Csum::kCorrupt: return corrupt_checksum(good);
    case Csum::kZero: return 0;
  }
  return good;
}

void append16(Bytes& f, uint16_t v) {
  f.push_back(uint8_t(v >> 8));
  f.push_back(uint8_t(v));
}
void append32(Bytes& f, uint32_t v) {
  append16(f, uint16_t(v >> 16));
  append16(f, uint16_t(v));
}
// resize + memcpy rather than insert(): GCC 12 -O3 reports false -Warray-bounds /
// -Wstringop-overflow on vector<uint8_t>::insert of short ranges.
void append_bytes(Bytes& f, std::span<const uint8_t> b) {
  if (b.empty()) return;
  const size_t at = f.size();
  f.resize(at + b.size());
  std::memcpy(&f[at], b.data(), b.size());
}
void append_list(Bytes& f, std::initializer_list<uint8_t> b) {
  append_bytes(f, {b.begin(), b.size()});
}
void append_addr(Bytes& f, const IpAddr& a) {
  if (a.is_v4()) append_bytes(f, {a.v4_ptr(), 4});
  else append_bytes(f, {a.b, 16});
}

size_t append_eth(Bytes& f, const EthHdr& eth, uint16_t ethertype) {
  append_bytes(f, eth.dst.b);
  append_bytes(f, eth.src.b);
  if (eth.vlan_tci) {
    append16(f, kEtherVlan);
    append16(f, *eth.vlan_tci);
  }
  append16(f, ethertype);
  return f.size();
}

void finish_eth(Bytes& f, const EthHdr& eth) {
  if (eth.pad && f.size() < kEthMinFrameLen) f.resize(kEthMinFrameLen, 0);
}

// Writes the IP header (and IPv6 extension headers) with zero lengths; finish_ip patches them.
void append_ip(Bytes& f, const IpHdr& ip, uint8_t proto) {
  if (ip.src.is_v4()) {
    const size_t opt_len = (ip.options.size() + 3) & ~size_t(3);
    f.push_back(uint8_t(0x40 | ((kIpv4HeaderLen + opt_len) / 4)));
    f.push_back(ip.tos);
    append16(f, 0);  // total length
    append16(f, ip.id);
    append16(f, uint16_t((ip.df ? 0x4000 : 0) | (ip.mf ? 0x2000 : 0) | (ip.frag_offset & 0x1fff)));
    f.push_back(ip.ttl);
    f.push_back(proto);
    append16(f, 0);  // checksum
    append_addr(f, ip.src);
    append_addr(f, ip.dst);
    append_bytes(f, ip.options);
    f.resize(f.size() + (opt_len - ip.options.size()), 0);  // EOL padding
    return;
  }
  append32(f, 0x60000000u | uint32_t(ip.tos) << 20 | (ip.flow_label & 0xfffff));
  append16(f, 0);  // payload length
  f.push_back(ip.ext.empty() ? proto : ip.ext.front().type);
  f.push_back(ip.ttl);
  append_addr(f, ip.src);
  append_addr(f, ip.dst);
  for (size_t i = 0; i < ip.ext.size(); ++i) {
    const size_t at = f.size();
    append_bytes(f, ip.ext[i].bytes);
    if (!ip.ext[i].bytes.empty()) f[at] = i + 1 < ip.ext.size() ? ip.ext[i + 1].type : proto;
  }
}

void finish_ip(Bytes& f, size_t l3, const IpHdr& ip) {
  const size_t len = f.size() - l3;
  if (ip.src.is_v4()) {
    put16(&f[l3 + 2], uint16_t(len));
    const size_t ihl = size_t(f[l3] & 0x0f) * 4;
    const uint16_t good = inet_checksum({&f[l3], ihl});
    put16(&f[l3 + 10], pick_checksum(ip.csum, good));
  } else {
    put16(&f[l3 + 4], uint16_t(len - kIpv6HeaderLen));
  }
}

// Fills the checksum at `csum_off` of the upper-layer packet starting at `l4` and running to
// the end of `f`.
void finish_l4(Bytes& f, size_t l4, size_t csum_off, uint8_t proto, const IpAddr& src,
               const IpAddr& dst, Csum mode) {
  const std::span<const uint8_t> seg{&f[l4], f.size() - l4};
  uint16_t good;
  if (proto == kProtoIcmp && src.is_v4()) {
    good = inet_checksum(seg);  // ICMPv4 has no pseudo-header (RFC 792)
  } else {
    good = l4_checksum(src, dst, proto, seg);
    // RFC 768: a computed zero is sent as all ones; zero means "no checksum".
    if (proto == kProtoUdp && good == 0) good = 0xffff;
  }
  put16(&f[l4 + csum_off], pick_checksum(mode, good));
}

void append_tcp(Bytes& f, const IpHdr& ip, const TcpHdr& tcp, std::span<const uint8_t> payload) {
  const size_t l4 = f.size();
  const size_t opt_len = (tcp.options.size() + 3) & ~size_t(3);
  const uint8_t doff = tcp.data_offset ? tcp.data_offset : uint8_t((kTcpHeaderLen + opt_len) / 4);
  append16(f, tcp.sport);
  append16(f, tcp.dport);
  append32(f, tcp.seq);
  append32(f, tcp.ack);
  f.push_back(uint8_t(doff << 4));
  f.push_back(tcp.flags);
  append16(f, tcp.window);
  append16(f, 0);  // checksum
  append16(f, tcp.urgent);
  append_bytes(f, tcp.options);
  f.resize(f.size() + (opt_len - tcp.options.size()), 0);
  append_bytes(f, payload);
  finish_l4(f, l4, 16, kProtoTcp, ip.src, ip.dst, tcp.csum);
}

void append_udp(Bytes& f, const IpHdr& ip, const UdpHdr& udp, std::span<const uint8_t> payload) {
  const size_t l4 = f.size();
  append16(f, udp.sport);
  append16(f, udp.dport);
  append16(f, udp.length ? *udp.length : uint16_t(kUdpHeaderLen + payload.size()));
  append16(f, 0);
  append_bytes(f, payload);
  finish_l4(f, l4, 6, kProtoUdp, ip.src, ip.dst, udp.csum);
}

void append_icmp(Bytes& f, const IpHdr& ip, const IcmpHdr& icmp, std::span<const uint8_t> payload) {
  const size_t l4 = f.size();
  f.push_back(icmp.type);
  f.push_back(icmp.code);
  append16(f, 0);
  append32(f, icmp.rest);
  append_bytes(f, payload);
  finish_l4(f, l4, 2, ip.src.is_v4() ? kProtoIcmp : kProtoIcmp6, ip.src, ip.dst, icmp.csum);
}

uint16_t ethertype_of(const IpHdr& ip) { return ip.src.is_v4() ? kEtherIpv4 : kEtherIpv6; }

size_t ip_header_len(const IpHdr& ip) {
  if (ip.src.is_v4()) return kIpv4HeaderLen + ((ip.options.size() + 3) & ~size_t(3));
  size_t n = kIpv6HeaderLen;
  for (const auto& e : ip.ext) n += e.bytes.size();
  return n;
}

// Frame = Ethernet + IP + whatever `body` appends; lengths, checksums and padding finished.
template <typename Body>
Bytes frame_with(const EthHdr& eth, const IpHdr& ip, uint8_t proto, size_t l4_hint, Body body) {
  Bytes f;
  f.reserve(kEthHeaderLen + kVlanTagLen + ip_header_len(ip) + l4_hint);
  const size_t l3 = append_eth(f, eth, ethertype_of(ip));
  append_ip(f, ip, proto);
  body(f);
  finish_ip(f, l3, ip);
  finish_eth(f, eth);
  return f;
}

Ipv6Ext options_ext(uint8_t type, std::span<const uint8_t> options) {
  Ipv6Ext e;
  e.type = type;
  e.bytes = {0, 0};
  append_bytes(e.bytes, options);
  const size_t pad = (8 - e.bytes.size() % 8) % 8;
  if (pad == 1) {
    e.bytes.push_back(0);  // Pad1
  } else if (pad > 1) {
    e.bytes.push_back(1);  // PadN
    e.bytes.push_back(uint8_t(pad - 2));
    e.bytes.resize(e.bytes.size() + pad - 2, 0);
  }
  e.bytes[1] = uint8_t(e.bytes.size() / 8 - 1);
  return e;
}

}  // namespace

Ipv6Ext ipv6_hop_by_hop(std::span<const uint8_t> options) {
  return options_ext(kProtoHopByHop, options);
}

Ipv6Ext ipv6_dest_opts(std::span<const uint8_t> options) {
  return options_ext(kProtoDestOpts, options);
}

Ipv6Ext ipv6_routing(uint8_t routing_type, uint8_t segments_left,
                     std::span<const IpAddr> addresses) {
  Ipv6Ext e;
  e.type = kProtoRouting;
  e.bytes = {0, uint8_t(2 * addresses.size()), routing_type, segments_left, 0, 0, 0, 0};
  for (const auto& a : addresses) append_bytes(e.bytes, {a.b, 16});
  return e;
}

Ipv6Ext ipv6_fragment(uint16_t offset_units, bool more_fragments, uint32_t id) {
  Ipv6Ext e;
  e.type = kProtoFragment;
  e.bytes = {0, 0};
  append16(e.bytes, uint16_t(offset_units << 3 | (more_fragments ? 1 : 0)));
  append32(e.bytes, id);
  return e;
}

Bytes tcp_options(const TcpOptions& o) {
  Bytes b;
  if (o.mss) {
    append_list(b, {2, 4});
    append16(b, *o.mss);
  }
  if (o.ts_val && o.sack_permitted) {
    append_list(b, {4, 2, 8, 10});
  } else if (o.ts_val) {
    append_list(b, {1, 1, 8, 10});
  } else if (o.sack_permitted) {
    append_list(b, {1, 1, 4, 2});
  }
  if (o.ts_val) {
    append32(b, *o.ts_val);
    append32(b, o.ts_ecr);
  }
  if (o.wscale) append_list(b, {1, 3, 3, *o.wscale});
  return b;
}

Bytes tcp_segment(const IpAddr& src, const IpAddr& dst, const TcpHdr& tcp,
                  std::span<const uint8_t> payload) {
  Bytes f;
  f.reserve(kTcpHeaderLen + tcp.options.size() + 3 + payload.size());
  IpHdr ip;
  ip.src = src;
  ip.dst = dst;
  append_tcp(f, ip, tcp, payload);
  return f;
}

Bytes udp_datagram(const IpAddr& src, const IpAddr& dst, const UdpHdr& udp,
                   std::span<const uint8_t> payload) {
  Bytes f;
  f.reserve(kUdpHeaderLen + payload.size());
  IpHdr ip;
  ip.src = src;
  ip.dst = dst;
  append_udp(f, ip, udp, payload);
  return f;
}

Bytes icmp_message(const IpAddr& src, const IpAddr& dst, const IcmpHdr& icmp,
                   std::span<const uint8_t> payload) {
  Bytes f;
  f.reserve(kIcmpHeaderLen + payload.size());
  IpHdr ip;
  ip.src = src;
  ip.dst = dst;
  append_icmp(f, ip, icmp, payload);
  return f;
}

Bytes ip_packet(const IpHdr& ip, uint8_t proto, std::span<const uint8_t> l4) {
  Bytes f;
  f.reserve(ip_header_len(ip) + l4.size());
  append_ip(f, ip, proto);
  append_bytes(f, l4);
  finish_ip(f, 0, ip);
  return f;
}

Bytes eth_frame(const EthHdr& eth, uint16_t ethertype, std::span<const uint8_t> payload) {
  Bytes f;
  f.reserve(kEthHeaderLen + kVlanTagLen + std::max(payload.size(), kEthMinFrameLen));
  append_eth(f, eth, ethertype);
  append_bytes(f, payload);
  finish_eth(f, eth);
  return f;
}

Bytes build_ip(const EthHdr& eth, const IpHdr& ip, uint8_t proto, std::span<const uint8_t> l4) {
  return frame_with(eth, ip, proto, l4.size(), [&](Bytes& f) { append_bytes(f, l4); });
}

Bytes build_tcp(const EthHdr& eth, const IpHdr& ip, const TcpHdr& tcp,
                std::span<const uint8_t> payload) {
  return frame_with(eth, ip, kProtoTcp, kTcpHeaderLen + tcp.options.size() + 3 + payload.size(),
                    [&](Bytes& f) { append_tcp(f, ip, tcp, payload); });
}

Bytes build_udp(const EthHdr& eth, const IpHdr& ip, const UdpHdr& udp,
                std::span<const uint8_t> payload) {
  return frame_with(eth, ip, kProtoUdp, kUdpHeaderLen + payload.size(),
                    [&](Bytes& f) { append_udp(f, ip, udp, payload); });
}

Bytes build_icmp(const EthHdr& eth, const IpHdr& ip, const IcmpHdr& icmp,
                 std::span<const uint8_t> payload) {
  return frame_with(eth, ip, ip.src.is_v4() ? kProtoIcmp : kProtoIcmp6,
                    kIcmpHeaderLen + payload.size(),
                    [&](Bytes& f) { append_icmp(f, ip, icmp, payload); });
}

Bytes build_icmp_echo(const EthHdr& eth, const IpHdr& ip, bool reply, uint16_t id, uint16_t seq,
                      std::span<const uint8_t> payload) {
  IcmpHdr h;
  if (ip.src.is_v4()) h.type = reply ? kIcmpEchoReply : kIcmpEchoRequest;
  else h.type = reply ? kIcmp6EchoReply : kIcmp6EchoRequest;
  h.rest = uint32_t(id) << 16 | seq;
  return build_icmp(eth, ip, h, payload);
}

Bytes build_icmp_error(const EthHdr& eth, const IpHdr& ip, uint8_t type, uint8_t code,
                       std::span<const uint8_t> offending, uint32_t rest) {
  const size_t limit = ip.src.is_v4() ? kIcmpErrorMaxIpv4 : kIcmpErrorMaxIpv6;
  const size_t room = limit - std::min(limit, ip_header_len(ip) + kIcmpHeaderLen);
  IcmpHdr h;
  h.type = type;
  h.code = code;
  h.rest = rest;
  return build_icmp(eth, ip, h, offending.first(std::min(room, offending.size())));
}

Bytes build_arp(const EthHdr& eth, const ArpHdr& arp) {
  Bytes p;
  p.reserve(28);
  append16(p, arp.htype);
  append16(p, arp.ptype);
  p.push_back(arp.hlen);
  p.push_back(arp.plen);
  append16(p, arp.op);
  append_bytes(p, arp.sha.b);
  append_bytes(p, {arp.spa.v4_ptr(), 4});
  append_bytes(p, arp.tha.b);
  append_bytes(p, {arp.tpa.v4_ptr(), 4});
  return eth_frame(eth, kEtherArp, p);
}

IpHdr ndp_ip_hdr(const IpAddr& src, const IpAddr& dst) {
  IpHdr ip;
  ip.src = src;
  ip.dst = dst;
  ip.ttl = kNdpHopLimit;
  return ip;
}

static Bytes ndp_body(const IpAddr& target, uint8_t option_type, std::optional<MacAddr> lladdr) {
  Bytes b(target.b, target.b + 16);
  if (lladdr) {
    b.push_back(option_type);
    b.push_back(1);  // length in units of 8 bytes
    append_bytes(b, lladdr->b);
  }
  return b;
}

Bytes build_ndp_ns(const EthHdr& eth, const IpHdr& ip, const IpAddr& target,
                   std::optional<MacAddr> source_lladdr) {
  IcmpHdr h;
  h.type = kIcmp6NeighborSolicit;
  return build_icmp(eth, ip, h, ndp_body(target, 1, source_lladdr));
}

Bytes build_ndp_na(const EthHdr& eth, const IpHdr& ip, const IpAddr& target, uint8_t na_flags,
                   std::optional<MacAddr> target_lladdr) {
  IcmpHdr h;
  h.type = kIcmp6NeighborAdvert;
  h.rest = uint32_t(na_flags) << 24;
  return build_icmp(eth, ip, h, ndp_body(target, 2, target_lladdr));
}

IpAddr solicited_node(const IpAddr& a) {
  IpAddr m;
  m.b[0] = 0xff;
  m.b[1] = 0x02;
  m.b[11] = 0x01;
  m.b[12] = 0xff;
  m.b[13] = a.b[13];
  m.b[14] = a.b[14];
  m.b[15] = a.b[15];
  return m;
}

MacAddr ipv6_multicast_mac(const IpAddr& group) {
  return MacAddr{{0x33, 0x33, group.b[12], group.b[13], group.b[14], group.b[15]}};
}

void ipv4_update_checksum(std::span<uint8_t> frame, size_t l3_off) {
  if (frame.size() < l3_off + kIpv4HeaderLen) return;
  const size_t ihl = std::clamp<size_t>(size_t(frame[l3_off] & 0x0f) * 4, kIpv4HeaderLen,
                                        frame.size() - l3_off);
  put16(&frame[l3_off + 10], 0);
  put16(&frame[l3_off + 10], inet_checksum({&frame[l3_off], ihl}));
}

}  // namespace meshgate::pkt
