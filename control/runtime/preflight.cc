#include "control/runtime/preflight.h"

#include <optional>
#include <string>

#include "control/common/file_read.h"
#include "control/mesh/mesh_file.h"

namespace meshgate::ctl {

void check_referenced_files(const Config& cfg, ConfigErrors* errs) {
  // The file at `key`, or nullopt with the error recorded at the key. Relative paths are
  // relative to the working directory (config/README.md).
  auto read = [&](const std::string& key, const std::string& path,
                  uint64_t max_bytes) -> std::optional<std::string> {
    if (path.empty()) return std::nullopt;
    auto r = read_regular_file(path, max_bytes);
    if (r) return std::move(r.value());
    errs->errors.push_back({position_of(cfg, key), key, "\"" + path + "\" " + r.error().message});
    return std::nullopt;
  };
  if (cfg.mesh.source == MeshSource::kFile) {
    // The mesh file is checked like the config: every error with its file:line:column.
    if (auto text = read("mesh.path", cfg.mesh.path, kMaxMeshFileBytes)) {
      auto m = mesh::parse_mesh_file(*text, cfg.mesh.path);
      if (!m) {
        for (const auto& e : m.error().errors) errs->errors.push_back(e);
      }
    }
  }
  if (cfg.mesh.source == MeshSource::kXds) {
    read("mesh.ca_file", cfg.mesh.ca_file, kMaxPemFileBytes);
    read("mesh.token_file", cfg.mesh.token_file, kMaxPemFileBytes);
  }
  read("hbone.cert_chain", cfg.hbone.cert_chain, kMaxPemFileBytes);
  read("hbone.private_key", cfg.hbone.private_key, kMaxPemFileBytes);
  read("hbone.trust_bundle", cfg.hbone.trust_bundle, kMaxPemFileBytes);
  if (!cfg.hbone.ca_address.empty()) {
    read("hbone.ca_file", cfg.hbone.ca_file, kMaxPemFileBytes);
    read("hbone.token_file", cfg.hbone.token_file, kMaxPemFileBytes);
  }
}

}  // namespace meshgate::ctl
