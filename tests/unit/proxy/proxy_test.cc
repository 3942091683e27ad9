// mode = "proxy" through the real worker (net_ring ports, DataplaneHarness) against a peer TCP
// stack playing the client (192.0.2.2, routed via the router) and the backends (198.51.100.x,
// on-link): handshakes, splicing, half-close, resets, idle timeout, PROXY protocol v2, bounded
// buffering with a slow reader, RSS-aware backend ports with two workers, which segments
// the stack's owner calls its own (StackHost::is_local_endpoint), and Istio's TCP metrics and
// the per-backend bytes each way of a proxied connection.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "control/runtime/istio_metrics.h"
#include "dataplane/accesslog/access_record.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/proxy/proxy_protocol.h"
#include "dataplane/stack/stack_host.h"
#include "tests/support/dp_harness.h"
#include "tests/support/proxy_net.h"

namespace meshgate::test {
namespace {

std::string config(const std::string& proxy_table) {
  return std::string(kDemoTopology) + R"(
[fullnat]
local_addresses = ["198.51.100.2", "2001:db8:1::2"]
[proxy]
buffer_bytes = 65536
memory_mb = 8
max_connections = 512
time_wait_s = 1
)" + proxy_table + R"(
[[service]]
name = "px"
vip = "203.0.113.20"
port = 80
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "ppv2"
vip = "203.0.113.20"
port = 81
mode = "proxy"
proxy_protocol = "v2"
  [[service.backend]]
  address = "198.51.100.13"
  port = 8081
[[service]]
name = "refused"
vip = "203.0.113.20"
port = 82
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 9999
)";
}

TEST(Proxy, SplicesBothDirectionsWithHalfCloseFromTheFullnatAddress) {
  Net n(config(""), HarnessOptions{});
  const TcpConnId c = n.connect(80);
  ASSERT_TRUE(n.peer.conns[c].connected);
  ASSERT_EQ(n.peer.accepted.size(), 1u) << "the proxy connected to a backend";
  const TcpConnId b = n.peer.accepted[0];
  const TcpTuple bt = n.peer.conns[b].tuple;
  EXPECT_EQ(bt.remote, kLocal) << "backends see the [fullnat] address";
  EXPECT_TRUE(bt.local == *IpAddr::parse("198.51.100.11") || bt.local == *IpAddr::parse("198.51.100.12"));
  EXPECT_EQ(bt.local_port, 8080);

  // Client -> backend, then the client half-closes; the backend still answers.
  const std::string up = pattern(300'000, 1), down = pattern(500'000, 2);
  n.peer.conns[c].tx = up;
  n.peer.conns[c].shut_after = true;
  for (int i = 0; i < 400 && !n.peer.conns[b].fin; ++i) n.pass_ms(5);
  ASSERT_TRUE(n.peer.conns[b].fin) << "the client's FIN reached the backend";
  EXPECT_EQ(n.peer.conns[b].rx, up);
  EXPECT_FALSE(n.peer.conns[c].fin) << "the other direction is still open";
  n.peer.conns[b].tx = down;
  n.peer.conns[b].shut_after = true;
  for (int i = 0; i < 400 && !n.peer.conns[c].fin; ++i) n.pass_ms(5);
  ASSERT_TRUE(n.peer.conns[c].fin);
  EXPECT_EQ(n.peer.conns[c].rx.size(), down.size());
  EXPECT_EQ(n.peer.conns[c].rx, down);
  n.pass_ms(100);
  EXPECT_FALSE(n.peer.conns[c].reset);
  EXPECT_FALSE(n.peer.conns[b].reset);

  const dp::ProxyStats& s = n.stats();
  EXPECT_EQ(s.proxy[dp::kPxAccepted], 1u);
  EXPECT_EQ(s.proxy[dp::kPxSessionsClosed], 1u);
  EXPECT_EQ(s.proxy[dp::kPxBytesToBackend], up.size());
  EXPECT_EQ(s.proxy[dp::kPxBytesToClient], down.size());
  EXPECT_EQ(s.sessions_active, 0u);
  EXPECT_EQ(n.h.backend("px", bt.local.str() + ":8080").flows, 1u);
  EXPECT_TRUE(n.h.balanced());
  EXPECT_EQ(n.h.counters().flows_created, 0u) << "proxied connections take no conntrack entry";
  // The stack's frames are generated packets of their own kind, so the summary can name them.
  const dp::WorkerCounters& k = n.h.counters();
  EXPECT_GT(k.stack_frames_out, 0u);
  EXPECT_EQ(k.generated,
            k.stack_frames_out + k.arp_requests + k.nd_solicits + k.icmp_errors_sent + k.resets_sent);
}

TEST(Proxy, BackendThatRefusesResetsTheClient) {
  Net n(config(""), HarnessOptions{});
  const TcpConnId c = n.connect(82);
  n.pass_ms(20);
  EXPECT_TRUE(n.peer.conns[c].reset);
  const dp::ProxyStats& s = n.stats();
  EXPECT_EQ(s.proxy[dp::kPxBackendRefused], 1u);
  EXPECT_EQ(s.sessions_active, 0u);
}

// During a drain the stack refuses a new connection with a RST: the client fails over at once.
TEST(Proxy, DrainRefusesNewConnectionsWithAReset) {
  Net n(config(""), HarnessOptions{});
  n.h.worker().set_draining(true);
  n.stats();  // the worker's proxy takes the drain state at its next burst
  const TcpConnId c = n.connect(80);
  n.pass_ms(20);
  EXPECT_TRUE(n.peer.conns[c].reset);
  EXPECT_FALSE(n.peer.conns[c].connected);
  EXPECT_TRUE(n.peer.accepted.empty()) << "no backend connection for a refused client";
  const dp::ProxyStats& s = n.stats();
  EXPECT_EQ(s.proxy[dp::kPxRefusedDraining], 1u);
  EXPECT_EQ(s.proxy[dp::kPxAccepted], 0u);
}

TEST(Proxy, ResetsPropagateInBothDirections) {
  Net n(config(""), HarnessOptions{});
  // The client resets: the backend sees a RST.
  const TcpConnId c1 = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b1 = n.peer.accepted[0];
  n.peer.st().abort(c1);
  n.settle();
  EXPECT_TRUE(n.peer.conns[b1].reset);
  // The backend resets: the client sees a RST.
  const TcpConnId c2 = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 2u);
  n.peer.st().abort(n.peer.accepted[1]);
  n.settle();
  EXPECT_TRUE(n.peer.conns[c2].reset);
  const dp::ProxyStats& s = n.stats();
  EXPECT_EQ(s.proxy[dp::kPxClientResets], 1u);
  EXPECT_EQ(s.proxy[dp::kPxBackendResets], 1u);
  EXPECT_EQ(s.sessions_active, 0u);
}

TEST(Proxy, IdleTimeoutClosesQuietSessionsOnly) {
  Net n(config("idle_timeout_s = 1\n"), HarnessOptions{});
  const TcpConnId c = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.peer.accepted[0];
  n.pass_ms(700);
  n.peer.conns[c].tx = "still here";
  n.pass_ms(700);  // 1.4 s since the handshake, 0.7 s since the last byte
  EXPECT_FALSE(n.peer.conns[c].fin);
  EXPECT_EQ(n.peer.conns[b].rx, "still here");
  n.pass_ms(400);
  EXPECT_TRUE(n.peer.conns[c].fin) << "the proxy closes the client side";
  EXPECT_TRUE(n.peer.conns[b].fin) << "and the backend side";
  EXPECT_EQ(n.stats().proxy[dp::kPxIdleTimeouts], 1u);
}

TEST(Proxy, ProxyProtocolV2HeaderPrecedesTheClientBytes) {
  Net n(config(""), HarnessOptions{});
  const TcpConnId c = n.connect(81);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.peer.accepted[0];
  EXPECT_EQ(n.peer.conns[b].tuple.local_port, 8081);
  n.peer.conns[c].tx = "hello";
  n.pass_ms(50);
  const std::string& rx = n.peer.conns[b].rx;
  ASSERT_EQ(rx.size(), 28u + 5u);
  const std::string sig("\r\n\r\n\0\r\nQUIT\n", 12);
  EXPECT_EQ(rx.substr(0, 12), sig);
  EXPECT_EQ(uint8_t(rx[12]), 0x21) << "version 2, PROXY";
  EXPECT_EQ(uint8_t(rx[13]), 0x11) << "TCP over IPv4";
  EXPECT_EQ(dp::rd16(reinterpret_cast<const uint8_t*>(rx.data()) + 14), 12u);
  const auto* a = reinterpret_cast<const uint8_t*>(rx.data()) + 16;
  EXPECT_EQ(IpAddr::v4_bytes(a), kClient);
  EXPECT_EQ(IpAddr::v4_bytes(a + 4), kVip);
  EXPECT_EQ(dp::rd16(a + 8), n.peer.conns[c].tuple.local_port);
  EXPECT_EQ(dp::rd16(a + 10), 81u);
  EXPECT_EQ(rx.substr(28), "hello");
  EXPECT_EQ(n.stats().proxy[dp::kPxProxyProtocolSent], 1u);
}

TEST(Proxy, SlowReaderClosesTheWindowInsteadOfBuffering) {
  Net n(config(""), HarnessOptions{});
  n.peer.auto_read = false;
  const TcpConnId c = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.peer.accepted[0];
  const std::string down = pattern(4 << 20, 3);
  n.peer.conns[b].tx = down;
  n.pass_ms(1000);
  // Everything in flight is bounded: the client's 256 KiB window, the proxy's two 64 KiB
  // buffers, the backend's send buffer; the backend could not queue the rest.
  const dp::ProxyStats& s = n.stats();
  EXPECT_LE(s.tcp_mem_bytes, 4u * 65536u) << "the proxy holds at most its buffers";
  EXPECT_LT(n.peer.conns[b].tx_off, down.size() / 2) << "the backend was flow-controlled";
  EXPECT_GT(s.tcp[dp::tcp::kWindowProbes] + s.proxy[dp::kPxBytesToClient], 0u);
  // The reader wakes up: everything arrives, in order.
  n.peer.auto_read = true;
  for (int i = 0; i < 400 && n.peer.conns[c].rx.size() < down.size(); ++i) {
    n.peer.read(c);
    n.pass_ms(10);
  }
  EXPECT_EQ(n.peer.conns[c].rx.size(), down.size());
  EXPECT_TRUE(n.peer.conns[c].rx == down);
}

TEST(Proxy, TwoWorkersPickBackendPortsWhoseRepliesHashToThem) {
  Net n(config(""), HarnessOptions{4096, 2, true});
  n.check_rss = true;
  std::vector<TcpConnId> clients;
  for (int i = 0; i < 16; ++i) clients.push_back(n.connect(80));
  ASSERT_EQ(n.peer.accepted.size(), 16u);
  for (TcpConnId c : clients) n.peer.conns[c].tx = "x" + std::to_string(c);
  n.pass_ms(50);
  for (size_t i = 0; i < clients.size(); ++i) {
    const TcpConnId b = n.peer.accepted[i];
    EXPECT_FALSE(n.peer.conns[b].rx.empty());
  }
  EXPECT_GT(n.handoff_free_replies, 16u);
  EXPECT_EQ(n.h.counters().handoff_out, 0u) << "every reply reached its owner directly";
  uint64_t accepted = 0;
  for (uint16_t w = 0; w < 2; ++w) accepted += n.stats(w).proxy[dp::kPxAccepted];
  EXPECT_EQ(accepted, 16u);
  EXPECT_GT(n.stats(0).proxy[dp::kPxAccepted], 0u) << "RSS spread the clients";
  EXPECT_GT(n.stats(1).proxy[dp::kPxAccepted], 0u);
}

TEST(Proxy, PacketTooBigLowersTheMssOfTheConnectionItQuotes) {
  Net n(config(""), HarnessOptions{});
  const TcpConnId c = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.peer.accepted[0];
  const std::string down = pattern(40'000, 5);
  n.blackhole = kClient;  // full-size segments toward the client vanish on the way
  n.peer.conns[b].tx = down;
  n.settle();
  ASSERT_FALSE(n.captured.empty());
  const pkt::Bytes seg = n.captured.front();
  ASSERT_EQ(seg.size(), 14u + 1500u) << "full-size segments first";
  n.captured.clear();
  // The router toward the client: fragmentation needed, next-hop MTU 1200 (RFC 1191).
  const pkt::EthHdr eth{MacAddr{{2, 0, 0, 0, 0, 1}}, MacAddr{{2, 0, 0, 0, 0, 0xfe}}};
  pkt::IpHdr ip;
  ip.src = *IpAddr::parse("198.51.100.254");
  ip.dst = kVip;
  const pkt::Bytes err = pkt::build_icmp_error(
      eth, ip, dp::kIcmpDestUnreach, 4, std::span<const uint8_t>(seg.data() + 14, seg.size() - 14),
      1200);
  n.deliver(n.h.send(err, n.now));
  n.settle();
  ASSERT_FALSE(n.captured.empty()) << "what was in flight is sent again at once";
  for (const pkt::Bytes& f : n.captured) EXPECT_LE(dp::rd16(&f[16]), 1200u) << "IP total length";
  const dp::ProxyStats& s = n.stats();
  EXPECT_EQ(s.tcp[dp::tcp::kPmtuUpdates], 1u);
  EXPECT_EQ(n.h.drops(dp::Drop::kIcmpErrorNoFlow), 0u);
  // The path heals: everything arrives, in smaller segments.
  n.blackhole = IpAddr{};
  for (int i = 0; i < 200 && n.peer.conns[c].rx.size() < down.size(); ++i) n.pass_ms(20);
  EXPECT_TRUE(n.peer.conns[c].rx == down);
  // An error quoting a connection the stack does not have is not taken.
  pkt::Bytes stray(seg.begin() + 14, seg.end());
  stray[20 + 3] ^= 1;  // the quoted destination port: another client connection
  n.h.send(pkt::build_icmp_error(eth, ip, dp::kIcmpDestUnreach, 4, stray, 1200), n.now);
  EXPECT_EQ(n.stats().tcp[dp::tcp::kPmtuUpdates], 1u);
  EXPECT_EQ(n.h.drops(dp::Drop::kIcmpErrorNoFlow), 1u) << "dropped as before the proxy";
}

TEST(Proxy, SessionsAppearInFlowDumps) {
  Net n(config("idle_timeout_s = 30\n"), HarnessOptions{});
  const TcpConnId c = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.peer.accepted[0];
  n.pass_ms(1000);
  std::vector<dp::FlowRecord> recs(8);
  dp::FlowDumpRequest req;
  req.records = recs.data();
  req.max = 8;
  ASSERT_TRUE(n.h.worker().post_flow_dump(&req));
  n.pass_ms(5);
  ASSERT_TRUE(req.done.load());
  ASSERT_EQ(req.count, 1u) << "one session, no conntrack flow";
  const dp::FlowRecord& r = recs[0];
  EXPECT_EQ(r.mode, dp::Mode::kProxy);
  EXPECT_EQ(r.client, kClient);
  EXPECT_EQ(r.client_port, n.peer.conns[c].tuple.local_port);
  EXPECT_EQ(r.vip, kVip);
  EXPECT_EQ(r.vip_port, 80);
  EXPECT_EQ(r.backend, n.peer.conns[b].tuple.local);
  EXPECT_EQ(r.backend_port, 8080);
  EXPECT_EQ(r.local, kLocal);
  EXPECT_EQ(r.local_port, n.peer.conns[b].tuple.remote_port) << "the port the backend saw";
  EXPECT_EQ(r.state, dp::TcpState::kEstablished);
  EXPECT_NEAR(double(r.age_ms), 1005, 10);
  EXPECT_NEAR(double(r.expires_in_ms), 30000 - 1005, 10);
}

TEST(Proxy, StackLocalEndpointsAreItsListenersAndTheTuplesOfItsOwnConnections) {
  Net n(config(""), HarnessOptions{});
  const TcpConnId c = n.connect(80);
  ASSERT_TRUE(n.peer.conns[c].connected);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpTuple bt = n.peer.conns[n.peer.accepted[0]].tuple;  // local: the backend
  ASSERT_EQ(bt.remote, kLocal);
  const dp::StackHost* s = n.h.worker().stack();
  ASSERT_NE(s, nullptr);
  const IpAddr other = *IpAddr::parse("192.0.2.99");
  // Listeners: every proxy VIP:port, whatever the source; nothing else on the VIP or elsewhere.
  EXPECT_TRUE(s->is_local_endpoint(kVip, htons(80), kClient, htons(40000)));
  EXPECT_TRUE(s->is_local_endpoint(kVip, htons(81), other, htons(1)));
  EXPECT_TRUE(s->is_local_endpoint(kVip, htons(82), other, htons(1)));
  EXPECT_FALSE(s->is_local_endpoint(kVip, htons(83), kClient, htons(40000))) << "no service";
  EXPECT_FALSE(s->is_local_endpoint(kLocal, htons(80), kClient, htons(40000)))
      << "the port on another address";
  // The backend connection: the segments of its tuple only (a conntrack fullnat flow may use the
  // same address and port toward another backend).
  EXPECT_TRUE(s->is_local_endpoint(kLocal, htons(bt.remote_port), bt.local, htons(bt.local_port)));
  EXPECT_FALSE(s->is_local_endpoint(kLocal, htons(bt.remote_port), other, htons(bt.local_port)));
  EXPECT_FALSE(s->is_local_endpoint(kLocal, htons(bt.remote_port), bt.local, htons(9999)));
  EXPECT_FALSE(s->is_local_endpoint(kLocal, htons(uint16_t(bt.remote_port + 1)), bt.local,
                                    htons(bt.local_port)));
}

// ---- access log ------------------------------------------------------------------------------

std::vector<dp::AccessRecord> drain(dp::AccessRing& ring) {
  std::vector<dp::AccessRecord> out;
  while (const dp::AccessRecord* r = ring.front()) {
    out.push_back(*r);
    ring.pop();
  }
  return out;
}

TEST(ProxyAccessLog, ASessionsRecordHasItsTupleBytesEachWayAndWhoseFinCameFirst) {
  dp::AccessRing ring(64);
  HarnessOptions opt;
  opt.access_log = &ring;
  Net n(config(""), opt);
  const TcpConnId c = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.peer.accepted[0];
  const std::string up = pattern(12'345, 3), down = pattern(54'321, 4);
  n.peer.conns[b].tx = down;
  n.peer.conns[b].shut_after = true;  // the backend finishes first
  for (int i = 0; i < 400 && !n.peer.conns[c].fin; ++i) n.pass_ms(5);
  ASSERT_TRUE(n.peer.conns[c].fin);
  EXPECT_TRUE(drain(ring).empty()) << "no record while a direction is open";
  n.peer.conns[c].tx = up;
  n.peer.conns[c].shut_after = true;
  for (int i = 0; i < 400 && !n.peer.conns[b].fin; ++i) n.pass_ms(5);
  ASSERT_TRUE(n.peer.conns[b].fin);
  n.pass_ms(20);
  const std::vector<dp::AccessRecord> recs = drain(ring);
  ASSERT_EQ(recs.size(), 1u);
  const dp::AccessRecord& r = recs[0];
  EXPECT_EQ(r.kind, dp::AccessKind::kProxy);
  EXPECT_EQ(r.end, dp::AccessEnd::kBackendFin);
  EXPECT_EQ(r.tuple.client, kClient);
  EXPECT_EQ(r.tuple.client_port, n.peer.conns[c].tuple.local_port);
  EXPECT_EQ(r.tuple.vip, kVip);
  EXPECT_EQ(r.tuple.vip_port, 80);
  EXPECT_EQ(r.tuple.backend, n.peer.conns[b].tuple.local);
  EXPECT_EQ(r.tuple.backend_port, 8080);
  EXPECT_EQ(r.bytes_from_client, up.size());
  EXPECT_EQ(r.bytes_to_client, down.size());
  EXPECT_STREQ(r.names.service, "px");
  EXPECT_GE(r.duration_ms, 10u);
  EXPECT_GT(r.start_unix_ms, 1'700'000'000'000) << "a wall-clock start";
}

TEST(ProxyAccessLog, RefusalsAndResetsSayWhichSideEndedIt) {
  dp::AccessRing ring(64);
  HarnessOptions opt;
  opt.access_log = &ring;
  Net n(config(""), opt);
  n.connect(82);  // the backend refuses
  n.pass_ms(20);
  std::vector<dp::AccessRecord> recs = drain(ring);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].end, dp::AccessEnd::kBackendRefused);
  EXPECT_STREQ(recs[0].names.service, "refused");
  EXPECT_EQ(recs[0].tuple.backend_port, 9999);

  const TcpConnId c1 = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  n.peer.st().abort(c1);
  n.settle();
  const TcpConnId c2 = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 2u);
  n.peer.st().abort(n.peer.accepted[1]);
  n.settle();
  EXPECT_TRUE(n.peer.conns[c2].reset);
  recs = drain(ring);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].end, dp::AccessEnd::kClientReset);
  EXPECT_EQ(recs[1].end, dp::AccessEnd::kBackendReset);
}

TEST(ProxyAccessLog, IdleTimeoutIsItsOwnEnd) {
  dp::AccessRing ring(64);
  HarnessOptions opt;
  opt.access_log = &ring;
  Net n(config("idle_timeout_s = 1\n"), opt);
  n.connect(80);
  n.pass_ms(1500);
  const std::vector<dp::AccessRecord> recs = drain(ring);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].end, dp::AccessEnd::kIdleTimeout);
  EXPECT_NEAR(double(recs[0].duration_ms), 1000, 50);
}

TEST(ProxyAccessLog, AFullRingDropsRecordsAndTheProxyCarriesOn) {
  dp::AccessRing ring(2);
  HarnessOptions opt;
  opt.access_log = &ring;
  Net n(config(""), opt);
  for (int i = 0; i < 5; ++i) n.connect(82);  // five refused connections, never drained
  n.pass_ms(20);
  EXPECT_EQ(ring.size(), 2u);
  EXPECT_EQ(ring.dropped(), 3u);
  EXPECT_EQ(n.stats().proxy[dp::kPxBackendRefused], 5u);
}

// Istio metrics. What a mesh source would give: px's backends are workload httpbin of service
// httpbin.web, the client's address is workload sleep (an endpoint of another service).
void add_mesh_labels(std::vector<ctl::ServiceSpec>& specs) {
  for (ctl::ServiceSpec& s : specs) {
    if (s.name != "px") continue;
    s.istio = ctl::IstioServiceLabels{"httpbin.web.svc.cluster.local", "web", "httpbin"};
    for (ctl::EndpointSpec& e : s.endpoints) {
      e.identity = "spiffe://cluster.local/ns/web/sa/httpbin";
      e.istio = ctl::IstioWorkloadLabels{"httpbin-v1", "httpbin", "v1", "web", e.identity,
                                         "Kubernetes"};
    }
  }
  ctl::ServiceSpec sleep;
  sleep.name = "sleep";
  sleep.vip = *IpAddr::parse("203.0.113.30");
  sleep.port = 9;
  ctl::EndpointSpec e;
  e.address = kClient;
  e.port = 9;
  e.identity = "spiffe://cluster.local/ns/client/sa/sleep";
  e.istio = ctl::IstioWorkloadLabels{"sleep", "sleep", "latest", "client", e.identity, "Kubernetes"};
  sleep.endpoints.push_back(e);
  specs.push_back(sleep);
}

const std::string kLabels =
    "reporter=\"source\",source_workload=\"sleep\",source_canonical_service=\"sleep\","
    "source_canonical_revision=\"latest\",source_workload_namespace=\"client\","
    "source_principal=\"unknown\",source_app=\"sleep\",source_version=\"latest\","
    "source_cluster=\"Kubernetes\",destination_service=\"httpbin.web.svc.cluster.local\","
    "destination_service_namespace=\"web\",destination_service_name=\"httpbin\","
    "destination_workload=\"httpbin-v1\",destination_canonical_service=\"httpbin\","
    "destination_canonical_revision=\"v1\",destination_workload_namespace=\"web\","
    "destination_principal=\"spiffe://cluster.local/ns/web/sa/httpbin\","
    "destination_app=\"httpbin\",destination_version=\"v1\",destination_cluster=\"Kubernetes\","
    "request_protocol=\"tcp\",response_flags=\"-\",connection_security_policy=\"unknown\"";

// The value of `family`'s sample with kLabels in the worker's table, or "" when it has none.
std::string value(Net& n, const std::string& family) {
  ctl::PromWriter w;
  ctl::write_istio_metrics(w, {&n.h.worker().stack()->istio()}, n.h.registries().istio);
  const std::string& text = w.text();
  const std::string head = "\n" + family + "{" + kLabels + "} ";
  const size_t at = text.find(head);
  if (at == std::string::npos) return "";
  return text.substr(at + head.size(), text.find('\n', at + 1) - at - head.size());
}

TEST(ProxyIstio, CountsOpensClosesAndBytesAsTheyFlowWithTheWorkloadsLabels) {
  HarnessOptions opt;
  opt.edit_specs = add_mesh_labels;
  Net n(config(""), opt);
  const TcpConnId c = n.connect(80);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.peer.accepted[0];
  EXPECT_EQ(value(n, "istio_tcp_connections_opened_total"), "1");
  EXPECT_EQ(value(n, "istio_tcp_connections_closed_total"), "0");

  // Bytes count as they move, before the connection ends (as ztunnel's copy loop does).
  const std::string up = pattern(200'000, 3), down = pattern(70'000, 4);
  n.peer.conns[c].tx = up;
  for (int i = 0; i < 400 && n.peer.conns[b].rx.size() < up.size(); ++i) n.pass_ms(5);
  ASSERT_EQ(n.peer.conns[b].rx, up);
  EXPECT_EQ(value(n, "istio_tcp_received_bytes_total"), std::to_string(up.size()));
  EXPECT_EQ(value(n, "istio_tcp_sent_bytes_total"), "0");

  n.peer.conns[b].tx = down;
  n.peer.conns[b].shut_after = true;
  n.peer.conns[c].shut_after = true;
  for (int i = 0; i < 400 && !(n.peer.conns[c].fin && n.peer.conns[b].fin); ++i) n.pass_ms(5);
  ASSERT_EQ(n.peer.conns[c].rx, down);
  n.pass_ms(50);
  EXPECT_EQ(n.stats().proxy[dp::kPxSessionsClosed], 1u);
  EXPECT_EQ(value(n, "istio_tcp_connections_opened_total"), "1");
  EXPECT_EQ(value(n, "istio_tcp_connections_closed_total"), "1");
  EXPECT_EQ(value(n, "istio_tcp_received_bytes_total"), std::to_string(up.size()));
  EXPECT_EQ(value(n, "istio_tcp_sent_bytes_total"), std::to_string(down.size()));

  // The backend's bytes both ways: meshgate_backend_bytes_total keeps client -> backend.
  const dp::BackendCounters be =
      n.h.backend("px", n.peer.conns[b].tuple.local.str() + ":8080");
  EXPECT_EQ(be.bytes, up.size());
  EXPECT_EQ(be.reply_bytes, down.size());
  EXPECT_EQ(be.flows, 1u);
}

TEST(ProxyIstio, StaticServicesAndUnknownClientsAreUnknownButTheServiceName) {
  Net n(config(""), HarnessOptions{});
  const TcpConnId c = n.connect(80);
  ASSERT_TRUE(n.peer.conns[c].connected);
  ctl::PromWriter w;
  ctl::write_istio_metrics(w, {&n.h.worker().stack()->istio()}, n.h.registries().istio);
  const std::string want =
      "istio_tcp_connections_opened_total{reporter=\"source\",source_workload=\"unknown\","
      "source_canonical_service=\"unknown\",source_canonical_revision=\"unknown\","
      "source_workload_namespace=\"unknown\",source_principal=\"unknown\","
      "source_app=\"unknown\",source_version=\"unknown\",source_cluster=\"unknown\","
      "destination_service=\"px\",destination_service_namespace=\"unknown\","
      "destination_service_name=\"px\",destination_workload=\"unknown\",";
  EXPECT_NE(w.text().find(want), std::string::npos) << w.text();
}

TEST(ProxyProtocol, V2HeaderForIpv6) {
  uint8_t b[dp::kProxyV2MaxLen];
  const uint32_t len = dp::write_proxy_v2(b, *IpAddr::parse("2001:db8:2::2"), 40000,
                                          *IpAddr::parse("2001:db8:100::20"), 443);
  ASSERT_EQ(len, 52u);
  EXPECT_EQ(b[12], 0x21);
  EXPECT_EQ(b[13], 0x21) << "TCP over IPv6";
  EXPECT_EQ(dp::rd16(b + 14), 36u);
  EXPECT_EQ(IpAddr::v6_bytes(b + 16), *IpAddr::parse("2001:db8:2::2"));
  EXPECT_EQ(IpAddr::v6_bytes(b + 32), *IpAddr::parse("2001:db8:100::20"));
  EXPECT_EQ(dp::rd16(b + 48), 40000u);
  EXPECT_EQ(dp::rd16(b + 50), 443u);
}

}  // namespace
}  // namespace meshgate::test
