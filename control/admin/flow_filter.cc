#include "control/admin/flow_filter.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "control/snapshot/stat_registry.h"
#include "dataplane/conntrack/conntrack.h"

namespace meshgate::ctl {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

const char* protocol_state(uint8_t proto) {
  switch (proto) {
    case 1: return "ICMP";
    case 17: return "UDP";
    case 58: return "ICMPV6";
  }
  return "OTHER";
}

Error bad(const std::string& key, const std::string& value, const std::string& expected) {
  return Error{key + ": expected " + expected + ", got \"" + value + "\""};
}

// "IP", "IP:PORT" or "[IPv6]:PORT"; a bare IPv6 address has no port.
bool parse_backend(const std::string& v, IpAddr* addr, uint16_t* port) {
  std::string host = v, port_text;
  if (!v.empty() && v.front() == '[') {
    const auto close = v.find(']');
    if (close == std::string::npos) return false;
    host = v.substr(1, close - 1);
    if (close + 1 != v.size()) {
      if (v[close + 1] != ':') return false;
      port_text = v.substr(close + 2);
      if (port_text.empty()) return false;
    }
  } else if (const auto colon = v.find(':'); colon != std::string::npos &&
                                             v.find(':', colon + 1) == std::string::npos) {
    host = v.substr(0, colon);
    port_text = v.substr(colon + 1);
    if (port_text.empty()) return false;
  }
  const auto a = IpAddr::parse(host);
  if (!a) return false;
  *addr = *a;
  *port = 0;
  if (!port_text.empty()) {
    unsigned p = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), p);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || p < 1 || p > 65535) {
      return false;
    }
    *port = uint16_t(p);
  }
  return true;
}

}  // namespace

const std::vector<std::string>& flow_state_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> n;
    for (dp::TcpState s : {dp::TcpState::kSynSent, dp::TcpState::kSynRecv,
                           dp::TcpState::kEstablished, dp::TcpState::kFinWait,
                           dp::TcpState::kCloseWait, dp::TcpState::kLastAck,
                           dp::TcpState::kTimeWait, dp::TcpState::kClose}) {
      n.push_back(dp::tcp_state_name(s));
    }
    for (const char* p : {"UDP", "ICMP", "ICMPV6", "OTHER"}) n.push_back(p);
    return n;
  }();
  return kNames;
}

std::string flow_state(const dp::FlowRecord& r) {
  if (r.proto == 6) return dp::tcp_state_name(r.state);
  return protocol_state(r.proto);
}

Result<FlowFilter> parse_flow_filter(const std::multimap<std::string, std::string>& params) {
  FlowFilter f;
  for (const char* key : {"service", "backend", "state", "client"}) {
    if (params.count(key) > 1) return Error{std::string(key) + ": given more than once"};
  }
  if (auto it = params.find("service"); it != params.end()) {
    if (it->second.empty()) return bad("service", it->second, "a service name");
    f.service = it->second;
  }
  if (auto it = params.find("backend"); it != params.end()) {
    IpAddr a;
    if (!parse_backend(it->second, &a, &f.backend_port)) {
      return bad("backend", it->second, "IP, IP:PORT or [IPv6]:PORT");
    }
    f.backend = a;
  }
  if (auto it = params.find("state"); it != params.end()) {
    const std::string s = upper(it->second);
    const auto& names = flow_state_names();
    if (std::find(names.begin(), names.end(), s) == names.end()) {
      std::string all;
      for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
      return bad("state", it->second, "one of " + all);
    }
    f.state = s;
  }
  if (auto it = params.find("client"); it != params.end()) {
    const auto p = IpPrefix::parse(it->second);
    if (!p) return bad("client", it->second, "IP or IP/PREFIX");
    f.client = p->network();
  }
  return f;
}

nlohmann::json flow_filter_json(const FlowFilter& f) {
  nlohmann::json j = nlohmann::json::object();
  if (!f.service.empty()) j["service"] = f.service;
  if (f.backend) {
    j["backend"] = f.backend_port ? endpoint_str(*f.backend, f.backend_port) : f.backend->str();
  }
  if (!f.state.empty()) j["state"] = f.state;
  if (f.client) j["client"] = f.client->str();
  return j;
}

bool flow_matches(const FlowFilter& f, const dp::FlowRecord& r, const std::string& service) {
  if (!f.service.empty() && service != f.service) return false;
  if (f.backend && (!(r.backend == *f.backend) ||
                    (f.backend_port != 0 && r.backend_port != f.backend_port))) {
    return false;
  }
  if (!f.state.empty() && flow_state(r) != f.state) return false;
  if (f.client && !f.client->contains(r.client)) return false;
  return true;
}

}  // namespace meshgate::ctl
