#include "control/snapshot/model.h"

#include <algorithm>

#include "dataplane/snapshot/snapshot.h"

namespace meshgate::ctl {

std::vector<ServiceSpec> services_from_config(const Config& cfg) {
  std::vector<ServiceSpec> out;
  out.reserve(cfg.services.size());
  for (const ServiceConfig& sc : cfg.services) {
    ServiceSpec s;
    s.name = sc.name;
    s.vip = sc.vip;
    s.port = sc.port;
    s.protocol = sc.protocol;
    s.mode = sc.mode;
    s.table_size = sc.table_size;
    s.on_backend_removal = sc.on_backend_removal;
    s.gue_port = sc.gue_port;
    s.icmp_echo = sc.icmp_echo;
    s.proxy_protocol = sc.proxy_protocol;
    for (const DenyConfig& d : sc.deny) s.deny.push_back(d.pattern);
    s.inspect_bytes = sc.inspect_bytes;
    s.source_ranges = sc.source_ranges;
    s.affinity_timeout_s =
        sc.session_affinity == SessionAffinity::kClientIp ? sc.affinity_timeout_s : 0;
    s.node_port = sc.node_port;
    s.source = "config";
    for (const BackendConfig& b : sc.backends) {
      EndpointSpec e;
      e.address = b.address;
      e.port = b.port;
      e.weight = b.weight;
      s.endpoints.push_back(std::move(e));
    }
    out.push_back(std::move(s));
  }
  return out;
}

VipSets vip_sets(const std::vector<ServiceSpec>& services, const dp::Snapshot& snapshot) {
  VipSets v;
  for (const ServiceSpec& s : services) {
    v.all.push_back(s.vip);
    const bool usable = std::any_of(s.endpoints.begin(), s.endpoints.end(),
                                    [](const EndpointSpec& e) { return e.weight > 0 && e.healthy; });
    if (usable) v.usable.push_back(s.vip);
  }
  // A listener's VIP takes connections while one of its routes has a service with a backend.
  for (const dp::SnapService& s : snapshot.services) {
    if (s.listener == 0) continue;
    v.all.push_back(s.vip);
    const dp::SnapListener& l = snapshot.listeners[s.listener - 1];
    if (std::any_of(l.routes.begin(), l.routes.end(), [&](const dp::SnapRoute& r) {
          return r.service >= 0 && snapshot.services[uint32_t(r.service)].table_size != 0;
        })) {
      v.usable.push_back(s.vip);
    }
  }
  return v;
}

}  // namespace meshgate::ctl
