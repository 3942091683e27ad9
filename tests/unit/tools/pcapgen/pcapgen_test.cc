// tools/pcapgen: the malformation table, and the pcapgen binary end to end (determinism, the
// sidecar against the capture, replies from the predicted backend, the committed profiles).
//
// The capture is checked with pktlib's decoder and with this file's own bookkeeping; backends
// are predicted here from the config with the dataplane's lb functions.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "control/config/config.h"
#include "control/snapshot/maglev.h"
#include "dataplane/drop_reasons.h"
#include "dataplane/lb/lb.h"
#include "dataplane/packet/parse.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/checksum.h"
#include "tools/pktlib/decode.h"
#include "tools/pktlib/malformed.h"
#include "tools/pktlib/pcap.h"

namespace meshgate {
namespace {

using pkt::Bytes;
using pkt::Decoded;
using Json = nlohmann::json;

const std::string kPcapgen = std::string(MG_BINARY_DIR) + "/tools/pcapgen/pcapgen";
const std::string kSourceDir = MG_SOURCE_DIR;

IpAddr ip(const char* s) { return *IpAddr::parse(s); }
MacAddr mac(const char* s) { return *MacAddr::parse(s); }

// ---------------------------------------------------------------------------------------------
// The malformation table.

// Every single-packet drop reason the brief asks pcapgen to produce.
const std::set<std::string> kExpectedKinds = {
    "eth_truncated", "vlan_truncated", "vlan_stacked", "ethertype_unsupported", "l2_not_for_us",
    "arp_truncated", "arp_unsupported", "ipv4_truncated", "ipv4_bad_version", "ipv4_bad_ihl",
    "ipv4_bad_total_length", "ipv4_bad_checksum", "ipv4_bad_source", "ipv6_truncated",
    "ipv6_bad_version", "ipv6_bad_payload_length", "ipv6_ext_truncated",
    "ipv6_ext_chain_too_long", "ipv6_bad_source", "tcp_truncated", "tcp_bad_data_offset",
    "tcp_bad_option", "tcp_bad_flags", "udp_truncated", "udp_bad_length", "icmp_truncated",
    "icmp6_truncated", "icmp_bad_checksum", "ttl_exceeded", "no_service", "l4_unsupported",
    "fragment_unsupported", "fragment_no_first"};

// Faults that are forwarding decisions: the frame itself parses cleanly.
const std::set<std::string> kDecisionKinds = {
    "l2_not_for_us", "icmp_bad_checksum", "fragment_unsupported", "fragment_no_first",
    "l4_unsupported", "no_service",       "ttl_exceeded"};

pkt::MalformedContext test_context() {
  pkt::MalformedContext c;
  c.gateway_mac = mac("02:00:00:00:00:01");
  c.peer_mac = mac("02:00:00:00:00:fe");
  c.peer4 = ip("198.51.100.254");
  c.client4 = ip("192.0.2.7");
  c.client6 = ip("2001:db8:2::7");
  c.client_port = 41000;
  c.seq = 0x10203040;
  c.service4 = pkt::Endpoint{ip("203.0.113.10"), 80};
  c.service6 = pkt::Endpoint{ip("2001:db8:100::10"), 80};
  c.udp_service4 = pkt::Endpoint{ip("203.0.113.10"), 53};
  c.local4 = ip("198.51.100.1");
  c.local6 = ip("2001:db8:1::1");
  c.transit4 = pkt::Endpoint{ip("203.0.113.99"), 80};
  return c;
}

bool tcp_checksum_ok(const Bytes& f, size_t l4_off, size_t l4_len, const IpAddr& src,
                     const IpAddr& dst) {
  return pkt::csum_valid({f.data() + l4_off, l4_len},
                         pkt::pseudo_header_sum(src, dst, pkt::kProtoTcp, uint32_t(l4_len)));
}

// A valid SYN from the client to `to`, as the decoder sees it.
void expect_syn_to(const Decoded& d, const pkt::Endpoint& to) {
  EXPECT_EQ(d.dst, to.addr);
  EXPECT_EQ(d.dport, to.port);
  EXPECT_EQ(d.l4_proto, pkt::kProtoTcp);
  EXPECT_TRUE(d.tcp_flags & pkt::kTcpSyn);
}

using Check = std::function<void(const Bytes&, const Decoded&, const pkt::MalformedContext&)>;

// What each kind's frame must look like, beyond "decodes to its own name".
const std::map<std::string, Check>& kind_checks() {
  static const std::map<std::string, Check> checks = {
      {"eth_truncated",
       [](const Bytes& f, const Decoded&, const auto&) { EXPECT_LT(f.size(), 14u); }},
      {"vlan_truncated",
       [](const Bytes& f, const Decoded&, const auto&) {
         ASSERT_EQ(f.size(), 16u);
         EXPECT_EQ(pkt::get16(&f[12]), pkt::kEtherVlan);
       }},
      {"vlan_stacked",
       [](const Bytes& f, const Decoded&, const auto& c) {
         ASSERT_GT(f.size(), 22u);
         EXPECT_EQ(pkt::get16(&f[12]), pkt::kEtherVlan);
         EXPECT_EQ(pkt::get16(&f[16]), pkt::kEtherVlan);
         Bytes one_tag = f;  // without the second tag it is a valid tagged SYN
         one_tag.erase(one_tag.begin() + 16, one_tag.begin() + 20);
         const Decoded d = pkt::decode(one_tag);
         ASSERT_TRUE(d.ok()) << d.error;
         EXPECT_EQ(d.vlan_tags, 1);
         expect_syn_to(d, *c.service4);
         EXPECT_TRUE(pkt::verify_checksums(one_tag).ok());
       }},
      {"l2_not_for_us",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_NE(d.eth_dst, c.gateway_mac);
         EXPECT_FALSE(d.eth_dst.is_multicast());
         expect_syn_to(d, *c.service4);
         EXPECT_TRUE(pkt::verify_checksums(f).ok());
       }},
      {"ethertype_unsupported",
       [](const Bytes&, const Decoded& d, const auto&) {
         EXPECT_NE(d.ethertype, pkt::kEtherIpv4);
         EXPECT_NE(d.ethertype, pkt::kEtherIpv6);
         EXPECT_NE(d.ethertype, pkt::kEtherArp);
       }},
      {"arp_truncated",
       [](const Bytes& f, const Decoded& d, const auto&) {
         EXPECT_EQ(d.ethertype, pkt::kEtherArp);
         ASSERT_EQ(f.size(), 14u + 20);
         EXPECT_EQ(Bytes(f.begin() + 14, f.begin() + 22), (Bytes{0, 1, 8, 0, 6, 4, 0, 1}));
       }},
      {"arp_unsupported",
       [](const Bytes&, const Decoded& d, const auto& c) {
         EXPECT_NE(d.arp_htype, 1);
         EXPECT_EQ(d.arp_ptype, pkt::kEtherIpv4);
         EXPECT_EQ(d.arp_op, 1);
         EXPECT_EQ(d.arp_tpa, *c.local4);
       }},
      {"ipv4_truncated",
       [](const Bytes& f, const Decoded& d, const auto&) {
         EXPECT_EQ(d.ethertype, pkt::kEtherIpv4);
         EXPECT_LT(f.size(), 14u + 20);
       }},
      {"ipv4_bad_version",
       [](const Bytes& f, const Decoded&, const auto&) {
         EXPECT_EQ(f[14] >> 4, 6);
         EXPECT_TRUE(pkt::csum_valid({&f[14], 20}));
       }},
      {"ipv4_bad_ihl",
       [](const Bytes& f, const Decoded&, const auto&) {
         EXPECT_EQ(f[14] >> 4, 4);
         EXPECT_LT(f[14] & 0x0f, 5);
         EXPECT_TRUE(pkt::csum_valid({&f[14], 20}));
       }},
      {"ipv4_bad_total_length",
       [](const Bytes& f, const Decoded&, const auto&) {
         EXPECT_GT(pkt::get16(&f[16]), f.size() - 14);
         EXPECT_TRUE(pkt::csum_valid({&f[14], 20}));
       }},
      {"ipv4_bad_checksum",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         expect_syn_to(d, *c.service4);
         const auto r = pkt::verify_checksums(f);
         EXPECT_EQ(r.ipv4, pkt::CsumState::kInvalid);
         EXPECT_EQ(r.l4, pkt::CsumState::kValid);
       }},
      {"ipv4_bad_source",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.src.v4_host() >> 28, 0xeu);  // multicast
         expect_syn_to(d, *c.service4);
         EXPECT_TRUE(pkt::verify_checksums(f).ok());
       }},
      {"ipv6_truncated",
       [](const Bytes& f, const Decoded& d, const auto&) {
         EXPECT_EQ(d.ethertype, pkt::kEtherIpv6);
         EXPECT_LT(f.size(), 14u + 40);
       }},
      {"ipv6_bad_version", [](const Bytes& f, const Decoded&, const auto&) { EXPECT_EQ(f[14] >> 4, 4); }},
      {"ipv6_bad_payload_length",
       [](const Bytes& f, const Decoded&, const auto&) {
         EXPECT_EQ(f[14] >> 4, 6);
         EXPECT_GT(pkt::get16(&f[18]), f.size() - 54);
       }},
      {"ipv6_ext_truncated",
       [](const Bytes& f, const Decoded&, const auto&) {
         EXPECT_EQ(f[20], pkt::kProtoHopByHop);
         const size_t plen = pkt::get16(&f[18]);
         EXPECT_EQ(f.size(), 54 + plen);  // the payload length itself is right
         EXPECT_GT((f[55] + 1u) * 8, plen);
       }},
      {"ipv6_ext_chain_too_long",
       [](const Bytes& f, const Decoded&, const auto& c) {
         size_t off = 54;
         uint8_t nh = f[20];
         int n = 0;
         while (nh == pkt::kProtoDestOpts) {
           nh = f[off];
           off += (f[off + 1] + 1u) * 8;
           ++n;
         }
         EXPECT_GT(n, dp::kMaxIpv6ExtHeaders);
         EXPECT_EQ(nh, pkt::kProtoTcp);
         EXPECT_EQ(pkt::get16(&f[off + 2]), c.service6->port);
         EXPECT_TRUE(tcp_checksum_ok(f, off, f.size() - off, c.client6, c.service6->addr));
       }},
      {"ipv6_bad_source",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.src.b[0], 0xff);
         expect_syn_to(d, *c.service6);
         EXPECT_TRUE(pkt::verify_checksums(f).ok());
       }},
      {"tcp_truncated",
       [](const Bytes&, const Decoded& d, const auto&) {
         EXPECT_EQ(d.l4_proto, pkt::kProtoTcp);
         EXPECT_LT(d.l4_len, 20u);
       }},
      {"tcp_bad_data_offset",
       [](const Bytes& f, const Decoded& d, const auto&) {
         EXPECT_LT(d.tcp_hdr_len, 20);
         EXPECT_EQ(pkt::verify_checksums(f).l4, pkt::CsumState::kValid);
       }},
      {"tcp_bad_option",
       [](const Bytes& f, const Decoded& d, const auto&) {
         ASSERT_GT(d.tcp_hdr_len, 20);
         const size_t opt = d.l4_off + 20;
         EXPECT_GT(opt + f[opt + 1], d.l4_off + d.tcp_hdr_len);  // runs past the options
         EXPECT_EQ(pkt::verify_checksums(f).l4, pkt::CsumState::kValid);
       }},
      {"tcp_bad_flags",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.tcp_flags & (pkt::kTcpSyn | pkt::kTcpFin), pkt::kTcpSyn | pkt::kTcpFin);
         expect_syn_to(d, *c.service4);
         EXPECT_TRUE(pkt::verify_checksums(f).ok());
       }},
      {"udp_truncated",
       [](const Bytes&, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.l4_proto, pkt::kProtoUdp);
         EXPECT_LT(d.l4_len, 8u);
         EXPECT_EQ(d.dst, c.udp_service4->addr);
       }},
      {"udp_bad_length",
       [](const Bytes&, const Decoded& d, const auto& c) {
         EXPECT_GT(d.udp_length, d.l4_len);
         EXPECT_EQ(d.dport, c.udp_service4->port);
       }},
      {"icmp_truncated",
       [](const Bytes&, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.l4_proto, pkt::kProtoIcmp);
         EXPECT_LT(d.l4_len, 4u);
         EXPECT_EQ(d.dst, *c.local4);
       }},
      {"icmp6_truncated",
       [](const Bytes&, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.l4_proto, pkt::kProtoIcmp6);
         EXPECT_LT(d.l4_len, 4u);
         EXPECT_EQ(d.dst, *c.local6);
       }},
      {"icmp_bad_checksum",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.icmp_type, pkt::kIcmpEchoRequest);
         EXPECT_EQ(d.dst, *c.local4);
         const auto r = pkt::verify_checksums(f);
         EXPECT_EQ(r.ipv4, pkt::CsumState::kValid);
         EXPECT_EQ(r.l4, pkt::CsumState::kInvalid);
       }},
      {"fragment_unsupported",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_TRUE(d.fragment);
         EXPECT_GT(d.frag_offset, 0);
         EXPECT_FALSE(d.has_l4);
         EXPECT_EQ(d.dst, *c.local4);
         EXPECT_EQ(pkt::verify_checksums(f).ipv4, pkt::CsumState::kValid);
       }},
      {"fragment_no_first",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_TRUE(d.fragment);
         EXPECT_GT(d.frag_offset, 0);
         EXPECT_FALSE(d.has_l4);
         EXPECT_EQ(d.dst, c.service4->addr);
         EXPECT_EQ(pkt::verify_checksums(f).ipv4, pkt::CsumState::kValid);
       }},
      {"l4_unsupported",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.l4_proto, pkt::kProtoSctp);
         EXPECT_EQ(d.dst, c.service4->addr);
         EXPECT_EQ(d.dport, c.service4->port);
         Bytes sctp(f.begin() + long(d.l4_off), f.begin() + long(d.l4_off + d.l4_len));
         const uint32_t stored = uint32_t(sctp[8]) | uint32_t(sctp[9]) << 8 |
                                 uint32_t(sctp[10]) << 16 | uint32_t(sctp[11]) << 24;
         sctp[8] = sctp[9] = sctp[10] = sctp[11] = 0;
         EXPECT_EQ(stored, pkt::sctp_crc32c(sctp));
         EXPECT_EQ(pkt::verify_checksums(f).ipv4, pkt::CsumState::kValid);
       }},
      {"no_service",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         expect_syn_to(d, c.transit4);
         EXPECT_NE(d.dst, c.service4->addr);
         EXPECT_TRUE(pkt::verify_checksums(f).ok());
       }},
      {"ttl_exceeded",
       [](const Bytes& f, const Decoded& d, const auto& c) {
         EXPECT_EQ(d.ttl, 1);
         expect_syn_to(d, *c.service4);
         EXPECT_TRUE(pkt::verify_checksums(f).ok());
       }},
  };
  return checks;
}

TEST(MalformedTable, covers_exactly_the_expected_drop_reasons) {
  std::set<std::string> names;
  for (const auto& k : pkt::malformed_kinds()) {
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate " << k.name;
    bool is_drop = false;
    for (const char* d : dp::kDropNames) is_drop |= std::string(d) == k.name;
    EXPECT_TRUE(is_drop) << k.name << " is not a drop reason in drop_reasons.def";
    EXPECT_EQ(pkt::find_malformed(k.name), &k);
  }
  EXPECT_EQ(names, kExpectedKinds);
  EXPECT_EQ(pkt::find_malformed("no_such_reason"), nullptr);
}

TEST(MalformedTable, every_kind_has_exactly_its_fault) {
  const pkt::MalformedContext c = test_context();
  for (const auto& k : pkt::malformed_kinds()) {
    SCOPED_TRACE(k.name);
    ASSERT_TRUE(pkt::malformed_possible(k, c));
    const Bytes f = k.build(c);
    const Decoded d = pkt::decode(f);
    if (kDecisionKinds.count(k.name)) {
      EXPECT_TRUE(d.ok()) << "decodes as " << d.error;
    } else {
      ASSERT_NE(d.error, nullptr);
      EXPECT_STREQ(d.error, k.name);  // and no earlier fault, in decoding order
    }
    if (f.size() >= 6 && std::string(k.name) != "l2_not_for_us") {
      EXPECT_EQ(d.eth_dst, c.gateway_mac);
    }
    if (f.size() >= 12) {
      EXPECT_EQ(d.eth_src, c.peer_mac);
    }
    if (d.is_ip() && d.l4_off && !std::string(k.name).ends_with("bad_source")) {
      EXPECT_TRUE(d.src == c.client4 || d.src == c.client6) << d.src.str();
    }
    const auto it = kind_checks().find(k.name);
    ASSERT_NE(it, kind_checks().end()) << "no expectation for this kind in the test";
    it->second(f, d, c);
    // Deterministic: the same context gives the same bytes.
    EXPECT_EQ(k.build(c), f);
  }
}

TEST(MalformedTable, dataplane_parser_reports_the_same_fault) {
  const pkt::MalformedContext c = test_context();
  for (const auto& k : pkt::malformed_kinds()) {
    SCOPED_TRACE(k.name);
    const Bytes f = k.build(c);
    dp::PacketMeta meta;
    const dp::Drop got = dp::parse_packet(f.data(), uint32_t(f.size()), &meta, true);
    // The parser does not look at MACs and leaves forwarding decisions to later stages.
    if (kDecisionKinds.count(k.name)) {
      EXPECT_EQ(got, dp::Drop::kNone) << dp::drop_name(got);
    } else {
      EXPECT_STREQ(dp::drop_name(got), k.name);
    }
  }
}

TEST(MalformedTable, needs_are_reported) {
  pkt::MalformedContext c = test_context();
  c.service6.reset();
  c.local6.reset();
  EXPECT_FALSE(pkt::malformed_possible(*pkt::find_malformed("ipv6_bad_version"), c));
  EXPECT_FALSE(pkt::malformed_possible(*pkt::find_malformed("icmp6_truncated"), c));
  EXPECT_TRUE(pkt::malformed_possible(*pkt::find_malformed("ipv4_bad_version"), c));
  c.service4.reset();
  EXPECT_FALSE(pkt::malformed_possible(*pkt::find_malformed("ttl_exceeded"), c));
  EXPECT_TRUE(pkt::malformed_possible(*pkt::find_malformed("ipv4_bad_ihl"), c));  // local4
}

// ---------------------------------------------------------------------------------------------
// The binary.

constexpr const char* kTestConfig = R"toml(
[[port]]
name = "net0"
device = "net_null0"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]

[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"

[[route]]
prefix = "::/0"
via = "2001:db8:1::fe"

[[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:00:fe"

[[neighbor]]
address = "2001:db8:1::fe"
mac = "02:00:00:00:00:fd"

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
name = "web"
vip = "203.0.113.10"
port = 80
protocol = "tcp"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
  [[service.backend]]
  address = "198.51.100.13"
  port = 8080
  weight = 2
  [[service.backend]]
  address = "198.51.100.14"
  port = 8080
  weight = 0

[[service]]
name = "dns"
vip = "203.0.113.10"
port = 53
protocol = "udp"
table_size = 251
  [[service.backend]]
  address = "198.51.100.11"
  port = 5353
  [[service.backend]]
  address = "198.51.100.12"
  port = 5353

[[service]]
name = "web6"
vip = "2001:db8:100::10"
port = 80
protocol = "tcp"
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
  [[service.backend]]
  address = "2001:db8:1::12"
  port = 8080

[[service]]
name = "api"
vip = "203.0.113.20"
port = 443
protocol = "tcp"
mode = "fullnat"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443

[fullnat]
local_addresses = ["198.51.100.2"]
)toml";

constexpr const char* kTestProfile = R"toml(
seed = 3
rate_pps = 50000
start_ns = 1000000000000
concurrency = 16
size = "imix"

[[class]]
name = "web"
type = "tcp"
targets = ["web"]
flows = 120
data_packets = 2
close = "fin"

[[class]]
name = "web-rst"
type = "tcp"
targets = ["web"]
flows = 20
data_packets = 1
close = "rst"

[[class]]
name = "syn"
type = "tcp"
targets = ["web", "web6"]
flows = 20
shape = "syn_only"

[[class]]
name = "established"
type = "tcp"
targets = ["web"]
flows = 10
shape = "established"
data_packets = 2
close = "none"

[[class]]
name = "no-replies"
type = "tcp"
targets = ["web6"]
flows = 10
data_packets = 1
backend_replies = false

[[class]]
name = "dns"
type = "udp"
targets = ["dns"]
flows = 60
requests = 2
size = 100

[[class]]
name = "dns-vlan"
type = "udp"
targets = ["dns"]
flows = 5
vlan = 100

[[class]]
name = "api"
type = "tcp"
targets = ["api"]
flows = 10
data_packets = 1

[[class]]
name = "web6"
type = "tcp"
targets = ["web6"]
flows = 40
data_packets = 2

[[class]]
name = "ping"
type = "icmp"
targets = ["all", "local"]
flows = 8
requests = 2

[[class]]
name = "bad"
type = "malformed"
reasons = ["all"]
count = 2
)toml";

class PcapgenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pcapgen_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    write("config.toml", kTestConfig);
    write("profile.toml", kTestProfile);
    ASSERT_TRUE(std::filesystem::exists(kPcapgen))
        << kPcapgen << " is missing: build the pcapgen target";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(path(name)) << text;
  }
  std::string read(const std::string& p) const {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Runs pcapgen; returns its exit status. stderr goes to err_.
  int run(const std::string& args) {
    const std::string cmd = kPcapgen + " " + args + " 2>" + path("stderr.txt");
    const int status = std::system(cmd.c_str());
    err_ = read(path("stderr.txt"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int run_test_profile(const std::string& out, const std::string& extra = "") {
    return run("--config " + path("config.toml") + " --profile " + path("profile.toml") +
               " --out " + path(out) + " " + extra);
  }

  std::vector<std::pair<uint64_t, Bytes>> read_pcap(const std::string& name) {
    std::vector<std::pair<uint64_t, Bytes>> v;
    auto r = pkt::PcapReader::open(path(name));
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return v;
    EXPECT_TRUE(r->nanosecond());
    EXPECT_EQ(r->linktype(), pkt::kLinktypeEthernet);
    uint64_t ts;
    Bytes f;
    while (r->next(&ts, &f)) v.emplace_back(ts, f);
    EXPECT_TRUE(r->error().empty()) << r->error();
    return v;
  }

  Json sidecar(const std::string& name) { return Json::parse(read(path(name) + ".json")); }

  std::filesystem::path dir_;
  std::string err_;
};

// The test's own model of the config: services with their Maglev tables.
struct Model {
  struct Svc {
    ctl::ServiceConfig cfg;
    std::vector<ctl::LbBackend> lb;
    std::vector<uint32_t> table;
    uint32_t size = 0;
  };
  ctl::Config config;
  std::vector<Svc> services;
  MacAddr gw, router4, router6;
  IpAddr transit = ip("203.0.113.99");

  explicit Model(const std::string& config_path) {
    auto c = ctl::load_config(config_path);
    EXPECT_TRUE(c) << (c ? "" : c.error().str());
    config = *c;
    gw = *config.ports[0].mac;
    for (const auto& n : config.neighbors) {
      if (n.address == config.routes[0].via) router4 = n.mac;
      if (n.address == config.routes[1].via) router6 = n.mac;
    }
    for (const auto& s : config.services) {
      Svc v;
      v.cfg = s;
      for (const auto& b : s.backends) v.lb.push_back({b.address, b.port, b.weight});
      v.size = s.table_size ? s.table_size : ctl::lb_auto_table_size(v.lb.size());
      v.table = ctl::lb_build_table(v.lb, v.size);
      services.push_back(std::move(v));
    }
  }
  int service_of(const IpAddr& vip, uint16_t port, uint8_t proto) const {
    for (size_t i = 0; i < services.size(); ++i) {
      const auto& s = services[i].cfg;
      const uint8_t p = s.protocol == L4Proto::kTcp ? pkt::kProtoTcp : pkt::kProtoUdp;
      if (s.vip == vip && s.port == port && p == proto) return int(i);
    }
    return -1;
  }
  uint32_t predict(int svc, const IpAddr& client, uint16_t port) const {
    const Svc& s = services[svc];
    const uint8_t proto = s.cfg.protocol == L4Proto::kTcp ? pkt::kProtoTcp : pkt::kProtoUdp;
    return dp::lb_lookup(s.table.data(), s.size,
                         dp::lb_flow_hash(client, s.cfg.vip, htons(port), htons(s.cfg.port),
                                          proto));
  }
  const MacAddr* neighbor(const IpAddr& a) const {
    for (const auto& n : config.neighbors) {
      if (n.address == a) return &n.mac;
    }
    return nullptr;
  }
  bool is_vip(const IpAddr& a) const {
    for (const auto& s : services) {
      if (s.cfg.vip == a) return true;
    }
    return false;
  }
};

std::string endpoint(const IpAddr& a, uint16_t port) {
  return a.is_v4() ? a.str() + ":" + std::to_string(port)
                   : "[" + a.str() + "]:" + std::to_string(port);
}

// Which malformation a frame carries, decided from the frame alone; "" for normal traffic.
std::string fault_of(const Model& m, const Bytes& f, const Decoded& d) {
  if (!d.ok()) return d.error;
  if (d.eth_dst != m.gw) return "l2_not_for_us";
  if (!d.is_ip()) return "?";
  if (d.ttl == 1) return "ttl_exceeded";
  if (d.fragment) return m.is_vip(d.dst) ? "fragment_no_first" : "fragment_unsupported";
  if (d.l4_proto != pkt::kProtoTcp && d.l4_proto != pkt::kProtoUdp &&
      d.l4_proto != pkt::kProtoIcmp && d.l4_proto != pkt::kProtoIcmp6) {
    return "l4_unsupported";
  }
  if (d.dst == m.transit) return "no_service";
  if (d.l4_proto == pkt::kProtoIcmp && !pkt::verify_checksums(f).ok()) return "icmp_bad_checksum";
  return "";
}

struct FlowKey {
  IpAddr client;
  uint16_t port;
  uint8_t proto;
  auto operator<=>(const FlowKey&) const = default;
};

struct Tally {
  std::map<std::string, uint64_t> malformed;
  std::map<std::string, uint64_t> echo;
  std::map<FlowKey, int> flow_service;
  struct Count {
    std::set<FlowKey> flows;
    uint64_t packets = 0, replies = 0;
  };
  std::map<std::string, Count> services;
  std::map<std::string, std::map<std::string, Count>> backends;
  uint64_t client = 0, replies = 0, bad = 0;
};

// Walks the capture and checks every frame on the way: normal frames are well formed and go
// to or come from the right MACs, replies come from the predicted backend.
Tally tally(const Model& m, const std::vector<std::pair<uint64_t, Bytes>>& frames) {
  Tally t;
  for (size_t i = 0; i < frames.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    const Bytes& f = frames[i].second;
    const Decoded d = pkt::decode(f);
    const std::string fault = fault_of(m, f, d);
    if (!fault.empty()) {
      ++t.malformed[fault];
      ++t.bad;
      continue;
    }
    EXPECT_TRUE(pkt::verify_checksums(f).ok());
    EXPECT_EQ(d.eth_dst, m.gw);
    const uint8_t proto = d.l4_proto;
    if (proto == pkt::kProtoIcmp || proto == pkt::kProtoIcmp6) {
      EXPECT_EQ(d.icmp_type,
                proto == pkt::kProtoIcmp ? pkt::kIcmpEchoRequest : pkt::kIcmp6EchoRequest);
      EXPECT_EQ(d.eth_src, d.src.is_v4() ? m.router4 : m.router6);
      ++t.echo[d.dst.str()];
      ++t.client;
      continue;
    }
    const int svc = m.service_of(d.dst, d.dport, proto);
    if (svc >= 0) {  // client -> VIP
      EXPECT_EQ(d.eth_src, d.src.is_v4() ? m.router4 : m.router6);
      const FlowKey k{d.src, d.sport, proto};
      const auto [it, fresh] = t.flow_service.emplace(k, svc);
      EXPECT_EQ(it->second, svc) << "client tuple reused across services";
      const std::string name = m.services[svc].cfg.name;
      auto& sc = t.services[name];
      sc.flows.insert(k);
      ++sc.packets;
      const uint32_t b = m.predict(svc, d.src, d.sport);
      if (b != dp::kNoBackend) {
        const auto& be = m.services[svc].lb[b];
        auto& bc = t.backends[name][endpoint(be.address, be.port)];
        bc.flows.insert(k);
        ++bc.packets;
      }
      ++t.client;
      continue;
    }
    // Otherwise a backend's reply: to a client whose flow started earlier in the capture.
    const FlowKey k{d.dst, d.dport, proto};
    const auto it = t.flow_service.find(k);
    if (it == t.flow_service.end()) {
      ADD_FAILURE() << "frame to " << d.dst.str() << " is neither to a VIP nor a reply";
      continue;
    }
    const auto& s = m.services[it->second];
    EXPECT_EQ(s.cfg.mode, ctl::ForwardMode::kDnat) << "replies only for dnat services";
    const uint32_t b = m.predict(it->second, d.dst, d.dport);
    if (b == dp::kNoBackend) {
      ADD_FAILURE() << "reply in a flow the gateway has no backend for";
      continue;
    }
    EXPECT_EQ(d.src, s.lb[b].address) << "reply not from the predicted backend";
    EXPECT_EQ(d.sport, s.lb[b].port);
    const MacAddr* bm = m.neighbor(s.lb[b].address);
    EXPECT_TRUE(bm && d.eth_src == *bm) << "reply's source MAC is not the backend's neighbor";
    ++t.services[s.cfg.name].replies;
    ++t.backends[s.cfg.name][endpoint(s.lb[b].address, s.lb[b].port)].replies;
    ++t.replies;
  }
  return t;
}

TEST_F(PcapgenTest, same_seed_gives_identical_bytes) {
  ASSERT_EQ(run_test_profile("a.pcap"), 0) << err_;
  ASSERT_EQ(run_test_profile("b.pcap"), 0) << err_;
  const std::string a = read(path("a.pcap"));
  EXPECT_GT(a.size(), 10000u);
  EXPECT_EQ(a, read(path("b.pcap")));
  Json ja = sidecar("a.pcap"), jb = sidecar("b.pcap");
  ja.erase("pcap");
  jb.erase("pcap");
  EXPECT_EQ(ja, jb);
  ASSERT_EQ(run_test_profile("c.pcap", "--seed 4"), 0) << err_;
  EXPECT_NE(a, read(path("c.pcap")));
  EXPECT_EQ(sidecar("c.pcap")["seed"], 4);
}

TEST_F(PcapgenTest, sidecar_counts_match_the_capture) {
  ASSERT_EQ(run_test_profile("t.pcap"), 0) << err_;
  const auto frames = read_pcap("t.pcap");
  const Json j = sidecar("t.pcap");
  const Model m(path("config.toml"));
  const Tally t = tally(m, frames);

  EXPECT_EQ(j["packets"], frames.size());
  uint64_t bytes = 0;
  for (const auto& [ts, f] : frames) bytes += f.size();
  EXPECT_EQ(j["bytes"], bytes);
  EXPECT_EQ(j["client_packets"], t.client);
  EXPECT_EQ(j["backend_reply_packets"], t.replies);
  EXPECT_EQ(j["malformed_packets"], t.bad);

  // Two of each malformation, and the sidecar says so.
  ASSERT_EQ(j["malformed"].size(), pkt::malformed_kinds().size());
  for (const auto& k : pkt::malformed_kinds()) {
    EXPECT_EQ(j["malformed"][k.name], 2) << k.name;
    EXPECT_EQ(t.malformed.count(k.name) ? t.malformed.at(k.name) : 0, 2u) << k.name;
  }
  EXPECT_EQ(t.malformed.size(), pkt::malformed_kinds().size());

  for (const auto& s : m.services) {
    SCOPED_TRACE(s.cfg.name);
    const Json& js = j["services"][s.cfg.name];
    const auto it = t.services.find(s.cfg.name);
    ASSERT_NE(it, t.services.end());
    EXPECT_EQ(js["flows"], it->second.flows.size());
    EXPECT_EQ(js["packets"], it->second.packets);
    EXPECT_EQ(js["reply_packets"], it->second.replies);
    EXPECT_EQ(js["backends"].size(), s.lb.size());
    for (const auto& b : s.lb) {
      const std::string key = endpoint(b.address, b.port);
      SCOPED_TRACE(key);
      ASSERT_TRUE(js["backends"].contains(key));
      const Json& jb = js["backends"][key];
      const auto& tb = t.backends.count(s.cfg.name) && t.backends.at(s.cfg.name).count(key)
                           ? t.backends.at(s.cfg.name).at(key)
                           : Tally::Count{};
      EXPECT_EQ(jb["flows"], tb.flows.size());
      EXPECT_EQ(jb["packets"], tb.packets);
      EXPECT_EQ(jb["reply_packets"], tb.replies);
      if (b.weight == 0) {
        EXPECT_EQ(jb["flows"], 0);  // drained: no new flows
      }
    }
  }
  // Flows per class as configured (nothing was cut: no --packets).
  EXPECT_EQ(j["classes"]["web"]["flows"], 120);
  EXPECT_EQ(j["classes"]["dns"]["flows"], 60);
  EXPECT_EQ(j["classes"]["bad"]["packets"], 2 * pkt::malformed_kinds().size());
  EXPECT_EQ(j["services"]["web"]["flows"], 120 + 20 + 10 + 10);  // web, rst, syn, established
  EXPECT_EQ(j["services"]["dns"]["flows"], 65);
  EXPECT_EQ(j["services"]["api"]["reply_packets"], 0);  // fullnat: replies not predictable
  EXPECT_EQ(j["services"]["web"]["no_backend_flows"], 0);

  // Echo: "all" = each distinct VIP once (web and dns share one), "local" = both addresses.
  std::map<std::string, uint64_t> echo;
  for (const auto& [k, v] : j["icmp_echo"].items()) echo[k] = v;
  EXPECT_EQ(echo, t.echo);
  EXPECT_EQ(echo.size(), 5u);  // 203.0.113.10, 2001:db8:100::10, 203.0.113.20, 2 local
}

TEST_F(PcapgenTest, replies_use_the_predicted_backend_and_spread_by_weight) {
  ASSERT_EQ(run_test_profile("t.pcap"), 0) << err_;
  const Model m(path("config.toml"));
  const Tally t = tally(m, read_pcap("t.pcap"));  // checks every reply's source
  EXPECT_GT(t.replies, 0u);
  // web: 160 flows over weights 1:1:2:0. Loose bounds: this is about wiring, not Maglev.
  const auto& web = t.backends.at("web");
  EXPECT_GT(web.at("198.51.100.13:8080").flows.size(), web.at("198.51.100.11:8080").flows.size());
  EXPECT_EQ(web.count("198.51.100.14:8080"), 0u);
}

TEST_F(PcapgenTest, flows_interleave_but_each_flow_stays_in_order) {
  ASSERT_EQ(run_test_profile("t.pcap"), 0) << err_;
  const auto frames = read_pcap("t.pcap");
  const Model m(path("config.toml"));
  // Per TCP direction: each segment starts where the previous one ended (RFC 9293 3.4).
  std::map<std::tuple<IpAddr, uint16_t, IpAddr, uint16_t>, uint32_t> next_seq;
  std::map<FlowKey, size_t> first, last;
  size_t interleaved = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const Bytes& f = frames[i].second;
    const Decoded d = pkt::decode(f);
    if (!fault_of(m, f, d).empty() || d.l4_proto != pkt::kProtoTcp) continue;
    const auto dir = std::make_tuple(d.src, d.sport, d.dst, d.dport);
    const auto it = next_seq.find(dir);
    if (it != next_seq.end()) {
      EXPECT_EQ(d.tcp_seq, it->second) << "frame " << i << " out of order";
    }
    next_seq[dir] = d.tcp_seq + uint32_t(d.payload_len) +
                    ((d.tcp_flags & (pkt::kTcpSyn | pkt::kTcpFin)) ? 1 : 0);
    const bool to_vip = m.is_vip(d.dst);
    const FlowKey k{to_vip ? d.src : d.dst, to_vip ? d.sport : d.dport, pkt::kProtoTcp};
    if (!first.count(k)) {
      first[k] = i;
      if (!to_vip) ADD_FAILURE() << "flow starts with a reply at frame " << i;
    }
    last[k] = i;
  }
  // Flows overlap: many start before the previous one ended.
  size_t prev_end = 0;
  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& [k, s] : first) spans.emplace_back(s, last[k]);
  std::sort(spans.begin(), spans.end());
  for (const auto& [s, e] : spans) {
    if (s < prev_end) ++interleaved;
    prev_end = std::max(prev_end, e);
  }
  EXPECT_GT(interleaved, spans.size() / 2);
}

TEST_F(PcapgenTest, timestamps_follow_the_rate) {
  ASSERT_EQ(run_test_profile("t.pcap", "--rate 3000"), 0) << err_;
  const auto frames = read_pcap("t.pcap");
  ASSERT_FALSE(frames.empty());
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_EQ(frames[i].first, 1000000000000ull + i * 1000000000ull / 3000) << i;
  }
  const Json j = sidecar("t.pcap");
  EXPECT_EQ(j["rate_pps"], 3000);
  EXPECT_EQ(j["first_ts_ns"], frames.front().first);
  EXPECT_EQ(j["last_ts_ns"], frames.back().first);
}

TEST_F(PcapgenTest, packets_option_scales_to_an_exact_count) {
  for (uint64_t n : {500ull, 7000ull}) {
    SCOPED_TRACE(n);
    ASSERT_EQ(run_test_profile("n.pcap", "--packets " + std::to_string(n)), 0) << err_;
    EXPECT_EQ(read_pcap("n.pcap").size(), n);
    const Json j = sidecar("n.pcap");
    EXPECT_EQ(j["packets"], n);
    uint64_t sum = 0;
    for (const auto& [name, c] : j["classes"].items()) sum += c["packets"].get<uint64_t>();
    EXPECT_EQ(sum, n);
  }
}

TEST_F(PcapgenTest, list_malformed_prints_the_table) {
  ASSERT_EQ(run("--list-malformed > " + path("list.txt")), 0) << err_;
  const std::string out = read(path("list.txt"));
  for (const auto& k : pkt::malformed_kinds()) {
    EXPECT_NE(out.find(std::string(k.name) + " "), std::string::npos) << k.name;
  }
}

TEST_F(PcapgenTest, bad_inputs_fail_with_a_located_message) {
  write("typo.toml", "seed = 1\n[[class]]\nname = \"x\"\ntype = \"tcp\"\nflwos = 3\n");
  EXPECT_EQ(run("--config " + path("config.toml") + " --profile " + path("typo.toml") +
                " --out " + path("x.pcap")),
            2);
  EXPECT_NE(err_.find("typo.toml:5:1: class[0].flwos: unknown key"), std::string::npos) << err_;

  write("unknown.toml", "[[class]]\nname = \"x\"\ntype = \"udp\"\ntargets = [\"web\"]\n");
  EXPECT_EQ(run("--config " + path("config.toml") + " --profile " + path("unknown.toml") +
                " --out " + path("x.pcap")),
            1);
  EXPECT_NE(err_.find("service \"web\" is tcp, not udp"), std::string::npos) << err_;

  write("missing.toml", "[[class]]\nname = \"x\"\ntype = \"tcp\"\ntargets = [\"nope\"]\n");
  EXPECT_EQ(run("--config " + path("config.toml") + " --profile " + path("missing.toml") +
                " --out " + path("x.pcap")),
            1);
  EXPECT_NE(err_.find("no tcp service named \"nope\""), std::string::npos) << err_;

  write("reason.toml", "[[class]]\nname = \"x\"\ntype = \"malformed\"\nreasons = [\"nope\"]\n");
  EXPECT_EQ(run("--config " + path("config.toml") + " --profile " + path("reason.toml") +
                " --out " + path("x.pcap")),
            2);
  EXPECT_NE(err_.find("unknown malformation \"nope\""), std::string::npos) << err_;

  write("transit.toml",
        "transit = \"203.0.113.10:80\"\n[[class]]\nname = \"x\"\ntype = \"malformed\"\n");
  EXPECT_EQ(run("--config " + path("config.toml") + " --profile " + path("transit.toml") +
                " --out " + path("x.pcap")),
            1);
  EXPECT_NE(err_.find("is the VIP of service web"), std::string::npos) << err_;

  EXPECT_EQ(run("--profile " + path("profile.toml")), 2);
}

TEST_F(PcapgenTest, all_reasons_leave_out_what_an_ipv4_only_config_cannot_express) {
  write("v4.toml", R"toml(
[[port]]
name = "net0"
device = "net_null0"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24"]
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
[[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:00:fe"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
protocol = "tcp"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)toml");
  write("all.toml", "[[class]]\nname = \"bad\"\ntype = \"malformed\"\n");
  ASSERT_EQ(run("--config " + path("v4.toml") + " --profile " + path("all.toml") + " --out " +
                path("v4.pcap")),
            0)
      << err_;
  EXPECT_NE(err_.find("left out ipv6_truncated"), std::string::npos) << err_;
  const Json j = sidecar("v4.pcap");
  EXPECT_FALSE(j["malformed"].contains("ipv6_truncated"));
  EXPECT_FALSE(j["malformed"].contains("icmp6_truncated"));
  EXPECT_EQ(j["malformed"]["ipv4_truncated"], 1);
  EXPECT_EQ(j["packets"], j["malformed"].size());

  write("v6.toml", "[[class]]\nname = \"bad\"\ntype = \"malformed\"\n"
                   "reasons = [\"ipv6_truncated\"]\n");
  EXPECT_EQ(run("--config " + path("v4.toml") + " --profile " + path("v6.toml") + " --out " +
                path("v6.pcap")),
            1);
  EXPECT_NE(err_.find("ipv6_truncated needs an IPv6 service"), std::string::npos) << err_;
}

// The committed profiles, against the committed demo config.
class CommittedProfileTest : public PcapgenTest {
 protected:
  Json generate(const std::string& profile, const std::string& out) {
    const int rc = run("--config " + kSourceDir + "/config/demo.toml --profile " + kSourceDir +
                       "/tools/pcapgen/profiles/" + profile + " --out " + path(out));
    EXPECT_EQ(rc, 0) << err_;
    return rc == 0 ? sidecar(out) : Json{};
  }
};

TEST_F(CommittedProfileTest, demo_has_every_kind_of_traffic) {
  const Json j = generate("demo.toml", "demo.pcap");
  ASSERT_FALSE(j.is_null());
  EXPECT_GE(j["packets"], 2000);
  EXPECT_LE(j["packets"], 5000);
  for (const auto& k : pkt::malformed_kinds()) EXPECT_EQ(j["malformed"][k.name], 1) << k.name;
  for (const char* s : {"web", "dns", "web6"}) {
    EXPECT_GT(j["services"][s]["flows"], 0) << s;
    EXPECT_GT(j["services"][s]["reply_packets"], 0) << s;
  }
  EXPECT_GT(j["icmp_echo"]["198.51.100.1"], 0);
  EXPECT_GT(j["icmp_echo"]["203.0.113.10"], 0);
  const Model m(kSourceDir + "/config/demo.toml");
  const Tally t = tally(m, read_pcap("demo.pcap"));
  EXPECT_EQ(t.bad, pkt::malformed_kinds().size());
  // IMIX: all three frame sizes appear (1518 with FCS = 1514 in the pcap).
  std::set<size_t> sizes;
  for (const auto& [ts, f] : read_pcap("demo.pcap")) sizes.insert(f.size());
  EXPECT_TRUE(sizes.count(1514));
  EXPECT_TRUE(sizes.count(590));
}

TEST_F(CommittedProfileTest, golden_is_small_and_complete) {
  const Json j = generate("golden.toml", "golden.pcap");
  ASSERT_FALSE(j.is_null());
  EXPECT_LE(j["packets"], 500);
  for (const auto& k : pkt::malformed_kinds()) EXPECT_EQ(j["malformed"][k.name], 1) << k.name;
  const Model m(kSourceDir + "/config/demo.toml");
  (void)tally(m, read_pcap("golden.pcap"));
}

TEST_F(CommittedProfileTest, million_makes_a_million_packets_quickly) {
  const auto t0 = std::chrono::steady_clock::now();
  const Json j = generate("million.toml", "million.pcap");
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["packets"], 1000000);
  EXPECT_GT(j["malformed_packets"], 10000);
  // "A few seconds" with ample margin for slow or busy CI machines (about 1 s on a laptop).
  EXPECT_LT(secs, 30.0);
  std::filesystem::remove(path("million.pcap"));
}

}  // namespace
}  // namespace meshgate
