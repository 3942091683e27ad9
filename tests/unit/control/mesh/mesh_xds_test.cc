// The xDS provider against tools/meshserver (in process, over loopback gRPC): initial sync,
// updates, removals, NACK of one invalid resource with the rest applied, reconnect after a
// server restart carrying initial_resource_versions, backoff while the server is down, bearer
// token and clusterid, TLS verified with a CA file; NACKs bounded in size whatever the server
// sent, and a stream reset after every NACK backing off.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "control/mesh/mesh_file.h"
#include "control/mesh/mesh_proto.h"
#include "control/mesh/xds_provider.h"
#include "tools/meshserver/mesh_server.h"

namespace meshgate::ctl::mesh {
namespace {

using tools::MeshServer;
using tools::MeshServerEvent;
using Kind = MeshServerEvent::Kind;
using namespace std::chrono_literals;

constexpr const char* kToken = "token-for-tests";
constexpr const char* kCluster = "cluster-7";

constexpr const char* kMesh = R"(
[[mesh_service]]
namespace = "ns"
hostname = "web.ns.svc.cluster.local"
vips = ["10.96.0.10"]
ports = [{ service_port = 80, target_port = 8080 }]
[[workload]]
uid = "c//v1/Pod/ns/a"
namespace = "ns"
addresses = ["10.0.0.1"]
services = { "ns/web.ns.svc.cluster.local" = [] }
[[workload]]
uid = "c//v1/Pod/ns/b"
namespace = "ns"
addresses = ["10.0.0.2"]
services = { "ns/web.ns.svc.cluster.local" = [] }
[[policy]]
name = "deny-all"
namespace = "ns"
action = "deny"
)";

MeshModel parse(const std::string& text) {
  auto r = parse_mesh_file(text, "test.toml", {.allow_legacy_tunnel = true});
  EXPECT_TRUE(r.ok()) << r.error().str();
  return r.ok() ? *r : MeshModel{};
}

Workload workload(const std::string& uid, const char* addr, Tunnel t = Tunnel::kNone) {
  Workload w;
  w.uid = uid;
  w.ns = "ns";
  w.addresses = {*IpAddr::parse(addr)};
  w.tunnel = t;
  w.services["ns/web.ns.svc.cluster.local"] = {};
  return w;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/mg-xds-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name, const std::string& text = "") const {
    const std::string p = path_ + "/" + name;
    if (!text.empty()) std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Polls the provider's slot until a model satisfies `pred`; keeps the newest model seen.
struct ModelWatch {
  XdsProvider& p;
  std::shared_ptr<const MeshModel> last;
  bool wait(const std::function<bool(const MeshModel&)>& pred, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto u = p.take()) last = u->model;
      if (last && pred(*last)) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(5ms);
    }
  }
};

class XdsTest : public testing::Test {
 protected:
  MeshServer& serve(const MeshModel& m, int port = 0, tools::MeshServerOptions opt = {}) {
    opt.listen = "127.0.0.1:" + std::to_string(port);
    if (opt.token.empty()) opt.token = kToken;
    if (opt.cluster_id.empty()) opt.cluster_id = kCluster;
    server_ = std::make_unique<MeshServer>(opt);
    auto p = server_->start(m);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    port_ = p.ok() ? *p : 0;
    return *server_;
  }
  XdsOptions options() {
    XdsOptions o;
    o.address = "127.0.0.1:" + std::to_string(port_);
    o.tls = false;
    o.token_file = dir_.file("token", std::string(kToken) + "\n");
    o.cluster_id = kCluster;
    o.node_id = "ztunnel~198.51.100.1~gw.istio-system~istio-system.svc.cluster.local";
    o.node_metadata = {{"NAME", "gw"}, {"NAMESPACE", "istio-system"}};
    return o;
  }
  static bool has(const MeshServer& s, Kind k, const std::string& type = "") {
    for (const auto& e : s.events()) {
      if (e.kind == k && (type.empty() || e.type_url == type)) return true;
    }
    return false;
  }
  static size_t count(const MeshServer& s, Kind k) {
    size_t n = 0;
    for (const auto& e : s.events()) n += e.kind == k;
    return n;
  }

  TempDir dir_;
  std::unique_ptr<MeshServer> server_;
  int port_ = 0;
};

TEST_F(XdsTest, InitialSyncUpdatesAndRemovals) {
  MeshModel m = parse(kMesh);
  MeshServer& server = serve(m);
  XdsProvider client(options());
  ASSERT_TRUE(client.start().ok());
  ModelWatch w{client};
  ASSERT_TRUE(w.wait([](const MeshModel& x) {
    return x.workloads.size() == 2 && x.services.size() == 1 && x.policies.size() == 1;
  }, 5s));
  EXPECT_EQ(*w.last, m);  // what the file says, through proto and back
  EXPECT_TRUE(client.synced());

  // The server saw the token, clusterid, node and two wildcard subscriptions without versions.
  MeshServerEvent ev;
  ASSERT_TRUE(server.wait_event([](const auto& e) { return e.kind == Kind::kConnect; }, 1000, &ev));
  EXPECT_EQ(ev.authorization, std::string("Bearer ") + kToken);
  EXPECT_EQ(ev.cluster_id, kCluster);
  size_t subscribes = 0;
  for (const auto& e : server.events()) {
    if (e.kind != Kind::kSubscribe) continue;
    ++subscribes;
    EXPECT_EQ(e.node_id, "ztunnel~198.51.100.1~gw.istio-system~istio-system.svc.cluster.local");
    EXPECT_EQ(e.node_metadata.at("NAMESPACE"), "istio-system");
    EXPECT_TRUE(e.initial_versions.empty());
  }
  EXPECT_EQ(subscribes, 2u);
  ASSERT_TRUE(server.wait_event([](const auto& e) {
    return e.kind == Kind::kAck && e.type_url == kAuthorizationTypeUrl; }, 1000));
  EXPECT_TRUE(has(server, Kind::kAck, kAddressTypeUrl));

  // Update: b changes, c appears.
  m.workloads["c//v1/Pod/ns/b"].capacity = 7;
  m.workloads["c//v1/Pod/ns/c"] = workload("c//v1/Pod/ns/c", "10.0.0.3");
  server.set_model(m);
  ASSERT_TRUE(w.wait([](const MeshModel& x) {
    return x.workloads.size() == 3 && x.workloads.at("c//v1/Pod/ns/b").capacity == 7;
  }, 5s));

  // Removal: a and the policy go.
  m.workloads.erase("c//v1/Pod/ns/a");
  m.policies.clear();
  server.set_model(m);
  ASSERT_TRUE(w.wait([](const MeshModel& x) {
    return !x.workloads.contains("c//v1/Pod/ns/a") && x.policies.empty();
  }, 5s));
  EXPECT_EQ(*w.last, m);
  bool removal_sent = false;
  for (const auto& e : server.events()) {
    if (e.kind == Kind::kPush && !e.removed.empty()) removal_sent |= e.removed[0] == "c//v1/Pod/ns/a";
  }
  EXPECT_TRUE(removal_sent);
  const XdsCountersView c = XdsCountersView::of(client.counters());
  EXPECT_EQ(c.connects, 1u);
  EXPECT_EQ(c.nacks, 0u);
  EXPECT_GE(c.acks, 4u);
  EXPECT_EQ(c.workloads, 2u);
  EXPECT_EQ(c.services, 1u);
  EXPECT_EQ(c.authorizations, 0u);
  EXPECT_TRUE(c.connected);
  EXPECT_TRUE(c.synced);
  EXPECT_GT(c.last_sync_unix_ms, 0);
  client.stop();
}

TEST_F(XdsTest, InvalidResourceIsNackedAndTheRestApplied) {
  MeshModel m = parse(kMesh);
  m.workloads["c//v1/Pod/ns/legacy"] = workload("c//v1/Pod/ns/legacy", "10.0.0.9",
                                                Tunnel::kLegacyIstioMtls);
  MeshServer& server = serve(m);
  XdsProvider client(options());
  ASSERT_TRUE(client.start().ok());
  ModelWatch w{client};
  ASSERT_TRUE(w.wait([](const MeshModel& x) { return x.workloads.size() == 2 && !x.policies.empty(); }, 5s));
  EXPECT_FALSE(w.last->workloads.contains("c//v1/Pod/ns/legacy"));
  EXPECT_TRUE(w.last->services.contains("ns/web.ns.svc.cluster.local"));
  MeshServerEvent nack;
  ASSERT_TRUE(server.wait_event([](const auto& e) { return e.kind == Kind::kNack; }, 2000, &nack));
  EXPECT_EQ(nack.type_url, kAddressTypeUrl);
  EXPECT_EQ(nack.error_detail,
            "c//v1/Pod/ns/legacy: ztunnel does not support sending legacy Istio mTLS");
  EXPECT_TRUE(client.synced());  // a NACKed response still counts as the first response
  EXPECT_EQ(client.counters().nacks.load(), 1u);
  EXPECT_EQ(client.counters().resources_rejected.load(), 1u);

  // Fixing the resource makes it apply (the server re-sends it: new version).
  m.workloads["c//v1/Pod/ns/legacy"].tunnel = Tunnel::kHbone;
  server.set_model(m);
  ASSERT_TRUE(w.wait([](const MeshModel& x) { return x.workloads.contains("c//v1/Pod/ns/legacy"); }, 5s));
  client.stop();
}

// Lines of captured stderr with `event=<event>` in them.
std::vector<std::string> log_lines(const std::string& out, const std::string& event) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    if (l.find(" event=" + event + " ") != std::string::npos) v.push_back(l);
  }
  return v;
}

TEST_F(XdsTest, ThousandsOfLongNamedBadResourcesGetOneBoundedNackOnAStreamThatStays) {
  // 3,000 resources the client rejects, each named by a 2 KiB uid: named in full, the NACK
  // would be over 6 MB, past the server's 4 MiB receive limit (gRPC's default, Istiod's too).
  constexpr size_t kBad = 3000;
  MeshModel m = parse(kMesh);
  for (size_t i = 0; i < kBad; ++i) {
    std::string uid = "c//v1/Pod/ns/" + std::to_string(i) + "-";
    uid.resize(2048, 'x');
    m.workloads[uid] = workload(uid, "10.0.0.9", Tunnel::kLegacyIstioMtls);
  }
  MeshServer& server = serve(m);
  testing::internal::CaptureStderr();
  XdsProvider client(options());
  ASSERT_TRUE(client.start().ok());
  MeshServerEvent nack;
  const bool got = server.wait_event([](const auto& e) { return e.kind == Kind::kNack; }, 5000,
                                     &nack);
  std::this_thread::sleep_for(300ms);  // time for a reset and reconnects, had there been one
  const size_t connects = count(server, Kind::kConnect);
  const size_t disconnects = count(server, Kind::kDisconnect);
  client.stop();
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(got) << "no NACK reached the server; connects=" << connects;
  EXPECT_EQ(nack.type_url, kAddressTypeUrl);
  EXPECT_LE(nack.error_detail.size(), kXdsNackDetailMaxBytes);
  EXPECT_NE(nack.error_detail.find("(3000 rejected)"), std::string::npos) << nack.error_detail;
  EXPECT_EQ(nack.error_detail.rfind("c//v1/Pod/ns/", 0), 0u) << "the first names are shown";
  EXPECT_EQ(connects, 1u);
  EXPECT_EQ(disconnects, 0u);
  EXPECT_EQ(client.counters().resources_rejected.load(), kBad);
  // The log line says as much, as boundedly.
  const auto lines = log_lines(err, "xds_nack");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LE(lines[0].size(), kXdsNackDetailMaxBytes + 512);
  EXPECT_NE(lines[0].find(" rejected=3000 "), std::string::npos);
  std::printf("NACK of 3000 x 2 KiB names: %zu bytes, its log line %zu bytes\n",
              nack.error_detail.size(), lines[0].size());
}

TEST_F(XdsTest, AStreamResetAfterEveryNackBacksOffInsteadOfLooping) {
  MeshModel m = parse(kMesh);
  m.workloads["c//v1/Pod/ns/legacy"] = workload("c//v1/Pod/ns/legacy", "10.0.0.9",
                                                Tunnel::kLegacyIstioMtls);
  tools::MeshServerOptions so;
  so.reset_after_nack = true;
  MeshServer& server = serve(m, 0, so);
  XdsProvider client(options());
  ASSERT_TRUE(client.start().ok());
  std::this_thread::sleep_for(1500ms);
  const size_t connects = count(server, Kind::kConnect);
  const uint64_t backoff_ms = client.counters().backoff_ms.load();
  client.stop();
  // Waits of 10, 20, 40 ... 640 ms: at most 8 streams in 1.5 s (a loop at the 10 ms initial
  // backoff makes dozens), and still retrying.
  EXPECT_GE(connects, 3u);
  EXPECT_LE(connects, 8u);
  EXPECT_GE(backoff_ms, 160u);
  std::printf("%zu streams in 1.5 s, backoff now %lu ms\n", connects, (unsigned long)backoff_ms);
}

TEST(XdsNackDetail, SixtyThousandTwoKibNamesMakeAFourKibMessage) {
  NackDetail d;
  for (int i = 0; i < 60000; ++i) {
    std::string name = "c//v1/Pod/ns/" + std::to_string(i) + "-";
    name.resize(2048, 'n');
    d.add(name, "resource name does not match the workload uid \"" + name + "\"");
  }
  EXPECT_EQ(d.count(), 60000u);
  const std::string msg = d.message();
  EXPECT_LE(msg.size(), kXdsNackDetailMaxBytes);
  EXPECT_GT(msg.size(), kXdsNackDetailMaxBytes / 2) << "as many names as fit";
  EXPECT_EQ(msg.rfind("c//v1/Pod/ns/0-nnn", 0), 0u) << msg.substr(0, 80);
  const std::string tail = " more (60000 rejected)";
  ASSERT_GE(msg.size(), tail.size());
  EXPECT_EQ(msg.substr(msg.size() - tail.size()), tail) << msg;
  const size_t shown = size_t(std::count(msg.begin(), msg.end(), ';'));  // entries + the tail
  EXPECT_NE(msg.find("; and " + std::to_string(60000 - shown) + " more"), std::string::npos);
  EXPECT_LE(shown, kXdsNackMaxNamed);
  std::printf("NACK of 60000 x 2 KiB names: %zu bytes, %zu named\n", msg.size(), shown);
}

TEST(XdsNackDetail, FewShortRejectionsAreNamedInFullAndLongOnesCutOnACharacter) {
  NackDetail none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.message(), "");
  NackDetail two;
  two.add("a", "no resource");
  two.add("b", "cannot decode istio.workload.Address");
  EXPECT_EQ(two.message(), "a: no resource; b: cannot decode istio.workload.Address");
  // A name of two-byte characters is cut before a character, never inside one.
  std::string wide;
  for (int i = 0; i < 300; ++i) wide += "\xc3\xa9";  // U+00E9
  NackDetail cut;
  cut.add(wide, "x");
  const std::string msg = cut.message();
  const std::string name = msg.substr(0, msg.find("...: x"));
  ASSERT_NE(msg.find("...: x"), std::string::npos) << msg;
  EXPECT_LE(name.size() + 3, kXdsNackNameMaxBytes);
  EXPECT_EQ(name.size() % 2, 0u);
  EXPECT_EQ(name, wide.substr(0, name.size()));
}

TEST_F(XdsTest, ServerRestartReconnectsWithInitialVersions) {
  MeshModel m = parse(kMesh);
  serve(m);
  const int port = port_;
  XdsProvider client(options());
  ASSERT_TRUE(client.start().ok());
  ModelWatch w{client};
  ASSERT_TRUE(w.wait([](const MeshModel& x) { return x.workloads.size() == 2 && !x.policies.empty(); }, 5s));
  server_->stop();

  // Server 2: b changed, a gone, the rest the same.
  MeshModel m2 = m;
  m2.workloads.erase("c//v1/Pod/ns/a");
  m2.workloads["c//v1/Pod/ns/b"].capacity = 3;
  MeshServer& server2 = serve(m2, port);
  ASSERT_EQ(port_, port);
  ASSERT_TRUE(w.wait([](const MeshModel& x) {
    return x.workloads.size() == 1 && x.workloads.begin()->second.capacity == 3;
  }, 5s));
  EXPECT_EQ(*w.last, m2);
  MeshServerEvent sub;
  ASSERT_TRUE(server2.wait_event([](const auto& e) {
    return e.kind == Kind::kSubscribe && e.type_url == kAddressTypeUrl; }, 2000, &sub));
  // The client told server 2 what it held: both workloads and the service, with versions.
  EXPECT_EQ(sub.initial_versions.size(), 3u);
  EXPECT_TRUE(sub.initial_versions.contains("c//v1/Pod/ns/a"));
  EXPECT_TRUE(sub.initial_versions.contains("ns/web.ns.svc.cluster.local"));
  for (const auto& [name, v] : sub.initial_versions) EXPECT_EQ(v.size(), 16u) << name;
  // Server 2 re-sent only what changed and removed what is gone.
  MeshServerEvent push;
  ASSERT_TRUE(server2.wait_event([](const auto& e) {
    return e.kind == Kind::kPush && e.type_url == kAddressTypeUrl; }, 2000, &push));
  EXPECT_EQ(push.names, std::vector<std::string>{"c//v1/Pod/ns/b"});
  EXPECT_EQ(push.removed, std::vector<std::string>{"c//v1/Pod/ns/a"});
  ASSERT_TRUE(server2.wait_event([](const auto& e) {
    return e.kind == Kind::kPush && e.type_url == kAuthorizationTypeUrl; }, 2000, &push));
  EXPECT_TRUE(push.names.empty());  // unchanged policy not re-sent
  EXPECT_EQ(client.counters().connects.load(), 2u);
  EXPECT_EQ(client.counters().disconnects.load(), 1u);
  client.stop();
}

// Keeps a stopped server's port from going to another process's server (ctest runs tests in
// parallel, and a bind to port 0 may get the port just freed): bound, never listening, so
// connection attempts are refused as they would be with nothing there.
class PortHold {
 public:
  explicit PortHold(int port) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      // The closed server's connections may sit in TIME_WAIT on the port.
      const int one = 1;
      setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(uint16_t(port));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return;
      close(fd_);
      fd_ = -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~PortHold() { release(); }
  bool held() const { return fd_ >= 0; }
  void release() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

TEST_F(XdsTest, ServerDownKeepsStateAndBacksOff) {
  MeshModel m = parse(kMesh);
  serve(m);
  const int port = port_;
  XdsProvider client(options());
  ASSERT_TRUE(client.start().ok());
  ModelWatch w{client};
  ASSERT_TRUE(w.wait([](const MeshModel& x) { return x.workloads.size() == 2; }, 5s));
  // Synced = a first response of both types (the policy one may come after the workloads).
  const auto ts = std::chrono::steady_clock::now();
  while (!client.synced() && std::chrono::steady_clock::now() - ts < 5s) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(client.synced());
  (void)client.take();  // the synced model, if the watch did not take it
  server_->stop();
  server_.reset();
  PortHold hold(port);
  ASSERT_TRUE(hold.held());
  // Wait for four failed attempts (10, 20, 40, 80 ms of backoff between them); on a loaded
  // machine that takes longer, so poll instead of sleeping a fixed time.
  const auto t0 = std::chrono::steady_clock::now();
  while (client.counters().connect_failures.load() < 4 &&
         std::chrono::steady_clock::now() - t0 < 20s) {
    std::this_thread::sleep_for(10ms);
  }
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - t0).count();
  // Nothing new was delivered: the control loop keeps the last model (and snapshot).
  EXPECT_FALSE(client.take().has_value());
  EXPECT_TRUE(client.synced());
  const XdsCountersView c = XdsCountersView::of(client.counters());
  EXPECT_FALSE(c.connected);
  EXPECT_EQ(c.disconnects, 1u);
  EXPECT_GE(c.connect_failures, 4u);
  // The wait doubles (10, 20, 40, 80 ms after the first four failures) up to the cap, so
  // attempts stay few, not hundreds.
  EXPECT_GE(c.backoff_ms, 80u);
  EXPECT_LE(c.backoff_ms, kXdsMaxBackoffMs);
  EXPECT_LE(c.connect_failures, uint64_t(6 + elapsed_ms / 100));
  // Back up: the client reconnects on its next attempt and carries its versions.
  hold.release();
  MeshServer& server2 = serve(m, port);
  ASSERT_TRUE(server2.wait_event([](const auto& e) {
    return e.kind == Kind::kSubscribe && e.type_url == kAddressTypeUrl; }, 4000));
  ASSERT_TRUE(server2.wait_event([](const auto& e) { return e.kind == Kind::kAck; }, 2000));
  EXPECT_EQ(client.counters().connects.load(), 2u);
  client.stop();
}

TEST_F(XdsTest, WrongTokenOrClusterIsRejectedAndRetried) {
  MeshModel m = parse(kMesh);
  MeshServer& server = serve(m);
  XdsOptions o = options();
  o.token_file = dir_.file("bad-token", "not-the-token");
  XdsProvider client(o);
  ASSERT_TRUE(client.start().ok());
  MeshServerEvent rej;
  ASSERT_TRUE(server.wait_event([](const auto& e) { return e.kind == Kind::kRejected; }, 2000, &rej));
  EXPECT_EQ(rej.authorization, "Bearer not-the-token");
  // Retried with backoff: wait for the second attempt (longer on a loaded machine).
  const auto t0 = std::chrono::steady_clock::now();
  while (count(server, Kind::kRejected) < 2 && std::chrono::steady_clock::now() - t0 < 10s) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(count(server, Kind::kRejected), 2u);
  EXPECT_FALSE(client.synced());
  EXPECT_FALSE(has(server, Kind::kSubscribe));
  client.stop();

  XdsOptions o2 = options();
  o2.cluster_id = "other-cluster";
  XdsProvider client2(o2);
  ASSERT_TRUE(client2.start().ok());
  ASSERT_TRUE(server.wait_event([](const auto& e) {
    return e.kind == Kind::kRejected && e.cluster_id == "other-cluster"; }, 2000));
  EXPECT_FALSE(client2.synced());
  client2.stop();
}

// A throwaway CA and a server certificate for localhost / 127.0.0.1, made with the openssl CLI.
bool make_certs(const std::string& dir, const std::string& ca_name) {
  const std::string cmd =
      "cd " + dir + " && "
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
      "-subj /CN=" + ca_name + " -keyout " + ca_name + ".key -out " + ca_name + ".pem 2>/dev/null && "
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost "
      "-keyout server.key -out server.csr 2>/dev/null && "
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext && "
      "openssl x509 -req -in server.csr -CA " + ca_name + ".pem -CAkey " + ca_name + ".key "
      "-CAcreateserial -days 1 -extfile san.ext -out server.pem 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

TEST_F(XdsTest, TlsServerVerifiedWithCaFile) {
  ASSERT_TRUE(make_certs(dir_.path(), "ca"));
  TempDir other;
  ASSERT_TRUE(make_certs(other.path(), "other-ca"));
  tools::MeshServerOptions so;
  so.cert_file = dir_.path() + "/server.pem";
  so.key_file = dir_.path() + "/server.key";
  MeshServer& server = serve(parse(kMesh), 0, so);
  XdsOptions o = options();
  o.tls = true;
  o.ca_file = dir_.path() + "/ca.pem";
  XdsProvider client(o);
  ASSERT_TRUE(client.start().ok());
  ModelWatch w{client};
  ASSERT_TRUE(w.wait([](const MeshModel& x) { return x.workloads.size() == 2; }, 5s));
  // The ACK follows the model being applied: wait for it at the server.
  EXPECT_TRUE(server.wait_event([](const auto& e) { return e.kind == Kind::kAck; }, 5000));
  client.stop();

  // A CA that did not sign the server's certificate: no connection.
  XdsOptions bad = options();
  bad.tls = true;
  bad.ca_file = other.path() + "/other-ca.pem";
  XdsProvider untrusting(bad);
  ASSERT_TRUE(untrusting.start().ok());
  // Wait for a failed attempt (a loaded machine takes longer than an idle one).
  const auto t0 = std::chrono::steady_clock::now();
  while (untrusting.counters().connect_failures.load() < 1 &&
         std::chrono::steady_clock::now() - t0 < 10s) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(untrusting.synced());
  EXPECT_GE(untrusting.counters().connect_failures.load(), 1u);
  EXPECT_EQ(untrusting.counters().connects.load(), 0u);
  untrusting.stop();
}

TEST(XdsBackoffTest, QuickReconnectOnlyForTheSpecsStatuses) {
  // grpc::StatusCode values: OK 0, CANCELLED 1, UNKNOWN 2, DEADLINE_EXCEEDED 4,
  // PERMISSION_DENIED 7, UNAVAILABLE 14, UNAUTHENTICATED 16.
  EXPECT_TRUE(xds_quick_reconnect(0, ""));
  EXPECT_TRUE(xds_quick_reconnect(1, ""));
  EXPECT_TRUE(xds_quick_reconnect(2, "stream reset"));
  EXPECT_TRUE(xds_quick_reconnect(4, ""));
  EXPECT_TRUE(xds_quick_reconnect(14, "transport is closing"));
  EXPECT_TRUE(xds_quick_reconnect(14, "Socket closed; received prior goaway: code: NO_ERROR"));
  EXPECT_FALSE(xds_quick_reconnect(14, "failed to connect to all addresses"));
  EXPECT_FALSE(xds_quick_reconnect(16, "bad token"));
  EXPECT_FALSE(xds_quick_reconnect(7, ""));
}

TEST(XdsResources, WildcardServiceHostnamesAreCheckedLikeListenerHostnames) {
  istio::workload::Service p;
  p.set_namespace_("ext");
  p.set_hostname("*.example.com");  // ServiceEntry style: HBONE authorities match it
  EXPECT_TRUE(service_from_proto(p).ok());
  p.set_hostname("a.*.example.com");
  auto bad = service_from_proto(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("a.*.example.com"), std::string::npos) << bad.error().message;
  p.set_hostname("~.*");
  EXPECT_FALSE(service_from_proto(p).ok()) << "a regex is not a mesh hostname";
}

TEST(XdsOptionsTest, DefaultNodeIdIsZtunnelStyle) {
  unsetenv("INSTANCE_IP");
  setenv("POD_NAME", "gw-0", 1);
  setenv("POD_NAMESPACE", "edge", 1);
  auto cfg = parse_config(R"(
[[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24", "2001:db8::1/64"]
[mesh]
source = "xds"
address = "istiod.istio-system.svc:15012"
cluster_id = "east"
)", "c.toml");
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  XdsOptions o = xds_options_from_config(*cfg);
  EXPECT_EQ(o.node_id, "ztunnel~198.51.100.1~gw-0.edge~edge.svc.cluster.local");
  EXPECT_EQ(o.node_metadata.at("NAME"), "gw-0");
  EXPECT_EQ(o.node_metadata.at("NAMESPACE"), "edge");
  EXPECT_EQ(o.node_metadata.at("INSTANCE_IPS"), "198.51.100.1,2001:db8::1");
  EXPECT_EQ(o.cluster_id, "east");
  EXPECT_TRUE(o.tls);
  unsetenv("POD_NAME");
  unsetenv("POD_NAMESPACE");
}

}  // namespace
}  // namespace meshgate::ctl::mesh
