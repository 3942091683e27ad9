// tools/pktlib: builders against known-good bytes, checksums, decoder, pcap I/O.
//
// The expected frames below were checked outside this code: every checksum was verified by
// Wireshark 4.0 (tshark -o ip.check_checksum:TRUE -o tcp.check_checksum:TRUE
// -o udp.check_checksum:TRUE; ICMP/ICMPv6 are always checked), the IPv4 header checksum of the
// first one also by hand, and the tests recompute them with a naive summation of their own.
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/pktlib/build.h"
#include "tools/pktlib/checksum.h"
#include "tools/pktlib/decode.h"
#include "tools/pktlib/pcap.h"

namespace meshgate::pkt {
namespace {

Bytes hex(const std::string& s) {
  Bytes out;
  int hi = -1;
  for (char c : s) {
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(uint8_t(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

IpAddr ip(const char* s) { return *IpAddr::parse(s); }
MacAddr mac(const char* s) { return *MacAddr::parse(s); }

EthHdr test_eth() {
  EthHdr e;
  e.dst = mac("02:00:00:00:00:01");
  e.src = mac("02:00:00:00:00:fe");
  return e;
}

IpHdr test_ip4() {
  IpHdr h;
  h.src = ip("192.0.2.1");
  h.dst = ip("203.0.113.10");
  h.id = 0x1234;
  h.df = true;
  return h;
}

IpHdr test_ip6() {
  IpHdr h;
  h.src = ip("2001:db8:2::1");
  h.dst = ip("2001:db8:100::10");
  h.flow_label = 0xabcde;
  return h;
}

const uint8_t kAbc[3] = {'a', 'b', 'c'};
const uint8_t kPing[4] = {'p', 'i', 'n', 'g'};

// Naive RFC 1071 over a byte vector: a second implementation to check the first.
uint16_t naive_checksum(const Bytes& b) {
  uint32_t sum = 0;
  for (size_t i = 0; i < b.size(); i += 2) {
    sum += uint32_t(b[i]) << 8 | (i + 1 < b.size() ? b[i + 1] : 0);
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return uint16_t(~sum);
}

TEST(Checksum, rfc1071_example_sums_to_ddf2) {
  // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2 (checksum 0x220d).
  const Bytes b = hex("00 01 f2 03 f4 f5 f6 f7");
  EXPECT_EQ(inet_checksum(b), 0x220d);
  EXPECT_EQ(naive_checksum(b), 0x220d);
}

TEST(Checksum, odd_length_pads_with_zero) {
  const Bytes b = hex("01 02 03");
  EXPECT_EQ(inet_checksum(b), uint16_t(~(0x0102 + 0x0300)));
}

TEST(Checksum, well_known_ipv4_header) {
  // The IPv4 header example of the Wikipedia "IPv4 header checksum" article: checksum b861.
  const Bytes h = hex("45 00 00 73 00 00 40 00 40 11 00 00 c0 a8 00 01 c0 a8 00 c7");
  EXPECT_EQ(inet_checksum(h), 0xb861);
  IpHdr ih;
  ih.src = ip("192.168.0.1");
  ih.dst = ip("192.168.0.199");
  ih.df = true;
  const Bytes pkt = ip_packet(ih, kProtoUdp, Bytes(0x73 - 20, 0));
  EXPECT_EQ(Bytes(pkt.begin(), pkt.begin() + 20),
            hex("45 00 00 73 00 00 40 00 40 11 b8 61 c0 a8 00 01 c0 a8 00 c7"));
}

TEST(Checksum, corrupt_checksum_is_never_equivalent) {
  for (uint32_t v = 0; v <= 0xffff; ++v) {
    const uint16_t bad = corrupt_checksum(uint16_t(v));
    EXPECT_NE(bad, v);
    EXPECT_NE(bad, 0);
    // 0x0000 and 0xffff are the same one's-complement value.
    if (v == 0 || v == 0xffff) {
      EXPECT_TRUE(bad != 0 && bad != 0xffff);
    }
  }
}

TEST(Checksum, sctp_crc32c_check_value) {
  // CRC-32C of "123456789" is 0xe3069283 (the catalogue check value of CRC-32/ISCSI).
  const std::string s = "123456789";
  EXPECT_EQ(sctp_crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()}), 0xe3069283u);
}

TEST(Build, ipv4_tcp_syn_with_options) {
  TcpHdr t;
  t.sport = 40000;
  t.dport = 80;
  t.seq = 1;
  t.flags = kTcpSyn;
  t.window = 64240;
  t.options = tcp_options({.mss = 1460, .wscale = 7, .sack_permitted = true, .ts_val = 100});
  const Bytes f = build_tcp(test_eth(), test_ip4(), t);
  EXPECT_EQ(f, hex("02 00 00 00 00 01 02 00 00 00 00 fe 08 00 45 00"
                   "00 3c 12 34 40 00 40 06 2a 7c c0 00 02 01 cb 00"
                   "71 0a 9c 40 00 50 00 00 00 01 00 00 00 00 a0 02"
                   "fa f0 b2 0d 00 00 02 04 05 b4 04 02 08 0a 00 00"
                   "00 64 00 00 00 00 01 03 03 07"));
  // Independent recomputation: IPv4 header, and TCP over its pseudo-header.
  Bytes iph(f.begin() + 14, f.begin() + 34);
  iph[10] = iph[11] = 0;
  EXPECT_EQ(naive_checksum(iph), 0x2a7c);
  Bytes pseudo = hex("c0 00 02 01 cb 00 71 0a 00 06 00 28");
  pseudo.insert(pseudo.end(), f.begin() + 34, f.end());
  pseudo[12 + 16] = pseudo[12 + 17] = 0;
  EXPECT_EQ(naive_checksum(pseudo), 0xb20d);
}

TEST(Build, ipv4_udp_is_padded_to_minimum_frame) {
  UdpHdr u;
  u.sport = 5353;
  u.dport = 53;
  const Bytes f = build_udp(test_eth(), test_ip4(), u, kAbc);
  EXPECT_EQ(f, hex("02 00 00 00 00 01 02 00 00 00 00 fe 08 00 45 00"
                   "00 1f 12 34 40 00 40 11 2a 8e c0 00 02 01 cb 00"
                   "71 0a 14 e9 00 35 00 0b 28 4b 61 62 63 00 00 00"
                   "00 00 00 00 00 00 00 00 00 00 00 00"));
  EthHdr nopad = test_eth();
  nopad.pad = false;
  EXPECT_EQ(build_udp(nopad, test_ip4(), u, kAbc).size(), 14u + 31u);
}

TEST(Build, ipv4_udp_with_vlan_tag) {
  EthHdr e = test_eth();
  e.vlan_tci = 0x2064;  // PCP 1, VID 100
  UdpHdr u;
  u.sport = 5353;
  u.dport = 53;
  EXPECT_EQ(build_udp(e, test_ip4(), u, kAbc),
            hex("02 00 00 00 00 01 02 00 00 00 00 fe 81 00 20 64"
                "08 00 45 00 00 1f 12 34 40 00 40 11 2a 8e c0 00"
                "02 01 cb 00 71 0a 14 e9 00 35 00 0b 28 4b 61 62"
                "63 00 00 00 00 00 00 00 00 00 00 00"));
}

TEST(Build, icmp_echo_request_v4) {
  EXPECT_EQ(build_icmp_echo(test_eth(), test_ip4(), false, 0x0100, 1, kPing),
            hex("02 00 00 00 00 01 02 00 00 00 00 fe 08 00 45 00"
                "00 20 12 34 40 00 40 01 2a 9d c0 00 02 01 cb 00"
                "71 0a 08 00 18 2e 01 00 00 01 70 69 6e 67 00 00"
                "00 00 00 00 00 00 00 00 00 00 00 00"));
}

TEST(Build, ipv6_tcp_data_segment) {
  TcpHdr t;
  t.sport = 40000;
  t.dport = 80;
  t.seq = 0x01020304;
  t.ack = 0x05060708;
  t.flags = kTcpAck | kTcpPsh;
  t.window = 502;
  EXPECT_EQ(build_tcp(test_eth(), test_ip6(), t, kAbc),
            hex("02 00 00 00 00 01 02 00 00 00 00 fe 86 dd 60 0a"
                "bc de 00 17 06 40 20 01 0d b8 00 02 00 00 00 00"
                "00 00 00 00 00 01 20 01 0d b8 01 00 00 00 00 00"
                "00 00 00 00 00 10 9c 40 00 50 01 02 03 04 05 06"
                "07 08 50 18 01 f6 e0 47 00 00 61 62 63"));
}

TEST(Build, icmpv6_echo_request) {
  EXPECT_EQ(build_icmp_echo(test_eth(), test_ip6(), false, 7, 9, kPing),
            hex("02 00 00 00 00 01 02 00 00 00 00 fe 86 dd 60 0a"
                "bc de 00 0c 3a 40 20 01 0d b8 00 02 00 00 00 00"
                "00 00 00 00 00 01 20 01 0d b8 01 00 00 00 00 00"
                "00 00 00 00 00 10 80 00 44 53 00 07 00 09 70 69"
                "6e 67"));
}

TEST(Build, arp_request) {
  ArpHdr a;
  a.sha = mac("02:00:00:00:00:fe");
  a.spa = ip("198.51.100.254");
  a.tpa = ip("198.51.100.1");
  EthHdr e = test_eth();
  e.dst = broadcast_mac();
  EXPECT_EQ(build_arp(e, a), hex("ff ff ff ff ff ff 02 00 00 00 00 fe 08 06 00 01"
                                 "08 00 06 04 00 01 02 00 00 00 00 fe c6 33 64 fe"
                                 "00 00 00 00 00 00 c6 33 64 01 00 00 00 00 00 00"
                                 "00 00 00 00 00 00 00 00 00 00 00 00"));
}

TEST(Build, ipv4_options_and_fragment_fields) {
  IpHdr h = test_ip4();
  h.df = false;
  h.mf = true;
  h.frag_offset = 3;
  h.tos = 0xb8;
  h.ttl = 5;
  h.options = {0x94, 0x04, 0x00, 0x00};  // router alert (RFC 2113)
  const Bytes f = build_ip(test_eth(), h, kProtoUdp, Bytes(16, 0));
  const Decoded d = decode(f);
  EXPECT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.ihl_bytes, 24);
  EXPECT_EQ(d.tos, 0xb8);
  EXPECT_EQ(d.ttl, 5);
  EXPECT_TRUE(d.mf);
  EXPECT_FALSE(d.df);
  EXPECT_EQ(d.frag_offset, 3);
  EXPECT_TRUE(d.fragment);
  EXPECT_FALSE(d.has_l4);  // a later fragment carries no transport header
  EXPECT_EQ(verify_checksums(f).ipv4, CsumState::kValid);
}

TEST(Build, ipv6_extension_headers_are_chained) {
  IpHdr h = test_ip6();
  const IpAddr seg = ip("2001:db8::99");
  h.ext = {ipv6_hop_by_hop(), ipv6_dest_opts(Bytes{0x1e, 1, 0}),
           ipv6_routing(2, 0, std::span(&seg, 1)), ipv6_fragment(0, false, 77)};
  TcpHdr t;
  t.sport = 1;
  t.dport = 2;
  t.flags = kTcpSyn;
  const Bytes f = build_tcp(test_eth(), h, t, kAbc);
  EXPECT_EQ(f[14 + 6], kProtoHopByHop);
  const Decoded d = decode(f);
  ASSERT_TRUE(d.ok()) << d.error;
  ASSERT_EQ(d.ipv6_ext_count, 4);
  EXPECT_EQ(d.ipv6_ext[0], kProtoHopByHop);
  EXPECT_EQ(d.ipv6_ext[1], kProtoDestOpts);
  EXPECT_EQ(d.ipv6_ext[2], kProtoRouting);
  EXPECT_EQ(d.ipv6_ext[3], kProtoFragment);
  EXPECT_EQ(d.l4_proto, kProtoTcp);
  EXPECT_EQ(d.l4_off, 14u + 40 + 8 + 8 + 24 + 8);
  EXPECT_EQ(d.payload_len, 3u);
  EXPECT_FALSE(d.fragment);  // RFC 6946 atomic fragment
  EXPECT_EQ(verify_checksums(f).l4, CsumState::kValid);
}

TEST(Build, icmp_error_quotes_the_offending_packet) {
  TcpHdr t;
  t.sport = 40000;
  t.dport = 80;
  t.flags = kTcpSyn;
  const Bytes orig = ip_packet(test_ip4(), kProtoTcp, tcp_segment(test_ip4().src,
                                                                  test_ip4().dst, t));
  IpHdr back;
  back.src = ip("198.51.100.1");
  back.dst = ip("192.0.2.1");
  const Bytes f = build_icmp_error(test_eth(), back, kIcmpTimeExceeded, 0, orig);
  const Decoded d = decode(f);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.icmp_type, kIcmpTimeExceeded);
  EXPECT_EQ(d.payload_len, orig.size());
  EXPECT_TRUE(std::equal(orig.begin(), orig.end(), f.begin() + long(d.payload_off)));
  EXPECT_TRUE(verify_checksums(f).ok());
  // A big offending packet is cut so that the error fits in 576 bytes (RFC 1812 4.3.2.3).
  const Bytes big = ip_packet(test_ip4(), kProtoUdp, Bytes(1400, 7));
  EXPECT_EQ(decode(build_icmp_error(test_eth(), back, kIcmpDestUnreachable, 4, big)).ip_len,
            576);
}

TEST(Build, ndp_solicitation_and_advertisement) {
  const IpAddr target = ip("2001:db8:1::1");
  const IpAddr group = solicited_node(target);
  EXPECT_EQ(group, ip("ff02::1:ff00:1"));
  EthHdr e = test_eth();
  e.dst = ipv6_multicast_mac(group);
  EXPECT_EQ(e.dst, mac("33:33:ff:00:00:01"));
  const Bytes ns = build_ndp_ns(e, ndp_ip_hdr(ip("2001:db8:1::fe"), group), target,
                                mac("02:00:00:00:00:fe"));
  Decoded d = decode(ns);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.ttl, kNdpHopLimit);
  EXPECT_EQ(d.icmp_type, kIcmp6NeighborSolicit);
  EXPECT_EQ(d.nd_target, target);
  EXPECT_TRUE(d.nd_has_lladdr);
  EXPECT_EQ(d.nd_lladdr, mac("02:00:00:00:00:fe"));
  EXPECT_EQ(verify_checksums(ns).l4, CsumState::kValid);

  const Bytes na = build_ndp_na(test_eth(), ndp_ip_hdr(target, ip("2001:db8:1::fe")), target,
                                kNaSolicited | kNaOverride, mac("02:00:00:00:00:01"));
  d = decode(na);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.icmp_type, kIcmp6NeighborAdvert);
  EXPECT_EQ(d.na_flags, kNaSolicited | kNaOverride);
  EXPECT_EQ(d.nd_lladdr, mac("02:00:00:00:00:01"));
  EXPECT_EQ(verify_checksums(na).l4, CsumState::kValid);
}

TEST(Decode, tcp_fields_and_options) {
  TcpHdr t;
  t.sport = 1234;
  t.dport = 80;
  t.seq = 0xdeadbeef;
  t.ack = 0x01020304;
  t.flags = kTcpSyn | kTcpAck;
  t.window = 4321;
  t.options = tcp_options({.mss = 1400, .wscale = 9, .sack_permitted = true, .ts_val = 5,
                           .ts_ecr = 6});
  const Bytes f = build_tcp(test_eth(), test_ip4(), t, kAbc);
  const Decoded d = decode(f);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.eth_dst, test_eth().dst);
  EXPECT_EQ(d.eth_src, test_eth().src);
  EXPECT_EQ(d.l3, L3Kind::kIpv4);
  EXPECT_EQ(d.src, test_ip4().src);
  EXPECT_EQ(d.dst, test_ip4().dst);
  EXPECT_EQ(d.ttl, kDefaultTtl);
  EXPECT_EQ(d.ip_id, 0x1234);
  EXPECT_TRUE(d.df);
  EXPECT_EQ(d.sport, 1234);
  EXPECT_EQ(d.dport, 80);
  EXPECT_EQ(d.tcp_seq, 0xdeadbeef);
  EXPECT_EQ(d.tcp_ack, 0x01020304u);
  EXPECT_EQ(d.tcp_flags, kTcpSyn | kTcpAck);
  EXPECT_EQ(d.tcp_window, 4321);
  EXPECT_EQ(d.tcp_mss, 1400);
  EXPECT_EQ(d.tcp_wscale, 9);
  EXPECT_TRUE(d.tcp_sack_permitted);
  EXPECT_TRUE(d.tcp_timestamps);
  EXPECT_EQ(d.tcp_ts_val, 5u);
  EXPECT_EQ(d.tcp_ts_ecr, 6u);
  EXPECT_EQ(d.payload_len, 3u);
  EXPECT_EQ(f[d.payload_off], 'a');
}

TEST(Decode, padding_is_not_payload) {
  UdpHdr u;
  u.sport = 1;
  u.dport = 2;
  const Bytes f = build_udp(test_eth(), test_ip4(), u, kAbc);
  ASSERT_EQ(f.size(), kEthMinFrameLen);
  const Decoded d = decode(f);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.l4_len, 11u);
  EXPECT_EQ(d.payload_len, 3u);
  EXPECT_TRUE(verify_checksums(f).ok());
}

TEST(Decode, every_prefix_of_a_frame_is_safe_and_reports_truncation) {
  TcpHdr t;
  t.sport = 1;
  t.dport = 2;
  t.flags = kTcpSyn;
  t.options = tcp_options({.mss = 1460});
  for (const IpHdr& h : {test_ip4(), test_ip6()}) {
    EthHdr e = test_eth();
    e.pad = false;
    const Bytes f = build_tcp(e, h, t);
    for (size_t n = 0; n < f.size(); ++n) {
      const Decoded d = decode(std::span(f).first(n));
      ASSERT_FALSE(d.ok()) << "prefix " << n;
      (void)verify_checksums(std::span(f).first(n));
    }
    EXPECT_TRUE(decode(f).ok());
    EXPECT_STREQ(decode(std::span(f).first(13)).error, "eth_truncated");
    // The IP lengths now exceed the frame.
    EXPECT_STREQ(decode(std::span(f).first(f.size() - 1)).error,
                 h.src.is_v4() ? "ipv4_bad_total_length" : "ipv6_bad_payload_length");
  }
}

TEST(VerifyChecksums, valid_frames_pass) {
  TcpHdr t;
  t.flags = kTcpAck;
  UdpHdr u;
  for (const IpHdr& h : {test_ip4(), test_ip6()}) {
    const bool v4 = h.src.is_v4();
    auto r = verify_checksums(build_tcp(test_eth(), h, t, kAbc));
    EXPECT_EQ(r.ipv4, v4 ? CsumState::kValid : CsumState::kAbsent);
    EXPECT_EQ(r.l4, CsumState::kValid);
    EXPECT_EQ(r.l4_proto, kProtoTcp);
    EXPECT_EQ(verify_checksums(build_udp(test_eth(), h, u, kAbc)).l4, CsumState::kValid);
    EXPECT_EQ(verify_checksums(build_icmp_echo(test_eth(), h, true, 1, 2, kPing)).l4,
              CsumState::kValid);
  }
}

TEST(VerifyChecksums, catches_corrupted_checksums) {
  for (const IpHdr& base : {test_ip4(), test_ip6()}) {
    TcpHdr t;
    t.csum = Csum::kCorrupt;
    EXPECT_EQ(verify_checksums(build_tcp(test_eth(), base, t)).l4, CsumState::kInvalid);
    UdpHdr u;
    u.csum = Csum::kCorrupt;
    EXPECT_EQ(verify_checksums(build_udp(test_eth(), base, u, kAbc)).l4, CsumState::kInvalid);
    IcmpHdr i;
    i.type = base.src.is_v4() ? kIcmpEchoRequest : kIcmp6EchoRequest;
    i.csum = Csum::kCorrupt;
    EXPECT_EQ(verify_checksums(build_icmp(test_eth(), base, i, kPing)).l4, CsumState::kInvalid);
  }
  IpHdr h = test_ip4();
  h.csum = Csum::kCorrupt;
  const auto r = verify_checksums(build_udp(test_eth(), h, UdpHdr{}, kAbc));
  EXPECT_EQ(r.ipv4, CsumState::kInvalid);
  EXPECT_FALSE(r.ok());
}

TEST(VerifyChecksums, catches_any_flipped_payload_bit) {
  TcpHdr t;
  t.flags = kTcpAck;
  const Bytes payload(40, 0x5a);
  const Bytes good = build_tcp(test_eth(), test_ip4(), t, payload);
  for (size_t i = 14; i < good.size(); ++i) {
    Bytes f = good;
    f[i] ^= 0x10;
    const Decoded d = decode(f);
    if (!d.ok() && d.l4_off == 0) continue;  // the flip broke the IP header structure
    EXPECT_FALSE(verify_checksums(f).ok()) << "byte " << i;
  }
}

TEST(VerifyChecksums, zero_udp_checksum_means_none_only_over_ipv4) {
  UdpHdr u;
  u.csum = Csum::kZero;
  EXPECT_EQ(verify_checksums(build_udp(test_eth(), test_ip4(), u, kAbc)).l4,
            CsumState::kNotChecked);
  EXPECT_EQ(verify_checksums(build_udp(test_eth(), test_ip6(), u, kAbc)).l4,
            CsumState::kInvalid);
}

class PcapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pktlib_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

std::vector<Bytes> some_frames() {
  std::vector<Bytes> v;
  for (uint16_t i = 0; i < 50; ++i) {
    TcpHdr t;
    t.sport = uint16_t(1000 + i);
    t.dport = 80;
    t.flags = kTcpAck;
    v.push_back(build_tcp(test_eth(), i % 2 ? test_ip4() : test_ip6(), t, Bytes(i * 29, 'x')));
  }
  v.push_back(Bytes{1, 2, 3});  // a runt survives too
  return v;
}

TEST_F(PcapTest, round_trip_keeps_bytes_and_nanoseconds) {
  const auto frames = some_frames();
  {
    auto w = PcapWriter::open(path("a.pcap"));
    ASSERT_TRUE(w) << w.error().message;
    for (size_t i = 0; i < frames.size(); ++i) {
      ASSERT_TRUE(w->write(1704067200000000000ull + i * 1234567, frames[i]));
    }
    EXPECT_EQ(w->records(), frames.size());
    ASSERT_TRUE(w->close());
  }
  auto r = PcapReader::open(path("a.pcap"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->nanosecond());
  EXPECT_EQ(r->linktype(), kLinktypeEthernet);
  uint64_t ts;
  Bytes f;
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_TRUE(r->next(&ts, &f)) << i;
    EXPECT_EQ(ts, 1704067200000000000ull + i * 1234567);
    EXPECT_EQ(f, frames[i]);
  }
  EXPECT_FALSE(r->next(&ts, &f));
  EXPECT_TRUE(r->error().empty());
}

TEST_F(PcapTest, libpcap_reads_what_we_write) {
  const auto frames = some_frames();
  {
    auto w = PcapWriter::open(path("b.pcap"));
    ASSERT_TRUE(w);
    for (size_t i = 0; i < frames.size(); ++i) w->write(5000000000ull + i, frames[i]);
    ASSERT_TRUE(w->close());
  }
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline_with_tstamp_precision(path("b.pcap").c_str(),
                                                      PCAP_TSTAMP_PRECISION_NANO, err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
  pcap_pkthdr* h;
  const u_char* data;
  size_t i = 0;
  while (pcap_next_ex(p, &h, &data) == 1) {
    ASSERT_LT(i, frames.size());
    EXPECT_EQ(uint64_t(h->ts.tv_sec) * 1000000000ull + uint64_t(h->ts.tv_usec), 5000000000ull + i);
    EXPECT_EQ(Bytes(data, data + h->caplen), frames[i]);
    ++i;
  }
  EXPECT_EQ(i, frames.size());
  pcap_close(p);
}

TEST_F(PcapTest, reads_microsecond_files_written_by_libpcap) {
  const auto frames = some_frames();
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, path("c.pcap").c_str());
  ASSERT_NE(d, nullptr);
  for (size_t i = 0; i < frames.size(); ++i) {
    pcap_pkthdr h{};
    h.ts.tv_sec = 1700000000;
    h.ts.tv_usec = suseconds_t(i * 10);
    h.caplen = h.len = uint32_t(frames[i].size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, frames[i].data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
  auto r = PcapReader::open(path("c.pcap"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->nanosecond());
  uint64_t ts;
  Bytes f;
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_TRUE(r->next(&ts, &f));
    EXPECT_EQ(ts, 1700000000000000000ull + i * 10000);
    EXPECT_EQ(f, frames[i]);
  }
  EXPECT_FALSE(r->next(&ts, &f));
}

TEST_F(PcapTest, truncated_file_reports_an_error) {
  {
    auto w = PcapWriter::open(path("d.pcap"));
    ASSERT_TRUE(w);
    w->write(1, Bytes(100, 1));
    ASSERT_TRUE(w->close());
  }
  std::filesystem::resize_file(path("d.pcap"), 24 + 16 + 50);
  auto r = PcapReader::open(path("d.pcap"));
  ASSERT_TRUE(r);
  uint64_t ts;
  Bytes f;
  EXPECT_FALSE(r->next(&ts, &f));
  EXPECT_FALSE(r->error().empty());
  std::FILE* junk = std::fopen(path("e.pcap").c_str(), "wb");
  std::fputs("not a pcap file at all, really", junk);
  std::fclose(junk);
  EXPECT_FALSE(PcapReader::open(path("e.pcap")));
  EXPECT_FALSE(PcapReader::open(path("missing.pcap")));
}

}  // namespace
}  // namespace meshgate::pkt
