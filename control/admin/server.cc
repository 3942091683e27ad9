#include "control/admin/server.h"

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control/admin/request_checks.h"
#include "control/common/log.h"

namespace meshgate::ctl {
namespace {

using Clock = std::chrono::steady_clock;

// Each write of the answer must make progress within this time (a client that stops reading).
constexpr std::chrono::milliseconds kWriteTimeout{2000};
// After answering a request whose body was not read, the rest of the body is read and dropped
// for up to this long (or this many bytes) before the socket closes: closing with unread bytes
// sends a reset, which can destroy the answer before the client has read it.
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kLingerBytes = size_t(1) << 20;

bool wait_socket(int sock, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{sock, events, 0};
    const int r = ::poll(&p, 1, int(left));
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

// A request the event thread received whole, replayed to httplib's parser; the answer goes to
// the (non-blocking) socket, each write bounded by kWriteTimeout.
class RequestStream : public httplib::Stream {
 public:
  RequestStream(int sock, const std::string& request) : sock_(sock), request_(request) {}
  bool is_readable() const override { return pos_ < request_.size(); }
  bool is_writable() const override {
    return wait_socket(sock_, POLLOUT, Clock::now() + kWriteTimeout);
  }
  ssize_t read(char* p, size_t n) override {
    n = std::min(n, request_.size() - pos_);
    std::memcpy(p, request_.data() + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* p, size_t n) override {
    for (;;) {
      if (!is_writable()) return -1;
      const ssize_t r = ::send(sock_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return r;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
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

  int sock_;
  const std::string& request_;
  size_t pos_ = 0;
};

// httplib as a parser and router only: its own accept loop (a blocking read per connection on
// a pool thread) is never run; ConnectionLoop accepts and receives.
class HttpServer : public httplib::Server {
 public:
  ~HttpServer() override { close_listen(); }
  int listen_socket() const { return svr_sock_; }
  // httplib 0.11 listens with a backlog of 5: a burst of connections (a scrape racing a few
  // slow clients) would see SYNs dropped and retried a second later. Linux takes a second
  // listen() on a listening socket as a new backlog.
  bool widen_backlog() { return ::listen(svr_sock_, int(kAdminMaxPendingConnections)) == 0; }
  void close_listen() {
    const socket_t s = svr_sock_.exchange(INVALID_SOCKET);
    if (s != INVALID_SOCKET) ::close(s);
  }
  // Parses, routes and answers one request received whole; one request per connection.
  void serve(int sock, const std::string& request) {
    RequestStream strm(sock, request);
    bool closed = false;
    process_request(strm, /*close_connection=*/true, closed, nullptr);
  }
};

// An answer written by the event thread itself (timeouts, refusals, overload): a few hundred
// bytes into an empty socket buffer, so one non-blocking send.
void send_canned(int sock, int status, std::string_view body) {
  const char* reason = status == 408   ? "Request Timeout"
                       : status == 431 ? "Request Header Fields Too Large"
                                       : "Service Unavailable";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                    "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                    std::to_string(body.size() + 1) + "\r\nConnection: close\r\n\r\n";
  out.append(body);
  out += '\n';
  (void)::send(sock, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void close_socket(int sock) {
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

// Half-closes, drops what the client still sends (bounded), then closes.
void linger_close(int sock) {
  ::shutdown(sock, SHUT_WR);
  const auto deadline = Clock::now() + kLingerTime;
  char buf[16384];
  for (size_t dropped = 0; dropped < kLingerBytes && wait_socket(sock, POLLIN, deadline);) {
    const ssize_t r = ::recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
    if (r > 0) dropped += size_t(r);
  }
  ::close(sock);
}

// Handler threads, started when every existing one is busy, up to `threads`; `queued` more
// requests may wait. Threads stay until shutdown, for the next burst.
class Workers {
 public:
  Workers(size_t threads, size_t queued) : max_threads_(threads), max_queued_(queued) {}
  ~Workers() { shutdown(); }
  // False when every thread is busy and the queue is full.
  bool submit(std::function<void()> fn) {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ || busy_ + jobs_.size() >= max_threads_ + max_queued_) return false;
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > idle_ && threads_.size() < max_threads_) {
      threads_.emplace_back([this] { work(); });
    }
    cv_.notify_one();
    return true;
  }
  // Runs what is queued, then joins every thread.
  void shutdown() {
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

  const size_t max_threads_, max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;  // grown only by submit() on the event thread
  size_t idle_ = 0, busy_ = 0;
  bool stop_ = false;
};

}  // namespace

// The event thread: accepts, receives each request into a buffer bounded by
// kAdminMaxHeaderBytes + kAdminMaxBodyBytes, closes it at its deadline, and hands complete
// requests to the handler threads. Connections are kept oldest first, which is also deadline
// order (every connection gets the same kAdminRequestTimeout).
class ConnectionLoop {
 public:
  explicit ConnectionLoop(HttpServer& http) : http_(http) {}
  ~ConnectionLoop() { stop(); }

  bool start() {
    // accept4() in a loop until EAGAIN: the listening socket must not block.
    const int fl = ::fcntl(http_.listen_socket(), F_GETFL);
    if (fl < 0 || ::fcntl(http_.listen_socket(), F_SETFL, fl | O_NONBLOCK) != 0) return false;
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ep_ < 0 || wake_ < 0 || !watch(http_.listen_socket(), kListenId) || !watch(wake_, kWakeId)) {
      return false;
    }
    thread_ = std::thread([this] { run(); });
    return true;
  }
  void stop() {
    if (thread_.joinable()) {
      stop_.store(true, std::memory_order_release);
      const uint64_t one = 1;
      (void)!::write(wake_, &one, sizeof one);
      thread_.join();
    }
    for (Conn& c : pending_) close_socket(c.fd);
    pending_.clear();
    index_.clear();
    http_.close_listen();
    general_.shutdown();
    probes_.shutdown();
    for (int* fd : {&ep_, &wake_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

 private:
  struct Conn {
    uint64_t id;
    int fd;
    Clock::time_point deadline;
    std::string received;
  };
  static constexpr uint64_t kListenId = 0, kWakeId = 1;

  bool watch(int fd, uint64_t id) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    return ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) == 0;
  }

  void run() {
    epoll_event evs[64];
    while (!stop_.load(std::memory_order_acquire)) {
      int timeout = -1;
      if (!pending_.empty()) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(pending_.front().deadline -
                                                                       Clock::now());
        timeout = int(std::max<int64_t>(0, left.count()));
      }
      const int n = ::epoll_wait(ep_, evs, 64, timeout);
      for (int i = 0; i < n; ++i) {
        const uint64_t id = evs[i].data.u64;
        if (id == kListenId) {
          accept_all();
        } else if (id != kWakeId) {
          // Looked up by id: an earlier event of this batch may have closed the connection.
          const auto it = index_.find(id);
          if (it != index_.end()) receive(it->second);
        }
      }
      const auto now = Clock::now();
      while (!pending_.empty() && pending_.front().deadline <= now) {
        send_canned(pending_.front().fd, 408,
                    "the request did not arrive within " +
                        std::to_string(kAdminRequestTimeout.count()) + " ms");
        drop(pending_.begin());
      }
    }
  }

  void accept_all() {
    for (int i = 0; i < 64; ++i) {
      const int fd = ::accept4(http_.listen_socket(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if ((errno == EMFILE || errno == ENFILE) && !pending_.empty()) {
          drop(pending_.begin());
          continue;
        }
        // Out of descriptors with none of ours to give back: the handlers hold them; wait for
        // them rather than spin on a listen socket that stays readable.
        if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
      }
      if (pending_.size() >= kAdminMaxPendingConnections) drop(pending_.begin());
      const uint64_t id = next_id_++;
      pending_.push_back(Conn{id, fd, Clock::now() + kAdminRequestTimeout, {}});
      index_[id] = std::prev(pending_.end());
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.u64 = id;
      if (::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) drop(std::prev(pending_.end()));
    }
  }

  void receive(std::list<Conn>::iterator c) {
    char buf[16384];
    for (;;) {
      const size_t room = kAdminMaxHeaderBytes + kAdminMaxBodyBytes - c->received.size();
      const ssize_t r = ::recv(c->fd, buf, std::min(sizeof buf, room), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EAGAIN) return;
      if (r <= 0) {  // closed (or reset) before a whole request
        drop(c);
        return;
      }
      c->received.append(buf, size_t(r));
      const RequestScan scan = scan_request(c->received);
      if (scan.state == RequestScan::State::kComplete) {
        dispatch(c, scan);
        return;
      }
      if (scan.state == RequestScan::State::kHeadTooLarge) {
        send_canned(c->fd, 431,
                    "the request line and headers exceed " + std::to_string(kAdminMaxHeaderBytes) +
                        " bytes");
        drop(c);
        return;
      }
    }
  }

  void dispatch(std::list<Conn>::iterator c, const RequestScan& scan) {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, c->fd, nullptr);
    const int fd = c->fd;
    std::string request = std::move(c->received);
    request.resize(scan.length);  // bytes after one request are not read as another
    index_.erase(c->id);
    pending_.erase(c);
    // A "probe" with a body to drop would hold a probe thread while it lingers.
    const bool probe = is_probe_request(request) && !scan.body_unread;
    HttpServer* http = &http_;
    auto job = [http, fd, request = std::move(request), linger = scan.body_unread] {
      http->serve(fd, request);
      linger ? linger_close(fd) : close_socket(fd);
    };
    if (!(probe ? probes_ : general_).submit(std::move(job))) {
      send_canned(fd, 503, "the admin API is busy: every handler thread is taken; retry");
      close_socket(fd);
    }
  }

  void drop(std::list<Conn>::iterator c) {
    close_socket(c->fd);  // also leaves the epoll set
    index_.erase(c->id);
    pending_.erase(c);
  }

  HttpServer& http_;
  int ep_ = -1, wake_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::list<Conn> pending_;  // oldest first
  std::unordered_map<uint64_t, std::list<Conn>::iterator> index_;
  uint64_t next_id_ = 2;  // after kListenId and kWakeId
  Workers general_{kAdminHandlerThreads, kAdminQueuedRequests};
  Workers probes_{kAdminProbeThreads, kAdminProbeThreads};
};

namespace {

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

AdminServer::AdminServer(AdminBridge& bridge, std::string listen_host)
    : bridge_(bridge), listen_host_(std::move(listen_host)), svr_(std::make_unique<HttpServer>()) {}

AdminServer::~AdminServer() { stop(); }

Result<std::unique_ptr<AdminServer>> AdminServer::start(const std::string& listen,
                                                        AdminBridge& bridge) {
  HostPort hp;
  if (!split_listen(listen, &hp)) return Error{"not a \"host:port\" address: \"" + listen + "\""};
  std::unique_ptr<AdminServer> s(new AdminServer(bridge, hp.host));
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
  s->loop_ = std::make_unique<ConnectionLoop>(*static_cast<HttpServer*>(s->svr_.get()));
  if (!s->loop_->start()) return Error{std::string("admin API: ") + std::strerror(errno)};
  return s;
}

void AdminServer::stop() {
  if (loop_) loop_->stop();
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
  // Browsers' requests and oversized bodies (request_checks.h), before a body is read: the
  // checks run from the headers alone, for Expect: 100-continue before the client is invited to
  // send its body. cpp-httplib answers 400, before any handler runs, a POST that has neither
  // Content-Length nor a chunked body, which is what `curl -X POST` sends; a 400 from POST
  // /reload would read as "invalid config". These actions take no body: such requests are
  // answered here first.
  const std::string* listen_host = &listen_host_;
  s.set_expect_100_continue_handler([listen_host](const httplib::Request& req, httplib::Response& res) {
    if (auto refused = refuse_request(req, *listen_host)) {
      answer(res, *refused);
      return res.status;
    }
    return 100;
  });
  s.set_pre_routing_handler([drain, reload, listen_host](const httplib::Request& req,
                                                         httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    if (auto refused = refuse_request(req, *listen_host)) {
      answer(res, *refused);
      return R::Handled;
    }
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
