// meshgate: the gateway daemon and the pcap replay (INTERFACE.md "Commands").
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "control/common/log.h"
#include "control/config/config.h"
#include "control/mesh/mesh_file.h"
#include "control/runtime/runtime.h"

using namespace meshgate;
using namespace meshgate::ctl;

namespace {

// Files the config points at must exist before anything starts.
void check_referenced_files(const Config& cfg, ConfigErrors* errs) {
  auto need = [&](const std::string& path, const SourcePos& pos, const char* key) {
    if (path.empty()) return;
    // Relative paths are relative to the working directory (config/README.md).
    const std::filesystem::path p(path);
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) {
      errs->errors.push_back({pos, key, "file not found: \"" + p.string() + "\""});
    }
  };
  if (cfg.mesh.source == MeshSource::kFile) need(cfg.mesh.path, cfg.mesh.pos, "mesh.path");
  if (cfg.mesh.source == MeshSource::kXds) {
    need(cfg.mesh.ca_file, cfg.mesh.pos, "mesh.ca_file");
    need(cfg.mesh.token_file, cfg.mesh.pos, "mesh.token_file");
  }
  // The mesh file is checked like the config: every error with its file:line:column.
  if (cfg.mesh.source == MeshSource::kFile && std::filesystem::exists(cfg.mesh.path)) {
    auto m = mesh::load_mesh_file(cfg.mesh.path);
    if (!m) {
      for (const auto& e : m.error().errors) errs->errors.push_back(e);
    }
  }
  need(cfg.hbone.cert_chain, cfg.hbone.pos, "hbone.cert_chain");
  need(cfg.hbone.private_key, cfg.hbone.pos, "hbone.private_key");
  need(cfg.hbone.trust_bundle, cfg.hbone.pos, "hbone.trust_bundle");
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after a lone "--" goes to the EAL unchanged.
  std::vector<std::string> eal_args;
  int own_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      own_argc = i;
      for (int j = i + 1; j < argc; ++j) eal_args.emplace_back(argv[j]);
      break;
    }
  }

  CLI::App app{"meshgate: DPDK fast-path gateway for Kubernetes / Istio ambient meshes"};
  std::string config_path, log_level = "info";
  RunOptions opt;
  bool check = false;
  app.add_option("--config", config_path, "gateway configuration (TOML)")->required();
  app.add_option("--pcap-in", opt.pcap_in, "replay: read packets from this pcap (first port)");
  app.add_option("--pcap-out", opt.pcap_out, "replay: write transmitted packets to this pcap");
  app.add_option("--stats-json", opt.stats_json, "write all counters as JSON at exit");
  app.add_flag("--check", check, "validate the configuration, print 'config ok' or the errors");
  app.add_option("--workers", opt.workers, "worker lcores (overrides [gateway] workers)")
      ->check(CLI::Range(1u, kMaxWorkers));
  app.add_option("--log-level", log_level, "error | warn | info | debug");
  try {
    app.parse(own_argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  LogLevel level;
  if (!parse_log_level(log_level, &level)) {
    std::fprintf(stderr, "meshgate: --log-level: expected error, warn, info or debug\n");
    return kExitUsage;
  }
  set_log_level(level);
  opt.log_level = level;
  opt.eal_args = std::move(eal_args);
  if (!opt.pcap_out.empty() && opt.pcap_in.empty()) {
    std::fprintf(stderr, "meshgate: --pcap-out needs --pcap-in\n");
    return kExitUsage;
  }

  auto cfg = load_config(config_path);
  if (!cfg) {
    std::fputs(cfg.error().str().c_str(), stderr);
    return kExitUsage;
  }
  ConfigErrors errs;
  check_referenced_files(*cfg, &errs);
  if (!errs.errors.empty()) {
    std::fputs(errs.str().c_str(), stderr);
    return kExitUsage;
  }
  if (check) {
    std::puts("config ok");
    return kExitOk;
  }
  log(LogLevel::kInfo, "config_loaded", "path=\"%s\" ports=%zu services=%zu", config_path.c_str(),
      cfg->ports.size(), cfg->services.size());
  return run_gateway(*cfg, opt);
}
