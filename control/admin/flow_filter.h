// GET /flows filters (README.md "Admin API and meshgate-ctl"): which flows a dump keeps,
// decided on the control thread per copied FlowRecord, before the limit counts them.
//   service=NAME          the flow's service (as "service" of a flow shows it)
//   backend=IP[:PORT]     the backend address, and port when given ([v6]:port for IPv6)
//   state=STATE           a TCP state (ESTABLISHED, SYN_SENT, ...) or UDP / ICMP / ICMPV6 /
//                         OTHER for the other protocols; any case
//   client=IP[/PREFIX]    the client address lies in the prefix (a bare address: that host)
// Any thread: plain values and pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "control/common/result.h"
#include "dataplane/common/net_types.h"
#include "dataplane/worker/flow_dump.h"

namespace meshgate::ctl {

struct FlowFilter {
  std::string service;             // "" = any
  std::optional<IpAddr> backend;
  uint16_t backend_port = 0;       // 0 = any
  std::string state;               // upper case; "" = any
  std::optional<IpPrefix> client;

  bool empty() const { return service.empty() && !backend && state.empty() && !client; }
};

// Every value `state=` accepts, in the order the README lists them.
const std::vector<std::string>& flow_state_names();

// The state a flow shows in GET /flows: its TCP state, else its protocol in upper case.
std::string flow_state(const dp::FlowRecord& r);

// The filter of GET /flows' query parameters (any others are ignored, `limit` is the
// caller's). An error names the parameter, the value and what was expected (a 400 body).
Result<FlowFilter> parse_flow_filter(const std::multimap<std::string, std::string>& params);

// The filter as GET /flows echoes it: {"service": ..., "backend": ..., "state": ...,
// "client": ...} with only the given ones.
nlohmann::json flow_filter_json(const FlowFilter& f);

// True when `r` passes `f`. `service` is the flow's service name (StatRegistry's).
bool flow_matches(const FlowFilter& f, const dp::FlowRecord& r, const std::string& service);

}  // namespace meshgate::ctl
