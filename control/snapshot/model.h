// What the snapshot builder turns into dataplane tables: services and their endpoints, whatever
// their source (static [[service]] tables today, the mesh providers later). Control thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/config/config.h"
#include "control/snapshot/istio_labels.h"
#include "dataplane/common/net_types.h"

namespace meshgate::dp {
struct Snapshot;
}

namespace meshgate::ctl {

enum class TunnelProtocol : uint8_t { kNone, kHbone };

struct EndpointSpec {
  IpAddr address;
  uint16_t port = 0;     // the target port traffic is sent to (host order)
  uint32_t weight = 1;   // 0 = drain: no new flows, existing flows stay
  bool healthy = true;   // unhealthy endpoints get no new flows
  TunnelProtocol tunnel = TunnelProtocol::kNone;
  std::string identity;  // SPIFFE identity of a mesh workload ("" for plain backends)
  std::string uid;       // the workload uid that contributed this endpoint ("" for static)
  // The workload's own (workload-selector) authorization policies, "namespace/name" keys.
  std::vector<std::string> policy_keys;
  IstioWorkloadLabels istio;  // its Istio metric labels (empty for static backends)
};

// One VIP:port:protocol. A mesh service with several VIPs or ports becomes several specs.
struct ServiceSpec {
  std::string name;  // unique among specs: the key of stats and dumps
  IpAddr vip;
  uint16_t port = 0;  // host order
  L4Proto protocol = L4Proto::kTcp;
  ForwardMode mode = ForwardMode::kDnat;
  uint32_t table_size = 0;  // lookup table slots (prime); 0 = automatic
  BackendRemoval on_backend_removal = BackendRemoval::kKeep;
  uint16_t gue_port = kDefaultGuePort;
  IcmpEcho icmp_echo = IcmpEcho::kAnswer;
  ProxyProtocol proxy_protocol = ProxyProtocol::kNone;
  std::vector<std::string> deny;  // proxy: deny signature patterns
  uint32_t inspect_bytes = kDefaultInspectBytes;
  std::vector<EndpointSpec> endpoints;
  std::vector<IpPrefix> source_ranges;  // new flows only from these; empty = anyone
  uint32_t affinity_timeout_s = 0;      // session_affinity = "client_ip"; 0 = none
  uint16_t node_port = 0;               // also at every port address of the VIP's family; 0 = not
  std::string source;  // "config", "mesh"
  std::string hostname;  // mesh services: the FQDN (HBONE authorities name it); "" for static
  // Its Istio metric labels; empty for static services (the builder then uses the name).
  IstioServiceLabels istio;
};

// The static [[service]] tables of a config, in order.
std::vector<ServiceSpec> services_from_config(const Config& cfg);

// The VIPs of a snapshot built from `services`, and those that can take new flows: a service
// with an endpoint of weight > 0 that is healthy (its health check passes), a listener with a
// route to a service with a lookup table. [bgp] announces the usable ones only, so a VIP whose
// backends are all drained, removed or down is withdrawn.
struct VipSets {
  std::vector<IpAddr> all;
  std::vector<IpAddr> usable;
};
VipSets vip_sets(const std::vector<ServiceSpec>& services, const dp::Snapshot& snapshot);

}  // namespace meshgate::ctl
