// The mesh file ([mesh] source = "file"; format in docs/MESH.md): [[mesh_service]],
// [[workload]] and [[policy]] tables mirroring the Istio workload API, parsed with toml++ into a
// MeshModel. Errors carry file:line:column and the key, like the main config. Control thread
// (and the file provider's thread, and tools/meshserver).
#pragma once

#include <string>
#include <string_view>

#include "control/common/result.h"
#include "control/config/config.h"
#include "control/mesh/mesh_model.h"

namespace meshgate::ctl::mesh {

struct MeshFileOptions {
  // tools/meshserver serves what a file says, including resources a client must reject:
  // accept tunnel = "legacy_istio_mtls" (clients NACK it, as ztunnel does).
  bool allow_legacy_tunnel = false;
};

Result<MeshModel, ConfigErrors> parse_mesh_file(std::string_view text, const std::string& name,
                                                const MeshFileOptions& opt = {});
Result<MeshModel, ConfigErrors> load_mesh_file(const std::string& path,
                                               const MeshFileOptions& opt = {});

}  // namespace meshgate::ctl::mesh
