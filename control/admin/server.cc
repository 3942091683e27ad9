#include "control/admin/server.h"

#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "control/common/log.h"

namespace meshgate::ctl {
namespace {

using Clock = std::chrono::steady_clock;

// Each write of the answer must make progress within this time (a client that stops reading).
constexpr std::chrono::milliseconds kWriteTimeout{2000};

// Set on the accept thread while it closes a connection beyond kAdminMaxConnections.
thread_local bool t_over_capacity = false;

// httplib's socket stream bounds each read, so a client sending a byte now and then would hold
// a thread for ever: this one bounds the whole request by a deadline fixed when a thread takes
// the connection (at once: threads are started as connections need them).
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, Clock::time_point read_deadline)
      : sock_(sock), read_deadline_(read_deadline) {}
  bool is_readable() const override { return wait(POLLIN, read_deadline_); }
  bool is_writable() const override { return wait(POLLOUT, Clock::now() + kWriteTimeout); }
  ssize_t read(char* p, size_t n) override {
    if (!is_readable()) return -1;
    ssize_t r;
    do r = ::recv(sock_, p, n, 0);
    while (r < 0 && errno == EINTR);
    return r;
  }
  ssize_t write(const char* p, size_t n) override {
    if (!is_writable()) return -1;
    ssize_t r;
    do r = ::send(sock_, p, n, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  bool wait(short events, Clock::time_point deadline) const {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{sock_, events, 0};
      const int r = ::poll(&p, 1, int(left));
      if (r < 0 && errno == EINTR) continue;
      return r > 0;
    }
  }
  template <typename Fn>
  void address(Fn fn, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (fn(sock_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
      return;
    }
    ip = host;
    port = std::atoi(serv);
  }

  socket_t sock_;
  Clock::time_point read_deadline_;
};

// httplib's connection handling with the request deadline: one request per connection, read
// through a DeadlineStream. Overrides the (private virtual) per-connection entry point that
// httplib's accept loop calls on a pool thread.
class HttpServer : public httplib::Server {
 public:
  // httplib 0.11 listens with a backlog of 5: a burst of connections (a scrape racing a few
  // slow clients) would see SYNs dropped and retried a second later. Linux takes a second
  // listen() on a listening socket as a new backlog.
  bool widen_backlog() { return ::listen(svr_sock_, int(kAdminMaxConnections)) == 0; }

 private:
  bool process_and_close_socket(socket_t sock) override {
    if (!t_over_capacity) {
      DeadlineStream strm(sock, Clock::now() + kAdminRequestTimeout);
      bool closed = false;
      process_request(strm, /*close_connection=*/true, closed, nullptr);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return true;
  }
};

// httplib's task queue: a thread per connection being served, started when every existing one
// is busy, up to kAdminMaxConnections; a connection beyond that is closed on the accept thread
// at once (a few system calls). Threads stay until shutdown, for the next burst.
class ConnectionPool : public httplib::TaskQueue {
 public:
  ~ConnectionPool() override { shutdown(); }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (busy_ + jobs_.size() < kAdminMaxConnections) {
        jobs_.push_back(std::move(fn));
        if (jobs_.size() > idle_) threads_.emplace_back([this] { work(); });
        cv_.notify_one();
        return;
      }
    }
    t_over_capacity = true;
    fn();
    t_over_capacity = false;
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lk, [this] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, nothing left
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      ++busy_;
      lk.unlock();
      fn();
      lk.lock();
      --busy_;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;  // touched only by the accept thread
  size_t idle_ = 0, busy_ = 0;
  bool stop_ = false;
};
// How long a handler waits for the control loop: it ticks every millisecond, and /flows waits
// at most kFlowDumpWait (1 s) for the workers.
constexpr std::chrono::milliseconds kAnswerTimeout{3000};
// How long POST /reload waits for the reload's outcome before it answers 202 (the reload goes
// on; GET /reload tells how it ended). Most reloads take milliseconds; one that compiles
// thousands of regexes takes longer than a client should hold a request.
constexpr std::chrono::milliseconds kReloadWait{10000};

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
    "  GET  /flows?limit=N flows of every worker as JSON (N 1..100000, default 100); filters\n"
    "                      service=NAME backend=IP[:PORT] state=STATE client=IP[/PREFIX]\n"
    "  GET  /bgp           BGP sessions and announced VIPs as JSON ([bgp])\n"
    "  GET  /flow_rules    rte_flow rules per port, installed or refused and why, as JSON\n"
    "  GET  /workloads     the mesh's workloads as JSON (none without a [mesh] source)\n"
    "  POST /drain         refuse new flows, exit once established flows closed\n"
    "  POST /reload        reload the config file: 200 with what changed, 400 invalid,\n"
    "                      409 when a changed key needs a restart or a reload is in\n"
    "                      progress (nothing applied); 202 when it takes over 10 s\n"
    "  GET  /reload        the reload in progress and the last one's outcome as JSON\n"
    "  GET  /logging       the log level and format as JSON\n"
    "  POST /logging?level=L\n"
    "                      set the log level: error, warn, info or debug\n";

// GET /logging and POST /logging?level=L. The level is an atomic of the logger (log.h), not
// control-loop state: it is read and set here without the bridge.
AdminReply logging_reply() {
  return {200, "application/json",
          nlohmann::ordered_json{{"level", log_level_name(log_level())},
                         {"format", log_format_name(log_format())}}
              .dump()};
}
AdminReply set_logging(const httplib::Request& req) {
  LogLevel l;
  if (!req.has_param("level") || !parse_log_level(req.get_param_value("level"), &l)) {
    return text_reply(400, "level: expected error, warn, info or debug");
  }
  const LogLevel previous = log_level();
  // Logged at info while the more verbose of the two levels is in force, so that a change from
  // info to warn shows as well as one from warn to info.
  auto note = [&] {
    log(LogLevel::kInfo, "log_level_changed", "log_level=%s previous=%s", log_level_name(l),
        log_level_name(previous));
  };
  if (int(l) < int(previous)) note();
  set_log_level(l);
  if (int(l) >= int(previous)) note();
  return {200, "application/json",
          nlohmann::ordered_json{{"level", log_level_name(l)}, {"previous", log_level_name(previous)}}
              .dump()};
}

}  // namespace

AdminServer::AdminServer(AdminBridge& bridge)
    : bridge_(bridge), svr_(std::make_unique<HttpServer>()) {}

AdminServer::~AdminServer() { stop(); }

Result<std::unique_ptr<AdminServer>> AdminServer::start(const std::string& listen,
                                                        AdminBridge& bridge) {
  HostPort hp;
  if (!split_listen(listen, &hp)) return Error{"not a \"host:port\" address: \"" + listen + "\""};
  std::unique_ptr<AdminServer> s(new AdminServer(bridge));
  s->svr_->new_task_queue = [] { return new ConnectionPool; };
  // httplib's default sets SO_REUSEPORT, which would let a second gateway bind the same address
  // and receive half of this one's requests (a POST /drain for the wrong process). SO_REUSEADDR
  // alone still allows a quick restart over TIME_WAIT connections.
  s->svr_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  s->routes();
  s->svr_->set_logger([](const httplib::Request& req, const httplib::Response& res) {
    log(LogLevel::kDebug, "admin_request", "method=%s path=\"%s\" status=%d", req.method.c_str(),
        req.path.c_str(), res.status);
  });
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
  if (!static_cast<HttpServer*>(s->svr_.get())->widen_backlog()) {
    return Error{"cannot listen on " + listen + ": " + std::strerror(errno)};
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
  // Answered here, not by the control loop: a probe must not fail while the loop is busy.
  s.Get("/healthz", [&b](const httplib::Request&, httplib::Response& res) {
    answer(res, b.health(std::chrono::steady_clock::now()));
  });
  s.Get("/stats", query(QueryKind::kStats));
  s.Get("/metrics", query(QueryKind::kMetrics));
  s.Get("/config_dump", query(QueryKind::kConfigDump));
  s.Get("/bgp", query(QueryKind::kBgp));
  s.Get("/flow_rules", query(QueryKind::kFlowRules));
  s.Get("/workloads", query(QueryKind::kWorkloads));
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
    auto filter = parse_flow_filter(req.params);
    if (!filter) {
      answer(res, text_reply(400, filter.error().message));
      return;
    }
    answer(res, b.ask(QueryKind::kFlows, limit, kAnswerTimeout, std::move(filter.value())));
  });
  auto drain = [&b](httplib::Response& res) {
    b.request_drain();
    answer(res, text_reply(200, "draining: new flows are refused; meshgate exits once established "
                                "flows have closed or [gateway] drain_timeout_ms has passed"));
  };
  auto reload = [&b](httplib::Response& res) {
    const AdminReply r = b.ask_reload(kReloadWait);
    if (r.status == 202) res.set_header("Location", "/reload");
    answer(res, r);
  };
  // cpp-httplib answers 400, before any handler runs, a POST that has neither Content-Length
  // nor a chunked body, which is what `curl -X POST` sends; a 400 from POST /reload would read
  // as "invalid config". These actions take no body: such requests are answered here first.
  s.set_pre_routing_handler([drain, reload](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    if (req.method != "POST" || req.has_header("Content-Length") ||
        req.has_header("Transfer-Encoding")) {
      return R::Unhandled;
    }
    if (req.path == "/drain") drain(res);
    else if (req.path == "/reload") reload(res);
    else if (req.path == "/logging") answer(res, set_logging(req));
    else return R::Unhandled;
    return R::Handled;
  });
  s.Post("/drain", [drain](const httplib::Request&, httplib::Response& res) { drain(res); });
  s.Get("/drain", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Allow", "POST");
    answer(res, text_reply(405, "use POST /drain"));
  });
  s.Post("/reload", [reload](const httplib::Request&, httplib::Response& res) { reload(res); });
  s.Get("/reload", [&b](const httplib::Request&, httplib::Response& res) {
    answer(res, b.reload_state());
  });
  s.Get("/logging", [](const httplib::Request&, httplib::Response& res) {
    answer(res, logging_reply());
  });
  s.Post("/logging", [](const httplib::Request& req, httplib::Response& res) {
    answer(res, set_logging(req));
  });
}

}  // namespace meshgate::ctl
