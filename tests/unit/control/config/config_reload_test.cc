// What a config reload may apply live: restart_only_changes() names every restart-only key that
// changed, at its position in the new file, and accepts live changes; live_changes() counts what
// a live reload changes.
#include "control/config/config_reload.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace meshgate::ctl {
namespace {

// The running config. Line numbers matter: each case below says where its key is.
constexpr std::string_view kRunning = R"([gateway]
workers = 2
drain_timeout_ms = 5000
[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
mtu = 1500
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
[fullnat]
local_addresses = ["198.51.100.2"]
[conntrack]
max_flows = 100000
tcp_established = 7200
[proxy]
max_connections = 16384
idle_timeout_s = 3600
[admin]
listen = "127.0.0.1:15000"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "dns"
vip = "203.0.113.11"
port = 53
protocol = "udp"
  [[service.backend]]
  address = "198.51.100.13"
  port = 53
)";

Config parse(std::string_view text) {
  auto r = parse_config(text, "gw.toml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str()) << "\n" << text;
  return r.ok() ? std::move(r).value() : Config{};
}

// kRunning with the first `from` replaced by `to` (which must be there).
std::string edited(std::string_view from, std::string_view to, std::string base = std::string(kRunning)) {
  const size_t at = base.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) base.replace(at, from.size(), to);
  return base;
}

constexpr const char* kNewService = R"([[service]]
name = "new"
vip = "203.0.113.12"
port = 443
  [[service.backend]]
  address = "198.51.100.14"
  port = 8443
)";

struct RestartCase {
  const char* what;
  std::string next;
  std::string key;     // the one error's key
  uint32_t line;       // its position in the new file
  const char* reason;  // part of the message
};

TEST(RestartOnlyChanges, EachRestartOnlyKeyIsNamedAtItsPositionInTheNewFile) {
  const std::vector<RestartCase> cases = {
      {"workers", edited("workers = 2", "workers = 3"), "gateway.workers", 2,
       "sizes the lcores, queues and per-worker tables"},
      {"port device", edited("device = \"net_null0\"", "device = \"net_null1\""), "port[0].device",
       6, "the ports, their queues and the mbuf pool are set up at start"},
      {"port name", edited("name = \"net0\"", "name = \"net1\""), "port[0].name", 5, "ports"},
      {"port addresses", edited("[\"198.51.100.1/24\"]", "[\"198.51.100.1/24\", \"2001:db8:1::1/64\"]"),
       "port[0].addresses", 7, "ports"},
      {"port mtu", edited("mtu = 1500", "mtu = 9000"), "port[0].mtu", 8, "ports"},
      {"port mac added", edited("mtu = 1500", "mac = \"02:00:00:00:00:09\""), "port[0].mac", 8,
       "ports"},
      {"port host_interface",
       edited("mtu = 1500", "host_interface = \"mg0\""), "port[0].host_interface", 8, "ports"},
      {"port descriptors", edited("mtu = 1500", "rx_descriptors = 2048"), "port[0].rx_descriptors",
       8, "ports"},
      {"a second port",
       edited("[[route]]",
              "[[port]]\nname = \"net1\"\ndevice = \"net_null1\"\naddresses = [\"192.0.2.1/24\"]\n"
              "[[route]]"),
       "port[1]", 9, "count 1 -> 2"},
      {"max_flows", edited("max_flows = 100000", "max_flows = 200000"), "conntrack.max_flows", 15,
       "sizes the flow table"},
      {"proxy max_connections", edited("max_connections = 16384", "max_connections = 8192"),
       "proxy.max_connections", 18, "sizes the TCB table and the mbuf pool"},
      {"proxy memory_mb", edited("idle_timeout_s = 3600", "memory_mb = 128"), "proxy.memory_mb",
       19, "TCB table"},
      {"proxy buffer_bytes", edited("idle_timeout_s = 3600", "buffer_bytes = 65536"),
       "proxy.buffer_bytes", 19, "TCB table"},
      {"fullnat local_addresses",
       edited("local_addresses = [\"198.51.100.2\"]", "local_addresses = [\"198.51.100.3\"]"),
       "fullnat.local_addresses", 13, "flow steering"},
      {"admin listen", edited("127.0.0.1:15000", "127.0.0.1:15001"), "admin.listen", 21,
       "the admin API is bound at start"},
      {"control build_threads", edited("[admin]", "[control]\nbuild_threads = 2\n[admin]"),
       "control.build_threads", 21, "snapshot builder's threads"},
      {"mesh network", edited("[admin]", "[mesh]\nnetwork = \"n1\"\n[admin]"), "mesh.network", 21,
       "the mesh provider is started with it"},
      {"hbone port", edited("[admin]", "[hbone]\nport = 15009\n[admin]"), "hbone.port", 21,
       "HBONE terminator"},
      {"locality", edited("workers = 2", "workers = 2\nlocality = \"r1/z1\""), "gateway.locality",
       3, "mesh mapping"},
      {"a proxy service without the TCP stack",
       edited("protocol = \"udp\"", "protocol = \"tcp\"\nmode = \"proxy\""), "service[1].mode", 37,
       "needs the workers' TCP stack"},
  };
  const Config running = parse(kRunning);
  for (const RestartCase& c : cases) {
    SCOPED_TRACE(c.what);
    const Config next = parse(c.next);
    const ConfigErrors e = restart_only_changes(running, next);
    ASSERT_EQ(e.errors.size(), 1u) << e.str();
    EXPECT_EQ(e.errors[0].key, c.key);
    EXPECT_EQ(e.errors[0].pos.file, "gw.toml");
    EXPECT_EQ(e.errors[0].pos.line, c.line) << e.str();
    EXPECT_NE(e.errors[0].message.find(c.reason), std::string::npos) << e.errors[0].message;
    EXPECT_NE(e.errors[0].message.find("cannot change while running ("), std::string::npos);
    EXPECT_NE(e.errors[0].message.find("; restart meshgate to apply"), std::string::npos);
  }
}

TEST(RestartOnlyChanges, TheMessageReadsAsTheOperatorSeesIt) {
  const ConfigErrors e =
      restart_only_changes(parse(kRunning), parse(edited("max_flows = 100000", "max_flows = 2048")));
  ASSERT_EQ(e.errors.size(), 1u);
  EXPECT_EQ(e.str(), "gw.toml:15:13: conntrack.max_flows: cannot change while running (sizes the "
                     "flow table); restart meshgate to apply\n");
}

TEST(RestartOnlyChanges, EveryChangedKeyIsReportedNotOnlyTheFirst) {
  std::string next = edited("workers = 2", "workers = 4");
  next = edited("max_flows = 100000", "max_flows = 4096", next);
  next = edited("127.0.0.1:15000", "127.0.0.1:9", next);
  const ConfigErrors e = restart_only_changes(parse(kRunning), parse(next));
  std::vector<std::string> keys;
  for (const auto& x : e.errors) keys.push_back(x.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"gateway.workers", "conntrack.max_flows",
                                            "admin.listen"}));
}

TEST(RestartOnlyChanges, IdenticalConfigsHaveNone) {
  EXPECT_TRUE(restart_only_changes(parse(kRunning), parse(kRunning)).errors.empty());
  // Positions differ, values do not: comments and blank lines moved every key.
  const Config shifted = parse("# a comment\n\n" + std::string(kRunning));
  EXPECT_TRUE(restart_only_changes(parse(kRunning), shifted).errors.empty());
}

TEST(RestartOnlyChanges, LiveKeysAreAccepted) {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"a backend's weight", edited("  port = 8080\n  [[service.backend]]",
                                    "  port = 8080\n  weight = 0\n  [[service.backend]]")},
      {"a backend added", std::string(kRunning) + "  [[service.backend]]\n  address = "
                                                  "\"198.51.100.14\"\n  port = 53\n"},
      {"a service removed", std::string(kRunning.substr(0, kRunning.find("[[service]]\nname = \"dns\"")))},
      {"a service added", std::string(kRunning) + kNewService},
      {"a route changed", edited("198.51.100.254", "198.51.100.253")},
      {"a static neighbor added",
       edited("[fullnat]",
              "[[neighbor]]\naddress = \"198.51.100.11\"\nmac = \"02:00:00:00:00:0b\"\n[fullnat]")},
      {"conntrack timeouts", edited("tcp_established = 7200", "tcp_established = 60\nudp = 5")},
      {"proxy idle and TIME-WAIT", edited("idle_timeout_s = 3600", "idle_timeout_s = 10\ntime_wait_s = 2")},
      {"drain timeout and the watch", edited("drain_timeout_ms = 5000",
                                             "drain_timeout_ms = 100\nwatch_config = true")},
  };
  const Config running = parse(kRunning);
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    EXPECT_TRUE(restart_only_changes(running, parse(text)).errors.empty())
        << restart_only_changes(running, parse(text)).str();
  }
}

TEST(RestartOnlyChanges, AccessLogPathIsLiveTurningTheLogOnOrOffIsNot) {
  const std::string on = edited("[admin]", "[access_log]\npath = \"/var/log/a.log\"\n[admin]");
  const Config with_log = parse(on);
  // A new path: the running log opens it.
  const Config moved = parse(edited("/var/log/a.log", "/var/log/b.log", on));
  EXPECT_TRUE(restart_only_changes(with_log, moved).errors.empty());
  EXPECT_EQ(live_changes(with_log, moved).other, std::vector<std::string>{"access_log"});
  // On or off, flows and the ring size: the workers' rings and hooks are made at start.
  for (const auto& [a, b, key] : std::vector<std::tuple<Config, Config, std::string>>{
           {parse(kRunning), with_log, "access_log.path"},
           {with_log, parse(kRunning), "access_log.path"},
           {with_log, parse(edited("a.log\"", "a.log\"\nflows = true", on)), "access_log.flows"},
           {with_log, parse(edited("a.log\"", "a.log\"\nring_size = 128", on)),
            "access_log.ring_size"}}) {
    SCOPED_TRACE(key);
    const ConfigErrors e = restart_only_changes(a, b);
    ASSERT_EQ(e.errors.size(), 1u) << e.str();
    EXPECT_EQ(e.errors[0].key, key);
    EXPECT_NE(e.errors[0].message.find("access-log rings"), std::string::npos) << e.str();
  }
}

// With the TCP stack running (a proxy service at start), proxy services and listeners come and
// go live, up to the stack's listener slots; deny signatures need inspection memory from start.
constexpr std::string_view kProxyRunning = R"([[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24"]
[fullnat]
local_addresses = ["198.51.100.2"]
[[service]]
name = "p"
vip = "203.0.113.20"
port = 80
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
)";

std::string proxy_service(int i) {
  return "[[service]]\nname = \"p" + std::to_string(i) + "\"\nvip = \"203.0.113.20\"\nport = " +
         std::to_string(1000 + i) +
         "\nmode = \"proxy\"\n  [[service.backend]]\n  address = \"198.51.100.11\"\n  port = 8080\n";
}

TEST(RestartOnlyChanges, ProxyServicesAreLiveUpToTheStacksListenerSlots) {
  const Config running = parse(kProxyRunning);
  EXPECT_EQ(proxy_listener_slots(running), 64u);
  std::string next(kProxyRunning);
  for (int i = 1; i < 64; ++i) next += proxy_service(i);
  EXPECT_TRUE(restart_only_changes(running, parse(next)).errors.empty());
  next += proxy_service(64);  // the 65th proxy VIP
  const ConfigErrors e = restart_only_changes(running, parse(next));
  ASSERT_EQ(e.errors.size(), 1u) << e.str();
  EXPECT_EQ(e.errors[0].key, "service[0]");
  EXPECT_NE(e.errors[0].message.find("64 listener slots"), std::string::npos) << e.str();
  EXPECT_NE(e.errors[0].message.find("65 proxy VIPs"), std::string::npos) << e.str();
}

TEST(RestartOnlyChanges, DenySignaturesNeedInspectionMemoryFromStart) {
  const std::string with_deny =
      edited("mode = \"proxy\"", "mode = \"proxy\"\n  [[service.deny]]\n  pattern = \"evil\"",
             std::string(kProxyRunning));
  const ConfigErrors e = restart_only_changes(parse(kProxyRunning), parse(with_deny));
  ASSERT_EQ(e.errors.size(), 1u) << e.str();
  EXPECT_EQ(e.errors[0].key, "service[0].deny");
  EXPECT_EQ(e.errors[0].pos.line, 12u);
  // Started with signatures: they change live, and may go.
  const std::string other_deny =
      edited("mode = \"proxy\"", "mode = \"proxy\"\n  [[service.deny]]\n  pattern = \"worse\"",
             std::string(kProxyRunning));
  EXPECT_TRUE(restart_only_changes(parse(with_deny), parse(other_deny)).errors.empty());
  EXPECT_TRUE(restart_only_changes(parse(with_deny), parse(kProxyRunning)).errors.empty());
}

TEST(LiveChanges, CountsServicesByNameAndNamesOtherTables) {
  std::string next = edited("  port = 8080\n  [[service.backend]]",
                            "  port = 8080\n  weight = 0\n  [[service.backend]]");  // web changed
  next = next.substr(0, next.find("[[service]]\nname = \"dns\""));              // dns removed
  next += kNewService;  // new added
  next = edited("tcp_established = 7200", "tcp_established = 60", next);
  next = edited("198.51.100.254", "198.51.100.253", next);
  const ConfigChanges c = live_changes(parse(kRunning), parse(next));
  EXPECT_EQ(c.services_added, 1u);
  EXPECT_EQ(c.services_removed, 1u);
  EXPECT_EQ(c.services_changed, 1u);
  EXPECT_EQ(c.other, (std::vector<std::string>{"route", "conntrack"}));
  EXPECT_FALSE(c.empty());
  EXPECT_TRUE(live_changes(parse(kRunning), parse(kRunning)).empty());
}

// The service options (source ranges, affinity, NodePort, health checks) and the block list are
// live, and a reload that changes one says so.
TEST(LiveChanges, ServiceOptionsAndTheBlockListAreLiveAndCounted) {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"source_ranges", edited("port = 80\n", "port = 80\nsource_ranges = [\"192.0.2.0/24\"]\n")},
      {"session_affinity", edited("port = 80\n", "port = 80\nsession_affinity = \"client_ip\"\n")},
      {"affinity_timeout_s",
       edited("port = 80\n", "port = 80\nsession_affinity = \"client_ip\"\naffinity_timeout_s = 60\n")},
      {"node_port", edited("port = 80\n", "port = 80\nnode_port = 30080\n")},
  };
  const Config running = parse(kRunning);
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    const Config next = parse(text);
    EXPECT_TRUE(restart_only_changes(running, next).errors.empty())
        << restart_only_changes(running, next).str();
    const ConfigChanges c = live_changes(running, next);
    EXPECT_EQ(c.services_changed, 1u);
    EXPECT_TRUE(c.other.empty());
  }
  const Config blocked = parse(std::string(kRunning) + "[[deny]]\nsource = \"192.0.2.0/24\"\n");
  EXPECT_TRUE(restart_only_changes(running, blocked).errors.empty());
  EXPECT_EQ(live_changes(running, blocked).other, (std::vector<std::string>{"deny"}));
}

}  // namespace
}  // namespace meshgate::ctl
