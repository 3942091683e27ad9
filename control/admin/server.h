// The admin HTTP server (cpp-httplib): the endpoints of README.md "Admin API and meshgate-ctl".
//
// Threads: start() and stop() on the control thread. Requests run on httplib's own threads
// (a small pool, created after EAL init so they inherit the main lcore's affinity and stay off
// worker cores). Handlers only talk to the AdminBridge; see bridge.h for why that is the only
// state they touch.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "control/admin/bridge.h"
#include "control/common/result.h"

namespace httplib {
class Server;
}

namespace meshgate::ctl {

// A connection must deliver its whole request (line, headers, body) within this time, however
// it spaces its bytes; then it is closed. Admin clients send a request in one segment.
inline constexpr std::chrono::milliseconds kAdminRequestTimeout{2000};
// Connections served at once, each on its own thread (threads are started as connections
// need them). One more is closed as soon as it is accepted: a few idle or slow sockets cannot
// take the threads a /ready probe needs, and many cannot grow the process without bound.
inline constexpr size_t kAdminMaxConnections = 128;

// Largest GET /flows?limit=N.
inline constexpr uint32_t kMaxFlowsLimit = 100000;
inline constexpr uint32_t kDefaultFlowsLimit = 100;

class AdminServer {
 public:
  // Binds `listen` ("host:port", IPv6 "[::1]:port"; port 0 picks a free port) and starts
  // serving. Fails when the address cannot be bound (in use, not local).
  static Result<std::unique_ptr<AdminServer>> start(const std::string& listen, AdminBridge& bridge);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  uint16_t port() const { return port_; }
  // Stops accepting, lets requests in flight finish and joins the threads. Call bridge.close()
  // first so that no handler waits for a control loop that no longer ticks.
  void stop();

 private:
  explicit AdminServer(AdminBridge& bridge);
  void routes();

  AdminBridge& bridge_;
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
  std::atomic<bool> exited_{false};  // the listen thread left listen_after_bind()
  uint16_t port_ = 0;
};

}  // namespace meshgate::ctl
