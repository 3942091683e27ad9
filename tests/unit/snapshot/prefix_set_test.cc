// dp::PrefixSet (dataplane/snapshot/snapshot.h), the block list's and source ranges' lookup:
// IPv4 and IPv6 prefixes of any length, overlapping, host bits ignored, families kept apart.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/snapshot/snapshot.h"

namespace meshgate {
namespace {

dp::PrefixSet set_of(const std::vector<std::string>& prefixes) {
  std::vector<IpPrefix> v;
  for (const std::string& p : prefixes) v.push_back(*IpPrefix::parse(p));
  dp::PrefixSet s;
  s.build(v);
  return s;
}

bool has(const dp::PrefixSet& s, const char* a) { return s.contains(*IpAddr::parse(a)); }

TEST(PrefixSet, EmptyHoldsNothing) {
  const dp::PrefixSet s = set_of({});
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(has(s, "192.0.2.1"));
  EXPECT_FALSE(has(s, "2001:db8::1"));
}

TEST(PrefixSet, Ipv4PrefixHoldsItsRangeOnly) {
  const dp::PrefixSet s = set_of({"192.0.2.0/24"});
  EXPECT_FALSE(s.empty());
  EXPECT_TRUE(has(s, "192.0.2.0"));
  EXPECT_TRUE(has(s, "192.0.2.255"));
  EXPECT_FALSE(has(s, "192.0.3.0"));
  EXPECT_FALSE(has(s, "192.0.1.255"));
}

TEST(PrefixSet, HostBitsOfThePrefixAreIgnored) {
  const dp::PrefixSet s = set_of({"10.1.2.3/8"});
  EXPECT_TRUE(has(s, "10.200.0.1"));
  EXPECT_FALSE(has(s, "11.0.0.1"));
}

TEST(PrefixSet, Ipv4HostPrefixAndOddLengths) {
  const dp::PrefixSet s = set_of({"198.51.100.7/32", "203.0.113.128/25", "100.64.0.0/10"});
  EXPECT_TRUE(has(s, "198.51.100.7"));
  EXPECT_FALSE(has(s, "198.51.100.6"));
  EXPECT_FALSE(has(s, "198.51.100.8"));
  EXPECT_TRUE(has(s, "203.0.113.200"));
  EXPECT_FALSE(has(s, "203.0.113.127"));
  EXPECT_TRUE(has(s, "100.127.255.255"));
  EXPECT_FALSE(has(s, "100.128.0.0"));
}

TEST(PrefixSet, Ipv4DefaultHoldsEveryIpv4AndNoIpv6) {
  const dp::PrefixSet s = set_of({"0.0.0.0/0"});
  EXPECT_TRUE(has(s, "1.2.3.4"));
  EXPECT_TRUE(has(s, "255.255.255.254"));
  EXPECT_FALSE(has(s, "2001:db8::1"));
  EXPECT_FALSE(has(s, "::ffff:0:1:2"));
}

TEST(PrefixSet, Ipv6DefaultHoldsEveryIpv6AndNoIpv4) {
  const dp::PrefixSet s = set_of({"::/0"});
  EXPECT_TRUE(has(s, "2001:db8::1"));
  EXPECT_TRUE(has(s, "fe80::1"));
  EXPECT_FALSE(has(s, "192.0.2.1"));
}

TEST(PrefixSet, Ipv6PrefixesOfAnyLength) {
  const dp::PrefixSet s = set_of({"2001:db8:1::/48", "2001:db8:2::5/128", "2001:db8:ff00::/41"});
  EXPECT_TRUE(has(s, "2001:db8:1:ffff::1"));
  EXPECT_FALSE(has(s, "2001:db8:3::1"));
  EXPECT_TRUE(has(s, "2001:db8:2::5"));
  EXPECT_FALSE(has(s, "2001:db8:2::6"));
  EXPECT_TRUE(has(s, "2001:db8:ff7f::1"));
  EXPECT_FALSE(has(s, "2001:db8:fe00::1"));
}

TEST(PrefixSet, OverlappingPrefixesAndMixedFamilies) {
  const dp::PrefixSet s =
      set_of({"10.0.0.0/8", "10.1.0.0/16", "10.1.2.3/32", "2001:db8::/32", "2001:db8::/64"});
  EXPECT_TRUE(has(s, "10.1.2.3"));
  EXPECT_TRUE(has(s, "10.1.9.9"));
  EXPECT_TRUE(has(s, "10.9.9.9"));
  EXPECT_FALSE(has(s, "11.1.2.3"));
  EXPECT_TRUE(has(s, "2001:db8:ffff::1"));
  EXPECT_FALSE(has(s, "2001:db9::1"));
  // An IPv4 /8 does not hold the IPv6 address sharing its first byte.
  EXPECT_FALSE(has(s, "a00::1"));
}

TEST(PrefixSet, ManyPrefixesOfOneLength) {
  std::vector<std::string> v;
  for (int i = 0; i < 1000; ++i) {
    v.push_back("10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".0/24");
  }
  const dp::PrefixSet s = set_of(v);
  EXPECT_TRUE(has(s, "10.0.0.1"));
  EXPECT_TRUE(has(s, "10.3.231.77"));  // i = 999
  EXPECT_FALSE(has(s, "10.3.232.1"));  // i = 1000
  EXPECT_FALSE(has(s, "10.4.0.1"));
}

}  // namespace
}  // namespace meshgate
