// The strict :authority parser of HBONE CONNECT requests.
#include <gtest/gtest.h>

#include <string>

#include "dataplane/hbone/authority.h"

using meshgate::IpAddr;
using meshgate::dp::hbone::Authority;
using meshgate::dp::hbone::parse_authority;

TEST(HboneAuthority, ipv4_ipv6_and_names_with_ports) {
  Authority a;
  ASSERT_TRUE(parse_authority("10.244.1.7:9080", a));
  EXPECT_EQ(a.kind, Authority::Kind::kIp);
  EXPECT_EQ(a.ip, *IpAddr::parse("10.244.1.7"));
  EXPECT_EQ(a.port, 9080);

  ASSERT_TRUE(parse_authority("[2001:db8::7]:443", a));
  EXPECT_EQ(a.kind, Authority::Kind::kIp);
  EXPECT_EQ(a.ip, *IpAddr::parse("2001:db8::7"));
  EXPECT_EQ(a.port, 443);

  ASSERT_TRUE(parse_authority("[::1]:65535", a));
  EXPECT_EQ(a.port, 65535);

  ASSERT_TRUE(parse_authority("Reviews.Bookinfo.svc.cluster.local:9080", a));
  EXPECT_EQ(a.kind, Authority::Kind::kName);
  EXPECT_EQ(a.hostname(), "reviews.bookinfo.svc.cluster.local");
  EXPECT_EQ(a.port, 9080);

  ASSERT_TRUE(parse_authority("web1.x-2.local:1", a));
  EXPECT_EQ(a.hostname(), "web1.x-2.local");
  ASSERT_TRUE(parse_authority("localhost:8080", a));
  EXPECT_EQ(a.hostname(), "localhost");
  ASSERT_TRUE(parse_authority("0.0.0.0:1", a));
}

TEST(HboneAuthority, malformed_authorities_are_rejected) {
  const char* bad[] = {
      "", ":", ":80", "10.0.0.1", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:080",
      "10.0.0.1:+80", "10.0.0.1:8o", "10.0.0.1:123456", "10.0.0.256:80", "10.0.0:80",
      "10.0.0.1.2:80", "010.0.0.1:80", "10..0.1:80", "1.2.3.4 :80", " 1.2.3.4:80",
      "2001:db8::1:80",      // unbracketed IPv6
      "[2001:db8::1]", "[2001:db8::1]80", "[2001:db8::1]:", "[2001:db8::zz]:80",
      "[fe80::1%eth0]:80", "[10.0.0.1]:80", "[]:80", "[::1]:80x",
      "-a.local:80", "a-.local:80", "a..b:80", ".a:80", "a.:80", "a.local.:80", "a_b.local:80",
      "user@host:80", "host/path:80", "host:80/path", "1.2.3.400:80", "host.123:80",
      "h\xc3\xa9.local:80",
  };
  for (const char* s : bad) {
    Authority a;
    EXPECT_FALSE(parse_authority(s, a)) << s;
  }
  Authority a;
  EXPECT_FALSE(parse_authority(std::string_view("a\0b:80", 6), a));
}

TEST(HboneAuthority, name_length_limits) {
  Authority a;
  const std::string label63(63, 'a'), label64(64, 'a');
  EXPECT_TRUE(parse_authority(label63 + ".x:80", a));
  EXPECT_FALSE(parse_authority(label64 + ".x:80", a));
  std::string name = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');  // 253
  ASSERT_EQ(name.size(), 253u);
  EXPECT_TRUE(parse_authority(name + ":80", a));
  EXPECT_EQ(a.hostname(), name);
  EXPECT_FALSE(parse_authority(name + "b:80", a));
}
