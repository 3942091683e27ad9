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
  uint32_t table_size = 0;                 // [mesh] table_size; 0 = mesh_table_size()'s default
};

// Smallest automatic Maglev table of a mesh service: a prime, 100 slots for each of up to 10
// endpoints (Maglev's < 1% imbalance).
inline constexpr uint32_t kMeshMinTableSize = 1009;

// The Maglev table size of a mesh service with `endpoints` endpoints: `configured` ([mesh]
// table_size) when it is set and not smaller than the endpoint count (every endpoint needs a
// slot); otherwise the smallest prime >= 1009 x 2^k that gives each endpoint at least 100 slots:
// 1009 up to 10 endpoints, 2027 up to 20, 4049 up to 40, and so on.
//
// Why not the static services' 65537: 10,000 mesh services would need 2.6 GB of tables per
// snapshot. Why not simply the next prime >= 100 x endpoints: the size would change whenever a
// deployment scales, and a new size reshuffles nearly every slot, so one added pod would move
// almost all new-flow choices (and the choices of flows a full flow table forwards statelessly)
// instead of about 1/N of them, which is what Maglev promises and users expect. Doubling bands
// keep the size, and so that promise, while the endpoint count stays within a band, at 100..200
// slots per endpoint. The size depends only on the endpoint count, so gateways that see the same
// endpoints build the same tables.
uint32_t mesh_table_size(size_t endpoints, uint32_t configured);

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
