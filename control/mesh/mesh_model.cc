#include "control/mesh/mesh_model.h"

namespace meshgate::ctl::mesh {

const char* tunnel_name(Tunnel t) {
  switch (t) {
    case Tunnel::kNone: return "none";
    case Tunnel::kHbone: return "hbone";
    case Tunnel::kLegacyIstioMtls: return "legacy_istio_mtls";
  }
  return "?";
}

const char* lb_scope_name(LbScope s) {
  switch (s) {
    case LbScope::kRegion: return "region";
    case LbScope::kZone: return "zone";
    case LbScope::kSubzone: return "subzone";
    case LbScope::kNode: return "node";
    case LbScope::kCluster: return "cluster";
    case LbScope::kNetwork: return "network";
  }
  return "?";
}

const char* lb_mode_name(LbMode m) {
  switch (m) {
    case LbMode::kUnspecified: return "unspecified";
    case LbMode::kStrict: return "strict";
    case LbMode::kFailover: return "failover";
    case LbMode::kPassthrough: return "passthrough";
  }
  return "?";
}

const char* health_policy_name(HealthPolicy h) {
  return h == HealthPolicy::kAllowAll ? "allow_all" : "only_healthy";
}

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
