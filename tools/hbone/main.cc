// meshgate-hbone: the HBONE engine over kernel sockets, for interop tests and demos.
//
//   meshgate-hbone server --listen 127.0.0.1:15008 --cert C --key K --bundle B [--serve CIDR]...
//                         [--name HOST:PORT=IP:PORT]... [--no-endpoint-port N]
//                         [--mesh FILE --workload UID] [--stats FILE]
//   meshgate-hbone client --listen 127.0.0.1:PORT --peer IP:PORT --target AUTHORITY
//                         --expect SPIFFE_ID... --cert C --key K --bundle B [--stats FILE]
//
// server: terminates HBONE (the 15008 role). An IP authority inside a --serve prefix is served
// (connect to it); a --name maps a host:port authority; anything else is 400. --mesh/--workload
// load L4 authorization policies for that workload from a mesh file; SIGHUP reloads the file and
// re-checks every live tunnel, ending the ones now denied. SIGTERM/SIGUSR1: GOAWAY every
// connection, stop accepting, exit when they are done (10 s at most).
// client: originates HBONE (the 15001 role): each TCP connection accepted on --listen becomes
// a CONNECT stream to --target over a pooled mTLS connection to --peer.
// Both write their counters as JSON to --stats at exit.
//
// One thread, epoll, non-blocking sockets; every buffer bounded. Tests only: the gateway runs
// the same engine over its userspace TCP stack.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "control/certs/tls_context.h"
#include "control/mesh/authz.h"
#include "control/mesh/mesh_file.h"
#include "dataplane/hbone/connection.h"
#include "dataplane/hbone/headers.h"
#include "dataplane/hbone/pool.h"
#include "dataplane/policy/policy.h"

using namespace meshgate;
using namespace meshgate::dp::hbone;
namespace tls = meshgate::dp::tls;

namespace {

constexpr size_t kIoChunk = 64 * 1024;
constexpr size_t kTcpPendingMax = 256 * 1024;  // bytes from a stream waiting for the TCP peer
constexpr int kDrainDeadlineMs = 10'000;

volatile sig_atomic_t g_drain = 0;
volatile sig_atomic_t g_reload = 0;

uint64_t now_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  IpAddr ip;
  uint16_t port = 0;
};

bool parse_hostport(const std::string& s, SockAddr& out) {
  Authority a;
  if (!parse_authority(s, a) || a.kind != Authority::Kind::kIp) return false;
  out.ip = a.ip;
  out.port = a.port;
  if (a.ip.is_v4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(a.port);
    std::memcpy(&sin->sin_addr, a.ip.v4_ptr(), 4);
    out.len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(a.port);
    std::memcpy(&sin6->sin6_addr, a.ip.b, 16);
    out.len = sizeof(sockaddr_in6);
  }
  return true;
}

SockAddr from_sockaddr(const sockaddr_storage& ss) {
  SockAddr a;
  a.ss = ss;
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    a.ip = IpAddr::v4_bytes(reinterpret_cast<const uint8_t*>(&sin->sin_addr));
    a.port = ntohs(sin->sin_port);
  } else {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    a.ip = IpAddr::v6_bytes(reinterpret_cast<const uint8_t*>(&sin6->sin6_addr));
    a.port = ntohs(sin6->sin6_port);
  }
  return a;
}

int listen_on(const SockAddr& a) {
  const int fd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&a.ss), a.len) != 0 || listen(fd, 512) != 0) {
    std::perror("meshgate-hbone: listen");
    std::exit(1);
  }
  return fd;
}

// Starts a non-blocking connect; -1 when it failed at once.
int connect_to(const SockAddr& a) {
  const int fd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a.ss), a.len) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

void reset_and_close(int fd) {
  const linger lg{1, 0};  // RST instead of FIN: the other side of the tunnel failed
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
}

class Loop;

// Anything registered with epoll.
struct Handler {
  int fd = -1;
  bool dead = false;  // buried: deleted after the current epoll batch
  virtual ~Handler() = default;
  virtual void on_io(uint32_t events) = 0;
};

struct HboneConn;

// The TCP side of one stream: the upstream (server role) or the local client (client role).
struct TcpSide : Handler {
  Loop* loop = nullptr;
  HboneConn* conn = nullptr;
  int32_t stream = 0;
  bool connecting = false;     // server: upstream connect in flight
  bool read_paused = false;    // the stream's send budget is full
  bool read_eof = false;       // TCP FIN received (→ stream_shutdown)
  bool remote_end = false;     // END_STREAM received (→ shutdown(SHUT_WR) once pending is out)
  bool wr_shut = false;
  bool h2_closed = false;
  bool registered = true;      // in epoll (dropped once the socket hung up after its FIN)
  dp::ByteQueue pending;       // stream bytes not yet written to the socket
  void on_io(uint32_t events) override;
  void pump_in();   // socket → stream
  void pump_out();  // stream → socket
  void maybe_finish();
  void update_interest();
};

struct HboneConn : Handler {
  Loop* loop = nullptr;
  std::unique_ptr<Connection> engine;
  std::map<int32_t, TcpSide*> streams;
  SockAddr peer;
  Pool::ConnId pool_id = 0;
  bool dialing = false;  // client: TCP connect in flight
  bool want_out = false;
  void on_io(uint32_t events) override;
  void flush();
  void process_events();
};

struct Listener : Handler {
  Loop* loop = nullptr;
  bool hbone = false;
  void on_io(uint32_t events) override;
};

class Loop : public ServerHooks {
 public:
  // Common
  int ep = epoll_create1(EPOLL_CLOEXEC);
  Counters counters;
  std::shared_ptr<tls::Context> tls_ctx;
  std::set<HboneConn*> conns;
  std::vector<Listener*> listeners;
  // Server
  std::vector<IpPrefix> serve;
  std::map<std::string, SockAddr> names;  // "host:port" → upstream
  uint16_t no_endpoint_port = 0;
  std::vector<dp::policy::Policy> policies;
  uint64_t denied = 0, allowed = 0;
  HboneConn* current = nullptr;  // the connection whose hooks run
  std::vector<std::pair<HboneConn*, int32_t>> refused;  // upstream connects that failed at once
  // Client
  SockAddr peer_addr;
  std::string target;
  std::vector<std::string> expect;
  Pool pool;
  std::map<Pool::ConnId, HboneConn*> pool_conns;
  std::deque<TcpSide*> waiting;
  std::mt19937_64 rng{std::random_device{}()};
  uint64_t tcp_accepted = 0;

  void add(Handler* h, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = h;
    epoll_ctl(ep, EPOLL_CTL_ADD, h->fd, &ev);
  }
  void mod(Handler* h, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = h;
    epoll_ctl(ep, EPOLL_CTL_MOD, h->fd, &ev);
  }
  void del(Handler* h) { epoll_ctl(ep, EPOLL_CTL_DEL, h->fd, nullptr); }
  // A later event of the same epoll batch may name a handler that is gone: free it after.
  std::vector<Handler*> graveyard;
  void bury(Handler* h) {
    if (h->dead) return;
    h->dead = true;
    graveyard.push_back(h);
  }

  // ---- server hooks ----
  Resolution resolve(const Authority& a) override {
    Resolution r;
    if (a.kind == Authority::Kind::kName) {
      auto it = names.find(std::string(a.hostname()) + ":" + std::to_string(a.port));
      if (it == names.end()) return r;
      r.ip = it->second.ip;
      r.port = it->second.port;
    } else {
      bool served = false;
      for (const IpPrefix& p : serve) served = served || p.contains(a.ip);
      if (!served) return r;
      r.ip = a.ip;
      r.port = a.port;
    }
    r.kind = r.port == no_endpoint_port ? Resolution::Kind::kNoEndpoint : Resolution::Kind::kServed;
    return r;
  }
  bool authorize(std::string_view peer_id, const Resolution& dst) override {
    dp::policy::Request req;
    dp::policy::set_identity(req, peer_id);
    req.src_ip = current->peer.ip;
    req.dst_ip = dst.ip;
    req.dst_port = dst.port;
    std::vector<const dp::policy::Policy*> ptrs;
    for (const auto& p : policies) ptrs.push_back(&p);
    const bool ok = dp::policy::evaluate(ptrs, req).allow;
    (ok ? allowed : denied)++;
    return ok;
  }
  void connect(int32_t stream, const Resolution& dst) override {
    SockAddr a;
    parse_hostport(authority_of(dst.ip, dst.port), a);
    auto* t = new TcpSide();
    t->loop = this;
    t->conn = current;
    t->stream = stream;
    t->fd = connect_to(a);
    current->streams[stream] = t;
    if (t->fd < 0) {
      // Hooks must not call back into the engine: report after recv_transport returns.
      refused.emplace_back(current, stream);
      current->streams.erase(stream);
      bury(t);
      return;
    }
    t->connecting = true;
    add(t, EPOLLOUT);
  }

  // ---- client side ----
  void originate(TcpSide* t) {
    const PoolKey key(tls_ctx->own_id(), expect, peer_addr.ip, peer_addr.port, IpAddr());
    const auto co = pool.acquire(key, now_ms());
    if (co.action == Pool::Action::kWait) {
      waiting.push_back(t);
      return;
    }
    if (co.action == Pool::Action::kDial) {
      waiting.push_front(t);
      auto* c = new HboneConn();
      c->loop = this;
      c->peer = peer_addr;
      c->pool_id = co.conn;
      c->fd = connect_to(peer_addr);
      if (c->fd < 0) {
        pool.dial_done(co.conn, false, 0, now_ms());
        bury(c);
        fail_waiting();
        return;
      }
      c->dialing = true;
      c->engine = Connection::client(*tls_ctx, expect, counters, now_ms());
      conns.insert(c);
      pool_conns[co.conn] = c;
      add(c, EPOLLIN | EPOLLOUT);
      return;
    }
    HboneConn* c = pool_conns.at(co.conn);
    ConnectRequest req;
    req.authority = target;
    SockAddr src = local_client_addr(t->fd);
    req.forwarded = forwarded_header(src.ip, src.port, "");
    req.traceparent = traceparent_header(rng(), rng(), rng());
    BaggageFields b;
    b.cluster_name = "Kubernetes";
    b.namespace_name = "meshgate";
    b.workload_kind = "deployment";
    b.workload_name = "meshgate-hbone";
    req.baggage = baggage_header(b);
    const int32_t id = c->engine->open_stream(req);
    if (id < 0) {
      pool.release(co.conn, now_ms());
      reset_and_close(t->fd);
      bury(t);
      return;
    }
    t->conn = c;
    t->stream = id;
    t->read_paused = true;  // nothing flows before the 200
    c->streams[id] = t;
    add(t, 0);
    c->flush();
  }
  static SockAddr local_client_addr(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return from_sockaddr(ss);
  }
  void retry_waiting() {
    std::deque<TcpSide*> w;
    w.swap(waiting);
    for (TcpSide* t : w) originate(t);
  }
  void fail_waiting() {
    for (TcpSide* t : waiting) {
      reset_and_close(t->fd);
      bury(t);
    }
    waiting.clear();
  }

  void destroy(HboneConn* c) {
    for (auto& [id, t] : c->streams) {
      if (t->fd >= 0) {
        del(t);
        reset_and_close(t->fd);
      }
      bury(t);
    }
    c->streams.clear();
    if (c->pool_id != 0) {
      const bool never_ready = c->dialing || !c->engine->established();
      pool.retire(c->pool_id);
      pool_conns.erase(c->pool_id);
      if (never_ready) fail_waiting();  // their dial failed (connect, TLS, identity)
    }
    del(c);
    close(c->fd);
    conns.erase(c);
    bury(c);
  }

  void timers() {
    const uint64_t now = now_ms();
    std::vector<HboneConn*> cs(conns.begin(), conns.end());
    for (HboneConn* c : cs) {
      c->engine->on_timer(now);
      c->flush();
      c->process_events();
    }
    for (Pool::ConnId id : pool.expire(now)) {
      auto it = pool_conns.find(id);
      if (it != pool_conns.end()) it->second->engine->drain();
    }
  }

  void drain_all() {
    for (Listener* l : listeners) {
      del(l);
      close(l->fd);
    }
    listeners.clear();
    std::vector<HboneConn*> cs(conns.begin(), conns.end());
    for (HboneConn* c : cs) {
      c->engine->drain();
      c->flush();
      c->process_events();
    }
  }

  // Server: the policies changed (SIGHUP): every live tunnel is checked again.
  std::string mesh_file, workload;
  void reload_policies() {
    auto m = ctl::mesh::load_mesh_file(mesh_file);
    if (!m.ok() || !m->workloads.count(workload)) {
      std::fprintf(stderr, "meshgate-hbone: reload %s failed, policies kept: %s\n",
                   mesh_file.c_str(), m.ok() ? "no such --workload" : m.error().str().c_str());
      return;
    }
    policies = ctl::mesh::policies_for(*m, m->workloads.at(workload));
    size_t revoked = 0;
    std::vector<HboneConn*> cs(conns.begin(), conns.end());
    for (HboneConn* c : cs) {
      if (c->engine->role() != tls::Role::kServer) continue;
      current = c;
      revoked += c->engine->recheck_authorization();
      c->flush();
      c->process_events();
    }
    std::fprintf(stderr, "meshgate-hbone: policies reloaded: %zu policies, %zu tunnels revoked\n",
                 policies.size(), revoked);
  }

  int run() {
    bool draining = false;
    uint64_t drain_started = 0;
    uint64_t last_timer = now_ms();
    epoll_event evs[64];
    while (true) {
      if (g_drain && !draining) {
        draining = true;
        drain_started = now_ms();
        drain_all();
      }
      if (g_reload) {
        g_reload = 0;
        if (!mesh_file.empty()) reload_policies();
      }
      if (draining && (conns.empty() || now_ms() - drain_started > kDrainDeadlineMs)) break;
      const int n = epoll_wait(ep, evs, 64, 100);
      for (int i = 0; i < n; ++i) {
        auto* h = static_cast<Handler*>(evs[i].data.ptr);
        if (!h->dead) h->on_io(evs[i].events);
      }
      for (Handler* h : graveyard) delete h;
      graveyard.clear();
      if (now_ms() - last_timer >= 100) {
        timers();
        last_timer = now_ms();
      }
    }
    return 0;
  }

  void write_stats(const std::string& path) {
    if (path.empty()) return;
    std::ofstream f(path);
    f << "{";
    for (int i = 0; i < kNumCounters; ++i)
      f << "\"" << counter_name(Counter(i)) << "\":" << counters.v[i] << ",";
    f << "\"policy_allowed\":" << allowed << ",\"policy_denied\":" << denied
      << ",\"tcp_accepted\":" << tcp_accepted << "}\n";
  }
};

void Listener::on_io(uint32_t) {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int fd = accept4(this->fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (hbone) {
      auto* c = new HboneConn();
      c->loop = loop;
      c->fd = fd;
      c->peer = from_sockaddr(ss);
      c->engine = Connection::server(*loop->tls_ctx, *loop, loop->counters, now_ms());
      loop->conns.insert(c);
      loop->add(c, EPOLLIN);
    } else {
      ++loop->tcp_accepted;
      auto* t = new TcpSide();
      t->loop = loop;
      t->fd = fd;
      loop->originate(t);
    }
  }
}

void HboneConn::flush() {
  const dp::ByteQueue& q = engine->transport_out();
  while (!q.empty() && !dialing) {
    const ssize_t n = send(fd, q.data(), q.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    engine->transport_out_consumed(size_t(n));
  }
  const bool need = !q.empty();
  if (need != want_out && !dialing) {
    want_out = need;
    loop->mod(this, need ? uint32_t(EPOLLIN | EPOLLOUT) : uint32_t(EPOLLIN));
  }
}

void HboneConn::on_io(uint32_t events) {
  if (dialing) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      loop->pool.dial_done(pool_id, false, 0, now_ms());
      pool_id = 0;
      loop->fail_waiting();
      loop->destroy(this);
      return;
    }
    dialing = false;
    want_out = true;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    uint8_t buf[kIoChunk];
    for (int i = 0; i < 16; ++i) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        loop->current = this;
        engine->recv_transport(buf, size_t(n), now_ms());
        for (auto& [c, stream] : loop->refused) c->engine->upstream_connected(stream, false);
        loop->refused.clear();
        flush();
        process_events();
        if (loop->conns.count(this) == 0) return;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        engine->recv_transport_eof(now_ms());
        process_events();
        return;
      }
      break;
    }
  }
  flush();
  process_events();
}

void HboneConn::process_events() {
  Loop* l = loop;
  Event ev;
  while (engine->poll_event(ev)) {
    auto it = streams.find(ev.stream);
    TcpSide* t = it == streams.end() ? nullptr : it->second;
    switch (ev.kind) {
      case EventKind::kEstablished:
        if (pool_id != 0) {
          l->pool.dial_done(pool_id, true, 100, now_ms());
          l->retry_waiting();
        }
        break;
      case EventKind::kStreamResponse:
        if (t == nullptr) break;
        if (ev.code == 200) {
          t->read_paused = false;
          t->update_interest();
        }
        break;
      case EventKind::kStreamReadable:
        if (t) t->pump_out();
        break;
      case EventKind::kStreamRemoteEnd:
        if (t) {
          t->remote_end = true;
          t->pump_out();
        }
        break;
      case EventKind::kStreamWritable:
        if (t) {
          t->read_paused = false;
          t->pump_in();
          t->update_interest();
        }
        break;
      case EventKind::kStreamReset:
        if (t && !is_clean_reset(ev.code)) {
          l->del(t);
          reset_and_close(t->fd);
          t->fd = -1;
        }
        break;
      case EventKind::kStreamClosed:
        if (t) {
          t->h2_closed = true;
          if (t->fd < 0 || (ev.code != 0 && !t->remote_end)) {
            // Reset, or closed without END_STREAM (e.g. non-200): nothing more will come.
            if (t->fd >= 0) {
              l->del(t);
              reset_and_close(t->fd);
            }
            streams.erase(ev.stream);
            engine->stream_release(ev.stream);
            if (pool_id != 0 && l->pool.release(pool_id, now_ms())) engine->drain();
            l->bury(t);
          } else {
            t->maybe_finish();
          }
        }
        break;
      case EventKind::kGoaway:
        if (pool_id != 0) {
          l->pool.retire(pool_id);
          l->pool_conns.erase(pool_id);
          pool_id = 0;
        }
        break;
      case EventKind::kClosed:
        flush();
        std::fprintf(stderr, "meshgate-hbone: connection closed: %s%s%s\n",
                     close_reason_name(CloseReason(ev.code)),
                     engine->tls_failure_detail().empty() ? "" : ": ",
                     engine->tls_failure_detail().c_str());
        l->destroy(this);
        return;
    }
  }
  flush();
}

void TcpSide::update_interest() {
  if (fd < 0 || connecting || !registered) return;
  uint32_t ev = 0;
  if (!read_paused && !read_eof) ev |= EPOLLIN;
  if (!pending.empty()) ev |= EPOLLOUT;
  loop->mod(this, ev);
}

void TcpSide::pump_in() {
  if (fd < 0 || read_eof || read_paused) return;
  uint8_t buf[kIoChunk];
  for (int i = 0; i < 16; ++i) {
    const size_t room = conn->engine->stream_send_room(stream);
    if (room == 0) {
      read_paused = true;
      conn->engine->stream_write(stream, buf, 1);  // registers for kStreamWritable; takes 0
      break;
    }
    const ssize_t n = recv(fd, buf, std::min(room, sizeof buf), 0);
    if (n > 0) {
      conn->engine->stream_write(stream, buf, size_t(n));
      continue;
    }
    if (n == 0) {
      read_eof = true;
      conn->engine->stream_shutdown(stream);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      read_eof = true;
      conn->engine->stream_reset(stream, 2);  // INTERNAL_ERROR: the TCP side was reset
    }
    break;
  }
  conn->flush();
  update_interest();  // level-triggered: a socket at EOF stays readable
}

void TcpSide::pump_out() {
  if (fd < 0) return;
  uint8_t buf[kIoChunk];
  while (true) {
    if (pending.size() < kTcpPendingMax) {
      const size_t n = conn->engine->stream_read(stream, buf, std::min(sizeof buf, kTcpPendingMax - pending.size()));
      pending.append(buf, n);
    }
    if (pending.empty()) break;
    const ssize_t w = send(fd, pending.data(), pending.size(), MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      // The TCP peer is gone: nothing more can be delivered, end the stream (CANCEL).
      conn->engine->stream_reset(stream, 8);
      if (registered) loop->del(this);
      reset_and_close(fd);
      fd = -1;
      pending.clear();
      conn->flush();
      return;
    }
    if (w <= 0) break;
    pending.consume(size_t(w));
  }
  conn->flush();
  if (pending.empty() && remote_end && !wr_shut && conn->engine->stream_readable(stream) == 0) {
    shutdown(fd, SHUT_WR);  // END_STREAM → FIN
    wr_shut = true;
  }
  update_interest();
  maybe_finish();
}

void TcpSide::maybe_finish() {
  if (dead || !h2_closed || !pending.empty() || conn->engine->stream_readable(stream) != 0) return;
  if (!wr_shut && fd >= 0) shutdown(fd, SHUT_WR);
  HboneConn* c = conn;
  Loop* l = loop;
  if (fd >= 0) {
    if (registered) l->del(this);
    close(fd);
  }
  c->streams.erase(stream);
  c->engine->stream_release(stream);
  if (c->pool_id != 0 && l->pool.release(c->pool_id, now_ms())) c->engine->drain();
  l->bury(this);
}

void TcpSide::on_io(uint32_t events) {
  if (connecting) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    connecting = false;
    HboneConn* c = conn;
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      c->engine->upstream_connected(stream, false);
      c->streams.erase(stream);
      loop->del(this);
      close(fd);
      c->flush();
      c->process_events();
      loop->bury(this);
      return;
    }
    c->engine->upstream_connected(stream, true);
    update_interest();
    pump_out();  // bytes that came with the request
    c->process_events();
    return;
  }
  HboneConn* c = conn;
  const int32_t sid = stream;
  if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) pump_out();
  if (dead || c->streams.count(sid) == 0 || fd < 0) return;  // finished in pump_out
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) pump_in();
  // HUP/ERR are reported whatever the interest: once our side read the FIN there is nothing
  // left to wait for on this socket (stream events drive the rest), so stop polling it.
  if ((events & (EPOLLHUP | EPOLLERR)) && read_eof && registered && !dead && fd >= 0) {
    loop->del(this);
    registered = false;
  }
  c->process_events();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"meshgate-hbone: the HBONE engine over kernel sockets (tests and demos)"};
  app.require_subcommand(1);
  std::string listen, cert, key, bundle, trust_domain = "cluster.local", stats, mesh_file, workload;
  std::vector<std::string> serve, names, expect;
  std::string peer, target;
  uint16_t no_endpoint_port = 0;
  auto common = [&](CLI::App* s) {
    s->add_option("--listen", listen, "address:port to listen on")->required();
    s->add_option("--cert", cert, "certificate chain (PEM)")->required();
    s->add_option("--key", key, "P-256 private key (PEM)")->required();
    s->add_option("--bundle", bundle, "trust bundle (PEM)")->required();
    s->add_option("--trust-domain", trust_domain, "our trust domain");
    s->add_option("--stats", stats, "write counters as JSON here at exit");
  };
  CLI::App* srv = app.add_subcommand("server", "terminate HBONE");
  common(srv);
  srv->add_option("--serve", serve, "serve IP authorities inside this prefix");
  srv->add_option("--name", names, "HOST:PORT=IP:PORT name authority mapping");
  srv->add_option("--no-endpoint-port", no_endpoint_port, "authorities with this port: 503 (no endpoint)");
  srv->add_option("--mesh", mesh_file, "mesh file with [[policy]] tables");
  srv->add_option("--workload", workload, "uid of the workload whose policies apply");
  CLI::App* cli = app.add_subcommand("client", "originate HBONE");
  common(cli);
  cli->add_option("--peer", peer, "HBONE peer address:port")->required();
  cli->add_option("--target", target, "CONNECT :authority")->required();
  cli->add_option("--expect", expect, "expected server SPIFFE id(s)")->required();
  CLI11_PARSE(app, argc, argv);

  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, [](int) { g_drain = 1; });
  signal(SIGINT, [](int) { g_drain = 1; });
  signal(SIGUSR1, [](int) { g_drain = 1; });
  signal(SIGHUP, [](int) { g_reload = 1; });

  Loop loop;
  ctl::TlsContextConfig tc{cert, key, bundle, trust_domain};
  std::string err;
  loop.tls_ctx = ctl::create_tls_context(tc, err);
  if (!loop.tls_ctx) {
    std::fprintf(stderr, "meshgate-hbone: %s\n", err.c_str());
    return 2;
  }
  SockAddr la;
  if (!parse_hostport(listen, la)) {
    std::fprintf(stderr, "meshgate-hbone: bad --listen %s\n", listen.c_str());
    return 2;
  }
  auto* l = new Listener();
  l->loop = &loop;
  l->fd = listen_on(la);
  l->hbone = srv->parsed();
  loop.listeners.push_back(l);
  loop.add(l, EPOLLIN);

  if (srv->parsed()) {
    for (const std::string& s : serve) {
      auto p = IpPrefix::parse(s);
      if (!p) {
        std::fprintf(stderr, "meshgate-hbone: bad --serve %s\n", s.c_str());
        return 2;
      }
      loop.serve.push_back(*p);
    }
    for (const std::string& n : names) {
      const size_t eq = n.find('=');
      SockAddr a;
      if (eq == std::string::npos || !parse_hostport(n.substr(eq + 1), a)) {
        std::fprintf(stderr, "meshgate-hbone: bad --name %s\n", n.c_str());
        return 2;
      }
      loop.names[n.substr(0, eq)] = a;
    }
    loop.no_endpoint_port = no_endpoint_port;
    if (!mesh_file.empty()) {
      auto m = ctl::mesh::load_mesh_file(mesh_file);
      if (!m.ok() || !m->workloads.count(workload)) {
        std::fprintf(stderr, "meshgate-hbone: %s: %s\n", mesh_file.c_str(),
                     m.ok() ? "no such --workload" : m.error().str().c_str());
        return 2;
      }
      loop.policies = ctl::mesh::policies_for(*m, m->workloads.at(workload));
      loop.mesh_file = mesh_file;
      loop.workload = workload;
    }
  } else {
    if (!parse_hostport(peer, loop.peer_addr)) {
      std::fprintf(stderr, "meshgate-hbone: bad --peer %s\n", peer.c_str());
      return 2;
    }
    loop.target = target;
    loop.expect = expect;
  }
  std::fprintf(stderr, "meshgate-hbone: %s listening on %s as %s\n", srv->parsed() ? "server" : "client",
               listen.c_str(), loop.tls_ctx->own_id().c_str());
  const int rc = loop.run();
  loop.write_stats(stats);
  return rc;
}
