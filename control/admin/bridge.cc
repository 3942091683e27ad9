#include "control/admin/bridge.h"

#include <utility>

#include "dataplane/worker/counters.h"

namespace meshgate::ctl {

AdminReply text_reply(int status, std::string body) {
  AdminReply r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  if (r.body.empty() || r.body.back() != '\n') r.body += '\n';
  return r;
}

AdminReply AdminBridge::ask(QueryKind kind, uint32_t limit, std::chrono::milliseconds timeout,
                            FlowFilter filter) {
  auto q = std::make_shared<Query>();
  q->kind = kind;
  q->limit = limit;
  q->filter = std::move(filter);
  std::future<AdminReply> answer = q->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return text_reply(503, "meshgate is shutting down");
    if (!serving_) return text_reply(503, "meshgate is starting: the control loop is not running yet");
    queue_.push_back(std::move(q));
  }
  if (answer.wait_for(timeout) != std::future_status::ready) {
    return text_reply(503, "the control loop did not answer within " +
                               std::to_string(timeout.count()) + " ms");
  }
  return answer.get();
}

AdminReply AdminBridge::ask_reload(std::chrono::milliseconds wait) {
  auto q = std::make_shared<Query>();
  q->kind = QueryKind::kReload;
  std::future<AdminReply> answer = q->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return text_reply(503, "meshgate is shutting down");
    if (!serving_) return text_reply(503, "meshgate is starting: the control loop is not running yet");
    queue_.push_back(q);
  }
  if (answer.wait_for(wait) == std::future_status::ready) return answer.get();
  const uint64_t id = q->reload_id.load(std::memory_order_acquire);
  if (id == 0) {
    return text_reply(503, "the control loop did not answer within " +
                               std::to_string(wait.count()) + " ms");
  }
  AdminReply r;
  r.status = 202;
  r.body = "{\"result\": \"in_progress\", \"id\": " + std::to_string(id) +
           ", \"poll\": \"GET /reload\"}\n";
  return r;
}

AdminReply AdminBridge::reload_state() const {
  AdminReply r;
  std::lock_guard<std::mutex> lock(reload_mu_);
  r.body = reload_state_ + "\n";
  return r;
}

void AdminBridge::set_reload_state(std::string json) {
  std::lock_guard<std::mutex> lock(reload_mu_);
  reload_state_ = std::move(json);
}

void AdminBridge::watch_workers(std::vector<const uint64_t*> loops) {
  std::lock_guard<std::mutex> lock(health_mu_);
  loops_ = std::move(loops);
  const auto now = std::chrono::steady_clock::now();
  for (uint32_t w = 0; w < loops_.size(); ++w) worker_health_.observe(w, dp::counter_read(*loops_[w]), now);
}

void AdminBridge::observe_workers(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(health_mu_);
  for (uint32_t w = 0; w < loops_.size(); ++w) worker_health_.observe(w, dp::counter_read(*loops_[w]), now);
}

AdminReply AdminBridge::health(std::chrono::steady_clock::time_point now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return text_reply(503, "meshgate is shutting down");
    if (!serving_) return text_reply(503, "meshgate is starting: the control loop is not running yet");
  }
  std::lock_guard<std::mutex> lock(health_mu_);
  for (uint32_t w = 0; w < loops_.size(); ++w) worker_health_.observe(w, dp::counter_read(*loops_[w]), now);
  const WorkerHealth::Status st = worker_health_.check(now);
  return text_reply(st.healthy ? 200 : 503, st.text);
}

Readiness AdminBridge::readiness() const {
  if (!snapshot_live_.load(std::memory_order_acquire)) {
    return {false, "no snapshot published to running workers yet"};
  }
  if (mesh_required_.load(std::memory_order_acquire) &&
      !mesh_synced_.load(std::memory_order_acquire)) {
    return {false, "waiting for the first full sync of the mesh source"};
  }
  if (draining_.load(std::memory_order_acquire)) return {false, "draining"};
  return {true, ""};
}

void AdminBridge::start_serving() {
  std::lock_guard<std::mutex> lock(mu_);
  serving_ = true;
}

std::vector<std::shared_ptr<Query>> AdminBridge::take() {
  std::vector<std::shared_ptr<Query>> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.swap(queue_);
  return out;
}

void AdminBridge::close() {
  std::vector<std::shared_ptr<Query>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    pending.swap(queue_);
  }
  {
    // The workers may be freed after close(): health() reads no counter from now on.
    std::lock_guard<std::mutex> lock(health_mu_);
    loops_.clear();
  }
  for (auto& q : pending) q->promise.set_value(text_reply(503, "meshgate is shutting down"));
}

}  // namespace meshgate::ctl
