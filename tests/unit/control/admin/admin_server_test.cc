// The admin HTTP server and its bridge to the control loop, over real HTTP on 127.0.0.1 with a
// stand-in control loop: /ready from flags (503 before the snapshot is live, without a mesh
// sync, while draining), queries answered on the loop's thread, 503 while the loop does not
// serve, POST /drain, POST /reload (also without a body), /flows?limit validation and filters,
// one gateway per address, GET and POST /logging (also without a body). Hostile clients: slow
// and idle connections beyond any thread count (probes still answered, the oldest closed),
// browsers' cross-origin and DNS-rebinding requests (403, nothing changed), oversized headers
// (431) and bodies (413, not read: the peak RSS stays). Also the /healthz bookkeeping with
// made-up clocks.
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "control/admin/bridge.h"
#include "control/admin/health.h"
#include "control/admin/server.h"
#include "control/common/log.h"
#include "dataplane/worker/counters.h"

namespace meshgate::ctl {
namespace {

using namespace std::chrono_literals;

// A control loop on its own thread: answers every query with "<kind> limit=<n> from loop".
class FakeLoop {
 public:
  explicit FakeLoop(AdminBridge& b) : b_(b), t_([this] { run(); }) {}
  ~FakeLoop() {
    stop_ = true;
    t_.join();
  }
  std::thread::id id() const { return t_.get_id(); }
  std::atomic<std::thread::id> answered_on{};

 private:
  void run() {
    while (!stop_) {
      for (auto& q : b_.take()) {
        answered_on = std::this_thread::get_id();
        std::string body = "kind=" + std::to_string(int(q->kind)) + " limit=" + std::to_string(q->limit);
        if (!q->filter.empty()) body += " filter=" + flow_filter_json(q->filter).dump();
        q->promise.set_value(text_reply(200, body));
      }
      std::this_thread::sleep_for(1ms);
    }
  }
  AdminBridge& b_;
  std::atomic<bool> stop_{false};
  std::thread t_;
};

class AdminServerTest : public testing::Test {
 protected:
  void SetUp() override {
    auto s = AdminServer::start("127.0.0.1:0", bridge_);
    ASSERT_TRUE(s.ok()) << s.error().message;
    server_ = std::move(s.value());
    ASSERT_NE(server_->port(), 0);
    cli_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    cli_->set_read_timeout(10, 0);
  }
  void TearDown() override {
    bridge_.close();
    if (server_) server_->stop();
  }
  int status(const char* path) {
    auto r = cli_->Get(path);
    return r ? r->status : -1;
  }
  std::string body(const char* path) {
    auto r = cli_->Get(path);
    return r ? r->body : "";
  }

  AdminBridge bridge_;
  std::unique_ptr<AdminServer> server_;
  std::unique_ptr<httplib::Client> cli_;
};

TEST_F(AdminServerTest, ReadyIs503UntilTheFirstSnapshotIsLiveThen200) {
  EXPECT_EQ(status("/ready"), 503);
  EXPECT_NE(body("/ready").find("no snapshot"), std::string::npos);
  bridge_.mark_snapshot_live();
  EXPECT_EQ(status("/ready"), 200);
}

TEST_F(AdminServerTest, ReadyWaitsForTheFirstMeshSyncWhenAMeshSourceIsConfigured) {
  bridge_.set_mesh_required(true);
  bridge_.mark_snapshot_live();
  EXPECT_EQ(status("/ready"), 503);
  EXPECT_NE(body("/ready").find("mesh"), std::string::npos);
  bridge_.mark_mesh_synced();
  EXPECT_EQ(status("/ready"), 200);
}

TEST_F(AdminServerTest, ReadyIs503WhileDraining) {
  bridge_.mark_snapshot_live();
  bridge_.mark_draining();
  EXPECT_EQ(status("/ready"), 503);
  EXPECT_NE(body("/ready").find("draining"), std::string::npos);
}

TEST_F(AdminServerTest, QueriesAnswer503BeforeTheControlLoopServes) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const char* p : {"/healthz", "/stats", "/metrics", "/config_dump", "/flows"}) {
    EXPECT_EQ(status(p), 503) << p;
    EXPECT_NE(body(p).find("starting"), std::string::npos) << p;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "must not wait for a loop that is not there";
}

TEST_F(AdminServerTest, QueriesAreAnsweredOnTheControlLoopThread) {
  FakeLoop loop(bridge_);
  bridge_.start_serving();
  EXPECT_EQ(body("/stats"), "kind=" + std::to_string(int(QueryKind::kStats)) + " limit=0\n");
  EXPECT_EQ(loop.answered_on.load(), loop.id());
  EXPECT_EQ(body("/metrics"), "kind=" + std::to_string(int(QueryKind::kMetrics)) + " limit=0\n");
  EXPECT_EQ(body("/config_dump"),
            "kind=" + std::to_string(int(QueryKind::kConfigDump)) + " limit=0\n");
}

TEST_F(AdminServerTest, FlowsLimitDefaultsTo100AndIsValidated) {
  FakeLoop loop(bridge_);
  bridge_.start_serving();
  const std::string kind = "kind=" + std::to_string(int(QueryKind::kFlows));
  EXPECT_EQ(body("/flows"), kind + " limit=100\n");
  EXPECT_EQ(body("/flows?limit=100000"), kind + " limit=100000\n");
  EXPECT_EQ(body("/flows?limit=7"), kind + " limit=7\n");
  for (const char* bad : {"/flows?limit=0", "/flows?limit=100001", "/flows?limit=ten",
                          "/flows?limit=-1", "/flows?limit=5x", "/flows?limit="}) {
    EXPECT_EQ(status(bad), 400) << bad;
  }
  EXPECT_NE(body("/flows?limit=0").find("1..100000"), std::string::npos);
}

TEST_F(AdminServerTest, FlowsFiltersReachTheLoopAndBadValuesAre400) {
  bridge_.start_serving();
  FakeLoop loop(bridge_);
  const std::string kind = "kind=" + std::to_string(int(QueryKind::kFlows));
  EXPECT_EQ(body("/flows?limit=5&service=web&backend=%5B2001:db8::11%5D:8080&state=established"
                 "&client=192.0.2.0/24"),
            kind + R"( limit=5 filter={"backend":"[2001:db8::11]:8080","client":"192.0.2.0/24",)"
                   R"("service":"web","state":"ESTABLISHED"})" "\n");
  EXPECT_EQ(status("/flows?state=open"), 400);
  EXPECT_NE(body("/flows?state=open").find("state: expected one of SYN_SENT"), std::string::npos);
  EXPECT_EQ(status("/flows?backend=web"), 400);
  EXPECT_EQ(status("/flows?client=192.0.2.0/40"), 400);
  EXPECT_EQ(status("/flows?service="), 400);
}

TEST_F(AdminServerTest, PostDrainRequestsADrainOnceAndGetIsRefused) {
  EXPECT_FALSE(bridge_.take_drain_request());
  auto r = cli_->Post("/drain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(bridge_.take_drain_request());
  EXPECT_FALSE(bridge_.take_drain_request()) << "one request, one drain";
  EXPECT_EQ(status("/drain"), 405);
  EXPECT_FALSE(bridge_.take_drain_request());
}

// A connected TCP socket to 127.0.0.1:port, or -1.
int connect_loopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  ::close(fd);
  return -1;
}

// Sends `req` and reads the answer until the server closes (at most 5 s).
std::string roundtrip(uint16_t port, const std::string& req) {
  const int fd = connect_loopback(port);
  if (fd < 0) return "";
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string reply;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == ssize_t(req.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, size_t(n));
  }
  ::close(fd);
  return reply;
}

// What `curl -X POST URL` sends: a POST with no Content-Length and no body. Answered by the
// action, not with httplib's own empty 400 (which POST /reload would read as "invalid").
std::string bodiless_post(uint16_t port, const std::string& path) {
  return roundtrip(port, "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

TEST_F(AdminServerTest, PostReloadIsAQueryAnsweredByTheLoopWithOrWithoutABody) {
  FakeLoop loop(bridge_);
  bridge_.start_serving();
  const std::string kind = "kind=" + std::to_string(int(QueryKind::kReload)) + " limit=0\n";
  auto r = cli_->Post("/reload");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, kind);
  EXPECT_EQ(loop.answered_on.load(), loop.id());
  const std::string raw = bodiless_post(server_->port(), "/reload");
  EXPECT_EQ(raw.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << raw;
  EXPECT_NE(raw.find("\r\n\r\n" + kind), std::string::npos) << raw;
  EXPECT_EQ(body("/reload"), "{\"state\": \"idle\", \"id\": 0, \"last\": null}\n");
  EXPECT_EQ(bodiless_post(server_->port(), "/drain").rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_TRUE(bridge_.take_drain_request());
}

// stderr sent to a file while alive, read back as it grows: the admin server logs a request
// after its answer has gone out, so a test waits for the line.
class StderrFile {
 public:
  StderrFile() : path_(testing::TempDir() + "admin_stderr_" + std::to_string(::getpid())) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~StderrFile() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::unlink(path_.c_str());
  }
  std::string text() const {
    std::ifstream f(path_);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  bool wait_for(const std::string& needle) const {
    for (int i = 0; i < 500; ++i) {
      if (text().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  std::string path_;
  int saved_ = -1;
};

TEST_F(AdminServerTest, LoggingShowsAndSetsTheLogLevel) {
  set_log_level(LogLevel::kInfo);
  StderrFile err;
  EXPECT_NE(body("/").find("/logging"), std::string::npos);
  auto r = cli_->Get("/logging");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(r->body, R"({"level":"info","format":"text"})");

  r = cli_->Post("/logging?level=debug");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"level":"debug","previous":"info"})");
  EXPECT_EQ(log_level(), LogLevel::kDebug);
  EXPECT_TRUE(err.wait_for(" level=info event=log_level_changed log_level=debug previous=info\n"))
      << err.text();
  EXPECT_EQ(body("/logging"), R"({"level":"debug","format":"text"})");
  // At debug every request is logged.
  EXPECT_TRUE(err.wait_for(" level=debug event=admin_request method=GET path=\"/logging\" "
                           "status=200\n"))
      << err.text();

  // The way `curl -X POST` sends it: no Content-Length.
  const std::string raw = bodiless_post(server_->port(), "/logging?level=warn");
  EXPECT_EQ(raw.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << raw;
  EXPECT_NE(raw.find("\r\n\r\n{\"level\":\"warn\",\"previous\":\"debug\"}"), std::string::npos)
      << raw;
  EXPECT_EQ(log_level(), LogLevel::kWarn);
  EXPECT_TRUE(err.wait_for("event=log_level_changed log_level=warn previous=debug\n")) << err.text();
  EXPECT_EQ(status("/ready"), 503);

  for (const char* bad : {"/logging", "/logging?level=verbose", "/logging?level=", "/logging?lvl=info"}) {
    r = cli_->Post(bad);
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_EQ(r->body, "level: expected error, warn, info or debug\n") << bad;
    EXPECT_EQ(bodiless_post(server_->port(), bad).rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u)
        << bad;
  }
  EXPECT_EQ(log_level(), LogLevel::kWarn) << "a bad request changes nothing";
  r = cli_->Post("/logging?level=info");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"level":"info","previous":"warn"})");
  EXPECT_TRUE(err.wait_for("event=log_level_changed log_level=info previous=warn\n")) << err.text();
  const std::string out = err.text();
  EXPECT_EQ(out.find("path=\"/ready\""), std::string::npos) << "admin_request is debug only";
  set_log_level(LogLevel::kInfo);
}

TEST_F(AdminServerTest, UnknownPathsAre404AndTheIndexListsEndpoints) {
  EXPECT_EQ(status("/nope"), 404);
  const std::string index = body("/");
  for (const char* p : {"/ready", "/healthz", "/stats", "/metrics", "/config_dump", "/flows", "/drain",
                        "/reload", "/workloads"}) {
    EXPECT_NE(index.find(p), std::string::npos) << p;
  }
}

TEST_F(AdminServerTest, ASecondServerCannotBindTheSameAddress) {
  // httplib's default SO_REUSEPORT would let two gateways share a port and split requests.
  AdminBridge other;
  auto s = AdminServer::start("127.0.0.1:" + std::to_string(server_->port()), other);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cannot bind"), std::string::npos) << s.error().message;
}

// A client that sends the start of a request and then nothing (slowloris).
class PartialRequest {
 public:
  explicit PartialRequest(uint16_t port) : fd_(connect_loopback(port)) {
    connected_ = fd_ >= 0;
    send("GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  }
  ~PartialRequest() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const char* s) { return ::send(fd_, s, std::strlen(s), MSG_NOSIGNAL) > 0; }
  // True when the server closed the connection within `wait` (EOF or reset), whatever it
  // answered before.
  bool closed_within(std::chrono::milliseconds wait) {
    const auto end = std::chrono::steady_clock::now() + wait;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) return false;
      char buf[512];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

TEST_F(AdminServerTest, ReadyAnswersWithinASecondWhile64PartialRequestsAreOpen) {
  bridge_.mark_snapshot_live();
  std::vector<std::unique_ptr<PartialRequest>> held;
  for (int i = 0; i < 64; ++i) {
    held.push_back(std::make_unique<PartialRequest>(server_->port()));
    ASSERT_TRUE(held.back()->connected());
  }
  std::this_thread::sleep_for(100ms);  // every one of them accepted and waiting for its headers
  httplib::Client probe("127.0.0.1", server_->port());
  probe.set_connection_timeout(1, 0);
  probe.set_read_timeout(1, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = probe.Get("/ready");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r) << "no answer: " << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(took, 1s);
}

TEST_F(AdminServerTest, ARequestWhoseHeadersNeverCompleteIsClosedAfterTheRequestTimeout) {
  // A byte every 200 ms keeps every single read well inside any per-read timeout: only a bound
  // on the whole request closes this connection.
  PartialRequest slow(server_->port());
  ASSERT_TRUE(slow.connected());
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 50 && !closed; ++i) {  // at most 10 s
    closed = slow.closed_within(200ms);
    if (!closed) slow.send("X");
  }
  ASSERT_TRUE(closed);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, kAdminRequestTimeout - 100ms);
  EXPECT_LT(took, kAdminRequestTimeout + 1s);
}

TEST_F(AdminServerTest, ReadyAnswersEveryProbeWhile200SlowConnectionsAreOpen) {
  // More slow connections than a thread-per-connection server has threads: they hold a
  // buffer each on the event thread, and /ready has threads of its own.
  bridge_.mark_snapshot_live();
  std::vector<std::unique_ptr<PartialRequest>> held;
  for (int i = 0; i < 200; ++i) {
    held.push_back(std::make_unique<PartialRequest>(server_->port()));
    ASSERT_TRUE(held.back()->connected());
  }
  std::this_thread::sleep_for(100ms);
  int answered = 0;
  for (int i = 0; i < 10; ++i) {
    httplib::Client probe("127.0.0.1", server_->port());
    probe.set_connection_timeout(1, 0);
    probe.set_read_timeout(1, 0);
    auto r = probe.Get("/ready");
    if (r && r->status == 200) ++answered;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(answered, 10);
}

TEST_F(AdminServerTest, OneConnectionBeyondTheCapClosesTheOldestSlowOne) {
  bridge_.mark_snapshot_live();
  std::vector<std::unique_ptr<PartialRequest>> held;
  for (size_t i = 0; i < kAdminMaxPendingConnections; ++i) {
    held.push_back(std::make_unique<PartialRequest>(server_->port()));
    ASSERT_TRUE(held.back()->connected());
  }
  std::this_thread::sleep_for(200ms);
  PartialRequest extra(server_->port());
  ASSERT_TRUE(extra.connected());
  EXPECT_TRUE(held.front()->closed_within(500ms)) << "the oldest makes room";
  EXPECT_FALSE(held.back()->closed_within(10ms));
  EXPECT_FALSE(extra.closed_within(10ms));
  // A probe beyond the cap closes the next oldest, and is answered.
  auto r = cli_->Get("/ready");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(held[1]->closed_within(500ms));
}

int status_of(const std::string& reply) {
  return reply.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(reply.c_str() + 9) : -1;
}

TEST_F(AdminServerTest, ABrowsersCrossOriginWritesAre403AndChangeNothing) {
  set_log_level(LogLevel::kInfo);
  const std::string host = "Host: 127.0.0.1:" + std::to_string(server_->port()) + "\r\n";
  // A form or fetch(mode: "no-cors") from any page: no preflight, Origin and a simple type.
  std::string r = roundtrip(server_->port(),
                           "POST /logging?level=debug HTTP/1.1\r\n" + host +
                               "Origin: http://attacker.example\r\nContent-Type: text/plain;"
                               "charset=UTF-8\r\nContent-Length: 1\r\n\r\nx");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_NE(r.find("\r\n\r\nOrigin \"http://attacker.example\" refused"), std::string::npos) << r;
  EXPECT_EQ(log_level(), LogLevel::kInfo);
  r = roundtrip(server_->port(), "POST /logging?level=debug HTTP/1.1\r\n" + host +
                                    "Content-Type: text/plain\r\nContent-Length: 1\r\n\r\nx");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_EQ(log_level(), LogLevel::kInfo);
  r = roundtrip(server_->port(), "POST /drain HTTP/1.1\r\n" + host +
                                    "Origin: http://attacker.example\r\nContent-Type: application/"
                                    "x-www-form-urlencoded\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  r = roundtrip(server_->port(), "POST /drain HTTP/1.1\r\n" + host + "Origin: null\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_FALSE(bridge_.take_drain_request());
  // Its own origin, and what meshgate-ctl sends (no Origin, no Content-Type), pass.
  r = roundtrip(server_->port(), "POST /logging?level=warn HTTP/1.1\r\n" + host +
                                    "Origin: http://127.0.0.1:" + std::to_string(server_->port()) +
                                    "\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(log_level(), LogLevel::kWarn);
  auto ok = cli_->Post("/logging?level=info");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(log_level(), LogLevel::kInfo);
}

TEST_F(AdminServerTest, ARequestAddressedToAnotherNameIs403) {
  // DNS rebinding: a page of rebind.example whose name now resolves to 127.0.0.1.
  bridge_.mark_snapshot_live();
  const std::string port = std::to_string(server_->port());
  std::string r = roundtrip(server_->port(), "GET /config_dump HTTP/1.1\r\nHost: rebind.example:" +
                                                port + "\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_NE(r.find("Host \"rebind.example:" + port + "\" refused"), std::string::npos) << r;
  r = roundtrip(server_->port(), "POST /drain HTTP/1.1\r\nHost: rebind.example:" + port +
                                    "\r\nOrigin: http://rebind.example:" + port + "\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_FALSE(bridge_.take_drain_request());
  r = roundtrip(server_->port(), "GET /ready HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n");
  EXPECT_EQ(status_of(r), 200) << r;
}

TEST_F(AdminServerTest, HeadersBeyondTheLimitAre431) {
  const std::string r = roundtrip(server_->port(), "GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " +
                                                      std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(status_of(r), 431) << r.substr(0, 200);
}

TEST_F(AdminServerTest, AChunkedBodyIs413) {
  const std::string r = roundtrip(server_->port(),
                                 "POST /reload HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: "
                                 "chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n");
  EXPECT_EQ(status_of(r), 413) << r;
}

TEST_F(AdminServerTest, ProbesCarryingBodiesToDropDoNotTakeTheProbeThreads) {
  // Each is answered 413 and then its connection is drained for up to a second: on the probe
  // threads, four would keep every probe out for that second.
  bridge_.mark_snapshot_live();
  std::vector<int> fds;
  const std::string head = "GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 104857600\r\n\r\n";
  const std::string body(65536, 'a');
  for (int i = 0; i < 8; ++i) {
    const int fd = connect_loopback(server_->port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), ssize_t(head.size()));
    (void)::send(fd, body.data(), body.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(50ms);
  httplib::Client probe("127.0.0.1", server_->port());
  probe.set_read_timeout(1, 0);
  auto r = probe.Get("/ready");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  for (int fd : fds) ::close(fd);
}

long vm_hwm_kb() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

TEST_F(AdminServerTest, A100MBBodyIs413WithoutBeingReadAndThePeakRssStays) {
  set_log_level(LogLevel::kInfo);
  const long before_kb = vm_hwm_kb();
  const int fd = connect_loopback(server_->port());
  ASSERT_GE(fd, 0);
  constexpr size_t kBody = size_t(100) << 20;
  const std::string head = "POST /logging?level=debug HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                           std::to_string(kBody) + "\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), ssize_t(head.size()));
  // Streams the body until the answer arrives or the server stops reading (at most 10 s).
  const std::vector<char> chunk(65536, 'a');
  size_t sent = 0;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (sent < kBody && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    if (::poll(&p, 1, 100) < 0 || (p.revents & (POLLIN | POLLERR | POLLHUP))) break;
    if (!(p.revents & POLLOUT)) continue;
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN) break;
    if (n > 0) sent += size_t(n);
  }
  std::string reply;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, size_t(n));
  ::close(fd);
  const long grown_kb = vm_hwm_kb() - before_kb;
  EXPECT_EQ(status_of(reply), 413) << reply << " after " << sent << " body bytes";
  EXPECT_NE(reply.find("a request body of 104857600 bytes is refused"), std::string::npos) << reply;
  EXPECT_LT(grown_kb, 16 * 1024) << "peak RSS grew by " << grown_kb << " kB";
  EXPECT_EQ(log_level(), LogLevel::kInfo);
}

TEST(AdminServerStart, RejectsAnAddressWithoutPort) {
  AdminBridge b;
  auto s = AdminServer::start("127.0.0.1", b);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("host:port"), std::string::npos);
}

TEST(AdminBridge, AQueryTheLoopDoesNotAnswerTimesOutWith503) {
  AdminBridge b;
  b.start_serving();
  const AdminReply r = b.ask(QueryKind::kStats, 0, 50ms);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("did not answer"), std::string::npos);
  // The loop answers late: the abandoned query is still safe to fulfil.
  for (auto& q : b.take()) q->promise.set_value(text_reply(200, "late"));
}

// /healthz and GET /reload are answered on the HTTP thread: no control loop runs here at all.
TEST_F(AdminServerTest, HealthzAndReloadStateAnswerWithoutTheControlLoop) {
  uint64_t loops = 0;
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    while (!stop) {
      dp::counter_add(loops, 1);
      std::this_thread::sleep_for(1ms);
    }
  });
  bridge_.watch_workers({&loops});
  bridge_.start_serving();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = cli_->Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body.rfind("ok\n", 0), 0u) << r->body;
  bridge_.set_reload_state(R"({"state": "in_progress", "id": 3})");
  EXPECT_EQ(body("/reload"), "{\"state\": \"in_progress\", \"id\": 3}\n");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "waited for a control loop";
  stop = true;
  worker.join();
  // A worker whose counter stopped is named, still without the loop: the probes themselves
  // sample the counters (the loop's ticks do too), so the one after the stop sees its last
  // value and the one a second later that it has not moved.
  r = cli_->Get("/healthz");
  ASSERT_TRUE(r);
  std::this_thread::sleep_for(1100ms);
  r = cli_->Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("worker 0 stuck"), std::string::npos) << r->body;
}

// A reload the loop started but has not finished within the wait: 202 with its id (GET /reload
// tells the rest); one the loop never took: 503 as any query.
TEST(AdminBridge, AReloadStartedButNotFinishedInTheWaitAnswers202WithItsId) {
  AdminBridge b;
  b.start_serving();
  std::shared_ptr<Query> held;
  std::atomic<bool> stop{false};
  std::thread loop([&] {
    while (!stop) {
      for (auto& q : b.take()) {
        q->reload_id.store(7, std::memory_order_release);
        held = std::move(q);
      }
      std::this_thread::sleep_for(1ms);
    }
  });
  const AdminReply r = b.ask_reload(100ms);
  stop = true;
  loop.join();
  EXPECT_EQ(r.status, 202);
  EXPECT_NE(r.body.find("\"result\": \"in_progress\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"id\": 7"), std::string::npos) << r.body;
  ASSERT_TRUE(held);
  held->promise.set_value(text_reply(200, "late"));  // nobody waits: still safe
  const AdminReply untaken = b.ask_reload(50ms);
  EXPECT_EQ(untaken.status, 503);
  EXPECT_NE(untaken.body.find("did not answer"), std::string::npos);
  for (auto& q : b.take()) q->promise.set_value(text_reply(200, "late"));
}

TEST(AdminBridge, CloseAnswersQueuedQueriesWith503AndRefusesNewOnes) {
  AdminBridge b;
  b.start_serving();
  AdminReply r;
  std::thread asker([&] { r = b.ask(QueryKind::kMetrics, 0, 10s); });
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  b.close();
  asker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("shutting down"), std::string::npos);
  EXPECT_EQ(b.ask(QueryKind::kStats, 0, 10s).status, 503);
}

// ---- /healthz bookkeeping ----

using Clock = WorkerHealth::Clock;

TEST(WorkerHealth, WorkersWhoseLoopCountersAdvanceAreHealthy) {
  WorkerHealth h;
  const Clock::time_point t0{};
  h.observe(0, 10, t0);
  h.observe(1, 20, t0);
  h.observe(0, 11, t0 + 900ms);
  h.observe(1, 25, t0 + 900ms);
  const auto st = h.check(t0 + 1500ms);
  EXPECT_TRUE(st.healthy) << st.text;
  EXPECT_EQ(st.text.rfind("ok\n", 0), 0u) << st.text;
}

TEST(WorkerHealth, AWorkerStuckForASecondIsNamedInTheBody) {
  WorkerHealth h;
  const Clock::time_point t0{};
  h.observe(0, 10, t0);
  h.observe(1, 20, t0);
  for (auto t = t0; t <= t0 + 1200ms; t += 100ms) {
    h.observe(0, 10 + (t - t0).count(), t);  // advances
    h.observe(1, 20, t);                      // stuck
  }
  const auto st = h.check(t0 + 1200ms);
  EXPECT_FALSE(st.healthy);
  EXPECT_NE(st.text.find("worker 1 stuck: loop counter 20 unchanged for 1200 ms"), std::string::npos)
      << st.text;
  EXPECT_EQ(st.text.find("worker 0 stuck"), std::string::npos) << st.text;
  // It recovers as soon as its counter moves again.
  h.observe(1, 21, t0 + 1300ms);
  EXPECT_TRUE(h.check(t0 + 1300ms).healthy);
}

TEST(WorkerHealth, NoWorkerIsUnhealthy) {
  WorkerHealth h;
  EXPECT_FALSE(h.check(Clock::now()).healthy);
}

}  // namespace
}  // namespace meshgate::ctl
