// L4 authorization with Istio semantics (docs/HBONE.md "L4 authorization",
// istio.security.Authorization as ztunnel evaluates it), on plain structs. Policies are built
// on the control thread (control/mesh/authz.h maps the mesh model) and evaluated by workers:
// evaluation reads only, allocates nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/common/net_types.h"

namespace meshgate::dp::policy {

struct StringMatch {
  enum class Kind : uint8_t { kExact, kPrefix, kSuffix, kPresence };
  Kind kind = Kind::kExact;
  std::string value;
  // Presence matches any non-empty value; nothing matches an absent one.
  bool matches(std::string_view s) const;
};

struct ServiceAccountMatch {
  std::string ns;
  std::string service_account;
};

// Fields AND-ed, values of a field OR-ed; an empty field does not constrain; a not_* field
// matches when none of its values does. Identity fields never match an absent identity (so a
// not_* identity field is satisfied by one).
struct Match {
  std::vector<StringMatch> namespaces, not_namespaces;
  std::vector<StringMatch> principals, not_principals;  // "td/ns/x/sa/y", no spiffe://
  std::vector<ServiceAccountMatch> service_accounts, not_service_accounts;
  std::vector<IpPrefix> source_ips, not_source_ips;
  std::vector<IpPrefix> destination_ips, not_destination_ips;
  std::vector<uint16_t> destination_ports, not_destination_ports;
};

struct Clause {
  std::vector<Match> matches;  // OR-ed (ztunnel); an empty clause matches
};

struct Group {
  std::vector<Clause> clauses;  // AND-ed
};

enum class Action : uint8_t { kAllow, kDeny };

struct Policy {
  std::string name;  // "namespace/name", for logs and counters
  Action action = Action::kAllow;
  bool dry_run = false;  // evaluated and reported, never enforced
  std::vector<Group> groups;  // OR-ed; a policy with no groups never matches
  bool matches(const struct Request& r) const;
};

// What the destination knows about a connection.
struct Request {
  // The peer's verified SPIFFE id; has_identity false for plaintext.
  bool has_identity = false;
  std::string_view trust_domain, ns, service_account;
  std::string_view principal;  // "td/ns/x/sa/y"
  IpAddr src_ip;
  IpAddr dst_ip;
  uint16_t dst_port = 0;  // the real target port
};
// Fills the identity fields from a "spiffe://..." id; false (no identity) when it is not one.
bool set_identity(Request& r, std::string_view spiffe_id);

struct Verdict {
  bool allow = true;
  const Policy* decided_by = nullptr;  // the matching DENY, or the matching ALLOW
  const Policy* dry_run_deny = nullptr;  // a dry-run DENY that would have denied
};

// Where a policy applies (istio.security.Scope): every workload (root namespace), the workloads
// of its namespace, or the workloads that name it (workload selector).
enum class Scope : uint8_t { kGlobal = 0, kNamespace = 1, kWorkloadSelector = 2 };

struct ScopedPolicy {
  Scope scope = Scope::kGlobal;
  std::string ns;    // the policy's namespace
  std::string name;  // its name in the namespace (policy.name is "ns/name")
  Policy policy;
};

// The compiled authorization policies of one mesh model, ordered by key ("ns/name"). Immutable
// once built; snapshots built from the same policies share one set.
struct PolicySet {
  std::vector<ScopedPolicy> policies;
  // The policies that apply to a destination workload in namespace `ns` whose selector list
  // (Workload.authorization_policies) is `selected` (keys), in key order.
  std::vector<const Policy*> for_destination(std::string_view ns,
                                             std::span<const std::string> selected) const;
};

// The pattern form of a match as Istio writes it: "v", "v*", "*v" or "*".
std::string pattern(const StringMatch& m);

// Istio order: any matching enforced DENY → deny; no enforced ALLOW policy → allow; else allow
// only when one ALLOW matches. `policies` are the destination's: its namespace's, the global
// (root namespace) ones and its workload-selector ones.
Verdict evaluate(std::span<const Policy* const> policies, const Request& r);

}  // namespace meshgate::dp::policy
