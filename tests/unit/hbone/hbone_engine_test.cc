// The sans-I/O HBONE engine: a client and a server Connection wired back to back in memory,
// with the mkpki PKI and a fake clock. Every CONNECT answer, limit and stream transition of
// docs/HBONE.md "The engine" that does not need a real socket.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/certs/tls_context.h"
#include "dataplane/hbone/connection.h"
#include "dataplane/hbone/headers.h"
#include "tests/support/pki.h"

using namespace meshgate;
using namespace meshgate::dp::hbone;
using meshgate::test::TestPki;
namespace tls = meshgate::dp::tls;

namespace {

const std::string kServerId = "spiffe://cluster.local/ns/demo/sa/server";
const std::string kClientId = "spiffe://cluster.local/ns/demo/sa/client";

std::shared_ptr<tls::Context> ctx(const std::string& ident, const std::string& td = "cluster.local",
                                  const std::string& bundle = "root.pem") {
  std::string err;
  std::shared_ptr<tls::Context> c = ctl::create_tls_context(TestPki::get().config(ident, bundle, td), err);
  EXPECT_NE(c, nullptr) << err;
  return c;
}

// Serves 10.0.0.0/8 addresses and "svc.demo:80"; port 9 has no endpoint; denies the
// principal in `deny`; connects asynchronously (the test completes connects).
struct FakeHooks : ServerHooks {
  std::string deny;
  uint16_t deny_port = 0;  // destinations on this port are denied too
  std::vector<int32_t> connects;
  std::vector<std::string> peers;
  Resolution resolve(const Authority& a) override {
    Resolution r;
    if (a.kind == Authority::Kind::kName) {
      if (a.hostname() != "svc.demo") return r;
      r.ip = *IpAddr::parse("10.1.1.1");
    } else {
      if (!a.ip.is_v4() || (a.ip.v4_host() >> 24) != 10) return r;
      r.ip = a.ip;
    }
    r.port = a.port;
    r.kind = a.port == 9 ? Resolution::Kind::kNoEndpoint : Resolution::Kind::kServed;
    return r;
  }
  bool authorize(std::string_view peer, const Resolution& r) override {
    peers.emplace_back(peer);
    return peer != deny && (deny_port == 0 || r.port != deny_port);
  }
  void connect(int32_t stream, const Resolution&) override { connects.push_back(stream); }
};

struct Pair {
  std::shared_ptr<tls::Context> sctx = ctx("demo.server"), cctx = ctx("demo.client");
  FakeHooks hooks;
  Counters sc, cc;
  uint64_t now = 1000;
  std::unique_ptr<Connection> server, client;
  std::vector<Event> sev, cev;  // every event seen, in order

  explicit Pair(const Limits& slimits = {}, const Limits& climits = {},
                std::vector<std::string> expect = {kServerId}) {
    server = Connection::server(*sctx, hooks, sc, now, slimits);
    client = Connection::client(*cctx, std::move(expect), cc, now, climits);
  }
  static bool move(Connection& from, Connection& to, uint64_t now) {
    const dp::ByteQueue& q = from.transport_out();
    if (q.empty()) return false;
    const std::vector<uint8_t> bytes(q.data(), q.data() + q.size());
    from.transport_out_consumed(bytes.size());
    to.recv_transport(bytes.data(), bytes.size(), now);
    return true;
  }
  // Moves bytes both ways until quiet (bounded), collecting events.
  void pump(int max_rounds = 200) {
    for (int i = 0; i < max_rounds; ++i) {
      const bool a = move(*client, *server, now);
      const bool b = move(*server, *client, now);
      drain_events();
      if (!a && !b) break;
    }
  }
  void drain_events() {
    Event e;
    while (server->poll_event(e)) sev.push_back(e);
    while (client->poll_event(e)) cev.push_back(e);
  }
  static int count(const std::vector<Event>& evs, EventKind k, int32_t stream = -1) {
    int n = 0;
    for (const Event& e : evs) n += e.kind == k && (stream < 0 || e.stream == stream);
    return n;
  }
  static const Event* last(const std::vector<Event>& evs, EventKind k, int32_t stream = -1) {
    for (auto it = evs.rbegin(); it != evs.rend(); ++it)
      if (it->kind == k && (stream < 0 || it->stream == stream)) return &*it;
    return nullptr;
  }
  // Opens a tunnel and completes the upstream connect; returns {client stream, server stream}.
  std::pair<int32_t, int32_t> open(const std::string& authority = "10.0.0.5:8080") {
    pump();
    ConnectRequest req;
    req.authority = authority;
    const int32_t cs = client->open_stream(req);
    EXPECT_GT(cs, 0);
    pump();
    if (hooks.connects.empty()) {
      ADD_FAILURE() << "no upstream connect";
      return {0, 0};
    }
    const int32_t ss = hooks.connects.back();
    server->upstream_connected(ss, true);
    pump();
    return {cs, ss};
  }
  std::string read_all(Connection& c, int32_t s) {
    std::string out;
    uint8_t buf[65536];
    while (size_t n = c.stream_read(s, buf, sizeof buf)) out.append(reinterpret_cast<char*>(buf), n);
    return out;
  }
};

int status_of(Pair& p, int32_t cs) {
  const Event* e = Pair::last(p.cev, EventKind::kStreamResponse, cs);
  return e ? int(e->code) : -1;
}

// The server ended the connection with GOAWAY(ENHANCE_YOUR_CALM) (RFC 9113 7: "the endpoint
// is exhibiting a behavior that might be generating excessive load").
void expect_calm_goaway(Pair& p) {
  const Event* g = Pair::last(p.cev, EventKind::kGoaway);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->code, 11u) << "ENHANCE_YOUR_CALM, not nghttp2's INTERNAL_ERROR";
  EXPECT_TRUE(p.server->closed());
}

std::string sha256(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  return std::string(reinterpret_cast<char*>(d), sizeof d);
}

}  // namespace

TEST(HboneEngine, handshake_establishes_both_sides_with_verified_ids) {
  Pair p;
  p.pump();
  ASSERT_TRUE(p.client->established());
  ASSERT_TRUE(p.server->established());
  EXPECT_EQ(p.server->peer_id(), kClientId);
  EXPECT_EQ(p.client->peer_id(), kServerId);
  EXPECT_EQ(Pair::count(p.sev, EventKind::kEstablished), 1);
  EXPECT_EQ(Pair::count(p.cev, EventKind::kEstablished), 1);
  EXPECT_EQ(p.sc[Counter::k_tls_handshakes], 1u);
}

TEST(HboneEngine, connect_answers_200_only_after_the_upstream_connect_and_carries_bytes) {
  Pair p;
  ConnectRequest req;
  req.authority = "10.0.0.5:8080";
  req.forwarded = forwarded_header(*IpAddr::parse("192.0.2.7"), 40000, "");
  const int32_t cs = p.client->open_stream(req);
  EXPECT_EQ(cs, -1) << "no stream before the handshake";
  p.pump();
  const int32_t cs2 = p.client->open_stream(req);
  ASSERT_EQ(cs2, 1);
  p.pump();
  ASSERT_EQ(p.hooks.connects.size(), 1u);
  EXPECT_EQ(p.hooks.peers.at(0), kClientId);
  EXPECT_EQ(status_of(p, cs2), -1) << "no answer before the upstream connect completes";
  const int32_t ss = p.hooks.connects[0];
  p.server->upstream_connected(ss, true);
  p.pump();
  EXPECT_EQ(status_of(p, cs2), 200);
  EXPECT_EQ(p.sc[Counter::k_connect_200], 1u);

  ASSERT_EQ(p.client->stream_write(cs2, reinterpret_cast<const uint8_t*>("hello"), 5), 5u);
  p.pump();
  EXPECT_EQ(Pair::count(p.sev, EventKind::kStreamReadable, ss), 1);
  EXPECT_EQ(p.read_all(*p.server, ss), "hello");
  ASSERT_EQ(p.server->stream_write(ss, reinterpret_cast<const uint8_t*>("world!"), 6), 6u);
  p.pump();
  EXPECT_EQ(p.read_all(*p.client, cs2), "world!");
}

TEST(HboneEngine, large_transfer_beyond_the_windows_arrives_intact_both_ways) {
  Pair p;
  auto [cs, ss] = p.open();
  std::string up(24 * 1024 * 1024 + 123, '\0'), down(9 * 1024 * 1024 + 7, '\0');
  for (size_t i = 0; i < up.size(); ++i) up[i] = char(i * 2654435761u >> 13);
  for (size_t i = 0; i < down.size(); ++i) down[i] = char(i * 40503u >> 7);
  std::string got_up, got_down;
  size_t off_up = 0, off_down = 0;
  bool fin_up = false, fin_down = false;
  for (int round = 0; round < 100000 && (got_up.size() < up.size() || got_down.size() < down.size()); ++round) {
    if (off_up < up.size())
      off_up += p.client->stream_write(cs, reinterpret_cast<const uint8_t*>(up.data()) + off_up, up.size() - off_up);
    else if (!fin_up) { p.client->stream_shutdown(cs); fin_up = true; }
    if (off_down < down.size())
      off_down += p.server->stream_write(ss, reinterpret_cast<const uint8_t*>(down.data()) + off_down, down.size() - off_down);
    else if (!fin_down) { p.server->stream_shutdown(ss); fin_down = true; }
    p.pump(4);
    got_up += p.read_all(*p.server, ss);
    got_down += p.read_all(*p.client, cs);
  }
  p.pump();
  ASSERT_EQ(got_up.size(), up.size());
  ASSERT_EQ(got_down.size(), down.size());
  EXPECT_EQ(sha256(got_up), sha256(up));
  EXPECT_EQ(sha256(got_down), sha256(down));
  EXPECT_GT(p.cc[Counter::k_send_budget_full] + p.sc[Counter::k_send_budget_full], 0u)
      << "24 MiB cannot be buffered: the send budget must have pushed back";
}

TEST(HboneEngine, half_close_each_direction_finishes_independently) {
  Pair p;
  auto [cs, ss] = p.open();
  p.client->stream_shutdown(cs);  // client TCP sent FIN
  p.pump();
  EXPECT_EQ(Pair::count(p.sev, EventKind::kStreamRemoteEnd, ss), 1);
  EXPECT_EQ(Pair::count(p.sev, EventKind::kStreamClosed, ss), 0) << "the other direction is still open";
  ASSERT_EQ(p.server->stream_write(ss, reinterpret_cast<const uint8_t*>("late reply"), 10), 10u);
  p.pump();
  EXPECT_EQ(p.read_all(*p.client, cs), "late reply");
  EXPECT_EQ(Pair::count(p.cev, EventKind::kStreamRemoteEnd, cs), 0);
  p.server->stream_shutdown(ss);
  p.pump();
  EXPECT_EQ(Pair::count(p.cev, EventKind::kStreamRemoteEnd, cs), 1);
  EXPECT_EQ(Pair::last(p.cev, EventKind::kStreamClosed, cs)->code, 0u);
  EXPECT_EQ(Pair::last(p.sev, EventKind::kStreamClosed, ss)->code, 0u);
  EXPECT_EQ(Pair::count(p.cev, EventKind::kStreamReset), 0);
  p.client->stream_release(cs);
  p.server->stream_release(ss);
  p.pump();
  EXPECT_EQ(p.client->active_streams(), 0u);
  EXPECT_EQ(p.cc[Counter::k_rst_sent], 0u) << "releasing a finished stream sends no RST";
}

TEST(HboneEngine, error_statuses_follow_the_spec_and_are_counted) {
  Pair p;
  p.hooks.deny = kClientId;
  p.pump();
  std::map<std::string, int32_t> streams;
  for (const char* a : {"192.0.2.1:80", "10.0.0.1", "not an authority", "10.0.0.1:9", "10.0.0.1:80"}) {
    ConnectRequest req;
    req.authority = a;
    streams[a] = p.client->open_stream(req);
  }
  p.pump();
  EXPECT_EQ(status_of(p, streams["192.0.2.1:80"]), 400);       // not served here
  EXPECT_EQ(status_of(p, streams["10.0.0.1"]), 400);              // no port
  // Characters HTTP/2 forbids in :authority: nghttp2 itself resets the stream.
  EXPECT_EQ(status_of(p, streams["not an authority"]), -1);
  EXPECT_EQ(Pair::last(p.cev, EventKind::kStreamReset, streams["not an authority"])->code, 1u);
  EXPECT_EQ(p.sc[Counter::k_h2_invalid_frames], 1u);
  EXPECT_EQ(status_of(p, streams["10.0.0.1:80"]), 401);        // denied
  EXPECT_EQ(status_of(p, streams["10.0.0.1:9"]), 401) << "authorization comes before endpoint lookup";
  EXPECT_EQ(p.sc[Counter::k_connect_400_not_served], 1u);
  EXPECT_EQ(p.sc[Counter::k_connect_400_authority], 1u);
  EXPECT_EQ(p.sc[Counter::k_connect_401_denied], 2u);
  EXPECT_EQ(p.cc[Counter::k_client_non_200], 4u);
  EXPECT_EQ(p.sc[Counter::k_streams_requested], 5u);
  EXPECT_TRUE(p.hooks.connects.empty());

  p.hooks.deny.clear();
  ConnectRequest req;
  req.authority = "10.0.0.1:9";
  const int32_t no_ep = p.client->open_stream(req);
  req.authority = "svc.demo:80";
  const int32_t by_name = p.client->open_stream(req);
  p.pump();
  EXPECT_EQ(status_of(p, no_ep), 503);
  EXPECT_EQ(p.sc[Counter::k_connect_503_no_endpoint], 1u);
  ASSERT_EQ(p.hooks.connects.size(), 1u);
  p.server->upstream_connected(p.hooks.connects[0], false);  // backend down
  p.pump();
  EXPECT_EQ(status_of(p, by_name), 503);
  EXPECT_EQ(p.sc[Counter::k_connect_503_upstream_failed], 1u);
  // Every rejected stream is gone on both sides, and the connection still works.
  EXPECT_EQ(p.server->active_streams(), 0u);
  auto [cs, ss] = p.open();
  EXPECT_EQ(status_of(p, cs), 200);
}

TEST(HboneEngine, header_list_over_the_server_limit_gets_431) {
  Limits sl;
  sl.server_max_header_list_bytes = 1024;
  Pair p(sl);
  p.pump();
  ConnectRequest req;
  req.authority = "10.0.0.1:80";
  req.baggage = std::string(2000, 'b');
  const int32_t cs = p.client->open_stream(req);
  p.pump();
  EXPECT_EQ(status_of(p, cs), 431);
  EXPECT_EQ(p.sc[Counter::k_connect_431_headers], 1u);
}

TEST(HboneEngine, decoded_header_budget_closes_the_connection_with_enhance_your_calm) {
  Limits sl;
  sl.header_bytes_burst = 8 * 1024;
  sl.header_bytes_per_s = 0;
  Pair p(sl);
  p.pump();
  ConnectRequest req;
  req.authority = "10.0.0.1:80";
  req.baggage = std::string(3000, 'b');  // HPACK-indexed after the first: cheap to send
  for (int i = 0; i < 10; ++i) p.client->open_stream(req);
  p.pump();
  EXPECT_EQ(p.sc[Counter::k_header_budget_exceeded], 1u);
  expect_calm_goaway(p);
}

TEST(HboneEngine, rapid_reset_dials_nothing_and_gets_goaway_enhance_your_calm) {
  Pair p;
  p.pump();
  ConnectRequest req;
  req.authority = "10.0.0.1:80";
  // CVE-2023-44487: HEADERS then RST_STREAM at once, over and over (bounded: 20 rounds of 50).
  for (int round = 0; round < 20 && !p.server->closed(); ++round) {
    for (int i = 0; i < 50; ++i) {
      const int32_t cs = p.client->open_stream(req);
      if (cs < 0) break;
      p.client->stream_release(cs);  // RST_STREAM(CANCEL) right behind the HEADERS
    }
    p.pump();
  }
  EXPECT_TRUE(p.hooks.connects.empty()) << "a stream reset in the same bytes must not be dialled";
  EXPECT_GE(p.sc[Counter::k_reset_before_dial], 100u);
  EXPECT_LE(p.sc[Counter::k_reset_before_dial], 160u) << "the GOAWAY comes after ~100 such resets";
  EXPECT_EQ(p.sc[Counter::k_rapid_reset_goaway], 1u);
  expect_calm_goaway(p);
}

TEST(HboneEngine, resets_after_the_dial_are_counted_and_open_tunnels_reset_cleanly_are_not_premature) {
  Pair p;
  p.pump();
  ConnectRequest req;
  req.authority = "10.0.0.1:80";
  // 150 tunnels that open (200), live past the premature window and end with
  // RST_STREAM(CANCEL): within the 1000 burst.
  for (int i = 0; i < 150; ++i) {
    auto [cs, ss] = p.open("10.0.0.1:80");
    ASSERT_GT(cs, 0);
    p.now += 1'000;
    p.client->stream_release(cs);
    p.pump();
    p.server->stream_release(ss);
    p.pump();
  }
  EXPECT_FALSE(p.server->closed());
  EXPECT_EQ(p.sc[Counter::k_rapid_reset_goaway], 0u);
  // Streams reset while their dial is in flight are premature: the 101st ends the connection.
  for (int i = 0; i < 150 && !p.server->closed(); ++i) {
    const int32_t cs = p.client->open_stream(req);
    ASSERT_GT(cs, 0);
    p.pump();  // the dial starts
    p.client->stream_release(cs);
    p.pump();
  }
  EXPECT_EQ(p.hooks.connects.size(), 150u + 101u);
  EXPECT_EQ(p.sc[Counter::k_rapid_reset_goaway], 1u);
  EXPECT_EQ(p.sc[Counter::k_reset_before_dial], 0u);
  expect_calm_goaway(p);
}

TEST(HboneEngine, tunnels_reset_within_a_second_of_their_start_are_premature_even_when_open) {
  Pair p;
  p.pump();
  // A backend that answers at once: every stream is open (200) before its RST_STREAM.
  int tunnels = 0;
  for (; tunnels < 150 && !p.server->closed(); ++tunnels) {
    auto [cs, ss] = p.open("10.0.0.1:80");
    ASSERT_GT(cs, 0);
    p.client->stream_release(cs);
    p.pump();
    if (!p.server->closed()) p.server->stream_release(ss);
    p.pump();
  }
  EXPECT_EQ(tunnels, 101) << "the 101st premature reset ends the connection";
  EXPECT_EQ(p.hooks.connects.size(), 101u);
  EXPECT_EQ(p.sc[Counter::k_rapid_reset_goaway], 1u);
  expect_calm_goaway(p);
}

TEST(HboneEngine, client_uses_at_most_100_streams_per_connection) {
  Pair p;
  p.pump();
  ConnectRequest req;
  req.authority = "10.0.0.1:80";
  int opened = 0;
  for (int i = 0; i < 150; ++i) opened += p.client->open_stream(req) > 0;
  EXPECT_EQ(opened, 100);
  EXPECT_EQ(p.cc[Counter::k_client_no_capacity], 50u);
  p.pump();
  EXPECT_EQ(p.hooks.connects.size(), 100u);
  for (int32_t s : p.hooks.connects) p.server->upstream_connected(s, true);
  p.pump();
  int ok = 0;
  for (const Event& e : p.cev) ok += e.kind == EventKind::kStreamResponse && e.code == 200;
  EXPECT_EQ(ok, 100);
}

TEST(HboneEngine, client_never_exceeds_the_servers_advertised_200_streams) {
  Limits cl;
  cl.client_max_streams = 300;  // our own cap raised: the peer's SETTINGS must still bind
  Pair p({}, cl);
  p.pump();
  ConnectRequest req;
  req.authority = "10.0.0.1:80";
  int opened = 0;
  for (int i = 0; i < 210; ++i) opened += p.client->open_stream(req) > 0;
  EXPECT_EQ(opened, 200);
  p.pump();
  EXPECT_EQ(p.hooks.connects.size(), 200u);
}

// Policy changes re-check live connections and close the ones now denied (docs/HBONE.md
// "L4 authorization").
TEST(HboneEngine, a_policy_change_ends_the_tunnels_it_now_denies_and_only_those) {
  Pair p;
  auto [cs_a, ss_a] = p.open("10.0.0.5:8080");
  auto [cs_b, ss_b] = p.open("10.0.0.6:9090");
  ASSERT_EQ(status_of(p, cs_a), 200);
  ASSERT_EQ(status_of(p, cs_b), 200);
  EXPECT_EQ(p.server->recheck_authorization(), 0u) << "nothing changed: nothing ends";

  p.hooks.deny_port = 8080;
  EXPECT_EQ(p.server->recheck_authorization(), 1u);
  p.pump();
  EXPECT_EQ(p.sc[Counter::k_policy_revoked], 1u);
  // The caller learns it must reset the upstream; the peer gets an error reset (not clean).
  ASSERT_NE(Pair::last(p.sev, EventKind::kStreamReset, ss_a), nullptr);
  EXPECT_EQ(Pair::last(p.sev, EventKind::kStreamReset, ss_a)->code, kH2ConnectError);
  ASSERT_NE(Pair::last(p.cev, EventKind::kStreamReset, cs_a), nullptr);
  EXPECT_EQ(Pair::last(p.cev, EventKind::kStreamReset, cs_a)->code, kH2ConnectError);
  EXPECT_FALSE(is_clean_reset(kH2ConnectError));
  EXPECT_EQ(p.cc[Counter::k_rst_received_error], 1u);
  EXPECT_EQ(Pair::count(p.sev, EventKind::kStreamReset, ss_b), 0);

  // The other tunnel still carries bytes both ways.
  ASSERT_EQ(p.client->stream_write(cs_b, reinterpret_cast<const uint8_t*>("still"), 5), 5u);
  p.pump();
  EXPECT_EQ(p.read_all(*p.server, ss_b), "still");
  ASSERT_EQ(p.server->stream_write(ss_b, reinterpret_cast<const uint8_t*>("here"), 4), 4u);
  p.pump();
  EXPECT_EQ(p.read_all(*p.client, cs_b), "here");
  // A tunnel that ended is not checked again; the policy that denies nobody ends nothing.
  EXPECT_EQ(p.server->recheck_authorization(), 0u);
  p.hooks.deny_port = 0;
  EXPECT_EQ(p.server->recheck_authorization(), 0u);
  EXPECT_EQ(p.sc[Counter::k_policy_revoked], 1u);
}

TEST(HboneEngine, peer_reset_codes_are_clean_or_errors) {
  Pair p;
  auto [cs1, ss1] = p.open();
  auto [cs2, ss2] = p.open();
  p.client->stream_reset(cs1, 8);  // CANCEL: clean end
  p.client->stream_reset(cs2, 2);  // INTERNAL_ERROR: reset the TCP side
  p.pump();
  EXPECT_EQ(Pair::last(p.sev, EventKind::kStreamReset, ss1)->code, 8u);
  EXPECT_TRUE(is_clean_reset(8));
  EXPECT_EQ(Pair::last(p.sev, EventKind::kStreamReset, ss2)->code, 2u);
  EXPECT_FALSE(is_clean_reset(2));
  EXPECT_EQ(p.sc[Counter::k_rst_received_clean], 1u);
  EXPECT_EQ(p.sc[Counter::k_rst_received_error], 1u);
  EXPECT_EQ(Pair::count(p.sev, EventKind::kStreamClosed), 2);
}

TEST(HboneEngine, drain_sends_goaway_lets_streams_finish_then_closes) {
  Pair p;
  auto [cs, ss] = p.open();
  p.server->drain();
  p.pump();
  EXPECT_EQ(p.sc[Counter::k_goaway_sent], 1u);
  ASSERT_EQ(Pair::count(p.cev, EventKind::kGoaway), 1);
  EXPECT_EQ(Pair::last(p.cev, EventKind::kGoaway)->stream, cs);
  EXPECT_FALSE(p.client->can_open_stream());
  EXPECT_FALSE(p.server->closed()) << "the open stream keeps the connection";
  ASSERT_EQ(p.server->stream_write(ss, reinterpret_cast<const uint8_t*>("bye"), 3), 3u);
  p.server->stream_shutdown(ss);
  p.client->stream_shutdown(cs);
  p.pump();
  EXPECT_EQ(p.read_all(*p.client, cs), "bye");
  p.client->stream_release(cs);
  p.server->stream_release(ss);
  p.pump();
  EXPECT_TRUE(p.server->closed());
  const Event* c = Pair::last(p.sev, EventKind::kClosed);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->code, uint32_t(CloseReason::kGraceful));
}

TEST(HboneEngine, keepalive_ping_every_10s_and_close_after_20s_without_answer) {
  Pair p;
  p.pump();
  p.now += 9'999;
  p.client->on_timer(p.now);
  EXPECT_EQ(p.client->transport_out().size(), 0u);
  p.now += 1;
  p.client->on_timer(p.now);
  EXPECT_GT(p.client->transport_out().size(), 0u) << "PING due at 10 s";
  p.pump();  // answered
  EXPECT_EQ(p.cc[Counter::k_pings_sent], 1u);
  p.now += 10'000;
  p.client->on_timer(p.now);  // second PING, never delivered
  EXPECT_EQ(p.cc[Counter::k_pings_sent], 2u);
  p.now += 19'999;
  p.client->on_timer(p.now);
  EXPECT_FALSE(p.client->closed());
  p.now += 1;
  p.client->on_timer(p.now);
  EXPECT_TRUE(p.client->closed());
  EXPECT_EQ(p.cc[Counter::k_ping_timeouts], 1u);
  p.drain_events();
  EXPECT_EQ(Pair::last(p.cev, EventKind::kClosed)->code, uint32_t(CloseReason::kPingTimeout));
}

TEST(HboneEngine, open_streams_end_with_an_error_when_the_transport_ends) {
  Pair p;
  auto [cs, ss] = p.open();
  p.server->recv_transport_eof(p.now);
  p.drain_events();
  EXPECT_EQ(Pair::last(p.sev, EventKind::kStreamReset, ss)->code, 2u);
  EXPECT_EQ(Pair::count(p.sev, EventKind::kStreamClosed, ss), 1);
  EXPECT_EQ(Pair::last(p.sev, EventKind::kClosed)->code, uint32_t(CloseReason::kPeerClosed));
}

TEST(HboneEngine, foreign_trust_domain_client_fails_the_handshake_and_is_counted) {
  Pair p;
  auto fctx = ctx("foreign.demo.client", "foreign.example", "both-roots.pem");
  p.client = Connection::client(*fctx, {kServerId}, p.cc, p.now);
  p.pump();
  EXPECT_TRUE(p.server->closed());
  EXPECT_EQ(p.sc[Counter::k_tls_failed_chain_untrusted], 1u);
  // TLS 1.3: the client finishes before the server checks its certificate, then reads the
  // server's alert.
  EXPECT_TRUE(p.client->closed());
  EXPECT_EQ(Pair::last(p.cev, EventKind::kClosed)->code, uint32_t(CloseReason::kTlsFailed));
  EXPECT_EQ(p.cc[Counter::k_tls_failed_protocol], 1u);
}

TEST(HboneEngine, client_rejects_a_server_with_an_unexpected_identity) {
  Pair p({}, {}, {"spiffe://cluster.local/ns/demo/sa/someone-else"});
  p.pump();
  EXPECT_TRUE(p.client->closed());
  EXPECT_EQ(p.cc[Counter::k_tls_failed_unexpected_identity], 1u);
  EXPECT_EQ(p.client->tls_failure(), tls::Failure::kUnexpectedIdentity);
}

TEST(HboneEngine, handshake_timeout) {
  Pair p;
  p.now += 10'000;
  p.server->on_timer(p.now);
  EXPECT_TRUE(p.server->closed());
  EXPECT_EQ(p.sc[Counter::k_handshake_timeouts], 1u);
}

TEST(HboneEngine, send_budget_pushes_back_when_the_peer_does_not_read_and_recovers) {
  Limits cl;
  cl.stream_send_buffer_bytes = 256 * 1024;
  Pair p({}, cl);
  auto [cs, ss] = p.open();
  const std::string chunk(64 * 1024, 'z');
  size_t accepted = 0;
  for (int i = 0; i < 200; ++i) {
    accepted += p.client->stream_write(cs, reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size());
    p.pump(2);
  }
  // Server window 4 MiB (nobody reads) + our 256 KiB buffer, give or take one frame.
  EXPECT_LE(accepted, 4u * 1024 * 1024 + 256 * 1024);
  EXPECT_GE(accepted, 4u * 1024 * 1024);
  EXPECT_EQ(p.client->stream_send_room(cs), 0u);
  EXPECT_EQ(p.cc[Counter::k_send_budget_full], 1u);
  EXPECT_EQ(Pair::count(p.cev, EventKind::kStreamWritable, cs), 0);
  // The server holds exactly one stream window of unread bytes.
  EXPECT_EQ(p.read_all(*p.server, ss).size(), 4u * 1024 * 1024);
  p.pump();
  EXPECT_EQ(Pair::count(p.cev, EventKind::kStreamWritable, cs), 1);
  EXPECT_GT(p.client->stream_send_room(cs), 0u);
}

TEST(HboneEngine, worker_buffer_budget_bounds_held_bytes_holds_windows_and_wakes_writers) {
  BufferBudget budget;
  budget.limit_bytes = 1024 * 1024;
  Pair p;
  p.server->set_budget(&budget);
  auto [cs, ss] = p.open();
  // Upstream bytes toward a client that does not read: its 4 MiB stream window fills, then
  // the server's buffers, up to the worker's budget (not the 16 MiB per connection).
  const std::string chunk(64 * 1024, 'd');
  size_t accepted = 0;
  for (int i = 0; i < 200 && p.server->stream_send_room(ss) > 0; ++i) {
    accepted += p.server->stream_write(ss, reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size());
    p.pump(2);
  }
  EXPECT_EQ(p.server->stream_send_room(ss), 0u);
  EXPECT_LE(budget.used_bytes, budget.limit_bytes + chunk.size());
  EXPECT_LE(accepted, 4u * 1024 * 1024 + budget.limit_bytes + chunk.size());
  p.server->stream_write(ss, reinterpret_cast<const uint8_t*>(chunk.data()), 1);  // blocked
  EXPECT_EQ(p.sc[Counter::k_buffer_budget_full], 1u);
  EXPECT_TRUE(budget.waiting);
  // Bytes the client sends meanwhile are read by the caller but not credited back.
  const std::string up(256 * 1024, 'u');
  EXPECT_EQ(p.client->stream_write(cs, reinterpret_cast<const uint8_t*>(up.data()), up.size()), up.size());
  p.pump();
  EXPECT_EQ(p.read_all(*p.server, ss).size(), up.size());
  EXPECT_EQ(p.sc[Counter::k_buffer_budget_windows_held], 1u);
  // The client reads: the server's buffers drain into the window it reopens, the budget has
  // room again, and the owner's budget_room_back() wakes the writer and returns the credit.
  EXPECT_GE(p.read_all(*p.client, cs).size(), 4u * 1024 * 1024);
  p.pump();
  p.read_all(*p.client, cs);
  p.pump();
  EXPECT_LE(budget.used_bytes, budget.resume_bytes());
  p.server->budget_room_back();
  p.pump();
  EXPECT_EQ(Pair::count(p.sev, EventKind::kStreamWritable, ss), 1);
  EXPECT_GT(p.server->stream_send_room(ss), 0u);
  // Everything charged is given back with the connection.
  p.server.reset();
  EXPECT_EQ(budget.used_bytes, 0u);
}

TEST(HboneEngine, memory_budget_closes_a_connection_that_needs_more) {
  Limits sl;
  sl.h2_memory_bytes = 40 * 1024;  // idle: ~25 KiB; 100 open streams: ~55 KiB
  Pair p(sl);
  p.pump();
  ASSERT_TRUE(p.server->established()) << "the budget fits an idle connection";
  ConnectRequest req;
  req.authority = "10.0.0.1:80";
  for (int i = 0; i < 100; ++i) {
    req.baggage = "k=" + std::to_string(i) + std::string(300, 'v');  // new HPACK entries
    p.client->open_stream(req);
  }
  p.pump();
  EXPECT_TRUE(p.server->closed());
  EXPECT_EQ(p.sc[Counter::k_memory_budget_exceeded], 1u);
  EXPECT_LE(p.server->h2_memory_bytes(), sl.h2_memory_bytes);
}

TEST(HboneHeaders, forwarded_baggage_traceparent_formats) {
  EXPECT_EQ(forwarded_header(*IpAddr::parse("192.0.2.7"), 40000, ""), "for=\"192.0.2.7:40000\"");
  EXPECT_EQ(forwarded_header(*IpAddr::parse("2001:db8::7"), 1, "reviews.bookinfo.svc.cluster.local"),
            "for=\"[2001:db8::7]:1\";host=reviews.bookinfo.svc.cluster.local");
  BaggageFields b;
  b.cluster_name = "Kubernetes";
  b.namespace_name = "demo";
  b.workload_kind = "deployment";
  b.workload_name = "web";
  b.service_version = "v 1";
  EXPECT_EQ(baggage_header(b),
            "k8s.cluster.name=Kubernetes,k8s.namespace.name=demo,k8s.deployment.name=web,"
            "service.version=v%201");
  EXPECT_EQ(traceparent_header(0x0123456789abcdefull, 0xfedcba9876543210ull, 0x1122334455667788ull),
            "00-0123456789abcdeffedcba9876543210-1122334455667788-00");
  EXPECT_EQ(traceparent_header(0, 0, 0), "00-00000000000000000000000000000001-0000000000000001-00");
  EXPECT_EQ(authority_of(*IpAddr::parse("::1"), 15008), "[::1]:15008");
}
