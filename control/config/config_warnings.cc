// Config warnings: what is valid but cannot work as written, reported by --check (exit 0) and
// logged at start. Nothing here stops a start: a route may come later by a reload, and a
// backend may be kept in a config on purpose while its network is down.
#include <algorithm>

#include "control/config/config.h"

namespace meshgate::ctl {

namespace {

// The dataplane's route lookup holds the ports' on-link prefixes and the [[route]] prefixes,
// nothing else (dataplane/route/route.cc): an address neither covers is dropped as no_route.
bool routed(const Config& c, const IpAddr& a) {
  auto covers = [&](const IpPrefix& p) { return p.addr.is_v4() == a.is_v4() && p.contains(a); };
  for (const PortConfig& port : c.ports) {
    if (std::any_of(port.addresses.begin(), port.addresses.end(), covers)) return true;
  }
  return std::any_of(c.routes.begin(), c.routes.end(),
                     [&](const RouteConfig& r) { return covers(r.prefix); });
}

}  // namespace

std::vector<ConfigError> config_warnings(const Config& c) {
  std::vector<ConfigError> out;
  for (size_t i = 0; i < c.services.size(); ++i) {
    const ServiceConfig& s = c.services[i];
    for (size_t j = 0; j < s.backends.size(); ++j) {
      const IpAddr& a = s.backends[j].address;
      if (routed(c, a)) continue;
      const std::string key =
          "service[" + std::to_string(i) + "].backend[" + std::to_string(j) + "].address";
      out.push_back({position_of(c, key), key,
                     "backend " + a.str() + " of service '" + s.name +
                         "' is on no port's prefix and no [[route]] covers it: its packets "
                         "would be dropped as no_route (add a [[route]] whose prefix holds it)"});
    }
  }
  return out;
}

}  // namespace meshgate::ctl
