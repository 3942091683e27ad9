#include "control/admin/request_checks.h"

#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

namespace meshgate::ctl {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A Content-Length value as a number; nullopt when it is not one (or too long to be one).
std::optional<uint64_t> content_length(std::string_view v) {
  v = trim(v);
  if (!all_digits(v) || v.size() > 19) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) n = n * 10 + uint64_t(c - '0');
  return n;
}

// The name part of a Host value ("name", "name:port", "[v6]:port"), and whether it is an IP
// literal. False when the value is not of that form.
bool host_name(std::string_view host, std::string* name, bool* literal) {
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    name->assign(host.substr(1, close - 1));
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !all_digits(rest.substr(1)))) return false;
    in6_addr a6;
    *literal = inet_pton(AF_INET6, name->c_str(), &a6) == 1;
    return *literal;
  }
  const size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) {
    if (!all_digits(host.substr(colon + 1))) return false;
    host = host.substr(0, colon);
  }
  if (host.empty()) return false;
  name->assign(host);
  for (char& c : *name) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (name->back() == '.') name->pop_back();  // the root label: "localhost." is localhost
  in_addr a4;
  *literal = inet_pton(AF_INET, name->c_str(), &a4) == 1;
  return true;
}

AdminReply refused(int status, std::string body) { return text_reply(status, std::move(body)); }

}  // namespace

RequestScan scan_request(std::string_view received) {
  RequestScan scan;
  const size_t end = received.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (received.size() > kAdminMaxHeaderBytes) scan.state = RequestScan::State::kHeadTooLarge;
    return scan;
  }
  const size_t head = end + 4;
  if (head > kAdminMaxHeaderBytes) {
    scan.state = RequestScan::State::kHeadTooLarge;
    return scan;
  }
  // Only what says how long the body is; the parser (httplib) reads the rest.
  std::optional<uint64_t> length = 0;
  bool chunked = false, seen_length = false;
  size_t line = received.find("\r\n") + 2;  // after the request line
  while (line < end) {
    const size_t eol = received.find("\r\n", line);
    const std::string_view h = received.substr(line, eol - line);
    line = eol + 2;
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = trim(h.substr(0, colon));
    if (iequals(name, "transfer-encoding")) chunked = true;
    if (iequals(name, "content-length")) {
      const auto n = content_length(h.substr(colon + 1));
      // Two lengths that differ are no length (refused later as 400).
      length = n && (!seen_length || (length && *length == *n)) ? n : std::nullopt;
      seen_length = true;
    }
  }
  scan.state = RequestScan::State::kComplete;
  scan.length = head;
  if (chunked || (length && *length > kAdminMaxBodyBytes)) {
    scan.body_unread = true;
  } else if (length && *length > 0) {
    if (received.size() - head < *length) {
      scan.state = RequestScan::State::kIncomplete;
      return scan;
    }
    scan.length = head + size_t(*length);
  }
  return scan;
}

bool is_probe_request(std::string_view received) {
  for (std::string_view p : {std::string_view("GET /ready"), std::string_view("GET /healthz")}) {
    if (received.size() > p.size() && received.substr(0, p.size()) == p &&
        (received[p.size()] == ' ' || received[p.size()] == '?')) {
      return true;
    }
  }
  return false;
}

std::optional<AdminReply> refuse_request(const httplib::Request& req, std::string_view listen_host) {
  const size_t hosts = req.get_header_value_count("Host");
  if (hosts > 1) return refused(400, "more than one Host header");
  const std::string host = hosts ? req.get_header_value("Host") : std::string();
  if (hosts) {
    std::string name;
    bool literal = false;
    if (!host_name(host, &name, &literal)) {
      return refused(400, "Host \"" + host + "\": expected host[:port]");
    }
    if (!literal && name != "localhost" && !iequals(name, listen_host)) {
      return refused(403, "Host \"" + host +
                              "\" refused: the admin API answers requests addressed to an IP "
                              "address, localhost or its listen address, not to another DNS "
                              "name (which a web page can point here: DNS rebinding)");
    }
  }
  if (req.has_header("Origin")) {
    const std::string origin = req.get_header_value("Origin");
    if (!hosts || !iequals(origin, "http://" + host)) {
      return refused(403, "Origin \"" + origin +
                              "\" refused: the admin API takes no requests from web pages of "
                              "other sites");
    }
  }
  if (req.method != "GET" && req.method != "HEAD" && req.has_header("Content-Type")) {
    const std::string type = req.get_header_value("Content-Type");
    if (!iequals(trim(std::string_view(type).substr(0, type.find(';'))), "application/json")) {
      return refused(403, "Content-Type \"" + type + "\" refused on " + req.method +
                              ": send no body, or application/json (a web page of any site can "
                              "send this type without asking first)");
    }
  }
  const std::string limit = std::to_string(kAdminMaxBodyBytes);
  if (req.has_header("Transfer-Encoding")) {
    return refused(413, "chunked request bodies are refused: send Content-Length, at most " + limit +
                            " bytes");
  }
  std::optional<uint64_t> length = 0;
  for (size_t i = 0; i < req.get_header_value_count("Content-Length"); ++i) {
    const auto n = content_length(req.get_header_value("Content-Length", i));
    if (!n || (i > 0 && length && *length != *n)) {
      return refused(400, "Content-Length: expected one number of bytes");
    }
    length = n;
  }
  if (*length > kAdminMaxBodyBytes) {
    return refused(413, "a request body of " + std::to_string(*length) +
                            " bytes is refused: at most " + limit);
  }
  if (req.has_header("Content-Encoding") &&
      !iequals(trim(req.get_header_value("Content-Encoding")), "identity")) {
    return refused(415, "Content-Encoding \"" + req.get_header_value("Content-Encoding") +
                            "\" refused: request bodies are not decompressed");
  }
  return std::nullopt;
}

}  // namespace meshgate::ctl
