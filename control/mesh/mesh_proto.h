// Istio workload API / istio.security messages <-> MeshModel values. Decoding validates what
// the mapping relies on (addresses, ports, keys) and rejects what ztunnel rejects; the reason
// becomes the "name: reason" part of a NACK. Any thread (pure functions).
#pragma once

#include <string>

#include "control/common/result.h"
#include "control/mesh/mesh_model.h"
#include "workloadapi/security/authorization.pb.h"
#include "workloadapi/workload.pb.h"

namespace meshgate::ctl::mesh {

inline constexpr const char* kAddressTypeUrl = "type.googleapis.com/istio.workload.Address";
inline constexpr const char* kAuthorizationTypeUrl =
    "type.googleapis.com/istio.security.Authorization";

Result<Workload> workload_from_proto(const istio::workload::Workload& p);
Result<Service> service_from_proto(const istio::workload::Service& p);
Result<Policy> policy_from_proto(const istio::security::Authorization& p);

istio::workload::Workload workload_to_proto(const Workload& w);
istio::workload::Service service_to_proto(const Service& s);
istio::security::Authorization policy_to_proto(const Policy& p);

}  // namespace meshgate::ctl::mesh
