// The admin HTTP server (cpp-httplib): the endpoints of README.md "Admin API and meshgate-ctl".
//
// Threads: start() and stop() on the control thread. One event thread accepts connections and
// receives each request whole (line, headers, body) into a bounded buffer, with no thread of its
// own: slow or idle connections cost a socket and a buffer, never a handler. A complete request
// is then parsed and answered by httplib on a handler thread (a pool started as requests need
// it), /ready and /healthz on threads of their own that other requests cannot take. All are
// created after EAL init so they inherit the main lcore's affinity and stay off worker cores.
// Handlers only talk to the AdminBridge; see bridge.h for why that is the only state they touch.
// What is refused before any handler runs: request_checks.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "control/admin/bridge.h"
#include "control/common/result.h"

namespace httplib {
class Server;
}

namespace meshgate::ctl {

// A connection must deliver its whole request (line, headers, body) within this time, however
// it spaces its bytes; then it is answered 408 and closed. Admin clients send a request in one
// segment.
inline constexpr std::chrono::milliseconds kAdminRequestTimeout{2000};
// Connections whose request is still arriving. One more closes the oldest of them: a flood of
// slow connections cannot keep a new one (a probe, which sends its request at once) out.
inline constexpr size_t kAdminMaxPendingConnections = 256;
// Complete requests answered at once, each on a handler thread, and how many more may wait for
// one; beyond that a request is answered 503 at once.
inline constexpr size_t kAdminHandlerThreads = 16;
inline constexpr size_t kAdminQueuedRequests = 64;
// Threads that answer only GET /ready and GET /healthz.
inline constexpr size_t kAdminProbeThreads = 2;

// Largest GET /flows?limit=N.
inline constexpr uint32_t kMaxFlowsLimit = 100000;
inline constexpr uint32_t kDefaultFlowsLimit = 100;

class ConnectionLoop;

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
  AdminServer(AdminBridge& bridge, std::string listen_host);
  void routes();

  AdminBridge& bridge_;
  const std::string listen_host_;  // names the Host header may carry (request_checks.h)
  std::unique_ptr<httplib::Server> svr_;
  std::unique_ptr<ConnectionLoop> loop_;
  uint16_t port_ = 0;
};

}  // namespace meshgate::ctl
