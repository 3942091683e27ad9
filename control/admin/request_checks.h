// What the admin server checks in a request before any handler runs, as pure functions of the
// bytes and headers received (README.md "Admin API and meshgate-ctl", "Requests it refuses").
//
// Two threats, both from the gateway's own host or operators' network:
// - A web browser. Any page the operator has open may send a "simple" cross-origin request
//   (a form POST, fetch with mode "no-cors": text/plain, form or multipart bodies, no preflight)
//   to 127.0.0.1:15000, or reach the API through a DNS name it rebinds to 127.0.0.1 and then
//   read the answers as same-origin. Browsers always send Origin on such POSTs and the name they
//   resolved in Host, which no operator's tool does: those are what is refused.
// - Local clients that send without end: a request's line and headers and its body are bounded,
//   and the bytes are received by one event thread before a handler thread is taken (server.cc).
//
// Thread: any (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "control/admin/bridge.h"

namespace httplib {
struct Request;
}

namespace meshgate::ctl {

// Request line and headers, CRLFs included. Browsers and curl send well under 2 KiB.
inline constexpr size_t kAdminMaxHeaderBytes = 16384;
// A request body: no endpoint takes one (every action is a query parameter); room for a small
// JSON document. A larger or chunked body is refused (413) without being read.
inline constexpr size_t kAdminMaxBodyBytes = 16384;

// How far the bytes received on a connection go.
struct RequestScan {
  enum class State : uint8_t {
    kIncomplete,    // wait for more
    kComplete,      // hand `length` bytes to the HTTP parser
    kHeadTooLarge,  // line and headers beyond kAdminMaxHeaderBytes: answer 431
  };
  State state = State::kIncomplete;
  size_t length = 0;
  // A body follows that will not be read (longer than kAdminMaxBodyBytes, or chunked): the
  // request is refused from its headers alone.
  bool body_unread = false;
};

// `received`: the bytes of a connection so far, from its first. Complete once the headers ended
// and, for a body of at most kAdminMaxBodyBytes, its Content-Length bytes followed.
RequestScan scan_request(std::string_view received);

// True for GET /ready and GET /healthz (the probes), from the start of the request line.
bool is_probe_request(std::string_view received);

// The answer to a request refused before routing, or nullopt to route it. `listen_host` is
// the admin address's host as configured ("127.0.0.1", "::1", "localhost").
//   403 Host is a DNS name other than localhost and listen_host (DNS rebinding);
//   403 Origin is not this server's own http://Host (a page of another site);
//   403 a method other than GET/HEAD with a Content-Type other than application/json;
//   413 Transfer-Encoding (chunked) or Content-Length beyond kAdminMaxBodyBytes;
//   415 a Content-Encoding; 400 a Content-Length that is not one number.
std::optional<AdminReply> refuse_request(const httplib::Request& req, std::string_view listen_host);

}  // namespace meshgate::ctl
