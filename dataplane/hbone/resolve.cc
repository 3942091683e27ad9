#include "dataplane/hbone/resolve.h"

#include <arpa/inet.h>

#include <span>

#include "dataplane/lb/lb.h"
#include "dataplane/names/name_matcher.h"
#include "dataplane/packet/wire.h"
#include "dataplane/tls/spiffe.h"

namespace meshgate::dp::hbone {
namespace {

// The service's Maglev choice, or kNoEndpoint when it has no eligible endpoint.
Destination pick(const Snapshot& snap, const SnapService& s, uint32_t flow_hash) {
  Destination d;
  d.service = &s;
  if (!s.table || s.table_size == 0) {
    d.kind = Resolution::Kind::kNoEndpoint;
    return d;
  }
  const uint32_t i = lb_lookup(s.table, s.table_size, flow_hash);
  if (i == kNoBackend || i >= s.n_backends) {
    d.kind = Resolution::Kind::kNoEndpoint;
    return d;
  }
  d.backend = int32_t(s.first_backend + i);
  const SnapBackend& b = snap.backends[uint32_t(d.backend)];
  d.kind = Resolution::Kind::kServed;
  d.ip = b.address;
  d.port = ntohs(b.port_be);
  return d;
}

}  // namespace

Resolution Destination::resolution() const {
  Resolution r;
  r.kind = kind;
  r.ip = ip;
  r.port = port;
  r.cookie = uint64_t(backend + 1);
  return r;
}

Destination resolve(const Snapshot& snap, const Authority& a, uint32_t flow_hash,
                    hs_scratch_t* scratch) {
  const uint16_t port_be = htons(a.port);
  if (a.kind == Authority::Kind::kName) {
    auto it = snap.services_by_host.find(std::string(a.hostname()));
    if (it == snap.services_by_host.end() && snap.host_patterns != nullptr) {
      // Exact hostnames first (the map), then the longest wildcard suffix.
      const int32_t m = snap.host_patterns->match(a.hostname(), scratch);
      if (m >= 0) it = snap.services_by_host.find(snap.host_pattern_names[uint32_t(m)]);
    }
    if (it == snap.services_by_host.end()) return {};  // not a service of ours: 400
    for (const uint32_t si : it->second) {
      const SnapService& s = snap.services[si];
      if (s.port_be == port_be && s.proto == kProtoTcp) return pick(snap, s, flow_hash);
    }
    Destination d;  // our service, but not on that port
    d.kind = Resolution::Kind::kNoEndpoint;
    return d;
  }
  if (const SnapService* s = snap.find_service(a.ip, port_be, kProtoTcp)) {
    return pick(snap, *s, flow_hash);
  }
  if (snap.is_vip(a.ip)) {
    Destination d;  // a VIP of ours without a TCP service on that port
    d.kind = Resolution::Kind::kNoEndpoint;
    return d;
  }
  // A mesh workload address: that port if it is a known endpoint, else the first entry of the
  // address (the same workload: identity and policies) with the port asked for. A static
  // service's backend is not a workload: reaching it any other way than by its VIP would
  // open every port of that host to any mesh identity.
  const int32_t bi = snap.find_workload(a.ip, port_be, kProtoTcp);
  if (bi < 0) return {};  // not served: 400
  Destination d;
  d.kind = Resolution::Kind::kServed;
  d.ip = a.ip;
  d.port = a.port;
  d.backend = bi;
  return d;
}

std::vector<const policy::Policy*> policies_for(const Snapshot& snap, int32_t backend) {
  if (!snap.policies) return {};
  std::string_view ns;
  std::span<const std::string> selected;
  if (backend >= 0 && uint32_t(backend) < snap.backends.size()) {
    tls::SpiffeId id;
    if (tls::parse_spiffe_id(snap.identity_of(snap.backends[uint32_t(backend)]), id)) ns = id.ns;
    if (uint32_t(backend) < snap.backend_selectors.size()) {
      selected = snap.selector_lists[snap.backend_selectors[uint32_t(backend)]];
    }
  }
  return snap.policies->for_destination(ns, selected);
}

}  // namespace meshgate::dp::hbone
