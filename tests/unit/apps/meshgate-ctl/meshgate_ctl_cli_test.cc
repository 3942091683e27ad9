// The meshgate-ctl binary against a fake admin API (httplib on 127.0.0.1): `log-level` reads
// and sets the level through GET / POST /logging and validates it before asking, `flows`
// sends its filters and limit as query parameters and prints the answer as it is with -o json,
// `services -o json` prints the composed rows, a misspelt command gets a suggestion and exit 2
// without a request, an unreachable admin API is exit 1 saying so, and an HTTP error is exit 1
// with the server's message.
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using nlohmann::json;

struct CtlRun {
  int rc = -1;
  std::string out;  // stdout and stderr
};

class FakeAdmin {
 public:
  FakeAdmin() {
    svr_.Get("/logging", [this](const httplib::Request& req, httplib::Response& res) {
      seen(req);
      res.set_content(R"({"level":"info","format":"text"})", "application/json");
    });
    svr_.Post("/logging", [this](const httplib::Request& req, httplib::Response& res) {
      seen(req);
      const std::string level = req.get_param_value("level");
      if (level != "error" && level != "warn" && level != "info" && level != "debug") {
        res.status = 400;
        res.set_content("level: expected error, warn, info or debug\n", "text/plain");
        return;
      }
      res.set_content(R"({"level":")" + level + R"(","previous":"info"})", "application/json");
    });
    svr_.Get("/flows", [this](const httplib::Request& req, httplib::Response& res) {
      seen(req);
      res.set_content(flows_.dump(), "application/json");
    });
    svr_.Get("/config_dump", [this](const httplib::Request& req, httplib::Response& res) {
      seen(req);
      res.set_content(R"({"snapshot_version": 2, "services": [
        {"name": "web", "vip": "203.0.113.10", "port": 80, "protocol": "tcp", "mode": "dnat",
         "endpoints": [{"address": "198.51.100.11", "port": 8080, "weight": 1, "health": "healthy"}]}],
        "certificates": [], "policies": []})",
                      "application/json");
    });
    svr_.Get("/stats", [this](const httplib::Request& req, httplib::Response& res) {
      seen(req);
      res.set_content(R"({"rate_interval_s": 2, "services": {"web": {"backends": {
        "198.51.100.11:8080": {"packets": 40, "bytes": 4000, "flows": 3,
                               "rates": {"flows_per_s": 1.5, "packets_per_s": 20, "bytes_per_s": 2000}}}}}})",
                      "application/json");
    });
    svr_.Get("/stats_gone", [](const httplib::Request&, httplib::Response& res) { res.status = 404; });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~FakeAdmin() {
    // stop() does nothing until the listen thread runs.
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    svr_.stop();
    thread_.join();
  }
  std::string admin() const { return "127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lk(mu_);
    return requests_;
  }

  json flows_ = json::parse(R"({"count": 1, "limit": 5, "truncated": false, "complete": true,
    "workers": 1, "workers_answered": 1, "filter": {"service": "web", "state": "ESTABLISHED"},
    "flows": [{"worker": 0, "protocol": "tcp", "client": "192.0.2.2:40000",
               "vip": "203.0.113.10:80", "local": "", "backend": "198.51.100.11:8080",
               "service": "web", "mode": "dnat", "state": "ESTABLISHED", "age_ms": 1500,
               "expires_in_ms": 7000}]})");

 private:
  void seen(const httplib::Request& req) {
    std::string line = req.method + " " + req.path;
    char sep = '?';
    for (const auto& [k, v] : req.params) {
      line += sep + k + "=" + v;
      sep = '&';
    }
    std::lock_guard<std::mutex> lk(mu_);
    requests_.push_back(line);
  }
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

CtlRun ctl(const std::string& args) {
  const std::string cmd = std::string(MG_BINARY_DIR) + "/apps/meshgate-ctl " + args + " 2>&1";
  CtlRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(CtlCli, LogLevelShowsAndSetsTheLevel) {
  FakeAdmin fake;
  CtlRun r = ctl("--admin " + fake.admin() + " log-level");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "log level: info\n");
  r = ctl("--admin " + fake.admin() + " log-level debug");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "log level: debug (was info)\n");
  r = ctl("--admin " + fake.admin() + " log-level warn -o json");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(json::parse(r.out), json::parse(R"({"level": "warn", "previous": "info"})"));
  EXPECT_EQ(fake.requests(), (std::vector<std::string>{"GET /logging", "POST /logging?level=debug",
                                                       "POST /logging?level=warn"}));
}

TEST(CtlCli, ABadLogLevelIsExit2WithoutARequest) {
  FakeAdmin fake;
  const CtlRun r = ctl("--admin " + fake.admin() + " log-level verbose");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "meshgate-ctl: log-level: expected error, warn, info or debug, got \"verbose\"\n");
  EXPECT_TRUE(fake.requests().empty());
}

TEST(CtlCli, FlowsSendsFiltersAsQueryParametersAndJsonIsTheAnswer) {
  FakeAdmin fake;
  CtlRun r = ctl("--admin " + fake.admin() +
              " -o json flows --service web --state established --backend 198.51.100.11:8080"
              " --client 192.0.2.0/24 --limit 5");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(json::parse(r.out), fake.flows_);
  EXPECT_EQ(fake.requests(),
            (std::vector<std::string>{"GET /flows?backend=198.51.100.11:8080&client=192.0.2.0/24&"
                                      "limit=5&service=web&state=established"}));
  // -o after the command, and the table.
  r = ctl("--admin " + fake.admin() + " flows --service web -o table");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("ESTABLISHED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n1 flow\n"), std::string::npos) << r.out;
}

TEST(CtlCli, ABadFilterIsExit2WithoutARequest) {
  FakeAdmin fake;
  for (const char* bad : {"--state open", "--backend web", "--client 10.0.0.0/99", "--service ''"}) {
    const CtlRun r = ctl("--admin " + fake.admin() + " flows " + bad);
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.out;
    EXPECT_EQ(r.out.rfind("meshgate-ctl: flows --", 0), 0u) << r.out;
  }
  EXPECT_TRUE(fake.requests().empty());
}

TEST(CtlCli, ServicesJsonIsTheComposedRows) {
  FakeAdmin fake;
  const CtlRun r = ctl("--admin " + fake.admin() + " services -o json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json j = json::parse(r.out);
  const json& b = j.at("services").at(0).at("backends").at(0);
  EXPECT_EQ(b.at("endpoint"), "198.51.100.11:8080");
  EXPECT_EQ(b.at("active_conns"), 1);
  EXPECT_EQ(b.at("inactive_conns"), 0);
  EXPECT_EQ(b.at("conns"), 3);
  EXPECT_EQ(b.at("bytes_in"), 4000);
  EXPECT_EQ(b.at("conns_per_s"), 1.5);
  EXPECT_TRUE(b.at("bytes_out").is_null());
  const CtlRun t = ctl("--admin " + fake.admin() + " services");
  ASSERT_EQ(t.rc, 0) << t.out;
  EXPECT_NE(t.out.find("ActiveConn  InActConn"), std::string::npos) << t.out;
}

TEST(CtlCli, AMisspeltCommandGetsASuggestionAndExit2) {
  FakeAdmin fake;
  CtlRun r = ctl("--admin " + fake.admin() + " servics");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "meshgate-ctl: unknown command \"servics\"; did you mean \"services\"?\n");
  r = ctl("-o json --admin " + fake.admin() + " log-levle info");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "meshgate-ctl: unknown command \"log-levle\"; did you mean \"log-level\"?\n");
  r = ctl("--admin " + fake.admin() + " frobnicate");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out.rfind("meshgate-ctl: unknown command \"frobnicate\"; commands: services, flows,", 0),
            0u)
      << r.out;
  EXPECT_TRUE(fake.requests().empty());
}

// A loopback port nothing listens on: one the kernel picked, bound without listen(), closed.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

TEST(CtlCli, AnUnreachableAdminApiIsExit1SayingSoAndHowToPointAtIt) {
  const std::string admin = "127.0.0.1:" + std::to_string(closed_port());
  const std::string said = "meshgate-ctl: admin API not reachable at " + admin +
                           " (is meshgate running? its [admin] listen address goes in --admin "
                           "HOST:PORT or $MESHGATE_ADMIN)\n";
  for (const char* cmd : {"stats", "services", "drain", "reload", "log-level debug"}) {
    const CtlRun r = ctl("--admin " + admin + " " + cmd);
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_EQ(r.out, said) << cmd;
  }
}

TEST(CtlCli, AnHttpErrorIsExit1WithTheServersMessage) {
  FakeAdmin fake;
  const CtlRun r = ctl("--admin " + fake.admin() + " workloads");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("GET /workloads at " + fake.admin() + ": HTTP 404"), std::string::npos) << r.out;
}

}  // namespace
