#include "control/health/health_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "control/common/log.h"
#include "control/snapshot/stat_registry.h"

namespace meshgate::ctl::health {
namespace {

socklen_t to_sockaddr(const IpAddr& a, uint16_t port, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof *ss);
  if (a.is_v4()) {
    auto* s4 = reinterpret_cast<sockaddr_in*>(ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    std::memcpy(&s4->sin_addr, a.v4_ptr(), 4);
    return sizeof *s4;
  }
  auto* s6 = reinterpret_cast<sockaddr_in6*>(ss);
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(port);
  std::memcpy(&s6->sin6_addr, a.b, 16);
  return sizeof *s6;
}

ProbeOutcome outcome_of_errno(int err) {
  return err == ECONNREFUSED ? ProbeOutcome::kRefused
         : err == ETIMEDOUT  ? ProbeOutcome::kTimeout
                             : ProbeOutcome::kError;
}

}  // namespace

bool HealthState::record(bool ok, uint32_t rise, uint32_t fall) {
  if (up) {
    successes = 0;
    if (ok) {
      failures = 0;
      return false;
    }
    if (++failures < fall) return false;
    up = false;
    failures = 0;
    return true;
  }
  failures = 0;
  if (!ok) {
    successes = 0;
    return false;
  }
  if (++successes < rise) return false;
  up = true;
  successes = 0;
  return true;
}

const char* outcome_name(ProbeOutcome o) {
  switch (o) {
    case ProbeOutcome::kOk: return "ok";
    case ProbeOutcome::kRefused: return "refused";
    case ProbeOutcome::kTimeout: return "timeout";
    case ProbeOutcome::kHttpStatus: return "http_status";
    case ProbeOutcome::kBadResponse: return "bad_response";
    case ProbeOutcome::kError: return "error";
  }
  return "error";
}

std::string http_request(const IpAddr& address, uint16_t port, const std::string& path) {
  // RFC 9110 §7.2: Host carries the authority; an IPv6 literal in brackets (RFC 3986 §3.2.2).
  return "GET " + path + " HTTP/1.1\r\nHost: " + endpoint_str(address, port) +
         "\r\nUser-Agent: meshgate-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n";
}

int http_status(std::string_view line) {
  // RFC 9112 §4: status-line = HTTP-version SP status-code SP [reason-phrase]
  if (line.size() < kStatusLineBytes || line.substr(0, 7) != "HTTP/1." || line[8] != ' ') return -1;
  if (line[7] < '0' || line[7] > '9') return -1;
  int code = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return -1;
    code = code * 10 + (line[i] - '0');
  }
  return code >= 100 ? code : -1;
}

Prober::~Prober() {
  for (const Probe& p : probes_) ::close(p.fd);
}

bool Prober::start(uint64_t token, const ProbeSpec& spec, uint64_t now_ms, ProbeDone* done) {
  *done = ProbeDone{token, ProbeOutcome::kError, 0};
  const int family = spec.address.is_v4() ? AF_INET : AF_INET6;
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) {
    done->detail = errno;
    return false;
  }
  auto fail = [&](int err) {
    ::close(fd);
    done->outcome = outcome_of_errno(err);
    done->detail = err;
    return false;
  };
  sockaddr_storage ss;
  if (!spec.source.is_zero()) {
    const socklen_t len = to_sockaddr(spec.source, 0, &ss);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return fail(errno);
  }
  // No Nagle: the request goes in one write; the answer is read as it comes.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const socklen_t len = to_sockaddr(spec.address, spec.port, &ss);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
    return fail(errno);
  }
  Probe p;
  p.token = token;
  p.fd = fd;
  p.http = spec.type == HealthCheckType::kHttp;
  if (p.http) p.request = http_request(spec.address, spec.port, spec.path);
  p.deadline_ms = now_ms + spec.timeout_ms;
  probes_.push_back(std::move(p));
  return true;
}

bool Prober::advance(Probe& p, short revents, ProbeDone* done) {
  *done = ProbeDone{p.token, ProbeOutcome::kOk, 0};
  if (!p.connected) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return false;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      done->outcome = outcome_of_errno(err);
      done->detail = err;
      return true;
    }
    p.connected = true;
    if (!p.http) return true;  // tcp: the handshake is the check
  }
  while (!p.request.empty()) {
    const ssize_t n = ::send(p.fd, p.request.data(), p.request.size(), MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0) {
      done->outcome = outcome_of_errno(errno);
      done->detail = errno;
      return true;
    }
    p.request.erase(0, size_t(n));
  }
  char buf[256];
  for (;;) {
    const ssize_t n = ::recv(p.fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0) {
      done->outcome = outcome_of_errno(errno);
      done->detail = errno;
      return true;
    }
    if (n == 0) break;  // closed before a whole status line
    p.reply.append(buf, std::min(size_t(n), kStatusLineBytes - p.reply.size()));
    if (p.reply.size() >= kStatusLineBytes) break;
  }
  const int code = http_status(p.reply);
  done->detail = code;
  done->outcome = code < 0                     ? ProbeOutcome::kBadResponse
                  : code >= 200 && code < 400 ? ProbeOutcome::kOk
                                               : ProbeOutcome::kHttpStatus;
  return true;
}

void Prober::poll(uint64_t now_ms, std::vector<ProbeDone>& done) {
  if (probes_.empty()) return;
  std::vector<pollfd> fds(probes_.size());
  for (size_t i = 0; i < probes_.size(); ++i) {
    fds[i] = pollfd{probes_[i].fd, short(probes_[i].connected ? POLLIN : POLLOUT), 0};
    if (probes_[i].connected && !probes_[i].request.empty()) fds[i].events |= POLLOUT;
  }
  if (::poll(fds.data(), fds.size(), 0) < 0) return;  // EINTR: the next tick polls again
  size_t keep = 0;
  for (size_t i = 0; i < probes_.size(); ++i) {
    Probe& p = probes_[i];
    ProbeDone d;
    bool ended = fds[i].revents != 0 && advance(p, fds[i].revents, &d);
    if (!ended && now_ms >= p.deadline_ms) {
      d = ProbeDone{p.token, ProbeOutcome::kTimeout, 0};
      ended = true;
    }
    if (ended) {
      ::close(p.fd);
      done.push_back(d);
      continue;
    }
    if (keep != i) probes_[keep] = std::move(p);
    ++keep;
  }
  probes_.resize(keep);
}

std::unique_ptr<HealthMonitor> HealthMonitor::create(const Config& cfg) {
  std::vector<Target> targets;
  for (const ServiceConfig& s : cfg.services) {
    if (!s.health_check.enabled) continue;
    for (const BackendConfig& b : s.backends) {
      Target& t = targets.emplace_back();
      t.service = s.name;
      t.address = b.address;
      t.port = b.port;
      t.check = s.health_check;
      t.probe.address = b.address;
      t.probe.port = s.health_check.port ? s.health_check.port : b.port;
      t.probe.type = s.health_check.type;
      t.probe.path = s.health_check.path;
      t.probe.timeout_ms = s.health_check.timeout_ms;
      // From the port whose kernel twin reaches the backend (the validator makes sure one does).
      for (const PortConfig& p : cfg.ports) {
        if (p.host_interface.empty()) continue;
        for (const IpPrefix& a : p.addresses) {
          if (t.probe.source.is_zero() && a.addr.is_v4() == b.address.is_v4() &&
              a.contains(b.address)) {
            t.probe.source = a.addr;
          }
        }
      }
    }
  }
  if (targets.empty()) return nullptr;
  std::random_device rd;
  return std::make_unique<HealthMonitor>(std::move(targets), std::make_unique<Prober>(), Limits{},
                                         uint64_t(rd()) << 32 | rd());
}

HealthMonitor::HealthMonitor(std::vector<Target> targets, std::unique_ptr<ProbeRunner> runner,
                             Limits limits, uint64_t seed)
    : runner_(std::move(runner)), limits_(limits), rng_(seed),
      recent_starts_(std::max<uint32_t>(1, limits.max_starts_per_s), 0) {
  for (Target& t : targets) {
    Backend b;
    b.backend = endpoint_str(t.address, t.port);
    b.target = std::move(t);
    by_service_[b.target.service].push_back(uint32_t(backends_.size()));
    backends_.push_back(std::move(b));
  }
}

uint64_t HealthMonitor::next_interval(const Backend& b) {
  const double interval = b.target.check.interval_ms;
  std::uniform_real_distribution<double> jitter(1.0 - kIntervalJitter, 1.0 + kIntervalJitter);
  return std::max<uint64_t>(1, uint64_t(interval * jitter(rng_)));
}

bool HealthMonitor::may_start(uint64_t now_ms) const {
  if (started_ < recent_starts_.size()) return true;
  // The oldest of the last max_starts_per_s starts is the one recent_next_ overwrites next.
  return now_ms >= recent_starts_[recent_next_] + 1000;
}

bool HealthMonitor::finish(const ProbeDone& d) {
  Backend& b = backends_[d.token];
  b.in_flight = false;
  b.probed = true;
  b.last = d.outcome;
  b.last_detail = d.detail;
  ++checks_[uint32_t(d.outcome)];
  const bool ok = d.outcome == ProbeOutcome::kOk;
  const uint32_t count = ok ? b.state.successes + 1 : b.state.failures + 1;
  const bool changed = b.state.record(ok, b.target.check.rise, b.target.check.fall);
  if (changed) {
    std::string reason = outcome_name(d.outcome);
    if (d.outcome == ProbeOutcome::kHttpStatus) reason += "_" + std::to_string(d.detail);
    if (d.outcome == ProbeOutcome::kError) reason += std::string("_") + std::strerror(d.detail);
    log(b.state.up ? LogLevel::kInfo : LogLevel::kWarn, b.state.up ? "backend_up" : "backend_down",
        "service=%s backend=%s check=%s reason=\"%s\" consecutive=%u", b.target.service.c_str(),
        b.backend.c_str(), b.target.check.type == HealthCheckType::kHttp ? "http" : "tcp",
        reason.c_str(), count);
  }
  return changed;
}

bool HealthMonitor::tick(uint64_t now_ms) {
  if (!scheduled_) {
    // The first probe of each backend somewhere in its first interval: a gateway with many
    // backends does not probe them all in its first millisecond.
    scheduled_ = true;
    for (uint32_t i = 0; i < backends_.size(); ++i) {
      std::uniform_int_distribution<uint64_t> first(0, backends_[i].target.check.interval_ms - 1);
      due_.push({now_ms + first(rng_), i});
    }
  }
  bool changed = false;
  done_.clear();
  runner_->poll(now_ms, done_);
  for (const ProbeDone& d : done_) {
    changed |= finish(d);
    Backend& b = backends_[d.token];
    if (b.due_while_in_flight) {
      b.due_while_in_flight = false;
      due_.push({now_ms, uint32_t(d.token)});
    }
  }
  while (!due_.empty() && due_.top().first <= now_ms) {
    const uint32_t i = due_.top().second;
    Backend& b = backends_[i];
    if (b.in_flight) {
      // The last probe has not ended: the next one starts when it does.
      due_.pop();
      b.due_while_in_flight = true;
      continue;
    }
    if (!may_start(now_ms) || runner_->open() >= limits_.max_open) {
      // Earliest due first: the others wait behind it.
      if (!b.deferred) ++deferred_;
      b.deferred = true;
      break;
    }
    due_.pop();
    b.deferred = false;
    recent_starts_[recent_next_] = now_ms;
    recent_next_ = (recent_next_ + 1) % recent_starts_.size();
    ++started_;
    due_.push({now_ms + next_interval(b), i});
    ProbeDone d;
    if (runner_->start(i, b.target.probe, now_ms, &d)) {
      b.in_flight = true;
    } else {
      changed |= finish(d);
    }
  }
  return changed;
}

void HealthMonitor::apply(std::vector<ServiceSpec>& specs) {
  for (ServiceSpec& s : specs) {
    if (s.source != "config") continue;
    const auto it = by_service_.find(s.name);
    if (it == by_service_.end()) continue;
    for (EndpointSpec& e : s.endpoints) {
      for (const uint32_t i : it->second) {
        const Backend& b = backends_[i];
        if (b.target.port == e.port && b.target.address == e.address) e.healthy = b.state.up;
      }
    }
  }
  services_ = specs;
}

void HealthMonitor::adopt_states(const HealthMonitor& previous) {
  for (Backend& b : backends_) {
    const auto it = previous.by_service_.find(b.target.service);
    if (it == previous.by_service_.end()) continue;
    for (const uint32_t i : it->second) {
      const Backend& old = previous.backends_[i];
      if (old.target.address == b.target.address && old.target.port == b.target.port) {
        b.state = old.state;
        b.last = old.last;
        b.last_detail = old.last_detail;
        b.probed = old.probed;
      }
    }
  }
  // Counters are totals since start: a reload does not take them back.
  for (uint32_t o = 0; o < kProbeOutcomes; ++o) checks_[o] += previous.checks_[o];
  deferred_ += previous.deferred_;
  started_ += previous.started_;
}

std::vector<BackendHealthView> HealthMonitor::view() const {
  std::vector<BackendHealthView> out;
  out.reserve(backends_.size());
  for (const Backend& b : backends_) {
    out.push_back(BackendHealthView{b.target.service, b.backend, b.state.up, b.state.successes,
                                    b.state.failures, b.last, b.probed, b.target.check.type,
                                    b.target.probe.port});
  }
  return out;
}

}  // namespace meshgate::ctl::health
