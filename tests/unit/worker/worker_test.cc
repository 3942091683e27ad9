// Golden packet tests of the worker pipeline: frames in through a net_ring port, frames out,
// asserting every output field, checksum and counter. Decisions that depend on the flow hash are
// checked against dp::lb (the same function the dataplane uses), independently rebuilt here.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>

#include "control/stats/stats.h"
#include "dataplane/lb/lb.h"
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
using test::expected_backend;
using test::kDemoTopology;
using test::kGw;
using test::kRouter;
using test::kSec;
using test::kT0;
using test::kToGw;
using test::M;
using test::tcp_frame;
using test::udp_frame;

const std::map<std::string, MacAddr> kBackendMac = {
    {"198.51.100.11", M("02:00:00:00:01:11")}, {"198.51.100.12", M("02:00:00:00:01:12")},
    {"198.51.100.13", M("02:00:00:00:01:13")}, {"2001:db8:1::11", M("02:00:00:00:01:61")},
    {"2001:db8:1::12", M("02:00:00:00:01:62")}};

void expect_valid_checksums(const Bytes& f) {
  const auto r = pkt::verify_checksums(f);
  EXPECT_NE(r.ipv4, pkt::CsumState::kInvalid);
  EXPECT_NE(r.l4, pkt::CsumState::kInvalid);
}

// ---- malformed and unwanted input: one table, one drop reason each -------------------------

struct DropCase {
  const char* name;
  Bytes frame;
  Drop reason;
};

std::vector<DropCase> drop_cases() {
  std::vector<DropCase> v;
  v.push_back({"runt frame", Bytes{1, 2, 3}, Drop::kEthTruncated});
  {
    Bytes f = tcp_frame("192.0.2.1", 1000, "203.0.113.10", 80, pkt::kTcpSyn);
    f[0] = 0x02;
    f[5] = 0x99;  // unicast to another MAC
    v.push_back({"unicast to another MAC", f, Drop::kL2NotForUs});
  }
  v.push_back({"LLDP ethertype", pkt::eth_frame(kToGw, 0x88cc, Bytes(46, 0)), Drop::kEthertypeUnsupported});
  v.push_back({"transit to a non-service address",
               tcp_frame("192.0.2.1", 1000, "203.0.113.99", 80, pkt::kTcpSyn), Drop::kNoService});
  v.push_back({"TCP to a VIP port without service",
               tcp_frame("192.0.2.1", 1000, "203.0.113.10", 81, pkt::kTcpSyn), Drop::kNoService});
  v.push_back({"SYN+FIN", tcp_frame("192.0.2.1", 1000, "203.0.113.10", 80, pkt::kTcpSyn | pkt::kTcpFin),
               Drop::kTcpBadFlags});
  {
    pkt::IpHdr ip;
    ip.src = A("192.0.2.1");
    ip.dst = A("203.0.113.10");
    v.push_back({"SCTP to a VIP", pkt::build_ip(kToGw, ip, pkt::kProtoSctp, Bytes(12, 0)),
                 Drop::kL4Unsupported});
    pkt::UdpHdr u;
    u.sport = 1000;
    u.dport = 53;
    ip.frag_offset = 2;
    v.push_back({"later fragment toward a VIP, its first never seen",
                 pkt::build_ip(kToGw, ip, pkt::kProtoUdp, Bytes(16, 1)), Drop::kFragmentNoFirst});
    ip.dst = A("198.51.100.1");
    v.push_back({"fragment to a local address (not reassembled)",
                 pkt::build_ip(kToGw, ip, pkt::kProtoUdp, Bytes(16, 1)), Drop::kFragmentUnsupported});
    ip.frag_offset = 0;
    ip.dst = A("198.51.100.1");
    v.push_back({"UDP to a local address", pkt::build_udp(kToGw, ip, u, Bytes{1}), Drop::kLocalUnhandled});
    ip.csum = pkt::Csum::kCorrupt;
    v.push_back({"bad IPv4 header checksum", pkt::build_udp(kToGw, ip, u, Bytes{1}), Drop::kIpv4BadChecksum});
  }
  {
    pkt::IpHdr ip;
    ip.src = A("192.0.2.1");
    ip.dst = A("198.51.100.1");
    pkt::IcmpHdr ic;
    ic.type = pkt::kIcmpEchoRequest;
    ic.rest = 0x00010001;
    ic.csum = pkt::Csum::kCorrupt;
    v.push_back({"echo request with a bad ICMP checksum", pkt::build_icmp(kToGw, ip, ic, Bytes(8, 7)),
                 Drop::kIcmpBadChecksum});
  }
  {
    pkt::ArpHdr a;
    a.op = 1;
    a.sha = kRouter;
    a.spa = A("198.51.100.254");
    a.tpa = A("198.51.100.77");
    v.push_back({"ARP request for somebody else", pkt::build_arp({pkt::broadcast_mac(), kRouter}, a),
                 Drop::kArpNotForUs});
  }
  return v;
}

TEST(WorkerDrops, each_unwanted_frame_is_dropped_with_its_reason_and_nothing_is_sent) {
  for (const auto& c : drop_cases()) {
    SCOPED_TRACE(c.name);
    DataplaneHarness h(kDemoTopology);
    const auto out = h.send(c.frame, kT0);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(h.drops(c.reason), 1u) << "expected " << dp::drop_name(c.reason);
    EXPECT_EQ(h.drops_total(), 1u);
    EXPECT_EQ(h.counters().flows_created, 0u);
    EXPECT_TRUE(h.balanced());
  }
}

// ---- the established-flow fast path ----------------------------------------------------------

// Traffic of established dnat flows of every kind stage_fast takes: TCP both ways (payloads,
// NOP NOP timestamps, TTL 2, a full-MTU frame), UDP both ways (with and without checksum).
struct FastCase {
  std::vector<Bytes> setup;                // handshakes and first exchanges, one frame a burst
  std::vector<Bytes> est;                  // one established frame of each kind
  std::vector<std::vector<Bytes>> bursts;  // then these, each one burst
};

FastCase fast_case(const ctl::Config& cfg) {
  FastCase c;
  pkt::TcpOptions ts;
  ts.ts_val = 123456;
  ts.ts_ecr = 654321;
  std::vector<Bytes>& est = c.est;  // TCP flow i: est[2i] client, est[2i+1] backend; then UDP
  for (int i = 0; i < 6; ++i) {
    const std::string client = "192.0.2." + std::to_string(60 + i);
    const uint16_t cport = uint16_t(41000 + i);
    const std::string be = expected_backend(cfg, "web", client.c_str(), cport);
    const std::string bip = be.substr(0, be.find(':'));
    const pkt::EthHdr from_backend{kGw, kBackendMac.at(bip)};
    c.setup.push_back(tcp_frame(client.c_str(), cport, "203.0.113.10", 80, pkt::kTcpSyn));
    c.setup.push_back(tcp_frame(bip.c_str(), 8080, client.c_str(), cport,
                                pkt::kTcpSyn | pkt::kTcpAck, 64, from_backend));
    c.setup.push_back(tcp_frame(client.c_str(), cport, "203.0.113.10", 80, pkt::kTcpAck));
    pkt::IpHdr ip;
    ip.src = A(client.c_str());
    ip.dst = A("203.0.113.10");
    ip.ttl = uint8_t(i == 5 ? 2 : 64);
    ip.df = i & 1;
    ip.id = uint16_t(i * 977);
    pkt::TcpHdr t;
    t.sport = cport;
    t.dport = 80;
    t.seq = 5000 + i;
    t.flags = pkt::kTcpAck | pkt::kTcpPsh;
    if (i % 2 == 0) t.options = pkt::tcp_options(ts);
    const size_t len = i == 3 ? 1500 - 20 - 20 : size_t(1 + i * 37);
    est.push_back(pkt::build_tcp(kToGw, ip, t, Bytes(len, uint8_t(i))));
    pkt::IpHdr rip;
    rip.src = A(bip.c_str());
    rip.dst = A(client.c_str());
    rip.ttl = uint8_t(i == 4 ? 2 : 63);
    pkt::TcpHdr r;
    r.sport = 8080;
    r.dport = cport;
    r.flags = pkt::kTcpAck;
    if (i % 3 == 0) r.options = pkt::tcp_options(ts);
    est.push_back(pkt::build_tcp(from_backend, rip, r, Bytes(size_t(i * 11), 0x5a)));
  }
  for (int i = 0; i < 4; ++i) {
    const std::string client = "192.0.2." + std::to_string(80 + i);
    const uint16_t cport = uint16_t(42000 + i);
    const std::string be = expected_backend(cfg, "dns", client.c_str(), cport);
    const std::string bip = be.substr(0, be.find(':'));
    const pkt::EthHdr from_backend{kGw, kBackendMac.at(bip)};
    const pkt::Csum csum = i == 3 ? pkt::Csum::kZero : pkt::Csum::kValid;
    c.setup.push_back(udp_frame(client.c_str(), cport, "203.0.113.10", 53, kToGw, csum));
    c.setup.push_back(udp_frame(bip.c_str(), 5353, client.c_str(), cport, from_backend, csum));
    est.push_back(udp_frame(client.c_str(), cport, "203.0.113.10", 53, kToGw, csum));
    est.push_back(udp_frame(bip.c_str(), 5353, client.c_str(), cport, from_backend, csum));
  }
  // Bursts of 1 to 31 frames (one more must fit the stages' variant in one RX burst), the
  // kinds interleaved differently in each.
  size_t k = 0;
  for (size_t size : {size_t(1), size_t(7), size_t(20), size_t(31), size_t(31)}) {
    std::vector<Bytes> b;
    for (size_t j = 0; j < size; ++j, k += 7) b.push_back(est[k % est.size()]);
    c.bursts.push_back(b);
  }
  return c;
}

// The fast path must give the stages' result: the same bursts, once as they are (stage_fast
// takes them) and once with a frame for another MAC appended (dropped at parse, touching
// nothing, it sends the whole burst through the stages), give the same frames, counters and
// flow entries.
TEST(WorkerFastPath, established_bursts_give_the_stages_result_to_the_byte) {
  DataplaneHarness fast(kDemoTopology), stages(kDemoTopology);
  const FastCase c = fast_case(fast.config());
  Bytes other_mac = tcp_frame("192.0.2.60", 41000, "203.0.113.10", 80, pkt::kTcpAck);
  other_mac[5] = 0x99;
  uint64_t t = kT0;
  for (const Bytes& f : c.setup) {
    ASSERT_EQ(fast.send(f, t), stages.send(f, t));
    t += 1000;
  }
  // (UDP replies in the setup already take the fast path: they only set the seen-reply flag.)
  const uint64_t base = fast.counters().fast_path_packets;
  ASSERT_EQ(stages.counters().fast_path_packets, base);
  uint64_t sent = 0;
  for (const auto& burst : c.bursts) {
    std::vector<Bytes> with_other = burst;
    with_other.push_back(other_mac);
    t += 1'000'000;  // a millisecond: the expiry moves
    const auto out = fast.send(burst, t);
    EXPECT_EQ(out, stages.send(with_other, t));
    EXPECT_EQ(out.size(), burst.size());
    for (const Bytes& f : out) expect_valid_checksums(f);
    sent += burst.size();
    EXPECT_EQ(fast.counters().fast_path_packets, base + sent);
  }
  EXPECT_EQ(stages.counters().fast_path_packets, base);
  EXPECT_EQ(stages.drops(Drop::kL2NotForUs), c.bursts.size());
  EXPECT_EQ(fast.drops_total(), 0u);
  for (const char* svc : {"web", "dns"}) {
    for (const auto& s : fast.config().services) {
      if (s.name != svc) continue;
      for (const auto& b : s.backends) {
        const std::string ep = b.address.str() + ":" + std::to_string(b.port);
        EXPECT_EQ(fast.backend(svc, ep).packets, stages.backend(svc, ep).packets) << ep;
        EXPECT_EQ(fast.backend(svc, ep).bytes, stages.backend(svc, ep).bytes) << ep;
        EXPECT_EQ(fast.backend(svc, ep).flows, stages.backend(svc, ep).flows) << ep;
      }
    }
  }
  EXPECT_EQ(fast.counters().tx_packets, stages.counters().tx_packets);
  EXPECT_EQ(fast.counters().tx_bytes, stages.counters().tx_bytes);
  test::expect_same_flows(fast.worker().flows(), stages.worker().flows());
}

// A packet the fast path does not take anywhere in a burst (here a FIN, then a SYN of a new
// flow, then an ARP request) sends the whole burst through the stages, which close the flow,
// create the new one and answer the ARP.
TEST(WorkerFastPath, a_burst_with_any_other_packet_goes_through_the_stages) {
  DataplaneHarness h(kDemoTopology);
  const FastCase c = fast_case(h.config());
  uint64_t t = kT0;
  for (const Bytes& f : c.setup) h.send(f, t += 1000);
  std::vector<Bytes> burst = c.bursts[2];
  burst.insert(burst.begin() + 3,
               tcp_frame("192.0.2.61", 41001, "203.0.113.10", 80, pkt::kTcpFin | pkt::kTcpAck));
  burst.push_back(tcp_frame("192.0.2.99", 43000, "203.0.113.10", 80, pkt::kTcpSyn));
  const uint64_t base = h.counters().fast_path_packets;
  const auto out = h.send(burst, t += 1000);
  EXPECT_EQ(out.size(), burst.size());
  EXPECT_EQ(h.counters().fast_path_packets, base);
  EXPECT_EQ(h.counters().flows_created, 6u + 4u + 1u);
  EXPECT_EQ(h.worker().flows().established(), 5u);  // the FIN's flow closes, the SYN's opens
  pkt::ArpHdr a;
  a.op = 1;
  a.sha = kRouter;
  a.spa = A("198.51.100.254");
  a.tpa = A("203.0.113.10");
  // Flows 2 and 3 both ways, and UDP flow 0 both ways: untouched by the FIN.
  const std::vector<Bytes> others = {c.est[4], c.est[5], c.est[6], c.est[7], c.est[12], c.est[13]};
  std::vector<Bytes> with_arp = others;
  with_arp.insert(with_arp.begin() + 2, pkt::build_arp({pkt::broadcast_mac(), kRouter}, a));
  EXPECT_EQ(h.send(with_arp, t += 1000).size(), with_arp.size());
  EXPECT_EQ(h.counters().arp_replies, 1u);
  EXPECT_EQ(h.counters().fast_path_packets, base);
  EXPECT_EQ(h.send(others, t += 1000).size(), others.size());
  EXPECT_EQ(h.counters().fast_path_packets, base + others.size());
  std::vector<Bytes> full;  // a whole RX burst
  for (size_t i = 0; i < dp::kBurst; ++i) full.push_back(others[i % others.size()]);
  EXPECT_EQ(h.send(full, t += 1000).size(), full.size());
  EXPECT_EQ(h.counters().fast_path_packets, base + others.size() + dp::kBurst);
  EXPECT_TRUE(h.balanced());
}

// A frame of an established flow that fails a check is not the fast path's to forward: in a
// burst of good established frames it sends the burst through the stages, which drop it with
// its reason (or answer it, for TTL 1) and forward the rest. Each case breaks one check of the
// fast path's first pass.
TEST(WorkerFastPath, a_malformed_frame_of_an_established_flow_is_dropped_with_its_reason) {
  struct Broken {
    const char* name;
    size_t est;  // which established frame (FastCase::est) to break
    std::function<void(Bytes&)> edit;
    Drop reason;
  };
  constexpr size_t kIp = 14;
  const auto fix_ip_csum = [](Bytes& f) {
    f[kIp + 10] = f[kIp + 11] = 0;
    uint32_t sum = 0;
    for (size_t i = 0; i < 20; i += 2) sum += uint32_t(f[kIp + i]) << 8 | f[kIp + i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    f[kIp + 10] = uint8_t(~sum >> 8);
    f[kIp + 11] = uint8_t(~sum);
  };
  const std::vector<Broken> cases = {
      {"IPv4 header checksum off by one", 0, [](Bytes& f) { f[kIp + 11] ^= 1; },
       Drop::kIpv4BadChecksum},
      {"IPv4 header checksum of a TCP reply", 1, [](Bytes& f) { f[kIp + 10] ^= 0x80; },
       Drop::kIpv4BadChecksum},
      {"IPv4 header checksum of a UDP frame", 12, [](Bytes& f) { f[kIp + 10] ^= 0x10; },
       Drop::kIpv4BadChecksum},
      {"total length beyond the frame", 0,
       [&](Bytes& f) {
         const uint16_t len = uint16_t(f.size() - kIp + 1);
         f[kIp + 2] = uint8_t(len >> 8);
         f[kIp + 3] = uint8_t(len);
         fix_ip_csum(f);
       },
       Drop::kIpv4BadTotalLength},
      {"TCP data offset beyond the segment", 0, [](Bytes& f) { f[kIp + 20 + 12] = 0xf0; },
       Drop::kTcpBadDataOffset},
      {"UDP length beyond the IP payload", 12,
       [](Bytes& f) {
         const uint16_t ulen = uint16_t((f[kIp + 20 + 4] << 8 | f[kIp + 20 + 5]) + 1);
         f[kIp + 20 + 4] = uint8_t(ulen >> 8);
         f[kIp + 20 + 5] = uint8_t(ulen);
       },
       Drop::kUdpBadLength},
      {"TTL 1", 0,
       [&](Bytes& f) {
         f[kIp + 8] = 1;
         fix_ip_csum(f);
       },
       Drop::kTtlExceeded},
  };
  for (const Broken& b : cases) {
    SCOPED_TRACE(b.name);
    DataplaneHarness h(kDemoTopology);
    const FastCase c = fast_case(h.config());
    uint64_t t = kT0;
    for (const Bytes& f : c.setup) h.send(f, t += 1000);
    std::vector<Bytes> burst = {c.est[2], c.est[3], c.est[4], c.est[13]};
    Bytes bad = c.est[b.est];
    b.edit(bad);
    burst.insert(burst.begin() + 2, bad);
    const uint64_t fast = h.counters().fast_path_packets;
    const uint64_t tx = h.counters().tx_packets;
    h.send(burst, t += 1000);
    EXPECT_EQ(h.drops(b.reason), 1u) << "expected " << dp::drop_name(b.reason);
    EXPECT_EQ(h.drops_total(), 1u);
    EXPECT_EQ(h.counters().fast_path_packets, fast);
    // The four good frames, and for TTL 1 the time-exceeded error.
    EXPECT_EQ(h.counters().tx_packets, tx + 4 + (b.reason == Drop::kTtlExceeded ? 1 : 0));
    // The same frames without the broken one take the fast path.
    burst.erase(burst.begin() + 2);
    h.send(burst, t += 1000);
    EXPECT_EQ(h.counters().fast_path_packets, fast + burst.size());
    EXPECT_TRUE(h.balanced());
  }
}

// ---- the two-poll pipeline of full established bursts (WorkerParams::pipeline) --------------

// n established frames of the fast case's flows, the kinds interleaved.
std::vector<Bytes> established(const FastCase& c, size_t n, size_t from = 0) {
  std::vector<Bytes> b;
  for (size_t j = 0; j < n; ++j) b.push_back(c.est[(from + j * 5) % c.est.size()]);
  return b;
}

// A pipelined worker and an unpipelined one, through the fast case's setup in step.
struct PipelinePair {
  static HarnessOptions piped_options() {
    HarnessOptions po;
    po.pipeline = true;
    return po;
  }
  DataplaneHarness piped{kDemoTopology, piped_options()};
  DataplaneHarness plain{kDemoTopology};
  FastCase c = fast_case(piped.config());
  uint64_t t = kT0;
  PipelinePair() {
    for (const Bytes& f : c.setup) {
      EXPECT_EQ(piped.send(f, t), plain.send(f, t));
      t += 1000;
    }
  }
};

// A full burst of fast-path candidates is held for one poll: it leaves with the next, exactly
// as the unpipelined worker sends it; a burst that is not full, or holds any other packet, is
// not held, and it leaves after the held one (the port's order stays).
TEST(WorkerPipeline, a_full_established_burst_leaves_one_poll_later_in_order_and_unchanged) {
  PipelinePair pp;
  auto& [piped, plain, c, t] = pp;
  const std::vector<Bytes> full = established(c, dp::kBurst);
  const std::vector<Bytes> partial = established(c, 9, 3);
  std::vector<Bytes> both = full;
  both.insert(both.end(), partial.begin(), partial.end());
  const std::vector<Bytes> want = plain.send(both, t += 1'000'000);
  ASSERT_EQ(want.size(), both.size());

  const uint64_t fast0 = piped.counters().fast_path_packets;
  piped.inject(both, t);
  EXPECT_TRUE(piped.poll_each_once(t).empty());  // the full burst is held
  EXPECT_EQ(piped.counters().rx_packets, plain.counters().rx_packets - partial.size());
  EXPECT_EQ(piped.counters().pending_now, dp::kBurst);  // counted as pending meanwhile
  EXPECT_TRUE(piped.balanced());
  EXPECT_EQ(piped.counters().fast_path_packets, fast0);
  EXPECT_EQ(piped.poll_each_once(t), want);  // then both, the held one first
  EXPECT_EQ(piped.counters().fast_path_packets, fast0 + both.size());
  EXPECT_EQ(piped.counters().fast_path_packets, plain.counters().fast_path_packets);
  // The pipeline counts bytes from its own loads of the lengths: the same totals.
  EXPECT_EQ(piped.counters().rx_bytes, plain.counters().rx_bytes);
  EXPECT_EQ(piped.counters().tx_bytes, plain.counters().tx_bytes);
  EXPECT_TRUE(piped.balanced());

  // Not held: a full burst with a packet the fast path does not take (a SYN of a new flow).
  std::vector<Bytes> mixed = established(c, dp::kBurst - 1, 1);
  mixed.insert(mixed.begin() + 17, tcp_frame("192.0.2.99", 43000, "203.0.113.10", 80, pkt::kTcpSyn));
  const std::vector<Bytes> want_mixed = plain.send(mixed, t += 1000);
  piped.inject(mixed, t);
  EXPECT_EQ(piped.poll_each_once(t), want_mixed);
  EXPECT_EQ(piped.counters().flows_created, plain.counters().flows_created);
  EXPECT_EQ(piped.counters().rx_bytes, plain.counters().rx_bytes);
  EXPECT_EQ(piped.counters().tx_bytes, plain.counters().tx_bytes);
  EXPECT_TRUE(piped.balanced());
}

// A TX ring that takes only part of a burst: the rest is dropped as tx_full, and tx_bytes
// counts only the frames that left (the bytes are summed as packets are queued for TX, and
// the unsent ones taken back).
TEST(WorkerPipeline, a_full_tx_ring_drops_the_rest_as_tx_full_and_counts_only_bytes_sent) {
  HarnessOptions small;
  small.tx_ring_size = 16;  // holds 15
  DataplaneHarness h(kDemoTopology, small);
  const FastCase c = fast_case(h.config());
  uint64_t t = kT0;
  for (const Bytes& f : c.setup) {
    h.send(f, t);
    t += 1000;
  }
  const uint64_t tx0 = h.counters().tx_packets, bytes0 = h.counters().tx_bytes;
  const uint64_t fast0 = h.counters().fast_path_packets;
  const std::vector<Bytes> burst = established(c, 20);
  const std::vector<Bytes> out = h.send(burst, t += 1'000'000);
  ASSERT_EQ(out.size(), 15u);
  EXPECT_EQ(h.counters().fast_path_packets, fast0 + burst.size());
  EXPECT_EQ(h.drops(Drop::kTxFull), 5u);
  EXPECT_EQ(h.counters().tx_packets, tx0 + 15);
  uint64_t out_bytes = 0;
  for (const Bytes& f : out) out_bytes += f.size();
  EXPECT_EQ(h.counters().tx_bytes, bytes0 + out_bytes);
  EXPECT_TRUE(h.balanced());
}

// Stopping the worker forwards a held burst: nothing is lost at exit.
TEST(WorkerPipeline, a_held_burst_is_forwarded_when_the_worker_stops) {
  PipelinePair pp;
  auto& [piped, plain, c, t] = pp;
  const std::vector<Bytes> full = established(c, dp::kBurst, 2);
  const std::vector<Bytes> want = plain.send(full, t += 1000);
  piped.inject(full, t);
  EXPECT_TRUE(piped.poll_each_once(t).empty());
  EXPECT_EQ(piped.counters().pending_now, dp::kBurst);
  EXPECT_EQ(piped.finish(), want);
  EXPECT_EQ(piped.counters().pending_now, 0u);
  EXPECT_EQ(piped.counters().tx_packets, plain.counters().tx_packets);
  EXPECT_EQ(piped.drops_total(), 0u);
  EXPECT_TRUE(piped.balanced());
}

// ---- DNAT forward and reverse ---------------------------------------------------------------

TEST(WorkerDnat, syn_to_vip_is_translated_to_the_maglev_backend_with_rewritten_l2_and_ttl) {
  DataplaneHarness h(kDemoTopology);
  for (int i = 0; i < 50; ++i) {
    const std::string client = "192.0.2." + std::to_string(1 + i);
    const uint16_t cport = uint16_t(40000 + i);
    const auto out = h.send(tcp_frame(client.c_str(), cport, "203.0.113.10", 80, pkt::kTcpSyn), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    ASSERT_TRUE(d.ok()) << d.error;
    const std::string want = expected_backend(h.config(), "web", client.c_str(), cport);
    EXPECT_EQ(d.dst.str() + ":" + std::to_string(d.dport), want);
    EXPECT_EQ(d.src.str(), client);
    EXPECT_EQ(d.sport, cport);
    EXPECT_EQ(d.ttl, 63);
    EXPECT_EQ(d.eth_dst, kBackendMac.at(d.dst.str()));
    EXPECT_EQ(d.eth_src, kGw);
    EXPECT_EQ(d.tcp_flags, pkt::kTcpSyn);
    expect_valid_checksums(out[0]);
  }
  EXPECT_EQ(h.counters().flows_created, 50u);
  EXPECT_EQ(h.counters().tx_packets, 50u);
  EXPECT_TRUE(h.balanced());
}

TEST(WorkerPorts, each_net_ring_ports_own_counters_equal_what_the_workers_received_and_sent) {
  DataplaneHarness h(kDemoTopology);
  for (int i = 0; i < 20; ++i) {
    h.send(tcp_frame("192.0.2.1", uint16_t(40000 + i), "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  }
  const std::vector<ctl::PortCounters> ports = ctl::read_port_counters(h.ports());
  ASSERT_EQ(ports.size(), h.ports().size());
  uint64_t in = 0, out = 0;
  for (size_t i = 0; i < ports.size(); ++i) {
    EXPECT_EQ(ports[i].name, h.ports()[i].name);
    EXPECT_EQ(ports[i].imissed, 0u);
    EXPECT_EQ(ports[i].rx_nombuf, 0u);
    in += ports[i].ipackets;
    out += ports[i].opackets;
  }
  EXPECT_EQ(ports[0].ipackets, 20u);
  EXPECT_EQ(in, h.counters().rx_packets);
  EXPECT_EQ(out, h.counters().tx_packets);
  EXPECT_EQ(out, 20u);
}

TEST(WorkerDnat, reply_from_backend_is_reverse_translated_to_the_vip_toward_the_router) {
  DataplaneHarness h(kDemoTopology);
  const auto fwd = h.send(tcp_frame("192.0.2.7", 5555, "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  ASSERT_EQ(fwd.size(), 1u);
  const auto f = pkt::decode(fwd[0]);
  const std::string backend = f.dst.str();
  const pkt::EthHdr from_backend{kGw, kBackendMac.at(backend)};
  const auto rep = h.send(tcp_frame(backend.c_str(), 8080, "192.0.2.7", 5555,
                                    pkt::kTcpSyn | pkt::kTcpAck, 64, from_backend),
                          kT0 + 1000);
  ASSERT_EQ(rep.size(), 1u);
  const auto r = pkt::decode(rep[0]);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.src.str(), "203.0.113.10");
  EXPECT_EQ(r.sport, 80);
  EXPECT_EQ(r.dst.str(), "192.0.2.7");
  EXPECT_EQ(r.dport, 5555);
  EXPECT_EQ(r.eth_dst, kRouter);  // client is behind the default route
  EXPECT_EQ(r.ttl, 63);
  expect_valid_checksums(rep[0]);
  EXPECT_EQ(h.backend("web", backend + ":8080").packets, 2u);
  EXPECT_EQ(h.backend("web", backend + ":8080").flows, 1u);
  // Bytes each way: the SYN to the backend and its SYN-ACK back, frames of the same size.
  EXPECT_GT(h.backend("web", backend + ":8080").bytes, 0u);
  EXPECT_EQ(h.backend("web", backend + ":8080").reply_bytes,
            h.backend("web", backend + ":8080").bytes);
}

TEST(WorkerDnat, every_packet_of_a_flow_keeps_its_backend_and_fin_close_counts_state) {
  DataplaneHarness h(kDemoTopology);
  std::string first;
  for (uint8_t flags : {pkt::kTcpSyn, pkt::kTcpAck, uint8_t(pkt::kTcpAck | pkt::kTcpPsh),
                        uint8_t(pkt::kTcpFin | pkt::kTcpAck)}) {
    const auto out = h.send(tcp_frame("192.0.2.9", 1234, "203.0.113.10", 80, flags), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    if (first.empty()) first = d.dst.str();
    EXPECT_EQ(d.dst.str(), first);
  }
  EXPECT_EQ(h.counters().flows_created, 1u);
  EXPECT_EQ(h.worker().flows().active(), 1u);
}

TEST(WorkerDnat, reply_in_the_same_burst_as_the_packet_that_creates_the_flow_is_translated) {
  DataplaneHarness h(kDemoTopology);
  const std::string backend = expected_backend(h.config(), "web", "192.0.2.8", 6000);
  const std::string ip = backend.substr(0, backend.find(':'));
  const pkt::EthHdr from_backend{kGw, kBackendMac.at(ip)};
  const auto out = h.send({tcp_frame("192.0.2.8", 6000, "203.0.113.10", 80, pkt::kTcpSyn),
                           tcp_frame(ip.c_str(), 8080, "192.0.2.8", 6000, pkt::kTcpSyn | pkt::kTcpAck,
                                     64, from_backend)},
                          kT0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(pkt::decode(out[0]).dst.str(), ip);
  EXPECT_EQ(pkt::decode(out[1]).src.str(), "203.0.113.10");
  EXPECT_EQ(h.drops_total(), 0u);
}

TEST(WorkerDnat, reply_from_a_backend_without_a_flow_is_not_translated) {
  DataplaneHarness h(kDemoTopology);
  const pkt::EthHdr from_backend{kGw, M("02:00:00:00:01:11")};
  const auto out = h.send(tcp_frame("198.51.100.11", 8080, "192.0.2.7", 5555,
                                    pkt::kTcpSyn | pkt::kTcpAck, 64, from_backend), kT0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.drops(Drop::kReplyNoFlow), 1u);
}

TEST(WorkerDnat, udp_service_translates_both_directions_and_keeps_valid_udp_checksums) {
  DataplaneHarness h(kDemoTopology);
  const auto out = h.send(udp_frame("192.0.2.20", 3333, "203.0.113.10", 53), kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  EXPECT_EQ(d.dst.str() + ":" + std::to_string(d.dport),
            expected_backend(h.config(), "dns", "192.0.2.20", 3333));
  expect_valid_checksums(out[0]);
  const pkt::EthHdr from_backend{kGw, kBackendMac.at(d.dst.str())};
  const auto rep = h.send(udp_frame(d.dst.str().c_str(), 5353, "192.0.2.20", 3333, from_backend), kT0 + 1);
  ASSERT_EQ(rep.size(), 1u);
  const auto r = pkt::decode(rep[0]);
  EXPECT_EQ(r.src.str(), "203.0.113.10");
  EXPECT_EQ(r.sport, 53);
  expect_valid_checksums(rep[0]);
}

TEST(WorkerDnat, udp_without_checksum_stays_without_checksum) {
  DataplaneHarness h(kDemoTopology);
  const auto out = h.send(udp_frame("192.0.2.21", 3333, "203.0.113.10", 53, kToGw, pkt::Csum::kZero), kT0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(pkt::verify_checksums(out[0]).l4, pkt::CsumState::kNotChecked);
  const auto d = pkt::decode(out[0]);
  EXPECT_EQ(out[0][d.l4_off + 6], 0);
  EXPECT_EQ(out[0][d.l4_off + 7], 0);
}

TEST(WorkerDnat, ipv6_service_is_translated_with_valid_tcp_checksum_and_hop_limit) {
  DataplaneHarness h(kDemoTopology);
  const auto out = h.send(tcp_frame("2001:db8:2::5", 4444, "2001:db8:100::10", 80, pkt::kTcpSyn), kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.dst.str() + ":" + std::to_string(d.dport),
            expected_backend(h.config(), "web6", "2001:db8:2::5", 4444));
  EXPECT_EQ(d.ttl, 63);
  EXPECT_EQ(d.eth_dst, kBackendMac.at(d.dst.str()));
  expect_valid_checksums(out[0]);
  const pkt::EthHdr from_backend{kGw, kBackendMac.at(d.dst.str())};
  const auto rep = h.send(tcp_frame(d.dst.str().c_str(), 8080, "2001:db8:2::5", 4444,
                                    pkt::kTcpSyn | pkt::kTcpAck, 64, from_backend), kT0 + 1);
  ASSERT_EQ(rep.size(), 1u);
  const auto r = pkt::decode(rep[0]);
  EXPECT_EQ(r.src.str(), "2001:db8:100::10");
  EXPECT_EQ(r.sport, 80);
  EXPECT_EQ(r.eth_dst, kRouter);
  expect_valid_checksums(rep[0]);
}

TEST(WorkerDnat, backend_choice_spreads_by_weight) {
  DataplaneHarness h(kDemoTopology, 1 << 14);
  std::map<std::string, int> hits;
  for (int i = 0; i < 4000; ++i) {
    const std::string client = "192.0.2." + std::to_string(1 + i % 250);
    const auto out = h.send(tcp_frame(client.c_str(), uint16_t(10000 + i), "203.0.113.10", 80, pkt::kTcpSyn), kT0);
    ASSERT_EQ(out.size(), 1u);
    hits[pkt::decode(out[0]).dst.str()]++;
  }
  // Weights 1:1:2 -> 25% / 25% / 50%, within a few percent for 4000 flows.
  EXPECT_NEAR(hits["198.51.100.11"] / 4000.0, 0.25, 0.04);
  EXPECT_NEAR(hits["198.51.100.12"] / 4000.0, 0.25, 0.04);
  EXPECT_NEAR(hits["198.51.100.13"] / 4000.0, 0.50, 0.04);
}

TEST(WorkerDnat, flow_keeps_its_backend_when_the_service_changes_and_new_flows_use_the_new_set) {
  DataplaneHarness h(kDemoTopology);
  const auto out = h.send(tcp_frame("192.0.2.30", 3000, "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  const std::string backend = pkt::decode(out[0]).dst.str();
  // Remove that backend from the service.
  std::string cfg = kDemoTopology;
  const std::string block = "  [[service.backend]]\n  address = \"" + backend + "\"\n  port = 8080\n";
  const auto pos = cfg.find(block);
  ASSERT_NE(pos, std::string::npos);
  cfg.erase(pos, block.size() + (backend == "198.51.100.13" ? std::string("  weight = 2\n").size() : 0));
  h.publish(cfg);
  const auto again = h.send(tcp_frame("192.0.2.30", 3000, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(pkt::decode(again[0]).dst.str(), backend);
  for (int i = 0; i < 200; ++i) {
    const auto n = h.send(tcp_frame("192.0.2.31", uint16_t(20000 + i), "203.0.113.10", 80, pkt::kTcpSyn), kT0 + 2);
    ASSERT_EQ(n.size(), 1u);
    EXPECT_NE(pkt::decode(n[0]).dst.str(), backend);
  }
}

TEST(WorkerDnat, udp_flow_expires_after_its_timeout_and_is_counted) {
  std::string cfg = std::string(kDemoTopology) + "\n[conntrack]\nudp = 5\n";
  DataplaneHarness h(cfg);
  ASSERT_EQ(h.send(udp_frame("192.0.2.40", 4000, "203.0.113.10", 53), kT0).size(), 1u);
  EXPECT_EQ(h.worker().flows().active(), 1u);
  h.tick(kT0 + 4 * kSec);
  EXPECT_EQ(h.worker().flows().active(), 1u);
  for (int i = 0; i < 200; ++i) h.tick(kT0 + 6 * kSec);  // the sweep visits every slot
  EXPECT_EQ(h.worker().flows().active(), 0u);
  EXPECT_EQ(h.counters().flows_expired, 1u);
  ASSERT_EQ(h.send(udp_frame("192.0.2.40", 4000, "203.0.113.10", 53), kT0 + 7 * kSec).size(), 1u);
  EXPECT_EQ(h.counters().flows_created, 2u);
}

// ---- local responders -----------------------------------------------------------------------

TEST(WorkerLocal, arp_request_for_a_vip_or_local_address_gets_a_reply) {
  for (const char* target : {"203.0.113.10", "198.51.100.1"}) {
    SCOPED_TRACE(target);
    DataplaneHarness h(kDemoTopology);
    pkt::ArpHdr a;
    a.op = 1;
    a.sha = kRouter;
    a.spa = A("198.51.100.254");
    a.tpa = A(target);
    const auto out = h.send(pkt::build_arp({pkt::broadcast_mac(), kRouter}, a), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    ASSERT_EQ(d.l3, pkt::L3Kind::kArp);
    EXPECT_EQ(d.arp_op, 2);
    EXPECT_EQ(d.arp_sha, kGw);
    EXPECT_EQ(d.arp_spa.str(), target);
    EXPECT_EQ(d.arp_tha, kRouter);
    EXPECT_EQ(d.arp_tpa.str(), "198.51.100.254");
    EXPECT_EQ(d.eth_dst, kRouter);
    EXPECT_EQ(d.eth_src, kGw);
    EXPECT_EQ(h.counters().arp_replies, 1u);
  }
}

TEST(WorkerLocal, neighbor_solicitation_for_a_vip_gets_a_valid_advertisement) {
  DataplaneHarness h(kDemoTopology);
  const IpAddr target = A("2001:db8:100::10");
  const IpAddr src = A("2001:db8:1::fe");
  const auto ns = pkt::build_ndp_ns({pkt::ipv6_multicast_mac(pkt::solicited_node(target)), kRouter},
                                    pkt::ndp_ip_hdr(src, pkt::solicited_node(target)), target, kRouter);
  const auto out = h.send(ns, kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.icmp_type, pkt::kIcmp6NeighborAdvert);
  EXPECT_EQ(d.src, target);
  EXPECT_EQ(d.dst, src);
  EXPECT_EQ(d.ttl, 255);
  EXPECT_EQ(d.nd_target, target);
  EXPECT_TRUE(d.nd_has_lladdr);
  EXPECT_EQ(d.nd_lladdr, kGw);
  EXPECT_EQ(d.na_flags, pkt::kNaSolicited | pkt::kNaOverride);
  EXPECT_EQ(d.eth_dst, kRouter);
  expect_valid_checksums(out[0]);
}

TEST(WorkerLocal, neighbor_solicitation_with_wrong_hop_limit_is_invalid) {
  DataplaneHarness h(kDemoTopology);
  const IpAddr target = A("2001:db8:1::1");
  auto ip = pkt::ndp_ip_hdr(A("2001:db8:1::fe"), pkt::solicited_node(target));
  ip.ttl = 64;
  h.send(pkt::build_ndp_ns({pkt::ipv6_multicast_mac(pkt::solicited_node(target)), kRouter}, ip, target, kRouter), kT0);
  EXPECT_EQ(h.drops(Drop::kNdpInvalid), 1u);
}

TEST(WorkerLocal, echo_requests_to_vip_and_local_address_are_answered_in_both_families) {
  struct Case {
    const char* src;
    const char* dst;
  } cases[] = {{"192.0.2.50", "203.0.113.10"}, {"192.0.2.50", "198.51.100.1"},
               {"2001:db8:2::50", "2001:db8:100::10"}, {"2001:db8:2::50", "2001:db8:1::1"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dst);
    DataplaneHarness h(kDemoTopology);
    pkt::IpHdr ip;
    ip.src = A(c.src);
    ip.dst = A(c.dst);
    ip.ttl = 5;
    const auto out = h.send(pkt::build_icmp_echo(kToGw, ip, false, 0x1234, 7, Bytes(56, 0x5a)), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    ASSERT_TRUE(d.ok()) << d.error;
    EXPECT_EQ(d.src.str(), c.dst);
    EXPECT_EQ(d.dst.str(), c.src);
    EXPECT_EQ(d.icmp_type, ip.src.is_v4() ? pkt::kIcmpEchoReply : pkt::kIcmp6EchoReply);
    EXPECT_EQ(d.icmp_id, 0x1234);
    EXPECT_EQ(d.icmp_seq, 7);
    EXPECT_EQ(d.ttl, 64);
    EXPECT_EQ(d.eth_dst, kRouter);
    EXPECT_EQ(d.payload_len, 56u);
    expect_valid_checksums(out[0]);
  }
}

// ---- neighbor resolution --------------------------------------------------------------------

constexpr const char* kUnresolvedTopology = R"(
[[port]]
name = "net0"
device = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "web6"
vip = "2001:db8:100::10"
port = 80
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
)";

TEST(WorkerNeighbor, unresolved_backend_triggers_one_arp_request_and_the_reply_releases_the_packet) {
  DataplaneHarness h(kUnresolvedTopology);
  const pkt::EthHdr from_client{kGw, M("02:00:00:00:00:c1")};
  auto out = h.send(tcp_frame("198.51.100.50", 1000, "203.0.113.10", 80, pkt::kTcpSyn, 64, from_client), kT0);
  ASSERT_EQ(out.size(), 1u);
  auto req = pkt::decode(out[0]);
  ASSERT_EQ(req.l3, pkt::L3Kind::kArp);
  EXPECT_EQ(req.arp_op, 1);
  EXPECT_EQ(req.eth_dst, pkt::broadcast_mac());
  EXPECT_EQ(req.arp_spa.str(), "198.51.100.1");
  EXPECT_EQ(req.arp_tpa.str(), "198.51.100.11");
  EXPECT_EQ(h.counters().pending_now, 1u);
  // A second packet to the same next hop waits without a second request (rate limit).
  out = h.send(tcp_frame("198.51.100.50", 1001, "203.0.113.10", 80, pkt::kTcpSyn, 64, from_client), kT0 + 1000);
  EXPECT_TRUE(out.empty());
  pkt::ArpHdr a;
  a.op = 2;
  a.sha = M("02:00:00:00:01:11");
  a.spa = A("198.51.100.11");
  a.tha = kGw;
  a.tpa = A("198.51.100.1");
  out = h.send(pkt::build_arp({kGw, a.sha}, a), kT0 + 2000);
  ASSERT_EQ(out.size(), 2u);
  for (const auto& f : out) {
    const auto d = pkt::decode(f);
    EXPECT_EQ(d.eth_dst, a.sha);
    EXPECT_EQ(d.dst.str(), "198.51.100.11");
  }
  EXPECT_EQ(pkt::decode(out[0]).sport, 1000);  // order kept
  EXPECT_EQ(h.counters().consumed, 1u);
  EXPECT_EQ(h.counters().generated, 1u);
  EXPECT_TRUE(h.balanced());
}

// The next-hop cache (which the fast path reads) follows a learned MAC that changes and a
// snapshot that brings a static neighbor: the very next burst goes to the new MAC.
TEST(WorkerNeighbor, a_changed_neighbor_mac_or_snapshot_reaches_the_fast_path_at_once) {
  DataplaneHarness h(kUnresolvedTopology);
  const pkt::EthHdr from_client{kGw, M("02:00:00:00:00:c1")};
  std::vector<Bytes> burst;
  for (uint16_t p = 1000; p < 1004; ++p) {
    burst.push_back(
        tcp_frame("198.51.100.50", p, "203.0.113.10", 80, pkt::kTcpAck, 64, from_client));
  }
  uint64_t t = kT0;
  auto arp_reply = [&](const char* mac) {
    pkt::ArpHdr a;
    a.op = 2;
    a.sha = M(mac);
    a.spa = A("198.51.100.11");
    a.tha = kGw;
    a.tpa = A("198.51.100.1");
    return pkt::build_arp({kGw, a.sha}, a);
  };
  // The flows start (their packets wait for the backend's MAC), then the reply releases them.
  EXPECT_EQ(h.send(burst, t += 1000).size(), 1u);  // one ARP request
  EXPECT_EQ(h.send(arp_reply("02:00:00:00:01:11"), t += 1000).size(), burst.size());
  // Bursts until the fast path has taken one (after a burst it gave back to the stages it
  // skips a few), every frame to `mac`.
  auto expect_bursts_to = [&](const char* mac) {
    const uint64_t before = h.counters().fast_path_packets;
    for (int i = 0; i < 40 && h.counters().fast_path_packets == before; ++i) {
      const auto out = h.send(burst, t += 1000);
      ASSERT_EQ(out.size(), burst.size());
      for (const Bytes& f : out) {
        const auto d = pkt::decode(f);
        EXPECT_EQ(d.eth_dst, M(mac));
        EXPECT_EQ(d.dst.str(), "198.51.100.11");
      }
    }
    EXPECT_EQ(h.counters().fast_path_packets, before + burst.size());
  };
  expect_bursts_to("02:00:00:00:01:11");
  // The backend's MAC changes (an ARP reply with another address).
  EXPECT_TRUE(h.send(arp_reply("02:00:00:00:01:22"), t += 1000).empty());
  expect_bursts_to("02:00:00:00:01:22");
  // A snapshot with a static neighbor entry for it (static entries win over learned ones).
  h.publish(std::string(kUnresolvedTopology) +
            "[[neighbor]]\naddress = \"198.51.100.11\"\nmac = \"02:00:00:00:01:33\"\n");
  expect_bursts_to("02:00:00:00:01:33");
  EXPECT_TRUE(h.balanced());
}

TEST(WorkerNeighbor, unresolved_ipv6_backend_triggers_a_neighbor_solicitation) {
  DataplaneHarness h(kUnresolvedTopology);
  const pkt::EthHdr from_client{kGw, M("02:00:00:00:00:c1")};
  const auto out = h.send(tcp_frame("2001:db8:1::50", 1000, "2001:db8:100::10", 80, pkt::kTcpSyn, 64, from_client), kT0);
  ASSERT_EQ(out.size(), 1u);
  const auto d = pkt::decode(out[0]);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.icmp_type, pkt::kIcmp6NeighborSolicit);
  EXPECT_EQ(d.dst, pkt::solicited_node(A("2001:db8:1::11")));
  EXPECT_EQ(d.eth_dst, pkt::ipv6_multicast_mac(d.dst));
  EXPECT_EQ(d.nd_target.str(), "2001:db8:1::11");
  EXPECT_EQ(d.nd_lladdr, kGw);
  EXPECT_EQ(d.ttl, 255);
  expect_valid_checksums(out[0]);
  // The advertisement releases the packet.
  const auto na = pkt::build_ndp_na({kGw, M("02:00:00:00:01:61")},
                                    pkt::ndp_ip_hdr(A("2001:db8:1::11"), A("2001:db8:1::1")),
                                    A("2001:db8:1::11"), pkt::kNaSolicited | pkt::kNaOverride,
                                    M("02:00:00:00:01:61"));
  const auto rel = h.send(na, kT0 + 1000);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(pkt::decode(rel[0]).eth_dst, M("02:00:00:00:01:61"));
}

TEST(WorkerNeighbor, packets_waiting_for_a_silent_neighbor_time_out_and_requests_repeat_each_second) {
  DataplaneHarness h(kUnresolvedTopology);
  const pkt::EthHdr from_client{kGw, M("02:00:00:00:00:c1")};
  h.send(tcp_frame("198.51.100.50", 1000, "203.0.113.10", 80, pkt::kTcpSyn, 64, from_client), kT0);
  EXPECT_EQ(h.tick(kT0 + kSec / 2).size(), 0u);
  EXPECT_EQ(h.tick(kT0 + kSec + 1).size(), 1u);  // second ARP request
  h.tick(kT0 + 3 * kSec + 1);
  EXPECT_EQ(h.drops(Drop::kNeighborUnresolved), 1u);
  EXPECT_EQ(h.counters().pending_now, 0u);
  EXPECT_EQ(h.counters().arp_requests, 3u);
  EXPECT_TRUE(h.balanced());
}

TEST(WorkerNeighbor, a_full_pending_queue_drops_the_newest_packets) {
  DataplaneHarness h(kUnresolvedTopology);
  const pkt::EthHdr from_client{kGw, M("02:00:00:00:00:c1")};
  std::vector<Bytes> burst;
  for (int round = 0; round < 10; ++round) {
    burst.clear();
    for (int i = 0; i < 30; ++i) {
      burst.push_back(tcp_frame("198.51.100.50", uint16_t(1000 + round * 30 + i), "203.0.113.10", 80, pkt::kTcpSyn, 64, from_client));
    }
    h.send(burst, kT0);
  }
  EXPECT_EQ(h.counters().pending_now, dp::PendingQueue::kCapacity);
  EXPECT_EQ(h.drops(Drop::kNeighborQueueFull), 300u - dp::PendingQueue::kCapacity);
  h.finish();
  EXPECT_EQ(h.drops(Drop::kNeighborUnresolved), dp::PendingQueue::kCapacity);
  EXPECT_TRUE(h.balanced());
}

TEST(WorkerRoute, packet_without_a_route_is_dropped_no_route) {
  DataplaneHarness h(kUnresolvedTopology);  // no default route
  h.send(tcp_frame("192.0.2.1", 1000, "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  // The backend is on-link, so the forward direction works; the reply toward 192.0.2.1 has no
  // route.
  const pkt::EthHdr from_backend{kGw, M("02:00:00:00:01:11")};
  pkt::ArpHdr a;
  a.op = 2;
  a.sha = M("02:00:00:00:01:11");
  a.spa = A("198.51.100.11");
  a.tpa = A("198.51.100.1");
  h.send(pkt::build_arp({kGw, a.sha}, a), kT0 + 1);
  h.send(tcp_frame("198.51.100.11", 8080, "192.0.2.1", 1000, pkt::kTcpSyn | pkt::kTcpAck, 64, from_backend), kT0 + 2);
  EXPECT_EQ(h.drops(Drop::kNoRoute), 1u);
}

TEST(WorkerRoute, packet_larger_than_the_egress_mtu_is_dropped) {
  std::string cfg = kDemoTopology;
  cfg.replace(cfg.find("addresses = [\"198.51.100.1/24\""), 0, "mtu = 1280\n");
  DataplaneHarness h(cfg);
  const auto out = h.send(tcp_frame("192.0.2.1", 1000, "203.0.113.10", 80, pkt::kTcpAck, 64, kToGw, 1400), kT0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.drops(Drop::kMtuExceeded), 1u);
}

}  // namespace
}  // namespace meshgate

namespace meshgate {
namespace {

TEST(WorkerClock, the_live_clock_does_not_wrap_after_seven_seconds) {
  // cycles * 10^9 overflowed 64 bits after ~7.4 s at 2.5 GHz: a live worker's clock (conntrack
  // timeouts, flow ages) jumped back to zero every 7.4 s.
  for (const uint64_t hz : {1'000'000'000ull, 2'500'000'000ull, 3'700'000'000ull}) {
    const uint64_t q = dp::ns_per_tsc_q32(hz);
    uint64_t last = 0;
    for (const double s : {0.001, 1.0, 7.0, 7.4, 7.5, 8.0, 3600.0, 86400.0 * 365}) {
      const uint64_t ns = dp::tsc_to_ns(uint64_t(s * double(hz)), q);
      EXPECT_GT(ns, last) << hz << " Hz, " << s << " s";
      EXPECT_NEAR(double(ns), s * 1e9, s * 1e9 * 1e-8 + 1) << hz << " Hz, " << s << " s";
      last = ns;
    }
  }
}

TEST(WorkerFlowDump, a_posted_dump_is_filled_between_bursts_with_every_flow) {
  DataplaneHarness h(test::kDemoTopology, 1 << 14);
  std::vector<Bytes> burst;
  for (int i = 0; i < 5000; ++i) {
    const std::string client = "192.0.2." + std::to_string(1 + i % 250);
    burst.push_back(tcp_frame(client.c_str(), uint16_t(10000 + i), "203.0.113.10", 80, pkt::kTcpSyn));
    if (burst.size() == dp::kBurst) {
      h.send(burst, kT0);
      burst.clear();
    }
  }
  h.send(burst, kT0);
  std::vector<dp::FlowRecord> recs(8000);
  dp::FlowDumpRequest req;
  req.records = recs.data();
  req.max = uint32_t(recs.size());
  ASSERT_TRUE(h.worker().post_flow_dump(&req));
  dp::FlowDumpRequest other;
  EXPECT_FALSE(h.worker().post_flow_dump(&other)) << "one request at a time";
  int iterations = 0;
  while (!req.done.load(std::memory_order_acquire)) {
    h.tick(kT0 + 1);
    ASSERT_LT(++iterations, 100);
  }
  EXPECT_GT(iterations, 1) << "the copy is spread over iterations";
  ASSERT_EQ(req.count, 5000u);
  for (uint32_t i = 0; i < req.count; ++i) {
    const auto& r = recs[i];
    EXPECT_EQ(r.vip.str(), "203.0.113.10");
    EXPECT_EQ(r.vip_port, 80);
    EXPECT_EQ(r.backend_port, 8080);
    EXPECT_EQ(r.state, dp::TcpState::kSynSent);
    EXPECT_GT(r.expires_in_ms, 0);
    EXPECT_EQ(expected_backend(h.config(), "web", r.client.str().c_str(), r.client_port),
              r.backend.str() + ":8080");
  }
}

TEST(WorkerFlowDump, a_dump_stops_at_its_capacity) {
  DataplaneHarness h(test::kDemoTopology);
  for (int i = 0; i < 10; ++i) {
    h.send(tcp_frame("192.0.2.1", uint16_t(10000 + i), "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  }
  std::vector<dp::FlowRecord> recs(4);
  dp::FlowDumpRequest req;
  req.records = recs.data();
  req.max = 4;
  ASSERT_TRUE(h.worker().post_flow_dump(&req));
  h.tick(kT0 + 1);
  ASSERT_TRUE(req.done.load());
  EXPECT_EQ(req.count, 4u);
}

}  // namespace
}  // namespace meshgate

namespace meshgate {
namespace {

TEST(WorkerDrain, draining_refuses_new_flows_and_keeps_existing_ones) {
  DataplaneHarness h(test::kDemoTopology);
  ASSERT_EQ(h.send(tcp_frame("192.0.2.70", 7000, "203.0.113.10", 80, pkt::kTcpSyn), kT0).size(), 1u);
  h.send(tcp_frame("192.0.2.70", 7000, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 1);
  EXPECT_EQ(h.worker().flows().established(), 0u) << "no SYN-ACK seen yet";
  h.worker().set_draining(true);
  // The refused SYN is answered by a RST (drain_refuses_a_new_connection_with_a_rst), never
  // forwarded.
  const auto out = h.send(tcp_frame("192.0.2.71", 7001, "203.0.113.10", 80, pkt::kTcpSyn), kT0 + 2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(pkt::decode(out[0]).tcp_flags, pkt::kTcpRst | pkt::kTcpAck);
  EXPECT_EQ(h.drops(Drop::kDraining), 1u);
  EXPECT_EQ(h.send(tcp_frame("192.0.2.70", 7000, "203.0.113.10", 80, pkt::kTcpAck | pkt::kTcpPsh), kT0 + 3).size(), 1u);
  EXPECT_EQ(h.counters().flows_created, 1u);
}

// RFC 9293 3.10.7.1: a segment without ACK to a closed port gets
// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>; SEG.LEN counts the SYN and any payload. The RST
// comes from the VIP, back to the client through its next hop.
TEST(WorkerDrain, drain_refuses_a_new_connection_with_a_rst) {
  struct Case {
    const char* what;
    const char* client;
    const char* vip;
    size_t payload;
    uint32_t want_ack;  // tcp_frame's SYNs carry seq 1000
  };
  const Case cases[] = {
      {"IPv4 SYN", "192.0.2.71", "203.0.113.10", 0, 1001},
      {"IPv4 SYN with data (TCP fast open)", "192.0.2.72", "203.0.113.10", 100, 1101},
      {"IPv6 SYN", "2001:db8:2::71", "2001:db8:100::10", 0, 1001},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    DataplaneHarness h(test::kDemoTopology);
    h.worker().set_draining(true);
    const auto out = h.send(
        tcp_frame(k.client, 7001, k.vip, 80, pkt::kTcpSyn, 64, kToGw, k.payload), kT0);
    ASSERT_EQ(out.size(), 1u);
    const auto d = pkt::decode(out[0]);
    ASSERT_TRUE(d.ok()) << d.error;
    EXPECT_EQ(d.src.str(), k.vip);
    EXPECT_EQ(d.dst.str(), k.client);
    EXPECT_EQ(d.sport, 80);
    EXPECT_EQ(d.dport, 7001);
    EXPECT_EQ(d.tcp_flags, pkt::kTcpRst | pkt::kTcpAck);
    EXPECT_EQ(d.tcp_seq, 0u);
    EXPECT_EQ(d.tcp_ack, k.want_ack);
    EXPECT_EQ(d.tcp_window, 0);
    EXPECT_EQ(d.payload_len, 0u);
    EXPECT_EQ(d.eth_dst, kRouter);
    EXPECT_EQ(d.eth_src, kGw);
    const auto ck = pkt::verify_checksums(out[0]);
    EXPECT_EQ(ck.l4, pkt::CsumState::kValid);
    EXPECT_EQ(h.drops(Drop::kDraining), 1u) << "the refusal is still counted";
    EXPECT_EQ(h.counters().resets_sent, 1u);
    EXPECT_EQ(h.counters().flows_created, 0u);
  }
}

TEST(WorkerDrain, only_a_bare_syn_is_answered_other_flowless_segments_are_dropped_silently) {
  DataplaneHarness h(test::kDemoTopology);
  h.worker().set_draining(true);
  // A mid-stream segment may belong to a connection another gateway holds: no RST for it.
  EXPECT_TRUE(h.send(tcp_frame("192.0.2.73", 7003, "203.0.113.10", 80, pkt::kTcpAck), kT0).empty());
  EXPECT_TRUE(h.send(tcp_frame("192.0.2.73", 7004, "203.0.113.10", 80, pkt::kTcpRst), kT0 + 1).empty());
  EXPECT_EQ(h.counters().resets_sent, 0u);
  // UDP has no reset.
  EXPECT_TRUE(h.send(udp_frame("192.0.2.73", 7005, "203.0.113.10", 53), kT0 + 2).empty());
  EXPECT_EQ(h.counters().resets_sent, 0u);
}

TEST(WorkerDrain, established_gauge_follows_the_handshake_and_the_close) {
  DataplaneHarness h(test::kDemoTopology);
  const auto fwd = h.send(tcp_frame("192.0.2.72", 7002, "203.0.113.10", 80, pkt::kTcpSyn), kT0);
  const std::string be = pkt::decode(fwd.at(0)).dst.str();
  const pkt::EthHdr from_backend{kGw, kBackendMac.at(be)};
  h.send(tcp_frame(be.c_str(), 8080, "192.0.2.72", 7002, pkt::kTcpSyn | pkt::kTcpAck, 64, from_backend), kT0 + 1);
  h.send(tcp_frame("192.0.2.72", 7002, "203.0.113.10", 80, pkt::kTcpAck), kT0 + 2);
  EXPECT_EQ(h.worker().flows().established(), 1u);
  EXPECT_EQ(h.counters().flows_established, 1u);
  h.send(tcp_frame("192.0.2.72", 7002, "203.0.113.10", 80, pkt::kTcpFin | pkt::kTcpAck), kT0 + 3);
  EXPECT_EQ(h.worker().flows().established(), 0u);
}

}  // namespace
}  // namespace meshgate
