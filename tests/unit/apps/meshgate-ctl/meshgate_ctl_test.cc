// meshgate-ctl's views, from admin API answers written out here: the ipvsadm-style services
// table and its JSON rows (active and inactive connections counted from the flow dump,
// counters and rates from /stats, IPv6 backends matched by their bracketed key), the flows
// table, the stats view showing only non-zero drops, the BGP view, the rte_flow rules, the
// istioctl-style workloads / certificates / policies views, the log level, the local checks of
// the flows filters and the suggestion for a misspelt command.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "apps/meshgate-ctl/render.h"
#include "control/admin/admin.h"
#include "control/admin/flow_filter.h"

namespace meshgate::ctl_tool {
namespace {

using nlohmann::json;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

const json kConfig = json::parse(R"({
  "snapshot_version": 3,
  "services": [
    {"name": "web", "vip": "203.0.113.10", "port": 80, "protocol": "tcp", "mode": "dnat",
     "endpoints": [
       {"address": "198.51.100.11", "port": 8080, "weight": 1, "health": "healthy"},
       {"address": "198.51.100.12", "port": 8080, "weight": 250, "health": "unhealthy"}]},
    {"name": "web6", "vip": "2001:db8:100::10", "port": 80, "protocol": "tcp", "mode": "dnat",
     "endpoints": [{"address": "2001:db8:1::11", "port": 8080, "weight": 1, "health": "healthy"}]}
  ],
  "health_checks": [
    {"service": "web", "backend": "198.51.100.11:8080", "type": "tcp", "state": "up"},
    {"service": "web", "backend": "198.51.100.12:8080", "type": "tcp", "state": "down"}]})");

// web's first backend carries rates; web6's also the reply direction's bytes and rate.
const json kStats = json::parse(R"({
  "rate_interval_s": 2,
  "services": {
    "web": {"backends": {"198.51.100.11:8080": {"packets": 1234567, "bytes": 98765432, "flows": 12,
                                                "rates": {"flows_per_s": 2.4, "packets_per_s": 310.5,
                                                          "bytes_per_s": 40960.6}},
                         "198.51.100.12:8080": {"packets": 0, "bytes": 0, "flows": 0}}},
    "web6": {"backends": {"[2001:db8:1::11]:8080": {"packets": 9, "bytes": 900, "reply_bytes": 4000,
                                                    "flows": 1,
                                                    "rates": {"flows_per_s": 0, "packets_per_s": 1,
                                                              "bytes_per_s": 100,
                                                              "reply_bytes_per_s": 450}}}}
  }})");

json flows(bool truncated = false, bool complete = true) {
  json f = json::parse(R"({
    "count": 3, "limit": 100000, "workers": 2, "workers_answered": 2,
    "flows": [
      {"worker": 0, "protocol": "tcp", "client": "192.0.2.2:40000", "vip": "203.0.113.10:80",
       "local": "", "backend": "198.51.100.11:8080", "service": "web", "mode": "dnat",
       "state": "ESTABLISHED", "age_ms": 500, "expires_in_ms": 7199500},
      {"worker": 1, "protocol": "tcp", "client": "192.0.2.2:40001", "vip": "203.0.113.10:80",
       "local": "", "backend": "198.51.100.11:8080", "service": "web", "mode": "dnat",
       "state": "TIME_WAIT", "age_ms": 61234, "expires_in_ms": -3},
      {"worker": 1, "protocol": "tcp", "client": "[2001:db8:2::2]:40002", "vip": "[2001:db8:100::10]:80",
       "local": "", "backend": "[2001:db8:1::11]:8080", "service": "web6", "mode": "dnat",
       "state": "SYN_SENT", "age_ms": 1000, "expires_in_ms": 29000}]})");
  f["truncated"] = truncated;
  f["complete"] = complete;
  if (!complete) f["workers_answered"] = 1;
  return f;
}

TEST(CtlServices, ListsEachServiceThenItsBackendsWithConnectionsCountersAndRates) {
  const std::string out = render_services(kConfig, kStats, flows());
  const auto l = lines_of(out);
  ASSERT_EQ(l.size(), 8u) << out;
  EXPECT_EQ(l[0], "meshgate snapshot 3: 2 services");
  EXPECT_EQ(l[1], "Prot VIP:Port               Mode  Service");
  EXPECT_EQ(l[2],
            "  -> Backend:Port           Weight  Health     ActiveConn  InActConn  Conns  Packets   "
            "InBytes  OutBytes  CPS  InBPS  OutBPS");
  EXPECT_EQ(l[3], "TCP  203.0.113.10:80        dnat  web");
  // ESTABLISHED is active, TIME_WAIT inactive; rates rounded; no reply bytes counted: "-".
  EXPECT_EQ(l[4],
            "  -> 198.51.100.11:8080          1  healthy             1          1     12  1234567  "
            "98765432         -    2  40961       -");
  EXPECT_EQ(l[5],
            "  -> 198.51.100.12:8080        250  unhealthy           0          0      0        0  "
            "       0         -    -      -       -");
  EXPECT_EQ(l[6], "TCP  [2001:db8:100::10]:80  dnat  web6");
  // A SYN_SENT flow is inactive; the reply direction shows when /stats has it. No health
  // check probes web6's backend: its health is unknown.
  EXPECT_EQ(l[7],
            "  -> [2001:db8:1::11]:8080       1  -                   0          1      1        9  "
            "     900      4000    0    100     450");
}

TEST(CtlServices, SaysWhenConnectionsArePartialOrUnavailable) {
  std::string s = render_services(kConfig, kStats, flows(true, false));
  EXPECT_NE(s.find("(connections counted from 3 flows, more exist, 1 of 2 workers answered)"),
            std::string::npos)
      << s;
  s = render_services(kConfig, kStats, json());
  EXPECT_NE(s.find("(connections unavailable: GET /flows failed)"), std::string::npos) << s;
  EXPECT_NE(s.find("  -> 198.51.100.11:8080          1  healthy             -          -     12"),
            std::string::npos)
      << s;
}

TEST(CtlServices, HealthIsADashForBackendsNoHealthCheckProbes) {
  json config = kConfig;
  config.erase("health_checks");  // no health check anywhere (or an older gateway)
  const json v = services_view(config, kStats, flows());
  EXPECT_TRUE(v["services"][0]["backends"][0].at("health").is_null());
  // A source's own verdict (a mesh workload marked unhealthy) still shows.
  EXPECT_EQ(v["services"][0]["backends"][1].at("health"), "unhealthy");
  EXPECT_TRUE(v["services"][1]["backends"][0].at("health").is_null());
  const auto l = lines_of(render_services(config, kStats, flows()));
  ASSERT_EQ(l.size(), 8u);
  EXPECT_EQ(l[4].rfind("  -> 198.51.100.11:8080          1  -                   1", 0), 0u) << l[4];
  EXPECT_EQ(l[5].rfind("  -> 198.51.100.12:8080        250  unhealthy           0", 0), 0u) << l[5];
  EXPECT_EQ(l[7].rfind("  -> [2001:db8:1::11]:8080       1  -                   0", 0), 0u) << l[7];
  // With a check, its state.
  EXPECT_EQ(services_view(kConfig, kStats, flows())["services"][0]["backends"][0].at("health"),
            "healthy");
}

TEST(CtlServices, JsonHasTheRowsOfTheTable) {
  const json v = services_view(kConfig, kStats, flows());
  EXPECT_EQ(v.at("snapshot_version"), 3);
  EXPECT_EQ(v.at("rate_interval_s"), 2);
  EXPECT_EQ(v.at("conns_counted"), json::parse(R"({"available": true, "flows": 3,
    "more_exist": false, "workers": 2, "workers_answered": 2})"));
  ASSERT_EQ(v.at("services").size(), 2u);
  const json& web = v["services"][0];
  EXPECT_EQ(web.at("name"), "web");
  EXPECT_EQ(web.at("vip"), "203.0.113.10");
  EXPECT_EQ(web.at("port"), 80);
  EXPECT_EQ(web.at("protocol"), "tcp");
  EXPECT_EQ(web.at("mode"), "dnat");
  EXPECT_EQ(web.at("backends")[0], json::parse(R"({
    "endpoint": "198.51.100.11:8080", "address": "198.51.100.11", "port": 8080, "weight": 1,
    "health": "healthy", "active_conns": 1, "inactive_conns": 1, "conns": 12, "packets": 1234567,
    "bytes_in": 98765432, "bytes_out": null, "conns_per_s": 2.4, "packets_per_s": 310.5,
    "bytes_in_per_s": 40960.6, "bytes_out_per_s": null})"));
  EXPECT_TRUE(web.at("backends")[1].at("conns_per_s").is_null());
  const json& b6 = v["services"][1].at("backends")[0];
  EXPECT_EQ(b6.at("bytes_out"), 4000);
  EXPECT_EQ(b6.at("bytes_out_per_s"), 450);
  EXPECT_EQ(b6.at("inactive_conns"), 1);
  // Without the flow dump the connection counts are null, the rest stays.
  const json nf = services_view(kConfig, kStats, json());
  EXPECT_EQ(nf.at("conns_counted"), json::parse(R"({"available": false})"));
  EXPECT_TRUE(nf["services"][0]["backends"][0].at("active_conns").is_null());
  EXPECT_EQ(nf["services"][0]["backends"][0].at("conns"), 12);
}

TEST(CtlWorkloads, IstioctlColumnsOneRowPerWorkload) {
  const json w = json::parse(R"({"workloads": [
    {"uid": "c//v1/Pod/apps/curl", "name": "curl", "namespace": "apps", "addresses": ["10.244.1.9"],
     "node": "", "cluster_id": "", "network": "", "protocol": "TCP", "identity": "", "waypoint": null,
     "healthy": true, "services": []},
    {"uid": "c//v1/Pod/bookinfo/reviews-v1", "name": "reviews-v1", "namespace": "bookinfo",
     "addresses": ["10.244.1.7", "2001:db8::7"], "node": "node-1", "cluster_id": "c", "network": "",
     "protocol": "HBONE", "identity": "spiffe://cluster.local/ns/bookinfo/sa/reviews",
     "waypoint": null, "healthy": true, "services": []}]})");
  const auto l = lines_of(render_workloads(w));
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], "NAMESPACE  POD NAME    ADDRESS                 NODE    WAYPOINT  PROTOCOL");
  EXPECT_EQ(l[1], "apps       curl        10.244.1.9              -       None      TCP");
  EXPECT_EQ(l[2], "bookinfo   reviews-v1  10.244.1.7,2001:db8::7  node-1  None      HBONE");
  EXPECT_EQ(render_workloads(json::parse(R"({"workloads": []})")),
            "NAMESPACE  POD NAME  ADDRESS  NODE  WAYPOINT  PROTOCOL\n");
}

const json kCertConfig = json::parse(R"({"certificates": [
  {"file": "certs/gw.pem", "role": "leaf", "identity": "spiffe://cluster.local/ns/gw/sa/meshgate",
   "uri_sans": [], "subject": "O=meshgate", "issuer": "O=root", "serial": "1A2B",
   "not_before": "2026-11-20T00:00:00Z", "not_after": "2026-11-21T00:00:00Z", "expires_in_s": 5},
  {"file": "certs/gw.pem", "role": "intermediate", "identity": "", "uri_sans": [],
   "subject": "CN=intermediate", "issuer": "O=root", "serial": "03",
   "not_before": "2026-01-01T00:00:00Z", "not_after": "2027-01-01T00:00:00Z", "expires_in_s": 5},
  {"file": "certs/root.pem", "role": "trust_anchor", "identity": "", "uri_sans": [],
   "subject": "O=root", "issuer": "O=root", "serial": "01",
   "not_before": "2026-01-01T00:00:00Z", "not_after": "2036-01-01T00:00:00Z", "expires_in_s": 5}],
  "policies": [
   {"name": "deny-blocked", "namespace": "demo", "scope": "namespace", "action": "deny",
    "dry_run": false, "groups": []},
   {"name": "allow-frontend", "namespace": "bookinfo", "scope": "workload", "action": "allow",
    "dry_run": true, "groups": []}]})");

TEST(CtlCertificates, TypeValidityAndDatesPerCertificate) {
  // 2026-11-22T00:00:00Z: the leaf has expired, the others are valid.
  const json v = certificates_view(kCertConfig, 1795305600);
  ASSERT_EQ(v.at("certificates").size(), 3u);
  EXPECT_EQ(v["certificates"][0], json::parse(R"({"name": "spiffe://cluster.local/ns/gw/sa/meshgate",
    "type": "Leaf", "valid": false, "serial": "1A2B", "not_after": "2026-11-21T00:00:00Z",
    "not_before": "2026-11-20T00:00:00Z", "identity": "spiffe://cluster.local/ns/gw/sa/meshgate",
    "file": "certs/gw.pem"})"));
  EXPECT_EQ(v["certificates"][1].at("type"), "Intermediate");
  EXPECT_EQ(v["certificates"][1].at("name"), "CN=intermediate");
  EXPECT_EQ(v["certificates"][2].at("type"), "Root");
  EXPECT_EQ(v["certificates"][2].at("valid"), true);
  // Before its not_before a certificate is not valid either.
  EXPECT_EQ(certificates_view(kCertConfig, 1767225599)["certificates"][2].at("valid"), false);
  const auto l = lines_of(render_certificates(v));
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0],
            "CERTIFICATE NAME                          TYPE          VALID  SERIAL NUMBER  "
            "NOT AFTER             NOT BEFORE");
  EXPECT_EQ(l[1],
            "spiffe://cluster.local/ns/gw/sa/meshgate  Leaf          false  1A2B           "
            "2026-11-21T00:00:00Z  2026-11-20T00:00:00Z");
  EXPECT_EQ(l[3],
            "O=root                                    Root          true   01             "
            "2036-01-01T00:00:00Z  2026-01-01T00:00:00Z");
}

TEST(CtlPolicies, NamespaceNameActionAndScope) {
  const json v = policies_view(kCertConfig);
  EXPECT_EQ(v.at("policies"), kCertConfig.at("policies"));
  const auto l = lines_of(render_policies(v));
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], "NAMESPACE  POLICY NAME     ACTION           SCOPE");
  EXPECT_EQ(l[1], "demo       deny-blocked    Deny             Namespace");
  EXPECT_EQ(l[2], "bookinfo   allow-frontend  Allow (dry run)  Workload");
}

TEST(CtlLogLevel, ShowsTheLevelAndWhatItWas) {
  EXPECT_EQ(render_log_level(json::parse(R"({"level": "info", "format": "text"})")),
            "log level: info\n");
  EXPECT_EQ(render_log_level(json::parse(R"({"level": "debug", "previous": "info"})")),
            "log level: debug (was info)\n");
  EXPECT_EQ(log_levels(), (std::vector<std::string>{"error", "warn", "info", "debug"}));
}

TEST(CtlFlowsFilter, WellFormedValuesPassOthersNameTheOption) {
  FlowsFilterArgs ok;
  ok.service = "web";
  ok.backend = "[2001:db8:1::11]:8080";
  ok.state = "established";
  ok.client = "192.0.2.0/24";
  EXPECT_EQ(check_flows_filter(ok), "");
  EXPECT_EQ(check_flows_filter({}), "");
  for (const char* b : {"198.51.100.11", "198.51.100.11:8080", "2001:db8::11", "[2001:db8::11]"}) {
    FlowsFilterArgs f;
    f.backend = b;
    EXPECT_EQ(check_flows_filter(f), "") << b;
  }
  auto with = [](std::optional<std::string> FlowsFilterArgs::*field, const char* v) {
    FlowsFilterArgs f;
    f.*field = v;
    return check_flows_filter(f);
  };
  EXPECT_EQ(with(&FlowsFilterArgs::service, ""), "--service: expected a service name, got \"\"");
  EXPECT_EQ(with(&FlowsFilterArgs::backend, "web:80"),
            "--backend: expected IP, IP:PORT or [IPv6]:PORT, got \"web:80\"");
  EXPECT_NE(with(&FlowsFilterArgs::backend, "198.51.100.11:0"), "");
  EXPECT_NE(with(&FlowsFilterArgs::backend, "[2001:db8::11]:"), "");
  EXPECT_EQ(with(&FlowsFilterArgs::state, "open").rfind("--state: expected one of SYN_SENT, ", 0), 0u);
  EXPECT_EQ(with(&FlowsFilterArgs::client, "192.0.2.0/33"),
            "--client: expected IP or IP/PREFIX, got \"192.0.2.0/33\"");
  EXPECT_EQ(with(&FlowsFilterArgs::client, "2001:db8::/129").rfind("--client: expected", 0), 0u);
  EXPECT_EQ(with(&FlowsFilterArgs::client, "2001:db8::/64"), "");
}

// ctl's states are the gateway's: a filter ctl accepts is one GET /flows accepts.
TEST(CtlFlowsFilter, StatesAreTheGatewaysStates) {
  EXPECT_EQ(flow_states(), meshgate::ctl::flow_state_names());
}

TEST(CtlCommands, AMisspeltCommandGetsTheClosestOne) {
  const std::vector<std::string> cmds = {"services", "flows", "stats", "config", "log-level",
                                         "flow-rules", "policies", "reload"};
  EXPECT_EQ(closest_command("servics", cmds), "services");
  EXPECT_EQ(closest_command("flwos", cmds), "flows");
  EXPECT_EQ(closest_command("stast", cmds), "stats");
  EXPECT_EQ(closest_command("loglevel", cmds), "log-level");
  EXPECT_EQ(closest_command("polices", cmds), "policies");
  EXPECT_EQ(closest_command("bogus", cmds), "");
  EXPECT_EQ(closest_command("x", cmds), "");
}

TEST(CtlFlows, OneAlignedRowPerFlowAndACountLine) {
  const auto l = lines_of(render_flows(flows()));
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0],
            "Worker  Proto  Client                 VIP                    Backend                "
            "Service  Mode  State        Age(s)  Expires(s)");
  EXPECT_EQ(l[1],
            "     0  TCP    192.0.2.2:40000        203.0.113.10:80        198.51.100.11:8080     "
            "web      dnat  ESTABLISHED       0        7199");
  EXPECT_EQ(l[2].substr(l[2].size() - 31), "TIME_WAIT        61           0") << "expired flows show 0";
  EXPECT_EQ(l[4], "3 flows");
  const std::string partial = render_flows(flows(true, false));
  EXPECT_NE(partial.find("3 flows (limit 100000 reached; more exist: use --limit) (only 1 of 2 "
                         "workers answered in time)"),
            std::string::npos)
      << partial;
}

TEST(CtlFlows, FullnatFlowsAddALocalColumn) {
  json f = flows();
  f["flows"][1]["mode"] = "fullnat";
  f["flows"][1]["local"] = "198.51.100.2:1025";
  const auto l = lines_of(render_flows(f));
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0],
            "Worker  Proto  Client                 VIP                    Local              "
            "Backend                Service  Mode     State        Age(s)  Expires(s)");
  EXPECT_EQ(l[2],
            "     1  TCP    192.0.2.2:40001        203.0.113.10:80        198.51.100.2:1025  "
            "198.51.100.11:8080     web      fullnat  TIME_WAIT        61           0");
  EXPECT_NE(l[1].find("203.0.113.10:80        -                  198.51.100.11:8080"),
            std::string::npos)
      << l[1];
}

// The gateway's half: a worker's FlowRecord as GET /flows shows it.
TEST(AdminFlows, FlowRecordJsonCarriesAgeModeAndTheFullnatSource) {
  std::vector<meshgate::ctl::StatRegistry::Name> names = {{"", "other"}, {"web", "198.51.100.11:8080"}};
  dp::FlowRecord r;
  r.client = *IpAddr::parse("192.0.2.2");
  r.client_port = 40000;
  r.vip = *IpAddr::parse("203.0.113.10");
  r.vip_port = 80;
  r.backend = *IpAddr::parse("198.51.100.11");
  r.backend_port = 8080;
  r.local = *IpAddr::parse("198.51.100.2");
  r.local_port = 1025;
  r.proto = 6;
  r.state = dp::TcpState::kEstablished;
  r.mode = dp::Mode::kFullnat;
  r.stat_id = 1;
  r.expires_in_ms = 7199000;
  r.age_ms = 1500;
  r.worker = 1;
  const json j = meshgate::ctl::flow_record_json(r, names);
  EXPECT_EQ(j, json::parse(R"({"worker": 1, "protocol": "tcp", "client": "192.0.2.2:40000",
    "vip": "203.0.113.10:80", "local": "198.51.100.2:1025", "backend": "198.51.100.11:8080",
    "service": "web", "mode": "fullnat", "state": "ESTABLISHED", "age_ms": 1500,
    "expires_in_ms": 7199000})"));
  r.mode = dp::Mode::kDnat;
  r.local = IpAddr{};
  r.local_port = 0;
  r.client = *IpAddr::parse("2001:db8:2::2");
  EXPECT_EQ(meshgate::ctl::flow_record_json(r, names).at("local"), "");
  EXPECT_EQ(meshgate::ctl::flow_record_json(r, names).at("mode"), "dnat");
  EXPECT_EQ(meshgate::ctl::flow_record_json(r, names).at("client"), "[2001:db8:2::2]:40000");
  // Rendered by meshgate-ctl as one row.
  json all = {{"count", 1}, {"limit", 100}, {"truncated", false}, {"complete", true},
              {"workers", 2}, {"workers_answered", 2}, {"flows", json::array({j})}};
  EXPECT_NE(render_flows(all).find("198.51.100.2:1025  198.51.100.11:8080  web      fullnat  "
                                   "ESTABLISHED       1        7199"),
            std::string::npos)
      << render_flows(all);
}

TEST(CtlStats, ShowsKeyCountersAndOnlyNonZeroDrops) {
  const json s = json::parse(R"({
    "snapshot_version": 1, "packets_in": 100, "bytes_in": 6400, "packets_out": 90,
    "bytes_out": 5760, "packets_generated": 1, "packets_consumed": 1, "packets_pending": 0,
    "flows_active": 2, "flows_established": 1, "flows_closing": 1, "flows_created": 5,
    "flows_expired": 3,
    "stateless_packets": 0, "drops_total": 10,
    "drops": {"eth_truncated": 0, "no_service": 7, "tx_full": 3},
    "workers": [{"index": 0, "packets_in": 100, "packets_out": 90, "loops": 5000,
                 "flows_active": 2, "cycles_per_packet": 151.25, "mpps": 0.5}]})");
  const std::string out = render_stats(s);
  EXPECT_NE(out.find("packets in           100\n"), std::string::npos) << out;
  EXPECT_NE(out.find("flows closing          1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  no_service           7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  tx_full              3\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("eth_truncated"), std::string::npos) << out;
  EXPECT_NE(out.find("151.2"), std::string::npos) << out;
}

TEST(CtlBgp, SessionsWithStateUptimeAndPrefixesThenEachVip) {
  const json b = json::parse(R"({
    "daemon": {"running": true, "pid": 4242, "restarts": 1},
    "sessions": [
      {"peer": "192.0.2.254", "remote_as": 65000, "state": "Established", "up": true,
       "uptime_s": 37, "prefixes_announced": 2},
      {"peer": "2001:db8:2::fe", "remote_as": 65000, "state": "Active", "up": false,
       "uptime_s": 0, "prefixes_announced": 0}],
    "vips": [{"vip": "203.0.113.10", "announced": true},
             {"vip": "203.0.113.30", "announced": false}]})");
  const auto l = lines_of(render_bgp(b));
  ASSERT_EQ(l.size(), 7u);
  EXPECT_EQ(l[0], "daemon running (pid 4242, restarts 1)");
  EXPECT_EQ(l[1], "peer               AS  state        uptime_s  prefixes");
  EXPECT_EQ(l[2], "192.0.2.254     65000  Established        37         2");
  EXPECT_EQ(l[3], "2001:db8:2::fe  65000  Active              0         0");
  EXPECT_EQ(l[5], "203.0.113.10  yes");
  EXPECT_EQ(l[6], "203.0.113.30  no");
}

TEST(CtlFlowRules, PortTotalsAndWhyThenOneRowPerRuleWithState) {
  const json r = json::parse(R"({
    "ports": [{"port": "net0", "port_id": 0, "queues": 2, "installed": 1, "refused": 1,
               "note": "fullnat steering in software: rte_flow_create: no room"}],
    "rules": [
      {"port": "net0", "kind": "block_source", "priority": 0, "match": "ipv4 src 203.0.113.0/24",
       "action": "drop", "state": "installed", "reason": "", "handle": true},
      {"port": "net0", "kind": "fullnat_steer", "priority": 1,
       "match": "ipv4 dst 198.51.100.2 tcp dport 1/0x1", "action": "queue 1", "state": "refused",
       "reason": "rte_flow_create: no room", "handle": false}],
    "counters": {}})");
  const auto l = lines_of(render_flow_rules(r));
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0], "port net0 (id 0, 2 queues): 1 installed, 1 refused");
  EXPECT_EQ(l[1], "  fullnat steering in software: rte_flow_create: no room");
  EXPECT_EQ(l[2],
            "port  kind           prio  match                                  action   state      "
            "handle  reason");
  EXPECT_EQ(l[3],
            "net0  block_source      0  ipv4 src 203.0.113.0/24                drop     installed  "
            "yes");
  EXPECT_EQ(l[4],
            "net0  fullnat_steer     1  ipv4 dst 198.51.100.2 tcp dport 1/0x1  queue 1  refused    "
            "no      rte_flow_create: no room");
}

TEST(CtlFlowRules, APortWithoutRulesSaysSo) {
  const json r = json::parse(R"({
    "ports": [{"port": "net0", "port_id": 0, "queues": 1, "installed": 0, "refused": 0,
               "note": ""}],
    "rules": [], "counters": {}})");
  EXPECT_EQ(render_flow_rules(r), "port net0 (id 0, 1 queues): 0 installed, 0 refused\nno rules\n");
}

TEST(CtlReload, AppliedSaysWhatChangedRefusedListsEveryPositionedError) {
  const json ok = json::parse(R"({"result": "ok", "trigger": "admin", "sha256": "ab12",
    "changes": {"services_added": 1, "services_removed": 2, "services_changed": 3,
                "listeners_added": 0, "listeners_removed": 0, "listeners_changed": 1,
                "other": ["route", "conntrack"]},
    "errors": []})");
  EXPECT_EQ(render_reload(ok),
            "reloaded: services +1 -2 ~3, listeners +0 -0 ~1, also changed: route, conntrack\n"
            "sha256 ab12\n");
  const json refused = json::parse(R"({"result": "restart_required", "trigger": "admin",
    "sha256": "cd34", "errors": [
      {"file": "gw.toml", "line": 2, "column": 11, "key": "gateway.workers", "message": "m",
       "text": "gw.toml:2:11: gateway.workers: cannot change while running"},
      {"file": "gw.toml", "line": 9, "column": 1, "key": "port[1]", "message": "m",
       "text": "gw.toml:9:1: port[1]: cannot change while running"}]})");
  EXPECT_EQ(render_reload(refused),
            "reload refused (restart_required): nothing changed, the running config stays\n"
            "  gw.toml:2:11: gateway.workers: cannot change while running\n"
            "  gw.toml:9:1: port[1]: cannot change while running\n");
}

// POST /reload while another reload runs: nothing started, and ctl says which one runs.
TEST(CtlReload, AReloadInProgressIsNamedAndNothingStarted) {
  const json busy = json::parse(R"({"result": "in_progress", "id": 4, "trigger": "sighup",
    "errors": []})");
  EXPECT_EQ(render_reload(busy),
            "reload not started: reload 4 (sighup) is in progress; nothing changed, try again "
            "when it is done\n");
}

TEST(CtlRender, AnAnswerMissingAFieldThrowsForMainToReport) {
  EXPECT_THROW(render_flows(json::parse(R"({"flows": []})")), json::exception);
  EXPECT_THROW(render_services(json::object(), kStats, json()), json::exception);
  EXPECT_THROW(render_flow_rules(json::parse(R"({"ports": []})")), json::exception);
}

}  // namespace
}  // namespace meshgate::ctl_tool
