// Hostile packets (ctest label `reliability`): a table of frames no honest stack sends, each
// with the drop reason it must get (or Drop::kNone: handled, with the frames it makes the
// gateway send). Tiny and overlapping fragments, IPv4 and TCP option lengths that lie, SYN+FIN
// and SYN+RST, ICMP errors quoting no flow, nothing, or a real flow with a lying inner header,
// jumbo frames over the port MTU, stacked VLAN tags, frames cut at every byte of their headers,
// long IPv6 extension chains, IPv4-mapped IPv6 addresses and martians, with config/demo.toml.
//
// Each row goes alone through the real worker burst functions (DataplaneHarness: its reason
// counter, nothing else dropped, the accounting balanced); then the whole table, as one pcap,
// through the real meshgate binary (it exits 0, every counter equals the table's sum, the
// accounting line holds, the output frame count is the table's).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "control/config/config.h"
#include "tests/golden/replay_support.h"
#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/pcap.h"

namespace meshgate::golden {
namespace {

using dp::Drop;
using pkt::Bytes;
using test::A;
using test::kGw;
using test::kRouter;
using test::kT0;
using test::kToGw;
using test::M;

constexpr const char* kVip = "203.0.113.10";
constexpr const char* kVip6 = "2001:db8:100::10";

struct Row {
  std::string description;
  std::vector<Bytes> setup;   // frames that open the row's flow first (each forwarded)
  std::vector<Bytes> frames;  // the hostile frames
  Drop reason = Drop::kNone;  // each frame's drop reason; kNone: handled
  size_t out = 0;             // frames the gateway sends for `frames`
};

// Each row has its own client address and port, so rows never share a flow.
struct Client {
  std::string v4, v6;
  uint16_t port;
};
Client client_of(size_t k) {
  return {"192.0.2." + std::to_string(10 + k), "2001:db8:2::" + std::to_string(10 + k),
          uint16_t(30000 + k)};
}

pkt::IpHdr ip_hdr(const std::string& src, const std::string& dst) {
  pkt::IpHdr ip;
  ip.src = A(src.c_str());
  ip.dst = A(dst.c_str());
  return ip;
}

pkt::TcpHdr tcp_hdr(uint16_t sport, uint16_t dport, uint8_t flags) {
  pkt::TcpHdr t;
  t.sport = sport;
  t.dport = dport;
  t.flags = flags;
  t.seq = 1000;
  return t;
}

Bytes syn(const Client& c, bool v6 = false) {
  return pkt::build_tcp(kToGw, ip_hdr(v6 ? c.v6 : c.v4, v6 ? kVip6 : kVip),
                        tcp_hdr(c.port, 80, pkt::kTcpSyn));
}

Bytes syn_with_ip(const Client& c, const pkt::IpHdr& ip) {
  return pkt::build_tcp(kToGw, ip, tcp_hdr(c.port, 80, pkt::kTcpSyn));
}

Bytes syn_with_tcp(const Client& c, const pkt::TcpHdr& t) {
  return pkt::build_tcp(kToGw, ip_hdr(c.v4, kVip), t);
}

// A TCP segment of `c`'s flow cut to `bytes` bytes, as the IP payload of a fragment.
Bytes tcp_bytes(const Client& c, bool v6, size_t bytes) {
  const auto ip = ip_hdr(v6 ? c.v6 : c.v4, v6 ? kVip6 : kVip);
  Bytes l4 = pkt::tcp_segment(ip.src, ip.dst, tcp_hdr(c.port, 80, pkt::kTcpSyn), Bytes(16, 7));
  l4.resize(bytes);
  return l4;
}

Bytes fragment(const Client& c, bool v6, uint16_t offset_units, bool more, const Bytes& l4,
               uint8_t proto = pkt::kProtoTcp, const char* dst = nullptr) {
  auto ip = ip_hdr(v6 ? c.v6 : c.v4, dst ? dst : (v6 ? kVip6 : kVip));
  if (v6) {
    ip.ext.push_back(pkt::ipv6_fragment(offset_units, more, 77));
  } else {
    ip.id = 77;
    ip.mf = more;
    ip.frag_offset = offset_units;
  }
  return pkt::build_ip(kToGw, ip, proto, l4);
}

// An ICMP error from a router on the backend's side to `c`, quoting `quote`.
Bytes icmp_error_to(const Client& c, const Bytes& quote) {
  return pkt::build_icmp_error(kToGw, ip_hdr("198.51.100.254", c.v4),
                               pkt::kIcmpDestUnreachable, 1, quote);
}

// What the gateway sent toward the backend for `c`'s SYN: the quote a router would send back.
Bytes quote_of_forwarded_syn(const ctl::Config& cfg, const Client& c) {
  const std::string be = test::expected_backend(cfg, "web", c.v4.c_str(), c.port);
  const auto ip = ip_hdr(c.v4, be.substr(0, be.find(':')));
  return pkt::ip_packet(ip, pkt::kProtoTcp, pkt::tcp_segment(ip.src, ip.dst,
                                                             tcp_hdr(c.port, 8080, pkt::kTcpSyn)));
}

Bytes with_tags(const Bytes& untagged, std::initializer_list<uint16_t> tpids) {
  Bytes f(untagged.begin(), untagged.begin() + 12);
  uint16_t vid = 100;
  for (uint16_t tpid : tpids) {
    f.insert(f.end(), {uint8_t(tpid >> 8), uint8_t(tpid), uint8_t(vid >> 8), uint8_t(vid)});
    vid += 100;
  }
  f.insert(f.end(), untagged.begin() + 12, untagged.end());
  return f;
}

void add_fragment_rows(std::vector<Row>& v) {
  Client c = client_of(v.size());
  v.push_back({"tiny first IPv4 fragment: 8 bytes of a TCP header", {},
               {fragment(c, false, 0, true, tcp_bytes(c, false, 8))}, Drop::kTcpTruncated});
  c = client_of(v.size());
  v.push_back({"tiny first IPv6 fragment: 8 bytes of a TCP header", {},
               {fragment(c, true, 0, true, tcp_bytes(c, true, 8))}, Drop::kTcpTruncated});
  c = client_of(v.size());
  // RFC 1858 §3.2: a TCP fragment at offset 8 bytes rewrites the flags its first fragment
  // showed (the tiny-overlapping-fragment attack).
  v.push_back({"IPv4 TCP fragment at offset 8 overlapping its first fragment's header",
               {fragment(c, false, 0, true, tcp_bytes(c, false, 24))},
               {fragment(c, false, 1, false, Bytes(16, 0x12))}, Drop::kFragmentOverlap});
  c = client_of(v.size());
  v.push_back({"IPv6 TCP fragment at offset 8 overlapping its first fragment's header",
               {fragment(c, true, 0, true, tcp_bytes(c, true, 24))},
               {fragment(c, true, 1, false, Bytes(16, 0x12))}, Drop::kFragmentOverlap});
  c = client_of(v.size());
  {
    // A UDP datagram's later fragments, one of them twice (overlapping): the gateway does not
    // reassemble; each follows its first, the receiver's reassembly decides.
    const auto ip = ip_hdr(c.v4, kVip);
    pkt::UdpHdr u;
    u.sport = c.port;
    u.dport = 53;
    Bytes l4 = pkt::udp_datagram(ip.src, ip.dst, u, Bytes(24, 3));
    l4.resize(16);
    v.push_back({"UDP later fragments, one repeated (overlap), follow their first",
                 {fragment(c, false, 0, true, l4, pkt::kProtoUdp)},
                 {fragment(c, false, 2, true, Bytes(8, 4), pkt::kProtoUdp),
                  fragment(c, false, 2, false, Bytes(8, 4), pkt::kProtoUdp)},
                 Drop::kNone, 2});
  }
  c = client_of(v.size());
  {
    // The same datagram's first fragment again, from another source port: its later fragments
    // would follow a second flow (perhaps another backend) after the first's.
    auto first_from = [&](uint16_t sport) {  // of the current client `c`
      const auto ip = ip_hdr(c.v4, kVip);
      pkt::UdpHdr u;
      u.sport = sport;
      u.dport = 53;
      Bytes l4 = pkt::udp_datagram(ip.src, ip.dst, u, Bytes(24, 3));
      l4.resize(16);
      return fragment(c, false, 0, true, l4, pkt::kProtoUdp);
    };
    v.push_back({"UDP first fragment twice, the second with other ports",
                 {first_from(c.port)},
                 {first_from(uint16_t(c.port + 1000)), first_from(uint16_t(c.port + 2000))},
                 Drop::kFragmentDuplicateFirst});
    c = client_of(v.size());
    v.push_back({"UDP first fragment repeated as it was, then its later fragment, follow the flow",
                 {first_from(c.port)},
                 {first_from(c.port), fragment(c, false, 2, false, Bytes(8, 4), pkt::kProtoUdp)},
                 Drop::kNone, 2});
  }
  c = client_of(v.size());
  v.push_back({"later fragment whose first was never seen", {},
               {fragment(c, false, 3, false, Bytes(16, 5), pkt::kProtoUdp)},
               Drop::kFragmentNoFirst});
}

void add_option_rows(std::vector<Row>& v) {
  struct Opt {
    const char* what;
    Bytes bytes;
    Drop reason;
  };
  const Opt ip_opts[] = {
      {"IPv4 option length 0", {7, 0, 0, 0}, Drop::kIpv4BadOption},
      {"IPv4 option length 1", {7, 1, 0, 0}, Drop::kIpv4BadOption},
      {"IPv4 option length past the header", {7, 39, 4, 0}, Drop::kIpv4BadOption},
      {"IPv4 option kind in the last byte, no length", {1, 1, 1, 7}, Drop::kIpv4BadOption},
      {"IPv4 loose source route", {0x83, 7, 4, 198, 51, 100, 11, 0}, Drop::kIpv4SourceRoute},
      {"IPv4 strict source route", {0x89, 7, 4, 198, 51, 100, 11, 0}, Drop::kIpv4SourceRoute},
  };
  for (const auto& o : ip_opts) {
    const Client c = client_of(v.size());
    auto ip = ip_hdr(c.v4, kVip);
    ip.options = o.bytes;
    v.push_back({std::string(o.what) + ", SYN to the VIP", {}, {syn_with_ip(c, ip)}, o.reason});
  }
  {
    const Client c = client_of(v.size());
    auto ip = ip_hdr(c.v4, kVip);
    ip.options = {1, 1, 7, 7, 4, 0, 0, 0, 0, 0, 0, 0};  // NOP NOP record-route (room for one)
    v.push_back({"valid IPv4 options (NOPs, record route) are forwarded", {},
                 {syn_with_ip(c, ip)}, Drop::kNone, 1});
  }
  const Opt tcp_opts[] = {
      {"TCP option length 0", {2, 0, 0, 0}, Drop::kTcpBadOption},
      {"TCP option length 1", {2, 1, 0, 0}, Drop::kTcpBadOption},
      {"TCP option length past the header", {8, 40, 0, 0}, Drop::kTcpBadOption},
      {"TCP option kind in the last byte, no length", {1, 1, 1, 2}, Drop::kTcpBadOption},
  };
  for (const auto& o : tcp_opts) {
    const Client c = client_of(v.size());
    auto t = tcp_hdr(c.port, 80, pkt::kTcpSyn);
    t.options = o.bytes;
    v.push_back({std::string(o.what) + ", SYN to the VIP", {}, {syn_with_tcp(c, t)}, o.reason});
  }
  for (uint8_t doff : {uint8_t(15), uint8_t(4)}) {
    const Client c = client_of(v.size());
    auto t = tcp_hdr(c.port, 80, pkt::kTcpSyn);
    t.data_offset = doff;
    v.push_back({"TCP data offset " + std::to_string(doff), {}, {syn_with_tcp(c, t)},
                 Drop::kTcpBadDataOffset});
  }
  for (uint8_t flags : {uint8_t(pkt::kTcpSyn | pkt::kTcpFin), uint8_t(pkt::kTcpSyn | pkt::kTcpRst),
                        uint8_t(0)}) {
    const Client c = client_of(v.size());
    v.push_back({"TCP flags " + std::to_string(flags) + " to the VIP", {},
                 {syn_with_tcp(c, tcp_hdr(c.port, 80, flags))}, Drop::kTcpBadFlags});
  }
}

void add_icmp_rows(std::vector<Row>& v, const ctl::Config& cfg) {
  Client c = client_of(v.size());
  v.push_back({"ICMP error quoting a flow that does not exist", {},
               {icmp_error_to(c, quote_of_forwarded_syn(cfg, c))}, Drop::kIcmpErrorNoFlow});
  c = client_of(v.size());
  v.push_back({"ICMP error quoting nothing", {}, {icmp_error_to(c, {})}, Drop::kIcmpErrorNoFlow});
  c = client_of(v.size());
  {
    Bytes q = quote_of_forwarded_syn(cfg, c);
    q.resize(10);
    v.push_back({"ICMP error quoting half an IPv4 header", {syn(c)}, {icmp_error_to(c, q)},
                 Drop::kIcmpErrorNoFlow});
  }
  c = client_of(v.size());
  {
    Bytes q = quote_of_forwarded_syn(cfg, c);
    pkt::put16(&q[2], 65535);  // the quoted total length lies; the quote is translated anyway
    v.push_back({"ICMP error quoting a real flow with a lying inner total length", {syn(c)},
                 {icmp_error_to(c, q)}, Drop::kNone, 1});
  }
  c = client_of(v.size());
  {
    Bytes q = quote_of_forwarded_syn(cfg, c);
    q[0] = 0x4f;  // IHL 60 bytes: past the quote
    v.push_back({"ICMP error quoting a real flow with a lying inner IHL", {syn(c)},
                 {icmp_error_to(c, q)}, Drop::kIcmpErrorNoFlow});
  }
}

void add_jumbo_rows(std::vector<Row>& v) {
  for (bool df : {true, false}) {
    const Client c = client_of(v.size());
    auto ip = ip_hdr(c.v4, kVip);
    ip.df = df;
    const Bytes jumbo = pkt::build_tcp(kToGw, ip, tcp_hdr(c.port, 80, pkt::kTcpAck),
                                       Bytes(9000 - 54, 0x6a));
    v.push_back({std::string("9000-byte frame over the 1500 MTU") +
                     (df ? ", DF (fragmentation needed back)" : ", no DF"),
                 {syn(c)}, {jumbo}, Drop::kMtuExceeded, df ? 1u : 0u});
  }
  const Client c = client_of(v.size());
  const Bytes jumbo6 = pkt::build_tcp(kToGw, ip_hdr(c.v6, kVip6),
                                      tcp_hdr(c.port, 80, pkt::kTcpAck), Bytes(9000 - 74, 0x6b));
  v.push_back({"9000-byte IPv6 frame over the 1500 MTU (packet too big back)", {syn(c, true)},
               {jumbo6}, Drop::kMtuExceeded, 1});
}

void add_vlan_rows(std::vector<Row>& v) {
  const Client c = client_of(v.size());
  v.push_back({"QinQ: 802.1ad S-tag over an 802.1Q C-tag", {},
               {with_tags(syn(c), {pkt::kEtherQinQ, pkt::kEtherVlan})}, Drop::kVlanStacked});
  v.push_back({"two 802.1Q tags", {}, {with_tags(syn(c), {pkt::kEtherVlan, pkt::kEtherVlan})},
               Drop::kVlanStacked});
  v.push_back({"an 802.1ad S-tag alone", {}, {with_tags(syn(c), {pkt::kEtherQinQ})},
               Drop::kVlanStacked});
}

// Every cut of `frame` (without padding) from 1 byte to one short of whole, each expected to
// be dropped with `reason_at(len)`; grouped into one row per reason.
template <typename F>
void add_cut_rows(std::vector<Row>& v, const std::string& what, const Bytes& frame, F reason_at) {
  std::map<Drop, Row> by_reason;
  for (size_t len = 1; len < frame.size(); ++len) {
    const Drop r = reason_at(len);
    Row& row = by_reason[r];
    row.description = what + " cut short: " + dp::drop_name(r);
    row.reason = r;
    row.frames.emplace_back(frame.begin(), frame.begin() + ptrdiff_t(len));
  }
  for (auto& [r, row] : by_reason) v.push_back(std::move(row));
}

void add_truncation_rows(std::vector<Row>& v) {
  // Raw cuts: the lengths in the headers still claim the whole frame.
  {
    const Client c = client_of(v.size());
    pkt::EthHdr e = kToGw;
    e.vlan_tci = 100;
    e.pad = false;
    pkt::TcpOptions o;
    o.mss = 1460;
    o.wscale = 7;
    o.sack_permitted = true;
    o.ts_val = 1;
    auto t = tcp_hdr(c.port, 80, pkt::kTcpSyn);
    t.options = pkt::tcp_options(o);
    const Bytes f = pkt::build_tcp(e, ip_hdr(c.v4, kVip), t);
    add_cut_rows(v, "tagged IPv4 SYN with options", f, [](size_t len) {
      if (len < 14) return Drop::kEthTruncated;
      if (len < 18) return Drop::kVlanTruncated;
      if (len < 38) return Drop::kIpv4Truncated;
      return Drop::kIpv4BadTotalLength;
    });
  }
  {
    const Client c = client_of(v.size());
    pkt::EthHdr e = kToGw;
    e.pad = false;
    auto ip = ip_hdr(c.v6, kVip6);
    ip.ext = {pkt::ipv6_hop_by_hop(), pkt::ipv6_dest_opts()};
    const Bytes f = pkt::build_tcp(e, ip, tcp_hdr(c.port, 80, pkt::kTcpSyn));
    add_cut_rows(v, "IPv6 SYN with two extension headers", f, [](size_t len) {
      if (len < 14) return Drop::kEthTruncated;
      if (len < 54) return Drop::kIpv6Truncated;
      return Drop::kIpv6BadPayloadLength;
    });
  }
  {
    pkt::EthHdr e{pkt::broadcast_mac(), kRouter};
    e.pad = false;
    const Bytes f = pkt::build_arp(e, test::arp_msg(1, kRouter, "198.51.100.254", MacAddr{},
                                                    "198.51.100.1"));
    add_cut_rows(v, "ARP request", f, [](size_t len) {
      return len < 14 ? Drop::kEthTruncated : Drop::kArpTruncated;
    });
  }
  // Consistent cuts: the IP length says where the packet ends, inside a transport header.
  struct L4Cut {
    uint8_t proto;
    size_t bytes;
    Drop reason;
  };
  const L4Cut cuts[] = {
      {pkt::kProtoTcp, 0, Drop::kTcpTruncated},   {pkt::kProtoTcp, 8, Drop::kTcpTruncated},
      {pkt::kProtoTcp, 19, Drop::kTcpTruncated},  {pkt::kProtoUdp, 0, Drop::kUdpTruncated},
      {pkt::kProtoUdp, 7, Drop::kUdpTruncated},   {pkt::kProtoIcmp, 4, Drop::kIcmpTruncated},
      {pkt::kProtoIcmp6, 4, Drop::kIcmp6Truncated},
  };
  for (const auto& k : cuts) {
    const Client c = client_of(v.size());
    const bool v6 = k.proto == pkt::kProtoIcmp6;
    const auto ip = ip_hdr(v6 ? c.v6 : c.v4, v6 ? kVip6 : kVip);
    v.push_back({"IP packet ending " + std::to_string(k.bytes) + " bytes into its transport header",
                 {}, {pkt::build_ip(kToGw, ip, k.proto, Bytes(k.bytes, 0))}, k.reason});
  }
  {
    const Client c = client_of(v.size());
    auto t = tcp_hdr(c.port, 80, pkt::kTcpSyn);
    t.data_offset = 10;  // claims 20 option bytes the segment does not have
    v.push_back({"TCP header claiming options past the segment", {}, {syn_with_tcp(c, t)},
                 Drop::kTcpBadDataOffset});
  }
  {
    const Client c = client_of(v.size());
    auto ip = ip_hdr(c.v6, kVip6);
    pkt::Ipv6Ext ext = pkt::ipv6_dest_opts();
    ext.bytes[1] = 255;  // claims 2048 bytes
    ip.ext = {ext};
    v.push_back({"IPv6 extension header longer than the packet", {},
                 {pkt::build_tcp(kToGw, ip, tcp_hdr(c.port, 80, pkt::kTcpSyn))},
                 Drop::kIpv6ExtTruncated});
  }
}

void add_ipv6_rows(std::vector<Row>& v) {
  for (size_t n : {size_t(8), size_t(9)}) {
    const Client c = client_of(v.size());
    auto ip = ip_hdr(c.v6, kVip6);
    for (size_t i = 0; i < n; ++i) ip.ext.push_back(pkt::ipv6_dest_opts());
    v.push_back({"IPv6 SYN behind " + std::to_string(n) + " extension headers", {},
                 {pkt::build_tcp(kToGw, ip, tcp_hdr(c.port, 80, pkt::kTcpSyn))},
                 n <= 8 ? Drop::kNone : Drop::kIpv6ExtChainTooLong, n <= 8 ? 1u : 0u});
  }
  // ::ffff:a.b.c.d must not appear on the wire (RFC 4291 §2.5.5.2); the gateway would take it
  // for the IPv4 address (an IPv4 service, an IPv4 flow). pktlib builds IPv4 for mapped
  // addresses: the IPv6 frames get them written into their headers.
  auto mapped = [](Bytes f, const std::string& src, const std::string& dst) {
    if (!src.empty()) std::memcpy(&f[22], A(("::ffff:" + src).c_str()).b, 16);
    std::memcpy(&f[38], A(("::ffff:" + dst).c_str()).b, 16);
    return f;
  };
  Client c = client_of(v.size());
  v.push_back({"IPv6 SYN to the IPv4 VIP as ::ffff:203.0.113.10", {},
               {mapped(syn(c, true), "", kVip)}, Drop::kIpv6MappedAddress});
  c = client_of(v.size());
  v.push_back({"IPv6 RST from ::ffff:<client> to ::ffff:<VIP> of a live IPv4 flow", {syn(c)},
               {mapped(pkt::build_tcp(kToGw, ip_hdr(c.v6, kVip6), tcp_hdr(c.port, 80, pkt::kTcpRst)),
                       c.v4, kVip)},
               Drop::kIpv6MappedAddress});
}

// Martians (tests/unit/worker/martian_test.cc has them all): here through the binary too.
void add_martian_rows(std::vector<Row>& v) {
  Client c = client_of(v.size());
  v.push_back({"SYN to the VIP from the VIP", {},
               {pkt::build_tcp(kToGw, ip_hdr(kVip, kVip), tcp_hdr(c.port, 80, pkt::kTcpSyn))},
               Drop::kSourceIsLocal});
  c = client_of(v.size());
  v.push_back({"SYN to web6 from the port address", {},
               {pkt::build_tcp(kToGw, ip_hdr("2001:db8:1::1", kVip6),
                               tcp_hdr(c.port, 80, pkt::kTcpSyn))},
               Drop::kSourceIsLocal});
  c = client_of(v.size());
  v.push_back({"UDP to the port subnet's broadcast address", {},
               {test::udp_frame(c.v4.c_str(), c.port, "198.51.100.255", 53)},
               Drop::kDestinationNotUnicast});
  c = client_of(v.size());
  v.push_back({"SYN to the VIP from link-local 169.254.1.1", {},
               {pkt::build_tcp(kToGw, ip_hdr("169.254.1.1", kVip), tcp_hdr(c.port, 80, pkt::kTcpSyn))},
               Drop::kSourceLinkLocal});
  c = client_of(v.size());
  v.push_back({"SYN to web6 from link-local fe80::1", {},
               {pkt::build_tcp(kToGw, ip_hdr("fe80::1", kVip6), tcp_hdr(c.port, 80, pkt::kTcpSyn))},
               Drop::kSourceLinkLocal});
  c = client_of(v.size());
  v.push_back({"SYN to web (dnat) from its backend 198.51.100.12", {},
               {pkt::build_tcp(kToGw, ip_hdr("198.51.100.12", kVip), tcp_hdr(c.port, 80, pkt::kTcpSyn))},
               Drop::kSourceIsBackend});
  c = client_of(v.size());
  v.push_back({"SYN to the VIP in a broadcast frame", {},
               {test::tcp_frame(c.v4.c_str(), c.port, kVip, 80, pkt::kTcpSyn, 64,
                                pkt::EthHdr{pkt::broadcast_mac(), kRouter})},
               Drop::kUnicastInL2Broadcast});
}

std::vector<Row> hostile_rows(const ctl::Config& cfg) {
  std::vector<Row> v;
  add_fragment_rows(v);
  add_option_rows(v);
  add_icmp_rows(v, cfg);
  add_jumbo_rows(v);
  add_vlan_rows(v);
  add_truncation_rows(v);
  add_ipv6_rows(v);
  add_martian_rows(v);
  return v;
}

ctl::Config demo() {
  auto c = ctl::load_config(demo_config().string());
  if (!c.ok()) throw std::runtime_error(c.error().str());
  return std::move(c.value());
}

TEST(HostilePackets, each_row_alone_is_dropped_with_its_reason_or_handled) {
  const ctl::Config cfg = demo();
  const std::string toml = read_text(demo_config());
  for (const Row& r : hostile_rows(cfg)) {
    SCOPED_TRACE(r.description);
    test::DataplaneHarness h(toml);
    uint64_t ts = kT0;
    for (const Bytes& f : r.setup) ASSERT_EQ(h.send(f, ts++).size(), 1u) << "setup frame";
    ASSERT_EQ(h.drops_total(), 0u);
    size_t out = 0;
    for (const Bytes& f : r.frames) out += h.send(f, ts++).size();
    EXPECT_EQ(out, r.out) << "frames sent";
    if (r.reason != Drop::kNone) {
      EXPECT_EQ(h.drops(r.reason), r.frames.size()) << "expected " << dp::drop_name(r.reason);
    }
    EXPECT_EQ(h.drops_total(), r.reason == Drop::kNone ? 0u : r.frames.size());
    EXPECT_TRUE(h.balanced());
  }
}

TEST(HostilePackets, the_whole_table_replayed_through_meshgate_adds_up) {
  const ctl::Config cfg = demo();
  const auto rows = hostile_rows(cfg);
  TempDir dir;
  std::map<std::string, uint64_t> want_drops;
  uint64_t frames = 0, want_out = 0;
  {
    auto w = pkt::PcapWriter::open((dir / "in.pcap").string());
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (const Row& r : rows) {
      for (const Bytes& f : r.setup) ASSERT_TRUE(w->write(kT0 + frames++ * 1000, f));
      for (const Bytes& f : r.frames) ASSERT_TRUE(w->write(kT0 + frames++ * 1000, f));
      want_out += r.setup.size() + r.out;
      if (r.reason != Drop::kNone) want_drops[dp::drop_name(r.reason)] += r.frames.size();
    }
    ASSERT_TRUE(w->close().ok());
  }
  const auto mg = run_meshgate(demo_config(), dir / "in.pcap", dir / "out.pcap",
                               dir / "stats.json", dir);
  ASSERT_EQ(mg.exit_code, 0) << mg.report << environment_hint();
  std::string err;
  const auto stats = read_json(dir / "stats.json", &err);
  ASSERT_TRUE(err.empty()) << err;
  const auto out = read_pcap(dir / "out.pcap", &err);
  ASSERT_TRUE(err.empty()) << err;
  expect_counters_add_up(stats, frames);
  EXPECT_EQ(out.size(), want_out);
  EXPECT_EQ(count(stats, "packets_out"), want_out);
  for (const auto& [reason, n] : stats.at("drops").items()) {
    const uint64_t want = want_drops.count(reason) ? want_drops.at(reason) : 0;
    EXPECT_EQ(n.get<uint64_t>(), want) << "drops." << reason;
  }
}

}  // namespace
}  // namespace meshgate::golden
