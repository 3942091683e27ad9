// The only state the admin HTTP threads share with the control thread.
//
// Why this shape: everything an admin answer is made of belongs to someone else. Worker
// counters and flow tables belong to the workers; the Snapshot can be freed by the control loop
// once a newer one is published and the workers passed a quiescent state; the StatRegistry and
// the ServiceSpecs grow and change on the control thread. Instead of locking any of them, the
// HTTP threads never read them. A handler posts a Query here and waits (bounded) on its future;
// the control loop takes the queued queries every tick (1 ms), builds each answer on its own
// thread, where reading snapshots, names and counters is already legal, and fulfils the
// promise. The shared state is this queue under one mutex, held only to push or to swap the
// queue out, never while an answer is built, and never by a worker. Readiness and the drain
// request, which a handler needs without the control loop, are atomics.
//
// A handler that times out drops its reference; the control loop still answers into the
// shared Query, which is then freed with its last reference. A Query never points anywhere
// else, so an answer that nobody waits for any more touches nothing.
//
// What must answer while the control loop is busy (a probe, the state of a reload that takes
// longer than a request should wait) does not go through the queue: /ready reads atomics,
// /healthz reads the workers' loop counters itself (WorkerHealth under its own mutex), GET
// /reload reads the reload state the control thread last stored here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/admin/flow_filter.h"
#include "control/admin/health.h"

namespace meshgate::ctl {

// kReload (POST /reload) is an action, not a read: the control loop starts a reload and answers
// with its result once known (ask_reload).
enum class QueryKind : uint8_t { kHealth, kStats, kMetrics, kConfigDump, kFlows, kBgp, kFlowRules,
                            kReload, kWorkloads };

struct AdminReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

struct Query {
  QueryKind kind = QueryKind::kStats;
  uint32_t limit = 0;  // kFlows: most flows to return
  FlowFilter filter;   // kFlows: which flows count
  std::promise<AdminReply> promise;
  // kReload: the id of the reload this request started (0: none yet), set by the control thread
  // before it answers later, read by the asking thread when it stops waiting.
  std::atomic<uint64_t> reload_id{0};
};

struct Readiness {
  bool ready = false;
  const char* reason = "";  // why not, for the 503 body
};

class AdminBridge {
 public:
  // ---- HTTP threads ----

  // Queues a query for the control loop and waits up to `timeout` for its answer. Answers 503
  // at once when the control loop is not taking queries (still starting, or shutting down), and
  // 503 when it did not answer in time.
  AdminReply ask(QueryKind kind, uint32_t limit, std::chrono::milliseconds timeout,
                 FlowFilter filter = {});
  // POST /reload: as ask(kReload), but when the reload was started and its outcome is not known
  // within `wait`, 202 with {"result": "in_progress", "id": N}: GET /reload tells the rest.
  AdminReply ask_reload(std::chrono::milliseconds wait);
  // GET /reload: what set_reload_state() stored last, as JSON.
  AdminReply reload_state() const;
  // GET /healthz, on the asking thread: 503 while starting (no worker watched) or shutting down,
  // else WorkerHealth's verdict on the loop counters read now.
  AdminReply health(std::chrono::steady_clock::time_point now);
  // 200 for GET /ready: the first snapshot is live on running workers, the mesh source (if any)
  // finished its first full sync, and the gateway is not draining.
  Readiness readiness() const;
  // POST /drain. The control loop picks it up with take_drain_request().
  void request_drain() { drain_requested_.store(true, std::memory_order_release); }

  // ---- control thread ----

  // The workers' poll-loop counters (index = worker), readable until close(); health() and
  // observe_workers() read them with dp::counter_read.
  void watch_workers(std::vector<const uint64_t*> loops);
  // Each control-loop tick: the counters as of now, so a stall is timed from the last change.
  void observe_workers(std::chrono::steady_clock::time_point now);
  // GET /reload's answer from now on (a JSON object).
  void set_reload_state(std::string json);

  // The control loop answers queries from now on (until close()).
  void start_serving();
  std::vector<std::shared_ptr<Query>> take();
  bool take_drain_request() { return drain_requested_.exchange(false, std::memory_order_acq_rel); }
  // Answers every queued query with 503 and refuses new ones; call before the control loop
  // stops ticking.
  void close();

  // Readiness inputs. Any thread (the mesh provider sets mesh_synced from its own callback).
  void mark_snapshot_live() { snapshot_live_.store(true, std::memory_order_release); }
  // With a mesh source, /ready waits for mark_mesh_synced() as well.
  void set_mesh_required(bool on) { mesh_required_.store(on, std::memory_order_release); }
  // Hook for the mesh providers: the first full sync of services and workloads is published.
  void mark_mesh_synced() { mesh_synced_.store(true, std::memory_order_release); }
  void mark_draining() { draining_.store(true, std::memory_order_release); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<Query>> queue_;  // guarded by mu_
  bool serving_ = false;                       // guarded by mu_
  bool closed_ = false;                        // guarded by mu_
  std::atomic<bool> drain_requested_{false};
  std::atomic<bool> snapshot_live_{false};
  std::atomic<bool> mesh_required_{false};
  std::atomic<bool> mesh_synced_{false};
  std::atomic<bool> draining_{false};
  mutable std::mutex health_mu_;
  std::vector<const uint64_t*> loops_;  // guarded by health_mu_
  WorkerHealth worker_health_;          // guarded by health_mu_
  mutable std::mutex reload_mu_;
  std::string reload_state_ = R"({"state": "idle", "id": 0, "last": null})";  // guarded by reload_mu_
};

// A plain-text reply ("text/plain"), for errors and short answers.
AdminReply text_reply(int status, std::string body);

}  // namespace meshgate::ctl
