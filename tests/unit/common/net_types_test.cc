// Address text: IpAddr::str() / format() against the C library's inet_ntop(), which they
// replace on the control plane's counter names (docs/PERFORMANCE.md, control plane).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "control/snapshot/stat_registry.h"
#include "dataplane/common/net_types.h"

namespace meshgate {
namespace {

std::string ntop(const IpAddr& a) {
  char buf[INET6_ADDRSTRLEN];
  if (a.is_v4()) return inet_ntop(AF_INET, a.v4_ptr(), buf, sizeof buf);
  return inet_ntop(AF_INET6, a.b, buf, sizeof buf);
}

TEST(IpAddrStr, matches_inet_ntop_for_every_pattern_of_zero_groups) {
  std::mt19937_64 rng(42);
  // Each of the 256 patterns of zero / non-zero groups (runs, ties, leading and trailing runs,
  // the IPv4-compatible ::a.b.c.d and mapped ::ffff:a.b.c.d shapes among them), with group
  // values of every digit count.
  for (uint32_t pattern = 0; pattern < 256; ++pattern) {
    for (int round = 0; round < 64; ++round) {
      IpAddr a;
      for (int g = 0; g < 8; ++g) {
        if (!(pattern >> g & 1)) continue;
        const int digits = 1 + int(rng() % 4);
        uint32_t v = uint32_t(rng() >> 40) & ((1u << (4 * digits)) - 1);
        if (v == 0) v = 1;
        a.b[2 * g] = uint8_t(v >> 8);
        a.b[2 * g + 1] = uint8_t(v);
      }
      if (round == 0 && pattern >= 0xc0 && (pattern & 0x3f) == 0) {
        a.b[10] = a.b[11] = 0xff;  // IPv4-mapped
      }
      ASSERT_EQ(a.str(), ntop(a)) << "pattern " << pattern;
    }
  }
  for (const char* s : {"::", "::1", "1::", "0.0.0.0", "255.255.255.255", "10.0.0.1", "::0.0.1.0",
                        "::1.2.3.4", "::ffff:0:1.2.3.4", "1:0:0:2:0:0:0:3", "1:0:0:2:0:0:3:4",
                        "0:1:0:1:0:1:0:1", "fe80::", "2001:db8::ff00:42:8329"}) {
    const IpAddr a = *IpAddr::parse(s);
    EXPECT_EQ(a.str(), ntop(a)) << s;
  }
}

// is_v4_wire compares with an IPv4 address as the fast path loads it from a header (4 wire
// bytes as they lie in memory): equal exactly for the mapped form of the same address.
TEST(IpAddrWire, is_v4_wire_is_true_only_for_the_same_ipv4_address) {
  std::mt19937 rng(5);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t host = uint32_t(rng());
    const IpAddr a = IpAddr::v4(host);
    uint32_t wire;
    std::memcpy(&wire, a.v4_ptr(), 4);
    EXPECT_TRUE(a.is_v4_wire(wire)) << a.str();
    EXPECT_FALSE(a.is_v4_wire(wire ^ (1u << (rng() % 32)))) << a.str();
    IpAddr v6 = a;
    v6.b[rng() % 12] ^= uint8_t(1 + rng() % 255);  // not IPv4-mapped any more
    EXPECT_FALSE(v6.is_v4_wire(wire)) << v6.str();
  }
}

TEST(IpAddrStr, endpoint_names_bracket_ipv6_and_append_the_port) {
  EXPECT_EQ(ctl::endpoint_str(*IpAddr::parse("198.51.100.11"), 8080), "198.51.100.11:8080");
  EXPECT_EQ(ctl::endpoint_str(*IpAddr::parse("2001:db8::1"), 443), "[2001:db8::1]:443");
  EXPECT_EQ(ctl::endpoint_str(*IpAddr::parse("0.0.0.0"), 0), "0.0.0.0:0");
  EXPECT_EQ(ctl::endpoint_str(*IpAddr::parse("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"), 65535),
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
}

}  // namespace
}  // namespace meshgate
