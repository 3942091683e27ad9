// The mesh file ([mesh] source = "file"): a complete file parses into the model the xDS provider
// would build, and broken files give one error each at the right file:line:column and key.
// Also [gateway] locality.
#include "control/mesh/mesh_file.h"

#include <gtest/gtest.h>

#include <string>

#include "control/config/config.h"

namespace meshgate::ctl::mesh {
namespace {

constexpr const char* kGood = R"(
[[mesh_service]]
name = "reviews"
namespace = "bookinfo"
hostname = "reviews.bookinfo.svc.cluster.local"
vips = ["10.96.0.20", "fd00::20"]
ports = [{ service_port = 9080, target_port = 9080, app_protocol = "http11" }, { service_port = 9443 }]
subject_alt_names = ["spiffe://cluster.local/ns/bookinfo/sa/reviews"]
load_balancing = { mode = "failover", routing_preference = ["network", "region", "zone"], health_policy = "allow_all" }

[[workload]]
uid = "cluster1//v1/Pod/bookinfo/reviews-v1-abc"
name = "reviews-v1-abc"
namespace = "bookinfo"
addresses = ["10.244.1.7"]
tunnel = "hbone"
service_account = "bookinfo-reviews"
trust_domain = "example.org"
services = { "bookinfo/reviews.bookinfo.svc.cluster.local" = [{ service_port = 9443, target_port = 8443 }] }
capacity = 3
status = "unhealthy"
node = "node-1"
cluster_id = "cluster1"
locality = "eu-west/eu-west-1a/rack7"
authorization_policies = ["bookinfo/deny-blocked"]

[[policy]]
name = "deny-blocked"
namespace = "bookinfo"
scope = "namespace"
action = "deny"
  [[policy.group]]
    [[policy.group.clause]]
      [[policy.group.clause.match]]
      principals = ["cluster.local/ns/demo/sa/blocked", "spiffe://x*", "*suffix", "*"]
      source_ips = ["192.0.2.0/24", "2001:db8::1"]
      destination_ports = [80, 443]
      service_accounts = ["demo/blocked"]
      [[policy.group.clause.match]]
      not_namespaces = ["kube-system"]
)";

TEST(MeshFile, CompleteFileParsesEveryField) {
  auto r = parse_mesh_file(kGood, "mesh.toml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  const MeshModel& m = *r;
  ASSERT_EQ(m.services.size(), 1u);
  const Service& s = m.services.at("bookinfo/reviews.bookinfo.svc.cluster.local");
  EXPECT_EQ(s.name, "reviews");
  ASSERT_EQ(s.vips.size(), 2u);
  EXPECT_EQ(s.vips[0].address, *IpAddr::parse("10.96.0.20"));
  EXPECT_FALSE(s.vips[0].length.has_value());
  EXPECT_EQ(s.vips[1].address, *IpAddr::parse("fd00::20"));
  ASSERT_EQ(s.ports.size(), 2u);
  EXPECT_EQ(s.ports[0], (PortMapping{9080, 9080, 1}));
  EXPECT_EQ(s.ports[1], (PortMapping{9443, 0, 0}));
  EXPECT_EQ(s.load_balancing.mode, LbMode::kFailover);
  EXPECT_EQ(s.load_balancing.health_policy, HealthPolicy::kAllowAll);
  EXPECT_EQ(s.load_balancing.routing_preference,
            (std::vector<LbScope>{LbScope::kNetwork, LbScope::kRegion, LbScope::kZone}));

  const Workload& w = m.workloads.at("cluster1//v1/Pod/bookinfo/reviews-v1-abc");
  EXPECT_EQ(w.tunnel, Tunnel::kHbone);
  EXPECT_EQ(w.identity(), "spiffe://example.org/ns/bookinfo/sa/bookinfo-reviews");
  EXPECT_EQ(w.capacity, 3u);
  EXPECT_FALSE(w.healthy);
  EXPECT_EQ(w.locality, (Locality{"eu-west", "eu-west-1a", "rack7"}));
  ASSERT_EQ(w.services.size(), 1u);
  EXPECT_EQ(w.services.begin()->second, (std::vector<PortMapping>{{9443, 8443, 0}}));
  EXPECT_EQ(w.authorization_policies, std::vector<std::string>{"bookinfo/deny-blocked"});

  const Policy& p = m.policies.at("bookinfo/deny-blocked");
  EXPECT_EQ(p.scope, PolicyScope::kNamespace);
  EXPECT_EQ(p.action, PolicyAction::kDeny);
  ASSERT_EQ(p.groups.size(), 1u);
  ASSERT_EQ(p.groups[0].clauses.size(), 1u);
  ASSERT_EQ(p.groups[0].clauses[0].matches.size(), 2u);
  const PolicyMatch& pm = p.groups[0].clauses[0].matches[0];
  ASSERT_EQ(pm.principals.size(), 4u);
  EXPECT_EQ(pm.principals[0], (StringMatch{StringMatch::Kind::kExact, "cluster.local/ns/demo/sa/blocked"}));
  EXPECT_EQ(pm.principals[1], (StringMatch{StringMatch::Kind::kPrefix, "spiffe://x"}));
  EXPECT_EQ(pm.principals[2], (StringMatch{StringMatch::Kind::kSuffix, "suffix"}));
  EXPECT_EQ(pm.principals[3].kind, StringMatch::Kind::kPresence);
  EXPECT_EQ(pm.source_ips[0].str(), "192.0.2.0/24");
  EXPECT_EQ(pm.destination_ports, (std::vector<uint16_t>{80, 443}));
  EXPECT_EQ(pm.service_accounts[0], (ServiceAccountMatch{"demo", "blocked"}));
  EXPECT_EQ(p.groups[0].clauses[0].matches[1].not_namespaces[0].value, "kube-system");
}

TEST(MeshFile, DefaultsFollowIstio) {
  auto r = parse_mesh_file(R"(
[[mesh_service]]
namespace = "ns"
hostname = "web.ns.svc.cluster.local"
vips = ["10.96.0.1"]
ports = [{ service_port = 80, target_port = 8080 }]
[[workload]]
uid = "w1"
namespace = "ns"
addresses = ["10.0.0.1"]
services = { "ns/web.ns.svc.cluster.local" = [] }
)", "m.toml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Workload& w = r->workloads.at("w1");
  EXPECT_EQ(w.tunnel, Tunnel::kNone);
  EXPECT_TRUE(w.healthy);
  EXPECT_EQ(w.capacity, 1u);
  EXPECT_EQ(w.identity(), "spiffe://cluster.local/ns/ns/sa/default");
  EXPECT_EQ(r->services.at("ns/web.ns.svc.cluster.local").name, "web");
}

struct BadCase {
  const char* description;
  const char* text;
  const char* expected;  // the whole error line
};

constexpr const char* kSvc = R"([[mesh_service]]
namespace = "ns"
hostname = "web.ns.svc.cluster.local"
vips = ["10.96.0.1"]
ports = [{ service_port = 80, target_port = 8080 }]
)";

class MeshFileErrors : public testing::TestWithParam<BadCase> {};

TEST_P(MeshFileErrors, ReportsOneErrorAtItsPosition) {
  const BadCase& c = GetParam();
  auto r = parse_mesh_file(std::string(kSvc) + c.text, "mesh.toml");
  ASSERT_FALSE(r.ok()) << c.description;
  ASSERT_EQ(r.error().errors.size(), 1u) << r.error().str();
  EXPECT_EQ(r.error().errors[0].str(), c.expected) << c.description;
}

INSTANTIATE_TEST_SUITE_P(
    Table, MeshFileErrors,
    testing::Values(
        BadCase{"misspelt workload key", "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\nadresses = []\n",
                "mesh.toml:9:1: workload[0].adresses: unknown key (did you mean 'addresses'?)"},
        BadCase{"bad address", "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\naddresses = [\"10.0.0.300\"]\n",
                "mesh.toml:9:14: workload[0].addresses[0]: expected an IPv4/IPv6 address string, "
                "got \"10.0.0.300\""},
        BadCase{"legacy tunnel", "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\ntunnel = \"legacy_istio_mtls\"\n",
                "mesh.toml:9:10: workload[0].tunnel: \"legacy_istio_mtls\" is not supported (ztunnel "
                "does not support sending legacy Istio mTLS); expected one of none, hbone"},
        BadCase{"unknown tunnel", "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\ntunnel = \"hbon\"\n",
                "mesh.toml:9:10: workload[0].tunnel: expected one of none, hbone, got \"hbon\" (did "
                "you mean 'hbone'?)"},
        BadCase{"unknown service reference",
                "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\nservices = { \"ns/wbe.ns.svc.cluster.local\" = [] }\n",
                "mesh.toml:9:46: workload[0].services.\"ns/wbe.ns.svc.cluster.local\": unknown service "
                "\"ns/wbe.ns.svc.cluster.local\" (no [[mesh_service]] has this namespace/hostname) "
                "(did you mean 'ns/web.ns.svc.cluster.local'?)"},
        BadCase{"missing uid", "[[workload]]\nnamespace = \"ns\"\n",
                "mesh.toml:6:1: workload[0].uid: missing required key (expected a string)"},
        BadCase{"duplicate uid",
                "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\n[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\n",
                "mesh.toml:10:7: workload[1].uid: duplicate workload uid \"w\" (first at mesh.toml:6:1)"},
        BadCase{"capacity out of range", "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\ncapacity = 70000\n",
                "mesh.toml:9:12: workload[0].capacity: expected an integer 0..65535, got 70000"},
        BadCase{"service port out of range",
                "[[mesh_service]]\nnamespace = \"ns\"\nhostname = \"b\"\nports = [{ service_port = 0 }]\n",
                "mesh.toml:9:27: mesh_service[1].ports[0].service_port: expected an integer 1..65535, got 0"},
        BadCase{"duplicate VIP:port",
                "[[mesh_service]]\nnamespace = \"ns\"\nhostname = \"b\"\nvips = [\"10.96.0.1\"]\nports = [{ service_port = 80 }]\n",
                "mesh.toml:6:1: mesh_service[1].vips: VIP 10.96.0.1 port 80 is also used by "
                "ns/web.ns.svc.cluster.local"},
        BadCase{"bad load balancing scope",
                "[[mesh_service]]\nnamespace = \"ns\"\nhostname = \"b\"\nload_balancing = { routing_preference = [\"zon\"] }\n",
                "mesh.toml:9:42: mesh_service[1].load_balancing.routing_preference[0]: expected one "
                "of region, zone, subzone, node, cluster, network, got \"zon\" (did you mean 'zone'?)"},
        BadCase{"wildcard not in the first label",
                "[[mesh_service]]\nnamespace = \"ns\"\nhostname = \"a.*.example.com\"\n",
                "mesh.toml:8:12: mesh_service[1].hostname: not a hostname or wildcard hostname "
                "(\"*.example.com\"): \"a.*.example.com\" ('*' only as the whole first label)"},
        BadCase{"bad policy action", "[[policy]]\nname = \"p\"\nnamespace = \"ns\"\naction = \"reject\"\n",
                "mesh.toml:9:10: policy[0].action: expected one of allow, deny, got \"reject\""},
        BadCase{"bad match port",
                "[[policy]]\nname = \"p\"\nnamespace = \"ns\"\n[[policy.group]]\n[[policy.group.clause]]\n"
                "[[policy.group.clause.match]]\ndestination_ports = [\"80\"]\n",
                "mesh.toml:12:22: policy[0].group[0].clause[0].match[0].destination_ports[0]: expected "
                "an integer 1..65535, got \"80\""},
        BadCase{"invalid TOML", "[[workload]\n",
                "mesh.toml:6:12: invalid TOML: Error while parsing table header: expected ']', saw '\\n'"}));

TEST(MeshFile, LegacyTunnelIsAcceptedOnlyWhenAskedFor) {
  const std::string text = std::string(kSvc) +
                           "[[workload]]\nuid = \"w\"\nnamespace = \"ns\"\ntunnel = \"legacy_istio_mtls\"\n";
  EXPECT_FALSE(parse_mesh_file(text, "m.toml").ok());
  auto r = parse_mesh_file(text, "m.toml", {.allow_legacy_tunnel = true});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->workloads.at("w").tunnel, Tunnel::kLegacyIstioMtls);
}

TEST(MeshFile, ShippedExampleLoads) {
  auto r = load_mesh_file(MG_SOURCE_DIR "/config/mesh.toml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_FALSE(r->services.empty());
  EXPECT_FALSE(r->workloads.empty());
}

constexpr const char* kPort = R"(
[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
)";

TEST(GatewayLocality, ParsesRegionZoneSubzone) {
  auto r = parse_config(std::string("[gateway]\nlocality = \"us-east/us-east-1b/r1\"\n") + kPort,
                        "c.toml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r->gateway.locality, (Locality{"us-east", "us-east-1b", "r1"}));
  auto partial = parse_config(std::string("[gateway]\nlocality = \"us-east\"\n") + kPort, "c.toml");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->gateway.locality, (Locality{"us-east", "", ""}));
}

TEST(GatewayLocality, MoreThanThreePartsIsAnError) {
  auto r = parse_config(std::string("[gateway]\nlocality = \"a/b/c/d\"\n") + kPort, "c.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().str(),
            "c.toml:2:12: gateway.locality: expected \"region/zone/subzone\" (at most three parts), "
            "got \"a/b/c/d\"\n");
}

}  // namespace
}  // namespace meshgate::ctl::mesh
