#include "control/mesh/mesh_proto.h"

#include <optional>

#include "control/names/name_compile.h"

namespace meshgate::ctl::mesh {
namespace {

std::optional<IpAddr> ip_from_bytes(const std::string& b) {
  if (b.size() == 4) return IpAddr::v4_bytes(reinterpret_cast<const uint8_t*>(b.data()));
  if (b.size() == 16) return IpAddr::v6_bytes(reinterpret_cast<const uint8_t*>(b.data()));
  return std::nullopt;
}

std::string ip_to_bytes(const IpAddr& a) {
  if (a.is_v4()) return std::string(reinterpret_cast<const char*>(a.v4_ptr()), 4);
  return std::string(reinterpret_cast<const char*>(a.b), 16);
}

Result<PortMapping> port_from_proto(const istio::workload::Port& p) {
  if (p.service_port() == 0 || p.service_port() > 65535) {
    return Error{"service_port " + std::to_string(p.service_port()) + " out of range 1..65535"};
  }
  if (p.target_port() > 65535) {
    return Error{"target_port " + std::to_string(p.target_port()) + " out of range 0..65535"};
  }
  return PortMapping{uint16_t(p.service_port()), uint16_t(p.target_port()),
                     uint8_t(p.app_protocol())};
}

void port_to_proto(const PortMapping& pm, istio::workload::Port* p) {
  p->set_service_port(pm.service_port);
  p->set_target_port(pm.target_port);
  p->set_app_protocol(istio::workload::AppProtocol(pm.app_protocol));
}

Result<IpPrefix> prefix_from_proto(const istio::security::Address& a) {
  auto ip = ip_from_bytes(a.address());
  if (!ip) return Error{"address of " + std::to_string(a.address().size()) + " bytes"};
  const uint32_t max = ip->is_v4() ? 32 : 128;
  if (a.length() > max) return Error{"prefix length " + std::to_string(a.length()) + " too long"};
  return IpPrefix{*ip, uint8_t(a.length())};
}

void prefix_to_proto(const IpPrefix& p, istio::security::Address* a) {
  a->set_address(ip_to_bytes(p.addr));
  a->set_length(p.len);
}

StringMatch string_match_from_proto(const istio::security::StringMatch& m) {
  switch (m.match_type_case()) {
    case istio::security::StringMatch::kPrefix: return {StringMatch::Kind::kPrefix, m.prefix()};
    case istio::security::StringMatch::kSuffix: return {StringMatch::Kind::kSuffix, m.suffix()};
    case istio::security::StringMatch::kPresence: return {StringMatch::Kind::kPresence, ""};
    default: return {StringMatch::Kind::kExact, m.exact()};
  }
}

void string_match_to_proto(const StringMatch& s, istio::security::StringMatch* m) {
  switch (s.kind) {
    case StringMatch::Kind::kExact: m->set_exact(s.value); break;
    case StringMatch::Kind::kPrefix: m->set_prefix(s.value); break;
    case StringMatch::Kind::kSuffix: m->set_suffix(s.value); break;
    case StringMatch::Kind::kPresence: m->mutable_presence(); break;
  }
}

}  // namespace

Result<Workload> workload_from_proto(const istio::workload::Workload& p) {
  Workload w;
  if (p.uid().empty()) return Error{"workload without uid"};
  w.uid = p.uid();
  w.name = p.name();
  w.ns = p.namespace_();
  for (const std::string& b : p.addresses()) {
    auto a = ip_from_bytes(b);
    if (!a) return Error{"address of " + std::to_string(b.size()) + " bytes (expected 4 or 16)"};
    w.addresses.push_back(*a);
  }
  w.hostname = p.hostname();
  w.network = p.network();
  switch (p.tunnel_protocol()) {
    case istio::workload::NONE: w.tunnel = Tunnel::kNone; break;
    case istio::workload::HBONE: w.tunnel = Tunnel::kHbone; break;
    case istio::workload::LEGACY_ISTIO_MTLS:
      return Error{"ztunnel does not support sending legacy Istio mTLS"};
    default: return Error{"unknown tunnel protocol " + std::to_string(p.tunnel_protocol())};
  }
  if (!p.trust_domain().empty()) w.trust_domain = p.trust_domain();
  if (!p.service_account().empty()) w.service_account = p.service_account();
  w.node = p.node();
  w.cluster_id = p.cluster_id();
  w.canonical_name = p.canonical_name();
  w.canonical_revision = p.canonical_revision();
  w.workload_name = p.workload_name();
  w.locality = Locality{p.locality().region(), p.locality().zone(), p.locality().subzone()};
  for (const auto& [key, list] : p.services()) {
    auto& ports = w.services[key];
    for (const auto& port : list.ports()) {
      auto pm = port_from_proto(port);
      if (!pm) return Error{"services[" + key + "]: " + pm.error().message};
      ports.push_back(*pm);
    }
  }
  for (const auto& a : p.authorization_policies()) w.authorization_policies.push_back(a);
  w.healthy = p.status() != istio::workload::UNHEALTHY;
  w.capacity = p.has_capacity() ? p.capacity().value() : kDefaultCapacity;
  return w;
}

Result<Service> service_from_proto(const istio::workload::Service& p) {
  Service s;
  if (p.namespace_().empty() || p.hostname().empty()) {
    return Error{"service without namespace or hostname"};
  }
  s.name = p.name();
  s.ns = p.namespace_();
  s.hostname = p.hostname();
  if (s.hostname.find('*') != std::string::npos) {
    // A ServiceEntry-style wildcard host: HBONE authorities match it (docs/NAMES.md).
    if (const std::string why = check_name_pattern(s.hostname); !why.empty() || s.hostname[0] == '~') {
      return Error{"hostname \"" + s.hostname + "\": " + (why.empty() ? "not a wildcard hostname" : why)};
    }
  }
  for (const auto& na : p.addresses()) {
    auto a = ip_from_bytes(na.address());
    if (!a) {
      return Error{"VIP of " + std::to_string(na.address().size()) + " bytes (expected 4 or 16)"};
    }
    NetworkAddress out{na.network(), *a, std::nullopt};
    if (na.has_length()) {
      if (na.length() > (a->is_v4() ? 32u : 128u)) {
        return Error{"VIP prefix length " + std::to_string(na.length()) + " too long"};
      }
      out.length = uint8_t(na.length());
    }
    s.vips.push_back(out);
  }
  for (const auto& port : p.ports()) {
    auto pm = port_from_proto(port);
    if (!pm) return Error{"ports: " + pm.error().message};
    s.ports.push_back(*pm);
  }
  for (const auto& san : p.subject_alt_names()) s.subject_alt_names.push_back(san);
  const auto& lb = p.load_balancing();
  for (int sc : lb.routing_preference()) {
    if (sc < 1 || sc > 6) return Error{"unknown load balancing scope " + std::to_string(sc)};
    s.load_balancing.routing_preference.push_back(LbScope(sc));
  }
  if (lb.mode() < 0 || lb.mode() > 3) {
    return Error{"unknown load balancing mode " + std::to_string(lb.mode())};
  }
  s.load_balancing.mode = LbMode(lb.mode());
  s.load_balancing.health_policy =
      lb.health_policy() == istio::workload::LoadBalancing::ALLOW_ALL ? HealthPolicy::kAllowAll
                                                                      : HealthPolicy::kOnlyHealthy;
  return s;
}

Result<Policy> policy_from_proto(const istio::security::Authorization& p) {
  Policy pol;
  if (p.name().empty()) return Error{"policy without name"};
  pol.name = p.name();
  pol.ns = p.namespace_();
  if (p.scope() < 0 || p.scope() > 2) return Error{"unknown scope " + std::to_string(p.scope())};
  pol.scope = PolicyScope(p.scope());
  if (p.action() < 0 || p.action() > 1) return Error{"unknown action " + std::to_string(p.action())};
  pol.action = PolicyAction(p.action());
  pol.dry_run = p.dry_run();
  for (const auto& g : p.groups()) {
    PolicyGroup group;
    for (const auto& r : g.rules()) {
      PolicyClause clause;
      for (const auto& m : r.matches()) {
        PolicyMatch pm;
        for (const auto& x : m.namespaces()) pm.namespaces.push_back(string_match_from_proto(x));
        for (const auto& x : m.not_namespaces()) pm.not_namespaces.push_back(string_match_from_proto(x));
        for (const auto& x : m.principals()) pm.principals.push_back(string_match_from_proto(x));
        for (const auto& x : m.not_principals()) pm.not_principals.push_back(string_match_from_proto(x));
        auto prefixes = [](const auto& in, std::vector<IpPrefix>& out) -> std::optional<Error> {
          for (const auto& a : in) {
            auto pre = prefix_from_proto(a);
            if (!pre) return pre.error();
            out.push_back(*pre);
          }
          return std::nullopt;
        };
        if (auto e = prefixes(m.source_ips(), pm.source_ips)) return *e;
        if (auto e = prefixes(m.not_source_ips(), pm.not_source_ips)) return *e;
        if (auto e = prefixes(m.destination_ips(), pm.destination_ips)) return *e;
        if (auto e = prefixes(m.not_destination_ips(), pm.not_destination_ips)) return *e;
        for (uint32_t port : m.destination_ports()) {
          if (port > 65535) return Error{"destination port " + std::to_string(port)};
          pm.destination_ports.push_back(uint16_t(port));
        }
        for (uint32_t port : m.not_destination_ports()) {
          if (port > 65535) return Error{"destination port " + std::to_string(port)};
          pm.not_destination_ports.push_back(uint16_t(port));
        }
        for (const auto& sa : m.service_accounts()) {
          pm.service_accounts.push_back({sa.namespace_(), sa.serviceaccount()});
        }
        for (const auto& sa : m.not_service_accounts()) {
          pm.not_service_accounts.push_back({sa.namespace_(), sa.serviceaccount()});
        }
        clause.matches.push_back(std::move(pm));
      }
      group.clauses.push_back(std::move(clause));
    }
    pol.groups.push_back(std::move(group));
  }
  return pol;
}

istio::workload::Workload workload_to_proto(const Workload& w) {
  istio::workload::Workload p;
  p.set_uid(w.uid);
  p.set_name(w.name);
  p.set_namespace_(w.ns);
  for (const IpAddr& a : w.addresses) p.add_addresses(ip_to_bytes(a));
  p.set_hostname(w.hostname);
  p.set_network(w.network);
  p.set_tunnel_protocol(istio::workload::TunnelProtocol(int(w.tunnel)));
  p.set_trust_domain(w.trust_domain);
  p.set_service_account(w.service_account);
  p.set_node(w.node);
  p.set_cluster_id(w.cluster_id);
  p.set_canonical_name(w.canonical_name);
  p.set_canonical_revision(w.canonical_revision);
  p.set_workload_name(w.workload_name);
  if (w.locality != Locality{}) {
    p.mutable_locality()->set_region(w.locality.region);
    p.mutable_locality()->set_zone(w.locality.zone);
    p.mutable_locality()->set_subzone(w.locality.subzone);
  }
  for (const auto& [key, ports] : w.services) {
    auto& list = (*p.mutable_services())[key];
    for (const auto& pm : ports) port_to_proto(pm, list.add_ports());
  }
  for (const auto& a : w.authorization_policies) p.add_authorization_policies(a);
  p.set_status(w.healthy ? istio::workload::HEALTHY : istio::workload::UNHEALTHY);
  if (w.capacity != kDefaultCapacity) p.mutable_capacity()->set_value(w.capacity);
  return p;
}

istio::workload::Service service_to_proto(const Service& s) {
  istio::workload::Service p;
  p.set_name(s.name);
  p.set_namespace_(s.ns);
  p.set_hostname(s.hostname);
  for (const auto& v : s.vips) {
    auto* na = p.add_addresses();
    na->set_network(v.network);
    na->set_address(ip_to_bytes(v.address));
    if (v.length) na->set_length(*v.length);
  }
  for (const auto& pm : s.ports) port_to_proto(pm, p.add_ports());
  for (const auto& san : s.subject_alt_names) p.add_subject_alt_names(san);
  const LoadBalancing& lb = s.load_balancing;
  if (lb != LoadBalancing{}) {
    auto* l = p.mutable_load_balancing();
    for (LbScope sc : lb.routing_preference) {
      l->add_routing_preference(istio::workload::LoadBalancing::Scope(int(sc)));
    }
    l->set_mode(istio::workload::LoadBalancing::Mode(int(lb.mode)));
    l->set_health_policy(istio::workload::LoadBalancing::HealthPolicy(int(lb.health_policy)));
  }
  return p;
}

istio::security::Authorization policy_to_proto(const Policy& pol) {
  istio::security::Authorization p;
  p.set_name(pol.name);
  p.set_namespace_(pol.ns);
  p.set_scope(istio::security::Scope(int(pol.scope)));
  p.set_action(istio::security::Action(int(pol.action)));
  p.set_dry_run(pol.dry_run);
  for (const auto& g : pol.groups) {
    auto* pg = p.add_groups();
    for (const auto& c : g.clauses) {
      auto* pr = pg->add_rules();
      for (const auto& m : c.matches) {
        auto* pm = pr->add_matches();
        for (const auto& x : m.namespaces) string_match_to_proto(x, pm->add_namespaces());
        for (const auto& x : m.not_namespaces) string_match_to_proto(x, pm->add_not_namespaces());
        for (const auto& x : m.principals) string_match_to_proto(x, pm->add_principals());
        for (const auto& x : m.not_principals) string_match_to_proto(x, pm->add_not_principals());
        for (const auto& x : m.source_ips) prefix_to_proto(x, pm->add_source_ips());
        for (const auto& x : m.not_source_ips) prefix_to_proto(x, pm->add_not_source_ips());
        for (const auto& x : m.destination_ips) prefix_to_proto(x, pm->add_destination_ips());
        for (const auto& x : m.not_destination_ips) {
          prefix_to_proto(x, pm->add_not_destination_ips());
        }
        for (uint16_t x : m.destination_ports) pm->add_destination_ports(x);
        for (uint16_t x : m.not_destination_ports) pm->add_not_destination_ports(x);
        for (const auto& sa : m.service_accounts) {
          auto* s = pm->add_service_accounts();
          s->set_namespace_(sa.ns);
          s->set_serviceaccount(sa.service_account);
        }
        for (const auto& sa : m.not_service_accounts) {
          auto* s = pm->add_not_service_accounts();
          s->set_namespace_(sa.ns);
          s->set_serviceaccount(sa.service_account);
        }
      }
    }
  }
  return p;
}

}  // namespace meshgate::ctl::mesh
