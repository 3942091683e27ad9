// Golden pcap replay: pcapgen's golden profile (and a small hand-written table) through the real
// meshgate binary, every output frame compared byte for byte with the frame an independent
// oracle (oracle.h) expects, and every counter of --stats-json checked against the oracle and
// against pcapgen's sidecar.
//
// Each test generates, replays and checks in its own temporary directory (removed at the end).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "control/config/config.h"
#include "tests/golden/oracle.h"
#include "tests/golden/replay_support.h"
#include "tools/pktlib/decode.h"
#include "tools/pktlib/pcap.h"

namespace meshgate::golden {
namespace {

using pkt::Bytes;

// Hex dump of both frames, one 16-byte line each, lines that differ marked with '*'.
std::string frame_diff(const Bytes& want, const Bytes& got) {
  std::ostringstream s;
  size_t first = std::min(want.size(), got.size());
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    if (want[i] != got[i]) {
      first = i;
      break;
    }
  }
  s << "expected " << want.size() << " bytes, got " << got.size() << "; first difference at byte "
    << first << "\n";
  const size_t n = std::max(want.size(), got.size());
  char buf[24];
  for (size_t line = 0; line < n; line += 16) {
    std::string w, g;
    bool differs = false;
    for (size_t i = line; i < line + 16; ++i) {
      const bool hw = i < want.size(), hg = i < got.size();
      if (hw) std::snprintf(buf, sizeof buf, "%02x ", want[i]);
      w += hw ? buf : "   ";
      if (hg) std::snprintf(buf, sizeof buf, "%02x ", got[i]);
      g += hg ? buf : "   ";
      differs |= hw != hg || (hw && want[i] != got[i]);
    }
    std::snprintf(buf, sizeof buf, "%04zx", line);
    s << (differs ? "* " : "  ") << buf << "  want " << w << "\n"
      << (differs ? "* " : "  ") << "      got  " << g << "\n";
  }
  return s.str();
}

std::string checksum_report(const Bytes& f) {
  const auto r = pkt::verify_checksums(f);
  return std::string("ipv4 ") + pkt::csum_state_name(r.ipv4) + ", l4 " + pkt::csum_state_name(r.l4);
}

// Generates nothing itself: runs meshgate on `input` and builds the oracle's table for it.
class ReplayFixture : public ::testing::Test {
 protected:
  void load_config() {
    auto c = ctl::load_config(demo_config().string());
    ASSERT_TRUE(c.ok()) << c.error().str();
    cfg_ = std::move(c.value());
  }

  // Replays dir_/in.pcap into dir_/out.pcap and loads everything.
  void replay() {
    const auto mg = run_meshgate(demo_config(), dir_ / "in.pcap", dir_ / "out.pcap",
                                 dir_ / "stats.json", dir_);
    ASSERT_EQ(mg.exit_code, 0) << mg.report << environment_hint();
    std::string err;
    in_ = read_pcap(dir_ / "in.pcap", &err);
    ASSERT_TRUE(err.empty()) << err;
    out_ = read_pcap(dir_ / "out.pcap", &err);
    ASSERT_TRUE(err.empty()) << err;
    stats_ = read_json(dir_ / "stats.json", &err);
    ASSERT_TRUE(err.empty()) << err;
    Oracle oracle(cfg_);
    for (const auto& rec : in_) table_.push_back(oracle.next(rec.frame));
    totals_ = oracle.totals();
  }

  // Every frame meshgate wrote, in order, equals the oracle's next expected output.
  void expect_output_matches_table() {
    std::vector<const Expectation*> sending;
    for (const auto& e : table_) {
      if (e.sends()) sending.push_back(&e);
    }
    EXPECT_EQ(out_.size(), sending.size())
        << "output frames: the oracle expects one per forwarded / answered input frame";
    const size_t n = std::min(out_.size(), sending.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < n; ++i) {
      const Expectation& e = *sending[i];
      if (out_[i].frame == e.output) continue;
      // Details for the first few only: one fault usually repeats in every similar frame.
      if (++mismatches > 5) continue;
      ADD_FAILURE() << "output frame " << i << " (input record " << e.index << ", "
                    << e.description << ")\n  expected checksums " << checksum_report(e.output)
                    << "\n  got checksums      " << checksum_report(out_[i].frame) << "\n"
                    << frame_diff(e.output, out_[i].frame);
    }
    EXPECT_EQ(mismatches, 0u) << "of " << n << " output frames compared";
    if (out_.size() > n) {
      ADD_FAILURE() << "unexpected extra output frame " << n << ":\n"
                    << frame_diff({}, out_[n].frame);
    }
    if (sending.size() > n) {
      ADD_FAILURE() << "missing output for input record " << sending[n]->index << " ("
                    << sending[n]->description << ")";
    }
  }

  // The oracle's own frames: every IP one carries right checksums (it recomputes them all).
  void expect_oracle_outputs_have_valid_checksums() {
    for (const auto& e : table_) {
      if (!e.sends()) continue;
      const auto r = pkt::verify_checksums(e.output);
      const bool ip = pkt::decode(e.output).is_ip();
      EXPECT_TRUE(r.ok() && (!ip || r.l4 != pkt::CsumState::kAbsent))
          << "oracle output for record " << e.index << " (" << e.description
          << ") has checksums " << checksum_report(e.output);
    }
  }

  TempDir dir_;
  ctl::Config cfg_;
  std::vector<PcapRecord> in_, out_;
  nlohmann::json stats_;
  std::vector<Expectation> table_;
  OracleTotals totals_;
};

// ---- the golden profile ----------------------------------------------------------------------

class GoldenReplay : public ReplayFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(load_config());
    const auto gen = run_pcapgen(demo_config(), profile_path("golden"), dir_ / "in.pcap", dir_);
    ASSERT_EQ(gen.exit_code, 0) << gen.report << environment_hint();
    std::string err;
    sidecar_ = read_json(dir_ / "in.pcap.json", &err);
    ASSERT_TRUE(err.empty()) << err;
    ASSERT_NO_FATAL_FAILURE(replay());
    ASSERT_EQ(in_.size(), count(sidecar_, "packets"));
  }

  nlohmann::json sidecar_;
};

TEST_F(GoldenReplay, oracle_models_every_input_frame_and_agrees_with_the_sidecar) {
  // The oracle keeps flows forever: valid while the capture is shorter than every timeout.
  const auto& ct = cfg_.conntrack;
  const uint64_t min_timeout_s =
      std::min({ct.tcp_syn, ct.tcp_established, ct.tcp_fin, ct.tcp_time_wait, ct.udp, ct.icmp,
                10u /* the RST (close) timeout is min(tcp_time_wait, 10 s) */});
  ASSERT_LT(in_.back().ts_ns - in_.front().ts_ns, min_timeout_s * 1'000'000'000ull)
      << "the capture outlasts a conntrack timeout: the oracle does not model expiry";

  std::map<Verdict, size_t> verdicts;
  for (const auto& e : table_) {
    ++verdicts[e.verdict];
    EXPECT_NE(e.verdict, Verdict::kUnmodelled) << "input record " << e.index << ": " << e.description;
  }
  expect_oracle_outputs_have_valid_checksums();
  // The profile must exercise every kind of verdict the golden test compares.
  for (Verdict v : {Verdict::kForward, Verdict::kReverse, Verdict::kEchoReply, Verdict::kDrop,
                    Verdict::kIcmpError}) {
    EXPECT_GT(verdicts[v], 0u) << "the golden profile has no " << verdict_name(v) << " frame";
  }

  // Drops: exactly the malformed frames, one reason each.
  std::map<std::string, uint64_t> sidecar_malformed;
  for (const auto& [reason, n] : sidecar_.at("malformed").items()) {
    sidecar_malformed[reason] = n.get<uint64_t>();
  }
  EXPECT_EQ(totals_.drops, sidecar_malformed);

  // Flows, backends, packets: the oracle's Maglev choices equal pcapgen's predictions.
  uint64_t sidecar_flows = 0;
  for (const auto& [name, svc] : sidecar_.at("services").items()) {
    sidecar_flows += count(svc, "flows");
    ASSERT_TRUE(totals_.backends.count(name)) << "sidecar service " << name;
    for (const auto& [ep, b] : svc.at("backends").items()) {
      ASSERT_TRUE(totals_.backends.at(name).count(ep)) << name << " " << ep;
      const BackendTotals& o = totals_.backends.at(name).at(ep);
      EXPECT_EQ(o.flows, count(b, "flows")) << name << " " << ep;
      EXPECT_EQ(o.packets, count(b, "packets") + count(b, "reply_packets")) << name << " " << ep;
    }
  }
  EXPECT_EQ(totals_.flows, sidecar_flows);
  uint64_t echo = 0;
  for (const auto& [addr, n] : sidecar_.at("icmp_echo").items()) echo += n.get<uint64_t>();
  EXPECT_EQ(totals_.echo_replies, echo);
}

TEST_F(GoldenReplay, every_output_frame_equals_the_oracle_frame_in_input_order) {
  expect_output_matches_table();
}

TEST_F(GoldenReplay, counters_add_up_and_drops_per_reason_equal_the_sidecar_and_the_oracle) {
  expect_counters_add_up(stats_, in_.size());
  EXPECT_EQ(count(stats_, "packets_out"), out_.size()) << "packets_out vs records in --pcap-out";
  EXPECT_EQ(count(stats_, "packets_out"), totals_.sent);
  expect_drops_equal_sidecar(stats_, sidecar_);
  for (const auto& [reason, n] : stats_.at("drops").items()) {
    const uint64_t want = totals_.drops.count(reason) ? totals_.drops.at(reason) : 0;
    EXPECT_EQ(n.get<uint64_t>(), want) << "drops." << reason << " vs the oracle";
  }
  for (const auto& [reason, n] : totals_.drops) {
    EXPECT_TRUE(stats_.at("drops").contains(reason)) << "the oracle drops " << n
                                                     << " frames as unknown reason " << reason;
  }
}

TEST_F(GoldenReplay, flows_and_per_backend_counters_equal_the_oracle) {
  uint64_t sidecar_flows = 0;
  for (const auto& [name, svc] : sidecar_.at("services").items()) sidecar_flows += count(svc, "flows");
  EXPECT_EQ(count(stats_, "flows_created"), totals_.flows);
  EXPECT_EQ(count(stats_, "flows_created"), sidecar_flows);
  EXPECT_EQ(count(stats_, "flows_active"), totals_.flows) << "nothing expires in the capture";
  EXPECT_EQ(count(stats_, "flows_expired"), 0u);
  EXPECT_EQ(count(stats_, "echo_replies"), totals_.echo_replies);
  EXPECT_EQ(count(stats_, "arp_replies"), totals_.arp_replies);
  EXPECT_EQ(count(stats_, "nd_adverts"), 0u);

  const auto& services = stats_.at("services");
  EXPECT_EQ(services.size(), totals_.backends.size());
  for (const auto& [name, backends] : totals_.backends) {
    ASSERT_TRUE(services.contains(name)) << "service " << name << " missing from the stats";
    const auto& sj = services.at(name);
    EXPECT_EQ(sj.at("backends").size(), backends.size()) << name;
    uint64_t packets = 0, flows = 0;
    for (const auto& [ep, o] : backends) {
      SCOPED_TRACE(name + " " + ep);
      ASSERT_TRUE(sj.at("backends").contains(ep));
      const auto& bj = sj.at("backends").at(ep);
      EXPECT_EQ(count(bj, "flows"), o.flows);
      EXPECT_EQ(count(bj, "packets"), o.packets);
      EXPECT_EQ(count(bj, "bytes"), o.bytes);
      EXPECT_EQ(count(bj, "reply_bytes"), o.reply_bytes);
      packets += o.packets;
      flows += o.flows;
    }
    EXPECT_EQ(count(sj, "packets"), packets) << name;
    EXPECT_EQ(count(sj, "flows"), flows) << name;
  }
}

// ---- a hand-written table: what the generated traffic does not contain ------------------------

IpAddr A(const char* s) { return *IpAddr::parse(s); }
MacAddr M(const char* s) { return *MacAddr::parse(s); }

const MacAddr kGw = M("02:00:00:00:00:01");
const MacAddr kRouter = M("02:00:00:00:00:fe");
const MacAddr kBackend11 = M("02:00:00:00:01:11");
const pkt::EthHdr kToGw{kGw, kRouter};
constexpr uint64_t kT0 = 1'704'067'200'000'000'000ull;  // 2024-01-01T00:00:00Z, ns

struct Row {
  const char* description;
  Bytes input;
  Verdict verdict;
  const char* drop_reason;  // kDrop and kIcmpError
};

Bytes arp_request(const char* target) {
  pkt::ArpHdr a;
  a.op = 1;
  a.sha = kRouter;
  a.spa = A("198.51.100.254");
  a.tpa = A(target);
  return pkt::build_arp({pkt::broadcast_mac(), kRouter}, a);
}

Bytes tcp(const char* src, uint16_t sport, const char* dst, uint16_t dport, uint8_t flags,
          uint8_t ttl = 64, size_t payload = 0, const pkt::EthHdr& eth = kToGw) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  ip.ttl = ttl;
  ip.id = 0x1234;
  ip.df = true;
  pkt::TcpHdr t;
  t.sport = sport;
  t.dport = dport;
  t.flags = flags;
  t.seq = 0x01020304;
  t.ack = flags & pkt::kTcpAck ? 0x0a0b0c0d : 0;
  Bytes data(payload);
  for (size_t i = 0; i < payload; ++i) data[i] = uint8_t(i * 7 + 1);
  return pkt::build_tcp(eth, ip, t, data);
}

Bytes udp(const char* src, uint16_t sport, const char* dst, uint16_t dport, pkt::Csum csum,
          const pkt::EthHdr& eth = kToGw) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  pkt::UdpHdr u;
  u.sport = sport;
  u.dport = dport;
  u.csum = csum;
  return pkt::build_udp(eth, ip, u, Bytes{'q', 'u', 'e', 'r', 'y'});
}

Bytes echo(const char* src, const char* dst, uint8_t ttl) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  ip.ttl = ttl;
  return pkt::build_icmp_echo(kToGw, ip, false, 0x4242, 9, Bytes(56, 0x5a));
}

std::vector<Row> hand_rows() {
  std::vector<Row> v;
  v.push_back({"ARP request for the IPv4 VIP", arp_request("203.0.113.10"), Verdict::kArpReply, ""});
  v.push_back({"ARP request for the port address", arp_request("198.51.100.1"), Verdict::kArpReply, ""});
  v.push_back({"ARP request for an address nobody here owns", arp_request("198.51.100.77"),
               Verdict::kDrop, "arp_not_for_us"});
  {
    pkt::ArpHdr a;
    a.op = 2;
    a.sha = kBackend11;
    a.spa = A("198.51.100.11");
    a.tha = kGw;
    a.tpa = A("198.51.100.1");
    v.push_back({"ARP reply from a backend", pkt::build_arp({kGw, kBackend11}, a),
                 Verdict::kConsumed, ""});
  }
  v.push_back({"echo request with TTL 1 to the port address (local delivery)",
               echo("192.0.2.60", "198.51.100.1", 1), Verdict::kEchoReply, ""});
  v.push_back({"echo request to the IPv6 VIP", echo("2001:db8:2::60", "2001:db8:100::10", 64),
               Verdict::kEchoReply, ""});
  v.push_back({"echo request to a transit address", echo("192.0.2.60", "203.0.113.99", 64),
               Verdict::kDrop, "no_service"});
  {
    pkt::IpHdr ip;
    ip.src = A("192.0.2.60");
    ip.dst = A("203.0.113.10");
    pkt::IcmpHdr ic;
    ic.type = 13;  // timestamp request (RFC 792)
    v.push_back({"ICMP timestamp request to the VIP", pkt::build_icmp(kToGw, ip, ic, Bytes(12, 0)),
                 Verdict::kDrop, "l4_unsupported"});
  }
  v.push_back({"SYN to the VIP on a port without a service",
               tcp("192.0.2.61", 41000, "203.0.113.10", 443, pkt::kTcpSyn), Verdict::kDrop,
               "no_service"});
  v.push_back({"UDP to the port address", udp("192.0.2.61", 41000, "198.51.100.1", 53, pkt::Csum::kValid),
               Verdict::kDrop, "local_unhandled"});
  v.push_back({"reply from a backend without a flow",
               tcp("198.51.100.11", 8080, "192.0.2.62", 41000, pkt::kTcpSyn | pkt::kTcpAck, 64, 0,
                   {kGw, kBackend11}),
               Verdict::kDrop, "reply_no_flow"});
  v.push_back({"SYN to web6 with hop limit 1 (answered with ICMPv6 time exceeded)",
               tcp("2001:db8:2::61", 41000, "2001:db8:100::10", 80, pkt::kTcpSyn, 1),
               Verdict::kIcmpError, "ttl_exceeded"});
  v.push_back({"SYN to web with TTL 2 (forwarded with TTL 1)",
               tcp("192.0.2.63", 41001, "203.0.113.10", 80, pkt::kTcpSyn, 2), Verdict::kForward, ""});
  v.push_back({"UDP to dns without a checksum (stays without one)",
               udp("192.0.2.63", 41002, "203.0.113.10", 53, pkt::Csum::kZero), Verdict::kForward, ""});
  v.push_back({"full-size segment to web (IP packet = MTU 1500)",
               tcp("192.0.2.63", 41003, "203.0.113.10", 80, pkt::kTcpAck, 64, 1460),
               Verdict::kForward, ""});
  v.push_back({"segment to web one byte over the MTU, DF set (fragmentation needed back)",
               tcp("192.0.2.63", 41004, "203.0.113.10", 80, pkt::kTcpAck, 64, 1461),
               Verdict::kIcmpError, "mtu_exceeded"});
  {
    pkt::EthHdr tagged = kToGw;
    tagged.vlan_tci = 100;
    v.push_back({"SYN to web in an 802.1Q tag (tag kept)",
                 tcp("192.0.2.64", 41005, "203.0.113.10", 80, pkt::kTcpSyn, 64, 0, tagged),
                 Verdict::kForward, ""});
  }
  return v;
}

class HandTableReplay : public ReplayFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(load_config());
    rows_ = hand_rows();
    auto w = pkt::PcapWriter::open((dir_ / "in.pcap").string());
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (size_t i = 0; i < rows_.size(); ++i) {
      ASSERT_TRUE(w->write(kT0 + i * 1'000'000ull, rows_[i].input));
    }
    ASSERT_TRUE(w->close().ok());
    ASSERT_NO_FATAL_FAILURE(replay());
    ASSERT_EQ(table_.size(), rows_.size());
  }
  std::vector<Row> rows_;
};

TEST_F(HandTableReplay, each_row_gets_its_verdict_and_the_oracle_output_frame) {
  for (size_t i = 0; i < rows_.size(); ++i) {
    SCOPED_TRACE(rows_[i].description);
    EXPECT_EQ(verdict_name(table_[i].verdict), std::string(verdict_name(rows_[i].verdict)))
        << table_[i].description;
    EXPECT_EQ(table_[i].drop_reason, rows_[i].drop_reason);
  }
  expect_oracle_outputs_have_valid_checksums();
  expect_output_matches_table();
  uint64_t consumed = 0;
  for (const auto& r : rows_) consumed += r.verdict == Verdict::kConsumed;
  expect_counters_add_up(stats_, rows_.size(), consumed);
  for (const auto& [reason, n] : stats_.at("drops").items()) {
    const uint64_t want = totals_.drops.count(reason) ? totals_.drops.at(reason) : 0;
    EXPECT_EQ(n.get<uint64_t>(), want) << "drops." << reason;
  }
  EXPECT_EQ(count(stats_, "arp_replies"), totals_.arp_replies);
  EXPECT_EQ(count(stats_, "echo_replies"), totals_.echo_replies);
  EXPECT_EQ(count(stats_, "flows_created"), totals_.flows);
}

}  // namespace
}  // namespace meshgate::golden
