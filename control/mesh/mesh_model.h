// The mesh as the Istio workload API describes it: workloads (keyed by uid), services (keyed by
// "namespace/hostname") and L4 authorization policies (keyed by "namespace/name"), the keys of
// their xDS resources. Providers (file, xDS) build a MeshModel; the control loop maps it to
// ServiceSpecs (mesh_mapping.h). Plain values: a model handed to another thread is immutable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/config/config.h"
#include "dataplane/common/net_types.h"

namespace meshgate::ctl::mesh {

inline constexpr const char* kDefaultTrustDomain = "cluster.local";  // Istio's default
inline constexpr const char* kDefaultServiceAccount = "default";     // Kubernetes' default
inline constexpr uint32_t kDefaultCapacity = 1;                      // Workload.capacity unset

// istio.workload.TunnelProtocol. LEGACY_ISTIO_MTLS is only ever held by the test server's
// lenient parse; clients reject it.
enum class Tunnel : uint8_t { kNone = 0, kHbone = 1, kLegacyIstioMtls = 2 };
// istio.workload.LoadBalancing enums, same values as on the wire.
enum class LbScope : uint8_t { kRegion = 1, kZone = 2, kSubzone = 3, kNode = 4, kCluster = 5,
                               kNetwork = 6 };
enum class LbMode : uint8_t { kUnspecified = 0, kStrict = 1, kFailover = 2, kPassthrough = 3 };
enum class HealthPolicy : uint8_t { kOnlyHealthy = 0, kAllowAll = 1 };

// istio.workload.Port: a service port and the port its endpoints listen on.
struct PortMapping {
  uint16_t service_port = 0;
  uint16_t target_port = 0;  // 0 = named port, resolved per endpoint
  uint8_t app_protocol = 0;  // istio.workload.AppProtocol, informational
  friend bool operator==(const PortMapping&, const PortMapping&) = default;
};

struct NetworkAddress {
  std::string network;
  IpAddr address;
  std::optional<uint8_t> length;  // CIDR VIP prefix length; absent = host address
  friend bool operator==(const NetworkAddress&, const NetworkAddress&) = default;
};

struct LoadBalancing {
  std::vector<LbScope> routing_preference;
  LbMode mode = LbMode::kUnspecified;
  HealthPolicy health_policy = HealthPolicy::kOnlyHealthy;
  friend bool operator==(const LoadBalancing&, const LoadBalancing&) = default;
};

struct Service {
  std::string name;
  std::string ns;
  std::string hostname;                 // FQDN
  std::vector<NetworkAddress> vips;     // empty for headless services
  std::vector<PortMapping> ports;
  std::vector<std::string> subject_alt_names;
  LoadBalancing load_balancing;
  std::string key() const { return ns + "/" + hostname; }  // the xDS resource name
  friend bool operator==(const Service&, const Service&) = default;
};

struct Workload {
  std::string uid;  // primary key
  std::string name;
  std::string ns;
  std::vector<IpAddr> addresses;
  std::string hostname;  // DNS-resolved endpoint (not supported by meshgate's mapping)
  std::string network;
  Tunnel tunnel = Tunnel::kNone;
  std::string trust_domain = kDefaultTrustDomain;
  std::string service_account = kDefaultServiceAccount;
  std::string node;
  std::string cluster_id;
  std::string canonical_name;
  std::string canonical_revision;
  std::string workload_name;
  Locality locality;
  // "namespace/hostname" -> the workload's own port mappings for that service (may be empty).
  std::map<std::string, std::vector<PortMapping>> services;
  std::vector<std::string> authorization_policies;
  bool healthy = true;
  uint32_t capacity = kDefaultCapacity;  // LB weight

  // "spiffe://<trust domain>/ns/<namespace>/sa/<service account>", defaults applied.
  std::string identity() const;
  friend bool operator==(const Workload&, const Workload&) = default;
};

// istio.security.Authorization (docs/HBONE.md "L4 authorization"). String matches: exact, "x*" prefix,
// "*x" suffix, "*" presence.
struct StringMatch {
  enum class Kind : uint8_t { kExact, kPrefix, kSuffix, kPresence };
  Kind kind = Kind::kExact;
  std::string value;  // without the '*'
  // The file / istioctl notation: "x*", "*x", "*", or the exact string.
  static StringMatch from_pattern(const std::string& pattern);
  std::string pattern() const;
  friend bool operator==(const StringMatch&, const StringMatch&) = default;
};

struct ServiceAccountMatch {
  std::string ns;
  std::string service_account;
  friend bool operator==(const ServiceAccountMatch&, const ServiceAccountMatch&) = default;
};

// Fields of a match are AND-ed; values within a field are OR-ed.
struct PolicyMatch {
  std::vector<StringMatch> namespaces, not_namespaces;
  std::vector<StringMatch> principals, not_principals;
  std::vector<IpPrefix> source_ips, not_source_ips;
  std::vector<IpPrefix> destination_ips, not_destination_ips;
  std::vector<uint16_t> destination_ports, not_destination_ports;
  std::vector<ServiceAccountMatch> service_accounts, not_service_accounts;
  friend bool operator==(const PolicyMatch&, const PolicyMatch&) = default;
};

struct PolicyClause {
  std::vector<PolicyMatch> matches;  // OR-ed (as ztunnel evaluates istio.security.Rules)
  friend bool operator==(const PolicyClause&, const PolicyClause&) = default;
};

struct PolicyGroup {
  std::vector<PolicyClause> clauses;  // AND-ed
  friend bool operator==(const PolicyGroup&, const PolicyGroup&) = default;
};

enum class PolicyScope : uint8_t { kGlobal = 0, kNamespace = 1, kWorkloadSelector = 2 };
enum class PolicyAction : uint8_t { kAllow = 0, kDeny = 1 };

struct Policy {
  std::string name;
  std::string ns;
  PolicyScope scope = PolicyScope::kGlobal;
  PolicyAction action = PolicyAction::kAllow;
  std::vector<PolicyGroup> groups;  // OR-ed
  bool dry_run = false;
  std::string key() const { return ns + "/" + name; }  // the xDS resource name
  friend bool operator==(const Policy&, const Policy&) = default;
};

// One provider's view of the mesh, keyed by xDS resource name.
struct MeshModel {
  std::map<std::string, Workload> workloads;  // uid
  std::map<std::string, Service> services;    // namespace/hostname
  std::map<std::string, Policy> policies;     // namespace/name
  friend bool operator==(const MeshModel&, const MeshModel&) = default;
};

}  // namespace meshgate::ctl::mesh
