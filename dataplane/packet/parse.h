// Bounds-checked parsing of one frame: Ethernet / 802.1Q, ARP, IPv4 (+options), IPv6 (+extension
// header chain), TCP (+option walk), UDP, ICMP, ICMPv6. Worker lcores (and tools/tests).
// Pure function over bytes: no DPDK state, no allocation, never reads outside [data, data+len).
#pragma once

#include <cstdint>

#include "dataplane/common/compiler.h"
#include "dataplane/common/net_types.h"
#include "dataplane/drop_reasons.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {

enum class L3 : uint8_t { kNone, kArp, kIpv4, kIpv6 };

// PacketMeta::flags
inline constexpr uint8_t kPktVlan = 1 << 0;          // one 802.1Q tag present
inline constexpr uint8_t kPktFragment = 1 << 1;      // IPv4 MF/offset or IPv6 fragment header
inline constexpr uint8_t kPktFirstFragment = 1 << 2; // fragment with offset 0 (L4 header present)
inline constexpr uint8_t kPktIpOptions = 1 << 3;     // IPv4 options skipped
inline constexpr uint8_t kPktL2Multicast = 1 << 4;   // destination MAC is group/broadcast

// What the parser learned about a frame. Offsets are from the start of the frame.
struct PacketMeta {
  L3 l3 = L3::kNone;
  uint8_t l4_proto = 0;     // IPPROTO_* of the final header (after IPv6 extension headers)
  uint8_t flags = 0;
  uint8_t ttl = 0;          // IPv4 TTL or IPv6 hop limit
  uint16_t vlan_tci = 0;    // host order, when kPktVlan
  uint16_t l3_off = 0;      // Ethernet (+VLAN) header length
  uint16_t l4_off = 0;      // first byte after IP header, options and extension headers
  uint16_t l4_len = 0;      // bytes from l4_off to the end of the IP payload
  uint16_t l4_hdr_len = 0;  // TCP header incl. options, 8 for UDP/ICMP, 0 when not parsed
  uint16_t ip_len = 0;      // IPv4 total length / IPv6 40 + payload length
  uint16_t frag_off_hdr = 0;// IPv6: offset of the fragment header (0 if none)
  uint16_t sport = 0;       // network order. ICMP echo: the identifier
  uint16_t dport = 0;       // network order. ICMP echo: the identifier too
  uint8_t tcp_flags = 0;
  uint8_t icmp_type = 0;
  uint8_t icmp_code = 0;
  uint8_t tcp_wscale = 0xff;  // window scale option, 0xff = absent
  uint16_t tcp_mss = 0;       // MSS option, 0 = absent
  uint32_t ip_id = 0;         // IPv4 id or IPv6 fragment identification (for fragment tracking)
  IpAddr src;
  IpAddr dst;
  // ARP (when l3 == kArp)
  uint16_t arp_op = 0;
  MacAddr arp_sha;
  IpAddr arp_spa;
  IpAddr arp_tpa;

  bool is_ip() const { return l3 == L3::kIpv4 || l3 == L3::kIpv6; }
  bool is_fragment() const { return flags & kPktFragment; }
  // L4 ports/type are meaningful (not a non-first fragment, header parsed).
  bool has_l4() const { return l4_hdr_len != 0; }
};

// An ICMP or ICMPv6 echo request / reply (code 0).
inline bool is_echo_request(const PacketMeta& m) {
  return m.has_l4() && m.icmp_code == 0 &&
         ((m.l4_proto == kProtoIcmp && m.icmp_type == kIcmpEchoRequest) ||
          (m.l4_proto == kProtoIcmp6 && m.icmp_type == kIcmp6EchoRequest));
}
inline bool is_echo_reply(const PacketMeta& m) {
  return m.has_l4() && m.icmp_code == 0 &&
         ((m.l4_proto == kProtoIcmp && m.icmp_type == kIcmpEchoReply) ||
          (m.l4_proto == kProtoIcmp6 && m.icmp_type == kIcmp6EchoReply));
}
// Packets conntrack follows: TCP, UDP and ICMP echo (its identifier as the port).
inline bool trackable(const PacketMeta& m) {
  return (m.has_l4() && (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp)) ||
         is_echo_request(m) || is_echo_reply(m);
}

// Parse bounds: the most IPv6 extension headers walked before giving up (RFC 8504 §5.3 lets
// nodes bound this; 8 covers every real chain including HBH + routing + fragment + dest opts).
inline constexpr int kMaxIpv6ExtHeaders = 8;

// Parses `len` bytes of a frame. Returns Drop::kNone on success and fills `meta`; otherwise the
// reason the frame is malformed. Does not verify checksums except the IPv4 header checksum when
// `verify_ipv4_csum` is set (set it unless the NIC verified it). Does not look at MACs.
Drop parse_packet(const uint8_t* data, uint32_t len, PacketMeta* meta, bool verify_ipv4_csum);

// The same for a frame of `frame_len` bytes of which only the first `contig_len` are readable at
// `data` (a multi-segment mbuf): lengths are validated against the frame, and a header that
// straddles the readable part is Drop::kHeadersSplit.
Drop parse_frame(const uint8_t* data, uint32_t contig_len, uint32_t frame_len, PacketMeta* meta,
                 bool verify_ipv4_csum);

// parse_frame without its fast path for plain IPv4 TCP/UDP: every frame takes the general
// parser. parse_frame must fill `meta` exactly as this does (the ARP fields aside, which only
// ARP frames carry); the parser's differential test holds the two to that.
Drop parse_frame_general(const uint8_t* data, uint32_t contig_len, uint32_t frame_len,
                         PacketMeta* meta, bool verify_ipv4_csum);

// True when `len` bytes of TCP options at `opt` pass the parser's option checks (a TCP header
// with them is not dropped as kTcpBadOption): for a caller that takes frames past the parser.
bool tcp_options_valid(const uint8_t* opt, uint32_t len);

// The option layouts Linux and most stacks send, matched at fixed places without a walk: NOP
// NOP timestamps (RFC 7323 appendix A) on any segment; on a SYN, MSS alone or followed by SACK
// permitted and/or timestamps and window scale, NOP-padded. True when `len` bytes at `o` are
// one of them (every one passes the parser's checks); then *mss and *wscale are set from the
// options present (left as they are when absent).
MG_ALWAYS_INLINE bool match_common_tcp_options(const uint8_t* o, uint32_t len, uint16_t* mss,
                                               uint8_t* wscale) {
  if (len == 12 && rd32(o) == 0x0101080a) return true;  // NOP NOP timestamps
  if (len < 4 || rd16(o) != 0x0204) return false;       // MSS first
  if (len == 4) {
    *mss = rd16(o + 2);
    return true;
  }
  if (len != 12 && len != 20) return false;
  const uint32_t w1 = rd32(o + 4);
  // NOP NOP SACK-permitted, NOP window scale
  const bool sack_ws = len == 12 && w1 == 0x01010402 && rd32(o + 8) >> 8 == 0x010303;
  // SACK-permitted or NOP NOP, timestamps, NOP window scale
  const bool ts_ws = len == 20 && (w1 == 0x0402080a || w1 == 0x0101080a) &&
                     rd32(o + 16) >> 8 == 0x010303;
  if (!sack_ws && !ts_ws) return false;
  *mss = rd16(o + 2);
  *wscale = o[len - 1];
  return true;
}

}  // namespace meshgate::dp
