// A frame decoder and checksum verifier for tools and tests, written independently of the
// dataplane parser (dataplane/packet/parse.h) so tests can compare the two. Any thread.
//
// decode() fills everything it can and stops at the first structural fault. Faults are named
// like the dataplane drop reasons that they correspond to ("ipv4_bad_ihl", "tcp_bad_option",
// ...), so a test can check that a malformed frame is malformed in exactly the intended way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/common/net_types.h"

namespace meshgate::pkt {

enum class L3Kind : uint8_t { kNone, kArp, kIpv4, kIpv6, kOther };

// Bounds of the IPv6 extension-header walk: the same limit the dataplane documents
// (RFC 8504 5.3 lets a node bound it; 8 covers every real chain).
inline constexpr int kDecodeMaxIpv6Ext = 8;

struct Decoded {
  // The first fault found, or nullptr. "Soft" faults (ipv4_bad_checksum, ipv4_bad_source,
  // ipv6_bad_source, tcp_bad_flags) do not stop decoding: later fields are still filled.
  const char* error = nullptr;
  size_t frame_len = 0;

  MacAddr eth_dst;
  MacAddr eth_src;
  uint16_t ethertype = 0;  // after any VLAN tag
  uint8_t vlan_tags = 0;
  uint16_t vlan_tci = 0;   // of the first tag
  L3Kind l3 = L3Kind::kNone;
  size_t l3_off = 0;

  // ARP
  uint16_t arp_htype = 0, arp_ptype = 0, arp_op = 0;
  MacAddr arp_sha, arp_tha;
  IpAddr arp_spa, arp_tpa;

  // IPv4 / IPv6
  IpAddr src, dst;
  uint8_t ttl = 0;           // TTL / hop limit
  uint8_t tos = 0;           // TOS / traffic class
  uint8_t ihl_bytes = 0;     // IPv4 header length
  uint16_t ip_len = 0;       // IPv4 total length / 40 + IPv6 payload length
  uint16_t ip_id = 0;
  bool df = false, mf = false;
  uint16_t frag_offset = 0;  // 8-byte units (IPv4 header or IPv6 fragment header)
  bool fragment = false;     // MF or offset != 0
  uint32_t flow_label = 0;
  uint8_t ipv6_ext_count = 0;
  uint8_t ipv6_ext[kDecodeMaxIpv6Ext + 1] = {};  // header types in order (first 9)

  // Upper layer. l4_len runs to the end of the IP payload (padding excluded).
  uint8_t l4_proto = 0;
  size_t l4_off = 0;
  size_t l4_len = 0;
  bool has_l4 = false;  // the transport header was decoded (not a later fragment)
  uint16_t sport = 0, dport = 0;  // host order
  // TCP
  uint8_t tcp_flags = 0;
  uint32_t tcp_seq = 0, tcp_ack = 0;
  uint16_t tcp_window = 0;
  uint8_t tcp_hdr_len = 0;
  uint16_t tcp_mss = 0;       // 0 = absent
  uint8_t tcp_wscale = 0xff;  // 0xff = absent
  bool tcp_sack_permitted = false;
  bool tcp_timestamps = false;
  uint32_t tcp_ts_val = 0, tcp_ts_ecr = 0;
  // UDP
  uint16_t udp_length = 0;
  // ICMP / ICMPv6
  uint8_t icmp_type = 0, icmp_code = 0;
  uint16_t icmp_id = 0, icmp_seq = 0;  // echo
  uint32_t icmp_rest = 0;
  // NDP (ICMPv6 135/136)
  IpAddr nd_target;
  bool nd_has_lladdr = false;
  MacAddr nd_lladdr;
  uint8_t na_flags = 0;

  size_t payload_off = 0;  // application payload (after the transport header)
  size_t payload_len = 0;

  bool ok() const { return error == nullptr; }
  bool is_ip() const { return l3 == L3Kind::kIpv4 || l3 == L3Kind::kIpv6; }
};

Decoded decode(std::span<const uint8_t> frame);

enum class CsumState : uint8_t {
  kAbsent,      // no such header
  kValid,
  kInvalid,
  kNotChecked,  // fragment, UDP/IPv4 without checksum, protocol without an Internet checksum
};
const char* csum_state_name(CsumState s);

struct ChecksumReport {
  CsumState ipv4 = CsumState::kAbsent;  // IPv4 header checksum
  CsumState l4 = CsumState::kAbsent;    // TCP / UDP / ICMP / ICMPv6 checksum
  uint8_t l4_proto = 0;
  bool ok() const { return ipv4 != CsumState::kInvalid && l4 != CsumState::kInvalid; }
};

// Re-parses `frame` and checks the IPv4 header checksum and the TCP, UDP, ICMP or ICMPv6
// checksum (with pseudo-headers). Frames that do not decode far enough report kAbsent.
ChecksumReport verify_checksums(std::span<const uint8_t> frame);

}  // namespace meshgate::pkt
