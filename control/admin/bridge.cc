#include "control/admin/bridge.h"

#include <utility>

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
  for (auto& q : pending) q->promise.set_value(text_reply(503, "meshgate is shutting down"));
}

}  // namespace meshgate::ctl
