// Software Toeplitz must match the Microsoft RSS verification suite, since it predicts what
// the NIC does.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "control/runtime/ports.h"
#include "dataplane/nat/rss.h"

namespace meshgate::dp {
namespace {

IpAddr A(const char* s) { return *IpAddr::parse(s); }

// "Verifying the RSS Hash Calculation" (Microsoft NDIS documentation), default key: IPv4 with
// TCP ports (the first rows of the published table).
TEST(Rss, toeplitz_matches_the_published_verification_values) {
  RssPredictor rss(ctl::default_rss_key(), std::vector<uint16_t>(128, 0));
  struct Row {
    const char* dst;
    uint16_t dport;
    const char* src;
    uint16_t sport;
    uint32_t with_ports;
  } rows[] = {
      {"161.142.100.80", 1766, "66.9.149.187", 2794, 0x51ccc178},
      {"65.69.140.83", 4739, "199.92.111.2", 14230, 0xc626b0ea},
      {"12.22.207.184", 38024, "24.19.198.95", 12898, 0x5c2b394a},
      {"209.142.163.6", 2217, "38.27.205.30", 48228, 0xafc7327f},
      {"202.188.127.2", 1303, "153.39.163.191", 44251, 0x10e828a2},
  };
  for (const auto& r : rows) {
    const uint32_t fixed = rss.fixed_hash(A(r.src), A(r.dst), htons(r.sport));
    EXPECT_EQ(rss.with_dport(fixed, true, r.dport), r.with_ports) << r.src;
  }
}

TEST(Rss, ipv6_matches_the_published_verification_values) {
  RssPredictor rss(ctl::default_rss_key(), std::vector<uint16_t>(128, 0));
  struct Row {
    const char* dst;
    uint16_t dport;
    const char* src;
    uint16_t sport;
    uint32_t with_ports;
  } rows[] = {
      {"3ffe:2501:200:3::1", 1766, "3ffe:2501:200:1fff::7", 2794, 0x40207d3d},
      {"ff02::1", 4739, "3ffe:501:8::260:97ff:fe40:efab", 14230, 0xdde51bbf},
      {"fe80::200:f8ff:fe21:67cf", 38024, "3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, 0x02d1feef},
  };
  for (const auto& r : rows) {
    const uint32_t fixed = rss.fixed_hash(A(r.src), A(r.dst), htons(r.sport));
    EXPECT_EQ(rss.with_dport(fixed, false, r.dport), r.with_ports) << r.src;
  }
}

TEST(Rss, queue_follows_the_reta) {
  std::vector<uint16_t> reta(128);
  for (size_t i = 0; i < reta.size(); ++i) reta[i] = uint16_t(i % 4);
  RssPredictor rss(ctl::default_rss_key(), reta);
  const uint32_t h = 0x51ccc178;
  EXPECT_EQ(rss.queue(A("66.9.149.187"), A("161.142.100.80"), htons(2794), htons(1766)),
            reta[h & 127]);
}

}  // namespace
}  // namespace meshgate::dp
