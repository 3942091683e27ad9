// Frame builders for tools and tests: Ethernet (+802.1Q), ARP, IPv4 (+options, fragments),
// IPv6 (+extension headers), TCP (+options), UDP, ICMP, ICMPv6 (echo, errors, NDP), raw L4.
// Any thread; each call allocates the frame it returns. No DPDK.
//
// Every builder computes lengths and checksums; a `Csum` field per header lets a caller ask for a
// wrong or zero checksum instead. Ports, ids and other multi-byte fields are host order here
// and written big-endian. The IP family follows `IpHdr::src` (IPv4 when it is IPv4-mapped).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dataplane/common/net_types.h"

namespace meshgate::pkt {

using Bytes = std::vector<uint8_t>;

inline constexpr uint16_t kEtherIpv4 = 0x0800;
inline constexpr uint16_t kEtherArp = 0x0806;
inline constexpr uint16_t kEtherVlan = 0x8100;  // 802.1Q C-tag
inline constexpr uint16_t kEtherQinQ = 0x88a8;  // 802.1ad S-tag
inline constexpr uint16_t kEtherIpv6 = 0x86dd;

inline constexpr uint8_t kProtoHopByHop = 0;
inline constexpr uint8_t kProtoIcmp = 1;
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;
inline constexpr uint8_t kProtoRouting = 43;
inline constexpr uint8_t kProtoFragment = 44;
inline constexpr uint8_t kProtoGre = 47;
inline constexpr uint8_t kProtoIcmp6 = 58;
inline constexpr uint8_t kProtoNoNext = 59;
inline constexpr uint8_t kProtoDestOpts = 60;
inline constexpr uint8_t kProtoSctp = 132;

inline constexpr uint8_t kTcpFin = 0x01;
inline constexpr uint8_t kTcpSyn = 0x02;
inline constexpr uint8_t kTcpRst = 0x04;
inline constexpr uint8_t kTcpPsh = 0x08;
inline constexpr uint8_t kTcpAck = 0x10;
inline constexpr uint8_t kTcpUrg = 0x20;
inline constexpr uint8_t kTcpEce = 0x40;
inline constexpr uint8_t kTcpCwr = 0x80;

inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpDestUnreachable = 3;
inline constexpr uint8_t kIcmpEchoRequest = 8;
inline constexpr uint8_t kIcmpTimeExceeded = 11;
inline constexpr uint8_t kIcmp6DestUnreachable = 1;
inline constexpr uint8_t kIcmp6PacketTooBig = 2;
inline constexpr uint8_t kIcmp6TimeExceeded = 3;
inline constexpr uint8_t kIcmp6EchoRequest = 128;
inline constexpr uint8_t kIcmp6EchoReply = 129;
inline constexpr uint8_t kIcmp6NeighborSolicit = 135;
inline constexpr uint8_t kIcmp6NeighborAdvert = 136;

inline constexpr size_t kEthHeaderLen = 14;
inline constexpr size_t kVlanTagLen = 4;
// Shortest Ethernet frame without its 4-byte FCS: NICs pad shorter frames with zeros.
inline constexpr size_t kEthMinFrameLen = 60;
inline constexpr uint8_t kDefaultTtl = 64;  // Linux net.ipv4.ip_default_ttl
// RFC 4861 6.1: NDP messages are only accepted with hop limit 255 (never forwarded).
inline constexpr uint8_t kNdpHopLimit = 255;

// What to write in a checksum field.
enum class Csum : uint8_t {
  kValid,    // the right checksum
  kCorrupt,  // a checksum that is wrong for this packet (corrupt_checksum())
  kZero,     // zero (for UDP over IPv4: "no checksum", RFC 768)
};

struct EthHdr {
  MacAddr dst;
  MacAddr src;
  std::optional<uint16_t> vlan_tci;  // one 802.1Q tag: PCP(3) DEI(1) VID(12)
  bool pad = true;                   // zero-pad to kEthMinFrameLen, as a NIC sends it
};

// One IPv6 extension header, whole (kProtoHopByHop, kProtoRouting, kProtoFragment,
// kProtoDestOpts, ...). Byte 0 (next header) is filled in by the builder.
struct Ipv6Ext {
  uint8_t type = kProtoDestOpts;
  Bytes bytes;
};

// RFC 8200 4.3/4.6: options are padded with Pad1/PadN to a multiple of 8 bytes.
Ipv6Ext ipv6_hop_by_hop(std::span<const uint8_t> options = {});
Ipv6Ext ipv6_dest_opts(std::span<const uint8_t> options = {});
// RFC 8200 4.4 layout with type-specific data = reserved word + addresses (types 0, 2, 3 style).
Ipv6Ext ipv6_routing(uint8_t routing_type, uint8_t segments_left,
                     std::span<const IpAddr> addresses);
// RFC 8200 4.5. `offset_units` counts 8-byte units.
Ipv6Ext ipv6_fragment(uint16_t offset_units, bool more_fragments, uint32_t id);

struct IpHdr {
  IpAddr src;
  IpAddr dst;
  uint8_t ttl = kDefaultTtl;  // IPv4 TTL / IPv6 hop limit
  uint8_t tos = 0;            // IPv4 TOS / IPv6 traffic class
  // IPv4 only.
  uint16_t id = 0;
  bool df = false;
  bool mf = false;
  uint16_t frag_offset = 0;  // in 8-byte units
  Bytes options;             // padded with EOL (0) to a multiple of 4
  Csum csum = Csum::kValid;
  // IPv6 only.
  uint32_t flow_label = 0;   // 20 bits
  std::vector<Ipv6Ext> ext;  // extension headers, in wire order
};

struct TcpHdr {
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint8_t flags = 0;
  uint16_t window = 65535;
  uint16_t urgent = 0;
  Bytes options;            // padded with EOL (0) to a multiple of 4
  uint8_t data_offset = 0;  // 32-bit words; 0 = 5 + options
  Csum csum = Csum::kValid;
};

// TCP options in the order Linux sends them on a SYN (MSS, SACK-permitted, timestamps,
// window scale, with NOPs keeping 4-byte alignment). Absent fields are left out.
struct TcpOptions {
  std::optional<uint16_t> mss;                     // RFC 9293 3.2
  std::optional<uint8_t> wscale;                   // RFC 7323 2
  bool sack_permitted = false;                     // RFC 2018
  std::optional<uint32_t> ts_val;                  // RFC 7323 3 (with ts_ecr)
  uint32_t ts_ecr = 0;
};
Bytes tcp_options(const TcpOptions& o);

struct UdpHdr {
  uint16_t sport = 0;
  uint16_t dport = 0;
  std::optional<uint16_t> length;  // override of the length field (8 + payload)
  Csum csum = Csum::kValid;
};

// ICMP or ICMPv6 header (by the IP family): type, code and the 4-byte "rest of header"
// (identifier << 16 | sequence for echo, MTU for packet-too-big, ...).
struct IcmpHdr {
  uint8_t type = 0;
  uint8_t code = 0;
  uint32_t rest = 0;
  Csum csum = Csum::kValid;
};

struct ArpHdr {
  uint16_t htype = 1;       // Ethernet
  uint16_t ptype = kEtherIpv4;
  uint8_t hlen = 6;
  uint8_t plen = 4;
  uint16_t op = 1;          // 1 request, 2 reply
  MacAddr sha;
  IpAddr spa;
  MacAddr tha;
  IpAddr tpa;
};

// --- Layers (no Ethernet). Checksums need the addresses of the enclosing IP header. ---
Bytes tcp_segment(const IpAddr& src, const IpAddr& dst, const TcpHdr& tcp,
                  std::span<const uint8_t> payload = {});
Bytes udp_datagram(const IpAddr& src, const IpAddr& dst, const UdpHdr& udp,
                   std::span<const uint8_t> payload = {});
Bytes icmp_message(const IpAddr& src, const IpAddr& dst, const IcmpHdr& icmp,
                   std::span<const uint8_t> payload = {});
// IP header(s) + `l4` as the payload. `proto` is the upper-layer protocol (after any IPv6
// extension headers).
Bytes ip_packet(const IpHdr& ip, uint8_t proto, std::span<const uint8_t> l4);
Bytes eth_frame(const EthHdr& eth, uint16_t ethertype, std::span<const uint8_t> payload);

// --- Whole frames. ---
Bytes build_ip(const EthHdr& eth, const IpHdr& ip, uint8_t proto, std::span<const uint8_t> l4);
Bytes build_tcp(const EthHdr& eth, const IpHdr& ip, const TcpHdr& tcp,
                std::span<const uint8_t> payload = {});
Bytes build_udp(const EthHdr& eth, const IpHdr& ip, const UdpHdr& udp,
                std::span<const uint8_t> payload = {});
Bytes build_icmp(const EthHdr& eth, const IpHdr& ip, const IcmpHdr& icmp,
                 std::span<const uint8_t> payload = {});
// ICMP echo (8/0) or ICMPv6 echo (128/129) by family.
Bytes build_icmp_echo(const EthHdr& eth, const IpHdr& ip, bool reply, uint16_t id, uint16_t seq,
                      std::span<const uint8_t> payload = {});
// An ICMP/ICMPv6 error quoting `offending` (an IP packet, from its IP header): as much as fits
// in 576 bytes (IPv4, RFC 1812 4.3.2.3) or 1280 bytes (IPv6, RFC 4443 2.4(c)).
Bytes build_icmp_error(const EthHdr& eth, const IpHdr& ip, uint8_t type, uint8_t code,
                       std::span<const uint8_t> offending, uint32_t rest = 0);
Bytes build_arp(const EthHdr& eth, const ArpHdr& arp);
// RFC 4861 4.3/4.4 with a source / target link-layer address option when given. `ip.ttl`
// should be kNdpHopLimit (ndp_ip_hdr() sets it).
IpHdr ndp_ip_hdr(const IpAddr& src, const IpAddr& dst);
Bytes build_ndp_ns(const EthHdr& eth, const IpHdr& ip, const IpAddr& target,
                   std::optional<MacAddr> source_lladdr);
inline constexpr uint8_t kNaRouter = 0x80;
inline constexpr uint8_t kNaSolicited = 0x40;
inline constexpr uint8_t kNaOverride = 0x20;
Bytes build_ndp_na(const EthHdr& eth, const IpHdr& ip, const IpAddr& target, uint8_t na_flags,
                   std::optional<MacAddr> target_lladdr);

// Address helpers.
IpAddr solicited_node(const IpAddr& a);   // ff02::1:ffXX:XXXX (RFC 4291 2.7.1)
MacAddr ipv6_multicast_mac(const IpAddr& group);  // 33:33 + low 32 bits (RFC 2464 7)
inline MacAddr broadcast_mac() { return MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}; }

// --- Editing built frames (for malformations). ---
// Recomputes the IPv4 header checksum of the header at `l3_off` (IHL taken from the header,
// clamped to the frame).
void ipv4_update_checksum(std::span<uint8_t> frame, size_t l3_off);
inline void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
inline void put32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}
inline uint16_t get16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t get32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

}  // namespace meshgate::pkt
