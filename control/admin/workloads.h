// GET /workloads: the mesh's workloads as the running gateway knows them, one entry per
// workload (istioctl ztunnel-config workloads). Any thread: a pure function of the model.
#pragma once

#include <nlohmann/json.hpp>

#include "control/mesh/mesh_model.h"

namespace meshgate::ctl {

// {"workloads": [...]} sorted by namespace then name; each: uid, name, namespace, addresses,
// node, cluster_id, network, protocol ("HBONE" when reached over HBONE, else "TCP"), identity,
// waypoint (null: meshgate sends no traffic through waypoints), healthy, services ("namespace/
// hostname" keys). A null model (no [mesh] source, or before its first model) lists none.
nlohmann::json workloads_json(const mesh::MeshModel* model);

}  // namespace meshgate::ctl
