#include "control/mesh/authz.h"

#include <algorithm>

namespace meshgate::ctl::mesh {
namespace {

std::vector<dp::policy::StringMatch> strings(const std::vector<StringMatch>& in) {
  std::vector<dp::policy::StringMatch> out;
  out.reserve(in.size());
  for (const StringMatch& m : in) {
    dp::policy::StringMatch d;
    switch (m.kind) {
      case StringMatch::Kind::kExact: d.kind = dp::policy::StringMatch::Kind::kExact; break;
      case StringMatch::Kind::kPrefix: d.kind = dp::policy::StringMatch::Kind::kPrefix; break;
      case StringMatch::Kind::kSuffix: d.kind = dp::policy::StringMatch::Kind::kSuffix; break;
      case StringMatch::Kind::kPresence: d.kind = dp::policy::StringMatch::Kind::kPresence; break;
    }
    d.value = m.value;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<dp::policy::ServiceAccountMatch> accounts(const std::vector<ServiceAccountMatch>& in) {
  std::vector<dp::policy::ServiceAccountMatch> out;
  for (const ServiceAccountMatch& m : in) out.push_back({m.ns, m.service_account});
  return out;
}

}  // namespace

dp::policy::Policy to_dataplane_policy(const Policy& p) {
  dp::policy::Policy d;
  d.name = p.key();
  d.action = p.action == PolicyAction::kDeny ? dp::policy::Action::kDeny : dp::policy::Action::kAllow;
  d.dry_run = p.dry_run;
  for (const PolicyGroup& g : p.groups) {
    dp::policy::Group dg;
    for (const PolicyClause& c : g.clauses) {
      dp::policy::Clause dc;
      for (const PolicyMatch& m : c.matches) {
        dp::policy::Match dm;
        dm.namespaces = strings(m.namespaces);
        dm.not_namespaces = strings(m.not_namespaces);
        dm.principals = strings(m.principals);
        dm.not_principals = strings(m.not_principals);
        dm.service_accounts = accounts(m.service_accounts);
        dm.not_service_accounts = accounts(m.not_service_accounts);
        dm.source_ips = m.source_ips;
        dm.not_source_ips = m.not_source_ips;
        dm.destination_ips = m.destination_ips;
        dm.not_destination_ips = m.not_destination_ips;
        dm.destination_ports = m.destination_ports;
        dm.not_destination_ports = m.not_destination_ports;
        dc.matches.push_back(std::move(dm));
      }
      dg.clauses.push_back(std::move(dc));
    }
    d.groups.push_back(std::move(dg));
  }
  return d;
}

std::shared_ptr<const dp::policy::PolicySet> compile_policies(const std::vector<Policy>& policies) {
  std::vector<const Policy*> sorted;
  for (const Policy& p : policies) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(),
            [](const Policy* a, const Policy* b) { return a->key() < b->key(); });
  auto set = std::make_shared<dp::policy::PolicySet>();
  set->policies.reserve(sorted.size());
  for (const Policy* p : sorted) {
    dp::policy::ScopedPolicy sp;
    switch (p->scope) {
      case PolicyScope::kGlobal: sp.scope = dp::policy::Scope::kGlobal; break;
      case PolicyScope::kNamespace: sp.scope = dp::policy::Scope::kNamespace; break;
      case PolicyScope::kWorkloadSelector: sp.scope = dp::policy::Scope::kWorkloadSelector; break;
    }
    sp.ns = p->ns;
    sp.name = p->name;
    sp.policy = to_dataplane_policy(*p);
    set->policies.push_back(std::move(sp));
  }
  return set;
}

std::vector<dp::policy::Policy> policies_for(const MeshModel& model, const Workload& dst) {
  std::vector<dp::policy::Policy> out;
  for (const auto& [key, p] : model.policies) {
    const bool applies =
        p.scope == PolicyScope::kGlobal || (p.scope == PolicyScope::kNamespace && p.ns == dst.ns) ||
        (p.scope == PolicyScope::kWorkloadSelector &&
         std::find(dst.authorization_policies.begin(), dst.authorization_policies.end(), key) !=
             dst.authorization_policies.end());
    if (applies) out.push_back(to_dataplane_policy(p));
  }
  return out;
}

}  // namespace meshgate::ctl::mesh
