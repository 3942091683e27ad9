#include "control/config/config_reload.h"

#include <algorithm>
#include <map>

#include "control/config/config_internal.h"

namespace meshgate::ctl {
namespace {

using config_detail::indexed;
using config_detail::join;

// Why each restart-only table cannot change live, as the message says it.
constexpr const char* kWhyPort = "the ports, their queues and the mbuf pool are set up at start";
constexpr const char* kWhyWorkers = "sizes the lcores, queues and per-worker tables";
constexpr const char* kWhyLocality = "the mesh mapping reads it at start";
constexpr const char* kWhyMaxFlows = "sizes the flow table";
constexpr const char* kWhyProxySize = "sizes the TCB table and the mbuf pool";
constexpr const char* kWhyFullnat = "flow steering and reply prediction are set up at start";
constexpr const char* kWhyMesh = "the mesh provider is started with it";
constexpr const char* kWhyHbone = "the HBONE terminator and its certificate source are started with it";
constexpr const char* kWhyControl = "the snapshot builder's threads are started with it";
constexpr const char* kWhyAdmin = "the admin API is bound at start";
constexpr const char* kWhyBgp = "the BGP daemon is started with it";
constexpr const char* kWhyAccessLog =
    "the workers' access-log rings and flow-end hooks are set up at start";

class Differ {
 public:
  Differ(const Config& next, ConfigErrors* out) : next_(next), out_(out) {}

  template <typename T>
  void key(const std::string& key, const T& a, const T& b, const char* why) {
    if (!(a == b)) add(key, why);
  }
  void add(const std::string& key, const std::string& why) {
    out_->errors.push_back(ConfigError{position_of(next_, key), key,
                                       "cannot change while running (" + why +
                                           "); restart meshgate to apply"});
  }
  // A list of tables compared entry by entry: a different count is one error at the first
  // entry that was added (or, when entries were removed, at the last one left).
  template <typename T, typename Each>
  void list(const std::string& name, const std::vector<T>& a, const std::vector<T>& b,
            const char* why, Each each) {
    if (a.size() != b.size()) {
      const size_t at = std::min(a.size(), b.size());
      add(b.empty() ? name : indexed(name, b.size() > a.size() ? at : b.size() - 1),
          std::string(why) + "; count " + std::to_string(a.size()) + " -> " +
              std::to_string(b.size()));
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) each(indexed(name, i), a[i], b[i]);
  }

 private:
  const Config& next_;
  ConfigErrors* out_;
};

void ports(Differ& d, const Config& a, const Config& b) {
  d.list("port", a.ports, b.ports, kWhyPort,
         [&](const std::string& k, const PortConfig& x, const PortConfig& y) {
           d.key(join(k, "name"), x.name, y.name, kWhyPort);
           d.key(join(k, "device"), x.device, y.device, kWhyPort);
           d.key(join(k, "addresses"), x.addresses, y.addresses, kWhyPort);
           d.key(join(k, "mac"), x.mac, y.mac, kWhyPort);
           d.key(join(k, "rx_descriptors"), x.rx_descriptors, y.rx_descriptors, kWhyPort);
           d.key(join(k, "tx_descriptors"), x.tx_descriptors, y.tx_descriptors, kWhyPort);
           d.key(join(k, "mtu"), x.mtu, y.mtu, kWhyPort);
           d.key(join(k, "host_interface"), x.host_interface, y.host_interface, kWhyPort);
           d.key(join(k, "promiscuous"), x.promiscuous, y.promiscuous, kWhyPort);
         });
}

void mesh(Differ& d, const MeshConfig& a, const MeshConfig& b) {
  d.key("mesh.source", a.source, b.source, kWhyMesh);
  d.key("mesh.path", a.path, b.path, kWhyMesh);
  d.key("mesh.address", a.address, b.address, kWhyMesh);
  d.key("mesh.tls", a.tls, b.tls, kWhyMesh);
  d.key("mesh.ca_file", a.ca_file, b.ca_file, kWhyMesh);
  d.key("mesh.token_file", a.token_file, b.token_file, kWhyMesh);
  d.key("mesh.cluster_id", a.cluster_id, b.cluster_id, kWhyMesh);
  d.key("mesh.node_id", a.node_id, b.node_id, kWhyMesh);
  d.key("mesh.network", a.network, b.network, kWhyMesh);
  d.key("mesh.mode", a.mode, b.mode, kWhyMesh);
  d.key("mesh.table_size", a.table_size, b.table_size, kWhyMesh);
}

void hbone(Differ& d, const HboneConfig& a, const HboneConfig& b) {
  d.key("hbone.port", a.port, b.port, kWhyHbone);
  d.key("hbone.cert_chain", a.cert_chain, b.cert_chain, kWhyHbone);
  d.key("hbone.private_key", a.private_key, b.private_key, kWhyHbone);
  d.key("hbone.trust_bundle", a.trust_bundle, b.trust_bundle, kWhyHbone);
  d.key("hbone.trust_domain", a.trust_domain, b.trust_domain, kWhyHbone);
  d.key("hbone.ca_address", a.ca_address, b.ca_address, kWhyHbone);
  d.key("hbone.ca_tls", a.ca_tls, b.ca_tls, kWhyHbone);
  d.key("hbone.ca_file", a.ca_file, b.ca_file, kWhyHbone);
  d.key("hbone.token_file", a.token_file, b.token_file, kWhyHbone);
  d.key("hbone.cluster_id", a.cluster_id, b.cluster_id, kWhyHbone);
  d.key("hbone.identity", a.identity, b.identity, kWhyHbone);
  d.key("hbone.cert_ttl", a.cert_ttl, b.cert_ttl, kWhyHbone);
  d.key("hbone.max_connections", a.max_connections, b.max_connections, kWhyHbone);
  d.key("hbone.max_handshakes", a.max_handshakes, b.max_handshakes, kWhyHbone);
  d.key("hbone.max_handshakes_per_source", a.max_handshakes_per_source,
        b.max_handshakes_per_source, kWhyHbone);
  d.key("hbone.handshake_timeout_ms", a.handshake_timeout_ms, b.handshake_timeout_ms, kWhyHbone);
  d.key("hbone.memory_mb", a.memory_mb, b.memory_mb, kWhyHbone);
}

void bgp(Differ& d, const BgpConfig& a, const BgpConfig& b) {
  d.key("bgp", a.enabled, b.enabled, kWhyBgp);
  d.key("bgp.local_as", a.local_as, b.local_as, kWhyBgp);
  d.key("bgp.router_id", a.router_id, b.router_id, kWhyBgp);
  d.key("bgp.hold_time_s", a.hold_time_s, b.hold_time_s, kWhyBgp);
  d.key("bgp.withdraw_wait_ms", a.withdraw_wait_ms, b.withdraw_wait_ms, kWhyBgp);
  d.key("bgp.daemon", a.daemon, b.daemon, kWhyBgp);
  d.key("bgp.runtime_dir", a.runtime_dir, b.runtime_dir, kWhyBgp);
  d.list("bgp.peer", a.peers, b.peers, kWhyBgp,
         [&](const std::string& k, const BgpPeerConfig& x, const BgpPeerConfig& y) {
           d.key(join(k, "address"), x.address, y.address, kWhyBgp);
           d.key(join(k, "remote_as"), x.remote_as, y.remote_as, kWhyBgp);
           d.key(join(k, "password"), x.password, y.password, kWhyBgp);
         });
}

// The key of the first service or listener in `c` that needs what `pred` tests, else "".
template <typename Pred>
std::string first_key_where(const Config& c, Pred pred) {
  for (size_t i = 0; i < c.services.size(); ++i) {
    if (pred(c.services[i])) return indexed("service", i);
  }
  for (size_t i = 0; i < c.listeners.size(); ++i) {
    if (pred(c.listeners[i])) return indexed("listener", i);
  }
  return "";
}

bool is_proxy(const ServiceConfig& s) { return s.mode == ForwardMode::kProxy; }
bool is_proxy(const ListenerConfig&) { return true; }
bool has_deny(const ServiceConfig& s) { return is_proxy(s) && !s.deny.empty(); }
bool has_deny(const ListenerConfig& l) { return !l.deny.empty(); }

// What the workers were started with decides what a live config may use.
void stack_needs(Differ& d, const Config& a, const Config& b) {
  const bool stack_a = uses_proxy(a) || uses_hbone(a);
  if (!stack_a && uses_proxy(b)) {
    const std::string k = first_key_where(b, [](const auto& x) { return is_proxy(x); });
    d.add(k.empty() ? "mesh.mode" : join(k, k.starts_with("listener") ? "name" : "mode"),
          "needs the workers' TCP stack, which runs only when the gateway starts with a proxy "
          "service, a listener or HBONE");
    return;
  }
  if (stack_a) {
    size_t vips_b = b.listeners.size();
    for (const auto& s : b.services) vips_b += is_proxy(s);
    if (vips_b > proxy_listener_slots(a)) {
      d.add(first_key_where(b, [](const auto& x) { return is_proxy(x); }),
            "the TCP stack has " + std::to_string(proxy_listener_slots(a)) +
                " listener slots, sized at start; this config has " + std::to_string(vips_b) +
                " proxy VIPs");
    }
  }
  if (!uses_deny(a) && uses_deny(b)) {
    const std::string k = first_key_where(b, [](const auto& x) { return has_deny(x); });
    d.add(join(k, "deny"),
          "the workers' deny inspection memory is set up only when the gateway starts with deny "
          "signatures");
  }
}

bool same_backends(const std::vector<BackendConfig>& a, const std::vector<BackendConfig>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const BackendConfig& x, const BackendConfig& y) {
                      return x.address == y.address && x.port == y.port && x.weight == y.weight;
                    });
}

bool same_deny(const std::vector<DenyConfig>& a, const std::vector<DenyConfig>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const DenyConfig& x, const DenyConfig& y) { return x.pattern == y.pattern; });
}

bool same_health_check(const HealthCheckConfig& a, const HealthCheckConfig& b) {
  return a.enabled == b.enabled && a.type == b.type && a.port == b.port && a.path == b.path &&
         a.interval_ms == b.interval_ms && a.timeout_ms == b.timeout_ms && a.rise == b.rise &&
         a.fall == b.fall;
}

bool same_service(const ServiceConfig& a, const ServiceConfig& b) {
  return a.vip == b.vip && a.port == b.port && a.protocol == b.protocol && a.mode == b.mode &&
         a.table_size == b.table_size && a.on_backend_removal == b.on_backend_removal &&
         a.gue_port == b.gue_port && a.icmp_echo == b.icmp_echo &&
         a.proxy_protocol == b.proxy_protocol && same_backends(a.backends, b.backends) &&
         same_deny(a.deny, b.deny) && a.inspect_bytes == b.inspect_bytes &&
         a.source_ranges == b.source_ranges && a.session_affinity == b.session_affinity &&
         a.affinity_timeout_s == b.affinity_timeout_s && a.node_port == b.node_port &&
         same_health_check(a.health_check, b.health_check);
}

bool same_listener(const ListenerConfig& a, const ListenerConfig& b) {
  auto same_routes = [](const ListenerRouteConfig& x, const ListenerRouteConfig& y) {
    return x.hostnames == y.hostnames && x.service == y.service && x.port == y.port;
  };
  return a.vip == b.vip && a.port == b.port && a.match == b.match &&
         std::equal(a.routes.begin(), a.routes.end(), b.routes.begin(), b.routes.end(),
                    same_routes) &&
         a.default_service == b.default_service && a.peek_bytes == b.peek_bytes &&
         a.peek_timeout_ms == b.peek_timeout_ms && a.inspect_bytes == b.inspect_bytes &&
         same_deny(a.deny, b.deny);
}

// Entries matched by name: how many were added, removed, or differ.
template <typename T, typename Same>
void count_by_name(const std::vector<T>& a, const std::vector<T>& b, Same same, uint32_t* added,
                   uint32_t* removed, uint32_t* changed) {
  std::map<std::string_view, const T*> old;
  for (const T& x : a) old.emplace(x.name, &x);
  for (const T& y : b) {
    auto it = old.find(y.name);
    if (it == old.end()) {
      ++*added;
      continue;
    }
    if (!same(*it->second, y)) ++*changed;
    old.erase(it);
  }
  *removed = uint32_t(old.size());
}

}  // namespace

uint32_t proxy_listener_slots(const Config& cfg) {
  size_t vips = cfg.listeners.size();
  for (const auto& s : cfg.services) vips += is_proxy(s);
  // Mesh services run on the stack in proxy mode, or when they have HBONE endpoints; their
  // number is not known at start.
  const bool mesh_proxy = cfg.mesh.source != MeshSource::kNone &&
                          (cfg.mesh.mode == ForwardMode::kProxy || uses_hbone(cfg));
  return uint32_t(std::max<size_t>(mesh_proxy ? 1024 : 64, 2 * vips));
}

bool uses_deny(const Config& cfg) {
  return std::any_of(cfg.services.begin(), cfg.services.end(),
                     [](const ServiceConfig& s) { return has_deny(s); }) ||
         std::any_of(cfg.listeners.begin(), cfg.listeners.end(),
                     [](const ListenerConfig& l) { return has_deny(l); });
}

ConfigErrors restart_only_changes(const Config& a, const Config& b) {
  ConfigErrors out;
  Differ d(b, &out);
  d.key("gateway.workers", a.gateway.workers, b.gateway.workers, kWhyWorkers);
  d.key("gateway.locality", a.gateway.locality, b.gateway.locality, kWhyLocality);
  ports(d, a, b);
  d.key("conntrack.max_flows", a.conntrack.max_flows, b.conntrack.max_flows, kWhyMaxFlows);
  d.key("proxy.max_connections", a.proxy.max_connections, b.proxy.max_connections, kWhyProxySize);
  d.key("proxy.buffer_bytes", a.proxy.buffer_bytes, b.proxy.buffer_bytes, kWhyProxySize);
  d.key("proxy.memory_mb", a.proxy.memory_mb, b.proxy.memory_mb, kWhyProxySize);
  d.key("fullnat.local_addresses", a.fullnat.local_addresses, b.fullnat.local_addresses,
        kWhyFullnat);
  mesh(d, a.mesh, b.mesh);
  hbone(d, a.hbone, b.hbone);
  d.key("control.build_threads", a.control.build_threads, b.control.build_threads, kWhyControl);
  d.key("admin.listen", a.admin.listen, b.admin.listen, kWhyAdmin);
  bgp(d, a.bgp, b.bgp);
  // The path itself is live (a reload opens the new file); whether there is a log is not.
  if (a.access_log.path.empty() != b.access_log.path.empty()) {
    d.add("access_log.path", std::string(kWhyAccessLog) + "; turning the access log " +
                                 (b.access_log.path.empty() ? "off" : "on"));
  }
  d.key("access_log.flows", a.access_log.flows, b.access_log.flows, kWhyAccessLog);
  d.key("access_log.ring_size", a.access_log.ring_size, b.access_log.ring_size, kWhyAccessLog);
  stack_needs(d, a, b);
  return out;
}

bool ConfigChanges::empty() const {
  return services_added + services_removed + services_changed + listeners_added +
             listeners_removed + listeners_changed ==
             0 &&
         other.empty();
}

ConfigChanges live_changes(const Config& a, const Config& b) {
  ConfigChanges c;
  count_by_name(a.services, b.services, same_service, &c.services_added, &c.services_removed,
                &c.services_changed);
  count_by_name(a.listeners, b.listeners, same_listener, &c.listeners_added,
                &c.listeners_removed, &c.listeners_changed);
  auto same_route = [](const RouteConfig& x, const RouteConfig& y) {
    return x.prefix == y.prefix && x.via == y.via && x.port == y.port;
  };
  auto same_neighbor = [](const NeighborConfig& x, const NeighborConfig& y) {
    return x.address == y.address && x.mac == y.mac && x.port == y.port;
  };
  if (!std::equal(a.routes.begin(), a.routes.end(), b.routes.begin(), b.routes.end(), same_route)) {
    c.other.push_back("route");
  }
  if (!std::equal(a.neighbors.begin(), a.neighbors.end(), b.neighbors.begin(), b.neighbors.end(),
                  same_neighbor)) {
    c.other.push_back("neighbor");
  }
  if (a.deny_sources != b.deny_sources) c.other.push_back("deny");
  const ConntrackConfig& x = a.conntrack;
  const ConntrackConfig& y = b.conntrack;
  if (x.tcp_syn != y.tcp_syn || x.tcp_established != y.tcp_established ||
      x.tcp_fin != y.tcp_fin || x.tcp_time_wait != y.tcp_time_wait || x.udp != y.udp ||
      x.icmp != y.icmp) {
    c.other.push_back("conntrack");
  }
  if (a.proxy.idle_timeout_s != b.proxy.idle_timeout_s ||
      a.proxy.time_wait_s != b.proxy.time_wait_s) {
    c.other.push_back("proxy");
  }
  if (a.gateway.drain_timeout_ms != b.gateway.drain_timeout_ms ||
      a.gateway.watch_config != b.gateway.watch_config) {
    c.other.push_back("gateway");
  }
  if (a.access_log.path != b.access_log.path) c.other.push_back("access_log");
  return c;
}

}  // namespace meshgate::ctl
