// Config parsing and validation: the shipped example configs, defaults, and a table of broken
// configs with the exact position, key and message each must produce.
#include "control/config/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>

namespace meshgate::ctl {
namespace {

constexpr const char* kFile = "config.toml";

// Appended after a case's own lines (so the case's line numbers read as written): the one port
// most cases need to be otherwise valid.
constexpr std::string_view kPort = R"(
[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
)";

// kPort with a kernel twin: what a service with a health_check needs.
constexpr std::string_view kTwinPort = R"(
[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
host_interface = "mg0"
)";

Config parse_ok(std::string_view text) {
  auto r = parse_config(text, kFile);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? std::move(r).value() : Config{};
}

IpAddr ip(std::string_view s) { return *IpAddr::parse(s); }

// validate_config() of a config built in code reports exactly one error, at `key`.
void expect_only_error_at(const Config& c, const std::string& key) {
  const ConfigErrors e = validate_config(c);
  ASSERT_EQ(e.errors.size(), 1u) << e.str();
  EXPECT_EQ(e.errors[0].key, key);
}

// ---- the shipped configs ----

TEST(ConfigFiles, DemoConfigLoadsWithTheReplayTopology) {
  auto r = load_config(MG_SOURCE_DIR "/config/demo.toml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Config& c = *r;
  EXPECT_EQ(c.gateway.workers, 1u);

  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_EQ(c.ports[0].name, "net0");
  EXPECT_EQ(c.ports[0].device, "net_pcap0,rx_pcap=demo-in.pcap,tx_pcap=demo-out.pcap");
  EXPECT_EQ(c.ports[0].mac, MacAddr::parse("02:00:00:00:00:01"));
  ASSERT_EQ(c.ports[0].addresses.size(), 2u);
  EXPECT_EQ(c.ports[0].addresses[0].str(), "198.51.100.1/24");
  EXPECT_EQ(c.ports[0].addresses[1].str(), "2001:db8:1::1/64");

  ASSERT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.routes[0].prefix.str(), "0.0.0.0/0");
  EXPECT_EQ(c.routes[0].via, ip("198.51.100.254"));
  EXPECT_EQ(c.routes[1].prefix.str(), "::/0");
  EXPECT_EQ(c.routes[1].via, ip("2001:db8:1::fe"));

  const std::pair<const char*, const char*> neighbors[] = {
      {"198.51.100.254", "02:00:00:00:00:fe"}, {"2001:db8:1::fe", "02:00:00:00:00:fe"},
      {"198.51.100.11", "02:00:00:00:01:11"},  {"198.51.100.12", "02:00:00:00:01:12"},
      {"198.51.100.13", "02:00:00:00:01:13"},  {"2001:db8:1::11", "02:00:00:00:01:61"},
      {"2001:db8:1::12", "02:00:00:00:01:62"}};
  ASSERT_EQ(c.neighbors.size(), std::size(neighbors));
  for (size_t i = 0; i < std::size(neighbors); ++i) {
    EXPECT_EQ(c.neighbors[i].address, ip(neighbors[i].first)) << i;
    EXPECT_EQ(c.neighbors[i].mac, *MacAddr::parse(neighbors[i].second)) << i;
  }

  ASSERT_EQ(c.services.size(), 3u);
  const ServiceConfig& web = c.services[0];
  EXPECT_EQ(web.name, "web");
  EXPECT_EQ(web.vip, ip("203.0.113.10"));
  EXPECT_EQ(web.port, 80);
  EXPECT_EQ(web.protocol, L4Proto::kTcp);
  EXPECT_EQ(web.mode, ForwardMode::kDnat);
  ASSERT_EQ(web.backends.size(), 3u);
  EXPECT_EQ(web.backends[2].address, ip("198.51.100.13"));
  EXPECT_EQ(web.backends[2].port, 8080);
  EXPECT_EQ(web.backends[0].weight, 1u);
  EXPECT_EQ(web.backends[2].weight, 2u);

  const ServiceConfig& dns = c.services[1];
  EXPECT_EQ(dns.name, "dns");
  EXPECT_EQ(dns.vip, ip("203.0.113.10"));
  EXPECT_EQ(dns.port, 53);
  EXPECT_EQ(dns.protocol, L4Proto::kUdp);
  ASSERT_EQ(dns.backends.size(), 2u);
  EXPECT_EQ(dns.backends[1].port, 5353);

  const ServiceConfig& web6 = c.services[2];
  EXPECT_EQ(web6.name, "web6");
  EXPECT_EQ(web6.vip, ip("2001:db8:100::10"));
  ASSERT_EQ(web6.backends.size(), 2u);
  EXPECT_EQ(web6.backends[0].address, ip("2001:db8:1::11"));
  EXPECT_EQ(web6.backends[1].address, ip("2001:db8:1::12"));

  EXPECT_EQ(c.conntrack.max_flows, 65536u);
  EXPECT_EQ(c.admin.listen, "127.0.0.1:15000");
  EXPECT_EQ(c.mesh.source, MeshSource::kNone);
}

TEST(ConfigFiles, IngressNodeConfigLoadsWithEveryForwardingMode) {
  auto r = load_config(MG_SOURCE_DIR "/config/ingress-node.toml");
  ASSERT_TRUE(r.ok()) << r.error().str();
  const Config& c = *r;
  EXPECT_EQ(c.gateway.workers, 4u);
  EXPECT_EQ(c.gateway.drain_timeout_ms, 10000u);
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_EQ(c.ports[0].device, "0000:3b:02.0");
  EXPECT_EQ(c.ports[1].device, "0000:3b:02.1");
  bool seen[5] = {};
  for (const auto& s : c.services) seen[size_t(s.mode)] = true;
  EXPECT_TRUE(seen[size_t(ForwardMode::kDnat)]);
  EXPECT_TRUE(seen[size_t(ForwardMode::kFullnat)]);
  EXPECT_TRUE(seen[size_t(ForwardMode::kDsrIpip)]);
  EXPECT_TRUE(seen[size_t(ForwardMode::kDsrGue)]);
  EXPECT_TRUE(seen[size_t(ForwardMode::kProxy)]);
  EXPECT_EQ(c.proxy.idle_timeout_s, 1800u);
  EXPECT_FALSE(c.fullnat.local_addresses.empty());
  EXPECT_EQ(c.mesh.source, MeshSource::kXds);
  EXPECT_EQ(c.mesh.address, "istiod.istio-system.svc:15012");
  EXPECT_EQ(c.mesh.mode, ForwardMode::kFullnat);
  EXPECT_EQ(c.hbone.port, 15008);
  EXPECT_FALSE(c.hbone.cert_chain.empty());
  EXPECT_EQ(c.control.build_threads, 0u);
}

// ---- defaults ----

TEST(ConfigDefaults, OmittedKeysTakeTheDocumentedDefaults) {
  const Config c = parse_ok(R"(
[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1"]

[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)");
  EXPECT_EQ(c.path, kFile);
  EXPECT_EQ(c.gateway.workers, kDefaultWorkers);
  EXPECT_EQ(c.gateway.drain_timeout_ms, kDefaultDrainTimeoutMs);
  EXPECT_EQ(kDefaultDrainTimeoutMs, 5000u);
  ASSERT_EQ(c.ports.size(), 1u);
  const PortConfig& p = c.ports[0];
  EXPECT_FALSE(p.mac.has_value());
  EXPECT_EQ(p.rx_descriptors, kDefaultRxDescriptors);
  EXPECT_EQ(p.tx_descriptors, kDefaultTxDescriptors);
  EXPECT_EQ(p.mtu, kDefaultMtu);
  ASSERT_EQ(p.addresses.size(), 1u);
  EXPECT_EQ(p.addresses[0].str(), "198.51.100.1/32") << "a bare address is a host prefix";

  ASSERT_EQ(c.services.size(), 1u);
  EXPECT_EQ(c.services[0].protocol, L4Proto::kTcp);
  EXPECT_EQ(c.services[0].mode, ForwardMode::kDnat);
  EXPECT_EQ(c.services[0].table_size, 0u);
  EXPECT_EQ(c.services[0].backends[0].weight, 1u);

  EXPECT_TRUE(c.fullnat.local_addresses.empty());
  EXPECT_EQ(c.mesh.source, MeshSource::kNone);
  EXPECT_TRUE(c.mesh.tls);
  EXPECT_EQ(c.mesh.cluster_id, "Kubernetes");
  EXPECT_EQ(c.mesh.mode, ForwardMode::kDnat);
  EXPECT_EQ(c.mesh.table_size, 0u);
  EXPECT_EQ(c.hbone.port, kDefaultHbonePort);
  EXPECT_EQ(c.hbone.trust_domain, "cluster.local");
  EXPECT_EQ(c.hbone.max_connections, kDefaultHboneMaxConnections);
  EXPECT_EQ(c.hbone.max_handshakes, kDefaultHboneMaxHandshakes);
  EXPECT_EQ(c.hbone.max_handshakes_per_source, kDefaultHboneMaxHandshakesPerSource);
  EXPECT_EQ(c.hbone.handshake_timeout_ms, kDefaultHboneHandshakeTimeoutMs);
  EXPECT_EQ(c.hbone.memory_mb, kDefaultHboneMemoryMb);
  EXPECT_EQ(c.admin.listen, "127.0.0.1:15000");
}

TEST(ConfigDefaults, ConntrackDefaultsApplyWhenTheTableIsMissing) {
  const Config c = parse_ok(kPort);
  EXPECT_EQ(c.conntrack.max_flows, kDefaultMaxFlows);
  EXPECT_EQ(c.conntrack.tcp_syn, kDefaultTcpSynS);
  EXPECT_EQ(c.conntrack.tcp_established, kDefaultTcpEstablishedS);
  EXPECT_EQ(c.conntrack.tcp_fin, kDefaultTcpFinS);
  EXPECT_EQ(c.conntrack.tcp_time_wait, kDefaultTcpTimeWaitS);
  EXPECT_EQ(c.conntrack.udp, kDefaultUdpS);
  EXPECT_EQ(c.conntrack.icmp, kDefaultIcmpS);
}

TEST(ConfigDefaults, ConntrackTimeoutsGivenAreStoredAndOthersKeepDefaults) {
  const Config c = parse_ok(std::string(R"([conntrack]
max_flows = 2048
tcp_established = 3600
udp = 15
)") + std::string(kPort));
  EXPECT_EQ(c.conntrack.max_flows, 2048u);
  EXPECT_EQ(c.conntrack.tcp_established, 3600u);
  EXPECT_EQ(c.conntrack.udp, 15u);
  EXPECT_EQ(c.conntrack.tcp_syn, kDefaultTcpSynS);
  EXPECT_EQ(c.conntrack.icmp, kDefaultIcmpS);
}

TEST(ConfigDefaults, ProxyDefaultsApplyWhenTheTableIsMissing) {
  const Config c = parse_ok(kPort);
  EXPECT_EQ(c.proxy.idle_timeout_s, kDefaultProxyIdleTimeoutS);
  EXPECT_EQ(c.proxy.max_connections, kDefaultProxyMaxConnections);
  EXPECT_EQ(c.proxy.buffer_bytes, kDefaultProxyBufferBytes);
  EXPECT_EQ(c.proxy.memory_mb, kDefaultProxyMemoryMb);
  EXPECT_EQ(c.proxy.time_wait_s, kDefaultProxyTimeWaitS);
  EXPECT_FALSE(uses_proxy(c));
}

TEST(ConfigParse, ProxyServiceWithProxyProtocolAndProxyTableIsValid) {
  const Config c = parse_ok(std::string(R"([proxy]
idle_timeout_s = 0
max_connections = 2048
buffer_bytes = 65536
memory_mb = 8
time_wait_s = 5
[fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "proxy"
proxy_protocol = "v2"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)") + std::string(kPort));
  EXPECT_EQ(c.proxy.idle_timeout_s, 0u) << "0 = no idle timeout";
  EXPECT_EQ(c.proxy.max_connections, 2048u);
  EXPECT_EQ(c.proxy.buffer_bytes, 65536u);
  EXPECT_EQ(c.proxy.memory_mb, 8u);
  EXPECT_EQ(c.proxy.time_wait_s, 5u);
  ASSERT_EQ(c.services.size(), 1u);
  EXPECT_EQ(c.services[0].mode, ForwardMode::kProxy);
  EXPECT_EQ(c.services[0].proxy_protocol, ProxyProtocol::kV2);
  EXPECT_TRUE(uses_proxy(c));
}

TEST(ConfigParse, DrainTimeoutIsStoredInMillisecondsIncludingZeroAndTheMaximum) {
  for (uint32_t ms : {0u, 250u, 600000u}) {
    const Config c = parse_ok("[gateway]\ndrain_timeout_ms = " + std::to_string(ms) + "\n" +
                              std::string(kPort));
    EXPECT_EQ(c.gateway.drain_timeout_ms, ms);
    EXPECT_EQ(c.gateway.workers, kDefaultWorkers);
  }
}

TEST(ConfigValidate, DrainTimeoutOfAConfigBuiltInCodeIsRangeChecked) {
  Config c = parse_ok(kPort);
  c.gateway.drain_timeout_ms = kMaxDrainTimeoutMs + 1;
  expect_only_error_at(c, "gateway.drain_timeout_ms");
}

TEST(ConfigDefaults, BuildThreadsAreAutomaticWhenTheTableIsMissing) {
  const Config c = parse_ok(kPort);
  EXPECT_EQ(c.control.build_threads, 0u);
  EXPECT_EQ(kDefaultBuildThreads, 0u);
}

TEST(ConfigParse, BuildThreadsAreStoredFromZeroToTheMaximum) {
  for (uint32_t n : {0u, 1u, 3u, 64u}) {
    const Config c =
        parse_ok("[control]\nbuild_threads = " + std::to_string(n) + "\n" + std::string(kPort));
    EXPECT_EQ(c.control.build_threads, n);
  }
}

TEST(ConfigValidate, BuildThreadsOfAConfigBuiltInCodeAreRangeChecked) {
  Config c = parse_ok(kPort);
  c.control.build_threads = kMaxBuildThreads + 1;
  expect_only_error_at(c, "control.build_threads");
}

// 0 takes the CPUs the workers leave, within 1..8; a set value is taken as is.
TEST(ConfigResolve, AutomaticBuildThreadsAreTheCpusLeftByTheWorkersWithinOneToEight) {
  struct Case {
    uint32_t configured, workers, cpus, want;
  };
  const Case cases[] = {
      {0, 1, 2, 1},   // this 2-vCPU machine with one worker: serial
      {0, 1, 4, 3},  {0, 4, 16, 8}, {0, 2, 64, 8},  // at most 8
      {0, 4, 4, 1},  {0, 8, 4, 1},                  // workers take every CPU: at least 1
      {0, 1, 0, 1},                                 // hardware_concurrency() unknown
      {1, 1, 64, 1}, {5, 1, 2, 5},                  // set: as given
  };
  for (const Case& k : cases) {
    EXPECT_EQ(resolve_build_threads(k.configured, k.workers, k.cpus), k.want)
        << k.configured << " " << k.workers << " " << k.cpus;
  }
}

// `n` [[port]] tables of three lines each, the first at line 1.
std::string ports(uint32_t n) {
  std::string text;
  for (uint32_t i = 0; i < n; ++i) {
    text += "[[port]]\nname = \"p" + std::to_string(i) + "\"\ndevice = \"net_null" +
            std::to_string(i) + "\"\n";
  }
  return text;
}

TEST(ConfigParse, PromiscuousIsOffByDefaultAndStoredPerPort) {
  EXPECT_FALSE(parse_ok(kPort).ports[0].promiscuous);
  const Config c = parse_ok(R"([[port]]
name = "net0"
device = "net_null0"
promiscuous = true
[[port]]
name = "net1"
device = "net_null1"
)");
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_TRUE(c.ports[0].promiscuous);
  EXPECT_FALSE(c.ports[1].promiscuous);
}

TEST(ConfigParse, PortsAndWorkersAtTheDataplaneMaximumsAreAccepted) {
  const Config c =
      parse_ok(ports(dp::kMaxPorts) + "[gateway]\nworkers = " + std::to_string(dp::kMaxWorkers));
  EXPECT_EQ(c.gateway.workers, 32u);
  EXPECT_EQ(c.ports.size(), 8u);
}

// The worker's per-port arrays hold 8 (dp::kMaxPorts): the ninth [[port]] is the error.
TEST(ConfigErrors, NinePortsAreAnErrorAtTheNinthPort) {
  auto r = parse_config(ports(9), kFile);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.error().errors.size(), 1u) << r.error().str();
  EXPECT_EQ(r.error().str(), "config.toml:25:1: port[8]: too many ports: 9 (at most 8 [[port]] "
                             "tables; the dataplane's per-port arrays hold that many)\n");
}

TEST(ConfigParse, BackendsMayBeAnArrayOfInlineTables) {
  const Config c = parse_ok(std::string(R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
backend = [{ address = "198.51.100.11", port = 8080 },
           { address = "198.51.100.12", port = 8080, weight = 3 }]
)") + std::string(kPort));
  ASSERT_EQ(c.services.size(), 1u);
  ASSERT_EQ(c.services[0].backends.size(), 2u);
  EXPECT_EQ(c.services[0].backends[1].weight, 3u);
}

TEST(ConfigParse, AdminListenAcceptsBracketedIpv6AndEmptyToDisable) {
  EXPECT_EQ(parse_ok(std::string("[admin]\nlisten = \"[::1]:15000\"\n") + std::string(kPort))
                .admin.listen,
            "[::1]:15000");
  EXPECT_EQ(parse_ok(std::string("[admin]\nlisten = \"\"\n") + std::string(kPort)).admin.listen,
            "");
}

TEST(ConfigParse, FullnatServiceWithLocalAddressOfItsFamilyIsValid) {
  const Config c = parse_ok(std::string(R"([[service]]
name = "api"
vip = "203.0.113.10"
port = 443
mode = "fullnat"
  [[service.backend]]
  address = "192.0.2.10"
  port = 8443
[[route]]
prefix = "192.0.2.0/24"
via = "198.51.100.254"
port = "net0"
[fullnat]
local_addresses = ["198.51.100.2"]
)") + std::string(kPort));
  EXPECT_EQ(c.services[0].mode, ForwardMode::kFullnat);
  EXPECT_EQ(c.routes[0].port, "net0");
}

// ---- error reporting ----

TEST(ConfigErrors, StrIsFileLineColumnKeyMessage) {
  auto r = parse_config("[gateway]\nwrokers = 2\n" + std::string(kPort), kFile);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.error().errors.size(), 1u);
  EXPECT_EQ(r.error().errors[0].str(),
            "config.toml:2:1: gateway.wrokers: unknown key (did you mean 'workers'?)");
  EXPECT_EQ(r.error().str(),
            "config.toml:2:1: gateway.wrokers: unknown key (did you mean 'workers'?)\n");
}

TEST(ConfigErrors, AllValidationErrorsAreReportedInFileOrder) {
  auto r = parse_config(R"([gateway]
workers = 0

[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
mtu = 100

[[route]]
prefix = "10.0.0.0/8"
via = "192.0.2.1"

[conntrack]
udp = 0
colour = "blue"
)",
                        kFile);
  ASSERT_FALSE(r.ok());
  const auto& e = r.error().errors;
  ASSERT_EQ(e.size(), 5u) << r.error().str();
  EXPECT_EQ(e[0].key, "gateway.workers");
  EXPECT_EQ(e[0].pos.line, 2u);
  EXPECT_EQ(e[1].key, "port[0].mtu");
  EXPECT_EQ(e[1].pos.line, 8u);
  EXPECT_EQ(e[2].key, "route[0].via");
  EXPECT_EQ(e[2].pos.line, 12u);
  EXPECT_EQ(e[3].key, "conntrack.udp");
  EXPECT_EQ(e[3].pos.line, 15u);
  EXPECT_EQ(e[4].key, "conntrack.colour");
  EXPECT_EQ(e[4].pos.line, 16u);
}

TEST(ConfigErrors, SyntaxErrorStopsAtTheFirstOne) {
  auto r = parse_config("[gateway\nworkers = = 1\n[[port]\n", kFile);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.error().errors.size(), 1u);
  EXPECT_EQ(r.error().errors[0].pos.line, 1u);
  EXPECT_EQ(r.error().errors[0].pos.file, kFile);
}

TEST(ConfigErrors, LoadConfigReportsAFileThatCannotBeRead) {
  auto r = load_config("/nonexistent/meshgate.toml");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.error().errors.size(), 1u);
  EXPECT_EQ(r.error().errors[0].pos.file, "/nonexistent/meshgate.toml");
  EXPECT_EQ(r.error().errors[0].message,
            "config file cannot be opened: No such file or directory");
}

// check_config keeps what parsed next to the errors, so that the checks of the files and devices
// a config names (run on the parsed values) report in the same pass as an unknown key.
TEST(ConfigCheck, AConfigWithErrorsStillHoldsEveryValueThatParsedAndWhereItWasWritten) {
  const ConfigCheck c = check_config(R"([gateway]
wrokers = 2

[[port]]
name = "net0"
device = "net_nul0"
addresses = ["198.51.100.1/24"]
mtu = 100
)",
                                     kFile);
  ASSERT_EQ(c.errors.errors.size(), 2u) << c.errors.str();
  EXPECT_EQ(c.errors.errors[0].key, "gateway.wrokers");
  EXPECT_EQ(c.errors.errors[1].key, "port[0].mtu");
  ASSERT_TRUE(c.config.has_value());
  ASSERT_EQ(c.config->ports.size(), 1u);
  EXPECT_EQ(c.config->ports[0].device, "net_nul0");
  const SourcePos at = position_of(*c.config, "port[0].device");
  EXPECT_EQ(at.file, kFile);
  EXPECT_EQ(at.line, 6u);
  EXPECT_EQ(at.column, 10u);
}

TEST(ConfigCheck, AValidConfigHasNoErrorsAndTheSameValuesAsParseConfig) {
  const ConfigCheck c = check_config(std::string(kPort), kFile);
  EXPECT_TRUE(c.errors.errors.empty()) << c.errors.str();
  ASSERT_TRUE(c.config.has_value());
  EXPECT_EQ(c.config->ports.at(0).device, parse_ok(kPort).ports.at(0).device);
}

TEST(ConfigCheck, NotTomlOrAnUnreadableFileHasNoConfig) {
  const ConfigCheck bad = check_config("[gateway\n", kFile);
  EXPECT_FALSE(bad.config.has_value());
  ASSERT_EQ(bad.errors.errors.size(), 1u);
  const ConfigCheck missing = check_config_file("/nonexistent/meshgate.toml");
  EXPECT_FALSE(missing.config.has_value());
  ASSERT_EQ(missing.errors.errors.size(), 1u);
  EXPECT_EQ(missing.errors.errors[0].message,
            "config file cannot be opened: No such file or directory");
}

// An unknown key is echoed in the error; a megabyte of one is cut to its first 64 characters,
// and no suggestion is searched for (an edit distance over a megabyte per valid key).
TEST(ConfigErrors, AHugeUnknownKeyIsEchoedTruncated) {
  const std::string key(1 << 20, 'k');
  for (const std::string& text : {key + " = 1\n", "[gateway]\n" + key + " = 1\n"}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = parse_config(text + std::string(kPort), kFile);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.error().errors.size(), 1u);
    const std::string e = r.error().str();
    EXPECT_LT(e.size(), 400u) << e.substr(0, 400);
    EXPECT_NE(e.find(std::string(64, 'k') + "\u2026: unknown key"), std::string::npos)
        << e.substr(0, 400);
    EXPECT_EQ(e.find(std::string(65, 'k')), std::string::npos);
  }
}

// Addresses that name no single host a client could reach through the gateway, IPv4 and IPv6.
TEST(ConfigErrors, UnusableVipsAreRefusedWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"255.255.255.255", "the limited broadcast address"},
      {"0.0.0.0", "the unspecified address"},
      {"0.1.2.3", "a \"this network\" address, 0.0.0.0/8"},
      {"224.0.0.1", "a multicast address"},
      {"127.0.0.1", "a loopback address"},
      {"::", "the unspecified address"},
      {"ff02::1", "a multicast address"},
      {"::1", "a loopback address"},
  };
  for (const auto& [vip, why] : cases) {
    const bool v6 = std::string_view(vip).find(':') != std::string_view::npos;
    const std::string text = std::string("[[service]]\nname = \"web\"\nvip = \"") + vip +
                             "\"\nport = 80\nbackend = [{ address = \"" +
                             (v6 ? "2001:db8:1::11" : "198.51.100.11") + "\", port = 8080 }]\n" +
                             std::string(kPort);
    auto r = parse_config(text, kFile);
    ASSERT_FALSE(r.ok()) << vip;
    EXPECT_EQ(r.error().str(), std::string("config.toml:3:7: service[0].vip: not a usable VIP: ") +
                                   vip + " (" + why + ")\n");
  }
}

// 0 fits the field (uint16_t), so the parser stores it; the validator must refuse it.
TEST(ConfigErrors, GuePortZeroIsOutOfRange) {
  auto r = parse_config(std::string(R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "dsr-gue"
gue_port = 0
backend = [{ address = "198.51.100.11", port = 80 }]
)") + std::string(kPort),
                        kFile);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().str(),
            "config.toml:6:12: service[0].gue_port: expected an integer 1..65535, got 0\n");
}

// NUL, ESC, DEL...: a name is printable text (it ends up in logs, metric labels, terminals).
TEST(ConfigErrors, ControlCharactersInNamesAreRefusedAtTheName) {
  const struct {
    const char* toml;
    const char* error;
  } cases[] = {
      {"[[service]]\nname = \"we\\u0000b\"\nvip = \"203.0.113.10\"\nport = 80\n"
       "backend = [{ address = \"198.51.100.11\", port = 8080 }]\n",
       "config.toml:2:8: service[0].name: control character 0x00 at byte 2 of the name"},
      {"[[service]]\nname = \"web\\u007f\"\nvip = \"203.0.113.10\"\nport = 80\n"
       "backend = [{ address = \"198.51.100.11\", port = 8080 }]\n",
       "config.toml:2:8: service[0].name: control character 0x7f at byte 3 of the name"},
      {"[[port]]\nname = \"net\\u001b[31m\"\ndevice = \"net_null1\"\n",
       "config.toml:2:8: port[0].name: control character 0x1b at byte 3 of the name"},
  };
  for (const auto& c : cases) {
    auto r = parse_config(std::string(c.toml) + std::string(kPort), kFile);
    ASSERT_FALSE(r.ok()) << c.toml;
    EXPECT_EQ(r.error().str(), std::string(c.error) + " (names are printable text)\n");
  }
}

TEST(ConfigErrors, ValidateConfigChecksConfigsBuiltInCode) {
  Config c;
  c.path = "built-in";
  PortConfig port;
  port.name = "net0";
  port.device = "net_null0";
  port.addresses.push_back(*IpPrefix::parse("198.51.100.1/24"));
  c.ports.push_back(port);
  ServiceConfig s;
  s.name = "web";
  s.vip = ip("203.0.113.10");
  s.port = 80;
  s.pos = SourcePos{"built-in", 7, 1};
  BackendConfig b;
  b.address = ip("198.51.100.11");  // port left 0
  s.backends.push_back(b);
  c.services.push_back(s);

  const ConfigErrors errs = validate_config(c);
  ASSERT_EQ(errs.errors.size(), 1u) << errs.str();
  EXPECT_EQ(errs.errors[0].key, "service[0].backend[0].port");
  EXPECT_EQ(errs.errors[0].message, "expected an integer 1..65535, got 0");
  // Without per-key positions the error points at the nearest table that has one.
  EXPECT_EQ(errs.errors[0].pos.line, 7u);

  c.services[0].backends[0].port = 8080;
  EXPECT_TRUE(validate_config(c).errors.empty()) << validate_config(c).str();
}

TEST(ConfigHealthCheck, InlineAndTableFormsWithDefaults) {
  const Config c = parse_ok(R"([[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
host_interface = "mg0"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
health_check = { type = "http", path = "/healthz", port = 9000, rise = 1 }
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "api"
vip = "203.0.113.11"
port = 80
  [service.health_check]
  interval_ms = 500
  timeout_ms = 200
  fall = 5
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "plain"
vip = "203.0.113.12"
port = 80
  [[service.backend]]
  address = "192.0.2.1"
  port = 8080
)");
  ASSERT_EQ(c.services.size(), 3u);
  const HealthCheckConfig& web = c.services[0].health_check;
  EXPECT_TRUE(web.enabled);
  EXPECT_EQ(web.type, HealthCheckType::kHttp);
  EXPECT_EQ(web.path, "/healthz");
  EXPECT_EQ(web.port, 9000);
  EXPECT_EQ(web.rise, 1u);
  EXPECT_EQ(web.fall, kDefaultHealthFall);
  EXPECT_EQ(web.interval_ms, kDefaultHealthIntervalMs);
  EXPECT_EQ(web.timeout_ms, kDefaultHealthTimeoutMs);
  const HealthCheckConfig& api = c.services[1].health_check;
  EXPECT_TRUE(api.enabled);
  EXPECT_EQ(api.type, HealthCheckType::kTcp);
  EXPECT_EQ(api.port, 0);  // each backend's own
  EXPECT_EQ(api.path, "/");
  EXPECT_EQ(api.interval_ms, 500u);
  EXPECT_EQ(api.timeout_ms, 200u);
  EXPECT_EQ(api.rise, kDefaultHealthRise);
  EXPECT_EQ(api.fall, 5u);
  // No health check: the backend need not be reachable through a twin.
  EXPECT_FALSE(c.services[2].health_check.enabled);
}

// ---- the table of broken configs ----

struct BadConfig {
  const char* name;  // the test name: what is wrong
  const char* toml;
  uint32_t line;
  uint32_t column;
  const char* key;
  const char* message;  // a substring of the message
  bool add_port = true;
  size_t n_errors = 1;  // one mistake, one error: no follow-on errors
  std::string_view port = kPort;  // what add_port appends
};

void PrintTo(const BadConfig& c, std::ostream* os) { *os << c.name; }

// `text` is refused with `n_errors` errors, one of them at line:column, at `key`, with a message
// containing `message`.
void expect_one_error(const std::string& text, uint32_t line, uint32_t column, const char* key,
                      const char* message, size_t n_errors) {
  auto r = parse_config(text, kFile);
  ASSERT_FALSE(r.ok()) << "config was accepted:\n" << text;
  const auto& errors = r.error().errors;
  EXPECT_EQ(errors.size(), n_errors) << r.error().str();
  bool found = false;
  for (const auto& e : errors) {
    if (e.pos.line == line && e.pos.column == column && e.key == key &&
        e.message.find(message) != std::string::npos) {
      found = true;
      EXPECT_EQ(e.pos.file, kFile);
    }
  }
  EXPECT_TRUE(found) << "expected " << kFile << ":" << line << ":" << column << ": " << key
                     << ": ..." << message << "...\ngot:\n"
                     << r.error().str();
}

class BadConfigTest : public testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, ReportsPositionKeyAndMessage) {
  const BadConfig& bc = GetParam();
  std::string text = bc.toml;
  if (bc.add_port) text += bc.port;
  expect_one_error(text, bc.line, bc.column, bc.key, bc.message, bc.n_errors);
}

const BadConfig kBadConfigs[] = {
    // -- unknown keys and tables --
    {"misspelt_key_suggests_the_closest_key", R"([gateway]
wrokers = 2
)",
     2, 1, "gateway.wrokers", "unknown key (did you mean 'workers'?)"},
    {"unknown_key_without_close_match_lists_valid_keys", R"([admin]
bind = "127.0.0.1:15000"
)",
     2, 1, "admin.bind", "unknown key (valid keys: listen)"},
    {"unknown_table_suggests_the_closest_table", R"([gatway]
workers = 2
)",
     1, 2, "gatway", "unknown table (did you mean 'gateway'?)"},
    {"plural_array_table_suggests_the_singular", R"([[services]]
name = "web"
)",
     1, 3, "services", "unknown table (did you mean 'service'?)"},
    {"top_level_key_of_a_table_names_its_table", R"(workers = 2
)",
     1, 1, "workers", "did you mean 'gateway.workers'? put it under [gateway]"},
    {"misspelt_backend_key_suggests_and_reports_the_missing_key", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  adress = "198.51.100.11"
  port = 8080
)",
     6, 3, "service[0].backend[0].adress", "unknown key (did you mean 'address'?)", true, 2},

    // -- syntax --
    {"toml_syntax_error_has_the_toml_position", R"([gateway]
workers = = 2
)",
     2, 11, "", "invalid TOML: "},

    // -- types --
    {"string_where_integer_expected", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = "eighty"
)",
     7, 10, "service[0].backend[0].port", R"(expected an integer 1..65535, got "eighty")"},
    {"float_where_integer_expected", R"([conntrack]
max_flows = 1e6
)",
     2, 13, "conntrack.max_flows", "expected an integer 1024..67108864, got 1000000"},
    {"integer_where_string_expected", R"([[port]]
name = 0
device = "net_null0"
)",
     2, 8, "port[0].name", "expected a string, got 0", false},
    {"string_where_boolean_expected", R"([mesh]
tls = "yes"
)",
     2, 7, "mesh.tls", R"(expected true or false, got "yes")"},
    {"single_table_where_array_of_tables_expected", R"([port]
name = "net0"
device = "net_null0"
)",
     1, 1, "port", "expected an array of tables ([[port]]), got a table", false},
    {"addresses_given_as_a_string_suggests_an_array", R"([[port]]
name = "net0"
device = "net_null0"
addresses = "198.51.100.1/24"
)",
     4, 13, "port[0].addresses", R"(got "198.51.100.1/24" (write ["198.51.100.1/24"]))", false},
    {"unknown_protocol_suggests_the_closest_name", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
protocol = "TCP"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 12, "service[0].protocol", R"(expected one of tcp, udp, got "TCP" (did you mean 'tcp'?))"},
    {"unknown_mode_lists_the_modes", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "masquerade"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 8, "service[0].mode", "expected one of dnat, fullnat, dsr-ipip, dsr-gue, proxy"},

    // -- addresses --
    {"bad_ipv4_address", R"([[neighbor]]
address = "198.51.100.300"
mac = "02:00:00:00:00:fe"
)",
     2, 11, "neighbor[0].address", R"(not an IPv4/IPv6 address: "198.51.100.300")"},
    {"bad_vip_gives_one_error_not_a_family_mismatch_too", R"([[service]]
name = "web"
vip = "203.0.113"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     3, 7, "service[0].vip", R"(not an IPv4/IPv6 address: "203.0.113")"},
    // The gateway answers its own addresses itself: a service there would never be reached.
    {"vip_equal_to_a_port_address", R"([[service]]
name = "web"
vip = "198.51.100.1"
port = 80
backend = [{ address = "198.51.100.11", port = 8080 }]
)",
     3, 7, "service[0].vip", R"(VIP 198.51.100.1 is a local address of port "net0")"},
    {"prefix_length_where_an_address_is_expected", R"([[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254/24"
)",
     3, 7, "route[0].via", "a prefix length is not allowed here"},
    {"prefix_length_too_long", R"([[route]]
prefix = "10.0.0.0/33"
via = "198.51.100.254"
)",
     2, 10, "route[0].prefix",
     R"(bad prefix length "33" in "10.0.0.0/33" (expected 0..32 for IPv4))"},
    {"bad_port_address_in_an_array_points_at_the_element", R"([[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24", "2001:db8:1::1/129"]
)",
     4, 33, "port[0].addresses[1]", "expected 0..128 for IPv6", false},
    {"route_prefix_with_host_bits_set", R"([[route]]
prefix = "10.1.2.3/8"
via = "198.51.100.254"
)",
     2, 10, "route[0].prefix", "host bits set in 10.1.2.3/8 (did you mean '10.0.0.0/8'?)"},
    {"bad_mac", R"([[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:00"
)",
     3, 7, "neighbor[0].mac", "not a MAC address"},
    {"multicast_mac", R"([[neighbor]]
address = "198.51.100.254"
mac = "01:00:5e:00:00:01"
)",
     3, 7, "neighbor[0].mac", "expected a unicast MAC address"},

    // -- ranges --
    {"workers_zero", R"([gateway]
workers = 0
)",
     2, 11, "gateway.workers", "expected an integer 1..32, got 0"},
    // The worker's handoff arrays and visited mask hold 32 (dp::kMaxWorkers).
    {"workers_above_the_dataplane_maximum", R"([gateway]
workers = 33
)",
     2, 11, "gateway.workers", "expected an integer 1..32, got 33"},
    {"workers_far_above_maximum", R"([gateway]
workers = 65
)",
     2, 11, "gateway.workers", "expected an integer 1..32, got 65"},
    {"drain_timeout_above_ten_minutes", R"([gateway]
drain_timeout_ms = 600001
)",
     2, 20, "gateway.drain_timeout_ms", "expected an integer 0..600000, got 600001"},
    {"drain_timeout_negative", R"([gateway]
drain_timeout_ms = -1
)",
     2, 20, "gateway.drain_timeout_ms", "expected an integer 0..600000, got -1"},
    {"drain_timeout_in_seconds_as_a_string", R"([gateway]
drain_timeout_ms = "5s"
)",
     2, 20, "gateway.drain_timeout_ms", R"(expected an integer 0..600000, got "5s")"},
    {"backend_port_above_65535", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 70000
)",
     7, 10, "service[0].backend[0].port", "expected an integer 1..65535, got 70000"},
    {"service_port_zero", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 0
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     4, 8, "service[0].port", "expected an integer 1..65535, got 0"},
    {"backend_weight_above_65535", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  weight = 70000
)",
     8, 12, "service[0].backend[0].weight", "expected an integer 0..65535, got 70000"},
    {"table_size_not_prime_names_the_next_prime", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
table_size = 100
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 14, "service[0].table_size", "not prime; next prime: 101"},
    {"proxy_idle_timeout_beyond_a_week", R"([proxy]
idle_timeout_s = 604801
)",
     2, 18, "proxy.idle_timeout_s", "expected an integer 0..604800, got 604801"},
    {"proxy_idle_timeout_not_an_integer", R"([proxy]
idle_timeout_s = "1h"
)",
     2, 18, "proxy.idle_timeout_s", "expected an integer 0..604800, got \"1h\""},
    {"proxy_buffer_below_minimum", R"([proxy]
buffer_bytes = 1000
)",
     2, 16, "proxy.buffer_bytes", "expected an integer 16384..67108864, got 1000"},
    {"proxy_memory_below_one_sessions_buffers", R"([proxy]
buffer_bytes = 1048576
memory_mb = 2
)",
     3, 13, "proxy.memory_mb", "room for at least one session's four buffers"},
    {"proxy_unknown_key_suggests_the_right_one", R"([proxy]
idle_timeout = 5
)",
     2, 1, "proxy.idle_timeout", "did you mean"},
    {"proxy_protocol_on_a_dnat_service", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
proxy_protocol = "v2"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 18, "service[0].proxy_protocol", "applies to mode \"proxy\" only"},
    {"proxy_protocol_unknown_version", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "proxy"
proxy_protocol = "v3"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     8, 18, "service[0].proxy_protocol", "expected one of none, v2"},
    {"proxy_mode_over_udp", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "dns"
vip = "203.0.113.10"
port = 53
protocol = "udp"
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 53
)",
     7, 12, "service[0].protocol", "carries TCP only"},
    {"conntrack_timeout_zero", R"([conntrack]
udp = 0
)",
     2, 7, "conntrack.udp", "expected an integer 1..604800, got 0"},
    {"descriptors_below_minimum", R"([[port]]
name = "net0"
device = "net_null0"
rx_descriptors = 16
)",
     4, 18, "port[0].rx_descriptors", "expected an integer 64..16384, got 16", false},
    {"mtu_below_1280_on_a_port_with_ipv6", R"([[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]
mtu = 1000
)",
     5, 7, "port[0].mtu", "expected an integer 1280..9000", false},

    // -- ports --
    {"no_port_at_all", R"([gateway]
workers = 1
)",
     1, 1, "port", "no [[port]] defined", false},
    {"port_without_device", R"([[port]]
name = "net0"
)",
     1, 1, "port[0].device", "missing required key (expected a string)", false},
    {"duplicate_port_name", R"([[port]]
name = "net0"
device = "net_null0"
[[port]]
name = "net0"
device = "net_null1"
)",
     5, 8, "port[1].name", R"(duplicate port name "net0" (first defined at config.toml:2:8))",
     false},
    {"host_interface_too_long", R"([[port]]
name = "net0"
device = "net_null0"
host_interface = "a-very-long-interface"
)",
     4, 18, "port[0].host_interface",
     R"(expected a kernel interface name (1 to 15 letters, digits, '-', '_' or '.'), got "a-very-long-interface": 21 characters)",
     false},
    {"host_interface_with_a_comma", R"([[port]]
name = "net0"
device = "net_null0"
host_interface = "mg0,persist"
)",
     4, 18, "port[0].host_interface", "character ','", false},
    {"promiscuous_not_a_boolean", R"([[port]]
name = "net0"
device = "net_null0"
promiscuous = "yes"
)",
     4, 15, "port[0].promiscuous", R"(expected true or false, got "yes")", false},
    {"bgp_without_a_host_interface", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
[bgp]
local_as = 65001
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
)",
     8, 13, "bgp.peer[0].address",
     R"(peer 192.0.2.254 is reached through port "lan", which has no host_interface)", false},
    {"bgp_peer_not_on_link", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 65001
  [[bgp.peer]]
  address = "198.51.100.254"
  remote_as = 65000
)",
     9, 13, "bgp.peer[0].address", "peer 198.51.100.254 is not on-link of any port address",
     false},
    {"bgp_bad_as", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 0
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
)",
     7, 12, "bgp.local_as", "expected an integer 1..4294967295, got 0", false},
    {"bgp_as_too_large", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 65001
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 4294967296
)",
     10, 15, "bgp.peer[0].remote_as", "expected an integer 1..4294967295", false},
    {"bgp_hold_time_below_3", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 65001
hold_time_s = 1
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
)",
     8, 15, "bgp.hold_time_s", "expected an integer 3..65535, got 1", false},
    {"bgp_without_peers", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 65001
)",
     6, 1, "bgp", "no [[bgp.peer]]", false},
    {"bgp_password_with_a_quote", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 65001
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
  password = "a\"b"
)",
     11, 14, "bgp.peer[0].password", "expected printable text without", false},
    // BIRD takes at most TCP_MD5SIG_MAXKEYLEN bytes and leaves the session down otherwise.
    {"bgp_password_longer_than_a_tcp_md5_key", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 65001
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
  password = "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
)",
     11, 14, "bgp.peer[0].password",
     "expected at most 80 bytes (the kernel's longest TCP MD5 key, TCP_MD5SIG_MAXKEYLEN), got 81",
     false},
    // <runtime_dir>/bgp.<7 digits>/bird.ctl must fit sun_path: 86 bytes is the most.
    {"bgp_runtime_dir_too_long_for_the_control_socket", R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24"]
host_interface = "mgh"
[bgp]
local_as = 65001
runtime_dir = "/run/dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
)",
     8, 15, "bgp.runtime_dir", "expected at most 86 bytes (the daemon's control socket", false},
    {"host_interface_twice", R"([[port]]
name = "net0"
device = "net_null0"
host_interface = "mg0"
[[port]]
name = "net1"
device = "net_null1"
host_interface = "mg0"
)",
     8, 18, "port[1].host_interface",
     R"(interface "mg0" is already the host interface of port[0] (config.toml:4:18))", false},

    // -- services --
    {"duplicate_vip_port_protocol_names_both_services", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "web2"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
)",
     10, 7, "service[1].vip", R"(services "web" and "web2" both use 203.0.113.10:80/tcp)"},
    {"duplicate_service_name", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "web"
vip = "203.0.113.10"
port = 81
  [[service.backend]]
  address = "198.51.100.11"
  port = 8081
)",
     9, 8, "service[1].name", R"(duplicate service name "web")"},
    {"backend_without_port_points_at_the_backend_header", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
)",
     5, 3, "service[0].backend[0].port", "missing required key (expected an integer 1..65535)"},
    {"service_without_backends", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
)",
     1, 1, "service[0].backend", "no backends"},
    {"empty_backend_array_means_no_backends", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
backend = []
)",
     5, 11, "service[0].backend", "no backends"},
    {"backend_family_differs_from_vip_family", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
)",
     6, 13, "service[0].backend[0].address",
     "backend 2001:db8:1::11 is IPv6 but the service VIP 203.0.113.10 is IPv4"},
    {"duplicate_backend", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     9, 13, "service[0].backend[1].address", "duplicate backend 198.51.100.11:8080"},
    {"dsr_backend_port_must_equal_service_port", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "dsr-ipip"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     8, 10, "service[0].backend[0].port", "dsr-ipip cannot translate ports"},
    {"fullnat_without_local_addresses", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "fullnat"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 8, "service[0].mode", "needs [fullnat] local_addresses"},
    {"fullnat_ipv6_service_without_ipv6_local_address", R"([[service]]
name = "web6"
vip = "2001:db8:100::10"
port = 80
mode = "proxy"
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
[fullnat]
local_addresses = ["198.51.100.2"]
)",
     5, 8, "service[0].mode", "needs an IPv6 address in [fullnat] local_addresses"},

    // -- routes and neighbors --
    {"route_via_not_on_link", R"([[route]]
prefix = "10.0.0.0/8"
via = "192.0.2.1"
)",
     3, 7, "route[0].via", "next hop 192.0.2.1 is not on-link of any port address"},
    {"route_via_family_differs_from_prefix", R"([[route]]
prefix = "::/0"
via = "198.51.100.254"
)",
     3, 7, "route[0].via", "next hop 198.51.100.254 is IPv4 but prefix ::/0 is IPv6"},
    {"route_to_unknown_port_suggests_a_port", R"([[route]]
prefix = "10.0.0.0/8"
via = "198.51.100.254"
port = "net1"
)",
     4, 8, "route[0].port", R"(unknown port "net1" (did you mean 'net0'?))"},
    {"route_via_not_on_link_of_the_named_port", R"([[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
[[port]]
name = "net1"
device = "net_null1"
addresses = ["192.0.2.1/24"]
[[route]]
prefix = "10.0.0.0/8"
via = "192.0.2.254"
port = "net0"
)",
     11, 7, "route[0].via", R"(not on-link of port "net0" (its prefixes: 198.51.100.1/24))",
     false},
    {"duplicate_route_prefix", R"([[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.253"
)",
     5, 10, "route[1].prefix", "duplicate route for 0.0.0.0/0"},
    {"neighbor_not_on_link", R"([[neighbor]]
address = "192.0.2.1"
mac = "02:00:00:00:00:fe"
)",
     2, 11, "neighbor[0].address", "neighbor 192.0.2.1 is not on-link of any port address"},
    {"neighbor_on_a_local_address", R"([[neighbor]]
address = "198.51.100.1"
mac = "02:00:00:00:00:fe"
)",
     2, 11, "neighbor[0].address", R"(is a local address of port "net0")"},

    // -- mesh, hbone, admin --
    {"mesh_file_source_without_path", R"([mesh]
source = "file"
)",
     1, 1, "mesh.path", "missing required key"},
    {"mesh_xds_source_without_address", R"([mesh]
source = "xds"
)",
     1, 1, "mesh.address", "missing required key"},
    {"mesh_mode_cannot_be_dsr", R"([mesh]
mode = "dsr-gue"
)",
     2, 8, "mesh.mode", "expected one of dnat, fullnat, proxy"},
    {"mesh_table_size_not_prime", R"([mesh]
table_size = 1000
)",
     2, 14, "mesh.table_size", "(not prime; next prime: 1009)"},
    {"mesh_table_size_too_small", R"([mesh]
table_size = 5
)",
     2, 14, "mesh.table_size", "expected an integer: 0 (automatic) or a prime 7..4194301, got 5"},
    {"hbone_certificate_without_key", R"([hbone]
cert_chain = "gw.pem"
[fullnat]
local_addresses = ["198.51.100.2"]
)",
     1, 1, "hbone.private_key", "missing required key"},
    {"hbone_ca_without_identity", R"([hbone]
ca_address = "istiod.istio-system.svc:15012"
[fullnat]
local_addresses = ["198.51.100.2"]
)",
     1, 1, "hbone.identity", "missing required key (ca_address is set"},
    {"hbone_ca_identity_not_spiffe", R"([hbone]
ca_address = "istiod.istio-system.svc:15012"
identity = "meshgate"
[fullnat]
local_addresses = ["198.51.100.2"]
)",
     3, 12, "hbone.identity", R"(expected a SPIFFE id "spiffe://<trust domain>/ns/<namespace>/sa/<service account>", got "meshgate")"},
    {"hbone_ca_and_files", R"([hbone]
ca_address = "istiod.istio-system.svc:15012"
identity = "spiffe://cluster.local/ns/istio-system/sa/meshgate"
cert_chain = "gw.pem"
private_key = "gw-key.pem"
[fullnat]
local_addresses = ["198.51.100.2"]
)",
     4, 14, "hbone.cert_chain", "expected no cert_chain when ca_address is set"},
    {"hbone_without_fullnat_addresses", R"([hbone]
cert_chain = "gw.pem"
private_key = "gw-key.pem"
)",
     2, 14, "hbone.cert_chain", "HBONE needs [fullnat] local_addresses"},
    {"hbone_cert_ttl_too_short", R"([hbone]
cert_ttl = 10
[fullnat]
local_addresses = ["198.51.100.2"]
)",
     2, 12, "hbone.cert_ttl", "got 10"},
    {"hbone_handshake_timeout_too_short", R"([hbone]
handshake_timeout_ms = 10
)",
     2, 24, "hbone.handshake_timeout_ms", "got 10"},
    {"hbone_memory_below_one_window", R"([hbone]
memory_mb = 1
)",
     2, 13, "hbone.memory_mb", "got 1"},
    {"admin_listen_without_port", R"([admin]
listen = "127.0.0.1"
)",
     2, 10, "admin.listen", R"(expected "host:port")"},
    {"admin_listen_ipv6_without_brackets", R"([admin]
listen = "::1:15000"
)",
     2, 10, "admin.listen", R"(IPv6 as "[::1]:15000")"},
    // -- listeners and deny signatures --
    {"listener_wildcard_not_in_the_first_label", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
  [[listener.route]]
  hostnames = ["a.*.example.com"]
  service = "shop"
)",
     16, 16, "listener[0].route[0].hostnames[0]", R"(bad hostname pattern "a.*.example.com")"},
    {"listener_hostname_regex_does_not_parse", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
  [[listener.route]]
  hostnames = ["~(api"]
  service = "shop"
)",
     16, 16, "listener[0].route[0].hostnames[0]", R"(bad hostname pattern "~(api")"},
    {"listener_hostname_routed_twice", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "shop"
  [[listener.route]]
  hostnames = ["Shop.Example.com"]
  service = "shop"
)",
     19, 16, "listener[0].route[1].hostnames[0]", R"(is already routed (at config.toml:16:16)"},
    {"listener_route_to_an_unknown_service", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "shopp"
)",
     17, 13, "listener[0].route[0].service", R"(no [[service]] named "shopp" (did you mean 'shop'?))"},
    {"listener_route_to_a_hostname_without_mesh", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "reviews.bookinfo.svc.cluster.local"
)",
     17, 13, "listener[0].route[0].service", R"(a mesh service hostname needs [mesh] source)"},
    {"listener_port_on_a_static_service_route", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "shop"
  port = 8443
)",
     18, 10, "listener[0].route[0].port", R"(port applies to mesh service hostnames)"},
    {"listener_deny_pattern_does_not_compile", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
default_service = "shop"
  [[listener.deny]]
  pattern = "(union"
)",
     17, 13, "listener[0].deny[0].pattern", R"(deny pattern does not compile)"},
    {"listener_without_routes_or_default", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
)",
     11, 1, "listener[0].route", R"(no [[listener.route]] and no default_service)"},
    {"listener_on_a_service_vip_and_port", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.21"
port = 1001
default_service = "shop"
)",
     13, 7, "listener[0].vip", R"(203.0.113.21:1001/tcp is already taken by service[0])"},
    {"listener_peek_bytes_above_the_proxy_buffer", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
default_service = "shop"
peek_bytes = 32768
[proxy]
buffer_bytes = 16384
)",
     16, 14, "listener[0].peek_bytes", R"(exceeds [proxy] buffer_bytes 16384)"},
    {"listener_match_unknown", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8443
[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
default_service = "shop"
match = "tls"
)",
     16, 9, "listener[0].match", R"(expected one of sni, host, got "tls")"},
    {"deny_on_a_dnat_service", R"([[service]]
name = "web"
vip = "203.0.113.21"
port = 80
  [[service.deny]]
  pattern = "x"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 3, "service[0].deny", R"(deny signatures apply to mode "proxy" only)"},
    {"control_build_threads_negative", R"([control]
build_threads = -1
)",
     2, 17, "control.build_threads",
     "expected an integer: 0 (automatic) or 1..64 threads, got -1"},
    {"control_build_threads_too_large", R"([control]
build_threads = 65
)",
     2, 17, "control.build_threads",
     "expected an integer: 0 (automatic) or 1..64 threads, got 65"},
    {"control_build_threads_beyond_32_bits", R"([control]
build_threads = 4294967296
)",
     2, 17, "control.build_threads", "got 4294967296"},
    {"control_build_threads_a_string", R"([control]
build_threads = "4"
)",
     2, 17, "control.build_threads",
     R"(expected an integer: 0 (automatic) or 1..64 threads, got "4")"},
    {"control_build_threads_a_float", R"([control]
build_threads = 2.5
)",
     2, 17, "control.build_threads", "got 2.5"},
    {"control_unknown_key_suggests_build_threads", R"([control]
build_thread = 2
)",
     2, 1, "control.build_thread", "did you mean 'build_threads'?"},
    {"control_key_at_the_top_level_names_its_table", R"(build_threads = 2
)",
     1, 1, "build_threads", "put it under [control]"},
    {"control_as_an_array_of_tables", R"([[control]]
build_threads = 2
)",
     1, 1, "control", "write [control], not [[control]]"},

    // -- health_check (more in kBadHealthChecks) --
    {"health_check_backend_on_a_port_without_host_interface", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
health_check = { type = "tcp" }
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     7, 13, "service[0].backend[0].address",
     R"(backend 198.51.100.11 is on-link of port "net0", which has no host_interface (probes )"
     "are kernel connections through a port's kernel twin, which reaches that port's prefixes "
     "only)"},
    {"health_check_backend_not_on_link_of_a_port", R"([[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
host_interface = "mg0"
[[route]]
prefix = "192.0.2.0/24"
via = "198.51.100.254"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
health_check = { type = "tcp" }
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "192.0.2.20"
  port = 8080
)",
     18, 13, "service[0].backend[1].address",
     "backend 192.0.2.20 is not on-link of any port address", false},

    // -- service options: block list, source ranges, session affinity, node_port --
    {"deny_source_not_a_prefix", R"([[deny]]
source = "192.0.2.300/24"
)",
     2, 10, "deny[0].source", "not an IPv4/IPv6 address: \"192.0.2.300\""},
    {"deny_misspelt_source_suggests_it", R"([[deny]]
sorce = "192.0.2.0/24"
)",
     2, 1, "deny[0].sorce", "did you mean 'source'?", true, 2},
    {"source_ranges_prefix_too_long", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
source_ranges = ["192.0.2.0/33"]
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 18, "service[0].source_ranges[0]", "bad prefix length \"33\""},
    {"source_ranges_a_string_not_an_array", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
source_ranges = "192.0.2.0/24"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 17, "service[0].source_ranges", "(write [\"192.0.2.0/24\"])"},
    {"session_affinity_unknown_value", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
session_affinity = "clientip"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 20, "service[0].session_affinity", "did you mean 'client_ip'?"},
    {"affinity_timeout_above_kubernetes_maximum", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
session_affinity = "client_ip"
affinity_timeout_s = 86401
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     6, 22, "service[0].affinity_timeout_s", "expected an integer 1..86400, got 86401"},
    {"session_affinity_on_a_proxy_service", R"([fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "proxy"
session_affinity = "client_ip"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     8, 20, "service[0].session_affinity", "session_affinity applies to the packet modes"},
    {"node_port_on_a_dsr_service", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
mode = "dsr-ipip"
node_port = 30080
  [[service.backend]]
  address = "198.51.100.11"
  port = 80
)",
     6, 13, "service[0].node_port", "it cannot answer as the port address"},
    {"node_port_out_of_range", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
node_port = 70000
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     5, 13, "service[0].node_port", "expected an integer 1..65535, got 70000"},
    {"node_port_taken_by_another_service", R"([[service]]
name = "web"
vip = "203.0.113.10"
port = 80
node_port = 30080
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "web2"
vip = "203.0.113.11"
port = 80
node_port = 30080
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)",
     13, 13, "service[1].node_port", "node_port 30080 is taken by service \"web\" (at config.toml:5:13)"},
};

INSTANTIATE_TEST_SUITE_P(Config, BadConfigTest, testing::ValuesIn(kBadConfigs),
                         [](const testing::TestParamInfo<BadConfig>& info) {
                           return std::string(info.param.name);
                         });

// ---- [access_log] ----

const BadConfig kBadAccessLogConfigs[] = {
    {"access_log_empty_path", R"([access_log]
path = ""
)",
     2, 8, "access_log.path", R"(expected a file path or "-" (stdout), got "")"},
    {"access_log_path_is_a_directory", R"([access_log]
path = "/tmp/"
)",
     2, 8, "access_log.path", R"(expected a file path, got the directory "/tmp/")"},
    {"access_log_flows_without_path", R"([access_log]
flows = true
)",
     2, 9, "access_log.flows", "flow-end records need [access_log] path"},
    {"access_log_ring_too_small", R"([access_log]
path = "-"
ring_size = 8
)",
     3, 13, "access_log.ring_size", "got 8"},
    {"access_log_flows_not_a_bool", R"([access_log]
path = "-"
flows = "yes"
)",
     3, 9, "access_log.flows", "expected true or false"},
    {"access_log_misspelt_key", R"([access_log]
pth = "/var/log/meshgate/access.log"
)",
     2, 1, "access_log.pth", "did you mean 'path'?"},
};

INSTANTIATE_TEST_SUITE_P(AccessLog, BadConfigTest, testing::ValuesIn(kBadAccessLogConfigs),
                         [](const testing::TestParamInfo<BadConfig>& info) {
                           return std::string(info.param.name);
                         });

TEST(ConfigParse, AccessLogKeysAreStoredAndOffByDefault) {
  EXPECT_EQ(parse_ok(std::string(kPort)).access_log.path, "");
  const Config c = parse_ok("[access_log]\npath = \"/var/log/meshgate/access.log\"\nflows = "
                            "true\nring_size = 65536\n" + std::string(kPort));
  EXPECT_EQ(c.access_log.path, "/var/log/meshgate/access.log");
  EXPECT_TRUE(c.access_log.flows);
  EXPECT_EQ(c.access_log.ring_size, 65536u);
  const Config d = parse_ok("[access_log]\npath = \"-\"\n" + std::string(kPort));
  EXPECT_FALSE(d.access_log.flows);
  EXPECT_EQ(d.access_log.ring_size, kDefaultAccessLogRingSize);
}

// The health_check cases: `text` goes after a service's first lines (so line 5 is its first
// line) and before its backend; kTwinPort follows.
struct BadHealthCheck {
  const char* name;
  const char* text;
  uint32_t line;
  uint32_t column;
  const char* key;
  const char* message;
};

void PrintTo(const BadHealthCheck& c, std::ostream* os) { *os << c.name; }

class BadHealthCheckTest : public testing::TestWithParam<BadHealthCheck> {};

TEST_P(BadHealthCheckTest, ReportsPositionKeyAndMessage) {
  const BadHealthCheck& c = GetParam();
  const std::string text = std::string("[[service]]\nname = \"web\"\nvip = \"203.0.113.10\"\n"
                                       "port = 80\n") +
                           c.text + "  [[service.backend]]\n  address = \"198.51.100.11\"\n"
                                    "  port = 8080\n" + std::string(kTwinPort);
  expect_one_error(text, c.line, c.column, c.key, c.message, 1);
}

const BadHealthCheck kBadHealthChecks[] = {
    {"type_unknown_suggests_http", "health_check = { type = \"htp\" }\n", 5, 25,
     "service[0].health_check.type",
     R"(expected one of tcp, http, got "htp" (did you mean 'http'?))"},
    {"unknown_key_suggests_the_closest", "health_check = { intervall_ms = 500 }\n", 5, 18,
     "service[0].health_check.intervall_ms", "did you mean 'interval_ms'?"},
    {"timeout_not_below_interval",
     "  [service.health_check]\n  interval_ms = 1000\n  timeout_ms = 1000\n", 7, 16,
     "service[0].health_check.timeout_ms", "timeout_ms 1000 must be below interval_ms 1000"},
    {"rise_zero", "health_check = { rise = 0 }\n", 5, 25, "service[0].health_check.rise",
     "expected an integer 1..100, got 0"},
    {"fall_zero", "health_check = { fall = 0 }\n", 5, 25, "service[0].health_check.fall",
     "expected an integer 1..100, got 0"},
    {"interval_too_short", "health_check = { interval_ms = 50, timeout_ms = 10 }\n", 5, 32,
     "service[0].health_check.interval_ms", "expected an integer 100..3600000, got 50"},
    {"http_path_without_a_slash", "health_check = { type = \"http\", path = \"healthz\" }\n", 5,
     40, "service[0].health_check.path",
     R"(expected a path starting with '/' (the GET request target), got "healthz")"},
    {"http_path_with_a_space", "health_check = { type = \"http\", path = \"/a b\" }\n", 5, 40,
     "service[0].health_check.path", "without spaces or control characters"},
    {"path_on_a_tcp_check", "health_check = { path = \"/healthz\" }\n", 5, 25,
     "service[0].health_check.path", R"(path applies to type "http" only)"},
    {"port_zero", "health_check = { port = 0 }\n", 5, 25, "service[0].health_check.port",
     "expected an integer 1..65535, got 0"},
    {"as_an_array_of_tables", "  [[service.health_check]]\n  type = \"tcp\"\n", 5, 3,
     "service[0].health_check", "write [service.health_check], not [[...]]"},
    {"udp_service_without_a_check_port", "protocol = \"udp\"\nhealth_check = { type = \"tcp\" }\n",
     6, 16, "service[0].health_check", "a UDP service's backends are probed over TCP"},
};

INSTANTIATE_TEST_SUITE_P(Config, BadHealthCheckTest, testing::ValuesIn(kBadHealthChecks),
                         [](const testing::TestParamInfo<BadHealthCheck>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace meshgate::ctl
