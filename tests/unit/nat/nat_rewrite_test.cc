// nat_rewrite and decrement_ttl against an independent checksum verifier (pktlib): every
// rewrite of a valid TCP, UDP, ICMP echo or ICMPv6 echo packet, IPv4 or IPv6, leaves every
// checksum valid, writes the new endpoint where the protocol keeps it, and leaves the rest of
// the frame as it was.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "dataplane/nat/nat.h"
#include "dataplane/packet/parse.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using dp::PacketMeta;
using pkt::Bytes;

const pkt::EthHdr kEth{*MacAddr::parse("02:00:00:00:00:01"), *MacAddr::parse("02:00:00:00:00:fe")};

IpAddr random_addr(std::mt19937& rng, bool v6) {
  if (!v6) return IpAddr::v4(0xc0000200u | (rng() & 0xff));  // 192.0.2.0/24
  IpAddr a = *IpAddr::parse("2001:db8::");
  for (int k = 4; k < 16; ++k) a.b[k] = uint8_t(rng());
  return a;
}

Bytes random_frame(std::mt19937& rng, bool v6, int kind, bool udp_zero_csum) {
  pkt::IpHdr ip;
  ip.src = random_addr(rng, v6);
  ip.dst = random_addr(rng, v6);
  ip.ttl = uint8_t(2 + rng() % 200);
  Bytes payload(rng() % 64, uint8_t(rng()));
  for (auto& b : payload) b = uint8_t(rng());
  if (kind == 0) {
    pkt::TcpHdr t;
    t.sport = uint16_t(rng());
    t.dport = uint16_t(rng());
    t.flags = pkt::kTcpAck;
    return pkt::build_tcp(kEth, ip, t, payload);
  }
  if (kind == 1) {
    pkt::UdpHdr u;
    u.sport = uint16_t(rng());
    u.dport = uint16_t(rng());
    Bytes f = pkt::build_udp(kEth, ip, u, payload);
    if (udp_zero_csum) f[14 + 20 + 6] = f[14 + 20 + 7] = 0;  // IPv4 only: "no checksum"
    return f;
  }
  return pkt::build_icmp_echo(kEth, ip, rng() & 1, uint16_t(rng()), uint16_t(rng()), payload);
}

TEST(NatRewrite, every_rewrite_keeps_all_checksums_valid_and_touches_only_its_fields) {
  std::mt19937 rng(5);
  int rewrites = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const bool v6 = rng() & 1;
    const int kind = int(rng() % 3);
    const bool zero = !v6 && kind == 1 && rng() % 4 == 0;
    Bytes f = random_frame(rng, v6, kind, zero);
    PacketMeta m;
    ASSERT_EQ(dp::parse_packet(f.data(), uint32_t(f.size()), &m, true), dp::Drop::kNone);
    ASSERT_TRUE(pkt::verify_checksums(f).ok());
    const Bytes before = f;
    const bool dst = rng() & 1;
    const IpAddr to = random_addr(rng, v6);
    const uint16_t port = uint16_t(rng());
    if (dst) dp::nat_rewrite<true>(f.data(), &m, to, port);
    else dp::nat_rewrite<false>(f.data(), &m, to, port);
    if (rng() & 1) dp::decrement_ttl(f.data(), &m);
    ++rewrites;

    const auto report = pkt::verify_checksums(f);
    ASSERT_TRUE(report.ok()) << "iter " << iter << " ipv4 " << pkt::csum_state_name(report.ipv4)
                             << " l4 " << pkt::csum_state_name(report.l4);
    if (zero) {
      EXPECT_EQ(f[14 + 20 + 6], 0);
      EXPECT_EQ(f[14 + 20 + 7], 0);
    } else {
      EXPECT_EQ(report.l4, pkt::CsumState::kValid);
    }
    const auto d = pkt::decode(f);
    ASSERT_TRUE(d.ok()) << d.error;
    EXPECT_EQ(dst ? d.dst : d.src, to);
    EXPECT_EQ(dst ? m.dst : m.src, to);
    if (kind == 2) {
      EXPECT_EQ(d.icmp_id, ntohs(port));
      EXPECT_EQ(m.sport, port);
      EXPECT_EQ(m.dport, port);
    } else {
      EXPECT_EQ(dst ? d.dport : d.sport, ntohs(port));
      EXPECT_EQ(dst ? m.dport : m.sport, port);
    }
    // Nothing else changed: Ethernet header and payload bytes are as they were.
    ASSERT_EQ(f.size(), before.size());
    EXPECT_TRUE(std::equal(f.begin(), f.begin() + 14, before.begin()));
    const size_t payload_off = m.l4_off + m.l4_hdr_len;
    EXPECT_TRUE(std::equal(f.begin() + payload_off, f.end(), before.begin() + payload_off));
  }
  EXPECT_EQ(rewrites, 20000);
}

// The fast path's fused rewrite gives the bytes of nat_rewrite followed by decrement_ttl, for
// any checksum field values (valid or not, 0 and 0xffff included), any addresses and ports.
TEST(NatRewrite, the_fused_ipv4_rewrite_and_ttl_decrement_give_the_same_bytes) {
  std::mt19937 rng(9);
  const uint16_t edge[] = {0x0000, 0xffff, 0x0001, 0xfffe, 0x8000, 0x7fff};
  auto pick16 = [&] { return rng() % 3 == 0 ? edge[rng() % 6] : uint16_t(rng()); };
  for (int iter = 0; iter < 200000; ++iter) {
    const int kind = int(rng() % 2);
    Bytes f = random_frame(rng, false, kind, kind == 1 && rng() % 4 == 0);
    f[14 + 8] = uint8_t(2 + rng() % 254);                // TTL
    if (rng() & 1) {
      for (int k = 0; k < 4; ++k) f[14 + 12 + k] = uint8_t(rng());  // any legal source
      f[14 + 12] = uint8_t(1 + rng() % 126);
    }
    const uint16_t ip_csum = pick16();
    std::memcpy(&f[14 + 10], &ip_csum, 2);
    const uint32_t l4_csum_off = 14 + 20 + (kind == 0 ? 16 : 6);
    if (kind == 0 || f[l4_csum_off] || f[l4_csum_off + 1]) {  // a zero UDP checksum stays zero
      const uint16_t c = pick16();
      std::memcpy(&f[l4_csum_off], &c, 2);
    }
    PacketMeta m;
    ASSERT_EQ(dp::parse_packet(f.data(), uint32_t(f.size()), &m, false), dp::Drop::kNone);
    const bool dst = rng() & 1;
    IpAddr to = IpAddr::v4(rng());
    if (rng() % 8 == 0) to = dst ? m.dst : m.src;        // no address change
    const uint16_t port = rng() % 8 == 0 ? (dst ? m.dport : m.sport) : pick16();
    Bytes want = f;
    PacketMeta wm = m;
    if (dst) dp::nat_rewrite<true>(want.data(), &wm, to, port);
    else dp::nat_rewrite<false>(want.data(), &wm, to, port);
    dp::decrement_ttl(want.data(), &wm);
    uint8_t* ip = f.data() + 14;
    if (dst) dp::nat_rewrite_ipv4_ttl<true>(ip, ip + 20, m.l4_proto, to.v4_ptr(), port);
    else dp::nat_rewrite_ipv4_ttl<false>(ip, ip + 20, m.l4_proto, to.v4_ptr(), port);
    ASSERT_EQ(f, want) << "iter " << iter;
  }
}

}  // namespace
}  // namespace meshgate
