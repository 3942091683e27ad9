// What the admin server refuses before any handler runs (request_checks.h), as tables: how far
// received bytes go (incomplete, complete with or without their body, headers too large),
// which requests are probes, and the Host / Origin / Content-Type / body checks that keep web
// pages (cross-origin requests, DNS rebinding) and oversized bodies out.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <utility>
#include <vector>

#include "control/admin/request_checks.h"

namespace meshgate::ctl {
namespace {

using State = RequestScan::State;

TEST(ScanRequest, WaitsForTheHeadersAndADeclaredBodyThenSaysHowLongTheRequestIs) {
  const std::string get = "GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const std::string post = "POST /x HTTP/1.1\r\ncontent-length: 4\r\n\r\n";
  struct Case {
    const char* what;
    std::string received;
    State state;
    size_t length;
    bool body_unread;
  };
  const std::vector<Case> cases = {
      {"nothing yet", "", State::kIncomplete, 0, false},
      {"half a header line", "GET /ready HTTP/1.1\r\nHo", State::kIncomplete, 0, false},
      {"headers ended", get, State::kComplete, get.size(), false},
      {"bytes after one request are not part of it", get + "GET /", State::kComplete, get.size(),
       false},
      {"a body still arriving", post + "ab", State::kIncomplete, 0, false},
      {"a body complete (any case of the name)", post + "abcdEXTRA", State::kComplete,
       post.size() + 4, false},
      {"Content-Length: 0", "POST /drain HTTP/1.1\r\nContent-Length: 0\r\n\r\n", State::kComplete,
       43, false},
      {"a body beyond the limit is not waited for",
       "POST /x HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n", State::kComplete, 47, true},
      {"a chunked body is not waited for",
       "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n", State::kComplete, 48, true},
      {"a length that is not a number: the headers alone (400 later)",
       "POST /x HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n", State::kComplete, 43, false},
      {"headers beyond the limit, unfinished",
       "GET / HTTP/1.1\r\nX: " + std::string(kAdminMaxHeaderBytes, 'a'), State::kHeadTooLarge, 0,
       false},
      {"headers beyond the limit, finished",
       "GET / HTTP/1.1\r\nX: " + std::string(kAdminMaxHeaderBytes, 'a') + "\r\n\r\n",
       State::kHeadTooLarge, 0, false},
  };
  for (const Case& c : cases) {
    const RequestScan s = scan_request(c.received);
    EXPECT_EQ(s.state, c.state) << c.what;
    if (c.state == State::kComplete) {
      EXPECT_EQ(s.length, c.length) << c.what;
      EXPECT_EQ(s.body_unread, c.body_unread) << c.what;
    }
  }
}

TEST(ScanRequest, HeadersOfExactlyTheLimitAreComplete) {
  std::string r = "GET / HTTP/1.1\r\nX: ";
  r += std::string(kAdminMaxHeaderBytes - r.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(r.size(), kAdminMaxHeaderBytes);
  EXPECT_EQ(scan_request(r).state, State::kComplete);
  EXPECT_EQ(scan_request("G" + r).state, State::kHeadTooLarge);
}

TEST(IsProbeRequest, ReadyAndHealthzOnly) {
  EXPECT_TRUE(is_probe_request("GET /ready HTTP/1.1\r\n"));
  EXPECT_TRUE(is_probe_request("GET /healthz?x=1 HTTP/1.1\r\n"));
  EXPECT_FALSE(is_probe_request("GET /readyz HTTP/1.1\r\n"));
  EXPECT_FALSE(is_probe_request("POST /ready HTTP/1.1\r\n"));
  EXPECT_FALSE(is_probe_request("GET /stats HTTP/1.1\r\n"));
  EXPECT_FALSE(is_probe_request("GET /ready"));
}

httplib::Request request(const char* method, std::vector<std::pair<std::string, std::string>> h) {
  httplib::Request r;
  r.method = method;
  r.path = "/logging";
  for (auto& [k, v] : h) r.headers.emplace(k, v);
  return r;
}

int refused_status(const httplib::Request& r, const char* listen_host = "127.0.0.1") {
  const auto refused = refuse_request(r, listen_host);
  return refused ? refused->status : 0;
}

TEST(RefuseRequest, HostMustBeAnAddressLocalhostOrTheListenHost) {
  struct Case {
    const char* host;
    int status;  // 0: routed
  };
  const std::vector<Case> cases = {
      {"127.0.0.1:15000", 0},        {"127.0.0.1", 0},           {"192.0.2.7:15000", 0},
      {"[::1]:15000", 0},            {"[2001:db8::1]", 0},       {"localhost:15000", 0},
      {"LocalHost.:15000", 0},       {"gw.example:15000", 403},  {"rebind.example", 403},
      {"127.0.0.1.nip.io:15000", 403}, {"localhost.attacker.example", 403},
      {"[::1", 400},                 {"127.0.0.1:port", 400},    {"", 400},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(refused_status(request("GET", {{"Host", c.host}})), c.status) << c.host;
  }
  // The name the admin API listens on is its own.
  EXPECT_EQ(refused_status(request("POST", {{"Host", "localhost:15000"}}), "localhost"), 0);
  // No Host (HTTP/1.0 tools): nothing to check; two are one too many.
  EXPECT_EQ(refused_status(request("POST", {})), 0);
  EXPECT_EQ(refused_status(request("GET", {{"Host", "127.0.0.1"}, {"Host", "evil.example"}})), 400);
  const auto body = refuse_request(request("POST", {{"Host", "rebind.example:15000"}}), "127.0.0.1");
  ASSERT_TRUE(body);
  EXPECT_NE(body->body.find("Host \"rebind.example:15000\" refused"), std::string::npos) << body->body;
  EXPECT_NE(body->body.find("DNS rebinding"), std::string::npos) << body->body;
}

TEST(RefuseRequest, OriginMustBeTheServersOwn) {
  const std::string host = "127.0.0.1:15000";
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Origin", "http://127.0.0.1:15000"}})), 0);
  for (const char* origin : {"http://attacker.example", "null", "https://127.0.0.1:15000",
                             "http://127.0.0.1:8080", "http://localhost:15000"}) {
    EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Origin", origin}})), 403) << origin;
    EXPECT_EQ(refused_status(request("GET", {{"Host", host}, {"Origin", origin}})), 403) << origin;
  }
  EXPECT_EQ(refused_status(request("POST", {{"Origin", "http://127.0.0.1:15000"}})), 403)
      << "an Origin without a Host to match";
  const auto r = refuse_request(request("POST", {{"Host", host}, {"Origin", "http://a.example"}}),
                                "127.0.0.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "Origin \"http://a.example\" refused: the admin API takes no requests from "
                     "web pages of other sites\n");
}

TEST(RefuseRequest, WritesTakeNoContentTypeButJson) {
  const std::string host = "127.0.0.1:15000";
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}})), 0) << "meshgate-ctl, curl -X POST";
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Type", "application/json"}})), 0);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host},
                                            {"Content-Type", "Application/JSON; charset=utf-8"}})),
            0);
  // The simple types a page may send across origins without a preflight, and any other.
  for (const char* type : {"text/plain", "text/plain;charset=UTF-8",
                           "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                           "application/xml"}) {
    EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Type", type}})), 403) << type;
    EXPECT_EQ(refused_status(request("GET", {{"Host", host}, {"Content-Type", type}})), 0) << type;
  }
}

TEST(RefuseRequest, BodiesAreBoundedAndNeitherChunkedNorEncoded) {
  const std::string host = "127.0.0.1:15000";
  const std::string limit = std::to_string(kAdminMaxBodyBytes);
  const std::string over = std::to_string(kAdminMaxBodyBytes + 1);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Length", limit}})), 0);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Length", over}})), 413);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Length", "104857600"}})), 413);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Transfer-Encoding", "chunked"}})), 413);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Length", "12abc"}})), 400);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Length", "99999999999999999999"}})),
            400);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Length", "4"}, {"Content-Length", "5"}})),
            400);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Length", "4"},
                                            {"Content-Encoding", "gzip"}})),
            415);
  EXPECT_EQ(refused_status(request("POST", {{"Host", host}, {"Content-Encoding", "identity"}})), 0);
  const auto r = refuse_request(request("POST", {{"Host", host}, {"Content-Length", "104857600"}}),
                                "127.0.0.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "a request body of 104857600 bytes is refused: at most " + limit + "\n");
}

}  // namespace
}  // namespace meshgate::ctl
