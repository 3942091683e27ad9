#include "control/runtime/preflight.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/common/file_read.h"
#include "control/mesh/mesh_file.h"
#include "control/runtime/devices.h"

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
  // The access log is opened once the gateway runs: a directory that is not there would end
  // the start (exit 1, and under systemd a restart loop) after --check said ok.
  if (const std::string& log = cfg.access_log.path; !log.empty() && log != "-") {
    if (std::string why = check_output_file(log); !why.empty()) {
      errs->errors.push_back(
          {position_of(cfg, "access_log.path"), "access_log.path", "access log: " + why});
    }
  }
}

void check_devices(const Config& cfg, bool replay, ConfigErrors* errs) {
  const std::vector<std::string> pmds = net_pmd_names(default_pmd_dir());
  for (size_t i = replay ? 1 : 0; i < cfg.ports.size(); ++i) {
    const std::string key = "port[" + std::to_string(i) + "].device";
    if (std::string why = check_device(cfg.ports[i].device, pmds); !why.empty()) {
      errs->errors.push_back({position_of(cfg, key), key, std::move(why)});
    }
  }
}

void check_host_services(const Config& cfg, ConfigErrors* errs) {
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    if (cfg.ports[i].host_interface.empty() || access("/dev/net/tun", R_OK | W_OK) == 0) continue;
    const std::string key = "port[" + std::to_string(i) + "].host_interface";
    errs->errors.push_back({position_of(cfg, key), key,
                            std::string("a host interface is a TAP device: /dev/net/tun: ") +
                                std::strerror(errno) + " (the kernel needs TUN/TAP; run as root)"});
  }
  if (cfg.bgp.enabled && access(cfg.bgp.daemon.c_str(), X_OK) != 0) {
    errs->errors.push_back({position_of(cfg, "bgp.daemon"), "bgp.daemon",
                            "\"" + cfg.bgp.daemon + "\" is not an executable: " +
                                std::strerror(errno) + " (Debian's BIRD 2 is the package bird2)"});
  }
}

ConfigErrors preflight(const Config& cfg, bool replay, bool devices) {
  ConfigErrors errs;
  check_referenced_files(cfg, &errs);
  if (devices) check_devices(cfg, replay, &errs);
  if (!replay) check_host_services(cfg, &errs);
  sort_by_position(errs.errors);
  return errs;
}

std::string table_key(const Config& cfg, size_t i) {
  const std::string k = "service[" + std::to_string(i) + "]";
  return cfg.services[i].table_size ? k + ".table_size" : k;
}

void check_start_memory(const Config& cfg, const MemoryNeed& need, ConfigErrors* errs) {
  if (need.fits()) return;
  std::string key = "conntrack.max_flows";
  if (need.tables_mb * 2 >= need.needed_mb && !cfg.services.empty()) {
    size_t largest = 0;
    for (size_t i = 1; i < cfg.services.size(); ++i) {
      if (maglev_table_bytes(cfg.services[i]) > maglev_table_bytes(cfg.services[largest])) {
        largest = i;
      }
    }
    key = table_key(cfg, largest);
  }
  errs->errors.push_back({position_of(cfg, key), key,
                          "memory: the config " + memory_need_text(need) +
                              ": a start would be refused; lower conntrack.max_flows, "
                              "proxy.memory_mb, table_size or the service count"});
}

std::string check_output_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const auto st = fs::status(p, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) return "\"" + path + "\" is a directory";
    if (access(path.c_str(), W_OK) != 0) {
      return "\"" + path + "\" is not writable: " + std::strerror(errno);
    }
    return "";
  }
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) return "directory \"" + dir.string() + "\" does not exist";
  // access() answers for root too when the file system is read-only (EROFS).
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return "cannot create \"" + path + "\": " + std::strerror(errno);
  }
  return "";
}

bool admin_listens_on_all_addresses(const Config& cfg) {
  const std::string& l = cfg.admin.listen;
  const auto colon = l.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = l.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const auto a = IpAddr::parse(host);
  return a && a->is_zero();
}

}  // namespace meshgate::ctl
