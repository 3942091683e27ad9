// The snapshot builder's reuse of earlier work: a rebuild takes the Maglev tables of unchanged
// services and the LPM tables of unchanged routes from the last build, and must give the same
// snapshot a build from scratch gives. Also the grouping of backends by address (replies find
// their services) and the cache forgetting services that left.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_lpm.h>

#include <algorithm>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

#include "control/snapshot/builder.h"
#include "dataplane/hbone/resolve.h"
#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"

namespace meshgate {
namespace {

using test::A;

struct Fixture {
  ctl::Config cfg;
  std::vector<dp::PortRuntime> ports;

  explicit Fixture(const std::string& toml = test::kDemoTopology) {
    test::init_eal_once();
    auto c = ctl::parse_config(toml, "test.toml");
    if (!c) throw std::runtime_error(c.error().str());
    cfg = std::move(c.value());
    for (size_t i = 0; i < cfg.ports.size(); ++i) {
      dp::PortRuntime p;
      p.name = cfg.ports[i].name;
      p.index = uint16_t(i);
      p.addresses = cfg.ports[i].addresses;
      ports.push_back(p);
    }
  }
  std::unique_ptr<dp::Snapshot, void (*)(dp::Snapshot*)> build(const std::vector<ctl::ServiceSpec>& s,
                                                             ctl::Registries& reg, uint64_t v) {
    auto r = ctl::build_snapshot(cfg, s, ports, reg, v);
    if (!r) throw std::runtime_error(r.error().message);
    return {*r, dp::snapshot_free};
  }
};

ctl::ServiceSpec spec(const std::string& name, const char* vip, uint16_t port,
                      std::vector<std::pair<const char*, uint32_t>> backends) {
  ctl::ServiceSpec s;
  s.name = name;
  s.vip = A(vip);
  s.port = port;
  s.table_size = 1009;
  for (const auto& [addr, w] : backends) {
    ctl::EndpointSpec e;
    e.address = A(addr);
    e.port = 8080;
    e.weight = w;
    s.endpoints.push_back(e);
  }
  return s;
}

// Same services, backends, weights, tables and counter names (ids may differ between
// registries).
void expect_same_services(const dp::Snapshot& a, const ctl::Registries& ra, const dp::Snapshot& b,
                          const ctl::Registries& rb) {
  ASSERT_EQ(a.services.size(), b.services.size());
  for (size_t i = 0; i < a.services.size(); ++i) {
    const dp::SnapService& x = a.services[i];
    const dp::SnapService& y = b.services[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.vip, y.vip);
    EXPECT_EQ(x.port_be, y.port_be);
    ASSERT_EQ(x.n_backends, y.n_backends);
    for (uint32_t k = 0; k < x.n_backends; ++k) {
      const dp::SnapBackend& p = a.backends[x.first_backend + k];
      const dp::SnapBackend& q = b.backends[y.first_backend + k];
      EXPECT_EQ(p.address, q.address);
      EXPECT_EQ(p.port_be, q.port_be);
      EXPECT_EQ(p.weight, q.weight);
      EXPECT_EQ(p.healthy, q.healthy);
      EXPECT_EQ(p.tunnel, q.tunnel);
      EXPECT_EQ(a.identity_of(p), b.identity_of(q));
      EXPECT_EQ(ra.stats.names()[p.stat_id].backend, rb.stats.names()[q.stat_id].backend);
      EXPECT_EQ(ra.stats.names()[p.stat_id].service, x.name);
    }
    ASSERT_EQ(x.table_size, y.table_size);
    ASSERT_EQ(x.table == nullptr, y.table == nullptr);
    if (x.table) {
      EXPECT_TRUE(std::equal(x.table, x.table + x.table_size, y.table));
    }
  }
}

// `s`, built with `reg`, equals a build of `v` from scratch.
void expect_same_as_from_scratch(Fixture& f, const std::vector<ctl::ServiceSpec>& v,
                                 const dp::Snapshot& s, const ctl::Registries& reg) {
  ctl::Registries fresh;
  auto scratch = f.build(v, fresh, s.version);
  expect_same_services(s, reg, *scratch, fresh);
}

TEST(SnapshotBuilder, RebuildReusesUnchangedTablesAndEqualsABuildFromScratch) {
  Fixture f;
  std::vector<ctl::ServiceSpec> v1 = {
      spec("same", "203.0.113.1", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("weights", "203.0.113.2", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("members", "203.0.113.3", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("health", "203.0.113.4", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("size", "203.0.113.5", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
  };
  ctl::Registries reg;
  auto s1 = f.build(v1, reg, 1);
  EXPECT_EQ(reg.last_build.tables_built, 5u);
  EXPECT_FALSE(reg.last_build.routes_reused);

  auto v2 = v1;
  v2[1].endpoints[0].weight = 3;
  v2[2].endpoints.push_back(v2[2].endpoints[0]);
  v2[2].endpoints.back().address = A("198.51.100.13");
  v2[3].endpoints[1].healthy = false;  // weight 0 in the table
  v2[4].table_size = 2027;
  auto s2 = f.build(v2, reg, 2);
  EXPECT_EQ(reg.last_build.tables_reused, 1u);
  EXPECT_EQ(reg.last_build.tables_built, 4u);
  EXPECT_TRUE(reg.last_build.routes_reused);
  // Shared, not copied: the unchanged service points at the first snapshot's table.
  EXPECT_EQ(s2->services[0].table, s1->services[0].table);
  EXPECT_NE(s2->services[1].table, s1->services[1].table);
  EXPECT_EQ(s2->backends[s2->services[3].first_backend + 1].weight, 0u);

  expect_same_as_from_scratch(f, v2, *s2, reg);

  // Back to the first specs: the tables equal the first build's, whichever way they were made.
  auto s3 = f.build(v1, reg, 3);
  expect_same_services(*s3, reg, *s1, reg);
  // Counters keep their ids across rebuilds: the same backend of the same service, same slot.
  EXPECT_EQ(s3->backends[0].stat_id, s1->backends[0].stat_id);
}

// A config reload (GatewayRun::reload) builds the next snapshot from the new file's services
// with the same registries: services whose backends did not change keep their Maglev tables
// (so their flows' backends stay where new flows go too), and the snapshot carries the new
// file's worker settings.
TEST(SnapshotBuilder, AReloadedConfigKeepsUnchangedServicesTablesAndCarriesItsSettings) {
  const std::string services = R"(
[[service]]
name = "same"
vip = "203.0.113.1"
port = 80
table_size = 1009
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "weight"
vip = "203.0.113.2"
port = 80
table_size = 1009
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "leaving"
vip = "203.0.113.3"
port = 80
  [[service.backend]]
  address = "198.51.100.13"
  port = 8080
)";
  std::string topology(test::kDemoTopology);
  topology = topology.substr(0, topology.find("[[service]]"));  // its ports, routes, neighbors
  Fixture f(topology + services);
  ctl::Registries reg;
  auto s1 = f.build(ctl::services_from_config(f.cfg), reg, 1);
  ASSERT_TRUE(s1->settings.has_value());
  EXPECT_EQ(s1->settings->conntrack.tcp_established_ms, ctl::kDefaultTcpEstablishedS * 1000);

  // The new file: "weight" drains a backend, "leaving" is gone, "new" arrives, and the
  // conntrack and proxy timeouts change.
  std::string next = topology + services;
  const std::string w = "name = \"weight\"\nvip = \"203.0.113.2\"\nport = 80\ntable_size = 1009\n"
                        "  [[service.backend]]\n  address = \"198.51.100.11\"\n  port = 8080\n";
  ASSERT_NE(next.find(w), std::string::npos);
  next.replace(next.find(w), w.size(), w + "  weight = 0\n");
  next = next.substr(0, next.find("[[service]]\nname = \"leaving\""));
  next += "[[service]]\nname = \"new\"\nvip = \"203.0.113.4\"\nport = 80\n"
          "  [[service.backend]]\n  address = \"198.51.100.13\"\n  port = 8080\n"
          "[conntrack]\ntcp_established = 600\nudp = 5\ntcp_time_wait = 4\n"
          "[proxy]\nidle_timeout_s = 30\ntime_wait_s = 2\n";
  auto c2 = ctl::parse_config(next, "test.toml");
  ASSERT_TRUE(c2.ok()) << c2.error().str();
  f.cfg = std::move(c2.value());
  auto s2 = f.build(ctl::services_from_config(f.cfg), reg, 2);

  ASSERT_EQ(s2->services.size(), 3u);
  EXPECT_EQ(s2->services[0].name, "same");
  EXPECT_EQ(s2->services[0].table, s1->services[0].table);  // shared, not rebuilt
  EXPECT_EQ(s2->services[1].name, "weight");
  EXPECT_NE(s2->services[1].table, s1->services[1].table);
  EXPECT_EQ(s2->services[2].name, "new");
  EXPECT_EQ(s2->find_service(A("203.0.113.3"), htons(80), 6), nullptr);
  EXPECT_EQ(reg.last_build.tables_reused, 1u);
  EXPECT_EQ(reg.last_build.tables_built, 2u);
  // The drained backend takes no slot; the other keeps every slot of the service.
  const dp::SnapService& ws = s2->services[1];
  EXPECT_TRUE(std::all_of(ws.table, ws.table + ws.table_size, [](uint32_t b) { return b == 1; }));
  expect_same_as_from_scratch(f, ctl::services_from_config(f.cfg), *s2, reg);

  ASSERT_TRUE(s2->settings.has_value());
  EXPECT_EQ(s2->settings->conntrack.tcp_established_ms, 600000u);
  EXPECT_EQ(s2->settings->conntrack.udp_ms, 5000u);
  EXPECT_EQ(s2->settings->conntrack.tcp_time_wait_ms, 4000u);
  EXPECT_EQ(s2->settings->conntrack.tcp_close_ms, 4000u);  // never longer than TIME-WAIT
  EXPECT_EQ(s2->settings->proxy_idle_timeout_ms, 30000u);
  EXPECT_EQ(s2->settings->tcp_time_wait_ms, 2000u);
}

// Endpoints carry what HBONE and policy need (health, tunnel protocol, SPIFFE identity), and
// every snapshot carries the registries' policies and certificate metadata.
TEST(SnapshotBuilder, EndpointsCarryHealthTunnelAndIdentityAndSnapshotsCarryPoliciesAndCerts) {
  Fixture f;
  std::vector<ctl::ServiceSpec> v1 = {
      spec("mesh", "203.0.113.1", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("plain", "203.0.113.2", 80, {{"198.51.100.13", 1}}),
  };
  const std::string id_a = "spiffe://cluster.local/ns/a/sa/web";
  const std::string id_b = "spiffe://cluster.local/ns/b/sa/web";
  v1[0].endpoints[0].tunnel = ctl::TunnelProtocol::kHbone;
  v1[0].endpoints[0].identity = id_a;
  v1[0].endpoints[1].tunnel = ctl::TunnelProtocol::kHbone;
  v1[0].endpoints[1].identity = id_b;
  v1[0].endpoints[1].healthy = false;
  ctl::Registries reg;
  auto policies = std::make_shared<dp::policy::PolicySet>();
  dp::policy::ScopedPolicy deny;
  deny.scope = dp::policy::Scope::kNamespace;
  deny.ns = "a";
  deny.name = "deny-all";
  deny.policy.name = "a/deny-all";
  deny.policy.action = dp::policy::Action::kDeny;
  policies->policies.push_back(deny);
  reg.policies = policies;
  auto certs = std::make_shared<std::vector<dp::CertMeta>>(1);
  (*certs)[0].role = "leaf";
  (*certs)[0].identity = id_a;
  reg.certificates = certs;

  auto s1 = f.build(v1, reg, 1);
  const dp::SnapBackend& b0 = s1->backends[0];
  const dp::SnapBackend& b1 = s1->backends[1];
  const dp::SnapBackend& b2 = s1->backends[2];
  EXPECT_EQ(b0.tunnel, dp::Tunnel::kHbone);
  EXPECT_TRUE(b0.healthy);
  EXPECT_EQ(s1->identity_of(b0), id_a);
  EXPECT_EQ(b1.tunnel, dp::Tunnel::kHbone);
  EXPECT_FALSE(b1.healthy);
  EXPECT_EQ(b1.weight, 0u);
  EXPECT_EQ(s1->identity_of(b1), id_b);
  EXPECT_EQ(b2.tunnel, dp::Tunnel::kNone);
  EXPECT_EQ(b2.identity, 0u);
  EXPECT_EQ(s1->identity_of(b2), "");
  ASSERT_EQ(s1->policies.get(), policies.get());
  const std::vector<std::string> none;
  EXPECT_EQ(s1->policies->for_destination("a", none).size(), 1u);
  EXPECT_TRUE(s1->policies->for_destination("b", none).empty());
  ASSERT_TRUE(s1->certificates);
  EXPECT_EQ(s1->certificates->at(0).identity, id_a);

  // A rebuild with nothing new shares the identity list; a new pod with a recycled address
  // (same address:port, new identity) changes the identity, not the Maglev table.
  auto s2 = f.build(v1, reg, 2);
  EXPECT_EQ(s2->identities.get(), s1->identities.get());
  auto v3 = v1;
  const std::string id_c = "spiffe://cluster.local/ns/a/sa/api";
  v3[0].endpoints[0].identity = id_c;
  v3[1].endpoints[0].tunnel = ctl::TunnelProtocol::kHbone;
  auto s3 = f.build(v3, reg, 3);
  EXPECT_EQ(reg.last_build.tables_built, 0u);
  EXPECT_EQ(s3->identity_of(s3->backends[0]), id_c);
  EXPECT_EQ(s3->backends[2].tunnel, dp::Tunnel::kHbone);
  EXPECT_NE(s3->identities.get(), s1->identities.get());
  // The older snapshot still resolves its ids (ids are never reused).
  EXPECT_EQ(s1->identity_of(s1->backends[0]), id_a);
  EXPECT_EQ(s3->backends[1].identity, s1->backends[1].identity);

  // The same as a build from scratch, field by field.
  expect_same_as_from_scratch(f, v3, *s3, reg);
}

// config/README.md [mesh] mode: endpoints with tunnel = hbone are always reached over HBONE. With an
// [hbone] certificate source, a TCP service with such an endpoint runs on the workers' stack
// (proxy mode: the originator takes connections whose choice is an HBONE endpoint); without
// one (nothing to prove our identity with) its mode stays; UDP is never terminated.
TEST(SnapshotBuilder, ServicesWithHboneEndpointsRunOnTheStackOnlyWithAnHboneCertificate) {
  std::vector<ctl::ServiceSpec> v = {
      spec("mesh", "203.0.113.1", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("plain", "203.0.113.2", 80, {{"198.51.100.13", 1}}),
      spec("mesh-udp", "203.0.113.3", 53, {{"198.51.100.11", 1}}),
  };
  v[0].endpoints[1].tunnel = ctl::TunnelProtocol::kHbone;
  v[2].endpoints[0].tunnel = ctl::TunnelProtocol::kHbone;
  v[2].protocol = L4Proto::kUdp;
  {
    Fixture f;
    ctl::Registries reg;
    auto s = f.build(v, reg, 1);
    for (const dp::SnapService& sv : s->services) EXPECT_EQ(sv.mode, dp::Mode::kDnat) << sv.name;
  }
  Fixture f(std::string(test::kDemoTopology) +
            "\n[hbone]\ncert_chain = \"gw.pem\"\nprivate_key = \"gw-key.pem\"\n"
            "[fullnat]\nlocal_addresses = [\"198.51.100.2\"]\n");
  ctl::Registries reg;
  auto s = f.build(v, reg, 1);
  EXPECT_EQ(s->services[0].mode, dp::Mode::kProxy);
  EXPECT_EQ(s->services[1].mode, dp::Mode::kDnat);
  EXPECT_EQ(s->services[2].mode, dp::Mode::kDnat);
}

TEST(SnapshotBuilder, AServiceWithoutEligibleBackendsHasNoTableAndGetsOneBack) {
  Fixture f;
  ctl::Registries reg;
  std::vector<ctl::ServiceSpec> v = {spec("web", "203.0.113.1", 80, {{"198.51.100.11", 0}})};
  auto s1 = f.build(v, reg, 1);
  EXPECT_EQ(s1->services[0].table, nullptr);
  EXPECT_EQ(s1->services[0].table_size, 0u);
  auto s2 = f.build(v, reg, 2);
  EXPECT_EQ(s2->services[0].table, nullptr);
  EXPECT_EQ(reg.last_build.tables_reused, 1u);
  v[0].endpoints[0].weight = 1;
  auto s3 = f.build(v, reg, 3);
  ASSERT_NE(s3->services[0].table, nullptr);
  EXPECT_EQ(s3->services[0].table[0], 0u);
}

TEST(SnapshotBuilder, UnhealthyBackendsOfAResetServiceHaveTheirFlowsResetUntilTheyAreBack) {
  Fixture f;
  ctl::Registries reg;
  auto reset = spec("reset", "203.0.113.10", 80,
                    {{"198.51.100.11", 1}, {"198.51.100.12", 1}, {"198.51.100.13", 1}});
  reset.on_backend_removal = ctl::BackendRemoval::kReset;
  auto keep = spec("keep", "203.0.113.11", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}});
  auto s1 = f.build({reset, keep}, reg, 1);
  for (uint32_t b = 0; b < s1->backends.size(); ++b) {
    EXPECT_FALSE(s1->reset_flows_of(s1->backends[b].stat_id)) << "all healthy: backend " << b;
  }
  // Backend .12 fails its health check in both services.
  reset.endpoints[1].healthy = false;
  keep.endpoints[1].healthy = false;
  auto s2 = f.build({reset, keep}, reg, 2);
  const dp::SnapService& r = s2->services[0];
  const dp::SnapService& k = s2->services[1];
  EXPECT_TRUE(s2->reset_flows_of(s2->backends[r.first_backend + 1].stat_id));
  EXPECT_FALSE(s2->reset_flows_of(s2->backends[r.first_backend].stat_id));
  EXPECT_FALSE(s2->reset_flows_of(s2->backends[r.first_backend + 2].stat_id));
  // on_backend_removal = "keep": its flows stay.
  EXPECT_FALSE(s2->reset_flows_of(s2->backends[k.first_backend + 1].stat_id));
  // Neither service gives it new flows.
  for (const dp::SnapService* sv : {&r, &k}) {
    for (uint32_t slot = 0; slot < sv->table_size; ++slot) {
      ASSERT_NE(sv->table[slot], 1u) << sv->name << " slot " << slot;
    }
  }
  // Back up: its flows are no longer reset.
  reset.endpoints[1].healthy = true;
  keep.endpoints[1].healthy = true;
  auto s3 = f.build({reset, keep}, reg, 3);
  EXPECT_FALSE(s3->reset_flows_of(s3->backends[s3->services[0].first_backend + 1].stat_id));
}

TEST(SnapshotBuilder, RouteTablesAreSharedUntilTheRoutesChange) {
  Fixture f;
  ctl::Registries reg;
  const std::vector<ctl::ServiceSpec> v = {spec("web", "203.0.113.1", 80, {{"198.51.100.11", 1}})};
  auto s1 = f.build(v, reg, 1);
  auto s2 = f.build(v, reg, 2);
  EXPECT_EQ(s1->route_tables, s2->route_tables);
  EXPECT_EQ(s2->lpm4, s1->lpm4);
  std::weak_ptr<const dp::RouteTables> first = s1->route_tables;

  Fixture g(std::string(test::kDemoTopology) + R"(
[[route]]
prefix = "10.0.0.0/8"
via = "198.51.100.254"
)");
  g.cfg.routes.back().via = A("198.51.100.13");  // another next hop for 10/8
  auto s3 = g.build(v, reg, 3);
  EXPECT_FALSE(reg.last_build.routes_reused);
  EXPECT_NE(s3->route_tables, s2->route_tables);
  uint32_t nh = 0;
  ASSERT_EQ(rte_lpm_lookup(s3->lpm4, A("10.1.2.3").v4_host(), &nh), 0);
  EXPECT_EQ(s3->next_hops[nh].gateway, A("198.51.100.13"));
  ASSERT_EQ(rte_lpm_lookup(s3->lpm4, A("192.0.2.1").v4_host(), &nh), 0);  // default route
  EXPECT_EQ(s3->next_hops[nh].gateway, A("198.51.100.254"));
  // The old tables go with the last snapshot that holds them (the cache moved on).
  EXPECT_FALSE(first.expired());
  s1.reset();
  s2.reset();
  EXPECT_TRUE(first.expired());
}

TEST(SnapshotBuilder, CacheForgetsServicesThatLeft) {
  Fixture f;
  ctl::Registries reg;
  std::vector<ctl::ServiceSpec> v = {spec("a", "203.0.113.1", 80, {{"198.51.100.11", 1}}),
                                     spec("b", "203.0.113.2", 80, {{"198.51.100.11", 1}})};
  auto s1 = f.build(v, reg, 1);
  EXPECT_EQ(reg.cache.services.size(), 2u);
  v.pop_back();
  auto s2 = f.build(v, reg, 2);
  EXPECT_EQ(reg.cache.services.size(), 1u);
  EXPECT_TRUE(reg.cache.services.contains("a"));
}

// `n` services of 4..24 backends each, tables of 1009 or 2027 slots (some IPv6), as a mesh has.
std::vector<ctl::ServiceSpec> many_services(uint32_t n) {
  std::vector<ctl::ServiceSpec> v;
  for (uint32_t i = 0; i < n; ++i) {
    ctl::ServiceSpec s;
    s.name = "ns-" + std::to_string(i / 50) + "/svc-" + std::to_string(i) + ":80";
    const bool six = i % 7 == 6;
    s.vip = six ? A(("fd00:96::" + std::to_string(i)).c_str()) : IpAddr::v4(0x0a600000 + i);
    s.port = 80;
    const uint32_t backends = 4 + i % 21;
    s.table_size = backends > 10 ? 2027 : 1009;
    for (uint32_t b = 0; b < backends; ++b) {
      ctl::EndpointSpec e;
      const uint32_t host = i * 32 + b;
      e.address = six ? A(("fd00:244::" + std::to_string(host)).c_str())
                      : IpAddr::v4(0x0a800000 + host);
      e.port = 8080;
      e.weight = 1 + (i + b) % 3;
      e.identity = "spiffe://cluster.local/ns/ns-" + std::to_string(i / 50) + "/sa/svc-" +
                   std::to_string(i);
      s.endpoints.push_back(e);
    }
    v.push_back(std::move(s));
  }
  return v;
}

// The same builds on the control thread alone and split over three threads (500 services, ~850k
// slots: every thread gets a run) give the same tables slot for slot, first and after changes.
TEST(SnapshotBuilder, TablesFilledOnThreeThreadsEqualASerialBuildSlotForSlot) {
  Fixture f;
  ctl::Registries serial, parallel;
  ASSERT_TRUE(parallel.pool.start(3));
  EXPECT_EQ(serial.pool.threads(), 1u);
  EXPECT_EQ(parallel.pool.threads(), 3u);
  auto v = many_services(500);
  auto check = [&](uint64_t version) {
    SCOPED_TRACE(version);
    auto a = f.build(v, serial, version);
    auto b = f.build(v, parallel, version);
    EXPECT_EQ(serial.last_build.tables_built, parallel.last_build.tables_built);
    EXPECT_EQ(serial.last_build.tables_reused, parallel.last_build.tables_reused);
    ASSERT_EQ(a->services.size(), b->services.size());
    for (size_t i = 0; i < a->services.size(); ++i) {
      const dp::SnapService& x = a->services[i];
      const dp::SnapService& y = b->services[i];
      ASSERT_NE(x.table, nullptr) << x.name;
      ASSERT_EQ(x.table_size, y.table_size) << x.name;
      ASSERT_NE(y.table, nullptr) << y.name;
      for (uint32_t slot = 0; slot < x.table_size; ++slot) {
        ASSERT_EQ(x.table[slot], y.table[slot]) << x.name << " slot " << slot;
      }
    }
    expect_same_services(*a, serial, *b, parallel);
  };
  check(1);
  EXPECT_EQ(parallel.last_build.tables_built, 500u);
  for (size_t i = 0; i < v.size(); i += 3) v[i].endpoints[0].weight += 1;
  for (size_t i = 1; i < v.size(); i += 50) v[i].endpoints.pop_back();
  v[2].table_size = 4049;
  check(2);
  EXPECT_GT(parallel.last_build.tables_reused, 300u);
  for (auto& s : v) {
    for (auto& e : s.endpoints) e.weight = e.weight % 3 + 1;
  }
  check(3);
  EXPECT_EQ(parallel.last_build.tables_built, 500u);
}

// The cache finds services by position when their order holds and by name when it does not.
TEST(SnapshotBuilder, ServicesInAnotherOrderReuseTheirTables) {
  Fixture f;
  ctl::Registries reg;
  auto v = many_services(40);
  auto s1 = f.build(v, reg, 1);
  std::reverse(v.begin(), v.end());
  std::swap(v[3], v[17]);
  auto s2 = f.build(v, reg, 2);
  EXPECT_EQ(reg.last_build.tables_reused, 40u);
  EXPECT_EQ(reg.last_build.tables_built, 0u);
  for (const dp::SnapService& x : s2->services) {
    const auto it = std::find_if(s1->services.begin(), s1->services.end(),
                                 [&](const dp::SnapService& y) { return y.name == x.name; });
    ASSERT_NE(it, s1->services.end());
    EXPECT_EQ(x.table, it->table) << x.name;
  }
  expect_same_as_from_scratch(f, v, *s2, reg);
}

// Names are unique among specs; should one repeat anyway, each use gets its own backends'
// table, as a build of it alone does.
TEST(SnapshotBuilder, AServiceNameGivenTwiceGetsATableForEachBackendSet) {
  Fixture f;
  ctl::Registries reg;
  const std::vector<ctl::ServiceSpec> v = {
      spec("web", "203.0.113.1", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("web", "203.0.113.2", 80, {{"198.51.100.13", 1}}),
  };
  for (uint64_t version = 1; version <= 2; ++version) {
    auto s = f.build(v, reg, version);
    for (size_t i = 0; i < v.size(); ++i) {
      ctl::Registries alone;
      auto a = f.build({v[i]}, alone, 1);
      ASSERT_EQ(s->services[i].table_size, a->services[0].table_size);
      EXPECT_TRUE(std::equal(a->services[0].table, a->services[0].table + a->services[0].table_size,
                             s->services[i].table))
          << "service " << i << " build " << version;
    }
  }
}

TEST(BuildPool, RunsEachIndexOnceWithTheFirstOnTheCallerAndRethrows) {
  ctl::BuildPool pool;
  ASSERT_TRUE(pool.start(4));
  for (uint32_t n : {1u, 2u, 4u, 3u}) {
    std::vector<std::thread::id> ran(n);
    std::vector<int> times(n, 0);
    pool.run(n, [&](uint32_t i) {
      ran[i] = std::this_thread::get_id();
      ++times[i];
    });
    EXPECT_EQ(ran[0], std::this_thread::get_id());
    for (uint32_t i = 0; i < n; ++i) {
      EXPECT_EQ(times[i], 1) << i;
      for (uint32_t j = 0; j < i; ++j) EXPECT_NE(ran[i], ran[j]) << i << " " << j;
    }
  }
  EXPECT_THROW(pool.run(3, [](uint32_t i) {
    if (i == 2) throw std::runtime_error("helper");
  }),
               std::runtime_error);
  int after = 0;
  pool.run(2, [&](uint32_t i) {
    if (i == 1) after = 1;
  });
  EXPECT_EQ(after, 1) << "the pool keeps working after an exception";
}

TEST(SnapshotBuilder, RepliesFindEveryServiceOfABackendOnce) {
  Fixture f;
  ctl::Registries reg;
  auto dup = spec("dup", "203.0.113.3", 80, {{"198.51.100.12", 1}});
  dup.endpoints.push_back(dup.endpoints[0]);  // listed twice
  const std::vector<ctl::ServiceSpec> v = {
      spec("a", "203.0.113.1", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}}),
      spec("b", "203.0.113.2", 80, {{"198.51.100.12", 1}}), dup};
  auto s = f.build(v, reg, 1);
  uint32_t n = 0;
  const uint32_t* svcs = s->services_of_backend(A("198.51.100.12"), htons(8080), 6, &n);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(svcs[0], 0u);
  EXPECT_EQ(svcs[1], 1u);
  EXPECT_EQ(svcs[2], 2u);
  svcs = s->services_of_backend(A("198.51.100.11"), htons(8080), 6, &n);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(svcs[0], 0u);
  EXPECT_EQ(s->services_of_backend(A("198.51.100.11"), htons(8080), 17, &n), nullptr);
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(s->is_backend(A("198.51.100.12"), htons(8080), 6));
  // Distinct VIPs, in service order.
  EXPECT_EQ(s->vips, (std::vector<IpAddr>{A("203.0.113.1"), A("203.0.113.2"), A("203.0.113.3")}));
  EXPECT_TRUE(s->is_vip(A("203.0.113.2")));
}

// HBONE resolution on the snapshot (dataplane/hbone/resolve.h): what an :authority names, the
// endpoint chosen, and the policies of the chosen workload.
struct ResolveFixture : Fixture {
  ctl::Registries reg;
  std::unique_ptr<dp::Snapshot, void (*)(dp::Snapshot*)> snap{nullptr, dp::snapshot_free};
  ResolveFixture() {
    auto web = spec("demo/web.demo.svc.cluster.local:80", "203.0.113.1", 80,
                    {{"198.51.100.11", 1}, {"198.51.100.12", 1}});
    web.hostname = "web.demo.svc.cluster.local";
    web.endpoints[0].identity = "spiffe://cluster.local/ns/demo/sa/web";
    web.endpoints[0].policy_keys = {"demo/selected"};
    web.endpoints[1].identity = "spiffe://cluster.local/ns/other/sa/web";
    auto drained = spec("demo/drained.demo.svc.cluster.local:80", "203.0.113.2", 80,
                        {{"198.51.100.13", 0}});
    drained.hostname = "drained.demo.svc.cluster.local";
    drained.endpoints[0].identity = "spiffe://cluster.local/ns/demo/sa/drained";
    // A static ([[service]]) service: its backend is no mesh workload (no identity).
    auto plain = spec("static", "203.0.113.3", 80, {{"198.51.100.21", 1}});
    auto set = std::make_shared<dp::policy::PolicySet>();
    auto add = [&](dp::policy::Scope scope, const char* ns, const char* name) {
      dp::policy::ScopedPolicy p;
      p.scope = scope;
      p.ns = ns;
      p.name = name;
      p.policy.name = std::string(ns) + "/" + name;
      set->policies.push_back(p);
    };
    add(dp::policy::Scope::kNamespace, "demo", "ns-demo");
    add(dp::policy::Scope::kWorkloadSelector, "demo", "selected");
    add(dp::policy::Scope::kWorkloadSelector, "demo", "unselected");
    add(dp::policy::Scope::kGlobal, "istio-system", "global");
    add(dp::policy::Scope::kNamespace, "other", "ns-other");
    reg.policies = set;
    snap = build({web, drained, plain}, reg, 1);
  }
  dp::hbone::Destination resolve(const char* authority, uint32_t hash = 1) const {
    dp::hbone::Authority a;
    EXPECT_TRUE(dp::hbone::parse_authority(authority, a)) << authority;
    return dp::hbone::resolve(*snap, a, hash);
  }
};

TEST(HboneResolve, VipAndFqdnPickAnEndpointWithMaglevPodAddressesNameTheirWorkload) {
  ResolveFixture f;
  using K = dp::hbone::Resolution::Kind;
  std::set<std::string> chosen;
  for (uint32_t h = 0; h < 64; ++h) {
    const auto d = f.resolve("203.0.113.1:80", h * 2654435761u);
    ASSERT_EQ(d.kind, K::kServed);
    ASSERT_GE(d.backend, 0);
    const dp::SnapBackend& b = f.snap->backends[uint32_t(d.backend)];
    EXPECT_EQ(d.ip, b.address);
    EXPECT_EQ(htons(d.port), b.port_be);
    EXPECT_EQ(d.service, &f.snap->services[0]);
    EXPECT_EQ(d.resolution().cookie, uint64_t(d.backend) + 1);
    // The FQDN of the same service makes the same choice for the same hash.
    const auto n = f.resolve("web.demo.svc.cluster.local:80", h * 2654435761u);
    EXPECT_EQ(n.kind, K::kServed);
    EXPECT_EQ(n.backend, d.backend);
    chosen.insert(d.ip.str());
  }
  EXPECT_EQ(chosen, (std::set<std::string>{"198.51.100.11", "198.51.100.12"}));

  // A pod address: that workload, on the port asked for (a known endpoint port or another).
  const auto pod = f.resolve("198.51.100.12:8080");
  EXPECT_EQ(pod.kind, K::kServed);
  EXPECT_EQ(pod.backend, 1);
  EXPECT_EQ(pod.service, nullptr);
  const auto pod_other_port = f.resolve("198.51.100.11:9090");
  EXPECT_EQ(pod_other_port.kind, K::kServed);
  EXPECT_EQ(pod_other_port.port, 9090);
  EXPECT_EQ(pod_other_port.backend, 0);

  // Ours but nothing to connect to: 503. Not ours: 400.
  EXPECT_EQ(f.resolve("203.0.113.1:81").kind, K::kNoEndpoint);
  EXPECT_EQ(f.resolve("web.demo.svc.cluster.local:81").kind, K::kNoEndpoint);
  EXPECT_EQ(f.resolve("203.0.113.2:80").kind, K::kNoEndpoint) << "every endpoint drained";
  EXPECT_EQ(f.resolve("drained.demo.svc.cluster.local:80").kind, K::kNoEndpoint);
  EXPECT_EQ(f.resolve("192.0.2.99:80").kind, K::kNotServed);
  EXPECT_EQ(f.resolve("[2001:db8::1]:80").kind, K::kNotServed);
  EXPECT_EQ(f.resolve("api.demo.svc.cluster.local:80").kind, K::kNotServed);
}

TEST(HboneResolve, StaticBackendsAreNotWorkloadsOnlyTheirVipIsServed) {
  ResolveFixture f;
  using K = dp::hbone::Resolution::Kind;
  // docs/HBONE.md: a VIP, a service FQDN or a mesh workload address. A [[service.backend]] of
  // a static service is none of them, on its own port or any other.
  EXPECT_EQ(f.resolve("198.51.100.21:8080").kind, K::kNotServed);
  EXPECT_EQ(f.resolve("198.51.100.21:7000").kind, K::kNotServed);
  const auto vip = f.resolve("203.0.113.3:80");
  EXPECT_EQ(vip.kind, K::kServed);
  EXPECT_EQ(vip.ip, A("198.51.100.21"));
  // A mesh workload (it has an identity) stays served on any port.
  EXPECT_EQ(f.resolve("198.51.100.13:7000").kind, K::kServed);
}

TEST(HboneResolve, PoliciesOfTheChosenWorkloadAreGlobalItsNamespacesAndItsSelectorOnes) {
  ResolveFixture f;
  auto names = [&](int32_t backend) {
    std::vector<std::string> v;
    for (const auto* p : dp::hbone::policies_for(*f.snap, backend)) v.push_back(p->name);
    return v;
  };
  EXPECT_EQ(names(0), (std::vector<std::string>{"demo/ns-demo", "demo/selected", "istio-system/global"}));
  EXPECT_EQ(names(1), (std::vector<std::string>{"istio-system/global", "other/ns-other"}));
  EXPECT_EQ(names(-1), (std::vector<std::string>{"istio-system/global"})) << "no workload: global only";
}

TEST(HboneResolve, WildcardMeshHostnamesMatchAuthoritiesExactHostnamesFirst) {
  Fixture f;
  ctl::Registries reg;
  // ServiceEntry-style hosts: "*.example.com" and a longer "*.api.example.com", plus an exact
  // name under both wildcards.
  auto wide = spec("ext/*.example.com:443", "203.0.113.41", 443, {{"198.51.100.31", 1}});
  wide.hostname = "*.example.com";
  auto api = spec("ext/*.api.example.com:443", "203.0.113.42", 443, {{"198.51.100.32", 1}});
  api.hostname = "*.api.example.com";
  auto exact = spec("ext/v1.api.example.com:443", "203.0.113.43", 443, {{"198.51.100.33", 1}});
  exact.hostname = "v1.api.example.com";
  for (auto* s : {&wide, &api, &exact}) s->endpoints[0].identity = "spiffe://cluster.local/ns/ext/sa/x";
  auto snap = f.build({wide, api, exact}, reg, 1);
  ASSERT_NE(snap->host_patterns, nullptr);
  auto at = [&](const char* authority) {
    dp::hbone::Authority a;
    EXPECT_TRUE(dp::hbone::parse_authority(authority, a)) << authority;
    const auto d = dp::hbone::resolve(*snap, a, 1);
    return d.kind == dp::hbone::Resolution::Kind::kServed ? d.ip.str() : std::string("-");
  };
  EXPECT_EQ(at("shop.example.com:443"), "198.51.100.31");
  EXPECT_EQ(at("a.b.example.com:443"), "198.51.100.31") << "one or more labels";
  EXPECT_EQ(at("x.api.example.com:443"), "198.51.100.32") << "the longer suffix wins";
  EXPECT_EQ(at("v1.api.example.com:443"), "198.51.100.33") << "an exact hostname first";
  EXPECT_EQ(at("example.com:443"), "-") << "the wildcard needs a label";
  EXPECT_EQ(dp::hbone::resolve(*snap, [] {
              dp::hbone::Authority a;
              dp::hbone::parse_authority("shop.example.com:80", a);
              return a;
            }(), 1).kind,
            dp::hbone::Resolution::Kind::kNoEndpoint)
      << "a matched service without that port";
}

TEST(SnapshotBuilder, ServiceOptionsReachTheSnapshot) {
  Fixture f(std::string(test::kDemoTopology) + R"(
[[deny]]
source = "192.0.2.128/25"
[[deny]]
source = "2001:db8:bad::/48"
)");
  auto down = spec("down", "203.0.113.1", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}});
  for (auto& e : down.endpoints) e.healthy = false;
  auto drained = spec("drained", "203.0.113.2", 80, {{"198.51.100.11", 0}});
  auto half = spec("half", "203.0.113.3", 80, {{"198.51.100.11", 1}, {"198.51.100.12", 1}});
  half.endpoints[0].healthy = false;
  half.source_ranges = {*IpPrefix::parse("192.0.2.0/25")};
  half.affinity_timeout_s = 60;
  ctl::Registries reg;
  auto snap = f.build({down, drained, half}, reg, 1);
  const dp::SnapService* d = snap->find_service(A("203.0.113.1"), htons(80), 6);
  const dp::SnapService* w = snap->find_service(A("203.0.113.2"), htons(80), 6);
  const dp::SnapService* h = snap->find_service(A("203.0.113.3"), htons(80), 6);
  ASSERT_TRUE(d && w && h);
  EXPECT_TRUE(d->all_unhealthy);
  EXPECT_EQ(d->table_size, 0u);
  EXPECT_FALSE(w->all_unhealthy) << "weight 0 is a drain, not a health failure";
  EXPECT_EQ(w->table_size, 0u);
  EXPECT_FALSE(h->all_unhealthy);
  EXPECT_EQ(h->affinity_timeout_ms, 60000u);
  EXPECT_EQ(d->affinity_timeout_ms, 0u);
  EXPECT_EQ(d->source_ranges, 0u);
  ASSERT_NE(h->source_ranges, 0u);
  EXPECT_TRUE(snap->any_source_ranges);
  EXPECT_TRUE(snap->source_allowed(*h, A("192.0.2.5")));
  EXPECT_FALSE(snap->source_allowed(*h, A("192.0.2.200")));
  EXPECT_TRUE(snap->source_allowed(*d, A("192.0.2.200")));
  EXPECT_TRUE(snap->source_blocked(A("192.0.2.200")));
  EXPECT_FALSE(snap->source_blocked(A("192.0.2.5")));
  EXPECT_TRUE(snap->source_blocked(A("2001:db8:bad:1::1")));
  EXPECT_FALSE(snap->source_blocked(A("2001:db8:2::1")));
}

// A reload compiles its listeners' Hyperscan databases off the control thread
// (compile_listener_names) and hands them to the cache (adopt_names): the build that follows
// uses those very databases, compiles none, and a second compile against the cache finds
// nothing left to do.
TEST(SnapshotBuilder, NamesCompiledAheadAreTheOnesTheBuildUses) {
  Fixture f(std::string(test::kDemoTopology) + R"(
[fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
  [[service.deny]]
  pattern = "attack[0-9]+"
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
  [[listener.route]]
  hostnames = ["shop.example.com", "~api-[0-9]+\\.example\\.com"]
  service = "shop"
  [[listener.deny]]
  pattern = "evil"
)");
  ctl::Registries reg;
  ctl::CompiledNames c = ctl::compile_listener_names(f.cfg, ctl::cached_name_keys(reg.names));
  ASSERT_EQ(c.matchers.size(), 1u);
  ASSERT_EQ(c.deny_sets.size(), 2u);  // the listener's and the service's
  const dp::names::NameMatcher* matcher = c.matchers.begin()->second.get();
  std::set<const dp::names::DenySet*> deny;
  for (const auto& kv : c.deny_sets) deny.insert(kv.second.get());
  ctl::adopt_names(reg.names, std::move(c));
  auto s = f.build(ctl::services_from_config(f.cfg), reg, 1);
  ASSERT_EQ(s->listeners.size(), 1u);
  EXPECT_EQ(s->listeners[0].names.get(), matcher);
  ASSERT_EQ(s->deny_sets.size(), 2u);
  for (const dp::SnapDeny& d : s->deny_sets) EXPECT_TRUE(deny.contains(d.set.get()));
  ctl::CompiledNames again = ctl::compile_listener_names(f.cfg, ctl::cached_name_keys(reg.names));
  EXPECT_TRUE(again.matchers.empty());
  EXPECT_TRUE(again.deny_sets.empty());
}

}  // namespace
}  // namespace meshgate
