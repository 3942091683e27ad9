// Martian packets through the real worker burst functions: sources and destinations no packet
// may carry (RFC 1812 §5.3.7, RFC 4291 §2.5 / §2.7), the gateway's own addresses as a source
// (spoofed, or the gateway's own packets looping back), directed broadcasts, and unicast IP in
// a broadcast or multicast frame (RFC 1122 §3.3.6, RFC 1812 §5.3.4). Each is dropped with its
// named reason before it can start a flow; legitimate traffic next to them still flows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using dp::Drop;
using pkt::Bytes;
using test::A;
using test::DataplaneHarness;
using test::kDemoTopology;
using test::kGw;
using test::kRouter;
using test::kT0;
using test::kToGw;
using test::M;
using test::tcp_frame;
using test::udp_frame;

// The demo topology (port 198.51.100.1/24 + 2001:db8:1::1/64, VIPs 203.0.113.10 and
// 2001:db8:100::10) with fullnat source addresses, so that every kind of gateway address exists.
std::string topology() {
  return std::string(kDemoTopology) + R"(
[fullnat]
local_addresses = ["198.51.100.2", "2001:db8:1::2"]
)";
}

const pkt::EthHdr kBroadcast{pkt::broadcast_mac(), kRouter};

Bytes icmp_unreachable(const char* src, const char* dst) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  pkt::IpHdr quoted_ip;
  quoted_ip.src = A(dst);
  quoted_ip.dst = A("192.0.2.200");
  pkt::TcpHdr t;
  t.sport = 80;
  t.dport = 40000;
  t.flags = pkt::kTcpSyn | pkt::kTcpAck;
  const Bytes quoted = pkt::ip_packet(quoted_ip, pkt::kProtoTcp,
                                      pkt::tcp_segment(quoted_ip.src, quoted_ip.dst, t));
  return pkt::build_icmp_error(kToGw, ip, pkt::kIcmpDestUnreachable, 1, quoted);
}

Bytes echo_request(const char* src, const char* dst, const pkt::EthHdr& eth = kToGw) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  return pkt::build_icmp_echo(eth, ip, false, 7, 1, Bytes(8, 0x5a));
}

Bytes raw_ip(const char* src, const char* dst, uint8_t proto) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  return pkt::build_ip(kToGw, ip, proto, Bytes(16, 0));
}

struct MartianCase {
  std::string name;
  Bytes frame;
  Drop reason;
};

// SYNs to port 80 whose addresses alone make them martian.
struct MartianSyn {
  const char* src;
  const char* dst;
  Drop reason;
};
constexpr MartianSyn kMartianSyns[] = {
    // Sources no packet carries: the parser's first-octet checks.
    {"0.0.0.0", "203.0.113.10", Drop::kIpv4BadSource},
    {"127.0.0.1", "203.0.113.10", Drop::kIpv4BadSource},
    {"224.0.0.5", "203.0.113.10", Drop::kIpv4BadSource},
    {"240.0.0.1", "203.0.113.10", Drop::kIpv4BadSource},  // class E
    {"255.255.255.255", "203.0.113.10", Drop::kIpv4BadSource},
    {"::", "2001:db8:100::10", Drop::kIpv6BadSource},
    {"::1", "2001:db8:100::10", Drop::kIpv6BadSource},
    {"ff02::1", "2001:db8:100::10", Drop::kIpv6BadSource},
    // The gateway's own addresses (VIP, port, fullnat): would be load-balanced, and the
    // backend's answer would leave as VIP -> VIP.
    {"203.0.113.10", "203.0.113.10", Drop::kSourceIsLocal},
    {"198.51.100.1", "203.0.113.10", Drop::kSourceIsLocal},
    {"198.51.100.2", "203.0.113.10", Drop::kSourceIsLocal},
    {"2001:db8:100::10", "2001:db8:100::10", Drop::kSourceIsLocal},
    {"2001:db8:1::1", "2001:db8:100::10", Drop::kSourceIsLocal},
    {"2001:db8:1::2", "2001:db8:100::10", Drop::kSourceIsLocal},
    // The broadcast address of the port's subnet (198.51.100.0/24) is no host's.
    {"198.51.100.255", "203.0.113.10", Drop::kSourceIsBroadcast},
    // Link-local sources (RFC 3927, RFC 4291 §2.5.6): never forwarded by a router.
    {"169.254.1.1", "203.0.113.10", Drop::kSourceLinkLocal},
    {"169.254.255.254", "203.0.113.10", Drop::kSourceLinkLocal},
    {"fe80::1", "2001:db8:100::10", Drop::kSourceLinkLocal},
    {"febf::1", "2001:db8:100::10", Drop::kSourceLinkLocal},
    // A backend of the (dnat) service as its client: the hairpin's reply would not come back.
    {"198.51.100.11", "203.0.113.10", Drop::kSourceIsBackend},
    {"198.51.100.13", "203.0.113.10", Drop::kSourceIsBackend},
    {"2001:db8:1::12", "2001:db8:100::10", Drop::kSourceIsBackend},
    // Destinations never forwarded.
    {"192.0.2.1", "0.0.0.0", Drop::kMartianDestination},
    {"192.0.2.1", "127.0.0.1", Drop::kMartianDestination},
    {"192.0.2.1", "240.0.0.1", Drop::kMartianDestination},
    {"2001:db8:2::1", "::1", Drop::kMartianDestination},
    {"2001:db8:2::1", "::", Drop::kMartianDestination},
};

std::vector<MartianCase> martian_cases() {
  std::vector<MartianCase> v;
  for (const auto& c : kMartianSyns) {
    v.push_back({std::string("SYN ") + c.src + " -> " + c.dst,
                 tcp_frame(c.src, 1000, c.dst, 80, pkt::kTcpSyn), c.reason});
  }
  const pkt::EthHdr to_mdns{M("01:00:5e:00:00:fb"), kRouter};
  const pkt::EthHdr to_all_nodes{M("33:33:00:00:00:01"), kRouter};
  const pkt::EthHdr to_group4{M("01:00:5e:01:02:03"), kRouter};
  v.push_back({"UDP to dns from the VIP", udp_frame("203.0.113.10", 53, "203.0.113.10", 53),
               Drop::kSourceIsLocal});
  v.push_back({"UDP to dns from 169.254.7.7", udp_frame("169.254.7.7", 53, "203.0.113.10", 53),
               Drop::kSourceLinkLocal});
  v.push_back({"UDP to dns from its backend", udp_frame("198.51.100.12", 4000, "203.0.113.10", 53),
               Drop::kSourceIsBackend});
  v.push_back({"echo request to the port address from itself",
               echo_request("198.51.100.1", "198.51.100.1"), Drop::kSourceIsLocal});
  v.push_back({"echo request to the VIP from the VIP",
               echo_request("203.0.113.10", "203.0.113.10"), Drop::kSourceIsLocal});
  v.push_back({"ICMP error from the VIP", icmp_unreachable("203.0.113.10", "198.51.100.1"),
               Drop::kSourceIsLocal});
  v.push_back({"GRE to the VIP from the port address",
               raw_ip("198.51.100.1", "203.0.113.10", pkt::kProtoGre), Drop::kSourceIsLocal});
  v.push_back({"UDP to the port subnet's broadcast address (directed broadcast)",
               udp_frame("192.0.2.1", 1000, "198.51.100.255", 53), Drop::kDestinationNotUnicast});
  v.push_back({"UDP to 255.255.255.255 in a broadcast frame",
               udp_frame("192.0.2.1", 68, "255.255.255.255", 67, kBroadcast),
               Drop::kDestinationNotUnicast});
  v.push_back({"UDP to mDNS 224.0.0.251 in a multicast frame",
               udp_frame("198.51.100.7", 5353, "224.0.0.251", 5353, to_mdns),
               Drop::kDestinationNotUnicast});
  v.push_back({"echo request to all-nodes ff02::1",
               echo_request("2001:db8:1::7", "ff02::1", to_all_nodes),
               Drop::kDestinationNotUnicast});
  // Unicast IP in a frame to a group MAC: a router must not forward it (RFC 1812 §5.3.4).
  v.push_back({"SYN to the VIP in a broadcast frame",
               tcp_frame("192.0.2.1", 1000, "203.0.113.10", 80, pkt::kTcpSyn, 64, kBroadcast),
               Drop::kUnicastInL2Broadcast});
  v.push_back({"SYN to the VIP in a multicast frame",
               tcp_frame("192.0.2.1", 1000, "203.0.113.10", 80, pkt::kTcpSyn, 64, to_group4),
               Drop::kUnicastInL2Broadcast});
  v.push_back({"SYN to web6 in a multicast frame",
               tcp_frame("2001:db8:2::1", 1000, "2001:db8:100::10", 80, pkt::kTcpSyn, 64,
                         to_all_nodes),
               Drop::kUnicastInL2Broadcast});
  v.push_back({"echo request to the port address in a broadcast frame",
               echo_request("192.0.2.1", "198.51.100.1", kBroadcast), Drop::kUnicastInL2Broadcast});
  return v;
}

TEST(Martians, each_martian_is_dropped_with_its_reason_before_it_starts_a_flow) {
  for (const auto& c : martian_cases()) {
    SCOPED_TRACE(c.name);
    DataplaneHarness h(topology());
    const auto out = h.send(c.frame, kT0);
    EXPECT_TRUE(out.empty()) << out.size() << " frame(s) sent";
    EXPECT_EQ(h.drops(c.reason), 1u) << "expected " << dp::drop_name(c.reason);
    EXPECT_EQ(h.drops_total(), 1u);
    EXPECT_EQ(h.counters().flows_created, 0u);
    EXPECT_TRUE(h.balanced());
  }
}

// The same martians in one burst with legitimate SYNs between them: only the martians go.
TEST(Martians, martians_in_a_burst_leave_the_legitimate_packets_of_that_burst_alone) {
  DataplaneHarness h(topology());
  const auto cases = martian_cases();
  std::vector<Bytes> burst;
  for (size_t i = 0; i < cases.size() && burst.size() < 30; ++i) {
    burst.push_back(cases[i].frame);
    burst.push_back(
        tcp_frame("192.0.2.1", uint16_t(2000 + i), "203.0.113.10", 80, pkt::kTcpSyn));
  }
  const size_t legit = burst.size() / 2;
  const auto out = h.send(burst, kT0);
  EXPECT_EQ(out.size(), legit);
  EXPECT_EQ(h.counters().flows_created, legit);
  EXPECT_EQ(h.drops_total(), legit);
  for (const auto& f : out) {
    const auto d = pkt::decode(f);
    EXPECT_EQ(d.src, A("192.0.2.1"));
    EXPECT_EQ(d.dport, 8080);
  }
  EXPECT_TRUE(h.balanced());
}

// A flow from a client keeps flowing: the checks run where a flow would start, not per packet of
// an established one; and the backend's replies (from a backend, to a client) are not martian.
TEST(Martians, an_established_flow_and_its_replies_are_not_affected) {
  DataplaneHarness h(topology());
  const auto out = h.send(tcp_frame("192.0.2.9", 40000, "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto fwd = pkt::decode(out[0]);
  const std::string be = fwd.dst.str();
  const auto back = h.send(tcp_frame(be.c_str(), 8080, "192.0.2.9", 40000,
                                     pkt::kTcpSyn | pkt::kTcpAck, 64,
                                     pkt::EthHdr{kGw, M("02:00:00:00:01:11")}),
                           kT0 + 1);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(pkt::decode(back[0]).src, A("203.0.113.10"));
  EXPECT_EQ(h.drops_total(), 0u);
}

// Next to the link-local and backend sources that are dropped: what still passes. A
// link-local neighbour is answered on its link (an echo request to the port address); an
// address just outside 169.254/16 and fe80::/10 is an ordinary client; a backend's address
// is a client of a service it does not serve; and a fullnat service carries its backends'
// hairpin, its source rewritten to a fullnat address.
TEST(Martians, link_local_on_its_link_and_a_backend_through_fullnat_pass) {
  const std::string cfg = topology() + R"(
[[service]]
name = "api"
vip = "203.0.113.20"
port = 443
protocol = "tcp"
mode = "fullnat"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
  [[service.backend]]
  address = "198.51.100.12"
  port = 8443
)";
  DataplaneHarness h(cfg);
  uint64_t ts = kT0;
  const auto echo = h.send(echo_request("169.254.3.3", "198.51.100.1"), ts++);
  ASSERT_EQ(echo.size(), 1u);
  EXPECT_EQ(pkt::decode(echo[0]).dst, A("169.254.3.3"));
  for (const char* src : {"169.253.255.255", "169.255.0.1", "fec0::1", "fe7f::1"}) {
    SCOPED_TRACE(src);
    const bool v6 = std::string(src).find(':') != std::string::npos;
    const auto out = h.send(
        tcp_frame(src, 1000, v6 ? "2001:db8:100::10" : "203.0.113.10", 80, pkt::kTcpSyn), ts++);
    EXPECT_EQ(out.size(), 1u);
  }
  // 198.51.100.13 is web's backend, not dns's.
  EXPECT_EQ(h.send(udp_frame("198.51.100.13", 4000, "203.0.113.10", 53), ts++).size(), 1u);
  for (uint16_t port = 40000; port < 40008; ++port) {
    const auto out = h.send(tcp_frame("198.51.100.11", port, "203.0.113.20", 443, pkt::kTcpSyn),
                            ts++);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    EXPECT_EQ(d.src, A("198.51.100.2"));  // the fullnat address
    EXPECT_EQ(d.dport, 8443);
  }
  EXPECT_EQ(h.drops_total(), 0u);
  EXPECT_TRUE(h.balanced());
}

// ARP: a sender claiming one of the gateway's addresses (or a subnet broadcast) is neither
// learned nor answered (Linux validates the sender like an IP source and stays silent too).
TEST(Martians, an_arp_request_from_a_sender_claiming_a_gateway_address_is_dropped) {
  struct Case {
    const char* spa;
    Drop reason;
  } cases[] = {{"198.51.100.2", Drop::kSourceIsLocal},
               {"198.51.100.1", Drop::kSourceIsLocal},
               {"198.51.100.255", Drop::kSourceIsBroadcast}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spa);
    DataplaneHarness h(topology());
    const auto a = test::arp_msg(1, M("02:00:00:00:0b:ad"), c.spa, MacAddr{}, "198.51.100.1");
    const auto out = h.send(pkt::build_arp({pkt::broadcast_mac(), a.sha}, a), kT0);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(h.drops(c.reason), 1u);
    EXPECT_EQ(h.counters().neighbors_learned, 0u);
    EXPECT_TRUE(h.balanced());
  }
}

// NDP likewise: a solicitation from one of our addresses is not answered, and an advertisement
// of one of our addresses (another node claiming it) is not learned.
TEST(Martians, neighbor_discovery_claiming_a_gateway_address_is_neither_answered_nor_learned) {
  DataplaneHarness h(topology());
  const IpAddr target = A("2001:db8:1::1");
  const MacAddr bad = M("02:00:00:00:0b:ad");
  const auto ns = pkt::build_ndp_ns({pkt::ipv6_multicast_mac(pkt::solicited_node(target)), bad},
                                    pkt::ndp_ip_hdr(A("2001:db8:1::2"), pkt::solicited_node(target)),
                                    target, bad);
  EXPECT_TRUE(h.send(ns, kT0).empty());
  EXPECT_EQ(h.drops(Drop::kSourceIsLocal), 1u);
  const auto na = pkt::build_ndp_na({kGw, bad}, pkt::ndp_ip_hdr(A("2001:db8:1::7"), target),
                                    A("2001:db8:1::2"), pkt::kNaOverride, bad);
  EXPECT_TRUE(h.send(na, kT0 + 1).empty());
  EXPECT_EQ(h.counters().consumed, 1u);
  EXPECT_EQ(h.counters().neighbors_learned, 0u);
  EXPECT_TRUE(h.balanced());
}

}  // namespace
}  // namespace meshgate
