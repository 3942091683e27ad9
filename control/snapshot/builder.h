// Builds the immutable dataplane Snapshot: services from ServiceSpecs (static and mesh), and
// routes, neighbors and local addresses from the configuration. Control thread, after EAL init
// (LPM tables live in DPDK memory).
#pragma once

#include <string>
#include <vector>

#include "control/common/result.h"
#include "control/config/config.h"
#include "control/snapshot/addr_registry.h"
#include "control/snapshot/model.h"
#include "control/snapshot/stat_registry.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/worker/port.h"

namespace meshgate::ctl {

// "ip:port" with IPv6 in brackets, as used in stats and logs.
std::string endpoint_str(const IpAddr& a, uint16_t port);

// Ids that outlive snapshots: backend counter slots and the addresses flows refer to.
struct Registries {
  StatRegistry stats;
  AddrRegistry addrs;
};

Result<dp::Snapshot*> build_snapshot(const Config& cfg, const std::vector<ServiceSpec>& services,
                                     const std::vector<dp::PortRuntime>& ports, Registries& reg,
                                     uint64_t version);

}  // namespace meshgate::ctl
