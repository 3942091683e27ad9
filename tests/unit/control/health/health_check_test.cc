// Backend health checks: the up/down state machine as a table, the prober against real kernel
// listeners on 127.0.0.1, and the monitor's schedule, bounds and effect on the published
// services with scripted probe results and a fake clock.
#include "control/health/health_check.h"
#include "dataplane/snapshot/snapshot.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace meshgate::ctl::health {
namespace {

IpAddr ip(const char* s) { return *IpAddr::parse(s); }

// ---- the state machine ----

struct StateCase {
  const char* name;
  uint32_t rise;
  uint32_t fall;
  const char* results;  // 'o' ok, 'x' failed, in order
  const char* states;   // 'U' up, 'D' down after each result
};

const StateCase kStateCases[] = {
    {"starts_up_and_stays_up_on_success", 2, 3, "ooo", "UUU"},
    {"down_after_fall_failures_in_a_row", 2, 3, "xxx", "UUD"},
    {"a_success_restarts_the_failure_count", 2, 3, "xxoxxox", "UUUUUUU"},
    {"up_after_rise_successes_in_a_row", 2, 3, "xxxoo", "UUDDU"},
    {"a_failure_restarts_the_success_count", 2, 3, "xxxoxoo", "UUDDDDU"},
    {"fall_one_acts_on_the_first_failure", 1, 1, "xoxo", "DUDU"},
    {"failures_while_down_stay_down", 3, 2, "xxxxxooo", "UDDDDDDU"},
    {"down_again_needs_fall_new_failures", 1, 2, "xxoxx", "UDUUD"},
};

class HealthStateTest : public testing::TestWithParam<StateCase> {};

TEST_P(HealthStateTest, FollowsRiseAndFall) {
  const StateCase& c = GetParam();
  HealthState s;
  EXPECT_TRUE(s.up);
  bool was_up = true;
  for (size_t i = 0; c.results[i]; ++i) {
    const bool changed = s.record(c.results[i] == 'o', c.rise, c.fall);
    EXPECT_EQ(s.up, c.states[i] == 'U') << "after result " << i;
    EXPECT_EQ(changed, s.up != was_up) << "after result " << i;
    was_up = s.up;
  }
}

INSTANTIATE_TEST_SUITE_P(Health, HealthStateTest, testing::ValuesIn(kStateCases),
                         [](const testing::TestParamInfo<StateCase>& i) {
                           return std::string(i.param.name);
                         });

TEST(HttpStatus, ReadsTheCodeOfAnHttp1StatusLine) {
  EXPECT_EQ(http_status("HTTP/1.1 200 OK\r\n"), 200);
  EXPECT_EQ(http_status("HTTP/1.0 302"), 302);
  EXPECT_EQ(http_status("HTTP/1.1 500 Internal"), 500);
  EXPECT_EQ(http_status("HTTP/1.1 20"), -1);     // cut short
  EXPECT_EQ(http_status("HTTP/2 200 OK"), -1);   // not HTTP/1.x
  EXPECT_EQ(http_status("SSH-2.0-OpenSSH"), -1);
  EXPECT_EQ(http_status("HTTP/1.1 2x0 OK"), -1);
}

TEST(HttpRequest, NamesTheBackendAndClosesTheConnection) {
  EXPECT_EQ(http_request(ip("192.0.2.10"), 8080, "/healthz"),
            "GET /healthz HTTP/1.1\r\nHost: 192.0.2.10:8080\r\nUser-Agent: meshgate-health-check"
            "\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  EXPECT_NE(http_request(ip("2001:db8::1"), 80, "/").find("Host: [2001:db8::1]:80\r\n"),
            std::string::npos);
}

// ---- the prober against kernel sockets ----

// A TCP socket on 127.0.0.1 with a kernel-chosen port; listening unless `listen` is false
// (then a SYN to it is answered with RST).
struct Listener {
  int fd = -1;
  uint16_t port = 0;
  explicit Listener(bool listen = true) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    if (listen) {
      EXPECT_EQ(::listen(fd, 16), 0);
    }
  }
  ~Listener() { ::close(fd); }
};

// Answers each connection with `reply` after reading the request's headers; records the last
// request. `reply` empty: accepts and never answers.
class HttpServer {
 public:
  explicit HttpServer(std::string reply) : reply_(std::move(reply)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~HttpServer() {
    stop_ = true;
    ::shutdown(listener_.fd, SHUT_RDWR);
    thread_.join();
    for (int fd : held_) ::close(fd);
  }
  uint16_t port() const { return listener_.port; }
  std::string request() {
    std::lock_guard<std::mutex> g(mu_);
    return request_;
  }

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept(listener_.fd, nullptr, nullptr);
      if (c < 0) return;
      if (reply_.empty()) {
        held_.push_back(c);
        continue;
      }
      std::string req;
      char buf[512];
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, size_t(n));
      }
      {
        std::lock_guard<std::mutex> g(mu_);
        request_ = req;
      }
      ::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  Listener listener_;
  std::string reply_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string request_;
  std::vector<int> held_;
};

uint64_t now_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// Runs one probe to its end (bounded by the probe's own timeout plus slack).
ProbeDone run_probe(const ProbeSpec& spec) {
  Prober p;
  ProbeDone d;
  if (!p.start(7, spec, now_ms(), &d)) return d;
  std::vector<ProbeDone> done;
  const uint64_t give_up = now_ms() + spec.timeout_ms + 2000;
  while (done.empty() && now_ms() < give_up) {
    p.poll(now_ms(), done);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(done.size(), 1u);
  EXPECT_EQ(p.open(), 0u);
  return done.empty() ? ProbeDone{0, ProbeOutcome::kError, -1} : done[0];
}

ProbeSpec spec(uint16_t port, HealthCheckType type, uint32_t timeout_ms = 1000) {
  ProbeSpec s;
  s.source = ip("127.0.0.1");
  s.address = ip("127.0.0.1");
  s.port = port;
  s.type = type;
  s.path = "/healthz";
  s.timeout_ms = timeout_ms;
  return s;
}

TEST(Prober, TcpConnectToAListenerIsUp) {
  Listener l;
  const ProbeDone d = run_probe(spec(l.port, HealthCheckType::kTcp));
  EXPECT_EQ(d.token, 7u);
  EXPECT_EQ(d.outcome, ProbeOutcome::kOk);
}

TEST(Prober, TcpConnectRefusedIsRefused) {
  Listener closed(false);  // bound, not listening: the kernel answers the SYN with RST
  EXPECT_EQ(run_probe(spec(closed.port, HealthCheckType::kTcp)).outcome, ProbeOutcome::kRefused);
}

TEST(Prober, Http200IsUpAndTheRequestNamesHostAndPath) {
  HttpServer srv("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  const ProbeDone d = run_probe(spec(srv.port(), HealthCheckType::kHttp));
  EXPECT_EQ(d.outcome, ProbeOutcome::kOk);
  EXPECT_EQ(d.detail, 200);
  const std::string req = srv.request();
  EXPECT_EQ(req.rfind("GET /healthz HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("Host: 127.0.0.1:" + std::to_string(srv.port()) + "\r\n"), std::string::npos);
  EXPECT_NE(req.find("Connection: close\r\n"), std::string::npos);
}

TEST(Prober, Http301IsUp) {
  HttpServer srv("HTTP/1.1 301 Moved Permanently\r\nLocation: /x\r\n\r\n");
  EXPECT_EQ(run_probe(spec(srv.port(), HealthCheckType::kHttp)).outcome, ProbeOutcome::kOk);
}

TEST(Prober, Http500IsDown) {
  HttpServer srv("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n");
  const ProbeDone d = run_probe(spec(srv.port(), HealthCheckType::kHttp));
  EXPECT_EQ(d.outcome, ProbeOutcome::kHttpStatus);
  EXPECT_EQ(d.detail, 500);
}

TEST(Prober, NotHttpIsABadResponse) {
  HttpServer srv("SSH-2.0-OpenSSH_9.2\r\n");
  EXPECT_EQ(run_probe(spec(srv.port(), HealthCheckType::kHttp)).outcome,
            ProbeOutcome::kBadResponse);
}

TEST(Prober, AListenerThatNeverAnswersTimesOutAfterTimeoutMs) {
  HttpServer srv("");  // accepts, never answers
  const uint64_t t0 = now_ms();
  EXPECT_EQ(run_probe(spec(srv.port(), HealthCheckType::kHttp, 200)).outcome,
            ProbeOutcome::kTimeout);
  const uint64_t took = now_ms() - t0;
  EXPECT_GE(took, 200u);
  EXPECT_LT(took, 1500u);
}

TEST(Prober, ABadSourceAddressFailsAtOnce) {
  Listener l;
  ProbeSpec s = spec(l.port, HealthCheckType::kTcp);
  s.source = ip("192.0.2.77");  // not an address of this host: bind fails
  Prober p;
  ProbeDone d;
  EXPECT_FALSE(p.start(3, s, now_ms(), &d));
  EXPECT_EQ(d.outcome, ProbeOutcome::kError);
  EXPECT_EQ(d.detail, EADDRNOTAVAIL);
  EXPECT_EQ(p.open(), 0u);
}

// ---- the monitor, with scripted results ----

// Each start is recorded; a probe ends at the next poll with the result scripted for its
// backend (ok unless set), or stays open while `hold` is set.
class FakeRunner final : public ProbeRunner {
 public:
  struct Start {
    uint64_t token;
    uint64_t at_ms;
  };
  std::vector<Start> starts;
  std::map<uint64_t, ProbeOutcome> result;  // by token (backend index)
  bool hold = false;

  bool start(uint64_t token, const ProbeSpec&, uint64_t now_ms, ProbeDone*) override {
    starts.push_back({token, now_ms});
    open_.push_back(token);
    return true;
  }
  void poll(uint64_t, std::vector<ProbeDone>& done) override {
    if (hold) return;
    for (uint64_t t : open_) {
      const auto it = result.find(t);
      done.push_back({t, it == result.end() ? ProbeOutcome::kOk : it->second, 0});
    }
    open_.clear();
  }
  size_t open() const override { return open_.size(); }

 private:
  std::vector<uint64_t> open_;
};

std::vector<HealthMonitor::Target> targets(size_t n, uint32_t interval_ms, uint32_t rise = 2,
                                           uint32_t fall = 3) {
  std::vector<HealthMonitor::Target> out;
  for (size_t i = 0; i < n; ++i) {
    HealthMonitor::Target t;
    t.service = "web";
    t.address = IpAddr::v4(0xc6336400u + uint32_t(i) + 10);  // 198.51.100.10 + i
    t.port = 8080;
    t.check.enabled = true;
    t.check.interval_ms = interval_ms;
    t.check.timeout_ms = interval_ms / 2;
    t.check.rise = rise;
    t.check.fall = fall;
    t.probe.address = t.address;
    t.probe.port = t.port;
    out.push_back(t);
  }
  return out;
}

TEST(HealthMonitor, FirstProbesSpreadOverTheIntervalThenIntervalPlusOrMinusTenPercent) {
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  HealthMonitor m(targets(200, 1000), std::move(runner), {}, 42);
  const uint64_t t0 = 5000;
  for (uint64_t t = t0; t < t0 + 20000; ++t) m.tick(t);
  std::map<uint64_t, std::vector<uint64_t>> by_backend;
  for (const auto& s : r->starts) by_backend[s.token].push_back(s.at_ms);
  ASSERT_EQ(by_backend.size(), 200u);
  uint64_t first_min = UINT64_MAX, first_max = 0;
  for (const auto& [token, at] : by_backend) {
    first_min = std::min(first_min, at[0]);
    first_max = std::max(first_max, at[0]);
    EXPECT_LT(at[0], t0 + 1000);
    for (size_t k = 1; k < at.size(); ++k) {
      EXPECT_GE(at[k] - at[k - 1], 900u);
      EXPECT_LE(at[k] - at[k - 1], 1101u);  // +10%, and the 1 ms tick
    }
  }
  // Spread: 200 backends do not all start at once, nor all in one corner of the interval.
  EXPECT_LT(first_min, t0 + 100);
  EXPECT_GT(first_max, t0 + 900);
}

TEST(HealthMonitor, StartsAtMostTheRateBoundPerSecondAndCountsWhatWaits) {
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  HealthMonitor::Limits limits;
  limits.max_starts_per_s = 50;
  HealthMonitor m(targets(400, 1000), std::move(runner), limits, 7);  // wants 400/s
  for (uint64_t t = 0; t < 10000; ++t) m.tick(t);
  ASSERT_GT(r->starts.size(), 400u);
  // In any 1000 ms window (sliding over every start): at most 50.
  for (size_t i = 50; i < r->starts.size(); ++i) {
    EXPECT_GE(r->starts[i].at_ms, r->starts[i - 50].at_ms + 1000) << "start " << i;
  }
  EXPECT_LE(r->starts.size(), 50u * 10);
  EXPECT_GT(m.deferred(), 0u);
  // Earliest due first: every backend got probed despite the bound.
  std::map<uint64_t, int> seen;
  for (const auto& s : r->starts) ++seen[s.token];
  EXPECT_EQ(seen.size(), 400u);
}

TEST(HealthMonitor, KeepsAtMostMaxOpenProbes) {
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  r->hold = true;  // nothing ends
  HealthMonitor::Limits limits;
  limits.max_open = 16;
  HealthMonitor m(targets(100, 1000), std::move(runner), limits, 9);
  for (uint64_t t = 0; t < 3000; ++t) m.tick(t);
  EXPECT_EQ(r->starts.size(), 16u);
  EXPECT_EQ(r->open(), 16u);
  EXPECT_GT(m.deferred(), 0u);
}

TEST(HealthMonitor, AProbeNeverOverlapsTheLastOneOfItsBackend) {
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  r->hold = true;
  HealthMonitor m(targets(1, 100), std::move(runner), {}, 1);
  for (uint64_t t = 0; t < 500; ++t) m.tick(t);
  EXPECT_EQ(r->starts.size(), 1u);  // held open: no second probe
  r->hold = false;
  m.tick(500);  // ends; the overdue probe starts at once
  EXPECT_EQ(r->starts.size(), 2u);
  EXPECT_EQ(r->starts[1].at_ms, 500u);
}

ServiceSpec web_spec(size_t n) {
  ServiceSpec s;
  s.name = "web";
  s.source = "config";
  for (size_t i = 0; i < n; ++i) {
    EndpointSpec e;
    e.address = IpAddr::v4(0xc6336400u + uint32_t(i) + 10);
    e.port = 8080;
    s.endpoints.push_back(e);
  }
  return s;
}

TEST(HealthMonitor, DownAfterFallFailuresUpAfterRiseAndAppliedToTheServices) {
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  HealthMonitor m(targets(3, 100, /*rise=*/2, /*fall=*/3), std::move(runner), {}, 3);
  ServiceSpec other = web_spec(3);
  other.name = "other";  // same backends, not checked
  std::vector<ServiceSpec> specs{web_spec(3), other};
  m.apply(specs);
  r->result[1] = ProbeOutcome::kRefused;
  std::vector<uint64_t> down_at;
  uint64_t t = 0;
  for (; t < 2000 && down_at.empty(); ++t) {
    if (m.tick(t)) down_at.push_back(t);
  }
  ASSERT_EQ(down_at.size(), 1u);
  // Three probes: the first within the first interval, then two more intervals (+10%).
  EXPECT_LE(down_at[0], 100u + 2 * 110u + 1);
  auto v = m.view();
  EXPECT_TRUE(v[0].up);
  EXPECT_FALSE(v[1].up);
  EXPECT_EQ(v[1].last, ProbeOutcome::kRefused);
  EXPECT_GE(m.checks(ProbeOutcome::kRefused), 3u);
  m.apply(specs);
  EXPECT_TRUE(specs[0].endpoints[0].healthy);
  EXPECT_FALSE(specs[0].endpoints[1].healthy);
  EXPECT_TRUE(specs[0].endpoints[2].healthy);
  for (const auto& e : specs[1].endpoints) EXPECT_TRUE(e.healthy);  // another service's
  EXPECT_FALSE(m.services()[0].endpoints[1].healthy);

  r->result.erase(1);
  const uint64_t back_from = t;
  bool up = false;
  for (; t < back_from + 1000 && !up; ++t) up = m.tick(t);
  ASSERT_TRUE(up);
  EXPECT_LE(t - back_from, 2 * 110u + 2);
  m.apply(specs);
  EXPECT_TRUE(specs[0].endpoints[1].healthy);
}

// Every backend of a service down: its VIP is no longer usable, so [bgp] withdraws it (the
// runtime announces vip_sets().usable); one back up and it is announced again.
TEST(HealthMonitor, AllBackendsDownTakeTheVipOutOfTheUsableOnes) {
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  HealthMonitor m(targets(2, 100, /*rise=*/1, /*fall=*/1), std::move(runner), {}, 5);
  ServiceSpec web = web_spec(2);
  web.vip = ip("203.0.113.10");
  ServiceSpec other = web_spec(2);
  other.name = "other";  // same backends, not checked: stays usable
  other.vip = ip("203.0.113.11");
  std::vector<ServiceSpec> specs{web, other};
  m.apply(specs);
  const dp::Snapshot empty;
  EXPECT_EQ(vip_sets(specs, empty).usable.size(), 2u);
  r->result[0] = r->result[1] = ProbeOutcome::kTimeout;
  uint64_t t = 0;
  auto down = [&m] {
    for (const auto& b : m.view()) {
      if (b.up) return false;
    }
    return true;
  };
  for (; t < 1000 && !down(); ++t) m.tick(t);
  ASSERT_TRUE(down());
  m.apply(specs);
  VipSets v = vip_sets(specs, empty);
  EXPECT_EQ(v.all, (std::vector<IpAddr>{ip("203.0.113.10"), ip("203.0.113.11")}));
  EXPECT_EQ(v.usable, (std::vector<IpAddr>{ip("203.0.113.11")}));
  r->result.erase(0);
  bool up = false;
  for (const uint64_t from = t; t < from + 1000 && !up; ++t) up = m.tick(t);
  ASSERT_TRUE(up);
  m.apply(specs);
  EXPECT_EQ(vip_sets(specs, empty).usable.size(), 2u);
}

TEST(HealthMonitor, AReloadKeepsTheStatesOfTheBackendsItStillChecks) {
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  HealthMonitor old(targets(2, 100, /*rise=*/2, /*fall=*/1), std::move(runner), {}, 5);
  r->result[0] = ProbeOutcome::kTimeout;
  for (uint64_t t = 0; t < 300; ++t) old.tick(t);
  ASSERT_FALSE(old.view()[0].up);
  // The reloaded config: backend 0 still checked, backend 1 gone, a new backend 2.
  std::vector<HealthMonitor::Target> next = targets(3, 100);
  next.erase(next.begin() + 1);
  HealthMonitor reloaded(next, std::make_unique<FakeRunner>(), {}, 6);
  reloaded.adopt_states(old);
  const auto v = reloaded.view();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FALSE(v[0].up);  // still down: no flows move because of the reload
  EXPECT_EQ(v[0].last, ProbeOutcome::kTimeout);
  EXPECT_TRUE(v[1].up);   // a new backend starts up
  EXPECT_FALSE(v[1].probed);
}

}  // namespace
}  // namespace meshgate::ctl::health
