// Parser tables: malformed frames -> the expected drop reason; valid frames -> the expected
// parse, cross-checked against pktlib's independent decoder.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <random>

#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using dp::Drop;
using dp::PacketMeta;
using pkt::Bytes;

IpAddr A(const char* s) { return *IpAddr::parse(s); }
const pkt::EthHdr kEth{*MacAddr::parse("02:00:00:00:00:01"), *MacAddr::parse("02:00:00:00:00:fe")};

pkt::IpHdr ip4(const char* src = "192.0.2.1", const char* dst = "203.0.113.10") {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  return ip;
}
pkt::IpHdr ip6(const char* src = "2001:db8:2::1", const char* dst = "2001:db8:100::10") {
  return ip4(src, dst);
}
pkt::TcpHdr syn() {
  pkt::TcpHdr t;
  t.sport = 1234;
  t.dport = 80;
  t.flags = pkt::kTcpSyn;
  return t;
}
pkt::UdpHdr udp() {
  pkt::UdpHdr u;
  u.sport = 1234;
  u.dport = 53;
  return u;
}

Drop parse(const Bytes& f, PacketMeta* m = nullptr) {
  PacketMeta local;
  return dp::parse_packet(f.data(), uint32_t(f.size()), m ? m : &local, true);
}

// Offsets in an untagged IPv4/TCP frame.
constexpr size_t kL3 = 14;
constexpr size_t kL4 = 34;

struct Malformed {
  const char* name;
  Bytes frame;
  Drop reason;
};

std::vector<Malformed> malformed_cases() {
  std::vector<Malformed> v;
  const Bytes tcp4 = pkt::build_tcp(kEth, ip4(), syn());
  const Bytes tcp6 = pkt::build_tcp(kEth, ip6(), syn());
  auto edit = [](Bytes f, auto fn) {
    fn(f);
    return f;
  };
  auto cut = [](const Bytes& f, size_t n) { return Bytes(f.begin(), f.begin() + n); };
  auto fix4 = [](Bytes& f) { pkt::ipv4_update_checksum(f, kL3); };

  v.push_back({"13-byte frame", cut(tcp4, 13), Drop::kEthTruncated});
  {
    pkt::EthHdr e = kEth;
    e.vlan_tci = 100;
    e.pad = false;
    const Bytes tagged = pkt::build_tcp(e, ip4(), syn());
    v.push_back({"VLAN tag cut short", cut(tagged, 16), Drop::kVlanTruncated});
    v.push_back({"stacked VLAN (QinQ)", edit(tagged, [](Bytes& f) { pkt::put16(&f[16], 0x8100); }),
                 Drop::kVlanStacked});
  }
  v.push_back({"802.1ad outer tag", edit(tcp4, [](Bytes& f) { pkt::put16(&f[12], 0x88a8); }), Drop::kVlanStacked});
  v.push_back({"LLDP", edit(tcp4, [](Bytes& f) { pkt::put16(&f[12], 0x88cc); }), Drop::kEthertypeUnsupported});
  {
    pkt::ArpHdr a;
    a.sha = kEth.src;
    a.spa = A("198.51.100.254");
    a.tpa = A("198.51.100.1");
    pkt::EthHdr e = kEth;
    e.pad = false;
    const Bytes arp = pkt::build_arp(e, a);
    v.push_back({"ARP cut short", cut(arp, 14 + 20), Drop::kArpTruncated});
    a.htype = 6;
    v.push_back({"ARP for IEEE 802 hardware", pkt::build_arp(e, a), Drop::kArpUnsupported});
    a.htype = 1;
    a.op = 3;
    v.push_back({"RARP opcode", pkt::build_arp(e, a), Drop::kArpUnsupported});
  }
  v.push_back({"IPv4 header cut short", cut(tcp4, kL3 + 19), Drop::kIpv4Truncated});
  v.push_back({"IPv4 ethertype with version 6", edit(tcp4, [&](Bytes& f) { f[kL3] = 0x65; fix4(f); }),
               Drop::kIpv4BadVersion});
  v.push_back({"IHL 4", edit(tcp4, [&](Bytes& f) { f[kL3] = 0x44; }), Drop::kIpv4BadIhl});
  v.push_back({"IHL beyond the frame", edit(cut(tcp4, kL3 + 24), [&](Bytes& f) { f[kL3] = 0x47; }),
               Drop::kIpv4BadIhl});
  v.push_back({"total length beyond the frame",
               edit(tcp4, [&](Bytes& f) { pkt::put16(&f[kL3 + 2], 1500); fix4(f); }), Drop::kIpv4BadTotalLength});
  v.push_back({"total length below IHL", edit(tcp4, [&](Bytes& f) { pkt::put16(&f[kL3 + 2], 16); fix4(f); }),
               Drop::kIpv4BadTotalLength});
  v.push_back({"IPv4 header checksum wrong", edit(tcp4, [&](Bytes& f) { f[kL3 + 10] ^= 0x40; }),
               Drop::kIpv4BadChecksum});
  v.push_back({"multicast source", pkt::build_tcp(kEth, ip4("224.0.0.5"), syn()), Drop::kIpv4BadSource});
  v.push_back({"loopback source", pkt::build_tcp(kEth, ip4("127.0.0.1"), syn()), Drop::kIpv4BadSource});
  v.push_back({"broadcast source", pkt::build_tcp(kEth, ip4("255.255.255.255"), syn()), Drop::kIpv4BadSource});
  {
    pkt::IpHdr ip = ip4();
    ip.options = {7, 0, 0, 0};
    v.push_back({"IPv4 option with length 0", pkt::build_tcp(kEth, ip, syn()), Drop::kIpv4BadOption});
    ip.options = {1, 7, 39, 4};
    v.push_back({"IPv4 option past the header", pkt::build_tcp(kEth, ip, syn()), Drop::kIpv4BadOption});
    ip.options = {0x83, 7, 4, 198, 51, 100, 11, 0};
    v.push_back({"IPv4 loose source route", pkt::build_tcp(kEth, ip, syn()), Drop::kIpv4SourceRoute});
    ip = ip4();
    ip.frag_offset = 1;
    v.push_back({"IPv4 TCP fragment at offset 8 (RFC 1858)",
                 pkt::build_ip(kEth, ip, pkt::kProtoTcp, Bytes(16, 0)), Drop::kFragmentOverlap});
    ip = ip6();
    ip.ext.push_back(pkt::ipv6_fragment(1, false, 9));
    v.push_back({"IPv6 TCP fragment at offset 8",
                 pkt::build_ip(kEth, ip, pkt::kProtoTcp, Bytes(16, 0)), Drop::kFragmentOverlap});
  }
  v.push_back({"IPv4-mapped IPv6 destination", edit(tcp6, [&](Bytes& f) {
                 std::memset(&f[kL3 + 24], 0, 10);
                 f[kL3 + 34] = f[kL3 + 35] = 0xff;
               }),
               Drop::kIpv6MappedAddress});
  v.push_back({"IPv6 header cut short", cut(tcp6, kL3 + 39), Drop::kIpv6Truncated});
  v.push_back({"IPv6 ethertype with version 4", edit(tcp6, [&](Bytes& f) { f[kL3] = 0x40; }), Drop::kIpv6BadVersion});
  v.push_back({"IPv6 payload beyond the frame", edit(tcp6, [&](Bytes& f) { pkt::put16(&f[kL3 + 4], 200); }),
               Drop::kIpv6BadPayloadLength});
  v.push_back({"IPv6 jumbogram length 0", edit(tcp6, [&](Bytes& f) { pkt::put16(&f[kL3 + 4], 0); }),
               Drop::kIpv6BadPayloadLength});
  {
    pkt::IpHdr ip = ip6();
    ip.ext.push_back(pkt::ipv6_dest_opts(Bytes(20, 0)));
    Bytes f = pkt::build_tcp(kEth, ip, syn());
    f[kL3 + 40 + 1] = 40;  // header length far beyond the payload
    v.push_back({"IPv6 extension header beyond the payload", f, Drop::kIpv6ExtTruncated});
    pkt::IpHdr many = ip6();
    for (int i = 0; i < 9; ++i) many.ext.push_back(pkt::ipv6_dest_opts());
    v.push_back({"nine extension headers", pkt::build_tcp(kEth, many, syn()), Drop::kIpv6ExtChainTooLong});
  }
  v.push_back({"multicast IPv6 source", pkt::build_tcp(kEth, ip6("ff02::1"), syn()), Drop::kIpv6BadSource});
  v.push_back({"::1 source", pkt::build_tcp(kEth, ip6("::1"), syn()), Drop::kIpv6BadSource});
  v.push_back({"unspecified source on TCP", pkt::build_tcp(kEth, ip6("::"), syn()), Drop::kIpv6BadSource});
  {
    pkt::IpHdr ip = ip4();
    v.push_back({"TCP header cut short", pkt::build_ip(kEth, ip, pkt::kProtoTcp, Bytes(12, 0)), Drop::kTcpTruncated});
  }
  v.push_back({"TCP data offset 4", edit(tcp4, [&](Bytes& f) { f[kL4 + 12] = 0x40; }), Drop::kTcpBadDataOffset});
  v.push_back({"TCP data offset beyond the segment", edit(tcp4, [&](Bytes& f) { f[kL4 + 12] = 0xf0; }),
               Drop::kTcpBadDataOffset});
  {
    pkt::TcpHdr t = syn();
    t.options = {2, 4, 5, 0xb4, 3, 0, 0, 0};  // window scale with length 0
    v.push_back({"TCP option with length 0", pkt::build_tcp(kEth, ip4(), t), Drop::kTcpBadOption});
    t.options = {2, 3, 5, 0xb4};  // MSS of length 3
    v.push_back({"MSS option of length 3", pkt::build_tcp(kEth, ip4(), t), Drop::kTcpBadOption});
    t.options = {1, 1, 1, 8};  // timestamps kind without room for its length byte
    v.push_back({"option kind at the end of the header", pkt::build_tcp(kEth, ip4(), t), Drop::kTcpBadOption});
    t = syn();
    t.flags = pkt::kTcpSyn | pkt::kTcpFin;
    v.push_back({"SYN+FIN", pkt::build_tcp(kEth, ip4(), t), Drop::kTcpBadFlags});
    t.flags = pkt::kTcpSyn | pkt::kTcpRst;
    v.push_back({"SYN+RST", pkt::build_tcp(kEth, ip4(), t), Drop::kTcpBadFlags});
    t.flags = 0;
    v.push_back({"no flags", pkt::build_tcp(kEth, ip4(), t), Drop::kTcpBadFlags});
  }
  v.push_back({"UDP header cut short", pkt::build_ip(kEth, ip4(), pkt::kProtoUdp, Bytes(6, 0)), Drop::kUdpTruncated});
  {
    pkt::UdpHdr u = udp();
    u.length = 4;
    v.push_back({"UDP length 4", pkt::build_udp(kEth, ip4(), u, Bytes(10, 0)), Drop::kUdpBadLength});
    u.length = 100;
    v.push_back({"UDP length beyond the IP payload", pkt::build_udp(kEth, ip4(), u, Bytes(10, 0)),
                 Drop::kUdpBadLength});
  }
  v.push_back({"ICMP cut short", pkt::build_ip(kEth, ip4(), pkt::kProtoIcmp, Bytes(4, 0)), Drop::kIcmpTruncated});
  v.push_back({"ICMPv6 cut short", pkt::build_ip(kEth, ip6(), pkt::kProtoIcmp6, Bytes(4, 0)), Drop::kIcmp6Truncated});
  return v;
}

TEST(ParseMalformed, each_malformation_has_its_own_reason) {
  for (const auto& c : malformed_cases()) {
    EXPECT_EQ(dp::drop_name(parse(c.frame)), std::string(dp::drop_name(c.reason))) << c.name;
  }
}

TEST(ParseMalformed, every_parser_drop_reason_is_covered_by_the_table) {
  std::set<Drop> seen;
  for (const auto& c : malformed_cases()) seen.insert(c.reason);
  for (Drop d : {Drop::kEthTruncated, Drop::kVlanTruncated, Drop::kVlanStacked, Drop::kEthertypeUnsupported,
                 Drop::kArpTruncated, Drop::kArpUnsupported, Drop::kIpv4Truncated, Drop::kIpv4BadVersion,
                 Drop::kIpv4BadIhl, Drop::kIpv4BadTotalLength, Drop::kIpv4BadChecksum, Drop::kIpv4BadSource,
                 Drop::kIpv4BadOption, Drop::kIpv4SourceRoute, Drop::kFragmentOverlap,
                 Drop::kIpv6MappedAddress,
                 Drop::kIpv6Truncated, Drop::kIpv6BadVersion, Drop::kIpv6BadPayloadLength,
                 Drop::kIpv6ExtTruncated, Drop::kIpv6ExtChainTooLong, Drop::kIpv6BadSource,
                 Drop::kTcpTruncated, Drop::kTcpBadDataOffset, Drop::kTcpBadOption, Drop::kTcpBadFlags,
                 Drop::kUdpTruncated, Drop::kUdpBadLength, Drop::kIcmpTruncated, Drop::kIcmp6Truncated}) {
    EXPECT_TRUE(seen.count(d)) << dp::drop_name(d);
  }
}

TEST(ParseMalformed, header_straddling_segments_is_headers_split_not_truncated) {
  const Bytes f = pkt::build_tcp(kEth, ip4(), syn());
  PacketMeta m;
  EXPECT_EQ(dp::parse_frame(f.data(), 40, uint32_t(f.size()), &m, true), Drop::kHeadersSplit);
  EXPECT_EQ(dp::parse_frame(f.data(), 20, uint32_t(f.size()), &m, true), Drop::kHeadersSplit);
  EXPECT_EQ(dp::parse_frame(f.data(), uint32_t(f.size()), uint32_t(f.size()), &m, true), Drop::kNone);
}

// ---- valid frames -----------------------------------------------------------------------------

TEST(ParseValid, tcp_over_ipv4_with_options_and_vlan) {
  pkt::EthHdr e = kEth;
  e.vlan_tci = 0x2064;
  pkt::IpHdr ip = ip4();
  ip.options = {1, 1, 1, 0};
  ip.ttl = 17;
  ip.id = 0x4242;
  pkt::TcpHdr t = syn();
  t.options = pkt::tcp_options({.mss = 1460, .wscale = 7, .sack_permitted = true, .ts_val = 5});
  const Bytes f = pkt::build_tcp(e, ip, t, Bytes(10, 1));
  PacketMeta m;
  ASSERT_EQ(parse(f, &m), Drop::kNone);
  EXPECT_EQ(m.l3, dp::L3::kIpv4);
  EXPECT_TRUE(m.flags & dp::kPktVlan);
  EXPECT_TRUE(m.flags & dp::kPktIpOptions);
  EXPECT_EQ(m.vlan_tci, 0x2064);
  EXPECT_EQ(m.l3_off, 18);
  EXPECT_EQ(m.l4_off, 18 + 24);
  EXPECT_EQ(m.ttl, 17);
  EXPECT_EQ(m.ip_id, 0x4242u);
  EXPECT_EQ(m.l4_proto, 6);
  EXPECT_EQ(ntohs(m.sport), 1234);
  EXPECT_EQ(ntohs(m.dport), 80);
  EXPECT_EQ(m.tcp_flags, pkt::kTcpSyn);
  EXPECT_EQ(m.tcp_mss, 1460);
  EXPECT_EQ(m.tcp_wscale, 7);
  EXPECT_EQ(m.l4_len, m.l4_hdr_len + 10);
  EXPECT_EQ(m.src.str(), "192.0.2.1");
  EXPECT_EQ(m.dst.str(), "203.0.113.10");
}

TEST(ParseValid, ipv6_extension_chain_is_walked_to_udp) {
  pkt::IpHdr ip = ip6();
  ip.ext.push_back(pkt::ipv6_hop_by_hop());
  ip.ext.push_back(pkt::ipv6_routing(0, 0, std::vector<IpAddr>{A("2001:db8::9")}));
  ip.ext.push_back(pkt::ipv6_dest_opts(Bytes(6, 0)));
  const Bytes f = pkt::build_udp(kEth, ip, udp(), Bytes(33, 2));
  PacketMeta m;
  ASSERT_EQ(parse(f, &m), Drop::kNone);
  const auto d = pkt::decode(f);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(m.l3, dp::L3::kIpv6);
  EXPECT_EQ(m.l4_proto, 17);
  EXPECT_EQ(m.l4_off, d.l4_off);
  EXPECT_EQ(m.l4_len, d.l4_len);
  EXPECT_EQ(ntohs(m.dport), 53);
}

TEST(ParseValid, fragments_are_flagged_and_later_fragments_carry_no_ports) {
  pkt::IpHdr ip = ip4();
  ip.mf = true;
  ip.id = 77;
  PacketMeta m;
  ASSERT_EQ(parse(pkt::build_udp(kEth, ip, udp(), Bytes(40, 0)), &m), Drop::kNone);
  EXPECT_TRUE(m.is_fragment());
  EXPECT_TRUE(m.flags & dp::kPktFirstFragment);
  EXPECT_TRUE(m.has_l4());
  ip.mf = false;
  ip.frag_offset = 6;
  ASSERT_EQ(parse(pkt::build_ip(kEth, ip, pkt::kProtoUdp, Bytes(40, 0)), &m), Drop::kNone);
  EXPECT_TRUE(m.is_fragment());
  EXPECT_FALSE(m.flags & dp::kPktFirstFragment);
  EXPECT_FALSE(m.has_l4());
  EXPECT_EQ(m.ip_id, 77u);

  pkt::IpHdr ip6f = ip6();
  ip6f.ext.push_back(pkt::ipv6_fragment(3, false, 0xabcdef));
  ASSERT_EQ(parse(pkt::build_ip(kEth, ip6f, pkt::kProtoUdp, Bytes(16, 0)), &m), Drop::kNone);
  EXPECT_TRUE(m.is_fragment());
  EXPECT_FALSE(m.has_l4());
  EXPECT_EQ(m.ip_id, 0xabcdefu);
  // RFC 6946 atomic fragment: a whole packet.
  pkt::IpHdr atomic = ip6();
  atomic.ext.push_back(pkt::ipv6_fragment(0, false, 1));
  ASSERT_EQ(parse(pkt::build_udp(kEth, atomic, udp(), Bytes(8, 0)), &m), Drop::kNone);
  EXPECT_FALSE(m.is_fragment());
  EXPECT_TRUE(m.has_l4());
}

TEST(ParseValid, a_first_udp_fragment_carries_the_whole_datagram_length) {
  pkt::IpHdr ip = ip4();
  ip.mf = true;
  const Bytes datagram = pkt::udp_datagram(ip.src, ip.dst, udp(), Bytes(64, 7));
  PacketMeta m;
  ASSERT_EQ(parse(pkt::build_ip(kEth, ip, pkt::kProtoUdp, std::span(datagram).first(40)), &m),
            Drop::kNone);
  EXPECT_TRUE(m.has_l4());
  EXPECT_EQ(ntohs(m.dport), 53);
  // Unfragmented, the same length would be beyond the packet.
  ip.mf = false;
  EXPECT_EQ(parse(pkt::build_ip(kEth, ip, pkt::kProtoUdp, std::span(datagram).first(40))),
            Drop::kUdpBadLength);
}

TEST(ParseValid, icmp_echo_identifier_is_the_flow_port_and_ndp_dad_may_use_unspecified_source) {
  PacketMeta m;
  ASSERT_EQ(parse(pkt::build_icmp_echo(kEth, ip4(), false, 0x77, 1), &m), Drop::kNone);
  EXPECT_EQ(m.icmp_type, 8);
  EXPECT_EQ(ntohs(m.sport), 0x77);
  const IpAddr target = A("2001:db8:1::1");
  const Bytes dad = pkt::build_ndp_ns(kEth, pkt::ndp_ip_hdr(A("::"), pkt::solicited_node(target)), target,
                                      std::nullopt);
  ASSERT_EQ(parse(dad, &m), Drop::kNone);
  EXPECT_EQ(m.icmp_type, 135);
}

TEST(ParseValid, ethernet_padding_after_a_short_datagram_is_ignored) {
  const Bytes f = pkt::build_udp(kEth, ip4(), udp(), Bytes(2, 9));  // padded to 60 bytes
  ASSERT_EQ(f.size(), pkt::kEthMinFrameLen);
  PacketMeta m;
  ASSERT_EQ(parse(f, &m), Drop::kNone);
  EXPECT_EQ(m.ip_len, 20 + 8 + 2);
  EXPECT_EQ(m.l4_len, 10);
}

// Random valid frames: the dataplane parser and pktlib's decoder agree on every field.
TEST(ParseValid, agrees_with_the_independent_decoder_on_random_frames) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const bool v6 = rng() & 1;
    pkt::IpHdr ip = v6 ? ip6() : ip4();
    ip.ttl = uint8_t(2 + rng() % 250);
    Bytes f;
    const int kind = int(rng() % 3);
    Bytes payload(rng() % 300, uint8_t(i));
    if (kind == 0) {
      pkt::TcpHdr t = syn();
      t.sport = uint16_t(rng());
      t.dport = uint16_t(rng());
      t.flags = pkt::kTcpAck | (rng() & 1 ? pkt::kTcpPsh : 0);
      if (rng() & 1) t.options = pkt::tcp_options({.mss = 1400, .ts_val = 9});
      f = pkt::build_tcp(kEth, ip, t, payload);
    } else if (kind == 1) {
      pkt::UdpHdr u = udp();
      u.sport = uint16_t(rng());
      f = pkt::build_udp(kEth, ip, u, payload);
    } else {
      f = pkt::build_icmp_echo(kEth, ip, rng() & 1, uint16_t(rng()), uint16_t(rng()), payload);
    }
    PacketMeta m;
    ASSERT_EQ(parse(f, &m), Drop::kNone);
    const auto d = pkt::decode(f);
    ASSERT_TRUE(d.ok()) << d.error;
    EXPECT_EQ(m.src, d.src);
    EXPECT_EQ(m.dst, d.dst);
    EXPECT_EQ(m.ttl, d.ttl);
    EXPECT_EQ(m.l4_proto, d.l4_proto);
    EXPECT_EQ(m.l4_off, d.l4_off);
    EXPECT_EQ(m.l4_len, d.l4_len);
    EXPECT_EQ(m.ip_len, d.ip_len);
    if (kind < 2) {
      EXPECT_EQ(ntohs(m.sport), d.sport);
      EXPECT_EQ(ntohs(m.dport), d.dport);
    } else {
      EXPECT_EQ(ntohs(m.sport), d.icmp_id);
    }
  }
}

// Every field but the ARP ones, which only ARP frames carry.
void expect_same_meta(const PacketMeta& a, const PacketMeta& b, int frame) {
  SCOPED_TRACE(frame);
  EXPECT_EQ(a.l3, b.l3);
  EXPECT_EQ(a.l4_proto, b.l4_proto);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.ttl, b.ttl);
  EXPECT_EQ(a.vlan_tci, b.vlan_tci);
  EXPECT_EQ(a.l3_off, b.l3_off);
  EXPECT_EQ(a.l4_off, b.l4_off);
  EXPECT_EQ(a.l4_len, b.l4_len);
  EXPECT_EQ(a.l4_hdr_len, b.l4_hdr_len);
  EXPECT_EQ(a.ip_len, b.ip_len);
  EXPECT_EQ(a.frag_off_hdr, b.frag_off_hdr);
  EXPECT_EQ(a.sport, b.sport);
  EXPECT_EQ(a.dport, b.dport);
  EXPECT_EQ(a.tcp_flags, b.tcp_flags);
  EXPECT_EQ(a.icmp_type, b.icmp_type);
  EXPECT_EQ(a.icmp_code, b.icmp_code);
  EXPECT_EQ(a.tcp_wscale, b.tcp_wscale);
  EXPECT_EQ(a.tcp_mss, b.tcp_mss);
  EXPECT_EQ(a.ip_id, b.ip_id);
  EXPECT_EQ(a.src, b.src);
  EXPECT_EQ(a.dst, b.dst);
}

// parse_frame's fast path for plain IPv4 TCP/UDP and the general parser agree on every frame:
// valid ones (TOS, DF, multicast MACs, Ethernet padding), and the same frames with header bytes
// flipped or cut short, so each bail-out of the fast path is exercised. The fast path writes
// over a meta full of stale values (the worker reuses its per-burst array), so a field it
// forgot to set shows.
TEST(ParseFastPath, agrees_with_the_general_parser_on_valid_and_damaged_frames) {
  std::mt19937 rng(11);
  int fast_valid = 0;
  for (int i = 0; i < 20000; ++i) {
    pkt::IpHdr ip = ip4();
    ip.ttl = uint8_t(rng() % 256);
    Bytes payload(rng() % 40, uint8_t(i));
    Bytes f;
    if (rng() & 1) {
      pkt::TcpHdr t = syn();
      t.sport = uint16_t(rng());
      t.flags = uint8_t(rng() % 4 == 0 ? rng() : pkt::kTcpAck);
      // The layouts the parser matches without a walk (match_common_tcp_options) and others.
      static const pkt::TcpOptions kLayouts[] = {
          {.mss = 1400, .wscale = 7},
          {.mss = 1460},
          {.mss = 1460, .wscale = 9, .sack_permitted = true},
          {.mss = 1200, .wscale = 14, .sack_permitted = true, .ts_val = 77, .ts_ecr = 5},
          {.mss = 536, .wscale = 0, .ts_val = 1},
          {.ts_val = 123456, .ts_ecr = 654321},
          {.mss = 1460, .sack_permitted = true, .ts_val = 9},
          {.sack_permitted = true},
      };
      if (rng() % 2 == 0) t.options = pkt::tcp_options(kLayouts[rng() % std::size(kLayouts)]);
      f = pkt::build_tcp(kEth, ip, t, payload);
    } else {
      pkt::UdpHdr u = udp();
      u.sport = uint16_t(rng());
      f = pkt::build_udp(kEth, ip, u, payload);
    }
    if (rng() % 3 == 0) f[0] |= 1;                          // group destination MAC
    if (rng() % 3 == 0) f[kL3 + 6] |= 0x40;                 // DF
    if (rng() % 4 == 0) f[kL3 + 1] = uint8_t(rng());        // TOS (checksum now wrong)
    const int damage = int(rng() % 3);
    if (damage == 1) {
      for (int k = 1 + int(rng() % 3); k > 0; --k) f[rng() % std::min<size_t>(f.size(), 60)] ^= uint8_t(1 + rng() % 255);
    } else if (damage == 2) {
      f.resize(rng() % (f.size() + 1));
    }
    const uint32_t len = uint32_t(f.size());
    const uint32_t contig = rng() % 8 == 0 ? uint32_t(rng() % (len + 1)) : len;
    PacketMeta fast, general;
    std::memset(static_cast<void*>(&fast), 0xa5, sizeof fast);
    for (const bool verify : {true, false}) {
      const Drop df = dp::parse_frame(f.data(), contig, len, &fast, verify);
      const Drop dg = dp::parse_frame_general(f.data(), contig, len, &general, verify);
      ASSERT_EQ(df, dg) << "frame " << i;
      if (df == Drop::kNone) {
        expect_same_meta(fast, general, i);
        fast_valid += damage == 0;
      }
    }
  }
  EXPECT_GT(fast_valid, 5000);  // the valid cases really were parsed
}

}  // namespace
}  // namespace meshgate
