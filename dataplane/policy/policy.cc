#include "dataplane/policy/policy.h"

#include <algorithm>

#include "dataplane/tls/spiffe.h"

namespace meshgate::dp::policy {
namespace {

template <typename T, typename Pred>
bool field_ok(const std::vector<T>& positive, const std::vector<T>& negative, Pred pred) {
  const bool pos = positive.empty() || std::any_of(positive.begin(), positive.end(), pred);
  const bool neg = !negative.empty() && std::any_of(negative.begin(), negative.end(), pred);
  return pos && !neg;
}

bool match_ok(const Match& m, const Request& r) {
  auto ns = [&](const StringMatch& s) { return r.has_identity && s.matches(r.ns); };
  auto principal = [&](const StringMatch& s) { return r.has_identity && s.matches(r.principal); };
  auto sa = [&](const ServiceAccountMatch& s) {
    return r.has_identity && s.ns == r.ns && s.service_account == r.service_account;
  };
  auto src = [&](const IpPrefix& p) { return p.contains(r.src_ip); };
  auto dst = [&](const IpPrefix& p) { return p.contains(r.dst_ip); };
  auto port = [&](uint16_t p) { return p == r.dst_port; };
  return field_ok(m.namespaces, m.not_namespaces, ns) &&
         field_ok(m.principals, m.not_principals, principal) &&
         field_ok(m.service_accounts, m.not_service_accounts, sa) &&
         field_ok(m.source_ips, m.not_source_ips, src) &&
         field_ok(m.destination_ips, m.not_destination_ips, dst) &&
         field_ok(m.destination_ports, m.not_destination_ports, port);
}

bool clause_ok(const Clause& c, const Request& r) {
  return c.matches.empty() ||
         std::any_of(c.matches.begin(), c.matches.end(), [&](const Match& m) { return match_ok(m, r); });
}

}  // namespace

bool StringMatch::matches(std::string_view s) const {
  switch (kind) {
    case Kind::kExact: return s == value;
    case Kind::kPrefix: return s.starts_with(value);
    case Kind::kSuffix: return s.ends_with(value);
    case Kind::kPresence: return !s.empty();
  }
  return false;
}

bool Policy::matches(const Request& r) const {
  return std::any_of(groups.begin(), groups.end(), [&](const Group& g) {
    return std::all_of(g.clauses.begin(), g.clauses.end(), [&](const Clause& c) { return clause_ok(c, r); });
  });
}

bool set_identity(Request& r, std::string_view spiffe_id) {
  tls::SpiffeId id;
  r.has_identity = tls::parse_spiffe_id(spiffe_id, id);
  if (!r.has_identity) return false;
  r.trust_domain = id.trust_domain;
  r.ns = id.ns;
  r.service_account = id.service_account;
  r.principal = id.principal;
  return true;
}

Verdict evaluate(std::span<const Policy* const> policies, const Request& r) {
  Verdict v;
  for (const Policy* p : policies) {
    if (p->action != Action::kDeny || !p->matches(r)) continue;
    if (p->dry_run) {
      if (v.dry_run_deny == nullptr) v.dry_run_deny = p;
      continue;
    }
    v.allow = false;
    v.decided_by = p;
    return v;
  }
  bool any_allow = false;
  for (const Policy* p : policies) {
    if (p->action != Action::kAllow || p->dry_run) continue;
    any_allow = true;
    if (p->matches(r)) {
      v.decided_by = p;
      return v;
    }
  }
  v.allow = !any_allow;
  return v;
}

std::vector<const Policy*> PolicySet::for_destination(std::string_view ns,
                                                      std::span<const std::string> selected) const {
  std::vector<const Policy*> out;
  for (const ScopedPolicy& p : policies) {
    bool applies = p.scope == Scope::kGlobal || (p.scope == Scope::kNamespace && p.ns == ns);
    if (p.scope == Scope::kWorkloadSelector) {
      for (const std::string& key : selected) applies |= key == p.policy.name;
    }
    if (applies) out.push_back(&p.policy);
  }
  return out;
}

std::string pattern(const StringMatch& m) {
  switch (m.kind) {
    case StringMatch::Kind::kExact: return m.value;
    case StringMatch::Kind::kPrefix: return m.value + "*";
    case StringMatch::Kind::kSuffix: return "*" + m.value;
    case StringMatch::Kind::kPresence: return "*";
  }
  return m.value;
}

}  // namespace meshgate::dp::policy
