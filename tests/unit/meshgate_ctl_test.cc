// meshgate-ctl's views, from admin API answers written out here: the ipvsadm-style services
// table (active flows counted from the flow dump, counters from /stats, IPv6 backends matched
// by their bracketed key), the flows table, and the stats view showing only non-zero drops.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "apps/meshgate-ctl/render.h"

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
       "backend": "198.51.100.11:8080", "service": "web", "state": "ESTABLISHED", "expires_in_ms": 7199500},
      {"worker": 1, "protocol": "tcp", "client": "192.0.2.2:40001", "vip": "203.0.113.10:80",
       "backend": "198.51.100.11:8080", "service": "web", "state": "TIME_WAIT", "expires_in_ms": -3},
      {"worker": 1, "protocol": "tcp", "client": "[2001:db8:2::2]:40002", "vip": "[2001:db8:100::10]:80",
       "backend": "[2001:db8:1::11]:8080", "service": "web6", "state": "SYN_SENT", "expires_in_ms": 29000}]})");
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
            "Service  State        Expires(s)");
  EXPECT_EQ(l[1],
            "     0  TCP    192.0.2.2:40000        203.0.113.10:80        198.51.100.11:8080     "
            "web      ESTABLISHED        7199");
  EXPECT_EQ(l[2].substr(l[2].size() - 23), "TIME_WAIT             0") << "expired flows show 0";
  EXPECT_EQ(l[4], "3 flows");
  const std::string partial = render_flows(flows(true, false));
  EXPECT_NE(partial.find("3 flows (limit 100000 reached; more exist: use --limit) (only 1 of 2 "
                         "workers answered in time)"),
            std::string::npos)
      << partial;
}

TEST(CtlStats, ShowsKeyCountersAndOnlyNonZeroDrops) {
  const json s = json::parse(R"({
    "snapshot_version": 1, "packets_in": 100, "bytes_in": 6400, "packets_out": 90,
    "bytes_out": 5760, "packets_generated": 1, "packets_consumed": 1, "packets_pending": 0,
    "flows_active": 2, "flows_established": 1, "flows_created": 5, "flows_expired": 3,
    "stateless_packets": 0, "drops_total": 10,
    "drops": {"eth_truncated": 0, "no_service": 7, "tx_full": 3},
    "workers": [{"index": 0, "packets_in": 100, "packets_out": 90, "loops": 5000,
                 "flows_active": 2, "cycles_per_packet": 151.25, "mpps": 0.5}]})");
  const std::string out = render_stats(s);
  EXPECT_NE(out.find("packets in           100\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  no_service           7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  tx_full              3\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("eth_truncated"), std::string::npos) << out;
  EXPECT_NE(out.find("151.2"), std::string::npos) << out;
}

TEST(CtlRender, AnAnswerMissingAFieldThrowsForMainToReport) {
  EXPECT_THROW(render_flows(json::parse(R"({"flows": []})")), json::exception);
  EXPECT_THROW(render_services(json::object(), kStats, json()), json::exception);
}

}  // namespace
}  // namespace meshgate::ctl_tool
