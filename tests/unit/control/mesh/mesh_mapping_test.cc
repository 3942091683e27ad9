// Mesh model -> ServiceSpecs: which VIP:ports appear and which workloads serve them, with
// ztunnel's endpoint rules. Each test builds a small model in code and checks the specs.
#include "control/mesh/mesh_mapping.h"

#include <gtest/gtest.h>

#include <string>

#include "control/snapshot/maglev.h"

namespace meshgate::ctl::mesh {
namespace {

IpAddr ip(const char* s) { return *IpAddr::parse(s); }

const char* kKey = "ns/web.ns.svc.cluster.local";

Service web(std::vector<PortMapping> ports = {{80, 8080, 0}}) {
  Service s;
  s.name = "web";
  s.ns = "ns";
  s.hostname = "web.ns.svc.cluster.local";
  s.vips = {{"", ip("10.96.0.10"), std::nullopt}};
  s.ports = std::move(ports);
  return s;
}

Workload wl(const std::string& uid, const char* addr, std::vector<PortMapping> ports = {}) {
  Workload w;
  w.uid = uid;
  w.name = uid;
  w.ns = "ns";
  w.addresses = {ip(addr)};
  w.services[kKey] = std::move(ports);
  return w;
}

MeshModel model(Service s, std::vector<Workload> ws) {
  MeshModel m;
  m.services[s.key()] = std::move(s);
  for (auto& w : ws) m.workloads[w.uid] = std::move(w);
  return m;
}

std::vector<std::string> uids(const ServiceSpec& s) {
  std::vector<std::string> out;
  for (const auto& e : s.endpoints) out.push_back(e.uid);
  return out;
}

TEST(MeshMapping, OneSpecPerVipAndPortWithStableNames) {
  Service s = web({{80, 8080, 0}, {443, 8443, 0}});
  s.vips.push_back({"", ip("fd00::10"), std::nullopt});
  Workload w = wl("a", "10.0.0.1");
  w.addresses.push_back(ip("fd00::1"));
  auto r = map_mesh(model(s, {w}), {});
  ASSERT_EQ(r.specs.size(), 4u);
  EXPECT_EQ(r.specs[0].name, "ns/web.ns.svc.cluster.local:80@10.96.0.10");
  EXPECT_EQ(r.specs[1].name, "ns/web.ns.svc.cluster.local:443@10.96.0.10");
  EXPECT_EQ(r.specs[2].name, "ns/web.ns.svc.cluster.local:80@fd00::10");
  EXPECT_EQ(r.specs[0].vip, ip("10.96.0.10"));
  EXPECT_EQ(r.specs[0].protocol, L4Proto::kTcp);
  EXPECT_EQ(r.specs[0].source, "mesh");
  // Each VIP's endpoints use the workload address of its family.
  EXPECT_EQ(r.specs[0].endpoints[0].address, ip("10.0.0.1"));
  EXPECT_EQ(r.specs[2].endpoints[0].address, ip("fd00::1"));
  EXPECT_EQ(r.specs[3].endpoints[0].port, 8443);

  auto single = map_mesh(model(web(), {wl("a", "10.0.0.1")}), {});
  ASSERT_EQ(single.specs.size(), 1u);
  EXPECT_EQ(single.specs[0].name, "ns/web.ns.svc.cluster.local:80");
}

TEST(MeshMapping, WorkloadPortListWinsOverServiceTargetPort) {
  Service s = web({{80, 8080, 0}, {90, 0, 0}});
  auto r = map_mesh(model(s, {wl("own", "10.0.0.1", {{80, 9999, 0}, {90, 9090, 0}}),
                              wl("plain", "10.0.0.2"),
                              wl("zero", "10.0.0.3", {{80, 0, 0}})}),
                    {});
  ASSERT_EQ(r.specs.size(), 2u);
  ASSERT_EQ(r.specs[0].endpoints.size(), 3u);
  EXPECT_EQ(r.specs[0].endpoints[0].port, 9999);  // own PortList
  EXPECT_EQ(r.specs[0].endpoints[1].port, 8080);  // service target_port
  EXPECT_EQ(r.specs[0].endpoints[2].port, 8080);  // target 0 in the PortList: the service's
  // A named port (service target 0) resolves only through a workload's PortList.
  EXPECT_EQ(uids(r.specs[1]), std::vector<std::string>{"own"});
  EXPECT_EQ(r.specs[1].endpoints[0].port, 9090);
  EXPECT_EQ(r.stats.skipped_no_target_port, 2u);
}

TEST(MeshMapping, CapacityIsTheWeight) {
  Workload a = wl("a", "10.0.0.1");
  a.capacity = 5;
  Workload b = wl("b", "10.0.0.2");
  Workload c = wl("c", "10.0.0.3");
  c.capacity = 1000000;
  auto r = map_mesh(model(web(), {a, b, c}), {});
  ASSERT_EQ(r.specs[0].endpoints.size(), 3u);
  EXPECT_EQ(r.specs[0].endpoints[0].weight, 5u);
  EXPECT_EQ(r.specs[0].endpoints[1].weight, 1u);
  EXPECT_EQ(r.specs[0].endpoints[2].weight, 65535u);  // clamped to the static weight range
}

TEST(MeshMapping, UnhealthyExcludedUnlessAllowAll) {
  Workload sick = wl("sick", "10.0.0.1");
  sick.healthy = false;
  auto r = map_mesh(model(web(), {sick, wl("ok", "10.0.0.2")}), {});
  EXPECT_EQ(uids(r.specs[0]), std::vector<std::string>{"ok"});
  EXPECT_EQ(r.stats.skipped_unhealthy, 1u);

  Service all = web();
  all.load_balancing.health_policy = HealthPolicy::kAllowAll;
  auto r2 = map_mesh(model(all, {sick, wl("ok", "10.0.0.2")}), {});
  EXPECT_EQ(uids(r2.specs[0]), (std::vector<std::string>{"ok", "sick"}));
  for (const auto& e : r2.specs[0].endpoints) EXPECT_TRUE(e.healthy);
}

Workload at(const std::string& uid, const char* addr, Locality l, const char* network = "") {
  Workload w = wl(uid, addr);
  w.locality = std::move(l);
  w.network = network;
  return w;
}

TEST(MeshMapping, StrictKeepsOnlyFullMatches) {
  Service s = web();
  s.load_balancing.mode = LbMode::kStrict;
  s.load_balancing.routing_preference = {LbScope::kRegion, LbScope::kZone};
  MappingOptions opt;
  opt.locality = {"eu", "eu-1a", ""};
  auto r = map_mesh(model(s, {at("same", "10.0.0.1", {"eu", "eu-1a", "x"}),
                              at("zone", "10.0.0.2", {"eu", "eu-1b", ""}),
                              at("region", "10.0.0.3", {"us", "eu-1a", ""})}),
                    opt);
  EXPECT_EQ(uids(r.specs[0]), std::vector<std::string>{"same"});
  EXPECT_EQ(r.stats.skipped_locality, 2u);

  // Nothing matches: the service exists with no endpoints (traffic to it is dropped).
  opt.locality = {"ap", "", ""};
  auto none = map_mesh(model(s, {at("same", "10.0.0.1", {"eu", "eu-1a", ""})}), opt);
  ASSERT_EQ(none.specs.size(), 1u);
  EXPECT_TRUE(none.specs[0].endpoints.empty());
}

TEST(MeshMapping, FailoverKeepsTheBestRankOnly) {
  Service s = web();
  s.load_balancing.mode = LbMode::kFailover;
  s.load_balancing.routing_preference = {LbScope::kNetwork, LbScope::kRegion, LbScope::kZone};
  MappingOptions opt;
  opt.locality = {"eu", "eu-1a", ""};
  const Workload zone_match = at("zone", "10.0.0.1", {"eu", "eu-1a", ""});
  const Workload region_match = at("region", "10.0.0.2", {"eu", "eu-1b", ""});
  const Workload far = at("far", "10.0.0.3", {"us", "us-1a", ""});
  EXPECT_EQ(uids(map_mesh(model(s, {zone_match, region_match, far}), opt).specs[0]),
            std::vector<std::string>{"zone"});
  EXPECT_EQ(uids(map_mesh(model(s, {region_match, far}), opt).specs[0]),
            std::vector<std::string>{"region"});
  // When nothing is close, everything that is left is used.
  Workload far2 = at("far2", "10.0.0.4", {"ap", "", ""});
  EXPECT_EQ(uids(map_mesh(model(s, {far, far2}), opt).specs[0]),
            (std::vector<std::string>{"far", "far2"}));
  // Unspecified mode ignores the preferences.
  s.load_balancing.mode = LbMode::kUnspecified;
  EXPECT_EQ(uids(map_mesh(model(s, {zone_match, far}), opt).specs[0]),
            (std::vector<std::string>{"far", "zone"}));
}

TEST(MeshMapping, LocalityRankFollowsZtunnel) {
  LoadBalancing lb{{LbScope::kNetwork, LbScope::kRegion, LbScope::kZone}, LbMode::kFailover,
                   HealthPolicy::kOnlyHealthy};
  MappingOptions opt;
  opt.network = "n1";
  opt.locality = {"eu", "eu-1a", ""};
  EXPECT_EQ(locality_rank(lb, at("a", "10.0.0.1", {"eu", "eu-1a", ""}, "n1"), opt), 5);
  EXPECT_EQ(locality_rank(lb, at("a", "10.0.0.1", {"eu", "x", ""}, "n1"), opt), 4);
  EXPECT_EQ(locality_rank(lb, at("a", "10.0.0.1", {"eu", "eu-1a", ""}, "n2"), opt), 0);
  lb.mode = LbMode::kStrict;
  EXPECT_EQ(locality_rank(lb, at("a", "10.0.0.1", {"eu", "x", ""}, "n1"), opt), -1);
  lb.routing_preference = {LbScope::kNode};
  EXPECT_EQ(locality_rank(lb, at("a", "10.0.0.1", {}, "n1"), opt), -1);  // no node for a gateway
}

TEST(MeshMapping, HboneTunnelAndIdentityPerEndpoint) {
  Workload h = wl("h", "10.0.0.1");
  h.tunnel = Tunnel::kHbone;
  h.service_account = "reviews";
  h.trust_domain = "example.org";
  h.authorization_policies = {"ns/only-reviews"};
  Workload p = wl("p", "10.0.0.2");
  auto r = map_mesh(model(web(), {h, p}), {});
  ASSERT_EQ(r.specs[0].endpoints.size(), 2u);
  // What HBONE resolution needs: the service's FQDN and each workload's selector policies.
  EXPECT_EQ(r.specs[0].hostname, web().hostname);
  EXPECT_FALSE(r.specs[0].hostname.empty());
  EXPECT_EQ(r.specs[0].endpoints[0].policy_keys, std::vector<std::string>{"ns/only-reviews"});
  EXPECT_TRUE(r.specs[0].endpoints[1].policy_keys.empty());
  EXPECT_EQ(r.specs[0].endpoints[0].tunnel, TunnelProtocol::kHbone);
  EXPECT_EQ(r.specs[0].endpoints[0].identity, "spiffe://example.org/ns/ns/sa/reviews");
  EXPECT_EQ(r.specs[0].endpoints[1].tunnel, TunnelProtocol::kNone);
  EXPECT_EQ(r.specs[0].endpoints[1].identity, "spiffe://cluster.local/ns/ns/sa/default");
  EXPECT_EQ(r.stats.hbone_endpoints, 1u);
}

TEST(MeshMapping, ForwardModeComesFromMeshConfig) {
  MappingOptions opt;
  opt.mode = ForwardMode::kFullnat;
  EXPECT_EQ(map_mesh(model(web(), {wl("a", "10.0.0.1")}), opt).specs[0].mode, ForwardMode::kFullnat);
}

TEST(MeshMapping, SkipsWhatTheGatewayCannotServe) {
  MeshModel m;
  Service headless = web();
  headless.hostname = "headless.ns.svc.cluster.local";
  headless.vips.clear();
  Service pass = web();
  pass.hostname = "pass.ns.svc.cluster.local";
  pass.vips = {{"", ip("10.96.0.11"), std::nullopt}};
  pass.load_balancing.mode = LbMode::kPassthrough;
  Service cidr = web();
  cidr.hostname = "cidr.ns.svc.cluster.local";
  cidr.vips = {{"", ip("10.96.1.0"), uint8_t(24)}};
  Service other_net = web();
  other_net.hostname = "far.ns.svc.cluster.local";
  other_net.vips = {{"net2", ip("10.96.0.12"), std::nullopt}};
  for (auto* s : {&headless, &pass, &cidr, &other_net}) m.services[s->key()] = *s;
  auto r = map_mesh(m, {});
  EXPECT_TRUE(r.specs.empty());
  EXPECT_EQ(r.stats.skipped_headless, 3u);  // headless, CIDR-only and other-network services
  EXPECT_EQ(r.stats.skipped_passthrough, 1u);
  EXPECT_EQ(r.stats.skipped_cidr_vips, 1u);

  // Endpoints on another network (reached through a network gateway) and without an address
  // of the VIP's family are left out.
  Workload remote = wl("remote", "10.0.0.1");
  remote.network = "net2";
  Workload v6only = wl("v6", "fd00::1");
  Workload dns = wl("dns", "10.0.0.2");
  dns.addresses.clear();
  dns.hostname = "db.example.com";
  auto r2 = map_mesh(model(web(), {remote, v6only, dns, wl("ok", "10.0.0.3")}), {});
  EXPECT_EQ(uids(r2.specs[0]), std::vector<std::string>{"ok"});
  EXPECT_EQ(r2.stats.skipped_other_network, 1u);
  EXPECT_EQ(r2.stats.skipped_no_address, 2u);
}

TEST(MeshMapping, StaticServicesKeepTheirVipPort) {
  ServiceSpec taken;
  taken.name = "static-web";
  taken.vip = ip("10.96.0.10");
  taken.port = 80;
  auto r = map_mesh(model(web(), {wl("a", "10.0.0.1")}), {}, {taken});
  EXPECT_TRUE(r.specs.empty());
  EXPECT_EQ(r.stats.duplicate_vips, 1u);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("10.96.0.10:80/tcp is already used"), std::string::npos);
}

TEST(MeshMapping, AutomaticTableSizeGivesEachEndpointAHundredSlotsInDoublingBands) {
  // 1009 x 2^k, rounded up to a prime, the first that holds 100 slots per endpoint.
  const std::pair<size_t, uint32_t> cases[] = {{0, 1009},    {1, 1009},    {10, 1009},
                                               {11, 2027},   {20, 2027},   {21, 4049},
                                               {40, 4049},   {41, 8081},   {1000, 129169}};
  for (const auto& [n, want] : cases) {
    EXPECT_EQ(mesh_table_size(n, 0), want) << n << " endpoints";
    EXPECT_TRUE(is_prime(want));
    EXPECT_GE(uint64_t(want), 100ull * n);
  }
  // The size moves only when the endpoint count leaves its band: a pod added to a deployment of
  // 12 keeps every slot count, and so Maglev's ~1/N disruption.
  EXPECT_EQ(mesh_table_size(12, 0), mesh_table_size(13, 0));
}

TEST(MeshMapping, ConfiguredTableSizeIsUsedWhenEveryEndpointFitsIn) {
  EXPECT_EQ(mesh_table_size(10, 65537), 65537u);
  EXPECT_EQ(mesh_table_size(7, 7), 7u);
  // Fewer slots than endpoints: some endpoint would get none, so the automatic size is used.
  EXPECT_EQ(mesh_table_size(8, 7), 1009u);
}

TEST(MeshMapping, SpecsCarryTheMeshTableSize) {
  std::vector<Workload> ws;
  for (int i = 0; i < 11; ++i) ws.push_back(wl("w" + std::to_string(i), ("10.0.0." + std::to_string(i + 1)).c_str()));
  auto r = map_mesh(model(web(), ws), {});
  ASSERT_EQ(r.specs.size(), 1u);
  EXPECT_EQ(r.specs[0].table_size, 2027u);
  MappingOptions opt;
  opt.table_size = 4099;
  EXPECT_EQ(map_mesh(model(web(), ws), opt).specs[0].table_size, 4099u);
}

TEST(MeshMapping, PoliciesAreCounted) {
  MeshModel m = model(web(), {wl("a", "10.0.0.1")});
  m.policies["ns/p"] = Policy{"p", "ns"};
  EXPECT_EQ(map_mesh(m, {}).stats.policies, 1u);
}

}  // namespace
}  // namespace meshgate::ctl::mesh
