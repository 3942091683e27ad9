// Mesh-model authorization policies → the dataplane's policy structs (dataplane/policy).
// Control thread.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "control/mesh/mesh_model.h"
#include "dataplane/policy/policy.h"

namespace meshgate::ctl::mesh {

dp::policy::Policy to_dataplane_policy(const Policy& p);

// The policies of a model (in any order) compiled for a snapshot, ordered by key.
std::shared_ptr<const dp::policy::PolicySet> compile_policies(const std::vector<Policy>& policies);

// The policies that apply to a destination workload (docs/HBONE.md "L4 authorization"): global (root namespace)
// ones, its namespace's, and the workload-selector ones it lists. Ordered by key.
std::vector<dp::policy::Policy> policies_for(const MeshModel& model, const Workload& dst);

}  // namespace meshgate::ctl::mesh
