// meshgate-ctl: the admin API from a shell (README.md "Admin API and meshgate-ctl").
//   meshgate-ctl [--admin HOST:PORT] services | flows [--limit N] | stats | config | bgp |
//                flow-rules | drain | reload
// Exit codes: 0 ok, 1 admin API unreachable, HTTP error or a refused reload, 2 usage.
#include <CLI/CLI.hpp>
#include <httplib.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

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
// POST /reload builds a snapshot; the admin API gives it 30 s.
constexpr time_t kReloadTimeoutS = 35;
constexpr time_t kConnectTimeoutS = 2;

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

// One request; prints why it failed and returns nullopt.
std::optional<std::string> request(const Admin& a, const std::string& method,
                                   const std::string& path) {
  httplib::Client cli(a.host, a.port);
  cli.set_connection_timeout(kConnectTimeoutS, 0);
  cli.set_read_timeout(kReadTimeoutS, 0);
  httplib::Result res = method == "POST" ? cli.Post(path.c_str()) : cli.Get(path.c_str());
  if (!res) {
    std::fprintf(stderr,
                 "meshgate-ctl: cannot reach the meshgate admin API at %s (%s %s: %s); is "
                 "meshgate running, with [admin] listen = \"%s\"?\n",
                 a.text.c_str(), method.c_str(), path.c_str(),
                 httplib::to_string(res.error()).c_str(), a.text.c_str());
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

// POST /reload: prints the outcome (stdout when applied, stderr when refused). True when the
// config was applied.
bool reload(const Admin& a) {
  httplib::Client cli(a.host, a.port);
  cli.set_connection_timeout(kConnectTimeoutS, 0);
  cli.set_read_timeout(kReloadTimeoutS, 0);
  httplib::Result res = cli.Post("/reload");
  if (!res) {
    std::fprintf(stderr,
                 "meshgate-ctl: cannot reach the meshgate admin API at %s (POST /reload: %s); is "
                 "meshgate running, with [admin] listen = \"%s\"?\n",
                 a.text.c_str(), httplib::to_string(res.error()).c_str(), a.text.c_str());
    return false;
  }
  // 200 applied, 400 invalid, 409 restart required: each with the JSON outcome.
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("result")) {
    std::fprintf(stderr, "meshgate-ctl: POST /reload at %s: HTTP %d: %s", a.text.c_str(),
                 res->status, res->body.c_str());
    return false;
  }
  const std::string text = render_reload(j);
  std::fputs(text.c_str(), res->status == 200 ? stdout : stderr);
  return res->status == 200;
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

}  // namespace

int main(int argc, char** argv) {
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
  app.require_subcommand(1);
  CLI::App* services = app.add_subcommand("services", "services and backends, like ipvsadm -Ln");
  CLI::App* flows = app.add_subcommand("flows", "tracked flows of every worker");
  uint32_t limit = 100;
  flows->add_option("--limit", limit, "most flows to list (1..100000, default 100)")
      ->check(CLI::Range(1u, kMaxLimit));
  CLI::App* stats = app.add_subcommand("stats", "key counters and non-zero drops");
  CLI::App* config = app.add_subcommand("config", "the running configuration (GET /config_dump)");
  CLI::App* drain = app.add_subcommand("drain", "refuse new flows and exit once flows closed");
  CLI::App* bgp = app.add_subcommand("bgp", "BGP sessions and announced VIPs ([bgp])");
  CLI::App* flow_rules =
      app.add_subcommand("flow-rules", "rte_flow rules per port: installed, or refused and why");
  CLI::App* reload_cmd = app.add_subcommand(
      "reload", "re-read the config file and apply it (what changed, or why nothing did)");
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

  try {
    if (*services) {
      auto cfg = get_json(a, "/config_dump");
      if (!cfg) return kExitFailure;
      auto st = get_json(a, "/stats");
      if (!st) return kExitFailure;
      // Active flows come from the flow dump; without it the table still shows the rest.
      auto fl = get_json(a, "/flows?limit=" + std::to_string(kMaxLimit));
      std::fputs(render_services(*cfg, *st, fl ? *fl : json()).c_str(), stdout);
    } else if (*flows) {
      auto fl = get_json(a, "/flows?limit=" + std::to_string(limit));
      if (!fl) return kExitFailure;
      std::fputs(render_flows(*fl).c_str(), stdout);
    } else if (*stats) {
      auto st = get_json(a, "/stats");
      if (!st) return kExitFailure;
      std::fputs(render_stats(*st).c_str(), stdout);
    } else if (*config) {
      auto cfg = get_json(a, "/config_dump");
      if (!cfg) return kExitFailure;
      std::puts(cfg->dump(2).c_str());
    } else if (*bgp) {
      auto b = get_json(a, "/bgp");
      if (!b) return kExitFailure;
      std::fputs(render_bgp(*b).c_str(), stdout);
    } else if (*flow_rules) {
      auto fr = get_json(a, "/flow_rules");
      if (!fr) return kExitFailure;
      std::fputs(render_flow_rules(*fr).c_str(), stdout);
    } else if (*reload_cmd) {
      if (!reload(a)) return kExitFailure;
    } else if (*drain) {
      auto body = request(a, "POST", "/drain");
      if (!body) return kExitFailure;
      std::fputs(body->c_str(), stdout);
    }
  } catch (const json::exception& e) {
    std::fprintf(stderr, "meshgate-ctl: unexpected answer from the admin API at %s: %s\n",
                 a.text.c_str(), e.what());
    return kExitFailure;
  }
  return kExitOk;
}
