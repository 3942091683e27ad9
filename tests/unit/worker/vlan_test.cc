// Answers to 802.1Q-tagged requests leave on the VLAN they were asked on: the ARP reply, the
// neighbor advertisement, the echo reply and the ICMP errors the gateway sends about a tagged
// packet carry the request's tag (TCI, priority bits included). Byte-exact expected frames,
// built independently with pktlib.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using pkt::Bytes;
using test::A;
using test::DataplaneHarness;
using test::kDemoTopology;
using test::kGw;
using test::kRouter;
using test::kT0;

constexpr uint16_t kTci = 0x2064;  // PCP 1, VID 100

pkt::EthHdr tagged(const MacAddr& dst, const MacAddr& src) {
  pkt::EthHdr e{dst, src};
  e.vlan_tci = kTci;
  return e;
}

TEST(VlanAnswers, a_tagged_arp_request_is_answered_on_its_vlan) {
  for (const char* target : {"198.51.100.1", "203.0.113.10"}) {
    SCOPED_TRACE(target);
    DataplaneHarness h(kDemoTopology);
    const auto req = test::arp_msg(1, kRouter, "198.51.100.254", MacAddr{}, target);
    const auto out = h.send(pkt::build_arp(tagged(pkt::broadcast_mac(), kRouter), req), kT0);
    const auto rep = test::arp_msg(2, kGw, target, kRouter, "198.51.100.254");
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], pkt::build_arp(tagged(kRouter, kGw), rep));
    EXPECT_TRUE(h.balanced());
  }
}

TEST(VlanAnswers, a_tagged_neighbor_solicitation_is_answered_on_its_vlan) {
  DataplaneHarness h(kDemoTopology);
  const IpAddr target = A("2001:db8:100::10");
  const IpAddr src = A("2001:db8:1::fe");
  const auto ns = pkt::build_ndp_ns(
      tagged(pkt::ipv6_multicast_mac(pkt::solicited_node(target)), kRouter),
      pkt::ndp_ip_hdr(src, pkt::solicited_node(target)), target, kRouter);
  const auto out = h.send(ns, kT0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], pkt::build_ndp_na(tagged(kRouter, kGw), pkt::ndp_ip_hdr(target, src), target,
                                      pkt::kNaSolicited | pkt::kNaOverride, kGw));
}

TEST(VlanAnswers, a_tagged_echo_request_is_answered_on_its_vlan) {
  DataplaneHarness h(kDemoTopology);
  pkt::IpHdr ip;
  ip.src = A("192.0.2.50");
  ip.dst = A("198.51.100.1");
  const Bytes payload(16, 0x5a);
  const auto out =
      h.send(pkt::build_icmp_echo(tagged(kGw, kRouter), ip, false, 9, 3, payload), kT0);
  pkt::IpHdr rip;
  rip.src = ip.dst;
  rip.dst = ip.src;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], pkt::build_icmp_echo(tagged(kRouter, kGw), rip, true, 9, 3, payload));
}

// The gateway's own ICMP error about a tagged packet goes back on the packet's VLAN too.
TEST(VlanAnswers, time_exceeded_about_a_tagged_packet_leaves_on_its_vlan) {
  DataplaneHarness h(kDemoTopology);
  const Bytes syn =
      test::tcp_frame("192.0.2.50", 41000, "203.0.113.10", 80, pkt::kTcpSyn, 1, tagged(kGw, kRouter));
  const auto out = h.send(syn, kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.vlan_tags, 1);
  EXPECT_EQ(d.vlan_tci, kTci);
  EXPECT_EQ(d.icmp_type, pkt::kIcmpTimeExceeded);
  EXPECT_EQ(d.eth_dst, kRouter);
  // Byte-exact: pktlib's error from the port's address (TOS internetwork control, as routers
  // send errors), quoting the IP packet as it came.
  pkt::IpHdr ip;
  ip.src = A("198.51.100.1");
  ip.dst = A("192.0.2.50");
  ip.tos = 0xc0;
  const size_t l3 = pkt::kEthHeaderLen + pkt::kVlanTagLen;
  const Bytes quoted(syn.begin() + l3, syn.begin() + l3 + 40);
  EXPECT_EQ(out[0], pkt::build_icmp_error(tagged(kRouter, kGw), ip, pkt::kIcmpTimeExceeded, 0,
                                          quoted));
}

TEST(VlanAnswers, time_exceeded_about_a_tagged_ipv6_packet_leaves_on_its_vlan) {
  DataplaneHarness h(kDemoTopology);
  const auto out = h.send(test::tcp_frame("2001:db8:2::50", 41000, "2001:db8:100::10", 80,
                                          pkt::kTcpSyn, 1, tagged(kGw, kRouter)),
                          kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.vlan_tags, 1);
  EXPECT_EQ(d.vlan_tci, kTci);
  EXPECT_EQ(d.icmp_type, pkt::kIcmp6TimeExceeded);
  EXPECT_EQ(d.src, A("2001:db8:1::1"));
  EXPECT_EQ(d.dst, A("2001:db8:2::50"));
  EXPECT_EQ(d.eth_dst, kRouter);
}

// A NIC that strips 802.1Q tags (RTE_MBUF_F_RX_VLAN_STRIPPED) keeps the tag in the mbuf: the
// answer and a forwarded frame carry it as if the tag had stayed in the frame.
TEST(VlanAnswers, a_tag_the_nic_stripped_is_put_back_on_the_answer_and_the_forwarded_frame) {
  test::HarnessOptions o;
  o.strip_vlan = true;
  DataplaneHarness h(kDemoTopology, o);
  const auto req = test::arp_msg(1, kRouter, "198.51.100.254", MacAddr{}, "198.51.100.1");
  const auto out = h.send(pkt::build_arp(tagged(pkt::broadcast_mac(), kRouter), req), kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto rep = test::arp_msg(2, kGw, "198.51.100.1", kRouter, "198.51.100.254");
  EXPECT_EQ(out[0], pkt::build_arp(tagged(kRouter, kGw), rep));
  const auto fwd = h.send(test::tcp_frame("192.0.2.50", 41000, "203.0.113.10", 80, pkt::kTcpSyn,
                                          64, tagged(kGw, kRouter)),
                          kT0 + 1);
  ASSERT_EQ(fwd.size(), 1u);
  const auto d = pkt::decode(fwd[0]);
  EXPECT_EQ(d.vlan_tags, 1);
  EXPECT_EQ(d.vlan_tci, kTci);
  EXPECT_EQ(d.dport, 8080);
  EXPECT_TRUE(h.balanced());
}

}  // namespace
}  // namespace meshgate
