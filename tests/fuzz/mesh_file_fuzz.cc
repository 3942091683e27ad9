// libFuzzer target for the mesh file (control/mesh/mesh_file.cc): TOML text → MeshModel, as
// the file provider reads it on every change. A file that parses is a model whose every
// workload, service and policy has the key it is filed under, and that tools/meshserver can
// serve: each resource, encoded as the workload API message and decoded as the xDS client
// does, comes back equal. One that does not parse says why, at a position in the file.
#include <cstdint>
#include <string>
#include <string_view>

#include "control/mesh/mesh_file.h"
#include "control/mesh/mesh_proto.h"
#include "tests/fuzz/mesh_fuzz_support.h"

using namespace meshgate::ctl;
using namespace meshgate::ctl::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = parse_mesh_file(text, "fuzz-mesh.toml");
  if (!m) {
    if (m.error().errors.empty()) __builtin_trap();
    if (m.error().str().rfind("fuzz-mesh.toml:", 0) != 0) __builtin_trap();
    return 0;
  }
  for (const auto& [key, s] : m->services) {
    if (key != s.key()) __builtin_trap();
    if (!round_trips(s, service_to_proto, service_from_proto)) __builtin_trap();
  }
  for (const auto& [key, p] : m->policies) {
    if (key != p.key()) __builtin_trap();
    if (!round_trips(p, policy_to_proto, policy_from_proto)) __builtin_trap();
  }
  for (const auto& [uid, w] : m->workloads) {
    if (uid != w.uid) __builtin_trap();
    if (!round_trips(w, workload_to_proto, workload_from_proto)) __builtin_trap();
  }
  return 0;
}
