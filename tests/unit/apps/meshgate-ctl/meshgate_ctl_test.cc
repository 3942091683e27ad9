// meshgate-ctl's views, from admin API answers written out here: the ipvsadm-style services
// table (active flows counted from the flow dump, counters from /stats, IPv6 backends matched
// by their bracketed key), the flows table, the stats view showing only non-zero drops, the
// BGP view and the rte_flow rules.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "apps/meshgate-ctl/render.h"
#include "control/admin/admin.h"

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
  ]})");

const json kStats = json::parse(R"({
  "services": {
    "web": {"backends": {"198.51.100.11:8080": {"packets": 1234567, "flows": 12},
                         "198.51.100.12:8080": {"packets": 0, "flows": 0}}},
    "web6": {"backends": {"[2001:db8:1::11]:8080": {"packets": 9, "flows": 1}}}
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

TEST(CtlServices, ListsEachServiceThenItsBackendsWithCountersAndActiveFlows) {
  const auto l = lines_of(render_services(kConfig, kStats, flows()));
  ASSERT_EQ(l.size(), 8u) << render_services(kConfig, kStats, flows());
  EXPECT_EQ(l[0], "meshgate snapshot 3: 2 services");
  EXPECT_EQ(l[1], "Prot VIP:Port               Mode  Service");
  EXPECT_EQ(l[2], "  -> Backend:Port           Weight  Health     ActiveFlows  Packets  Flows");
  EXPECT_EQ(l[3], "TCP  203.0.113.10:80        dnat  web");
  EXPECT_EQ(l[4], "  -> 198.51.100.11:8080          1  healthy              2  1234567     12");
  EXPECT_EQ(l[5], "  -> 198.51.100.12:8080        250  unhealthy            0        0      0");
  EXPECT_EQ(l[6], "TCP  [2001:db8:100::10]:80  dnat  web6");
  EXPECT_EQ(l[7], "  -> [2001:db8:1::11]:8080       1  healthy              1        9      1");
}

TEST(CtlServices, SaysWhenActiveFlowsArePartialOrUnavailable) {
  std::string s = render_services(kConfig, kStats, flows(true, false));
  EXPECT_NE(s.find("(active flows counted from 3 flows, more exist, 1 of 2 workers answered)"),
            std::string::npos)
      << s;
  s = render_services(kConfig, kStats, json());
  EXPECT_NE(s.find("(active flows unavailable"), std::string::npos) << s;
  EXPECT_NE(s.find("  -> 198.51.100.11:8080          1  healthy              -  1234567     12"),
            std::string::npos)
      << s;
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

TEST(CtlRender, AnAnswerMissingAFieldThrowsForMainToReport) {
  EXPECT_THROW(render_flows(json::parse(R"({"flows": []})")), json::exception);
  EXPECT_THROW(render_services(json::object(), kStats, json()), json::exception);
  EXPECT_THROW(render_flow_rules(json::parse(R"({"ports": []})")), json::exception);
}

}  // namespace
}  // namespace meshgate::ctl_tool
