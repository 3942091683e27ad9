// meshgate: the gateway daemon and the pcap replay (README.md "Running it").
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "control/common/build_info.h"
#include "control/common/log.h"
#include "control/config/config.h"
#include "control/runtime/host_checks.h"
#include "control/runtime/preflight.h"
#include "control/runtime/runtime.h"

using namespace meshgate;
using namespace meshgate::ctl;

namespace {

// `key`, or a key holding it, already has an error: a later check of its value would only
// repeat the first mistake.
bool reported(const ConfigErrors& errs, const std::string& key) {
  return std::any_of(errs.errors.begin(), errs.errors.end(), [&](const ConfigError& e) {
    if (e.key.empty() || key.compare(0, e.key.size(), e.key) != 0) return false;
    return key.size() == e.key.size() || key[e.key.size()] == '.' || key[e.key.size()] == '[';
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after a lone "--" goes to the EAL unchanged, after meshgate's defaults
  // (control/runtime/eal.h plan_eal_on).
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
  std::string config_path, log_level = "info", log_format = "text";
  RunOptions opt;
  bool check = false;
  // Handled while parsing, before --config is required.
  app.set_version_flag("--version", [] { return version_text("meshgate", linked_build_info()); },
                       "print the version, git commit and DPDK, OpenSSL, Hyperscan versions");
  app.add_option("--config", config_path, "gateway configuration (TOML)")->required();
  app.add_option("--pcap-in", opt.pcap_in, "replay: read packets from this pcap (first port)");
  app.add_option("--pcap-out", opt.pcap_out, "replay: write transmitted packets to this pcap");
  app.add_option("--stats-json", opt.stats_json, "write all counters as JSON at exit");
  app.add_flag("--check", check, "validate the configuration, print 'config ok' or the errors");
  bool offline = false;
  app.add_flag("--offline", offline,
               "with --check: check the file alone, not the devices, files, host services and memory "
               "it names (a config written for another host)");
  app.add_option("--workers", opt.workers, "worker lcores (overrides [gateway] workers)")
      ->check(CLI::Range(1u, kMaxWorkers));
  app.add_option("--log-level", log_level, "error | warn | info | debug");
  app.add_option("--log-format", log_format, "text (key=value) | json (an object per line)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--progress", opt.progress,
               "replay: progress lines on stderr also when it is not a terminal");
  app.add_flag("--promiscuous", opt.promiscuous,
               "replay: the replayed port takes frames to any MAC (a capture made elsewhere)");
  // No footer line starts with blanks and "-": the bash completion reads options from those.
  app.footer(
      "EAL arguments: meshgate --config FILE [OPTIONS] -- EAL_ARGS...\n"
      "DPDK EAL arguments go to rte_eal_init unchanged, after meshgate's defaults: --lcores\n"
      "for the workers, a unique --file-prefix, --in-memory with enough free hugepages or\n"
      "else --no-huge --no-shconf --no-telemetry -m <estimate>, -a for each PCI port or else\n"
      "--no-pci, and --log-level from --log-level. A default is left out only when\n"
      "EAL_ARGS has the same option or one that conflicts with it: -l, -c or --lcores the\n"
      "core list; --no-huge or --socket-mem the choice of hugepages; -m, --file-prefix,\n"
      "--in-memory, --no-shconf their own; --telemetry --no-telemetry; -a with a PCI\n"
      "address --no-pci; -b or --no-pci the ports' -a; a global --log-level meshgate's.\n"
      "Anything else (--vdev, -b, --main-lcore) replaces nothing: PCI devices the config\n"
      "does not name are never probed unless EAL_ARGS allows them.\n"
      "Example: meshgate --config gw.toml -- -l 2-4 --main-lcore 2 --socket-mem 4096\n"
      "The log line event=eal_ready names the defaults replaced and the arguments used.");
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
  LogFormat format = LogFormat::kText;
  parse_log_format(log_format, &format);  // checked by CLI11 above
  set_log_format(format);
  opt.log_level = level;
  opt.eal_args = std::move(eal_args);
  for (const auto& [flag, given] : {std::pair{"--pcap-out", !opt.pcap_out.empty()},
                                    std::pair{"--progress", opt.progress},
                                    std::pair{"--promiscuous", opt.promiscuous}}) {
    if (given && opt.pcap_in.empty()) {
      std::fprintf(stderr, "meshgate: %s needs --pcap-in\n", flag);
      return kExitUsage;
    }
  }
  if (offline && !check) {
    std::fprintf(stderr, "meshgate: --offline needs --check\n");
    return kExitUsage;
  }
  // Output files are checked before anything starts: a replay must not run to its end and
  // then find it cannot write its result.
  for (const auto& [flag, path] : {std::pair{"--pcap-out", &opt.pcap_out},
                                   std::pair{"--stats-json", &opt.stats_json}}) {
    if (path->empty()) continue;
    if (const std::string why = check_output_file(*path); !why.empty()) {
      std::fprintf(stderr, "meshgate: %s: %s\n", flag, why.c_str());
      return kExitUsage;
    }
  }

  // The input as plain text like every usage error, before the EAL or the logger say it their
  // way.
  if (!opt.pcap_in.empty()) {
    if (const std::string why = check_pcap_input(opt.pcap_in); !why.empty()) {
      std::fprintf(stderr, "meshgate: --pcap-in %s: %s\n", opt.pcap_in.c_str(), why.c_str());
      return kExitUsage;
    }
  }
  // Every independent mistake in one pass: the files and devices the config names are checked
  // even when some other key is wrong (each check skips the keys already reported). --offline:
  // the file alone, not what it names on this host.
  ConfigCheck checked = check_config_file(config_path);
  ConfigErrors errs = std::move(checked.errors);
  if (checked.config && !offline) {
    ConfigErrors found = preflight(*checked.config, !opt.pcap_in.empty(), /*devices=*/true);
    for (auto& e : found.errors) {
      if (!reported(errs, e.key)) errs.errors.push_back(std::move(e));
    }
    sort_by_position(errs.errors);
  }
  if (!errs.errors.empty()) {
    std::fputs(errs.str().c_str(), stderr);
    return kExitUsage;
  }
  const Config* cfg = &*checked.config;
  // Valid but unworkable as written: said, never refused (a reload may add what is missing).
  for (ConfigError w : config_warnings(*cfg)) {
    w.message = "warning: " + w.message;
    if (check) {
      std::fprintf(stderr, "%s\n", w.str().c_str());
    } else {
      log(LogLevel::kWarn, "config_warning", "warning=\"%s\"", w.str().c_str());
    }
  }
  // Not an error (a node may put the admin API behind its own firewall), but never silent.
  if (admin_listens_on_all_addresses(*cfg) && opt.pcap_in.empty()) {
    log(LogLevel::kWarn, "admin_unauthenticated",
        "listen=\"%s\" warning=\"the admin API has no authentication and answers on every "
        "address; bind it to 127.0.0.1 or ::1\"", cfg->admin.listen.c_str());
  }
  if (check) {
    if (offline) {
      std::puts("config ok (offline: the devices, files, host services and memory it needs were "
                "not checked)");
      return kExitOk;
    }
    // The start's own memory check, on this host: stdout stays "config ok" alone for scripts.
    const MemoryNeed need = start_memory_need(*cfg, opt);
    check_start_memory(*cfg, need, &errs);
    if (!errs.errors.empty()) {
      std::fputs(errs.str().c_str(), stderr);
      return kExitUsage;
    }
    std::fprintf(stderr, "memory: %s\n", memory_need_text(need).c_str());
    std::puts("config ok");
    return kExitOk;
  }
  install_signal_handlers();
  log(LogLevel::kInfo, "config_loaded", "path=\"%s\" ports=%zu services=%zu", config_path.c_str(),
      cfg->ports.size(), cfg->services.size());
  return run_gateway(*cfg, opt);
}
