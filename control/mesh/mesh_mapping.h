// Mesh model -> ServiceSpecs for the snapshot builder: which VIP:port a mesh service answers on
// and which workloads serve it, with ztunnel's endpoint rules (health, locality modes, target
// ports, capacity). A pure function, tested as tables. Control thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/config/config.h"
#include "control/mesh/mesh_model.h"
#include "control/snapshot/model.h"

namespace meshgate::ctl::mesh {

// Who the gateway is, as a load-balancing source: the counterpart of ztunnel's source workload.
struct MappingOptions {
  Locality locality;       // [gateway] locality
  std::string network;     // [mesh] network: VIPs and endpoints on other networks are skipped
  std::string cluster_id;  // [mesh] cluster_id, for the CLUSTER scope
  std::string node;        // for the NODE scope; "" never matches (a gateway is not on a node)
  ForwardMode mode = ForwardMode::kDnat;  // [mesh] mode
};

// What the mapping left out, counted (and logged by the caller).
struct MappingStats {
  size_t services = 0;              // mesh services mapped to at least one spec
  size_t specs = 0;
  size_t endpoints = 0;
  size_t hbone_endpoints = 0;
  size_t skipped_headless = 0;      // services without a VIP on our network
  size_t skipped_passthrough = 0;   // PASSTHROUGH services (no endpoint selection)
  size_t skipped_cidr_vips = 0;     // CIDR VIPs (NetworkAddress.length below host length)
  size_t skipped_unhealthy = 0;     // endpoints excluded by the health policy
  size_t skipped_locality = 0;      // endpoints excluded by STRICT / FAILOVER
  size_t skipped_no_address = 0;    // workloads without an address of the VIP's family
  size_t skipped_other_network = 0; // workloads on another network (need a network gateway)
  size_t skipped_no_target_port = 0;
  size_t duplicate_vips = 0;        // VIP:port taken by an earlier spec (static or mesh)
  size_t policies = 0;
};

struct MappingResult {
  std::vector<ServiceSpec> specs;
  MappingStats stats;
  std::vector<std::string> notes;  // one line per dropped spec (duplicates), for the log
};

// One ServiceSpec per VIP:port (TCP: the workload API carries no L4 protocol; ztunnel is TCP
// only). Names: "namespace/hostname:port", plus "@vip" when the service has several VIPs.
// `taken`: specs already present (static services); a mesh spec on the same VIP:port:protocol
// is dropped and noted. Specs come out by service key, VIP and port order, endpoints by uid: the
// same model always gives the same specs.
MappingResult map_mesh(const MeshModel& model, const MappingOptions& opt,
                       const std::vector<ServiceSpec>& taken = {});

// ztunnel's locality rank of a workload for a service: the length of the matching prefix of
// routing_preference (+ len-1 when NETWORK is first and matches). -1 when STRICT rejects it.
int locality_rank(const LoadBalancing& lb, const Workload& w, const MappingOptions& opt);

}  // namespace meshgate::ctl::mesh
