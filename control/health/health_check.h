// Backend health checks of static [[service]]s (config/README.md `health_check`, docs/DATAPLANE.md
// "Backend health checks"). Three parts, each testable alone:
//
//   HealthState    one backend's up/down state from its probe results (rise / fall counting)
//   Prober         non-blocking kernel TCP connects and HTTP GETs, advanced by poll(..., 0)
//   HealthMonitor  every checked backend: jittered schedule, bounds, transitions, the effect
//                  on the services published (EndpointSpec::healthy)
//
// Probes are kernel sockets bound to a port address: they leave through that port's kernel
// twin (control/host/host_interface.h) and the port, and the replies come back the same way,
// so no worker runs anything for them. Everything here runs on the control thread, driven by
// its 1 ms loop: no thread, no lock, and a tick never blocks (sockets are non-blocking and
// poll() is given a zero timeout).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "control/config/config.h"
#include "control/snapshot/model.h"

namespace meshgate::ctl::health {

// Gateway-wide bounds. Starts per second: a connect and a few hundred bytes each cost the
// kernel next to nothing, and 1000/s covers 2000 backends at the default 2 s interval; past it
// probes wait their turn (counted) rather than flood the backends after a restart.
inline constexpr uint32_t kMaxProbesPerSecond = 1000;
// Open probe sockets: well inside the default 1024 file descriptor limit next to the admin
// server's and DPDK's own, and 256 probes timing out at the default 1 s still leave 256/s.
inline constexpr uint32_t kMaxOpenProbes = 256;
// Each probe after the first is interval_ms +- 10%, so backends checked together at start drift
// apart instead of being probed in lock step for ever.
inline constexpr double kIntervalJitter = 0.10;
// The HTTP status line is all an http check reads: "HTTP/1.1 200" is 12 bytes.
inline constexpr size_t kStatusLineBytes = 12;

// One backend's state, keepalived / HAProxy semantics: a backend starts up (a gateway that
// restarts must not drop every backend until it has probed them all), goes down after `fall`
// failures in a row and comes back after `rise` successes in a row.
struct HealthState {
  bool up = true;
  uint32_t successes = 0;  // in a row, counted while down
  uint32_t failures = 0;   // in a row, counted while up
  // Records one probe's result; true when the backend went up or down with it.
  bool record(bool ok, uint32_t rise, uint32_t fall);
};

enum class ProbeOutcome : uint8_t {
  kOk,           // connected (tcp), or a 2xx / 3xx status line (http)
  kRefused,      // RST to the SYN: nothing listens
  kTimeout,      // no connect / no status line within timeout_ms
  kHttpStatus,   // a status line outside 2xx / 3xx (detail: the code)
  kBadResponse,  // the connection closed or sent something that is not an HTTP/1 status line
  kError,        // any other socket error (detail: errno, e.g. EHOSTUNREACH)
};
const char* outcome_name(ProbeOutcome o);
inline constexpr uint32_t kProbeOutcomes = 6;

struct ProbeSpec {
  IpAddr source;  // bound before connecting; zero: the kernel picks
  IpAddr address;
  uint16_t port = 0;
  HealthCheckType type = HealthCheckType::kTcp;
  std::string path = "/";  // http
  uint32_t timeout_ms = kDefaultHealthTimeoutMs;
};

struct ProbeDone {
  uint64_t token = 0;
  ProbeOutcome outcome = ProbeOutcome::kOk;
  int detail = 0;  // errno (kError), HTTP status (kHttpStatus, kOk for http)
};

// Runs probes. An interface so that HealthMonitor's schedule and bounds are tested with
// scripted results and a fake clock; one virtual call per probe, not per packet.
class ProbeRunner {
 public:
  virtual ~ProbeRunner() = default;
  // Starts a probe identified by `token`. False when it ended at once (*done says how).
  virtual bool start(uint64_t token, const ProbeSpec& spec, uint64_t now_ms, ProbeDone* done) = 0;
  // Advances every open probe without blocking; appends those that ended.
  virtual void poll(uint64_t now_ms, std::vector<ProbeDone>& done) = 0;
  virtual size_t open() const = 0;
};

// Kernel sockets, non-blocking: connect, then (http) send the request and read the status line.
class Prober final : public ProbeRunner {
 public:
  Prober() = default;
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;
  ~Prober() override;
  bool start(uint64_t token, const ProbeSpec& spec, uint64_t now_ms, ProbeDone* done) override;
  void poll(uint64_t now_ms, std::vector<ProbeDone>& done) override;
  size_t open() const override { return probes_.size(); }

 private:
  struct Probe {
    uint64_t token = 0;
    int fd = -1;
    bool http = false;
    bool connected = false;
    std::string request;  // http: what is left to send
    std::string reply;    // http: the status line so far
    uint64_t deadline_ms = 0;
  };
  // True when the probe ended (*done filled).
  bool advance(Probe& p, short revents, ProbeDone* done);
  std::vector<Probe> probes_;
};

// The HTTP request of an http check: GET `path`, Host naming the backend, Connection: close.
std::string http_request(const IpAddr& address, uint16_t port, const std::string& path);
// The status code of an HTTP/1.x status line's first kStatusLineBytes, or -1.
int http_status(std::string_view line);

// One checked backend, as the monitor reports it.
struct BackendHealthView {
  std::string service;
  std::string backend;  // "address:port" ("[v6]:port"), as /stats and /config_dump write it
  bool up = true;
  uint32_t successes = 0;
  uint32_t failures = 0;
  ProbeOutcome last = ProbeOutcome::kOk;
  bool probed = false;  // a probe has finished
  HealthCheckType type = HealthCheckType::kTcp;
  uint16_t probe_port = 0;
};

class HealthMonitor {
 public:
  struct Limits {
    uint32_t max_starts_per_s = kMaxProbesPerSecond;
    uint32_t max_open = kMaxOpenProbes;
  };
  // One backend of a service with a health_check.
  struct Target {
    std::string service;
    IpAddr address;   // the backend, as the service spec lists it
    uint16_t port = 0;
    ProbeSpec probe;  // where the probe goes (health_check.port or the backend's)
    HealthCheckConfig check;
  };

  // The backends of `cfg`'s services that have a health_check, probed from the address of the
  // port (with a host_interface) they are on-link of; nullptr when no service has one.
  static std::unique_ptr<HealthMonitor> create(const Config& cfg);
  HealthMonitor(std::vector<Target> targets, std::unique_ptr<ProbeRunner> runner, Limits limits,
                uint64_t seed);

  // Starts the probes that are due (first ones spread over each interval, then interval +-10%),
  // within the bounds, and records the ones that ended. True when a backend went up or down:
  // the services must be published again (apply() then marks them). Never blocks.
  bool tick(uint64_t now_ms);
  // Sets EndpointSpec::healthy of every checked backend of the static services in `specs` to its
  // state, and keeps a copy of `specs` for services().
  void apply(std::vector<ServiceSpec>& specs);
  // The list last given to apply(): what a transition republishes.
  const std::vector<ServiceSpec>& services() const { return services_; }

  // After a config reload: each backend that `previous` checked for the same service keeps its
  // state and counts (a backend that is down stays down until it passes `rise` probes), so a
  // reload moves no flows by itself; the probe counters continue from `previous`'s. Call before
  // the first tick().
  void adopt_states(const HealthMonitor& previous);

  std::vector<BackendHealthView> view() const;
  uint64_t checks(ProbeOutcome o) const { return checks_[uint32_t(o)]; }
  uint64_t deferred() const { return deferred_; }  // probes that waited for a bound
  uint64_t started() const { return started_; }

 private:
  struct Backend {
    Target target;
    std::string backend;  // "address:port"
    HealthState state;
    ProbeOutcome last = ProbeOutcome::kOk;
    int last_detail = 0;
    bool probed = false;
    bool in_flight = false;
    bool due_while_in_flight = false;
    bool deferred = false;  // counted once per deferred probe
  };
  using Due = std::pair<uint64_t, uint32_t>;  // (due ms, backend index)

  uint64_t next_interval(const Backend& b);
  // The start-rate bound: at most max_starts_per_s starts in any 1000 ms.
  bool may_start(uint64_t now_ms) const;
  // Records a finished probe; true on a transition.
  bool finish(const ProbeDone& d);

  std::vector<Backend> backends_;
  std::unordered_map<std::string, std::vector<uint32_t>> by_service_;  // backend indices
  std::unique_ptr<ProbeRunner> runner_;
  Limits limits_;
  std::mt19937_64 rng_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  bool scheduled_ = false;
  std::vector<uint64_t> recent_starts_;  // ring of the last max_starts_per_s start times
  size_t recent_next_ = 0;
  std::vector<ServiceSpec> services_;
  std::vector<ProbeDone> done_;
  uint64_t checks_[kProbeOutcomes] = {};
  uint64_t deferred_ = 0;
  uint64_t started_ = 0;
};

}  // namespace meshgate::ctl::health
