// Mesh-model authorization policies → the dataplane's policy structs (dataplane/policy).
// Control thread.
#pragma once

#include <string_view>
#include <vector>

#include "control/mesh/mesh_model.h"
#include "dataplane/policy/policy.h"

namespace meshgate::ctl::mesh {

dp::policy::Policy to_dataplane_policy(const Policy& p);

// The policies that apply to a destination workload (specs/hbone.md): global (root namespace)
// ones, its namespace's, and the workload-selector ones it lists. Ordered by key.
std::vector<dp::policy::Policy> policies_for(const MeshModel& model, const Workload& dst);

}  // namespace meshgate::ctl::mesh
