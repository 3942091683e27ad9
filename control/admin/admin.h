// The admin API as the runtime drives it: the HTTP server (server.h), the bridge its handlers
// post to (bridge.h), and the control-thread half that answers them each control-loop tick:
// stats, metrics, config dump, worker health and flow dumps.
//
// Threads: every method here runs on the control thread, except bridge() whose own methods say
// which thread may call them. Answers are built on the control thread only, so they may read
// the current snapshot, the stat registry and worker counters, and post flow-dump requests to
// workers (never reading a worker's flows directly).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/admin/bridge.h"
#include "control/admin/health.h"
#include "control/admin/prometheus.h"
#include "control/admin/server.h"
#include "control/certs/cert_info.h"
#include "control/common/result.h"
#include "control/config/config.h"
#include "control/mesh/mesh_model.h"
#include "control/snapshot/model.h"
#include "control/snapshot/publisher.h"
#include "control/snapshot/stat_registry.h"
#include "control/stats/rate_estimator.h"
#include "dataplane/worker/flow_dump.h"
#include "dataplane/worker/worker.h"

namespace meshgate::ctl {

// One flow of GET /flows: worker, protocol, client, vip, local (the fullnat source address:port,
// "" in other modes), backend, service, mode, state, age_ms (since the flow's first packet, on
// the worker's clock), expires_in_ms. Any thread.
nlohmann::json flow_record_json(const dp::FlowRecord& f,
                                const std::vector<StatRegistry::Name>& names);

// How long GET /flows waits for the workers before answering with what arrived.
inline constexpr std::chrono::milliseconds kFlowDumpWait{1000};

class Admin {
 public:
  using Clock = std::chrono::steady_clock;

  // Binds [admin] listen and starts the HTTP threads. Until start_serving(), queries other than
  // /ready answer 503 (starting). `cfg`, `registry` and `publisher` must outlive the Admin.
  // `cfg` is read on the control thread per query: a config reload that replaces its contents
  // (GatewayRun::reload) shows in the next /config_dump.
  static Result<std::unique_ptr<Admin>> start(const Config& cfg, const StatRegistry& registry,
                                              const SnapshotPublisher& publisher);
  ~Admin();
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  AdminBridge& bridge() { return bridge_; }
  uint16_t port() const { return server_->port(); }

  // The ServiceSpecs the snapshot just published was built from (GET /config_dump keeps this
  // control-side copy, so the dataplane structs carry only what workers need). Call after every
  // publish.
  void set_services(std::vector<ServiceSpec> specs) { services_ = std::move(specs); }
  // GET /bgp's answer (the BGP speaker's status); without one /bgp answers 404.
  void set_bgp_source(std::function<nlohmann::json()> fn) { bgp_source_ = std::move(fn); }
  // GET /flow_rules' answer (the rte_flow rules per port); without one /flow_rules answers 404.
  void set_flow_rules_source(std::function<nlohmann::json()> fn) {
    flow_rules_source_ = std::move(fn);
  }
  // GET /workloads' answer (the mesh model's workloads); without one it lists none.
  void set_workloads_source(std::function<nlohmann::json()> fn) {
    workloads_source_ = std::move(fn);
  }
  // GET /config_dump's "health_checks" (the backends' health check states); absent without one.
  void set_health_source(std::function<nlohmann::json()> fn) { health_source_ = std::move(fn); }
  // POST /reload: the runtime gets the query on the control thread, starts a reload (or
  // refuses one) and sets the query's promise, at once or when the reload's outcome is known,
  // with Query::reload_id set meanwhile (AdminBridge::ask_reload). It must answer every query it
  // takes, with 503 at the latest when it stops. Without one POST /reload answers 503.
  void set_reload_handler(std::function<void(std::shared_ptr<Query>)> fn) {
    reload_handler_ = std::move(fn);
  }
  // GET /config_dump's "config" object: the loaded file, its hash and the last reload. Call
  // after every reload attempt.
  void set_config_status(nlohmann::json status) { config_status_ = std::move(status); }
  // Other control modules' metric families (the mesh provider's meshgate_xds_*).
  void add_metrics_source(MetricsSource fn) { metrics_sources_.push_back(std::move(fn)); }
  // The launched workers, index = worker number, and the started ports (their counters are
  // read on the control thread per query); the control loop answers queries from now on.
  void start_serving(std::vector<dp::Worker*> workers, std::vector<dp::PortRuntime> ports);

  // One control-loop tick: worker health, queued queries, flow dumps in progress.
  void tick(Clock::time_point now);

  // Answers what is pending with 503, stops the HTTP threads and frees flow-dump buffers. Call
  // once the workers have stopped (a worker may still hold an unfinished dump request before).
  void stop();

 private:
  struct WorkerDump {
    dp::FlowDumpRequest req;
    std::vector<dp::FlowRecord> records;
    uint32_t worker = 0;
    bool posted = false;  // the worker owns `req` until req.done
    bool answered = false;
  };
  struct FlowJob {
    std::shared_ptr<Query> query;
    bool started = false;
    Clock::time_point deadline{};
    std::vector<std::unique_ptr<WorkerDump>> dumps;
  };

  Admin(const Config& cfg, const StatRegistry& registry, const SnapshotPublisher& publisher);
  AdminReply answer(QueryKind kind);
  std::string metrics_text();
  std::string config_dump();
  void start_flow_job(FlowJob& job, Clock::time_point now);
  // True when the job is answered.
  bool advance_flow_job(FlowJob& job, Clock::time_point now);
  std::string flows_json(const FlowJob& job);
  void reap_orphans();
  // Every backend's counters of the current snapshot into the rate estimator.
  void sample_rates(Clock::time_point now);
  // GET /stats: the counters, each backend with its "rates" once two samples were taken.
  nlohmann::json stats_with_rates();

  const Config& cfg_;
  const StatRegistry& registry_;
  const SnapshotPublisher& publisher_;
  AdminBridge bridge_;
  std::unique_ptr<AdminServer> server_;
  std::vector<dp::Worker*> workers_;
  std::vector<const dp::Worker*> views_;
  std::vector<dp::PortRuntime> ports_;
  std::vector<ServiceSpec> services_;
  std::vector<MetricsSource> metrics_sources_;
  std::function<nlohmann::json()> bgp_source_;
  std::function<nlohmann::json()> flow_rules_source_;
  std::function<nlohmann::json()> health_source_;
  std::function<nlohmann::json()> workloads_source_;
  std::function<void(std::shared_ptr<Query>)> reload_handler_;
  nlohmann::json config_status_ = nlohmann::json::object();
  RateEstimator rates_;
  std::deque<FlowJob> flow_jobs_;
  // Dumps whose worker did not finish before the job was answered: kept until it does.
  std::vector<std::unique_ptr<WorkerDump>> orphans_;
  bool stopped_ = false;
};

}  // namespace meshgate::ctl
