#include "control/snapshot/builder.h"

#include <arpa/inet.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>

#include <map>
#include <memory>
#include <tuple>

#include "dataplane/lb/lb.h"

namespace meshgate::ctl {
namespace {

dp::Mode to_dp(ForwardMode m) {
  switch (m) {
    case ForwardMode::kDnat: return dp::Mode::kDnat;
    case ForwardMode::kFullnat: return dp::Mode::kFullnat;
    case ForwardMode::kDsrIpip: return dp::Mode::kDsrIpip;
    case ForwardMode::kDsrGue: return dp::Mode::kDsrGue;
    case ForwardMode::kProxy: return dp::Mode::kProxy;
  }
  return dp::Mode::kDnat;
}

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

}  // namespace

std::string endpoint_str(const IpAddr& a, uint16_t port) {
  return a.is_v4() ? a.str() + ":" + std::to_string(port)
                   : "[" + a.str() + "]:" + std::to_string(port);
}

Result<dp::Snapshot*> build_snapshot(const Config& cfg, const std::vector<ServiceSpec>& services,
                                     const std::vector<dp::PortRuntime>& ports, Registries& reg,
                                     uint64_t version) {
  StatRegistry& stats = reg.stats;
  auto snap = std::make_unique<dp::Snapshot>();
  snap->version = version;

  // Services and their Maglev tables.
  std::vector<dp::ServiceKey> keys;
  std::map<std::tuple<IpAddr, uint16_t, uint8_t>, std::vector<uint32_t>> services_of_backend;
  std::vector<uint64_t> reset_bits;
  for (const ServiceSpec& sc : services) {
    dp::SnapService s;
    s.vip = sc.vip;
    s.vip_id = reg.addrs.id_for(sc.vip);
    if (s.vip_id == 0) return Error{"service " + sc.name + ": address table full"};
    s.port_be = htons(sc.port);
    s.gue_port_be = htons(sc.gue_port);
    s.proto = uint8_t(sc.protocol);
    s.mode = to_dp(sc.mode);
    s.name = sc.name;
    s.first_backend = uint32_t(snap->backends.size());
    s.n_backends = uint32_t(sc.endpoints.size());
    std::vector<dp::LbBackend> lb;
    for (const EndpointSpec& bc : sc.endpoints) {
      dp::SnapBackend b;
      b.address = bc.address;
      b.port_be = htons(bc.port);
      // Unhealthy endpoints keep their counters and flows but take no new flows.
      b.weight = bc.healthy ? bc.weight : 0;
      b.stat_id = stats.id_for(sc.name, endpoint_str(bc.address, bc.port));
      snap->backends.push_back(b);
      auto& users = services_of_backend[{b.address, b.port_be, s.proto}];
      if (users.empty() || users.back() != snap->services.size()) {
        users.push_back(uint32_t(snap->services.size()));
      }
      lb.push_back(dp::LbBackend{bc.address, bc.port, b.weight});
    }
    const uint32_t size = sc.table_size ? sc.table_size : dp::lb_auto_table_size(lb.size());
    auto table = dp::lb_build_table(lb, size);
    if (!table.empty() && table[0] != dp::kNoBackend) {
      s.table_offset = uint32_t(snap->lb_slots.size());
      s.table_size = size;
      snap->lb_slots.insert(snap->lb_slots.end(), table.begin(), table.end());
    }
    if (sc.on_backend_removal == BackendRemoval::kReset) {
      // Backends this service had in earlier snapshots and no longer has.
      std::vector<bool> current(stats.names().size() + 1, false);
      for (uint32_t bi = 0; bi < s.n_backends; ++bi) {
        const uint32_t id = snap->backends[s.first_backend + bi].stat_id;
        if (id < current.size()) current[id] = true;
      }
      for (uint32_t id : stats.ids_of(sc.name)) {
        if (id == 0 || (id < current.size() && current[id])) continue;
        if (reset_bits.size() <= id / 64) reset_bits.resize(id / 64 + 1, 0);
        reset_bits[id / 64] |= 1ull << (id % 64);
      }
    }
    keys.push_back(dp::ServiceKey{s.vip, s.port_be, s.proto});
    bool seen = false;
    for (const auto& v : snap->vips) seen |= v == s.vip;
    if (!seen) snap->vips.push_back(s.vip);
    snap->services.push_back(std::move(s));
  }
  snap->service_index.build(keys);
  snap->reset_stat_ids = std::move(reset_bits);
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
  std::vector<dp::BackendKey> backend_keys;
  for (const auto& [k, users] : services_of_backend) {
    backend_keys.push_back(dp::BackendKey{std::get<0>(k), std::get<1>(k), std::get<2>(k)});
    snap->backend_service_ranges.emplace_back(uint32_t(snap->backend_services.size()),
                                              uint32_t(users.size()));
    snap->backend_services.insert(snap->backend_services.end(), users.begin(), users.end());
  }
  snap->backend_index.build(backend_keys);

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

  // LPM tables. Names must be unique in DPDK's namespace: include the version.
  size_t n4 = 0, n6 = 0;
  for (const auto& r : routes) (r.prefix.addr.is_v4() ? n4 : n6)++;
  const std::string v = std::to_string(version);
  rte_lpm_config c4{};
  c4.max_rules = uint32_t(std::max<size_t>(64, n4 * 2));
  c4.number_tbl8s = uint32_t(std::max<size_t>(256, n4));
  snap->lpm4 = rte_lpm_create(("mg_lpm4_" + v).c_str(), SOCKET_ID_ANY, &c4);
  rte_lpm6_config c6{};
  c6.max_rules = uint32_t(std::max<size_t>(64, n6 * 2));
  c6.number_tbl8s = uint32_t(std::max<size_t>(1024, n6 * 16));
  snap->lpm6 = rte_lpm6_create(("mg_lpm6_" + v).c_str(), SOCKET_ID_ANY, &c6);
  if (!snap->lpm4 || !snap->lpm6) {
    dp::snapshot_free(snap.release());
    return Error{std::string("cannot create LPM tables: ") + rte_strerror(rte_errno)};
  }
  // rte_lpm / rte_lpm6 take depths from 1: a default route becomes its two halves.
  std::vector<Route> expanded;
  for (const auto& r : routes) {
    if (r.prefix.len != 0) {
      expanded.push_back(r);
      continue;
    }
    Route hi = r;
    hi.prefix.len = 1;
    (r.prefix.addr.is_v4() ? hi.prefix.addr.b[12] : hi.prefix.addr.b[0]) = 0x80;
    Route lo = r;
    lo.prefix.len = 1;
    expanded.push_back(lo);
    expanded.push_back(hi);
  }
  // Longer prefixes must not be overwritten by shorter ones; rte_lpm handles overlap by depth,
  // but a later add of the same depth replaces: add in config order, connected routes first.
  for (const auto& r : expanded) {
    const int rc = r.prefix.addr.is_v4()
                       ? rte_lpm_add(snap->lpm4, r.prefix.addr.v4_host(), r.prefix.len, r.next_hop)
                       : rte_lpm6_add(snap->lpm6, r.prefix.addr.b, r.prefix.len, r.next_hop);
    if (rc != 0) {
      dp::snapshot_free(snap.release());
      return Error{"cannot add route " + r.prefix.str() + ": " + rte_strerror(-rc)};
    }
  }
  return snap.release();
}

}  // namespace meshgate::ctl
