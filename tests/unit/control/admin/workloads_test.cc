// GET /workloads from a mesh model: one entry per workload sorted by namespace and name, with
// its addresses, node, protocol (HBONE or TCP), identity and services; none without a model.
#include "control/admin/workloads.h"

#include <gtest/gtest.h>

namespace meshgate::ctl {
namespace {

TEST(Workloads, OneEntryPerWorkloadSortedByNamespaceThenName) {
  mesh::MeshModel m;
  mesh::Workload a;
  a.uid = "cluster1//v1/Pod/bookinfo/reviews-v1-abc";
  a.name = "reviews-v1-abc";
  a.ns = "bookinfo";
  a.addresses = {*IpAddr::parse("10.244.1.7"), *IpAddr::parse("2001:db8::7")};
  a.node = "node-1";
  a.cluster_id = "cluster1";
  a.tunnel = mesh::Tunnel::kHbone;
  a.service_account = "bookinfo-reviews";
  a.services["bookinfo/reviews.bookinfo.svc.cluster.local"] = {};
  mesh::Workload b;
  b.uid = "cluster1//v1/Pod/bookinfo/details-v1-xyz";
  b.name = "details-v1-xyz";
  b.ns = "bookinfo";
  b.addresses = {*IpAddr::parse("10.244.1.8")};
  b.healthy = false;
  mesh::Workload c;
  c.uid = "cluster1//v1/Pod/apps/curl";
  c.name = "curl";
  c.ns = "apps";
  for (const auto* w : {&a, &b, &c}) m.workloads[w->uid] = *w;

  const nlohmann::json j = workloads_json(&m);
  ASSERT_EQ(j.at("workloads").size(), 3u);
  EXPECT_EQ(j["workloads"][0].at("name"), "curl");
  EXPECT_EQ(j["workloads"][1].at("name"), "details-v1-xyz");
  EXPECT_EQ(j["workloads"][2], nlohmann::json::parse(R"({
    "uid": "cluster1//v1/Pod/bookinfo/reviews-v1-abc", "name": "reviews-v1-abc",
    "namespace": "bookinfo", "addresses": ["10.244.1.7", "2001:db8::7"], "node": "node-1",
    "cluster_id": "cluster1", "network": "", "protocol": "HBONE",
    "identity": "spiffe://cluster.local/ns/bookinfo/sa/bookinfo-reviews", "waypoint": null,
    "healthy": true, "services": ["bookinfo/reviews.bookinfo.svc.cluster.local"]})"));
  EXPECT_EQ(j["workloads"][1].at("protocol"), "TCP");
  EXPECT_EQ(j["workloads"][1].at("healthy"), false);
}

TEST(Workloads, NoModelListsNone) {
  EXPECT_EQ(workloads_json(nullptr), nlohmann::json::parse(R"({"workloads": []})"));
}

}  // namespace
}  // namespace meshgate::ctl
