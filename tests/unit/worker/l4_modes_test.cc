// Forwarding modes, ICMP error translation, fragments, backend removal and multi-worker flow
// ownership, through the real worker burst functions (net_ring ports, see dp_harness.h).
#include <gtest/gtest.h>

#include <map>
#include <cstring>
#include <set>

#include "dataplane/nat/icmp_error.h"
#include "dataplane/packet/wire.h"
#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/checksum.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using dp::Drop;
using pkt::Bytes;
using test::A;
using test::DataplaneHarness;
using test::HarnessOptions;
using test::kGw;
using test::kRouter;
using test::kT0;
using test::kToGw;
using test::M;
using test::tcp_frame;
using test::udp_frame;

// One port, every mode, both families. Backends 198.51.100.11-14 / 2001:db8:1::11-12 on link.
const std::string kModes = R"(
[[port]]
name = "net0"
device = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
[[route]]
prefix = "::/0"
via = "2001:db8:1::fe"
[fullnat]
local_addresses = ["198.51.100.2", "2001:db8:1::2"]
[[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:00:fe"
[[neighbor]]
address = "2001:db8:1::fe"
mac = "02:00:00:00:00:fe"
[[neighbor]]
address = "198.51.100.11"
mac = "02:00:00:00:01:11"
[[neighbor]]
address = "198.51.100.12"
mac = "02:00:00:00:01:12"
[[neighbor]]
address = "198.51.100.13"
mac = "02:00:00:00:01:13"
[[neighbor]]
address = "198.51.100.14"
mac = "02:00:00:00:01:14"
[[neighbor]]
address = "2001:db8:1::11"
mac = "02:00:00:00:01:61"
[[neighbor]]
address = "2001:db8:1::12"
mac = "02:00:00:00:01:62"

[[service]]
name = "dnat"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
  [[service.backend]]
  address = "198.51.100.13"
  port = 8080
  [[service.backend]]
  address = "198.51.100.14"
  port = 8080
[[service]]
name = "fullnat"
vip = "203.0.113.11"
port = 80
mode = "fullnat"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "fullnat-udp"
vip = "203.0.113.11"
port = 53
protocol = "udp"
mode = "fullnat"
  [[service.backend]]
  address = "198.51.100.11"
  port = 5353
[[service]]
name = "ipip"
vip = "203.0.113.12"
port = 80
mode = "dsr-ipip"
  [[service.backend]]
  address = "198.51.100.11"
  port = 80
  [[service.backend]]
  address = "198.51.100.12"
  port = 80
[[service]]
name = "gue"
vip = "203.0.113.13"
port = 80
mode = "dsr-gue"
gue_port = 6080
  [[service.backend]]
  address = "198.51.100.11"
  port = 80
  [[service.backend]]
  address = "198.51.100.12"
  port = 80
[[service]]
name = "fullnat6"
vip = "2001:db8:100::11"
port = 80
mode = "fullnat"
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
  [[service.backend]]
  address = "2001:db8:1::12"
  port = 8080
[[service]]
name = "ipip6"
vip = "2001:db8:100::12"
port = 80
mode = "dsr-ipip"
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 80
[[service]]
name = "gue6"
vip = "2001:db8:100::13"
port = 80
mode = "dsr-gue"
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 80
)";

const std::map<std::string, MacAddr> kMac = {
    {"198.51.100.11", M("02:00:00:00:01:11")}, {"198.51.100.12", M("02:00:00:00:01:12")},
    {"198.51.100.13", M("02:00:00:00:01:13")}, {"198.51.100.14", M("02:00:00:00:01:14")},
    {"2001:db8:1::11", M("02:00:00:00:01:61")}, {"2001:db8:1::12", M("02:00:00:00:01:62")}};

pkt::EthHdr from(const std::string& ip) { return {kGw, kMac.at(ip)}; }

void expect_valid(const Bytes& f) {
  const auto r = pkt::verify_checksums(f);
  EXPECT_NE(r.ipv4, pkt::CsumState::kInvalid);
  EXPECT_NE(r.l4, pkt::CsumState::kInvalid);
}

// ---- fullnat ---------------------------------------------------------------------------------

TEST(Fullnat, both_directions_translate_source_and_destination_in_both_families) {
  struct Case {
    const char* client;
    const char* vip;
    const char* local;
  } cases[] = {{"192.0.2.5", "203.0.113.11", "198.51.100.2"},
               {"2001:db8:2::5", "2001:db8:100::11", "2001:db8:1::2"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.vip);
    DataplaneHarness h(kModes);
    const auto out = h.send(tcp_frame(c.client, 40000, c.vip, 80, pkt::kTcpSyn), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    ASSERT_TRUE(d.ok()) << d.error;
    EXPECT_EQ(d.src.str(), c.local);
    EXPECT_GE(d.sport, dp::kFullnatFirstPort);
    EXPECT_EQ(d.dport, 8080);
    EXPECT_EQ(d.eth_dst, kMac.at(d.dst.str()));
    EXPECT_EQ(d.ttl, 63);
    expect_valid(out[0]);
    const std::string backend = d.dst.str();
    const uint16_t lport = d.sport;
    const auto rep = h.send(tcp_frame(backend.c_str(), 8080, c.local, lport,
                                      pkt::kTcpSyn | pkt::kTcpAck, 64, from(backend)),
                            kT0 + 1);
    ASSERT_EQ(rep.size(), 1u);
    const auto r = pkt::decode(rep[0]);
    EXPECT_EQ(r.src.str(), c.vip);
    EXPECT_EQ(r.sport, 80);
    EXPECT_EQ(r.dst.str(), c.client);
    EXPECT_EQ(r.dport, 40000);
    EXPECT_EQ(r.eth_dst, kRouter);
    expect_valid(rep[0]);
    // Later client packets reuse the same source port.
    const auto again = h.send(tcp_frame(c.client, 40000, c.vip, 80, pkt::kTcpAck), kT0 + 2);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(pkt::decode(again[0]).sport, lport);
  }
}

TEST(Fullnat, source_ports_are_unique_per_backend_and_the_local_address_answers_arp_and_ping) {
  DataplaneHarness h(kModes, 1 << 14);
  std::set<std::pair<std::string, uint16_t>> seen;
  for (int i = 0; i < 3000; ++i) {
    const std::string client = "192.0.2." + std::to_string(1 + i % 200);
    const auto out = h.send(tcp_frame(client.c_str(), uint16_t(20000 + i), "203.0.113.11", 80, pkt::kTcpSyn), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    EXPECT_TRUE(seen.insert({d.dst.str(), d.sport}).second) << "port reused toward " << d.dst.str();
  }
  pkt::ArpHdr a;
  a.op = 1;
  a.sha = kRouter;
  a.spa = A("198.51.100.254");
  a.tpa = A("198.51.100.2");
  ASSERT_EQ(h.send(pkt::build_arp({pkt::broadcast_mac(), kRouter}, a), kT0).size(), 1u);
  pkt::IpHdr ip;
  ip.src = A("192.0.2.9");
  ip.dst = A("198.51.100.2");
  const auto echo = h.send(pkt::build_icmp_echo(kToGw, ip, false, 1, 1), kT0);
  ASSERT_EQ(echo.size(), 1u);
  EXPECT_EQ(pkt::decode(echo[0]).icmp_type, pkt::kIcmpEchoReply);
}

TEST(Fullnat, a_flow_dump_shows_the_local_source_the_mode_and_the_age) {
  using test::kSec;
  DataplaneHarness h(kModes);
  const auto out = h.send(tcp_frame("192.0.2.5", 40000, "203.0.113.11", 80, pkt::kTcpSyn), kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  ASSERT_EQ(h.send(tcp_frame("192.0.2.6", 40001, "203.0.113.10", 80, pkt::kTcpSyn), kT0 + 2 * kSec).size(), 1u);
  h.tick(kT0 + 3 * kSec + 250'000'000);
  std::vector<dp::FlowRecord> recs(4);
  dp::FlowDumpRequest req;
  req.records = recs.data();
  req.max = 4;
  ASSERT_TRUE(h.worker().post_flow_dump(&req));
  h.tick(kT0 + 3 * kSec + 250'000'000);
  ASSERT_TRUE(req.done.load());
  ASSERT_EQ(req.count, 2u);
  std::map<std::string, dp::FlowRecord> by_client;
  for (uint32_t i = 0; i < req.count; ++i) by_client[recs[i].client.str()] = recs[i];
  const dp::FlowRecord& fn = by_client.at("192.0.2.5");
  EXPECT_EQ(fn.mode, dp::Mode::kFullnat);
  EXPECT_EQ(fn.local.str(), "198.51.100.2");
  EXPECT_EQ(fn.local_port, d.sport) << "the source port the backend saw";
  EXPECT_EQ(fn.backend, d.dst);
  EXPECT_EQ(fn.age_ms, 3250u) << "worker clock since the first packet";
  const dp::FlowRecord& dn = by_client.at("192.0.2.6");
  EXPECT_EQ(dn.mode, dp::Mode::kDnat);
  EXPECT_EQ(dn.local_port, 0);
  EXPECT_EQ(dn.age_ms, 1250u);
}

TEST(Fullnat, udp_request_and_response) {
  DataplaneHarness h(kModes);
  const auto out = h.send(udp_frame("192.0.2.7", 3333, "203.0.113.11", 53), kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  EXPECT_EQ(d.src.str(), "198.51.100.2");
  EXPECT_EQ(d.dst.str(), "198.51.100.11");
  EXPECT_EQ(d.dport, 5353);
  expect_valid(out[0]);
  const auto rep = h.send(udp_frame("198.51.100.11", 5353, "198.51.100.2", d.sport, from("198.51.100.11")), kT0 + 1);
  ASSERT_EQ(rep.size(), 1u);
  const auto r = pkt::decode(rep[0]);
  EXPECT_EQ(r.src.str(), "203.0.113.11");
  EXPECT_EQ(r.sport, 53);
  EXPECT_EQ(r.dst.str(), "192.0.2.7");
  EXPECT_EQ(r.dport, 3333);
  expect_valid(rep[0]);
}

TEST(Fullnat, a_reply_to_an_unused_source_port_is_reply_no_flow) {
  DataplaneHarness h(kModes);
  h.send(tcp_frame("198.51.100.11", 8080, "198.51.100.2", 5000, pkt::kTcpAck, 64, from("198.51.100.11")), kT0);
  EXPECT_EQ(h.drops(Drop::kReplyNoFlow), 1u);
}

// ---- DSR ---------------------------------------------------------------------------------

TEST(Dsr, ipip_wraps_the_unchanged_packet_toward_the_backend_in_both_families) {
  struct Case {
    const char* client;
    const char* vip;
    const char* outer_src;
    uint8_t outer_proto;
  } cases[] = {{"192.0.2.5", "203.0.113.12", "198.51.100.1", dp::kProtoIpip},
               {"2001:db8:2::5", "2001:db8:100::12", "2001:db8:1::1", dp::kProtoIpv6}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.vip);
    DataplaneHarness h(kModes);
    const Bytes in = tcp_frame(c.client, 40000, c.vip, 80, pkt::kTcpSyn, 64, kToGw, 100);
    const auto out = h.send(in, kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto o = pkt::decode(out[0]);
    ASSERT_TRUE(o.ok()) << o.error;
    EXPECT_EQ(o.src.str(), c.outer_src);
    EXPECT_EQ(o.l4_proto, c.outer_proto);
    EXPECT_EQ(o.ttl, 64);
    EXPECT_EQ(o.eth_dst, kMac.at(o.dst.str()));
    EXPECT_EQ(pkt::verify_checksums(out[0]).ipv4 == pkt::CsumState::kInvalid, false);
    // The inner packet is the client's, TTL - 1, still to the VIP, checksums intact.
    Bytes inner(out[0].begin(), out[0].begin() + 14);
    inner.insert(inner.end(), out[0].begin() + long(o.l4_off), out[0].end());
    const bool v4 = std::string(c.vip).find(':') == std::string::npos;
    pkt::put16(&inner[12], v4 ? pkt::kEtherIpv4 : pkt::kEtherIpv6);
    const auto i = pkt::decode(inner);
    ASSERT_TRUE(i.ok()) << i.error;
    EXPECT_EQ(i.src.str(), c.client);
    EXPECT_EQ(i.dst.str(), c.vip);
    EXPECT_EQ(i.dport, 80);
    EXPECT_EQ(i.ttl, 63);
    EXPECT_EQ(i.payload_len, 100u);
    expect_valid(inner);
  }
}

TEST(Dsr, gue_uses_the_service_port_a_flow_stable_source_port_and_a_valid_ipv6_checksum) {
  DataplaneHarness h(kModes);
  std::set<uint16_t> sports;
  for (int i = 0; i < 50; ++i) {
    const auto out = h.send(tcp_frame("192.0.2.5", uint16_t(40000 + i), "203.0.113.13", 80, pkt::kTcpSyn), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto o = pkt::decode(out[0]);
    ASSERT_EQ(o.l4_proto, pkt::kProtoUdp);
    EXPECT_EQ(o.dport, 6080);
    EXPECT_GE(o.sport, 49152);
    EXPECT_EQ(o.udp_length, o.l4_len);
    EXPECT_EQ(out[0][o.payload_off] >> 4, 4) << "GUE variant 1: the inner IPv4 header follows";
    sports.insert(o.sport);
    const auto again = h.send(tcp_frame("192.0.2.5", uint16_t(40000 + i), "203.0.113.13", 80, pkt::kTcpAck), kT0);
    EXPECT_EQ(pkt::decode(again.at(0)).sport, o.sport) << "same flow, same outer source port";
  }
  EXPECT_GT(sports.size(), 40u) << "flows spread over source ports";
  const auto v6 = h.send(tcp_frame("2001:db8:2::5", 40000, "2001:db8:100::13", 80, pkt::kTcpSyn), kT0);
  ASSERT_EQ(v6.size(), 1u);
  const auto o6 = pkt::decode(v6[0]);
  EXPECT_EQ(o6.dport, 6080);
  EXPECT_EQ(pkt::verify_checksums(v6[0]).l4, pkt::CsumState::kValid) << "UDP over IPv6 checksum";
}

TEST(Dsr, a_packet_too_big_for_the_tunnel_gets_fragmentation_needed_with_the_tunnel_mtu) {
  DataplaneHarness h(kModes);
  // 1480 + 20 (outer IPv4) = 1500: fits. 1481: does not.
  pkt::IpHdr ip;
  ip.src = A("192.0.2.5");
  ip.dst = A("203.0.113.12");
  ip.df = true;
  pkt::TcpHdr t;
  t.sport = 40000;
  t.dport = 80;
  t.flags = pkt::kTcpAck;
  ASSERT_EQ(h.send(pkt::build_tcp(kToGw, ip, t, Bytes(1440, 1)), kT0).size(), 1u);
  const auto out = h.send(pkt::build_tcp(kToGw, ip, t, Bytes(1441, 1)), kT0 + 1);
  ASSERT_EQ(out.size(), 1u);
  const auto e = pkt::decode(out[0]);
  ASSERT_TRUE(e.ok()) << e.error;
  EXPECT_EQ(e.icmp_type, pkt::kIcmpDestUnreachable);
  EXPECT_EQ(e.icmp_code, 4);
  EXPECT_EQ(e.icmp_rest & 0xffff, 1480u);
  EXPECT_EQ(e.dst.str(), "192.0.2.5");
  EXPECT_EQ(e.eth_dst, kRouter);
  expect_valid(out[0]);
  EXPECT_EQ(h.drops(Drop::kMtuExceeded), 1u);
  EXPECT_EQ(h.counters().icmp_errors_sent, 1u);
}

// ---- ICMP errors through the NAT -------------------------------------------------------------

// An ICMP error about `offending` (an IP packet) from `src` to `dst`, as a router would send it.
Bytes icmp_error(const char* src, const char* dst, const pkt::EthHdr& eth, const Bytes& frame,
                 uint8_t type, uint8_t code, uint32_t rest) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  const auto d = pkt::decode(frame);
  Bytes offending(frame.begin() + long(d.l3_off), frame.begin() + long(d.l3_off + d.ip_len));
  return pkt::build_icmp_error(eth, ip, type, code, offending, rest);
}

TEST(IcmpErrors, frag_needed_about_a_forwarded_packet_reaches_the_client_quoting_the_vip) {
  for (const char* vip : {"203.0.113.10", "203.0.113.11"}) {  // dnat, fullnat
    SCOPED_TRACE(vip);
    DataplaneHarness h(kModes);
    const auto fwd = h.send(tcp_frame("192.0.2.5", 40000, vip, 80, pkt::kTcpAck, 64, kToGw, 200), kT0);
    ASSERT_EQ(fwd.size(), 1u);
    const auto f = pkt::decode(fwd[0]);
    // A router between the gateway and the backend cannot pass it on.
    const auto out = h.send(icmp_error("198.51.100.250", f.src.str().c_str(), {kGw, kRouter}, fwd[0],
                                       pkt::kIcmpDestUnreachable, 4, 1400),
                            kT0 + 1);
    ASSERT_EQ(out.size(), 1u);
    const auto e = pkt::decode(out[0]);
    ASSERT_TRUE(e.ok()) << e.error;
    EXPECT_EQ(e.dst.str(), "192.0.2.5");
    EXPECT_EQ(e.src.str(), "198.51.100.250") << "a router's address is kept";
    EXPECT_EQ(e.icmp_type, pkt::kIcmpDestUnreachable);
    EXPECT_EQ(e.icmp_rest & 0xffff, 1400u);
    EXPECT_EQ(e.eth_dst, kRouter);
    expect_valid(out[0]);
    // The quote is the packet as the client sent it (TTL aside).
    dp::PacketMeta m;
    ASSERT_EQ(dp::parse_packet(out[0].data(), uint32_t(out[0].size()), &m, true), Drop::kNone);
    dp::IcmpQuote q;
    ASSERT_TRUE(dp::parse_icmp_quote(out[0].data(), uint32_t(out[0].size()), m, &q));
    EXPECT_EQ(q.src.str(), "192.0.2.5");
    EXPECT_EQ(q.dst.str(), vip);
    EXPECT_EQ(ntohs(q.sport), 40000);
    EXPECT_EQ(ntohs(q.dport), 80);
    EXPECT_EQ(h.counters().icmp_errors_translated, 1u);
  }
}

TEST(IcmpErrors, an_error_from_the_backend_itself_comes_from_the_vip) {
  DataplaneHarness h(kModes);
  const auto fwd = h.send(udp_frame("192.0.2.5", 4000, "203.0.113.10", 80), kT0);
  // dnat service "dnat" is TCP: pick the fullnat UDP service instead for a port unreachable.
  const auto fwd2 = h.send(udp_frame("192.0.2.5", 4000, "203.0.113.11", 53), kT0);
  ASSERT_EQ(fwd2.size(), 1u);
  const auto f = pkt::decode(fwd2[0]);
  const auto out = h.send(icmp_error(f.dst.str().c_str(), f.src.str().c_str(), from(f.dst.str()),
                                     fwd2[0], pkt::kIcmpDestUnreachable, 3, 0),
                          kT0 + 1);
  ASSERT_EQ(out.size(), 1u);
  const auto e = pkt::decode(out[0]);
  EXPECT_EQ(e.src.str(), "203.0.113.11");
  EXPECT_EQ(e.dst.str(), "192.0.2.5");
  EXPECT_EQ(e.icmp_code, 3);
  expect_valid(out[0]);
  (void)fwd;
}

TEST(IcmpErrors, packet_too_big_about_a_reply_reaches_the_backend_quoting_what_it_sent) {
  for (const char* vip : {"2001:db8:100::11"}) {  // fullnat, IPv6
    DataplaneHarness h(kModes);
    const auto fwd = h.send(tcp_frame("2001:db8:2::5", 40000, vip, 80, pkt::kTcpSyn), kT0);
    const auto f = pkt::decode(fwd.at(0));
    const std::string backend = f.dst.str();
    const auto rep = h.send(tcp_frame(backend.c_str(), 8080, f.src.str().c_str(), f.sport,
                                      pkt::kTcpAck, 64, from(backend), 1200),
                            kT0 + 1);
    ASSERT_EQ(rep.size(), 1u);
    // A router toward the client sends packet too big to the source of the reply (the VIP).
    const auto out = h.send(icmp_error("2001:db8:2::fe", vip, kToGw, rep[0], pkt::kIcmp6PacketTooBig, 0, 1280),
                            kT0 + 2);
    ASSERT_EQ(out.size(), 1u);
    const auto e = pkt::decode(out[0]);
    ASSERT_TRUE(e.ok()) << e.error;
    EXPECT_EQ(e.dst.str(), backend);
    EXPECT_EQ(e.src.str(), "2001:db8:1::2") << "fullnat: from the local address";
    EXPECT_EQ(e.icmp_type, pkt::kIcmp6PacketTooBig);
    EXPECT_EQ(e.icmp_rest, 1280u);
    EXPECT_EQ(e.eth_dst, kMac.at(backend));
    expect_valid(out[0]);
    dp::PacketMeta m;
    ASSERT_EQ(dp::parse_packet(out[0].data(), uint32_t(out[0].size()), &m, true), Drop::kNone);
    dp::IcmpQuote q;
    ASSERT_TRUE(dp::parse_icmp_quote(out[0].data(), uint32_t(out[0].size()), m, &q));
    EXPECT_EQ(q.src.str(), backend);
    EXPECT_EQ(ntohs(q.sport), 8080);
    EXPECT_EQ(q.dst.str(), "2001:db8:1::2");
    EXPECT_EQ(ntohs(q.dport), f.sport);
  }
}

TEST(IcmpErrors, an_error_quoting_no_tracked_flow_is_dropped_and_named) {
  DataplaneHarness h(kModes);
  const Bytes stray = tcp_frame("192.0.2.77", 1, "198.51.100.13", 8080, pkt::kTcpAck);
  h.send(icmp_error("198.51.100.250", "192.0.2.77", {kGw, kRouter}, stray, 3, 1, 0), kT0);
  EXPECT_EQ(h.drops(Drop::kIcmpErrorNoFlow), 1u);
}

TEST(IcmpErrors, ttl_expiry_toward_a_service_is_answered_with_time_exceeded) {
  DataplaneHarness h(kModes);
  const Bytes in = tcp_frame("192.0.2.5", 40000, "203.0.113.10", 80, pkt::kTcpSyn, 1);
  const auto out = h.send(in, kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto e = pkt::decode(out[0]);
  EXPECT_EQ(e.icmp_type, pkt::kIcmpTimeExceeded);
  EXPECT_EQ(e.src.str(), "198.51.100.1");
  EXPECT_EQ(e.dst.str(), "192.0.2.5");
  EXPECT_EQ(h.drops(Drop::kTtlExceeded), 1u);
  EXPECT_EQ(h.counters().flows_created, 0u);
  EXPECT_TRUE(h.balanced());
}

TEST(IcmpErrors, errors_the_gateway_sends_are_rate_limited) {
  DataplaneHarness h(kModes);
  std::vector<Bytes> burst;
  for (int i = 0; i < 32; ++i) {
    burst.push_back(tcp_frame("192.0.2.5", uint16_t(40000 + i), "203.0.113.10", 80, pkt::kTcpSyn, 1));
  }
  uint64_t sent = 0;
  for (int round = 0; round < 4; ++round) sent += h.send(burst, kT0).size();  // same instant
  EXPECT_EQ(sent, dp::kIcmpErrorBurst);
  EXPECT_EQ(h.counters().icmp_rate_limited, 128u - dp::kIcmpErrorBurst);
  // A second later the bucket has refilled.
  EXPECT_EQ(h.send(burst, kT0 + test::kSec).size(), 32u);
}

// ---- fragments ---------------------------------------------------------------------------

TEST(Fragments, later_fragments_follow_their_first_fragment_in_both_directions) {
  DataplaneHarness h(kModes);
  pkt::IpHdr ip;
  ip.src = A("192.0.2.5");
  ip.dst = A("203.0.113.11");  // fullnat-udp
  ip.id = 0x4242;
  ip.mf = true;
  pkt::UdpHdr u;
  u.sport = 5555;
  u.dport = 53;
  const Bytes datagram = pkt::udp_datagram(ip.src, ip.dst, u, Bytes(64, 7));
  const Bytes first = pkt::build_ip(kToGw, ip, pkt::kProtoUdp, std::span(datagram).first(40));
  ip.mf = false;
  ip.frag_offset = 5;
  const Bytes rest = pkt::build_ip(kToGw, ip, pkt::kProtoUdp, std::span(datagram).subspan(40));
  const auto o1 = h.send(first, kT0);
  const auto o2 = h.send(rest, kT0 + 1);
  ASSERT_EQ(o1.size(), 1u);
  ASSERT_EQ(o2.size(), 1u);
  const auto d1 = pkt::decode(o1[0]), d2 = pkt::decode(o2[0]);
  EXPECT_EQ(d1.dst.str(), "198.51.100.11");
  EXPECT_EQ(d2.dst.str(), "198.51.100.11");
  EXPECT_EQ(d2.src.str(), "198.51.100.2") << "fullnat rewrites the source of later fragments too";
  EXPECT_EQ(d2.frag_offset, 5);
  EXPECT_EQ(d2.ttl, 63);
  EXPECT_EQ(pkt::verify_checksums(o2[0]).ipv4, pkt::CsumState::kValid);
  EXPECT_EQ(h.counters().fragments_followed, 1u);
  // The reassembled datagram's UDP checksum is still right: join the two payloads.
  Bytes joined(o1[0].begin() + long(d1.l4_off), o1[0].begin() + long(d1.l4_off + d1.l4_len));
  joined.insert(joined.end(), o2[0].begin() + long(d2.l4_off), o2[0].begin() + long(d2.l4_off + d2.l4_len));
  EXPECT_TRUE(pkt::csum_valid(joined, pkt::pseudo_header_sum(d1.src, d1.dst, pkt::kProtoUdp,
                                                              uint32_t(joined.size()))));
  // The backend's fragmented response comes back translated the same way.
  pkt::IpHdr rip;
  rip.src = A("198.51.100.11");
  rip.dst = A("198.51.100.2");
  rip.id = 0x777;
  rip.mf = true;
  pkt::UdpHdr ru;
  ru.sport = 5353;
  ru.dport = d1.sport;
  const Bytes rdg = pkt::udp_datagram(rip.src, rip.dst, ru, Bytes(64, 9));
  const auto r1 = h.send(pkt::build_ip(from("198.51.100.11"), rip, pkt::kProtoUdp, std::span(rdg).first(40)), kT0 + 2);
  rip.mf = false;
  rip.frag_offset = 5;
  const auto r2 = h.send(pkt::build_ip(from("198.51.100.11"), rip, pkt::kProtoUdp, std::span(rdg).subspan(40)), kT0 + 3);
  ASSERT_EQ(r1.size(), 1u);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(pkt::decode(r2[0]).src.str(), "203.0.113.11");
  EXPECT_EQ(pkt::decode(r2[0]).dst.str(), "192.0.2.5");
}

// A second first fragment of the same datagram (source, destination, protocol, IP id) with
// other ports would start a second flow, and the later fragments would follow whichever came
// last: one datagram split between two backends (or services). The second is dropped, the
// later fragments follow the first; the first repeated as it was (a duplicate on the wire)
// still goes its flow's way.
TEST(Fragments, a_first_fragment_again_with_other_ports_is_dropped_and_the_rest_follow_the_first) {
  DataplaneHarness h(kModes);
  pkt::IpHdr ip;
  ip.src = A("192.0.2.5");
  ip.dst = A("203.0.113.11");  // fullnat-udp
  ip.id = 0x4343;
  ip.mf = true;
  auto first_of = [&](uint16_t sport) {
    pkt::UdpHdr u;
    u.sport = sport;
    u.dport = 53;
    const Bytes datagram = pkt::udp_datagram(ip.src, ip.dst, u, Bytes(64, 7));
    return pkt::build_ip(kToGw, ip, pkt::kProtoUdp, std::span(datagram).first(40));
  };
  const auto o1 = h.send(first_of(5555), kT0);
  ASSERT_EQ(o1.size(), 1u);
  const auto d1 = pkt::decode(o1[0]);
  for (uint16_t sport = 6000; sport < 6016; ++sport) {
    EXPECT_TRUE(h.send(first_of(sport), kT0 + 1).empty()) << sport;
  }
  EXPECT_EQ(h.drops(Drop::kFragmentDuplicateFirst), 16u);
  EXPECT_EQ(h.counters().flows_created, 1u);
  const auto again = h.send(first_of(5555), kT0 + 2);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(pkt::decode(again[0]).dst, d1.dst);
  EXPECT_EQ(pkt::decode(again[0]).sport, d1.sport);
  pkt::IpHdr later = ip;
  later.mf = false;
  later.frag_offset = 5;
  const auto o2 = h.send(pkt::build_ip(kToGw, later, pkt::kProtoUdp, Bytes(32, 7)), kT0 + 3);
  ASSERT_EQ(o2.size(), 1u);
  EXPECT_EQ(pkt::decode(o2[0]).dst, d1.dst);
  EXPECT_EQ(h.counters().fragments_followed, 1u);
  EXPECT_EQ(h.drops_total(), 16u);
  EXPECT_TRUE(h.balanced());
}

TEST(Fragments, a_later_fragment_without_its_first_is_fragment_no_first) {
  DataplaneHarness h(kModes);
  pkt::IpHdr ip;
  ip.src = A("192.0.2.5");
  ip.dst = A("203.0.113.10");
  ip.frag_offset = 5;
  h.send(pkt::build_ip(kToGw, ip, pkt::kProtoTcp, Bytes(40, 1)), kT0);
  EXPECT_EQ(h.drops(Drop::kFragmentNoFirst), 1u);
}

// ---- the established-flow fast path in every mode ----------------------------------------------

// Two workers fed the same traffic: `fast` as it comes, `stages` with a frame for another MAC
// appended to each burst (dropped at parse, touching nothing, it sends the whole burst through
// the stages). Each burst must leave both the same: frames, counters, backend counters, flows.
struct FastAndStages {
  explicit FastAndStages(const std::string& cfg) : fast(cfg), stages(cfg) {
    other_mac = tcp_frame("192.0.2.250", 1, "203.0.113.10", 80, pkt::kTcpAck);
    other_mac[5] = 0x99;
  }
  // Sends `burst` to both and checks they agree; returns what left.
  std::vector<Bytes> send(const std::vector<Bytes>& burst) {
    t += 1'000'000;  // a millisecond: expiries move
    std::vector<Bytes> with_other = burst;
    with_other.push_back(other_mac);
    const auto out = fast.send(burst, t);
    EXPECT_EQ(out, stages.send(with_other, t));
    expect_same();
    return out;
  }
  // The fast path takes `burst` (after the backoff of earlier bursts it left has run out).
  void send_fast(const std::vector<Bytes>& burst) {
    for (int i = 0; i < 40; ++i) {
      const uint64_t before = fast.counters().fast_path_packets;
      const auto out = send(burst);
      if (fast.counters().fast_path_packets == before) continue;
      EXPECT_EQ(fast.counters().fast_path_packets, before + burst.size());
      EXPECT_EQ(out.size(), burst.size());
      for (const Bytes& f : out) expect_valid(f);
      return;
    }
    ADD_FAILURE() << "the fast path never took the burst";
  }
  void expect_same() {
    EXPECT_EQ(stages.counters().fast_path_packets, 0u);
    EXPECT_EQ(fast.counters().tx_packets, stages.counters().tx_packets);
    EXPECT_EQ(fast.counters().tx_bytes, stages.counters().tx_bytes);
    EXPECT_EQ(fast.counters().flows_created, stages.counters().flows_created);
    EXPECT_EQ(fast.drops_total() + 1 * bursts_to_stages(), stages.drops_total());
    EXPECT_EQ(std::memcmp(fast.worker().backend_counters(), stages.worker().backend_counters(),
                          sizeof(dp::BackendCounters) * dp::kMaxBackendStats),
              0);
    test::expect_same_flows(fast.worker().flows(), stages.worker().flows());
  }
  uint64_t bursts_to_stages() const { return stages.drops(Drop::kL2NotForUs); }

  DataplaneHarness fast;
  DataplaneHarness stages;
  Bytes other_mac;
  uint64_t t = kT0;
};

// A TCP segment from `src` to `dst` with the given flags, TTL, payload and options.
Bytes segment(const std::string& src, uint16_t sport, const std::string& dst, uint16_t dport,
              uint8_t flags, uint8_t ttl = 64, size_t payload = 0, const Bytes& options = {},
              const pkt::EthHdr& eth = kToGw) {
  pkt::IpHdr ip;
  ip.src = A(src.c_str());
  ip.dst = A(dst.c_str());
  ip.ttl = ttl;
  ip.df = payload & 1;
  ip.id = uint16_t(sport * 7);
  pkt::TcpHdr t;
  t.sport = sport;
  t.dport = dport;
  t.seq = 1000u + sport;
  t.ack = 7u;
  t.flags = flags;
  t.options = options;
  return pkt::build_tcp(eth, ip, t, Bytes(payload, uint8_t(sport)));
}

Bytes syn_options() {
  pkt::TcpOptions o;
  o.mss = 1460;
  o.wscale = 7;
  o.sack_permitted = true;
  o.ts_val = 99;
  return pkt::tcp_options(o);
}

// Established flows of every mode in both families (kModes with the services below), and
// frames of each: client data, backend replies (dnat, fullnat), UDP both ways (fullnat, IPv6
// dnat), and the packets that change a live flow's state: a repeated SYN (with a SYN's
// options), FIN, RST.
const char* const kDnat6 = R"(
[[service]]
name = "dnat6"
vip = "2001:db8:100::10"
port = 80
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
  [[service.backend]]
  address = "2001:db8:1::12"
  port = 8080
[[service]]
name = "dnat6-udp"
vip = "2001:db8:100::10"
port = 53
protocol = "udp"
  [[service.backend]]
  address = "2001:db8:1::12"
  port = 5353
)";

struct ModeFlows {
  static constexpr int kKinds = 8;  // dnat, fullnat, ipip, gue; then the same over IPv6
  std::vector<Bytes> by_kind[kKinds];
  std::vector<Bytes> est4, est6;   // all of by_kind's, per family
  std::vector<Bytes> state4, state6;  // SYN, FIN, RST of live flows

  explicit ModeFlows(FastAndStages& p) { build(p); }
  void build(FastAndStages& p) {
    const std::string vips[kKinds] = {"203.0.113.10",     "203.0.113.11",    "203.0.113.12",
                                      "203.0.113.13",     "2001:db8:100::10", "2001:db8:100::11",
                                      "2001:db8:100::12", "2001:db8:100::13"};
    for (int kind = 0; kind < kKinds; ++kind) {
      const std::string& vip = vips[kind];
      const bool v6 = kind >= 4;
      const int mode = kind % 4;
      const bool dsr = mode >= 2;
      // Headers, and the tunnel's in DSR: a data frame of `fit` bytes just fits the MTU.
      const size_t hdrs = (v6 ? 40 : 20) + 20;
      const size_t tunnel = mode == 2 ? (v6 ? 40 : 20) : mode == 3 ? (v6 ? 48 : 28) : 0;
      const size_t fit = 1500 - hdrs - tunnel;
      std::vector<Bytes>& state = v6 ? state6 : state4;
      for (int c = 0; c < 4; ++c) {
        const std::string client = v6 ? "2001:db8:2::" + std::to_string(20 + kind * 10 + c)
                                      : "192.0.2." + std::to_string(20 + kind * 10 + c);
        const uint16_t cport = uint16_t(40000 + kind * 100 + c);
        const auto out =
            p.send({segment(client, cport, vip, 80, pkt::kTcpSyn, 64, 0, syn_options())});
        ASSERT_EQ(out.size(), 1u) << vip;
        const auto o = pkt::decode(out[0]);
        if (!dsr) {
          // The backend's SYN-ACK: dnat to the client, fullnat to our source address and port.
          const std::string be = o.dst.str();
          const std::string to = o.src.str();
          const uint16_t to_port = o.sport;
          const auto rep = p.send({segment(be, 8080, to, to_port, pkt::kTcpSyn | pkt::kTcpAck,
                                           64, 0, syn_options(), from(be))});
          ASSERT_EQ(rep.size(), 1u) << vip;
          for (int k = 0; k < 2; ++k) {
            by_kind[kind].push_back(segment(be, 8080, to, to_port, pkt::kTcpAck | pkt::kTcpPsh,
                                            uint8_t(k ? 2 : 63), size_t(c * 13 + k), {},
                                            from(be)));
          }
        }
        p.send({segment(client, cport, vip, 80, pkt::kTcpAck)});
        // Client data: hop limit 2 for one, a frame that just fits the MTU for another.
        by_kind[kind].push_back(segment(client, cport, vip, 80, pkt::kTcpAck | pkt::kTcpPsh,
                                        uint8_t(c == 1 ? 2 : 64),
                                        c == 2 ? fit : size_t(1 + c * 37)));
        state.push_back(segment(client, cport, vip, 80, pkt::kTcpSyn, 64, 0, syn_options()));
        if (c == 0) {  // options in no layout the fast path matches: the parser's walk
          pkt::TcpOptions ws;
          ws.wscale = 2;
          state.push_back(segment(client, cport, vip, 80, pkt::kTcpSyn, 64, 0, pkt::tcp_options(ws)));
        }
        if (c == 1) {  // pcapgen's SYN: MSS, SACK permitted, window scale (no timestamps)
          pkt::TcpOptions o;
          o.mss = 1460;
          o.sack_permitted = true;
          o.wscale = 7;
          state.push_back(segment(client, cport, vip, 80, pkt::kTcpSyn, 64, 0, pkt::tcp_options(o)));
        }
        if (c == 3) state.push_back(segment(client, cport, vip, 80, pkt::kTcpFin | pkt::kTcpAck));
        if (c == 2 && mode == 1) state.push_back(segment(client, cport, vip, 80, pkt::kTcpRst));
      }
    }
    // UDP both ways: IPv4 fullnat (one with a checksum of zero), IPv6 dnat.
    const struct {
      const char* client;
      const char* vip;
      int kind;
      pkt::Csum csum;
    } udp[] = {{"192.0.2.70", "203.0.113.11", 1, pkt::Csum::kValid},
               {"192.0.2.71", "203.0.113.11", 1, pkt::Csum::kZero},
               {"2001:db8:2::70", "2001:db8:100::10", 4, pkt::Csum::kValid}};
    for (const auto& u : udp) {
      const Bytes req = udp_frame(u.client, 3000, u.vip, 53, kToGw, u.csum);
      const auto out = p.send({req});
      ASSERT_EQ(out.size(), 1u) << u.vip;
      const auto o = pkt::decode(out[0]);
      const Bytes rep = udp_frame(o.dst.str().c_str(), 5353, o.src.str().c_str(), o.sport,
                                  from(o.dst.str()), u.csum);
      ASSERT_EQ(p.send({rep}).size(), 1u);
      by_kind[u.kind].push_back(req);
      by_kind[u.kind].push_back(rep);
    }
    for (int kind = 0; kind < kKinds; ++kind) {
      std::vector<Bytes>& est = kind >= 4 ? est6 : est4;
      est.insert(est.end(), by_kind[kind].begin(), by_kind[kind].end());
    }
  }
};

std::string fast_modes(uint16_t gue_port = 6080) {
  std::string cfg = kModes;
  const std::string key = "gue_port = 6080";
  cfg.replace(cfg.find(key), key.size(), "gue_port = " + std::to_string(gue_port));
  return cfg + kDnat6;
}

// Each mode of each family alone (the fast path's variant for it) and all modes of a family
// mixed in one burst: the fast path's frames, counters and flows are the stages'.
TEST(FastPath, established_traffic_of_every_mode_and_family_gives_the_stages_result_to_the_byte) {
  FastAndStages p(fast_modes(7080));
  ModeFlows fl(p);
  for (int kind = 0; kind < ModeFlows::kKinds; ++kind) {
    SCOPED_TRACE(kind);
    p.send_fast(fl.by_kind[kind]);
  }
  for (const auto* est : {&fl.est4, &fl.est6}) {
    std::vector<Bytes> mixed;
    for (size_t j = 0; j < 31; ++j) mixed.push_back((*est)[(j * 7) % est->size()]);
    p.send_fast(mixed);
  }
  // GUE to the service's port: gue's own, gue6's the default.
  for (const auto& [kind, port] : {std::pair{3, 7080}, std::pair{7, 6080}}) {
    const auto gue = p.send(fl.by_kind[kind]);
    ASSERT_FALSE(gue.empty());
    EXPECT_EQ(pkt::decode(gue[0]).dport, port);
  }
  // A burst of both families: the fast path takes one family at a time, the stages this one.
  const uint64_t fast0 = p.fast.counters().fast_path_packets;
  p.send({fl.est6[0], fl.est4[0], fl.est6[1]});
  EXPECT_EQ(p.fast.counters().fast_path_packets, fast0);
}

// SYN (repeated, with options), FIN and RST of live flows take the fast path too: the flow's
// state moves as the stages move it, the packet goes to the flow's backend.
TEST(FastPath, syn_fin_and_rst_of_live_flows_give_the_stages_result_to_the_byte) {
  FastAndStages p(fast_modes());
  ModeFlows fl(p);
  const uint64_t created = p.fast.counters().flows_created;
  for (const auto& [state, est] : {std::pair{&fl.state4, &fl.est4}, std::pair{&fl.state6, &fl.est6}}) {
    std::vector<Bytes> burst = *state;
    for (size_t j = 0; burst.size() < 31; ++j) burst.push_back((*est)[(j * 5) % est->size()]);
    p.send_fast(burst);
    // And the flows go on (31 frames: the stages' variant gets one more in the same burst).
    p.send_fast(std::vector<Bytes>(est->begin(), est->begin() + 31));
  }
  EXPECT_EQ(p.fast.counters().flows_created, created);
}

// Linux conntrack keeps a connection and its NAT binding when a SYN arrives in ESTABLISHED;
// so does the gateway: same flow, same backend, no new flow, and the packet costs what an
// established one costs (the fast path takes it, and takes the bursts after it).
TEST(FastPath, a_syn_on_a_live_dnat_flow_keeps_the_flow_and_its_backend_on_the_fast_path) {
  FastAndStages p(kModes);
  std::vector<Bytes> acks, syns;
  std::vector<std::string> backend;
  for (int c = 0; c < 8; ++c) {
    const std::string client = "192.0.2." + std::to_string(100 + c);
    const uint16_t cport = uint16_t(50000 + c);
    const auto out = p.send({segment(client, cport, "203.0.113.10", 80, pkt::kTcpSyn)});
    ASSERT_EQ(out.size(), 1u);
    const std::string be = pkt::decode(out[0]).dst.str();
    backend.push_back(be);
    p.send({segment(be, 8080, client, cport, pkt::kTcpSyn | pkt::kTcpAck, 64, 0, {}, from(be))});
    p.send({segment(client, cport, "203.0.113.10", 80, pkt::kTcpAck)});
    acks.push_back(segment(client, cport, "203.0.113.10", 80, pkt::kTcpAck, 64, 100));
    syns.push_back(segment(client, cport, "203.0.113.10", 80, pkt::kTcpSyn, 64, 0, syn_options()));
  }
  p.send_fast(acks);  // past the backoff the handshakes left
  const uint64_t created = p.fast.counters().flows_created;
  const uint32_t active = p.fast.worker().flows().active();
  // One packet in four a SYN on a live flow, burst after burst.
  for (int round = 0; round < 4; ++round) {
    std::vector<Bytes> mix;
    for (int c = 0; c < 8; ++c) {
      mix.push_back(c % 4 == round ? syns[size_t(c)] : acks[size_t(c)]);
      mix.push_back(acks[size_t(c)]);
    }
    const uint64_t fast0 = p.fast.counters().fast_path_packets;
    const auto out = p.send(mix);
    EXPECT_EQ(p.fast.counters().fast_path_packets, fast0 + mix.size()) << round;
    ASSERT_EQ(out.size(), mix.size());
    for (size_t j = 0; j < out.size(); ++j) {
      EXPECT_EQ(pkt::decode(out[j]).dst.str(), backend[j / 2]) << "same backend";
    }
  }
  EXPECT_EQ(p.fast.counters().flows_created, created);
  EXPECT_EQ(p.fast.worker().flows().active(), active);
}

// The pipeline holds a full burst with SYNs once SYNs have been of live flows, and such a
// burst leaves exactly as the unpipelined worker sends it.
TEST(FastPath, a_pipelined_burst_with_syns_on_live_flows_is_held_and_leaves_unchanged) {
  HarnessOptions po;
  po.pipeline = true;
  DataplaneHarness piped(kModes, po), plain(kModes);
  uint64_t t = kT0;
  std::vector<Bytes> mix;
  for (int c = 0; c < 16; ++c) {
    const std::string client = "192.0.2." + std::to_string(100 + c);
    const uint16_t cport = uint16_t(50000 + c);
    const Bytes syn = segment(client, cport, "203.0.113.10", 80, pkt::kTcpSyn, 64, 0, syn_options());
    const auto out = plain.send(syn, t += 1000);
    ASSERT_EQ(piped.send(syn, t), out);
    const std::string be = pkt::decode(out.at(0)).dst.str();
    for (const Bytes& f : {segment(be, 8080, client, cport, pkt::kTcpSyn | pkt::kTcpAck, 64, 0, {}, from(be)),
                           segment(client, cport, "203.0.113.10", 80, pkt::kTcpAck)}) {
      t += 1000;
      ASSERT_EQ(piped.send(f, t), plain.send(f, t));
    }
    const Bytes ack = segment(client, cport, "203.0.113.10", 80, pkt::kTcpAck, 64, 10);
    mix.push_back(c % 4 == 0 ? syn : ack);
    mix.push_back(ack);
  }
  ASSERT_EQ(mix.size(), dp::kBurst);
  int held = 0;
  bool last_held = false;
  for (int round = 0; round < 24; ++round) {
    const auto want = plain.send(mix, t += 1'000'000);
    piped.inject(mix, t);
    auto out = piped.poll_each_once(t);
    last_held = out.empty();
    if (last_held) {
      ++held;
      out = piped.poll_each_once(t);
    }
    EXPECT_EQ(out, want) << round;
  }
  EXPECT_TRUE(last_held) << "held once SYNs were of live flows";
  EXPECT_GT(held, 12);
  EXPECT_EQ(piped.counters().flows_created, plain.counters().flows_created);
  test::expect_same_flows(piped.worker().flows(), plain.worker().flows());
  EXPECT_TRUE(piped.balanced());
}

// ---- backend removal and drain ---------------------------------------------------------------

std::string without_backend(std::string cfg, const std::string& addr, const std::string& svc_marker) {
  const auto svc = cfg.find(svc_marker);
  const std::string block = "  [[service.backend]]\n  address = \"" + addr + "\"\n  port = 8080\n";
  const auto pos = cfg.find(block, svc);
  if (pos == std::string::npos) throw std::runtime_error("backend not found");
  cfg.erase(pos, block.size());
  return cfg;
}

TEST(BackendChanges, removing_one_of_four_moves_no_flow_and_about_a_quarter_of_new_choices) {
  DataplaneHarness h(kModes, 1 << 17);
  constexpr int kFlows = 20000;
  std::vector<std::pair<std::string, uint16_t>> clients;
  std::map<std::pair<std::string, uint16_t>, std::string> before;
  for (int i = 0; i < kFlows; ++i) clients.push_back({"192.0.2." + std::to_string(1 + i % 250), uint16_t(10000 + i)});
  std::vector<Bytes> burst;
  auto flush = [&](uint64_t ts, std::vector<std::string>* dsts) {
    for (const auto& f : h.send(burst, ts)) dsts->push_back(pkt::decode(f).dst.str());
    burst.clear();
  };
  std::vector<std::string> first;
  for (const auto& [c, p] : clients) {
    burst.push_back(tcp_frame(c.c_str(), p, "203.0.113.10", 80, pkt::kTcpAck));
    if (burst.size() == dp::kBurst) flush(kT0, &first);
  }
  flush(kT0, &first);
  ASSERT_EQ(first.size(), size_t(kFlows));
  h.publish(without_backend(kModes, "198.51.100.14", "name = \"dnat\""));
  // Existing flows: every one keeps its backend, including those on the removed one.
  std::vector<std::string> again;
  for (const auto& [c, p] : clients) {
    burst.push_back(tcp_frame(c.c_str(), p, "203.0.113.10", 80, pkt::kTcpAck));
    if (burst.size() == dp::kBurst) flush(kT0 + 1, &again);
  }
  flush(kT0 + 1, &again);
  EXPECT_EQ(again, first);
  // New flows: would-be choices under the old table vs. the new one.
  DataplaneHarness ref(kModes, 1 << 17);
  std::vector<std::string> old_choice, new_choice;
  int moved = 0;
  for (int i = 0; i < kFlows; ++i) {
    const std::string c = "198.18." + std::to_string(i / 250) + "." + std::to_string(1 + i % 250);
    burst.push_back(tcp_frame(c.c_str(), 443, "203.0.113.10", 80, pkt::kTcpSyn));
    if (burst.size() == dp::kBurst) flush(kT0 + 2, &new_choice);
  }
  flush(kT0 + 2, &new_choice);
  for (int i = 0; i < kFlows; ++i) {
    const std::string c = "198.18." + std::to_string(i / 250) + "." + std::to_string(1 + i % 250);
    old_choice.push_back(pkt::decode(ref.send(tcp_frame(c.c_str(), 443, "203.0.113.10", 80, pkt::kTcpSyn), kT0).at(0)).dst.str());
  }
  ASSERT_EQ(new_choice.size(), old_choice.size());
  for (size_t i = 0; i < new_choice.size(); ++i) {
    moved += new_choice[i] != old_choice[i];
    EXPECT_NE(new_choice[i], "198.51.100.14");
  }
  const double frac = double(moved) / kFlows;
  std::printf("removing 1 of 4 backends moved %.2f%% of new-flow choices\n", 100 * frac);
  RecordProperty("moved_percent", std::to_string(100 * frac));
  EXPECT_NEAR(frac, 0.25, 0.03);
}

TEST(BackendChanges, a_service_that_resets_drops_the_next_packet_of_a_removed_backend_flow) {
  std::string cfg = kModes;
  cfg.replace(cfg.find("name = \"dnat\""), 13, "name = \"dnat\"\non_backend_removal = \"reset\"");
  DataplaneHarness h(cfg);
  const auto out = h.send(tcp_frame("192.0.2.5", 40000, "203.0.113.10", 80, pkt::kTcpAck), kT0);
  const std::string b = pkt::decode(out.at(0)).dst.str();
  h.publish(without_backend(cfg, b, "name = \"dnat\""));
  EXPECT_TRUE(h.send(tcp_frame("192.0.2.5", 40000, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 1).empty());
  EXPECT_EQ(h.drops(Drop::kBackendRemoved), 1u);
  // The client's retransmission starts over on a live backend (which resets the connection).
  const auto next = h.send(tcp_frame("192.0.2.5", 40000, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 2);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_NE(pkt::decode(next[0]).dst.str(), b);
  // Other backends' flows are untouched; with "keep" (the default) nothing would be dropped.
  EXPECT_EQ(h.counters().flows_created, 2u);
}

TEST(BackendChanges, weight_zero_drains_new_flows_and_keeps_existing_ones) {
  DataplaneHarness h(kModes, 1 << 14);
  std::map<uint16_t, std::string> flows;
  for (int i = 0; i < 400; ++i) {
    flows[uint16_t(30000 + i)] = pkt::decode(h.send(tcp_frame("192.0.2.8", uint16_t(30000 + i), "203.0.113.10", 80, pkt::kTcpAck), kT0).at(0)).dst.str();
  }
  std::string cfg = kModes;
  const std::string b11 = "  address = \"198.51.100.11\"\n  port = 8080\n";
  cfg.replace(cfg.find(b11), b11.size(), b11 + "  weight = 0\n");
  h.publish(cfg);
  for (const auto& [p, b] : flows) {
    EXPECT_EQ(pkt::decode(h.send(tcp_frame("192.0.2.8", p, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 1).at(0)).dst.str(), b);
  }
  for (int i = 0; i < 400; ++i) {
    EXPECT_NE(pkt::decode(h.send(tcp_frame("192.0.2.9", uint16_t(30000 + i), "203.0.113.10", 80, pkt::kTcpSyn), kT0 + 2).at(0)).dst.str(), "198.51.100.11");
  }
}

// ---- flow ownership across workers -----------------------------------------------------------

TEST(Ownership, with_two_workers_and_rss_every_reply_reaches_the_flow_owner) {
  for (const char* vip : {"203.0.113.10", "203.0.113.11"}) {  // dnat, fullnat
    SCOPED_TRACE(vip);
    DataplaneHarness h(kModes, HarnessOptions{1 << 14, 2, true});
    int translated = 0, replies_elsewhere = 0;
    for (int i = 0; i < 500; ++i) {
      const std::string client = "192.0.2." + std::to_string(1 + i % 250);
      const Bytes syn = tcp_frame(client.c_str(), uint16_t(20000 + i), vip, 80, pkt::kTcpSyn);
      const uint16_t owner = h.rss_queue(syn);
      const auto out = h.send(syn, kT0);
      ASSERT_EQ(out.size(), 1u);
      const auto d = pkt::decode(out[0]);
      if (std::string(vip) == "203.0.113.11") {
        EXPECT_EQ(d.sport % 2, owner) << "fullnat ports encode their owner";
      }
      const Bytes reply = tcp_frame(d.dst.str().c_str(), d.dport, d.src.str().c_str(), d.sport,
                                    pkt::kTcpSyn | pkt::kTcpAck, 64, from(d.dst.str()));
      replies_elsewhere += h.rss_queue(reply) != owner;
      const auto rep = h.send(reply, kT0 + 1);
      ASSERT_EQ(rep.size(), 1u);
      const auto r = pkt::decode(rep[0]);
      EXPECT_EQ(r.src.str(), vip);
      EXPECT_EQ(r.dst.str(), client);
      translated++;
    }
    EXPECT_EQ(translated, 500);
    const auto& c = h.counters();
    EXPECT_EQ(h.drops_total(), 0u);
    EXPECT_EQ(c.handoff_in, c.handoff_out);
    std::printf("%s: %d of 500 replies landed on the other worker; %lu handoffs\n", vip,
                replies_elsewhere, (unsigned long)c.handoff_out);
    if (std::string(vip) == "203.0.113.10") {
      // dnat replies hash independently of the original tuple: about half land elsewhere, and
      // RSS prediction sends each straight to its owner (one hop).
      EXPECT_GT(replies_elsewhere, 150);
      EXPECT_EQ(c.handoff_out, uint64_t(replies_elsewhere));
    } else {
      // fullnat ports are chosen so the reply hashes to the owner: no handoff needed.
      EXPECT_EQ(replies_elsewhere, 0);
      EXPECT_EQ(c.handoff_out, 0u);
    }
    EXPECT_TRUE(h.balanced());
  }
}

// At exit the workers stop one after another: a sibling's last poll may hand a packet to a
// worker that has already stopped. It is dropped and counted in, so the gateway's handoffs
// balance.
TEST(Ownership, a_handoff_to_a_worker_that_already_stopped_is_counted_and_dropped) {
  DataplaneHarness h(kModes, HarnessOptions{4096, 2, false});
  const auto out = h.send_to_queue({tcp_frame("192.0.2.5", 40000, "203.0.113.10", 80, pkt::kTcpSyn)}, kT0, 0, 0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  h.worker(0).finish();
  h.enqueue_to_queue({tcp_frame(d.dst.str().c_str(), 8080, "192.0.2.5", 40000,
                                pkt::kTcpSyn | pkt::kTcpAck, 64, from(d.dst.str()))},
                     kT0 + 1, 0, 1);
  h.worker(1).poll_once();  // worker 1's last poll hands the reply to worker 0
  h.worker(1).finish();
  h.finish_stopped();
  EXPECT_EQ(h.counters_of(1).handoff_out, 1u);
  EXPECT_EQ(h.counters().handoff_in, h.counters().handoff_out);
  EXPECT_EQ(h.drops(dp::Drop::kHandoffFull), 1u);
  EXPECT_TRUE(h.balanced());
}

TEST(Ownership, without_rss_a_reply_on_the_wrong_worker_is_handed_over_in_turn) {
  DataplaneHarness h(kModes, HarnessOptions{4096, 3, false});
  // Client packets into queue 2, replies into queue 0: worker 0 tries worker 1, then worker 2.
  const auto out = h.send_to_queue({tcp_frame("192.0.2.5", 40000, "203.0.113.10", 80, pkt::kTcpSyn)}, kT0, 0, 2);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  const auto rep = h.send_to_queue({tcp_frame(d.dst.str().c_str(), 8080, "192.0.2.5", 40000,
                                              pkt::kTcpSyn | pkt::kTcpAck, 64, from(d.dst.str()))},
                                   kT0 + 1, 0, 0);
  ASSERT_EQ(rep.size(), 1u);
  EXPECT_EQ(pkt::decode(rep[0]).src.str(), "203.0.113.10");
  EXPECT_EQ(h.counters().handoff_out, 2u);
  // A reply of no flow at all (nor of a stateless one: Maglev sends the client's tuple to
  // another backend) visits every worker once and is dropped.
  uint16_t port = 1;
  while (test::expected_backend(h.config(), "dnat", "192.0.2.6", port) == "198.51.100.11:8080") {
    ++port;
  }
  h.send_to_queue({tcp_frame("198.51.100.11", 8080, "192.0.2.6", port, pkt::kTcpAck, 64,
                             from("198.51.100.11"))},
                  kT0 + 2, 0, 0);
  EXPECT_EQ(h.drops(Drop::kReplyNoFlow), 1u);
  EXPECT_TRUE(h.balanced());
}

}  // namespace
}  // namespace meshgate

namespace meshgate {
namespace {

// A TCP connection's life in pcap time: the flow lives through the handshake, data and close,
// then TIME_WAIT expires it on the replay clock; a reset flow expires after the close timeout.
TEST(Lifecycle, tcp_flow_states_and_expiry_follow_the_capture_clock) {
  std::string cfg = kModes + "\n[conntrack]\ntcp_time_wait = 4\ntcp_established = 100\n";
  DataplaneHarness h(cfg);
  const char* c = "192.0.2.40";
  auto fwd = [&](uint8_t flags, uint64_t t) {
    return h.send(tcp_frame(c, 50000, "203.0.113.10", 80, flags), t);
  };
  const std::string b = pkt::decode(fwd(pkt::kTcpSyn, kT0).at(0)).dst.str();
  auto rep = [&](uint8_t flags, uint64_t t) {
    return h.send(tcp_frame(b.c_str(), 8080, c, 50000, flags, 64, from(b)), t);
  };
  const uint64_t s = test::kSec;
  ASSERT_EQ(rep(pkt::kTcpSyn | pkt::kTcpAck, kT0 + 1).size(), 1u);
  ASSERT_EQ(fwd(pkt::kTcpAck, kT0 + 2).size(), 1u);
  EXPECT_EQ(h.worker().flows().established(), 1u);
  ASSERT_EQ(fwd(pkt::kTcpAck | pkt::kTcpPsh, kT0 + 50 * s).size(), 1u);  // idle 50 s: fine
  ASSERT_EQ(fwd(pkt::kTcpFin | pkt::kTcpAck, kT0 + 51 * s).size(), 1u);
  ASSERT_EQ(rep(pkt::kTcpFin | pkt::kTcpAck, kT0 + 51 * s + 1).size(), 1u);
  ASSERT_EQ(fwd(pkt::kTcpAck, kT0 + 51 * s + 2).size(), 1u);  // TIME_WAIT from here, 4 s
  EXPECT_EQ(h.worker().flows().active(), 1u);
  h.tick(kT0 + 54 * s);
  EXPECT_EQ(h.worker().flows().active(), 1u);
  h.tick(kT0 + 57 * s);  // the sweep's 1.024 s period: at most that late
  EXPECT_EQ(h.worker().flows().active(), 0u);
  EXPECT_EQ(h.counters().flows_expired, 1u);
  // A late packet of the closed connection is a new flow now (mid-stream pickup).
  ASSERT_EQ(fwd(pkt::kTcpAck, kT0 + 58 * s).size(), 1u);
  EXPECT_EQ(h.counters().flows_created, 2u);
}

}  // namespace
}  // namespace meshgate

namespace meshgate {
namespace {

std::string with_echo_forward(std::string cfg, const std::string& name) {
  const std::string key = "name = \"" + name + "\"";
  cfg.replace(cfg.find(key), key.size(), key + "\nicmp_echo = \"forward\"");
  return cfg;
}

Bytes echo(const char* src, const char* dst, bool reply, uint16_t id, uint16_t seq,
           const pkt::EthHdr& eth = kToGw) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  return pkt::build_icmp_echo(eth, ip, reply, id, seq, Bytes(32, 0x11));
}

TEST(EchoFlows, a_forwarding_vip_sends_pings_to_a_backend_and_translates_the_replies) {
  struct Case {
    const char* service;
    const char* client;
    const char* vip;
    bool fullnat;
  } cases[] = {{"dnat", "192.0.2.5", "203.0.113.10", false},
               {"fullnat", "192.0.2.5", "203.0.113.11", true},
               {"fullnat6", "2001:db8:2::5", "2001:db8:100::11", true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.service);
    DataplaneHarness h(with_echo_forward(kModes, c.service));
    const auto out = h.send(echo(c.client, c.vip, false, 0x1234, 1), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    ASSERT_TRUE(d.ok()) << d.error;
    EXPECT_EQ(d.icmp_type, std::string(c.vip).find(':') == std::string::npos ? 8 : 128);
    EXPECT_TRUE(kMac.count(d.dst.str()));
    EXPECT_EQ(d.eth_dst, kMac.at(d.dst.str()));
    if (c.fullnat) {
      EXPECT_NE(d.src.str(), c.client);
    } else {
      EXPECT_EQ(d.src.str(), c.client);
      EXPECT_EQ(d.icmp_id, 0x1234);
    }
    expect_valid(out[0]);
    // Every ping of the session goes to the same backend.
    const auto again = h.send(echo(c.client, c.vip, false, 0x1234, 2), kT0 + 1);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(pkt::decode(again[0]).dst, d.dst);
    const auto rep = h.send(echo(d.dst.str().c_str(), d.src.str().c_str(), true, d.icmp_id, 1,
                                 from(d.dst.str())),
                            kT0 + 2);
    ASSERT_EQ(rep.size(), 1u);
    const auto r = pkt::decode(rep[0]);
    EXPECT_EQ(r.src.str(), c.vip);
    EXPECT_EQ(r.dst.str(), c.client);
    EXPECT_EQ(r.icmp_id, 0x1234);
    EXPECT_EQ(r.eth_dst, kRouter);
    expect_valid(rep[0]);
    EXPECT_EQ(h.counters().echo_replies, 0u) << "the gateway did not answer itself";
    EXPECT_EQ(h.counters().flows_created, 1u);
  }
}

TEST(EchoFlows, by_default_the_gateway_answers_pings_to_the_vip) {
  DataplaneHarness h(kModes);
  const auto out = h.send(echo("192.0.2.5", "203.0.113.10", false, 7, 1), kT0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(pkt::decode(out[0]).src.str(), "203.0.113.10");
  EXPECT_EQ(h.counters().echo_replies, 1u);
  EXPECT_EQ(h.counters().flows_created, 0u);
}

TEST(EchoFlows, echo_pseudo_flows_expire_with_the_icmp_timeout) {
  DataplaneHarness h(with_echo_forward(kModes + "\n[conntrack]\nicmp = 3\n", "dnat"));
  ASSERT_EQ(h.send(echo("192.0.2.5", "203.0.113.10", false, 9, 1), kT0).size(), 1u);
  h.tick(kT0 + 2 * test::kSec);
  EXPECT_EQ(h.worker().flows().active(), 1u);
  h.tick(kT0 + 5 * test::kSec);
  EXPECT_EQ(h.worker().flows().active(), 0u);
}

}  // namespace
}  // namespace meshgate
