#include "control/admin/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace meshgate::ctl {
namespace {

// httplib's pool size. Admin traffic is a probe, a scrape and an operator: four threads keep
// one slow /flows from blocking /healthz without spreading threads over the machine.
constexpr size_t kAdminThreads = 4;
// How long a handler waits for the control loop: it ticks every millisecond, and /flows waits
// at most kFlowDumpWait (1 s) for the workers.
constexpr std::chrono::milliseconds kAnswerTimeout{3000};

struct HostPort {
  std::string host;
  int port = -1;
};

// "host:port" or "[v6]:port" (validated by the config; re-checked here for tests).
bool split_listen(const std::string& s, HostPort* out) {
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    out->host = s.substr(1, close - 1);
    port = std::string_view(s).substr(close + 2);
  } else {
    const auto colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    out->host = s.substr(0, colon);
    port = std::string_view(s).substr(colon + 1);
  }
  int p = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535) return false;
  out->port = p;
  return !out->host.empty();
}

void answer(httplib::Response& res, const AdminReply& r) {
  res.status = r.status;
  res.set_content(r.body, r.content_type.c_str());
}

constexpr const char* kIndex =
    "meshgate admin API\n"
    "  GET  /ready         200 once the first snapshot is live (503 before, and while draining)\n"
    "  GET  /healthz       200 while every worker polls\n"
    "  GET  /stats         counters as JSON (the --stats-json format)\n"
    "  GET  /metrics       Prometheus text exposition\n"
    "  GET  /config_dump   services, endpoints, routes, neighbors as JSON\n"
    "  GET  /flows?limit=N flows of every worker as JSON (N 1..100000, default 100)\n"
    "  POST /drain         refuse new flows, exit once established flows closed\n";

}  // namespace

AdminServer::AdminServer(AdminBridge& bridge)
    : bridge_(bridge), svr_(std::make_unique<httplib::Server>()) {}

AdminServer::~AdminServer() { stop(); }

Result<std::unique_ptr<AdminServer>> AdminServer::start(const std::string& listen,
                                                        AdminBridge& bridge) {
  HostPort hp;
  if (!split_listen(listen, &hp)) return Error{"not a \"host:port\" address: \"" + listen + "\""};
  std::unique_ptr<AdminServer> s(new AdminServer(bridge));
  s->svr_->new_task_queue = [] { return new httplib::ThreadPool(kAdminThreads); };
  // httplib's default sets SO_REUSEPORT, which would let a second gateway bind the same address
  // and receive half of this one's requests (a POST /drain for the wrong process). SO_REUSEADDR
  // alone still allows a quick restart over TIME_WAIT connections.
  s->svr_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // One request per connection: an idle keep-alive connection would hold a pool thread.
  s->svr_->set_keep_alive_max_count(1);
  s->routes();
  errno = 0;
  if (hp.port == 0) {
    const int port = s->svr_->bind_to_any_port(hp.host);
    if (port < 0) return Error{"cannot bind " + listen + ": " + std::strerror(errno)};
    s->port_ = uint16_t(port);
  } else {
    if (!s->svr_->bind_to_port(hp.host, hp.port)) {
      return Error{"cannot bind " + listen + ": " +
                   (errno ? std::strerror(errno) : "address not available")};
    }
    s->port_ = uint16_t(hp.port);
  }
  httplib::Server* svr = s->svr_.get();
  std::atomic<bool>* exited = &s->exited_;
  s->thread_ = std::thread([svr, exited] {
    svr->listen_after_bind();
    exited->store(true, std::memory_order_release);
  });
  return s;
}

void AdminServer::stop() {
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing until the listen thread has marked itself running; repeat it
  // until the thread is out of its accept loop (only a stop right after start() needs two).
  while (!exited_.load(std::memory_order_acquire)) {
    svr_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  thread_.join();
}

void AdminServer::routes() {
  httplib::Server& s = *svr_;
  AdminBridge& b = bridge_;
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kIndex, "text/plain; charset=utf-8");
  });
  s.Get("/ready", [&b](const httplib::Request&, httplib::Response& res) {
    const Readiness r = b.readiness();
    answer(res, r.ready ? text_reply(200, "ready") : text_reply(503, std::string("not ready: ") + r.reason));
  });
  auto query = [&b](QueryKind kind) {
    return [&b, kind](const httplib::Request&, httplib::Response& res) {
      answer(res, b.ask(kind, 0, kAnswerTimeout));
    };
  };
  s.Get("/healthz", query(QueryKind::kHealth));
  s.Get("/stats", query(QueryKind::kStats));
  s.Get("/metrics", query(QueryKind::kMetrics));
  s.Get("/config_dump", query(QueryKind::kConfigDump));
  s.Get("/flows", [&b](const httplib::Request& req, httplib::Response& res) {
    uint32_t limit = kDefaultFlowsLimit;
    if (req.has_param("limit")) {
      const std::string v = req.get_param_value("limit");
      uint64_t n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > kMaxFlowsLimit) {
        answer(res, text_reply(400, "limit: expected an integer 1.." +
                                        std::to_string(kMaxFlowsLimit) + ", got \"" + v + "\""));
        return;
      }
      limit = uint32_t(n);
    }
    answer(res, b.ask(QueryKind::kFlows, limit, kAnswerTimeout));
  });
  s.Post("/drain", [&b](const httplib::Request&, httplib::Response& res) {
    b.request_drain();
    answer(res, text_reply(200, "draining: new flows are refused; meshgate exits once established "
                                "flows have closed or [gateway] drain_timeout_ms has passed"));
  });
  s.Get("/drain", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Allow", "POST");
    answer(res, text_reply(405, "use POST /drain"));
  });
}

}  // namespace meshgate::ctl
