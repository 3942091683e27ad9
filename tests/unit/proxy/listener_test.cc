// [[listener]]s through the real worker (tests/support/proxy_net.h): TLS SNI and HTTP Host
// routing to exact, wildcard, regex and default routes, the bytes read to find the name replayed
// to the backend first, each reason a connection is reset (no name, no route, malformed, peek
// limit, peek timeout), ClientHellos and request heads split into 1-byte segments, and deny
// signatures on a listener and on a proxy service.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/proxy/proxy.h"
#include "dataplane/snapshot/snapshot.h"
#include "tests/support/frames.h"
#include "tests/support/proxy_net.h"

namespace meshgate::test {
namespace {

const IpAddr kListenerVip = *IpAddr::parse("203.0.113.30");
const IpAddr kShop = *IpAddr::parse("198.51.100.11");
const IpAddr kWild = *IpAddr::parse("198.51.100.12");
const IpAddr kApi = *IpAddr::parse("198.51.100.13");

std::string config() {
  return std::string(kDemoTopology) + R"(
[fullnat]
local_addresses = ["198.51.100.2"]
[proxy]
buffer_bytes = 65536
memory_mb = 8
max_connections = 512
time_wait_s = 1
[[service]]
name = "shop"
vip = "203.0.113.21"
port = 1001
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "wild"
vip = "203.0.113.21"
port = 1002
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
[[service]]
name = "api"
vip = "203.0.113.21"
port = 1003
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.13"
  port = 8080
[[service]]
name = "fallback"
vip = "203.0.113.21"
port = 1004
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8081
[[service]]
name = "guarded"
vip = "203.0.113.21"
port = 1005
mode = "proxy"
inspect_bytes = 4096
  [[service.deny]]
  pattern = "/etc/passwd"
  [[service.backend]]
  address = "198.51.100.12"
  port = 8081

[[listener]]
name = "tls"
vip = "203.0.113.30"
port = 443
default_service = "fallback"
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "shop"
  [[listener.route]]
  hostnames = ["*.example.com"]
  service = "wild"
  [[listener.route]]
  hostnames = ["~^api[0-9]+\\.example\\.org$"]  # anchors are allowed (and implied)
  service = "api"
  [[listener.route]]
  hostnames = ["~([a-z0-9]+\\.)+long\\.example\\.net"]  # names past 253 bytes too
  service = "api"

[[listener]]
name = "strict"
vip = "203.0.113.30"
port = 444
peek_bytes = 1024
peek_timeout_ms = 200
  [[listener.route]]
  hostnames = ["shop.example.com"]
  service = "shop"

[[listener]]
name = "web"
vip = "203.0.113.30"
port = 80
match = "host"
  [[listener.route]]
  hostnames = ["shop.example.com", "*.shop.example.com"]
  service = "shop"
  [[listener.deny]]
  pattern = "(?i)union\\s+select"
)";
}

void put16(std::string& s, size_t v) {
  s += char(v >> 8);
  s += char(v & 0xff);
}
void put24(std::string& s, size_t v) {
  s += char(v >> 16);
  put16(s, v & 0xffff);
}

// A TLS 1.3-style ClientHello (RFC 8446 §4.1.2) with a server_name extension for `name` ("":
// none) and `pad` bytes of padding extension (RFC 7685), in one record of at most `record`
// payload bytes each (several records when it is larger).
std::string client_hello(const std::string& name, size_t pad = 0, size_t record = 16384) {
  std::string ext;
  if (!name.empty()) {
    std::string sni;
    sni += char(0);  // host_name
    put16(sni, name.size());
    sni += name;
    std::string list;
    put16(list, sni.size());
    list += sni;
    put16(ext, 0);  // server_name
    put16(ext, list.size());
    ext += list;
  }
  put16(ext, 43);  // supported_versions: TLS 1.3
  put16(ext, 3);
  ext += "\x02\x03\x04";
  if (pad != 0) {
    put16(ext, 21);
    put16(ext, pad);
    ext += std::string(pad, '\0');
  }
  std::string body = "\x03\x03";
  body += std::string(32, 'r');
  body += char(0);  // legacy_session_id
  put16(body, 2);
  body += "\x13\x01";
  body += "\x01";
  body += char(0);  // compression: null
  put16(body, ext.size());
  body += ext;
  std::string hs = "\x01";
  put24(hs, body.size());
  hs += body;
  std::string out;
  for (size_t off = 0; off < hs.size(); off += record) {
    const std::string part = hs.substr(off, record);
    out += "\x16\x03\x01";
    put16(out, part.size());
    out += part;
  }
  return out;
}

struct ListenerNet : Net {
  explicit ListenerNet(HarnessOptions opt = HarnessOptions{}) : Net(config(), opt) {}
  const dp::Snapshot& snap() { return *h.snapshot(); }
  const dp::SnapListener& listener(const std::string& name) {
    for (const auto& l : snap().listeners) {
      if (l.name == name) return l;
    }
    ADD_FAILURE() << "no listener " << name;
    return snap().listeners.front();
  }
  uint64_t lcount(const std::string& name, dp::ListenerCounter c) {
    stats();
    return h.worker(0).proxy()->listener_counters()[listener(name).stat_id].v[c];
  }
  // Sends `bytes` from a new client to the listener port, `chunk` bytes per segment, and lets
  // `ms` pass. The peer stack sends a small segment only when nothing is in flight (as Nagle's
  // algorithm does), so each chunk waits for the gateway's delayed ACK.
  void trickle(TcpConnId c, const std::string& bytes, size_t chunk) {
    for (size_t off = 0; off < bytes.size(); off += chunk) {
      peer.conns[c].tx += bytes.substr(off, chunk);
      pass_ms(dp::tcp::kDefaultDelayedAckMs);
    }
  }
  TcpConnId send(uint16_t port, const std::string& bytes, size_t chunk = 0, uint64_t ms = 20) {
    const TcpConnId c = connect(port, kListenerVip);
    if (chunk == 0) {
      peer.conns[c].tx = bytes;
    } else {
      trickle(c, bytes, chunk);
    }
    pass_ms(ms);
    return c;
  }
  // The backend connection the proxy opened last, or kNoConn.
  TcpConnId last_backend() { return peer.accepted.empty() ? dp::tcp::kNoConn : peer.accepted.back(); }
};

TEST(Listener, RoutesBySniToExactWildcardRegexAndDefault) {
  ListenerNet n;
  struct Case {
    std::string name;
    IpAddr backend;
    uint16_t port;
  } cases[] = {
      {"shop.example.com", kShop, 8080},    // exact
      {"SHOP.Example.COM", kShop, 8080},    // case-insensitive (the extractor lowercases)
      {"a.b.example.com", kWild, 8080},     // wildcard, two labels
      {"api42.example.org", kApi, 8080},    // regex
      {"other.test", kShop, 8081},          // no route: default_service
  };
  size_t routed = 0;
  for (const Case& k : cases) {
    const std::string hello = client_hello(k.name);
    const TcpConnId c = n.send(443, hello);
    ASSERT_EQ(n.peer.accepted.size(), ++routed) << k.name;
    const TcpConnId b = n.last_backend();
    EXPECT_EQ(n.peer.conns[b].tuple.local, k.backend) << k.name;
    EXPECT_EQ(n.peer.conns[b].tuple.local_port, k.port) << k.name;
    EXPECT_EQ(n.peer.conns[b].rx, hello) << k.name << ": the bytes read are replayed first";
    // Then the splice: more client bytes and the backend's answer.
    n.peer.conns[c].tx += "more";
    n.peer.conns[b].tx = "answer from " + k.name;
    n.pass_ms(10);
    EXPECT_EQ(n.peer.conns[b].rx, hello + "more") << k.name;
    EXPECT_EQ(n.peer.conns[c].rx, "answer from " + k.name) << k.name;
    EXPECT_FALSE(n.peer.conns[c].reset) << k.name;
  }
  EXPECT_EQ(n.lcount("tls", dp::kLsAccepted), 5u);
  EXPECT_EQ(n.lcount("tls", dp::kLsRouted), 5u);
  EXPECT_EQ(n.lcount("tls", dp::kLsDefaulted), 1u);
  const dp::SnapListener& l = n.listener("tls");
  const dp::RouteCounters* rc = n.h.worker(0).proxy()->route_counters();
  EXPECT_EQ(rc[l.routes[0].stat_id].connections, 2u);
  EXPECT_EQ(rc[l.routes[1].stat_id].connections, 1u);
  EXPECT_EQ(rc[l.routes[2].stat_id].connections, 1u);
  EXPECT_EQ(rc[l.routes[uint32_t(l.default_route)].stat_id].connections, 1u);
  EXPECT_EQ(rc[l.routes[2].stat_id].bytes_to_backend, client_hello("api42.example.org").size() + 4);
  EXPECT_EQ(rc[l.routes[2].stat_id].bytes_to_client, std::string("answer from api42.example.org").size());
}

TEST(Listener, ClientHelloInSmallSegmentsAndAcrossRecords) {
  ListenerNet n;
  // 4 records in 3-byte segments (a delayed ACK apart: 2.7 s, within peek_timeout_ms).
  const std::string split = client_hello("shop.example.com", 100, 60);
  n.send(443, split, 3);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  EXPECT_EQ(n.peer.conns[n.last_backend()].tuple.local, kShop);
  EXPECT_EQ(n.peer.conns[n.last_backend()].rx, split);
}

// The listener's first connection `c` went to api's backend with `hello` first, unreset.
void expect_one_to_api(ListenerNet& n, TcpConnId c, const std::string& hello) {
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  EXPECT_EQ(n.peer.conns[n.last_backend()].tuple.local, kApi);
  EXPECT_EQ(n.peer.conns[n.last_backend()].rx, hello);
  EXPECT_FALSE(n.peer.conns[c].reset);
}

// RFC 8446 §5.1: a ClientHello may come one handshake byte per record, each record a segment
// of its own here (six bytes). It is routed once whole, not left to peek_timeout_ms.
TEST(Listener, ClientHelloInOneByteRecordsEachItsOwnSegmentIsRouted) {
  ListenerNet n;
  const std::string split = client_hello("api42.example.org", 0, 1);
  ASSERT_GT(split.size(), 6u * 60);
  expect_one_to_api(n, n.send(443, split, 6), split);
  EXPECT_EQ(n.lcount("tls", dp::kLsPeekTimeout), 0u);
  EXPECT_EQ(n.lcount("tls", dp::kLsRouted), 1u);
}

// RFC 6066 §3 allows a HostName up to 2^16-1 bytes: a name past DNS's 253 is matched by the
// regex route (docs/NAMES.md), never by an exact or wildcard one.
TEST(Listener, SniLongerThan253BytesIsRoutedByARegex) {
  ListenerNet n;
  std::string name;
  for (int i = 0; i < 5; ++i) name += std::string(63, char('a' + i)) + ".";
  name += "long.example.net";
  ASSERT_GT(name.size(), 253u);
  const std::string hello = client_hello(name);
  expect_one_to_api(n, n.send(443, hello), hello);
  EXPECT_EQ(n.lcount("tls", dp::kLsMalformed), 0u);
  EXPECT_EQ(n.lcount("tls", dp::kLsDefaulted), 0u);
  // The same length under example.com: the wildcard does not take it, the default does.
  std::string wild = name.substr(0, name.size() - std::string("long.example.net").size()) +
                     "example.com";
  n.send(443, client_hello(wild));
  ASSERT_EQ(n.peer.accepted.size(), 2u);
  EXPECT_EQ(n.peer.conns[n.last_backend()].tuple.local, kShop);
  EXPECT_EQ(n.peer.conns[n.last_backend()].tuple.local_port, 8081);
  EXPECT_EQ(n.lcount("tls", dp::kLsDefaulted), 1u);
}

// A listener's VIP is balanced like any other: a link-local source (RFC 3927) opens nothing,
// where the same SYN from a routable client is answered by the stack's SYN-ACK.
TEST(Listener, SynFromALinkLocalSourceIsDroppedBeforeTheStack) {
  ListenerNet n;
  const auto dropped = n.h.send(
      test::tcp_frame("169.254.9.9", 40000, "203.0.113.30", 443, pkt::kTcpSyn), n.now);
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(n.h.drops(dp::Drop::kSourceLinkLocal), 1u);
  const auto answered = n.h.send(
      test::tcp_frame("192.0.2.99", 40000, "203.0.113.30", 443, pkt::kTcpSyn), n.now);
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(n.h.drops_total(), 1u);
}

TEST(Listener, ResetsEachRejectedConnectionWithItsReason) {
  ListenerNet n;
  // No route and no default on "strict".
  const TcpConnId c1 = n.send(444, client_hello("other.test"));
  EXPECT_TRUE(n.peer.conns[c1].reset);
  EXPECT_EQ(n.lcount("strict", dp::kLsNoRoute), 1u);
  // A ClientHello without server_name.
  const TcpConnId c2 = n.send(444, client_hello(""));
  EXPECT_TRUE(n.peer.conns[c2].reset);
  EXPECT_EQ(n.lcount("strict", dp::kLsNoName), 1u);
  // Not TLS at all.
  const TcpConnId c3 = n.send(444, "GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n");
  EXPECT_TRUE(n.peer.conns[c3].reset);
  EXPECT_EQ(n.lcount("strict", dp::kLsMalformed), 1u);
  // A ClientHello larger than peek_bytes (1024).
  const TcpConnId c4 = n.send(444, client_hello("shop.example.com", 2000));
  EXPECT_TRUE(n.peer.conns[c4].reset);
  EXPECT_EQ(n.lcount("strict", dp::kLsPeekLimit), 1u);
  // Half a ClientHello, then silence past peek_timeout_ms (200).
  const std::string hello = client_hello("shop.example.com");
  const TcpConnId c5 = n.send(444, hello.substr(0, hello.size() / 2), 0, 100);
  EXPECT_FALSE(n.peer.conns[c5].reset) << "still within the timeout";
  n.pass_ms(150);
  EXPECT_TRUE(n.peer.conns[c5].reset);
  EXPECT_EQ(n.lcount("strict", dp::kLsPeekTimeout), 1u);
  EXPECT_TRUE(n.peer.accepted.empty()) << "no backend saw any of them";
  EXPECT_EQ(n.stats().sessions_active, 0u);
}

TEST(Listener, AccessLogRecordsNameTheListenerTheRoutedServiceAndEachRejection) {
  dp::AccessRing ring(64);
  HarnessOptions opt;
  opt.access_log = &ring;
  ListenerNet n(opt);
  // Routed, then the client resets.
  const TcpConnId c = n.send(443, client_hello("shop.example.com"));
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  n.peer.st().abort(c);
  n.settle();
  // Rejected before any backend.
  n.send(444, client_hello("other.test"));
  n.send(444, client_hello(""));
  n.send(444, "GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n");
  n.send(444, client_hello("shop.example.com", 2000));
  const std::string hello = client_hello("shop.example.com");
  n.send(444, hello.substr(0, hello.size() / 2), 0, 300);
  std::vector<dp::AccessRecord> recs;
  while (const dp::AccessRecord* r = ring.front()) {
    recs.push_back(*r);
    ring.pop();
  }
  ASSERT_EQ(recs.size(), 6u);
  for (const dp::AccessRecord& r : recs) EXPECT_EQ(r.kind, dp::AccessKind::kListener);
  EXPECT_EQ(recs[0].end, dp::AccessEnd::kClientReset);
  EXPECT_STREQ(recs[0].names.listener, "tls");
  EXPECT_STREQ(recs[0].names.service, "shop");
  EXPECT_EQ(recs[0].tuple.vip, kListenerVip);
  EXPECT_EQ(recs[0].tuple.vip_port, 443);
  EXPECT_EQ(recs[0].tuple.backend, kShop);
  EXPECT_EQ(recs[0].bytes_from_client, hello.size());
  const dp::AccessEnd rejected[] = {dp::AccessEnd::kNoRoute, dp::AccessEnd::kNoName,
                                    dp::AccessEnd::kMalformed, dp::AccessEnd::kPeekLimit,
                                    dp::AccessEnd::kPeekTimeout};
  for (size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(recs[i + 1].end, rejected[i]);
    EXPECT_STREQ(recs[i + 1].names.listener, "strict");
    EXPECT_STREQ(recs[i + 1].names.service, "");
    EXPECT_TRUE(recs[i + 1].tuple.backend == IpAddr{});
    EXPECT_EQ(recs[i + 1].bytes_from_client, 0u) << "nothing was passed on";
  }
}

TEST(Listener, RoutesByHttpHostInSmallSegments) {
  ListenerNet n;
  const std::string req = "GET /cart HTTP/1.1\r\nUser-Agent: t\r\nHost: Cart.Shop.Example.com:80\r\n\r\n";
  const TcpConnId c = n.send(80, req, 3);
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.last_backend();
  EXPECT_EQ(n.peer.conns[b].tuple.local, kShop);
  EXPECT_EQ(n.peer.conns[b].rx, req);
  EXPECT_FALSE(n.peer.conns[c].reset);
  // No Host at all: no default, reset.
  const TcpConnId c2 = n.send(80, "GET / HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(n.peer.conns[c2].reset);
  EXPECT_EQ(n.lcount("web", dp::kLsNoName), 1u);
}

TEST(Listener, DenySignatureSplitIntoOneByteSegmentsResetsBothSides) {
  ListenerNet n;
  // On the listener: the signature is in the body, after the name was read and the backend
  // connected; the client sends it a byte per segment.
  const TcpConnId c = n.send(80, "POST /q HTTP/1.1\r\nHost: shop.example.com\r\n\r\n");
  ASSERT_EQ(n.peer.accepted.size(), 1u);
  const TcpConnId b = n.last_backend();
  n.trickle(c, "id=1 UNION   SELECT password", 1);
  n.pass_ms(10);
  EXPECT_TRUE(n.peer.conns[c].reset);
  EXPECT_TRUE(n.peer.conns[b].reset);
  EXPECT_EQ(n.peer.conns[b].rx.find("SELECT"), std::string::npos)
      << "the segment that completed the signature never reached the backend";
  const dp::ProxyStats& s = n.stats();
  EXPECT_EQ(s.proxy[dp::kPxSignatureBlocked], 1u);
  const dp::SnapDeny& d = n.snap().deny_sets[n.listener("web").deny - 1];
  EXPECT_EQ(n.h.worker(0).proxy()->deny_counters()[d.stat_ids[0]], 1u);

  // On a proxy service.
  const TcpConnId c2 = n.connect(1005, *IpAddr::parse("203.0.113.21"));
  n.trickle(c2, "GET /../../etc/passwd HTTP/1.0\r\n\r\n", 1);
  n.pass_ms(10);
  EXPECT_TRUE(n.peer.conns[c2].reset);
  EXPECT_EQ(n.stats().proxy[dp::kPxSignatureBlocked], 2u);
  // A clean request on the same service passes.
  const TcpConnId c3 = n.connect(1005, *IpAddr::parse("203.0.113.21"));
  n.peer.conns[c3].tx = "GET /index.html HTTP/1.0\r\n\r\n";
  n.pass_ms(10);
  EXPECT_FALSE(n.peer.conns[c3].reset);
  EXPECT_EQ(n.peer.conns[n.last_backend()].rx, "GET /index.html HTTP/1.0\r\n\r\n");
  EXPECT_EQ(n.stats().sessions_active, 1u);
}

}  // namespace
}  // namespace meshgate::test
