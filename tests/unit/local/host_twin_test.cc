// A port's kernel twin (host_interface) as the workers see it: what goes to the twin's ring
// (WorkerParams::host_out) and what the gateway keeps answering itself, and what the kernel
// sends through the twin leaving by the port.
#include <gtest/gtest.h>

#include <algorithm>
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
using test::HarnessOptions;
using test::kDemoTopology;
using test::kGw;
using test::kRouter;
using test::kSec;
using test::kT0;
using test::kToGw;
using test::M;
using test::tcp_frame;

// The demo topology with a host interface on its port.
std::string with_twin() {
  std::string c = kDemoTopology;
  const std::string anchor = "addresses = [\"198.51.100.1/24\", \"2001:db8:1::1/64\"]\n";
  const size_t at = c.find(anchor);
  if (at == std::string::npos) throw std::runtime_error("demo topology changed");
  c.insert(at + anchor.size(), "host_interface = \"mg0\"\n");
  return c;
}

HarnessOptions twin_options(uint32_t ring = 64, uint16_t workers = 1) {
  HarnessOptions o;
  o.host_ring_size = ring;
  o.workers = workers;
  o.rss = workers > 1;
  return o;
}

TEST(HostTwin, tcp_to_a_port_address_goes_to_the_twin_unchanged) {
  DataplaneHarness h(with_twin(), twin_options());
  const Bytes syn = tcp_frame("192.0.2.7", 40000, "198.51.100.1", 179, pkt::kTcpSyn);
  EXPECT_TRUE(h.send(syn, kT0).empty());
  const auto host = h.take_host();
  ASSERT_EQ(host.size(), 1u);
  EXPECT_EQ(host[0].first, 0);
  EXPECT_EQ(host[0].second, syn);
  EXPECT_EQ(h.counters().host_out, 1u);
  EXPECT_EQ(h.drops_total(), 0u);
  EXPECT_EQ(h.counters().flows_created, 0u);  // the kernel's connection, not a flow of ours
  EXPECT_TRUE(h.balanced());
}

TEST(HostTwin, without_a_twin_the_same_packet_is_dropped_as_before) {
  DataplaneHarness h(kDemoTopology, twin_options());
  EXPECT_TRUE(h.send(tcp_frame("192.0.2.7", 40000, "198.51.100.1", 179, pkt::kTcpSyn), kT0).empty());
  EXPECT_TRUE(h.take_host().empty());
  EXPECT_EQ(h.drops(Drop::kLocalUnhandled), 1u);
}

TEST(HostTwin, the_gateway_still_answers_echo_and_serves_its_vips) {
  DataplaneHarness h(with_twin(), twin_options());
  pkt::IpHdr ip;
  ip.src = A("192.0.2.7");
  ip.dst = A("198.51.100.1");
  const auto echo = h.send(pkt::build_icmp_echo(kToGw, ip, false, 7, 1), kT0);
  ASSERT_EQ(echo.size(), 1u);
  EXPECT_EQ(pkt::decode(echo[0]).icmp_type, 0);  // echo reply
  const auto vip = h.send(tcp_frame("192.0.2.7", 40001, "203.0.113.10", 80, pkt::kTcpSyn), kT0 + 1);
  ASSERT_EQ(vip.size(), 1u);  // to a backend
  EXPECT_EQ(pkt::decode(vip[0]).dst.str().rfind("198.51.100.1", 0), 0u);
  EXPECT_TRUE(h.take_host().empty());
  EXPECT_TRUE(h.balanced());
}

TEST(HostTwin, arp_answers_reach_the_twin_and_requests_are_answered_here) {
  DataplaneHarness h(with_twin(), twin_options());
  const MacAddr peer = M("02:00:00:00:00:77");
  const Bytes reply = pkt::build_arp({kGw, peer},
                                     test::arp_msg(2, peer, "198.51.100.77", kGw, "198.51.100.1"));
  EXPECT_TRUE(h.send(reply, kT0).empty());
  EXPECT_EQ(h.counters().neighbors_learned, 1u);  // learned by the gateway too
  auto host = h.take_host();
  ASSERT_EQ(host.size(), 1u);
  EXPECT_EQ(host[0].second, reply);

  const Bytes request = pkt::build_arp(
      {pkt::broadcast_mac(), kRouter},
      test::arp_msg(1, kRouter, "198.51.100.254", MacAddr{}, "198.51.100.1"));
  const auto out = h.send(request, kT0 + 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(pkt::decode(out[0]).arp_op, 2);
  EXPECT_TRUE(h.take_host().empty());
}

TEST(HostTwin, neighbor_advertisements_and_solicitations_of_a_link_local_target_reach_the_twin) {
  DataplaneHarness h(with_twin(), twin_options());
  const MacAddr peer = M("02:00:00:00:00:77");
  const IpAddr peer_ip = A("2001:db8:1::77");
  const Bytes na = pkt::build_ndp_na({kGw, peer}, pkt::ndp_ip_hdr(peer_ip, A("2001:db8:1::1")),
                                     peer_ip, pkt::kNaSolicited | pkt::kNaOverride, peer);
  EXPECT_TRUE(h.send(na, kT0).empty());
  const IpAddr twin_ll = A("fe80::ff:fe00:1");
  const Bytes ns_ll = pkt::build_ndp_ns(
      {pkt::ipv6_multicast_mac(pkt::solicited_node(twin_ll)), kRouter},
      pkt::ndp_ip_hdr(A("fe80::fe"), pkt::solicited_node(twin_ll)), twin_ll, kRouter);
  EXPECT_TRUE(h.send(ns_ll, kT0 + 1).empty());
  const auto host = h.take_host();
  ASSERT_EQ(host.size(), 2u);
  EXPECT_EQ(host[0].second, na);
  EXPECT_EQ(host[1].second, ns_ll);
  // A global target that is not ours is still nobody's business here.
  const IpAddr other = A("2001:db8:1::99");
  h.send(pkt::build_ndp_ns({pkt::ipv6_multicast_mac(pkt::solicited_node(other)), kRouter},
                           pkt::ndp_ip_hdr(A("2001:db8:1::fe"), pkt::solicited_node(other)),
                           other, kRouter),
         kT0 + 2);
  EXPECT_TRUE(h.take_host().empty());
  EXPECT_EQ(h.drops(Drop::kNdpIgnored), 1u);
}

TEST(HostTwin, fragments_and_icmp_errors_to_a_port_address_reach_the_twin) {
  DataplaneHarness h(with_twin(), twin_options());
  pkt::IpHdr ip;
  ip.src = A("192.0.2.7");
  ip.dst = A("198.51.100.1");
  ip.id = 99;
  ip.mf = true;
  pkt::UdpHdr u;
  u.sport = 5000;
  u.dport = 6000;
  const Bytes first = pkt::build_udp(kToGw, ip, u, Bytes(64, 1));
  pkt::IpHdr later_ip = ip;
  later_ip.mf = false;
  later_ip.frag_offset = 9;  // 72 bytes: right after the first fragment's UDP header and data
  const Bytes later = pkt::build_ip(kToGw, later_ip, 17, Bytes(40, 3));
  // Port unreachable about a datagram the kernel sent from the port's address.
  pkt::IpHdr sent;
  sent.src = A("198.51.100.1");
  sent.dst = A("192.0.2.7");
  const Bytes quoted = pkt::build_udp({kRouter, kGw}, sent, u, Bytes(8, 2));
  pkt::IpHdr err_ip;
  err_ip.src = A("192.0.2.7");
  err_ip.dst = A("198.51.100.1");
  const Bytes err = pkt::build_icmp_error(kToGw, err_ip, 3, 3,
                                          std::span<const uint8_t>(quoted).subspan(14));
  EXPECT_TRUE(h.send({first, later, err}, kT0).empty());
  const auto host = h.take_host();
  ASSERT_EQ(host.size(), 3u);
  EXPECT_EQ(host[0].second, first);
  EXPECT_EQ(host[1].second, later);
  EXPECT_EQ(host[2].second, err);
  EXPECT_EQ(h.drops_total(), 0u);
}

// A health check's connection: the kernel behind the twin connects from the port's address to
// a backend of a service; the backend's answers must reach the kernel, not be taken for a
// stateless reply of a flow to the VIP (dropped as reply_no_flow) or handed round the workers.
TEST(HostTwin, a_backends_answer_to_a_port_address_reaches_the_twin_on_every_worker) {
  for (const uint16_t workers : {1, 2}) {
    SCOPED_TRACE(workers);
    DataplaneHarness h(with_twin(), twin_options(256, workers));
    std::vector<Bytes> answers;
    for (uint16_t i = 0; i < 16; ++i) {
      answers.push_back(tcp_frame("198.51.100.11", 8080, "198.51.100.1", uint16_t(40000 + i),
                                  pkt::kTcpSyn | pkt::kTcpAck));
    }
    answers.push_back(tcp_frame("2001:db8:1::12", 8080, "2001:db8:1::1", 40100,
                                pkt::kTcpRst | pkt::kTcpAck));
    EXPECT_TRUE(h.send(answers, kT0).empty());
    const auto host = h.take_host();
    ASSERT_EQ(host.size(), answers.size());
    // Unchanged, whichever worker took each (their order across workers is not kept).
    std::vector<Bytes> got;
    for (const auto& [port, frame] : host) got.push_back(frame);
    for (const Bytes& a : answers) {
      const auto it = std::find(got.begin(), got.end(), a);
      ASSERT_NE(it, got.end()) << "an answer did not reach the twin unchanged";
      got.erase(it);
    }
    EXPECT_EQ(h.drops_total(), 0u);
    EXPECT_EQ(h.counters().flows_created, 0u);
    EXPECT_TRUE(h.balanced());
  }
}

TEST(HostTwin, without_a_twin_a_backends_packet_to_a_port_address_is_still_dropped) {
  DataplaneHarness h(kDemoTopology, twin_options());
  EXPECT_TRUE(h.send(tcp_frame("198.51.100.11", 8080, "198.51.100.1", 40000,
                               pkt::kTcpSyn | pkt::kTcpAck),
                     kT0)
                  .empty());
  EXPECT_TRUE(h.take_host().empty());
  EXPECT_EQ(h.drops(Drop::kReplyNoFlow), 1u);
}

TEST(HostTwin, what_the_kernel_sends_leaves_by_the_port_as_it_is) {
  DataplaneHarness h(with_twin(), twin_options());
  const Bytes out = tcp_frame("198.51.100.1", 179, "198.51.100.254", 40000,
                              pkt::kTcpSyn | pkt::kTcpAck, 64, {kRouter, kGw});
  h.from_host(0, {out});
  const auto sent = h.tick(kT0);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0], out);
  EXPECT_EQ(h.counters().host_in, 1u);
  EXPECT_TRUE(h.balanced());
}

TEST(HostTwin, a_full_ring_is_counted_and_never_waited_for) {
  DataplaneHarness h(with_twin(), twin_options(4));  // holds 3
  std::vector<Bytes> syns;
  for (uint16_t i = 0; i < 5; ++i) {
    syns.push_back(tcp_frame("192.0.2.7", uint16_t(40000 + i), "198.51.100.1", 22, pkt::kTcpSyn));
  }
  EXPECT_TRUE(h.send(syns, kT0).empty());
  EXPECT_EQ(h.take_host().size(), 3u);
  EXPECT_EQ(h.counters().host_out, 3u);
  EXPECT_EQ(h.drops(Drop::kHostQueueFull), 2u);
  EXPECT_TRUE(h.balanced());
}

TEST(HostTwin, every_worker_gives_the_twin_its_share) {
  DataplaneHarness h(with_twin(), twin_options(256, 2));
  std::vector<Bytes> syns;
  for (uint16_t i = 0; i < 64; ++i) {
    syns.push_back(tcp_frame("192.0.2.7", uint16_t(40000 + i), "198.51.100.1", 22, pkt::kTcpSyn));
  }
  h.send(syns, kT0);
  EXPECT_EQ(h.take_host().size(), 64u);
  EXPECT_GT(h.counters_of(0).host_out, 0u);
  EXPECT_GT(h.counters_of(1).host_out, 0u);
  EXPECT_TRUE(h.balanced());
}

}  // namespace
}  // namespace meshgate
