#include "control/mesh/mesh_mapping.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "control/snapshot/builder.h"

namespace meshgate::ctl::mesh {
namespace {

// Workload.capacity is a uint32; the Maglev weights stay within the static services' range.
constexpr uint32_t kMaxWeight = 65535;

bool scope_matches(LbScope s, const Workload& w, const MappingOptions& opt) {
  switch (s) {
    case LbScope::kRegion: return w.locality.region == opt.locality.region;
    case LbScope::kZone: return w.locality.zone == opt.locality.zone;
    case LbScope::kSubzone: return w.locality.subzone == opt.locality.subzone;
    case LbScope::kNode: return !opt.node.empty() && w.node == opt.node;
    case LbScope::kCluster: return w.cluster_id == opt.cluster_id;
    case LbScope::kNetwork: return w.network == opt.network;
  }
  return false;
}

// The port an endpoint listens on for `service_port`: the workload's own PortList for the
// service (`own`) wins, then the service's target_port (docs/MESH.md, "Mapping rules").
// 0 = unresolved.
uint16_t target_port(const std::vector<PortMapping>& own, const PortMapping& sp) {
  for (const PortMapping& p : own) {
    if (p.service_port == sp.service_port && p.target_port != 0) return p.target_port;
  }
  return sp.target_port;
}

const IpAddr* address_of_family(const Workload& w, bool v4) {
  for (const IpAddr& a : w.addresses) {
    if (a.is_v4() == v4) return &a;
  }
  return nullptr;
}

struct Candidate {
  const Workload* w;
  const std::vector<PortMapping>* ports;  // the workload's PortList for the service
  int rank;
};

// A workload naming a service, with its PortList for that service.
struct Member {
  const Workload* w;
  const std::vector<PortMapping>* ports;
};

}  // namespace

int locality_rank(const LoadBalancing& lb, const Workload& w, const MappingOptions& opt) {
  if (lb.mode != LbMode::kStrict && lb.mode != LbMode::kFailover) return 0;
  int rank = 0;
  for (LbScope s : lb.routing_preference) {
    if (!scope_matches(s, w, opt)) break;
    ++rank;
  }
  const int n = int(lb.routing_preference.size());
  if (lb.mode == LbMode::kStrict) return rank == n ? rank : -1;
  // Same-network endpoints always win when NETWORK leads the preferences.
  if (n > 0 && lb.routing_preference[0] == LbScope::kNetwork && rank > 0) rank += n - 1;
  return rank;
}

uint32_t mesh_table_size(size_t endpoints, uint32_t configured) {
  if (configured != 0 && configured >= endpoints) return configured;
  uint64_t m = kMeshMinTableSize;
  while (m < uint64_t(endpoints) * kMinSlotsPerBackend) m *= 2;
  return next_prime(uint32_t(std::min<uint64_t>(m, 0x7fffffffu)));
}

MappingResult map_mesh(const MeshModel& model, const MappingOptions& opt,
                       const std::vector<ServiceSpec>& taken) {
  MappingResult out;
  MappingStats& st = out.stats;
  std::set<std::tuple<IpAddr, uint16_t, L4Proto>> used;
  for (const ServiceSpec& s : taken) used.emplace(s.vip, s.port, s.protocol);
  st.policies = model.policies.size();
  // The workloads naming each service, in uid order: one pass over the workloads instead of one
  // per service (10,000 services x 100,000 workloads would be 10^9 lookups).
  std::unordered_map<std::string_view, std::vector<Member>> members;
  members.reserve(model.services.size());
  for (const auto& [uid, w] : model.workloads) {
    for (const auto& [skey, ports] : w.services) members[skey].push_back({&w, &ports});
  }
  const std::vector<Member> no_members;

  for (const auto& [key, svc] : model.services) {
    if (svc.load_balancing.mode == LbMode::kPassthrough) {
      ++st.skipped_passthrough;
      continue;
    }
    std::vector<IpAddr> vips;
    for (const NetworkAddress& na : svc.vips) {
      if (na.network != opt.network) continue;
      if (na.length && *na.length < (na.address.is_v4() ? 32 : 128)) {
        ++st.skipped_cidr_vips;
        continue;
      }
      if (std::find(vips.begin(), vips.end(), na.address) == vips.end()) {
        vips.push_back(na.address);
      }
    }
    if (vips.empty()) {
      ++st.skipped_headless;
      continue;
    }
    // Endpoints: workloads naming this service, filtered by health, network and locality.
    std::vector<Candidate> candidates;
    const std::string skey = svc.key();
    const auto mit = members.find(skey);
    for (const Member& mb : mit == members.end() ? no_members : mit->second) {
      const Workload& w = *mb.w;
      if (!w.healthy && svc.load_balancing.health_policy != HealthPolicy::kAllowAll) {
        ++st.skipped_unhealthy;
        continue;
      }
      if (w.network != opt.network) {
        ++st.skipped_other_network;
        continue;
      }
      const int rank = locality_rank(svc.load_balancing, w, opt);
      if (rank < 0) {
        ++st.skipped_locality;
        continue;
      }
      candidates.push_back({&w, mb.ports, rank});
    }
    bool mapped = false;
    for (const IpAddr& vip : vips) {
      for (const PortMapping& sp : svc.ports) {
        if (sp.service_port == 0) continue;
        ServiceSpec spec;
        spec.name = skey + ":" + std::to_string(sp.service_port);
        if (vips.size() > 1) spec.name += "@" + vip.str();
        spec.vip = vip;
        spec.port = sp.service_port;
        spec.protocol = L4Proto::kTcp;
        spec.mode = opt.mode;
        spec.source = "mesh";
        spec.hostname = svc.hostname;
        spec.istio = IstioServiceLabels{svc.hostname, svc.ns, svc.name};
        const auto k = std::tuple{vip, sp.service_port, L4Proto::kTcp};
        if (!used.insert(k).second) {
          ++st.duplicate_vips;
          out.notes.push_back("mesh service " + spec.name + " dropped: " +
                              endpoint_str(vip, sp.service_port) + "/tcp is already used");
          continue;
        }
        std::vector<std::pair<EndpointSpec, int>> eps;
        for (const Candidate& c : candidates) {
          const IpAddr* a = address_of_family(*c.w, vip.is_v4());
          if (!a) {
            ++st.skipped_no_address;
            continue;
          }
          const uint16_t port = target_port(*c.ports, sp);
          if (port == 0) {
            ++st.skipped_no_target_port;
            continue;
          }
          EndpointSpec e;
          e.address = *a;
          e.port = port;
          e.weight = std::min(c.w->capacity, kMaxWeight);
          e.healthy = true;  // unhealthy ones are already out unless the policy allows them
          e.tunnel = c.w->tunnel == Tunnel::kHbone ? TunnelProtocol::kHbone : TunnelProtocol::kNone;
          e.identity = c.w->identity();
          e.uid = c.w->uid;
          e.policy_keys = c.w->authorization_policies;
          e.istio = IstioWorkloadLabels{c.w->workload_name, c.w->canonical_name,
                                        c.w->canonical_revision, c.w->ns, e.identity,
                                        c.w->cluster_id};
          eps.emplace_back(std::move(e), c.rank);
        }
        // FAILOVER keeps only the best-ranked endpoints.
        int best = 0;
        for (const auto& [e, r] : eps) best = std::max(best, r);
        for (auto& [e, r] : eps) {
          if (r != best) {
            ++st.skipped_locality;
            continue;
          }
          st.hbone_endpoints += e.tunnel == TunnelProtocol::kHbone;
          spec.endpoints.push_back(std::move(e));
        }
        spec.table_size = mesh_table_size(spec.endpoints.size(), opt.table_size);
        st.endpoints += spec.endpoints.size();
        out.specs.push_back(std::move(spec));
        mapped = true;
      }
    }
    st.services += mapped;
  }
  st.specs = out.specs.size();
  return out;
}

}  // namespace meshgate::ctl::mesh
