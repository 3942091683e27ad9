// ICMP / ICMPv6 errors: parsing the packet an error quotes (to find the flow it refers to and
// translate it, so path-MTU discovery and unreachables work through the NAT), and building the
// errors the gateway itself sends (time exceeded, fragmentation needed / packet too big).
// Worker lcores; pure functions over bytes.
#pragma once

#include <cstdint>

#include "dataplane/common/net_types.h"
#include "dataplane/packet/parse.h"

namespace meshgate::dp {

// True for the error types translated through NAT: IPv4 destination unreachable (incl.
// fragmentation needed), time exceeded, parameter problem; ICMPv6 destination unreachable,
// packet too big, time exceeded, parameter problem (RFC 792, RFC 4443).
bool is_icmp_error(const PacketMeta& m);

// The quoted packet: the offending packet's IP header and at least its ports.
struct IcmpQuote {
  uint16_t ip_off = 0;     // offset of the quoted IP header in the frame
  uint16_t l4_off = 0;     // offset of its transport header
  uint16_t quoted_l4 = 0;  // transport bytes quoted
  uint8_t proto = 0;
  bool v4 = true;
  IpAddr src, dst;
  uint16_t sport = 0, dport = 0;  // network order
};

// Parses the quote of an ICMP error (`m` parsed the outer packet). False when the quote is too
// short, of another family, or not TCP/UDP with its ports.
bool parse_icmp_quote(const uint8_t* frame, uint32_t len, const PacketMeta& m, IcmpQuote* q);

// Rewrites the quoted packet's source (kSrc) or destination endpoint, keeping the quoted IPv4
// header checksum and (when quoted) the TCP/UDP checksum right.
void rewrite_quote(uint8_t* frame, const IcmpQuote& q, bool src, const IpAddr& addr,
                   uint16_t port_be);

// Recomputes the outer IPv4 header checksum and the ICMP / ICMPv6 checksum after rewrites.
void finish_icmp_error(uint8_t* frame, const PacketMeta& m);

// Builds an ICMP error about the IP packet `offending` (ip_len bytes, contiguous) into `out`
// (capacity `cap`, Ethernet header left for the route stage to fill): from `src` to the
// offending packet's source, quoting as much as fits in 576 (IPv4) / 1280 (IPv6) bytes.
// v4: type/code as given (11/0 time exceeded, 3/4 fragmentation needed with `mtu`).
// v6: 3/0 time exceeded, 2/0 packet too big with `mtu`. Returns the frame length or 0.
uint32_t build_icmp_error(uint8_t* out, uint32_t cap, uint32_t l2_len, const uint8_t* offending,
                          uint32_t ip_len, bool v4, const IpAddr& src, uint8_t type, uint8_t code,
                          uint32_t mtu);

}  // namespace meshgate::dp
