// The strict SPIFFE id parser: spiffe://<trust domain>/ns/<ns>/sa/<sa> and nothing else.
#include <gtest/gtest.h>

#include <string>

#include "dataplane/tls/spiffe.h"

using meshgate::dp::tls::parse_spiffe_id;
using meshgate::dp::tls::SpiffeId;

TEST(Spiffe, istio_workload_id_splits_into_trust_domain_namespace_and_account) {
  SpiffeId id;
  ASSERT_TRUE(parse_spiffe_id("spiffe://cluster.local/ns/demo/sa/client", id));
  EXPECT_EQ(id.trust_domain, "cluster.local");
  EXPECT_EQ(id.ns, "demo");
  EXPECT_EQ(id.service_account, "client");
  EXPECT_EQ(id.principal, "cluster.local/ns/demo/sa/client");
}

TEST(Spiffe, allowed_characters_in_segments) {
  SpiffeId id;
  EXPECT_TRUE(parse_spiffe_id("spiffe://td-1_x.example/ns/Ns-1.x_y/sa/A.b-c_9", id));
  EXPECT_EQ(id.ns, "Ns-1.x_y");
}

TEST(Spiffe, everything_not_exactly_ns_sa_is_rejected) {
  const char* bad[] = {
      "",
      "spiffe://",
      "spiffe:///ns/a/sa/b",                       // empty trust domain
      "SPIFFE://cluster.local/ns/a/sa/b",          // scheme is lower case
      "spiffe:/cluster.local/ns/a/sa/b",
      "https://cluster.local/ns/a/sa/b",
      "spiffe://Cluster.local/ns/a/sa/b",          // trust domain is lower case
      "spiffe://cluster.local:443/ns/a/sa/b",      // no port
      "spiffe://user@cluster.local/ns/a/sa/b",     // no user info
      "spiffe://cluster.local",                    // no path
      "spiffe://cluster.local/",
      "spiffe://cluster.local/ns/a",
      "spiffe://cluster.local/ns/a/sa",
      "spiffe://cluster.local/ns/a/sa/",
      "spiffe://cluster.local/ns/a/sa/b/",         // trailing slash
      "spiffe://cluster.local/ns/a/sa/b/c",        // a fifth segment
      "spiffe://cluster.local/ns//sa/b",           // empty segment
      "spiffe://cluster.local/NS/a/sa/b",          // literal ns
      "spiffe://cluster.local/ns/a/SA/b",          // literal sa
      "spiffe://cluster.local/sa/b/ns/a",          // order
      "spiffe://cluster.local/ns/./sa/b",          // dot segments
      "spiffe://cluster.local/ns/../sa/b",
      "spiffe://cluster.local/ns/a%2f/sa/b",       // percent escapes
      "spiffe://cluster.local/ns/a/sa/b?x=1",      // query
      "spiffe://cluster.local/ns/a/sa/b#f",        // fragment
      "spiffe://cluster.local/ns/a b/sa/b",
  };
  for (const char* s : bad) {
    SpiffeId id;
    EXPECT_FALSE(parse_spiffe_id(s, id)) << s;
  }
  SpiffeId id;
  EXPECT_FALSE(parse_spiffe_id(std::string_view("spiffe://cluster.local/ns/a\0/sa/b", 33), id));
}

TEST(Spiffe, length_limits) {
  SpiffeId id;
  const std::string td255(255, 'a'), td256(256, 'a');
  EXPECT_TRUE(parse_spiffe_id("spiffe://" + td255 + "/ns/a/sa/b", id));
  EXPECT_FALSE(parse_spiffe_id("spiffe://" + td256 + "/ns/a/sa/b", id));
  const std::string prefix = "spiffe://td/ns/a/sa/";
  EXPECT_TRUE(parse_spiffe_id(prefix + std::string(2048 - prefix.size(), 'b'), id));
  EXPECT_FALSE(parse_spiffe_id(prefix + std::string(2049 - prefix.size(), 'b'), id));
}
