// Where an HBONE CONNECT goes, from the snapshot (docs/HBONE.md "Server role"): :authority VIP:port → the service's Maglev pick; pod ip:port → that
// workload; fqdn:port → the mesh service of that hostname and port, then its Maglev pick.
// And which authorization policies apply to the chosen destination (its namespace's, the
// global ones, its workload-selector ones). Read-only on the snapshot; no allocation except
// the policy list. Any thread holding the snapshot.
#pragma once

#include <hs/hs_runtime.h>

#include <cstdint>
#include <vector>

#include "dataplane/hbone/authority.h"
#include "dataplane/hbone/connection.h"
#include "dataplane/policy/policy.h"
#include "dataplane/snapshot/snapshot.h"

namespace meshgate::dp::hbone {

struct Destination {
  // kServed: connect to ip:port. kNotServed (400): the authority names nothing this gateway
  // serves. kNoEndpoint (503): a service or workload it serves, but nothing to connect to now
  // (no service on that port, no eligible endpoint).
  Resolution::Kind kind = Resolution::Kind::kNotServed;
  IpAddr ip;
  uint16_t port = 0;                     // host order
  const SnapService* service = nullptr;  // the service named (VIP or FQDN); null for a pod
  int32_t backend = -1;                  // index into Snapshot::backends of the workload
  Resolution resolution() const;         // for the engine's hooks (cookie = backend + 1)
};

// `flow_hash` picks the endpoint of a service (Maglev); the caller derives it from the tunnel
// (e.g. the peer's address and port and the stream id) so a retry may land elsewhere. A name no
// mesh service has exactly is matched against the wildcard hostnames (Snapshot::host_patterns,
// "*.example.com" as ServiceEntry hosts are written) with `scratch`, the calling worker's
// (Snapshot::name_scratch).
Destination resolve(const Snapshot& snap, const Authority& authority, uint32_t flow_hash,
                    hs_scratch_t* scratch = nullptr);

// The policies that apply to backend `backend` of `snap` (Istio: global, the workload's
// namespace — taken from its SPIFFE id — and its selector policies), in key order. Empty when
// the snapshot has no policies.
std::vector<const policy::Policy*> policies_for(const Snapshot& snap, int32_t backend);

}  // namespace meshgate::dp::hbone
