// L4 authorization with Istio semantics (docs/HBONE.md "L4 authorization"): policies written
// as mesh-file TOML, parsed by the real file parser, mapped by control/mesh/authz and evaluated
// by dataplane/policy. Each test is one sentence of the spec.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/mesh/authz.h"
#include "control/mesh/mesh_file.h"
#include "dataplane/policy/policy.h"

using namespace meshgate;
using namespace meshgate::dp::policy;
namespace mesh = meshgate::ctl::mesh;

namespace {

// The destination every test evaluates against: workload "web" in namespace demo.
const char* kWorkload = R"(
[[workload]]
uid = "web"
name = "web"
namespace = "demo"
addresses = ["10.0.0.10"]
tunnel = "hbone"
authorization_policies = ["demo/selected"]
)";

struct Eval {
  std::vector<Policy> policies;
  std::vector<const Policy*> ptrs;
  explicit Eval(const std::string& policies_toml) {
    auto m = mesh::parse_mesh_file(std::string(kWorkload) + policies_toml, "policies.toml");
    if (!m.ok()) {
      ADD_FAILURE() << m.error().str();
      return;
    }
    policies = mesh::policies_for(*m, m->workloads.at("web"));
    for (const Policy& p : policies) ptrs.push_back(&p);
  }
  // peer: "spiffe://..." or "" for plaintext.
  Verdict operator()(const std::string& peer, const char* src = "192.0.2.1", uint16_t port = 8080,
                     const char* dst = "10.0.0.10") const {
    Request r;
    set_identity(r, peer);
    r.src_ip = *IpAddr::parse(src);
    r.dst_ip = *IpAddr::parse(dst);
    r.dst_port = port;
    return evaluate(ptrs, r);
  }
  bool allows(const std::string& peer, const char* src = "192.0.2.1", uint16_t port = 8080) const {
    return (*this)(peer, src, port).allow;
  }
};

const std::string kAlice = "spiffe://cluster.local/ns/demo/sa/alice";
const std::string kBob = "spiffe://cluster.local/ns/demo/sa/bob";
const std::string kOther = "spiffe://cluster.local/ns/other/sa/alice";

std::string policy(const char* name, const char* ns, const char* scope, const char* action,
                   const std::string& matches, bool dry_run = false) {
  std::string s = std::string("[[policy]]\nname = \"") + name + "\"\nnamespace = \"" + ns +
                  "\"\nscope = \"" + scope + "\"\naction = \"" + action + "\"\n";
  if (dry_run) s += "dry_run = true\n";
  if (!matches.empty()) s += "  [[policy.group]]\n    [[policy.group.clause]]\n" + matches;
  return s;
}
std::string match(const std::string& fields) { return "      [[policy.group.clause.match]]\n      " + fields + "\n"; }

}  // namespace

TEST(Policy, no_policy_allows_everything) {
  Eval e("");
  EXPECT_TRUE(e.allows(kAlice));
  EXPECT_TRUE(e.allows(""));
}

TEST(Policy, an_allow_policy_means_only_what_it_matches_is_allowed) {
  Eval e(policy("allow-alice", "demo", "namespace", "allow",
                match("principals = [\"cluster.local/ns/demo/sa/alice\"]")));
  EXPECT_TRUE(e.allows(kAlice));
  EXPECT_FALSE(e.allows(kBob));
  EXPECT_FALSE(e.allows("")) << "plaintext has no principal";
  EXPECT_EQ(e(kAlice).decided_by->name, "demo/allow-alice");
}

TEST(Policy, deny_comes_first) {
  Eval e(policy("allow-all-demo", "demo", "namespace", "allow", match("namespaces = [\"demo\"]")) +
         policy("deny-bob", "demo", "namespace", "deny",
                match("principals = [\"cluster.local/ns/demo/sa/bob\"]")));
  EXPECT_TRUE(e.allows(kAlice));
  EXPECT_FALSE(e.allows(kBob));
  EXPECT_EQ(e(kBob).decided_by->name, "demo/deny-bob");
  EXPECT_FALSE(e.allows(kOther)) << "allow policy present, no match";
}

TEST(Policy, dry_run_deny_is_reported_not_enforced_and_dry_run_allow_does_not_count) {
  Eval e(policy("deny-bob", "demo", "namespace", "deny",
                match("principals = [\"cluster.local/ns/demo/sa/bob\"]"), true) +
         policy("allow-alice", "demo", "namespace", "allow",
                match("principals = [\"cluster.local/ns/demo/sa/alice\"]"), true));
  const Verdict v = e(kBob);
  EXPECT_TRUE(v.allow);
  ASSERT_NE(v.dry_run_deny, nullptr);
  EXPECT_EQ(v.dry_run_deny->name, "demo/deny-bob");
  EXPECT_TRUE(e.allows(kOther)) << "a dry-run ALLOW is not an ALLOW policy";
}

TEST(Policy, policies_of_other_namespaces_and_unselected_workload_policies_do_not_apply) {
  Eval e(policy("deny-all", "other", "namespace", "deny", match("")) +
         policy("deny-sel", "demo", "workload", "deny", match("")));
  EXPECT_TRUE(e.allows(kAlice));
  EXPECT_EQ(e.policies.size(), 0u);
  Eval g(policy("deny-all", "istio-system", "global", "deny", match("")) +
         policy("selected", "demo", "workload", "allow", match("")));
  EXPECT_EQ(g.policies.size(), 2u) << "global and the workload's selector policy apply";
  EXPECT_FALSE(g.allows(kAlice));
}

TEST(Policy, a_policy_with_no_rules_never_matches_an_empty_clause_matches) {
  Eval no_rules(policy("allow-nothing", "demo", "namespace", "allow", ""));
  EXPECT_FALSE(no_rules.allows(kAlice)) << "an ALLOW that matches nothing denies all";
  Eval deny_no_rules(policy("deny-nothing", "demo", "namespace", "deny", ""));
  EXPECT_TRUE(deny_no_rules.allows(kAlice));
  Eval empty_clause(policy("deny-every", "demo", "namespace", "deny", ""));
  empty_clause.policies.at(0).groups.push_back(Group{{Clause{}}});
  EXPECT_FALSE(empty_clause.allows(kAlice));
  EXPECT_FALSE(empty_clause.allows(""));
}

TEST(Policy, groups_are_ored_clauses_anded_matches_ored_fields_anded_values_ored) {
  const std::string two_clauses =
      "[[policy]]\nname = \"p\"\nnamespace = \"demo\"\nscope = \"namespace\"\naction = \"allow\"\n"
      "  [[policy.group]]\n"
      "    [[policy.group.clause]]\n"
      "      [[policy.group.clause.match]]\n"
      "      namespaces = [\"demo\"]\n"
      "    [[policy.group.clause]]\n"
      "      [[policy.group.clause.match]]\n"
      "      destination_ports = [8080, 9090]\n"
      "      source_ips = [\"192.0.2.0/24\"]\n"
      "      [[policy.group.clause.match]]\n"
      "      source_ips = [\"198.51.100.7\"]\n"
      "  [[policy.group]]\n"
      "    [[policy.group.clause]]\n"
      "      [[policy.group.clause.match]]\n"
      "      principals = [\"cluster.local/ns/other/sa/*\"]\n";
  Eval e(two_clauses);
  EXPECT_TRUE(e.allows(kAlice, "192.0.2.9", 8080));    // clause 1 and clause 2 (first match)
  EXPECT_TRUE(e.allows(kAlice, "192.0.2.9", 9090));    // values of a field OR-ed
  EXPECT_FALSE(e.allows(kAlice, "192.0.2.9", 7070));   // fields AND-ed: port fails
  EXPECT_TRUE(e.allows(kAlice, "198.51.100.7", 7070)); // second match of clause 2 (OR-ed)
  EXPECT_FALSE(e.allows(kAlice, "203.0.113.1", 8080)); // clause 2 fails → group 1 fails
  EXPECT_TRUE(e.allows(kOther, "203.0.113.1", 1));     // group 2 (groups OR-ed), prefix match
}

TEST(Policy, principals_exact_prefix_suffix_presence_without_the_scheme) {
  auto allow_if = [](const char* pattern) {
    return Eval(policy("p", "demo", "namespace", "allow",
                       match(std::string("principals = [\"") + pattern + "\"]")));
  };
  EXPECT_TRUE(allow_if("cluster.local/ns/demo/sa/alice").allows(kAlice));
  EXPECT_FALSE(allow_if("spiffe://cluster.local/ns/demo/sa/alice").allows(kAlice));
  EXPECT_TRUE(allow_if("cluster.local/ns/demo/*").allows(kBob));
  EXPECT_FALSE(allow_if("cluster.local/ns/demo/*").allows(kOther));
  EXPECT_TRUE(allow_if("*/sa/alice").allows(kOther));
  EXPECT_FALSE(allow_if("*/sa/alice").allows(kBob));
  EXPECT_TRUE(allow_if("*").allows(kBob));
  EXPECT_FALSE(allow_if("*").allows(""));
}

TEST(Policy, not_fields_match_when_none_of_their_values_does) {
  Eval e(policy("deny-not-demo", "demo", "namespace", "deny", match("not_namespaces = [\"demo\"]")));
  EXPECT_TRUE(e.allows(kAlice));
  EXPECT_FALSE(e.allows(kOther));
  EXPECT_FALSE(e.allows("")) << "no identity: not_namespaces is satisfied";
  Eval ports(policy("deny-not-8080", "demo", "namespace", "deny", match("not_destination_ports = [8080]")));
  EXPECT_TRUE(ports.allows(kAlice, "192.0.2.1", 8080));
  EXPECT_FALSE(ports.allows(kAlice, "192.0.2.1", 8081));
}

TEST(Policy, strict_mtls_as_deny_not_principals_presence_blocks_plaintext_only) {
  Eval e(policy("strict", "istio-system", "global", "deny", match("not_principals = [\"*\"]")));
  EXPECT_FALSE(e.allows(""));
  EXPECT_TRUE(e.allows(kAlice));
}

TEST(Policy, service_accounts_source_and_destination_addresses) {
  Eval sa(policy("p", "demo", "namespace", "allow", match("service_accounts = [\"demo/alice\"]")));
  EXPECT_TRUE(sa.allows(kAlice));
  EXPECT_FALSE(sa.allows(kOther));
  Eval src(policy("p", "demo", "namespace", "deny", match("source_ips = [\"2001:db8::/32\", \"192.0.2.128/25\"]")));
  EXPECT_FALSE(src.allows(kAlice, "2001:db8::5"));
  EXPECT_FALSE(src.allows(kAlice, "192.0.2.200"));
  EXPECT_TRUE(src.allows(kAlice, "192.0.2.100"));
  Eval dst(policy("p", "demo", "namespace", "allow", match("destination_ips = [\"10.0.0.10\"]")));
  EXPECT_TRUE(dst(kAlice, "192.0.2.1", 80, "10.0.0.10").allow);
  EXPECT_FALSE(dst(kAlice, "192.0.2.1", 80, "10.0.0.11").allow);
}

TEST(Policy, identity_comes_only_from_a_well_formed_spiffe_id) {
  Request r;
  EXPECT_TRUE(set_identity(r, kAlice));
  EXPECT_EQ(r.ns, "demo");
  EXPECT_EQ(r.principal, "cluster.local/ns/demo/sa/alice");
  EXPECT_FALSE(set_identity(r, "spiffe://cluster.local/ns/demo"));
  EXPECT_FALSE(r.has_identity);
}

// The snapshot's compiled set selects per destination what policies_for selects from the model:
// global ones, the destination namespace's, and the workload-selector ones it names; by key.
TEST(Policy, compiled_set_selects_like_the_model_and_is_ordered_by_key) {
  auto m = mesh::parse_mesh_file(
      std::string(kWorkload) + policy("z-ns", "demo", "namespace", "deny", match("")) +
          policy("deny-all", "other", "namespace", "deny", match("")) +
          policy("deny-sel", "demo", "workload", "deny", match("")) +
          policy("selected", "demo", "workload", "allow", match("namespaces = [\"demo*\"]")) +
          policy("global", "istio-system", "global", "allow", match("")),
      "policies.toml");
  ASSERT_TRUE(m.ok()) << m.error().str();
  std::vector<mesh::Policy> all;
  for (const auto& [key, p] : m->policies) {
    all.insert(all.begin(), p);  // reversed: compile_policies orders them
  }
  const auto set = mesh::compile_policies(all);
  ASSERT_EQ(set->policies.size(), 5u);
  for (size_t i = 1; i < set->policies.size(); ++i) {
    EXPECT_LT(set->policies[i - 1].policy.name, set->policies[i].policy.name);
  }
  const auto& web = m->workloads.at("web");
  const auto chosen = set->for_destination(web.ns, web.authorization_policies);
  const auto expected = mesh::policies_for(*m, web);
  ASSERT_EQ(chosen.size(), expected.size());
  for (size_t i = 0; i < chosen.size(); ++i) EXPECT_EQ(chosen[i]->name, expected[i].name);
  EXPECT_EQ(chosen.size(), 3u) << "global, demo's namespace policy, the selected one";
  // Scope and the Istio pattern form survive compilation (what /config_dump shows).
  const ScopedPolicy& sel = set->policies[1];
  EXPECT_EQ(sel.policy.name, "demo/selected");
  EXPECT_EQ(sel.scope, Scope::kWorkloadSelector);
  EXPECT_EQ(pattern(sel.policy.groups.at(0).clauses.at(0).matches.at(0).namespaces.at(0)), "demo*");
}
