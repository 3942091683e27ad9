#include "control/snapshot/model.h"

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

}  // namespace meshgate::ctl
