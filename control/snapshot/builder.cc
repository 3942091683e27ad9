#include "control/snapshot/builder.h"

#include <arpa/inet.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <tuple>

#include "control/snapshot/maglev.h"

namespace meshgate::ctl {
namespace {

// The port whose address prefixes hold `a`, or -1.
int on_link_port(const std::vector<dp::PortRuntime>& ports, const IpAddr& a) {
  for (const auto& p : ports) {
    for (const auto& pre : p.addresses) {
      if (pre.contains(a)) return p.index;
    }
  }
  return -1;
}

int port_by_name(const std::vector<dp::PortRuntime>& ports, const std::string& name) {
  for (const auto& p : ports) {
    if (p.name == name) return p.index;
  }
  return -1;
}

struct Route {
  IpPrefix prefix;
  uint32_t next_hop;
};

void set_bit(std::vector<uint64_t>& bits, uint32_t id) {
  if (bits.size() <= id / 64) bits.resize(id / 64 + 1, 0);
  bits[id / 64] |= 1ull << (id % 64);
}

bool same_next_hops(const std::vector<dp::NextHop>& a, const std::vector<dp::NextHop>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const dp::NextHop& x, const dp::NextHop& y) {
                      return x.port_index == y.port_index && x.on_link == y.on_link &&
                             x.gateway == y.gateway;
                    });
}

// LPM tables for `routes` (prefixes of length >= 1). Names must be unique in DPDK's namespace
// while the tables live, and tables outlive the snapshot that created them: a process-wide
// sequence number names them.
Result<std::shared_ptr<const dp::RouteTables>> make_route_tables(
    const std::vector<std::pair<IpPrefix, uint32_t>>& routes) {
  static uint64_t seq = 0;  // control thread only
  const std::string n = std::to_string(++seq);
  size_t n4 = 0, n6 = 0;
  for (const auto& r : routes) (r.first.addr.is_v4() ? n4 : n6)++;
  auto rt = std::make_shared<dp::RouteTables>();
  rte_lpm_config c4{};
  c4.max_rules = uint32_t(std::max<size_t>(64, n4 * 2));
  c4.number_tbl8s = uint32_t(std::max<size_t>(256, n4));
  rt->lpm4 = rte_lpm_create(("mg_lpm4_" + n).c_str(), SOCKET_ID_ANY, &c4);
  rte_lpm6_config c6{};
  c6.max_rules = uint32_t(std::max<size_t>(64, n6 * 2));
  c6.number_tbl8s = uint32_t(std::max<size_t>(1024, n6 * 16));
  rt->lpm6 = rte_lpm6_create(("mg_lpm6_" + n).c_str(), SOCKET_ID_ANY, &c6);
  if (!rt->lpm4 || !rt->lpm6) {
    return Error{std::string("cannot create LPM tables: ") + rte_strerror(rte_errno)};
  }
  // rte_lpm handles overlap by depth, but a later add of the same depth replaces: routes come
  // in config order, connected routes first.
  for (const auto& [prefix, nh] : routes) {
    const int rc = prefix.addr.is_v4() ? rte_lpm_add(rt->lpm4, prefix.addr.v4_host(), prefix.len, nh)
                                       : rte_lpm6_add(rt->lpm6, prefix.addr.b, prefix.len, nh);
    if (rc != 0) return Error{"cannot add route " + prefix.str() + ": " + rte_strerror(-rc)};
  }
  return std::shared_ptr<const dp::RouteTables>(std::move(rt));
}

// A Maglev table to fill: lb_build_table(entry->backends, entry->table_size) into `table`.
struct TableFill {
  BuildCache::Service* entry;
  std::shared_ptr<dp::LbTable> table;
};

// Below this many slots a thread's share of the fills is not worth waking a helper for (a
// 1009-slot table takes 13-20 us; a wake-up, tens of us).
constexpr uint64_t kMinSlotsPerThread = 64 * 1024;

// Fills every table of `fills`, split into contiguous runs of about equal slot counts, one per
// thread of `pool`. Each fill reads only its entry's backends and writes only its own result,
// so the tables are the same whichever thread fills them, in whatever order.
void fill_tables(BuildPool& pool, std::vector<TableFill>& fills) {
  uint64_t slots = 0;
  for (const TableFill& f : fills) slots += f.entry->table_size;
  const uint32_t n = uint32_t(std::clamp<uint64_t>(slots / kMinSlotsPerThread, 1, pool.threads()));
  // Run t is fills[begin[t] .. begin[t + 1]): it starts at the first fill past t/n of the slots.
  std::vector<size_t> begin(n + 1, fills.size());
  begin[0] = 0;
  uint64_t at = 0;
  uint32_t t = 1;
  for (size_t i = 0; i < fills.size() && t < n; ++i) {
    while (t < n && at >= slots * t / n) begin[t++] = i;
    at += fills[i].entry->table_size;
  }
  pool.run(n, [&](uint32_t run) {
    for (size_t i = begin[run]; i < begin[run + 1]; ++i) {
      const BuildCache::Service& e = *fills[i].entry;
      fills[i].table = std::make_shared<dp::LbTable>(lb_build_table(e.backends, e.table_size));
    }
  });
}

}  // namespace

uint32_t IdentityRegistry::id_for(const std::string& identity) {
  if (identity.empty()) return 0;
  if (names_[last_] == identity) return last_;
  const auto [it, added] = ids_.try_emplace(identity, uint32_t(names_.size()));
  if (added) names_.push_back(identity);
  last_ = it->second;
  return last_;
}

std::shared_ptr<const std::vector<std::string>> IdentityRegistry::table() {
  if (!published_ || published_->size() != names_.size()) {
    published_ = std::make_shared<const std::vector<std::string>>(names_);
  }
  return published_;
}

dp::WorkerSettings worker_settings(const Config& cfg) {
  dp::WorkerSettings w;
  dp::ConntrackTimeouts& t = w.conntrack;
  t.tcp_syn_ms = cfg.conntrack.tcp_syn * 1000;
  t.tcp_established_ms = cfg.conntrack.tcp_established * 1000;
  t.tcp_fin_ms = cfg.conntrack.tcp_fin * 1000;
  t.tcp_time_wait_ms = cfg.conntrack.tcp_time_wait * 1000;
  // After a RST: Linux's 10 s, shorter when TIME-WAIT is configured shorter.
  t.tcp_close_ms = std::min(cfg.conntrack.tcp_time_wait, 10u) * 1000;
  t.udp_ms = cfg.conntrack.udp * 1000;
  t.other_ms = cfg.conntrack.icmp * 1000;
  w.proxy_idle_timeout_ms = cfg.proxy.idle_timeout_s * 1000;
  w.tcp_time_wait_ms = cfg.proxy.time_wait_s * 1000;
  return w;
}

Result<dp::Snapshot*> build_snapshot(const Config& cfg, const std::vector<ServiceSpec>& services,
                                     const std::vector<dp::PortRuntime>& ports, Registries& reg,
                                     uint64_t version) {
  StatRegistry& stats = reg.stats;
  BuildStats bs;
  auto snap = std::make_unique<dp::Snapshot>();
  snap->version = version;
  snap->settings = worker_settings(cfg);

  // Services and their Maglev tables. Cache entries are updated in place: an entry always
  // describes a real table for its backends (a failed build leaves correct entries behind), and
  // entries of services gone from this build are dropped at the end.
  BuildCache& cache = reg.cache;
  const uint64_t gen = ++cache.generation;
  size_t n_endpoints = 0;
  for (const ServiceSpec& sc : services) n_endpoints += sc.endpoints.size();
  snap->services.reserve(services.size());
  snap->backends.reserve(n_endpoints);
  snap->lb_tables.reserve(services.size());
  std::vector<dp::ServiceKey> keys;
  keys.reserve(services.size());
  // Every (backend, protocol) -> the services using it: grouped in two passes below.
  std::vector<dp::BackendKey> backend_keys;
  std::vector<uint32_t> backend_user;  // service index of each backend_keys entry
  backend_keys.reserve(n_endpoints);
  backend_user.reserve(n_endpoints);
  std::vector<uint64_t> reset_bits, stale_bits;
  size_t cached = 0;  // distinct names of this build
  snap->backend_selectors.reserve(n_endpoints);
  snap->selector_lists.emplace_back();  // [0]: no selector policies
  std::unordered_map<std::string, uint32_t> selector_ids;
  auto selector_list = [&](const std::vector<std::string>& keys) {
    std::string joined;
    for (const std::string& k : keys) joined += k + '\n';
    const auto [it, added] = selector_ids.try_emplace(joined, uint32_t(snap->selector_lists.size()));
    if (added) snap->selector_lists.push_back(keys);
    return it->second;
  };
  // The tables to fill, in service order: filled after the loop, over the pool.
  std::vector<TableFill> fills;
  std::vector<const BuildCache::Service*> entries;  // per service
  entries.reserve(services.size());
  std::deque<BuildCache::Service> repeated;
  std::vector<std::pair<const std::string, BuildCache::Service>*> order;
  order.reserve(services.size());
  for (const ServiceSpec& sc : services) {
    const size_t i = order.size();
    auto* kv = i < cache.order.size() && cache.order[i] && cache.order[i]->first == sc.name
                   ? cache.order[i]
                   : &*cache.services.try_emplace(sc.name).first;
    BuildCache::Service* ep = &kv->second;
    cached += ep->used != gen;
    // Names are unique among specs. Should one repeat, its later uses get entries of their own
    // outside the cache: an entry must describe one pending fill.
    if (ep->used == gen) {
      ep = &repeated.emplace_back();
      kv = nullptr;
    }
    order.push_back(kv);
    BuildCache::Service& e = *ep;
    e.used = gen;
    dp::SnapService s;
    s.vip = sc.vip;
    // Address ids never change: the VIP's id is looked up once per VIP a service has.
    if (e.vip_id == 0 || e.vip != sc.vip) {
      e.vip = sc.vip;
      e.vip_id = reg.addrs.id_for(sc.vip);
    }
    s.vip_id = e.vip_id;
    if (s.vip_id == 0) return Error{"service " + sc.name + ": address table full"};
    s.port_be = htons(sc.port);
    s.gue_port_be = htons(sc.gue_port);
    s.proto = uint8_t(sc.protocol);
    s.mode = sc.mode;
    // Endpoints reached over HBONE (tunnel = hbone) need the client's TCP terminated: with an
    // [hbone] certificate source the service runs on the workers' TCP stack like a proxy
    // service, and each connection goes to its Maglev choice over HBONE (a plain endpoint of
    // the same service as proxied TCP).
    if (uses_hbone(cfg) && s.proto == 6 &&
        std::any_of(sc.endpoints.begin(), sc.endpoints.end(),
                    [](const EndpointSpec& ep) { return ep.tunnel == TunnelProtocol::kHbone; })) {
      s.mode = dp::Mode::kProxy;
    }
    s.proxy_protocol = sc.proxy_protocol == ProxyProtocol::kV2 ? 2 : 0;
    if (s.mode == dp::Mode::kProxy && !sc.deny.empty()) {
      auto d = add_deny_set(sc.deny, sc.inspect_bytes, "service/" + sc.name, reg.names, snap.get());
      if (!d) return d.error();
      s.deny = d.value();
    }
    s.name = sc.name;
    s.hostname = sc.hostname;
    s.first_backend = uint32_t(snap->backends.size());
    s.n_backends = uint32_t(sc.endpoints.size());
    if (!sc.source_ranges.empty()) {
      snap->source_ranges.emplace_back().build(sc.source_ranges);
      s.source_ranges = uint32_t(snap->source_ranges.size());
    }
    s.affinity_timeout_ms = sc.affinity_timeout_s * 1000;
    s.all_unhealthy =
        !sc.endpoints.empty() && std::none_of(sc.endpoints.begin(), sc.endpoints.end(),
                                              [](const EndpointSpec& ep) { return ep.healthy; });

    const auto& eps = sc.endpoints;
    // Unhealthy endpoints keep their counters and flows but take no new flows.
    auto weight_of = [](const EndpointSpec& ep) { return ep.healthy ? ep.weight : 0; };
    const bool same_backends =
        e.built && std::equal(eps.begin(), eps.end(), e.backends.begin(), e.backends.end(),
                              [](const EndpointSpec& a, const LbBackend& b) {
                                return a.address == b.address && a.port == b.port;
                              });
    bool same_table = same_backends;
    if (!same_backends) {
      e.backends.clear();
      e.stat_ids.clear();
      e.identity_ids.clear();
      e.tunnels.clear();
      StatRegistry::Service& ids = stats.service(sc.name);
      for (const EndpointSpec& ep : eps) {
        e.backends.push_back(LbBackend{ep.address, ep.port, weight_of(ep)});
        // Stat ids depend on the service name and backend address:port only.
        e.stat_ids.push_back(stats.id_for(ids, ep.address, ep.port));
        e.identity_ids.push_back(reg.identities.id_for(ep.identity));
        e.tunnels.push_back(ep.tunnel == TunnelProtocol::kHbone ? dp::Tunnel::kHbone
                                                                : dp::Tunnel::kNone);
      }
      e.lost_backends = stats.ids_of(sc.name).size() > eps.size();
    } else {
      for (size_t i = 0; i < eps.size(); ++i) {
        // A workload behind the same address:port may change identity or tunnel (a new pod
        // with a recycled IP): those do not move the table.
        if (reg.identities.name(e.identity_ids[i]) != eps[i].identity) {
          e.identity_ids[i] = reg.identities.id_for(eps[i].identity);
        }
        e.tunnels[i] = eps[i].tunnel == TunnelProtocol::kHbone ? dp::Tunnel::kHbone
                                                                : dp::Tunnel::kNone;
        if (e.backends[i].weight == weight_of(eps[i])) continue;
        e.backends[i].weight = weight_of(eps[i]);
        same_table = false;
      }
    }
    const uint32_t size = sc.table_size ? sc.table_size : lb_auto_table_size(eps.size());
    if (same_table && e.table_size == size) {
      ++bs.tables_reused;
    } else {
      // Until the fill, the entry describes no table: a build that fails before it leaves an
      // entry the next build refills.
      e.built = false;
      e.table_size = size;
      fills.push_back(TableFill{&e, nullptr});
      ++bs.tables_built;
    }
    entries.push_back(&e);
    const uint32_t si = uint32_t(snap->services.size());
    for (uint32_t bi = 0; bi < s.n_backends; ++bi) {
      dp::SnapBackend b;
      b.address = e.backends[bi].address;
      b.port_be = htons(e.backends[bi].port);
      b.weight = e.backends[bi].weight;
      b.healthy = eps[bi].healthy;
      b.tunnel = e.tunnels[bi];
      b.identity = e.identity_ids[bi];
      b.stat_id = e.stat_ids[bi];
      snap->backends.push_back(b);
      snap->backend_selectors.push_back(eps[bi].policy_keys.empty() ? 0 : selector_list(eps[bi].policy_keys));
      snap->backend_istio.push_back(reg.istio.workload_id(eps[bi].istio));
      backend_keys.push_back(dp::BackendKey{b.address, b.port_be, s.proto});
      backend_user.push_back(si);
    }
    // Backends this service had in earlier snapshots and no longer has, and its unhealthy
    // ones: their UDP flows move (stale), and with on_backend_removal = "reset" every flow of
    // theirs is reset. Only services that lost or have an unhealthy backend pay the scan.
    const bool any_unhealthy = std::any_of(eps.begin(), eps.end(),
                                           [](const EndpointSpec& ep) { return !ep.healthy; });
    if (any_unhealthy || e.lost_backends) {
      std::vector<bool> current(stats.names().size() + 1, false);
      for (uint32_t bi = 0; bi < s.n_backends; ++bi) {
        const dp::SnapBackend& b = snap->backends[s.first_backend + bi];
        if (b.stat_id < current.size() && b.healthy) current[b.stat_id] = true;
      }
      const bool reset = sc.on_backend_removal == BackendRemoval::kReset;
      for (uint32_t id : stats.ids_of(sc.name)) {
        if (id == 0 || (id < current.size() && current[id])) continue;
        set_bit(stale_bits, id);
        if (reset) set_bit(reset_bits, id);
      }
    }
    keys.push_back(dp::ServiceKey{s.vip, s.port_be, s.proto});
    snap->services.push_back(std::move(s));
  }
  fill_tables(reg.pool, fills);
  for (TableFill& f : fills) {
    f.entry->table = !f.table->empty() && (*f.table)[0] != dp::kNoBackend ? std::move(f.table)
                                                                            : nullptr;
    f.entry->built = true;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const BuildCache::Service& e = *entries[i];
    if (!e.table) continue;
    snap->services[i].table = e.table->data();
    snap->services[i].table_size = e.table_size;
    snap->lb_tables.push_back(e.table);
  }
  // NodePort: each service with a node_port again at every port address of its VIP's family
  // and that port. Appended after the services, so their indices (echo_services, listeners'
  // routes by name) stay those of the specs.
  const uint32_t n_services = uint32_t(snap->services.size());
  for (uint32_t i = 0; i < n_services; ++i) {
    if (services[i].node_port == 0) continue;
    for (const auto& p : ports) {
      for (const auto& a : p.addresses) {
        if (a.addr.is_v4() != services[i].vip.is_v4()) continue;
        dp::SnapService np = snap->services[i];
        np.vip = a.addr;
        np.vip_id = reg.addrs.id_for(a.addr);
        if (np.vip_id == 0) return Error{"service " + services[i].name + ": address table full"};
        np.port_be = htons(services[i].node_port);
        np.node_port_of = i + 1;
        keys.push_back(dp::ServiceKey{np.vip, np.port_be, np.proto});
        snap->services.push_back(std::move(np));
      }
    }
  }
  // Istio's destination_service*: a mesh service's hostname, namespace and name; a static
  // service's name as hostname and name. A node_port entry is its service.
  snap->service_istio.resize(snap->services.size());
  for (uint32_t i = 0; i < snap->services.size(); ++i) {
    const uint32_t owner = snap->services[i].node_port_of ? snap->services[i].node_port_of - 1 : i;
    if (owner >= services.size()) continue;
    const ServiceSpec& sc = services[owner];
    snap->service_istio[i] = reg.istio.service_id(
        sc.istio.hostname.empty() ? IstioServiceLabels{sc.name, "", sc.name} : sc.istio);
  }
  for (uint32_t i = 0; i < snap->services.size(); ++i) {
    if (!snap->services[i].hostname.empty()) {
      snap->services_by_host[snap->services[i].hostname].push_back(i);
    }
  }
  // Listeners after the services they route to: their VIP:ports join the VIPs and the index.
  if (auto r = add_host_patterns(reg.names, snap.get()); !r) return r.error();
  if (auto r = add_listeners(cfg, reg.names, reg.addrs, snap.get(), keys); !r) return r.error();
  if (auto r = finish_names(cfg.gateway.workers, reg.names, snap.get()); !r) return r.error();
  // Distinct VIPs (ARP/NDP/echo), in service order.
  {
    std::vector<IpAddr> all;
    all.reserve(snap->services.size());
    for (const auto& sv : snap->services) {
      if (sv.node_port_of == 0) all.push_back(sv.vip);  // a port address is no VIP
    }
    dp::FlatIndex<IpAddr> first;
    first.build(all);
    for (uint32_t i = 0; i < all.size(); ++i) {
      if (first.find(all[i]) == int32_t(i)) snap->vips.push_back(all[i]);
    }
  }
  snap->service_index.build(keys);
  {
    std::vector<IpAddr> addrs;
    for (uint32_t i = 0; i < snap->backends.size(); ++i) {
      if (snap->backends[i].identity == 0) continue;  // a static backend: not a workload
      addrs.push_back(snap->backends[i].address);
      snap->workload_backends.push_back(i);
    }
    snap->workload_ip_index.build(addrs);
  }
  snap->reset_stat_ids = std::move(reset_bits);
  snap->stale_stat_ids = std::move(stale_bits);
  snap->any_source_ranges = !snap->source_ranges.empty();
  snap->blocked_sources.build(cfg.deny_sources);
  std::vector<IpAddr> echo_vips;
  for (uint32_t i = 0; i < services.size(); ++i) {
    if (services[i].icmp_echo != IcmpEcho::kForward) continue;
    bool seen = false;
    for (const auto& v : echo_vips) seen |= v == services[i].vip;
    if (seen) continue;
    echo_vips.push_back(services[i].vip);
    snap->echo_services.push_back(i);
  }
  snap->echo_index.build(echo_vips);
  // Group backends by (address, port, protocol): backend_index is built over every service's
  // backends and finds the first entry of equal keys; that entry's range lists the services
  // using the backend, each once, in service order.
  {
    std::vector<uint32_t> first;
    snap->backend_index.build(backend_keys, &first);
    const uint32_t n = uint32_t(backend_keys.size());
    std::vector<uint32_t> count(n, 0), last_user(n, UINT32_MAX);
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t f = first[j];
      if (last_user[f] == backend_user[j]) continue;
      last_user[f] = backend_user[j];
      ++count[f];
    }
    snap->backend_service_ranges.resize(n);
    uint32_t at = 0;
    for (uint32_t j = 0; j < n; ++j) {
      snap->backend_service_ranges[j] = {at, 0};
      at += count[j];
    }
    snap->backend_services.resize(at);
    std::fill(last_user.begin(), last_user.end(), UINT32_MAX);
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t f = first[j];
      if (last_user[f] == backend_user[j]) continue;
      last_user[f] = backend_user[j];
      auto& r = snap->backend_service_ranges[f];
      snap->backend_services[r.first + r.second++] = backend_user[j];
    }
  }

  // Fullnat source addresses.
  std::vector<IpAddr> fullnat_keys;
  for (const IpAddr& a : cfg.fullnat.local_addresses) {
    const uint32_t id = reg.addrs.id_for(a);
    if (id == 0) return Error{"fullnat address " + a.str() + ": address table full"};
    (a.is_v4() ? snap->fullnat_v4 : snap->fullnat_v6).push_back(dp::LocalNat{a, id});
    fullnat_keys.push_back(a);
  }
  snap->fullnat_index.build(fullnat_keys);
  snap->vip_index.build(snap->vips);

  // Local addresses and connected routes.
  std::vector<Route> routes;
  std::map<std::tuple<uint16_t, bool, IpAddr>, uint32_t> nh_ids;
  auto next_hop = [&](uint16_t port, bool on_link, const IpAddr& gw) {
    auto key = std::make_tuple(port, on_link, gw);
    auto it = nh_ids.find(key);
    if (it != nh_ids.end()) return it->second;
    const uint32_t id = uint32_t(snap->next_hops.size());
    snap->next_hops.push_back(dp::NextHop{port, on_link, gw});
    nh_ids.emplace(key, id);
    return id;
  };
  for (const auto& p : ports) {
    for (const auto& a : p.addresses) {
      snap->local_addresses.push_back(a.addr);
      snap->local_address_port.push_back(p.index);
      routes.push_back(Route{a.network(), next_hop(p.index, true, IpAddr{})});
    }
  }
  snap->local_index.build(snap->local_addresses);
  // The martian checks' addresses: the gateway's own first (an address listed twice keeps its
  // first class), then the broadcast address of each IPv4 port subnet that has one (a /31 or
  // /32 has none, RFC 3021).
  std::vector<IpAddr> class_keys;
  auto add_class = [&](const IpAddr& a, dp::AddrClass c) {
    class_keys.push_back(a);
    snap->addr_classes.push_back(c);
  };
  for (const IpAddr& a : snap->local_addresses) add_class(a, dp::AddrClass::kGateway);
  for (const IpAddr& a : snap->vips) add_class(a, dp::AddrClass::kGateway);
  for (const IpAddr& a : fullnat_keys) add_class(a, dp::AddrClass::kGateway);
  for (const auto& p : ports) {
    for (const auto& a : p.addresses) {
      if (!a.addr.is_v4() || a.len > 30) continue;
      add_class(IpAddr::v4(a.addr.v4_host() | (0xffffffffu >> a.len)),
                dp::AddrClass::kSubnetBroadcast);
    }
  }
  snap->addr_class_index.build(class_keys);
  for (const RouteConfig& rc : cfg.routes) {
    const int port = rc.port.empty() ? on_link_port(ports, rc.via) : port_by_name(ports, rc.port);
    if (port < 0) {
      return Error{"route " + rc.prefix.str() + ": next hop " + rc.via.str() +
                   " is not on-link of any port"};
    }
    routes.push_back(Route{rc.prefix.network(), next_hop(uint16_t(port), false, rc.via)});
  }

  // Static neighbors.
  std::vector<IpAddr> nkeys;
  for (const NeighborConfig& nc : cfg.neighbors) {
    const int port = nc.port.empty() ? on_link_port(ports, nc.address) : port_by_name(ports, nc.port);
    snap->neighbors.push_back(dp::StaticNeighbor{nc.address, nc.mac, uint16_t(port < 0 ? 0 : port)});
    nkeys.push_back(nc.address);
  }
  snap->neighbor_index.build(nkeys);

  // rte_lpm / rte_lpm6 take depths from 1: a default route becomes its two halves.
  std::vector<std::pair<IpPrefix, uint32_t>> expanded;
  for (const auto& r : routes) {
    if (r.prefix.len != 0) {
      expanded.emplace_back(r.prefix, r.next_hop);
      continue;
    }
    IpPrefix hi = r.prefix;
    hi.len = 1;
    (r.prefix.addr.is_v4() ? hi.addr.b[12] : hi.addr.b[0]) = 0x80;
    IpPrefix lo = r.prefix;
    lo.len = 1;
    expanded.emplace_back(lo, r.next_hop);
    expanded.emplace_back(hi, r.next_hop);
  }
  // The same routes and next hops as the last build: its LPM tables answer the same.
  const BuildCache& old = reg.cache;
  if (old.route_tables && expanded == old.routes && same_next_hops(snap->next_hops, old.next_hops)) {
    snap->route_tables = old.route_tables;
    bs.routes_reused = true;
  } else {
    auto rt = make_route_tables(expanded);
    if (!rt) return rt.error();
    snap->route_tables = std::move(rt.value());
  }
  snap->lpm4 = snap->route_tables->lpm4;
  snap->lpm6 = snap->route_tables->lpm6;
  snap->identities = reg.identities.table();
  snap->policies = reg.policies;
  snap->certificates = reg.certificates;
  snap->tls_contexts = reg.tls_contexts;

  if (cache.services.size() != cached) {
    std::erase_if(cache.services, [gen](const auto& kv) { return kv.second.used != gen; });
  }
  cache.order = std::move(order);  // only entries of this build: none was erased
  reg.cache.routes = std::move(expanded);
  reg.cache.next_hops = snap->next_hops;
  reg.cache.route_tables = snap->route_tables;
  reg.last_build = bs;
  return snap.release();
}

}  // namespace meshgate::ctl
