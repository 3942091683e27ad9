// meshgate-ctl: the admin API from a shell (README.md "Admin API and meshgate-ctl").
//   meshgate-ctl [--admin HOST:PORT] [-o table|json] services | flows [--limit N] [--service NAME]
//                [--backend IP[:PORT]] [--state STATE] [--client IP[/PREFIX]] | stats | config |
//                bgp | flow-rules | workloads | certificates | policies | log-level [LEVEL] |
//                drain | reload
// Exit codes: 0 ok, 1 admin API unreachable, HTTP error or a refused reload, 2 usage.
#include <CLI/CLI.hpp>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/meshgate-ctl/render.h"
#include "control/common/build_info.h"

using nlohmann::json;
using namespace meshgate::ctl_tool;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr const char* kDefaultAdmin = "127.0.0.1:15000";  // [admin] listen default
constexpr uint32_t kMaxLimit = 100000;                     // GET /flows maximum
// GET /flows waits up to 1 s for the workers; the rest is the control loop's tick.
constexpr time_t kReadTimeoutS = 10;
// POST /reload answers within 10 s: the outcome, or 202 while the reload goes on (a config of
// thousands of regexes compiles for minutes), whose outcome GET /reload then tells.
constexpr time_t kReloadPostTimeoutS = 15;
constexpr int kReloadPollMs = 200;
constexpr unsigned kDefaultReloadWaitS = 600;
constexpr time_t kConnectTimeoutS = 2;

// Every subcommand, for the "did you mean" of a misspelt one.
const std::vector<std::string> kCommands = {
    "services", "flows", "stats", "config", "bgp", "flow-rules", "workloads", "certificates",
    "policies", "log-level", "drain", "reload"};

struct Admin {
  std::string text;  // as given, for messages
  std::string host;
  int port = 0;
};

bool parse_admin(const std::string& s, Admin* a) {
  a->text = s;
  std::string port;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    a->host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    const auto colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    a->host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (a->host.empty() || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  a->port = std::stoi(port);
  return a->port >= 1 && a->port <= 65535;
}

// Why a request got no answer, in the operator's terms rather than httplib's error names.
void report_failure(const Admin& a, const std::string& method, const std::string& path,
                    httplib::Error e, time_t timeout_s) {
  switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
      std::fprintf(stderr,
                   "meshgate-ctl: admin API not reachable at %s (is meshgate running? its [admin] "
                   "listen address goes in --admin HOST:PORT or $MESHGATE_ADMIN)\n",
                   a.text.c_str());
      return;
    case httplib::Error::Read:
      std::fprintf(stderr,
                   "meshgate-ctl: the admin API at %s did not answer %s %s (closed the "
                   "connection, or no answer within %lld s)\n",
                   a.text.c_str(), method.c_str(), path.c_str(), static_cast<long long>(timeout_s));
      return;
    default:
      std::fprintf(stderr, "meshgate-ctl: %s %s at %s failed: %s\n", method.c_str(), path.c_str(),
                   a.text.c_str(), httplib::to_string(e).c_str());
  }
}

// One request; prints why it failed and returns nullopt.
std::optional<std::string> request(const Admin& a, const std::string& method,
                                   const std::string& path) {
  httplib::Client cli(a.host, a.port);
  cli.set_connection_timeout(kConnectTimeoutS, 0);
  cli.set_read_timeout(kReadTimeoutS, 0);
  httplib::Result res = method == "POST" ? cli.Post(path.c_str()) : cli.Get(path.c_str());
  if (!res) {
    report_failure(a, method, path, res.error(), kReadTimeoutS);
    return std::nullopt;
  }
  if (res->status != 200) {
    std::string body = res->body;
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
    std::fprintf(stderr, "meshgate-ctl: %s %s at %s: HTTP %d%s%s\n", method.c_str(), path.c_str(),
                 a.text.c_str(), res->status, body.empty() ? "" : ": ", body.c_str());
    return std::nullopt;
  }
  return res->body;
}

// GET /reload until reload `id` has finished (its outcome is the state's "last"), for at most
// `wait_s` seconds. nullopt, said why, when it did not or cannot be told.
std::optional<json> wait_for_reload(const Admin& a, uint64_t id, unsigned wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
  for (;;) {
    httplib::Client cli(a.host, a.port);
    cli.set_connection_timeout(kConnectTimeoutS, 0);
    cli.set_read_timeout(kReadTimeoutS, 0);
    // A failed poll (the gateway busy, restarting) is tried again until the deadline.
    if (httplib::Result res = cli.Get("/reload"); res && res->status == 200) {
      json st = json::parse(res->body, nullptr, false);
      const json* last = st.is_object() && st.contains("last") ? &st["last"] : nullptr;
      if (last && last->is_object() && last->value("id", uint64_t(0)) == id) return *last;
      if (last && last->is_object() && last->value("id", uint64_t(0)) > id) {
        std::fprintf(stderr,
                     "meshgate-ctl: reload %lu finished, but a later one did too before its "
                     "outcome was read; see the meshgate log (event=config_reload id=%lu)\n",
                     (unsigned long)id, (unsigned long)id);
        return std::nullopt;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr,
                   "meshgate-ctl: reload %lu still in progress after %u s; GET /reload at %s "
                   "tells how it ends\n",
                   (unsigned long)id, wait_s, a.text.c_str());
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kReloadPollMs));
  }
}

// POST /reload, and while it is in progress (202) GET /reload until its outcome: prints the
// outcome (stdout when applied, stderr when refused; with -o json the answer on stdout). True
// only when the config was applied.
bool reload(const Admin& a, bool as_json, unsigned wait_s) {
  httplib::Client cli(a.host, a.port);
  cli.set_connection_timeout(kConnectTimeoutS, 0);
  cli.set_read_timeout(kReloadPostTimeoutS, 0);
  httplib::Result res = cli.Post("/reload");
  if (!res) {
    report_failure(a, "POST", "/reload", res.error(), kReloadPostTimeoutS);
    return false;
  }
  // 200 applied, 400 invalid, 409 restart required or another reload in progress: each with
  // the JSON outcome. 202: started, not finished yet.
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("result")) {
    std::fprintf(stderr, "meshgate-ctl: POST /reload at %s: HTTP %d: %s", a.text.c_str(),
                 res->status, res->body.c_str());
    return false;
  }
  if (res->status == 202) {
    auto outcome = wait_for_reload(a, j.value("id", uint64_t(0)), wait_s);
    if (!outcome) return false;
    j = std::move(*outcome);
  }
  const bool ok = j.value("result", "") == "ok";
  const std::string text = as_json ? j.dump(2) + "\n" : render_reload(j);
  std::fputs(text.c_str(), ok || as_json ? stdout : stderr);
  return ok;
}

std::optional<json> get_json(const Admin& a, const std::string& path) {
  auto body = request(a, "GET", path);
  if (!body) return std::nullopt;
  json j = json::parse(*body, nullptr, false);
  if (j.is_discarded()) {
    std::fprintf(stderr, "meshgate-ctl: GET %s at %s: the answer is not JSON\n", path.c_str(),
                 a.text.c_str());
    return std::nullopt;
  }
  return j;
}

void print(const std::string& text) { std::fputs(text.c_str(), stdout); }
void print_json(const json& j) { print(j.dump(2) + "\n"); }

// The first word that is not an option (or an option's value): the command as typed.
std::optional<std::string> command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return std::nullopt;
    if (arg == "--admin" || arg == "-o" || arg == "--output") {
      ++i;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') continue;
    return arg;
  }
  return std::nullopt;
}

// GET /flows with the limit and filters as query parameters.
std::string flows_path(uint32_t limit, const FlowsFilterArgs& f) {
  std::string path = "/flows?limit=" + std::to_string(limit);
  auto add = [&path](const char* key, const std::optional<std::string>& v) {
    if (v) path += std::string("&") + key + "=" + httplib::detail::encode_query_param(*v);
  };
  add("service", f.service);
  add("backend", f.backend);
  add("state", f.state);
  add("client", f.client);
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  // A misspelt command gets a suggestion before CLI11's generic "not expected" error.
  if (const auto word = command_word(argc, argv);
      word && std::find(kCommands.begin(), kCommands.end(), *word) == kCommands.end()) {
    const std::string best = closest_command(*word, kCommands);
    if (!best.empty()) {
      std::fprintf(stderr, "meshgate-ctl: unknown command \"%s\"; did you mean \"%s\"?\n",
                   word->c_str(), best.c_str());
    } else {
      std::string all;
      for (const auto& c : kCommands) all += (all.empty() ? "" : ", ") + c;
      std::fprintf(stderr, "meshgate-ctl: unknown command \"%s\"; commands: %s\n", word->c_str(),
                   all.c_str());
    }
    return kExitUsage;
  }

  CLI::App app{"meshgate-ctl: query and control a running meshgate through its admin API"};
  const char* env = std::getenv("MESHGATE_ADMIN");
  std::string admin_text = env && *env ? env : kDefaultAdmin;
  app.add_option("--admin", admin_text,
                 "admin API address HOST:PORT, IPv6 as [::1]:PORT (default: $MESHGATE_ADMIN or " +
                     std::string(kDefaultAdmin) + ")");
  // meshgate-ctl links neither DPDK nor Hyperscan: it prints the library versions of the
  // headers it was built with, which are those of the meshgate built alongside it.
  app.set_version_flag(
      "--version",
      [] {
        return meshgate::version_text("meshgate-ctl", meshgate::compiled_build_info(),
                                      " (built with)");
      },
      "print the version, git commit and the DPDK, OpenSSL, Hyperscan versions built with");
  std::string output = "table";
  app.add_option("-o,--output", output,
                 "table (default) or json: the admin API's JSON, or the rows of the table")
      ->check(CLI::IsMember({"table", "json"}));
  // Global options are accepted after the command too (meshgate-ctl flows -o json).
  app.fallthrough();
  app.require_subcommand(1);
  CLI::App* services =
      app.add_subcommand("services", "services and backends with counters and rates, like ipvsadm -Ln");
  CLI::App* flows = app.add_subcommand("flows", "tracked flows of every worker");
  uint32_t limit = 100;
  flows->add_option("--limit", limit, "most flows to list, counted after the filters (1..100000, default 100)")
      ->check(CLI::Range(1u, kMaxLimit));
  FlowsFilterArgs filter;
  flows->add_option("--service", filter.service, "only flows of this service");
  flows->add_option("--backend", filter.backend, "only flows to this backend IP[:PORT] ([v6]:PORT)");
  flows->add_option("--state", filter.state,
                    "only flows in this state (ESTABLISHED, SYN_SENT, TIME_WAIT, ... UDP, ICMP)");
  flows->add_option("--client", filter.client, "only flows from clients in IP[/PREFIX]");
  CLI::App* stats = app.add_subcommand("stats", "key counters and non-zero drops");
  CLI::App* config = app.add_subcommand("config", "the running configuration (GET /config_dump)");
  CLI::App* drain = app.add_subcommand("drain", "refuse new flows and exit once flows closed");
  CLI::App* bgp = app.add_subcommand("bgp", "BGP sessions and announced VIPs ([bgp])");
  CLI::App* flow_rules =
      app.add_subcommand("flow-rules", "rte_flow rules per port: installed, or refused and why");
  CLI::App* workloads =
      app.add_subcommand("workloads", "the mesh's workloads, like istioctl ztunnel-config workloads");
  CLI::App* certificates = app.add_subcommand(
      "certificates", "the gateway's certificates, like istioctl ztunnel-config certificates");
  CLI::App* policies = app.add_subcommand(
      "policies", "authorization policies, like istioctl ztunnel-config authorization");
  CLI::App* log_level =
      app.add_subcommand("log-level", "show the log level, or set it (error, warn, info, debug)");
  std::optional<std::string> level;
  log_level->add_option("level", level, "the new level: error, warn, info or debug");
  CLI::App* reload_cmd = app.add_subcommand(
      "reload", "re-read the config file and apply it (what changed, or why nothing did)");
  unsigned reload_wait_s = kDefaultReloadWaitS;
  reload_cmd->add_option("--wait", reload_wait_s,
                         "seconds to wait for the outcome of a reload still in progress (default " +
                             std::to_string(kDefaultReloadWaitS) + ")")
      ->check(CLI::Range(1u, 86400u));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  Admin a;
  if (!parse_admin(admin_text, &a)) {
    std::fprintf(stderr, "meshgate-ctl: --admin: expected HOST:PORT (IPv6 as [::1]:15000), got \"%s\"\n",
                 admin_text.c_str());
    return kExitUsage;
  }
  if (const std::string err = check_flows_filter(filter); !err.empty()) {
    std::fprintf(stderr, "meshgate-ctl: flows %s\n", err.c_str());
    return kExitUsage;
  }
  if (level && std::find(log_levels().begin(), log_levels().end(), *level) == log_levels().end()) {
    std::fprintf(stderr,
                 "meshgate-ctl: log-level: expected error, warn, info or debug, got \"%s\"\n",
                 level->c_str());
    return kExitUsage;
  }
  const bool as_json = output == "json";

  try {
    if (*services) {
      auto cfg = get_json(a, "/config_dump");
      if (!cfg) return kExitFailure;
      auto st = get_json(a, "/stats");
      if (!st) return kExitFailure;
      // Connections are counted from the flow dump; without it the table still shows the rest.
      auto fl = get_json(a, "/flows?limit=" + std::to_string(kMaxLimit));
      const json view = services_view(*cfg, *st, fl ? *fl : json());
      as_json ? print_json(view) : print(render_services(view));
    } else if (*flows) {
      auto fl = get_json(a, flows_path(limit, filter));
      if (!fl) return kExitFailure;
      as_json ? print_json(*fl) : print(render_flows(*fl));
    } else if (*stats) {
      auto st = get_json(a, "/stats");
      if (!st) return kExitFailure;
      as_json ? print_json(*st) : print(render_stats(*st));
    } else if (*config) {
      // The dump is JSON in both formats: its nested tables have no useful flat form.
      auto cfg = get_json(a, "/config_dump");
      if (!cfg) return kExitFailure;
      print_json(*cfg);
    } else if (*bgp) {
      auto b = get_json(a, "/bgp");
      if (!b) return kExitFailure;
      as_json ? print_json(*b) : print(render_bgp(*b));
    } else if (*flow_rules) {
      auto fr = get_json(a, "/flow_rules");
      if (!fr) return kExitFailure;
      as_json ? print_json(*fr) : print(render_flow_rules(*fr));
    } else if (*workloads) {
      auto w = get_json(a, "/workloads");
      if (!w) return kExitFailure;
      as_json ? print_json(*w) : print(render_workloads(*w));
    } else if (*certificates) {
      auto cfg = get_json(a, "/config_dump");
      if (!cfg) return kExitFailure;
      const json view = certificates_view(*cfg, int64_t(std::time(nullptr)));
      as_json ? print_json(view) : print(render_certificates(view));
    } else if (*policies) {
      auto cfg = get_json(a, "/config_dump");
      if (!cfg) return kExitFailure;
      const json view = policies_view(*cfg);
      as_json ? print_json(view) : print(render_policies(view));
    } else if (*log_level) {
      std::optional<std::string> body =
          level ? request(a, "POST", "/logging?level=" + *level) : request(a, "GET", "/logging");
      if (!body) return kExitFailure;
      json j = json::parse(*body, nullptr, false);
      if (j.is_discarded()) {
        std::fprintf(stderr, "meshgate-ctl: %s /logging at %s: the answer is not JSON\n",
                     level ? "POST" : "GET", a.text.c_str());
        return kExitFailure;
      }
      as_json ? print_json(j) : print(render_log_level(j));
    } else if (*reload_cmd) {
      if (!reload(a, as_json, reload_wait_s)) return kExitFailure;
    } else if (*drain) {
      auto body = request(a, "POST", "/drain");
      if (!body) return kExitFailure;
      std::string text = *body;
      while (!text.empty() && text.back() == '\n') text.pop_back();
      as_json ? print_json({{"draining", true}, {"message", text}}) : print(*body);
    }
  } catch (const json::exception& e) {
    std::fprintf(stderr, "meshgate-ctl: unexpected answer from the admin API at %s: %s\n",
                 a.text.c_str(), e.what());
    return kExitFailure;
  }
  return kExitOk;
}
