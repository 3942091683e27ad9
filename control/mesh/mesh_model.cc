#include "control/mesh/mesh_model.h"

namespace meshgate::ctl::mesh {

std::string Workload::identity() const {
  const std::string& td = trust_domain.empty() ? std::string(kDefaultTrustDomain) : trust_domain;
  const std::string& sa =
      service_account.empty() ? std::string(kDefaultServiceAccount) : service_account;
  return "spiffe://" + td + "/ns/" + ns + "/sa/" + sa;
}

StringMatch StringMatch::from_pattern(const std::string& p) {
  if (p == "*") return {Kind::kPresence, ""};
  if (!p.empty() && p.back() == '*') return {Kind::kPrefix, p.substr(0, p.size() - 1)};
  if (!p.empty() && p.front() == '*') return {Kind::kSuffix, p.substr(1)};
  return {Kind::kExact, p};
}

std::string StringMatch::pattern() const {
  switch (kind) {
    case Kind::kExact: return value;
    case Kind::kPrefix: return value + "*";
    case Kind::kSuffix: return "*" + value;
    case Kind::kPresence: return "*";
  }
  return value;
}

}  // namespace meshgate::ctl::mesh
