// The immutable tables workers read: services with their lookup tables and endpoints (weight,
// health, tunnel protocol, identity), local addresses, VIPs, routes, static neighbors, the
// mesh's authorization policies and the gateway's certificate metadata. Built on the control thread (control/snapshot), published with one
// atomic store and freed only after every worker passed a quiescent state (rte_rcu_qsbr).
// Workers load the pointer once per burst and never write through it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/common/hash.h"
#include "dataplane/common/net_types.h"
#include "dataplane/policy/policy.h"
#include "dataplane/snapshot/cert_meta.h"
#include "dataplane/snapshot/mode.h"
#include "dataplane/tls/tls.h"

struct rte_lpm;
struct rte_lpm6;

struct hs_scratch;

namespace meshgate::dp {

namespace names {
class NameMatcher;
class DenySet;
class ScratchSet;
}  // namespace names

// How traffic reaches an endpoint: as is, or inside an HBONE tunnel to its :15008.
enum class Tunnel : uint8_t { kNone, kHbone };

struct SnapBackend {
  IpAddr address;
  uint16_t port_be = 0;  // network order
  Tunnel tunnel = Tunnel::kNone;
  bool healthy = true;   // unhealthy endpoints have weight 0 here (no new flows)
  uint32_t weight = 1;   // effective: 0 when drained or unhealthy
  uint32_t stat_id = 0;  // slot in the per-worker backend counters (stable across snapshots)
  uint32_t identity = 0; // index into Snapshot::identities (0: none, a plain backend)
};
static_assert(sizeof(SnapBackend) == 32, "two backends per cache line");

struct SnapService {
  IpAddr vip;
  uint32_t vip_id = 0;  // AddrTable id (flows store it instead of the address)
  uint16_t port_be = 0;
  uint8_t proto = 0;
  Mode mode = Mode::kDnat;
  uint16_t gue_port_be = 0;  // dsr-gue: outer UDP destination port
  uint8_t proxy_protocol = 0;  // proxy: 2 = a PROXY protocol v2 header first to the backend
  uint32_t first_backend = 0;  // index into Snapshot::backends
  uint32_t n_backends = 0;
  const uint32_t* table = nullptr;  // Maglev lookup table (kept alive by Snapshot::lb_tables)
  uint32_t table_size = 0;     // 0 = no eligible backend
  std::string name;
  std::string hostname;        // mesh services: the FQDN; "" for static services
  // 1 + index into Snapshot::listeners: this entry is a [[listener]]'s VIP:port (mode proxy, no
  // backends of its own); 0 for services.
  uint32_t listener = 0;
  // proxy: 1 + index into Snapshot::deny_sets (0: no deny signatures).
  uint32_t deny = 0;
  // 1 + index into Snapshot::source_ranges: new flows only from those prefixes (0: anyone).
  uint32_t source_ranges = 0;
  // session_affinity = "client_ip": milliseconds a client stays on its backend after its last
  // new connection (0: no affinity, the 5-tuple picks).
  uint32_t affinity_timeout_ms = 0;
  // Backends exist but none is healthy (new flows drop as no_healthy_backend, not no_backend).
  bool all_unhealthy = false;
  // 1 + index into Snapshot::services of the service this entry opens at a port address and
  // its node_port (sharing its backends, table and counters); 0 for the service itself.
  uint32_t node_port_of = 0;
};

// Deny signatures (docs/NAMES.md) of a proxy service or a listener: streaming patterns over
// the client's first inspect_bytes; a match resets both sides.
struct SnapDeny {
  std::shared_ptr<const names::DenySet> set;
  std::vector<uint32_t> stat_ids;  // per pattern: slot in the per-worker deny counters
  uint32_t inspect_bytes = 0;
};

// What a listener reads its connections' names from.
enum class NameSource : uint8_t { kSni, kHost };

// One route of a listener: where connections whose name matched one of its hostnames go.
struct SnapRoute {
  int32_t service = -1;   // index into Snapshot::services; -1: not in this snapshot
  uint32_t stat_id = 0;   // slot in the per-worker route counters (stable across snapshots)
};

// A [[listener]] (docs/NAMES.md): its connections are terminated by the proxy, which reads
// their first bytes, extracts the name, and routes them.
struct SnapListener {
  std::string name;
  NameSource source = NameSource::kSni;
  uint32_t peek_bytes = 0;
  uint32_t peek_timeout_ms = 0;
  // Every hostname pattern of every route in config order (null: no route); pattern i belongs
  // to routes[pattern_route[i]].
  std::shared_ptr<const names::NameMatcher> names;
  std::vector<uint32_t> pattern_route;
  std::vector<SnapRoute> routes;  // config order, then default_service's when set
  int32_t default_route = -1;     // index into routes, -1: none
  uint32_t stat_id = 0;           // slot in the per-worker listener counters
  uint32_t deny = 0;              // 1 + index into Snapshot::deny_sets, 0: none
};

// A service's Maglev lookup table: backend indices (relative to the service's first backend).
// Immutable once built; shared by every snapshot whose service has the same backends, in the same
// order, with the same weights and table size, so a rebuild reuses the tables of unchanged
// services instead of refilling them.
using LbTable = std::vector<uint32_t>;

// The LPM tables built from a route list. Creating them costs tens of milliseconds (rte_lpm's
// tbl24 alone is 64 MiB to zero), and routes rarely change when services do: snapshots built
// from the same routes share one RouteTables, freed with the last snapshot (or builder cache)
// that holds it. Freed on the control thread, after the grace period of every snapshot using it.
struct RouteTables {
  rte_lpm* lpm4 = nullptr;
  rte_lpm6* lpm6 = nullptr;
  RouteTables() = default;
  RouteTables(const RouteTables&) = delete;
  RouteTables& operator=(const RouteTables&) = delete;
  ~RouteTables();
};

struct NextHop {
  uint16_t port_index = 0;  // index into the runtime's port array
  bool on_link = false;     // next hop is the destination itself
  IpAddr gateway;
};

// Immutable open-addressing set/map with 16-byte keys (addresses) or service keys, built once.
// Slot value 0 means empty, so a reader never sees a half-written slot.
template <typename Key>
class FlatIndex {
 public:
  // A key given twice is found at its first index; `first_of` (control side, optional) gets, for
  // each key, the index of its first occurrence.
  void build(const std::vector<Key>& keys, std::vector<uint32_t>* first_of = nullptr) {
    size_t cap = 16;
    while (cap < keys.size() * 2) cap <<= 1;
    mask_ = uint32_t(cap - 1);
    keys_.assign(cap, Key{});
    vals_.assign(cap, 0);
    if (first_of) first_of->resize(keys.size());
    std::fill(std::begin(filter_), std::end(filter_), 0);
    for (uint32_t i = 0; i < keys.size(); ++i) {
      const uint32_t f = filter_bit(keys[i]);
      filter_[f >> 6] |= 1ull << (f & 63);
      uint32_t s = hash(keys[i]) & mask_;
      while (vals_[s] != 0 && !(keys_[s] == keys[i])) s = (s + 1) & mask_;
      if (vals_[s] == 0) {
        keys_[s] = keys[i];
        vals_[s] = i + 1;
      }
      if (first_of) (*first_of)[i] = vals_[s] - 1;
    }
  }
  // The index of `k` in the vector given to build(), or -1.
  int32_t find(const Key& k) const {
    const uint32_t f = filter_bit(k);
    if (!(filter_[f >> 6] >> (f & 63) & 1)) return -1;
    uint32_t s = hash(k) & mask_;
    while (vals_[s] != 0) {
      if (keys_[s] == k) return int32_t(vals_[s] - 1);
      s = (s + 1) & mask_;
    }
    return -1;
  }

 private:
  static uint32_t hash(const Key& k) { return crc32c(&k, sizeof k, 0); }
  // A one-line filter in front of the table: a bit per key, by a multiplicative hash of the
  // key's words folded together. Most lookups of absent keys (the martian checks of a new
  // flow's ordinary addresses, one per address) end on that bit, without the CRC and the
  // probe; a set bit (a key, or one of its few aliases) takes the table as before.
  static uint32_t filter_bit(const Key& k) {
    static_assert(sizeof(Key) % 8 == 0, "keys are folded 8 bytes at a time");
    uint64_t x = 0;
    for (size_t o = 0; o < sizeof(Key); o += 8) {
      uint64_t w;
      std::memcpy(&w, reinterpret_cast<const uint8_t*>(&k) + o, 8);
      x ^= w;
    }
    return uint32_t((x * 0x9e3779b97f4a7c15ull) >> 55);  // 0..511
  }
  uint64_t filter_[8] = {};  // all clear until build(): find() then finds nothing
  uint32_t mask_ = 0;
  std::vector<Key> keys_;
  std::vector<uint32_t> vals_;
};

// A set of IPv4 and IPv6 prefixes, asked whether it holds an address: one FlatIndex of masked
// addresses per distinct prefix length and family, probed longest first. The block list and
// services' source ranges are a handful of distinct lengths, so a lookup is a few filter-bit
// tests. Immutable once built; pure C++ (tested without DPDK in tests/unit/snapshot).
class PrefixSet {
 public:
  // Prefixes as IpPrefix holds them (an IPv4 length counts IPv4 bits); host bits are ignored.
  void build(const std::vector<IpPrefix>& prefixes) {
    levels_.clear();
    std::vector<std::pair<uint8_t, std::vector<IpAddr>>> by_len;  // mapped length -> masked
    for (const IpPrefix& p : prefixes) {
      const bool v4 = p.addr.is_v4();
      // An IPv4 prefix covers its IPv4-mapped block (::ffff:0:0/96 + len): the two families
      // never overlap, as ::/0 must not hold IPv4 addresses.
      const uint8_t bits = uint8_t(v4 ? 96 + std::min<uint8_t>(p.len, 32)
                                      : std::min<uint8_t>(p.len, 128));
      auto it = std::find_if(by_len.begin(), by_len.end(), [&](const auto& l) {
        return l.first == bits && l.second.front().is_v4() == v4;
      });
      if (it == by_len.end()) {
        by_len.emplace_back(bits, std::vector<IpAddr>{});
        it = by_len.end() - 1;
      }
      it->second.push_back(masked(p.addr, bits));
    }
    std::sort(by_len.begin(), by_len.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    levels_.resize(by_len.size());
    for (size_t i = 0; i < by_len.size(); ++i) {
      levels_[i].bits = by_len[i].first;
      levels_[i].v4 = by_len[i].second.front().is_v4();
      levels_[i].index.build(by_len[i].second);
    }
  }
  bool empty() const { return levels_.empty(); }
  bool contains(const IpAddr& a) const {
    const bool v4 = a.is_v4();
    for (const Level& l : levels_) {
      if (l.v4 == v4 && l.index.find(masked(a, l.bits)) >= 0) return true;
    }
    return false;
  }

 private:
  // `a` with every bit past the first `bits` (of 128) cleared. An IPv4 /0 keeps the mapped
  // prefix, so it still names IPv4 only.
  static IpAddr masked(const IpAddr& a, uint8_t bits) {
    IpAddr m = a;
    for (uint32_t i = 0; i < 16; ++i) {
      const uint32_t lo = i * 8;
      if (bits >= lo + 8) continue;
      m.b[i] = bits <= lo ? 0 : uint8_t(m.b[i] & (0xff00u >> (bits - lo)));
    }
    return m;
  }
  struct Level {
    uint8_t bits = 0;  // of the 128-bit (IPv4-mapped) address
    bool v4 = false;
    FlatIndex<IpAddr> index;
  };
  std::vector<Level> levels_;  // longest prefix first
};

// Hashed as raw bytes, so it must have no implicit padding.
struct ServiceKey {
  IpAddr vip;
  uint16_t port_be = 0;
  uint8_t proto = 0;
  uint8_t pad0 = 0;
  uint32_t pad1 = 0;
  friend bool operator==(const ServiceKey&, const ServiceKey&) = default;
};
static_assert(sizeof(ServiceKey) == 24, "ServiceKey must be padding-free");

// A backend endpoint as it appears as the source of replies. Padding-free (hashed as bytes).
struct BackendKey {
  IpAddr address;
  uint16_t port_be = 0;
  uint8_t proto = 0;
  uint8_t pad0 = 0;
  uint32_t pad1 = 0;
  friend bool operator==(const BackendKey&, const BackendKey&) = default;
};
static_assert(sizeof(BackendKey) == 24, "BackendKey must be padding-free");

struct StaticNeighbor {
  IpAddr address;
  MacAddr mac;
  uint16_t port_index = 0;
};

// What an address is to the martian checks (docs/DATAPLANE.md, "Martians").
enum class AddrClass : uint8_t {
  kOther,
  kGateway,          // a port address, a VIP or a fullnat address
  kSubnetBroadcast,  // the broadcast address of an IPv4 port subnet
};

// A fullnat source address and its AddrTable id.
struct LocalNat {
  IpAddr address;
  uint32_t id = 0;
};

struct ConntrackTimeouts {
  uint32_t tcp_syn_ms = 30000;
  uint32_t tcp_established_ms = 7200000;
  uint32_t tcp_fin_ms = 60000;
  uint32_t tcp_time_wait_ms = 60000;
  uint32_t tcp_close_ms = 10000;  // after RST, like Linux nf_conntrack_tcp_timeout_close
  uint32_t udp_ms = 60000;
  uint32_t other_ms = 30000;
};

// Config values each worker keeps in its own state (flow table, proxy, TCP stack) and takes
// from the first snapshot of a new version it sees (Worker::load_snapshot): a config reload
// changes them with the next publish, without a lock and without a restart.
struct WorkerSettings {
  ConntrackTimeouts conntrack;
  uint32_t proxy_idle_timeout_ms = 0;  // [proxy] idle_timeout_s; 0 = none
  uint32_t tcp_time_wait_ms = 0;       // [proxy] time_wait_s
};

struct Snapshot {
  uint64_t version = 0;
  // Null: the workers keep what they have (snapshots built without a config, in tests).
  std::optional<WorkerSettings> settings;
  std::vector<SnapService> services;
  std::vector<SnapBackend> backends;
  // Owners of the services' lookup tables (SnapService::table). Workers read only the pointers;
  // the control thread drops these references when it frees the snapshot.
  std::vector<std::shared_ptr<const LbTable>> lb_tables;
  FlatIndex<ServiceKey> service_index;
  FlatIndex<BackendKey> backend_index;  // every service backend, by (address, port, proto)
  // For backend_index entry i: the services using it, backend_services[range.first ..+second].
  // (Entries are per backend of every service; only the first of equal keys is ever found.)
  std::vector<std::pair<uint32_t, uint32_t>> backend_service_ranges;
  std::vector<uint32_t> backend_services;
  // VIPs whose echo requests are forwarded: echo_index entry i -> services[echo_services[i]].
  FlatIndex<IpAddr> echo_index;
  std::vector<uint32_t> echo_services;
  // Fullnat source addresses ([fullnat] local_addresses) by family; answered like VIPs.
  std::vector<LocalNat> fullnat_v4, fullnat_v6;
  FlatIndex<IpAddr> fullnat_index;
  // Backends removed from services that reset their flows, or unhealthy in them (bit per stat
  // id); empty when none.
  std::vector<uint64_t> reset_stat_ids;
  // Backends removed from their service or unhealthy, whatever the service's
  // on_backend_removal: their UDP flows move to a live backend on their next client packet.
  // Empty when none.
  std::vector<uint64_t> stale_stat_ids;
  // [[deny]] sources: every packet from them is dropped (source_blocked). Empty: no check
  // beyond one predicted branch.
  PrefixSet blocked_sources;
  // Services' source_ranges (SnapService::source_ranges); any_source_ranges: not empty.
  std::vector<PrefixSet> source_ranges;
  bool any_source_ranges = false;
  std::vector<IpAddr> vips;        // distinct VIP addresses (answer ARP/NDP/echo)
  FlatIndex<IpAddr> vip_index;
  std::vector<IpAddr> local_addresses;  // every port address
  std::vector<uint16_t> local_address_port;
  FlatIndex<IpAddr> local_index;
  // The gateway's own addresses and its port subnets' broadcast addresses, so that the martian
  // checks cost one lookup per address checked (addr_classes: the class of each key).
  FlatIndex<IpAddr> addr_class_index;
  std::vector<AddrClass> addr_classes;
  rte_lpm* lpm4 = nullptr;   // == route_tables->lpm4, for workers
  rte_lpm6* lpm6 = nullptr;
  std::shared_ptr<const RouteTables> route_tables;  // owner of lpm4 / lpm6
  std::vector<NextHop> next_hops;
  std::vector<StaticNeighbor> neighbors;
  FlatIndex<IpAddr> neighbor_index;
  // SPIFFE identities of endpoints (SnapBackend::identity); [0] is "". Ids are stable for the
  // process (the builder's registry), shared by snapshots until a new identity appears.
  std::shared_ptr<const std::vector<std::string>> identities;
  // Per backend (same index as `backends`): its workload's selector policies, an index into
  // selector_lists ([0] is the empty list).
  std::vector<uint32_t> backend_selectors;
  std::vector<std::vector<std::string>> selector_lists;
  // Mesh workload addresses (backends with a SPIFFE identity; a static [[service.backend]] has
  // none): the pod addresses an HBONE authority may name, with any port.
  FlatIndex<IpAddr> workload_ip_index;     // -> index into workload_backends
  std::vector<uint32_t> workload_backends; // -> index into backends of the first such entry
  // Istio metric label sets (control/snapshot/istio_labels.h; ids stable for the process,
  // 0: unknown): per backend its workload's (same index as `backends`), per service its own
  // (same index as `services`).
  std::vector<uint32_t> backend_istio;
  std::vector<uint32_t> service_istio;
  // Mesh service FQDN -> indices into services (one per VIP and port).
  std::unordered_map<std::string, std::vector<uint32_t>> services_by_host;
  // The wildcard hostnames among those keys ("*.example.com", ServiceEntry style), for names no
  // key matches exactly: pattern i is the key host_pattern_names[i]. Null when there is none.
  std::shared_ptr<const names::NameMatcher> host_patterns;
  std::vector<std::string> host_pattern_names;
  // The mesh model's authorization policies (null: none), shared by every snapshot built from
  // the same model policies.
  std::shared_ptr<const policy::PolicySet> policies;
  // [[listener]]s; their VIP:ports are also entries of `services` (SnapService::listener).
  std::vector<SnapListener> listeners;
  std::vector<SnapDeny> deny_sets;
  // One Hyperscan scratch per worker, valid for every name and deny database of this snapshot
  // (allocated on the control thread, never on a worker); null when there is none.
  std::shared_ptr<const names::ScratchSet> name_scratch;
  // The [hbone] certificates as last read (null: none configured).
  std::shared_ptr<const std::vector<CertMeta>> certificates;
  // TLS contexts (one SSL_CTX each) of that certificate, one per worker, built on the control
  // thread; empty without a usable certificate. A connection keeps the context it started with
  // (shared_ptr) when a renewal publishes new ones.
  std::vector<std::shared_ptr<const tls::Context>> tls_contexts;

  // Worker `worker`'s Hyperscan scratch for this snapshot's databases (name_scratch), or
  // nullptr when it has none.
  hs_scratch* name_scratch_for(uint32_t worker) const;

  const std::string& identity_of(const SnapBackend& b) const {
    static const std::string kNone;
    return identities && b.identity < identities->size() ? (*identities)[b.identity] : kNone;
  }

  const SnapService* find_service(const IpAddr& vip, uint16_t port_be, uint8_t proto) const {
    const int32_t i = service_index.find(ServiceKey{vip, port_be, proto});
    return i < 0 ? nullptr : &services[uint32_t(i)];
  }
  bool is_vip(const IpAddr& a) const { return vip_index.find(a) >= 0; }
  // Index into backends of the first entry with this address:port:protocol, or -1.
  int32_t find_backend(const IpAddr& a, uint16_t port_be, uint8_t proto) const {
    return backend_index.find(BackendKey{a, port_be, proto});
  }
  // Index into backends of the mesh workload at this address (the entry with this port when
  // there is one, else the address's first), or -1 (no workload there).
  int32_t find_workload(const IpAddr& a, uint16_t port_be, uint8_t proto) const {
    const int32_t bi = find_backend(a, port_be, proto);
    if (bi >= 0 && backends[uint32_t(bi)].identity != 0) return bi;
    const int32_t wi = workload_ip_index.find(a);
    return wi < 0 ? -1 : int32_t(workload_backends[uint32_t(wi)]);
  }
  // The Istio workload label set of backend `b` (an element of `backends`), of the mesh
  // workload at address `a` (any port), and of service `s` (an element of `services`).
  uint32_t istio_backend(const SnapBackend& b) const {
    const size_t i = size_t(&b - backends.data());
    return i < backend_istio.size() ? backend_istio[i] : 0;
  }
  uint32_t istio_workload_at(const IpAddr& a) const {
    const int32_t bi = find_workload(a, 0, 0);
    return bi < 0 ? 0 : istio_backend(backends[uint32_t(bi)]);
  }
  uint32_t istio_service(const SnapService& s) const {
    const size_t i = size_t(&s - services.data());
    return i < service_istio.size() ? service_istio[i] : 0;
  }
  bool is_backend(const IpAddr& a, uint16_t port_be, uint8_t proto) const {
    return backend_index.find(BackendKey{a, port_be, proto}) >= 0;
  }
  // Indices (into services) of the services that have this backend; count 0 when none.
  const uint32_t* services_of_backend(const IpAddr& a, uint16_t port_be, uint8_t proto,
                                      uint32_t* count) const {
    const int32_t i = backend_index.find(BackendKey{a, port_be, proto});
    if (i < 0) {
      *count = 0;
      return nullptr;
    }
    *count = backend_service_ranges[uint32_t(i)].second;
    return &backend_services[backend_service_ranges[uint32_t(i)].first];
  }
  bool is_fullnat_address(const IpAddr& a) const { return fullnat_index.find(a) >= 0; }
  // The service that takes echo requests to `vip`, or nullptr (the gateway answers them).
  const SnapService* echo_service(const IpAddr& vip) const {
    const int32_t i = echo_index.find(vip);
    return i < 0 ? nullptr : &services[echo_services[uint32_t(i)]];
  }
  // The service `svc` is, for session affinity: a node_port entry's own service, so a client
  // keeps its backend whether it comes through the VIP or a port address.
  const SnapService& affinity_owner(const SnapService& svc) const {
    return svc.node_port_of ? services[svc.node_port_of - 1] : svc;
  }
  bool source_blocked(const IpAddr& a) const {
    return !blocked_sources.empty() && blocked_sources.contains(a);
  }
  // `svc` takes new flows from `a` (its source_ranges hold it, or it has none).
  bool source_allowed(const SnapService& svc, const IpAddr& a) const {
    return svc.source_ranges == 0 || source_ranges[svc.source_ranges - 1].contains(a);
  }
  static bool has_bit(const std::vector<uint64_t>& bits, uint32_t id) {
    const uint32_t w = id >> 6;
    return w < bits.size() && (bits[w] >> (id & 63) & 1);
  }
  bool reset_flows_of(uint32_t stat_id) const { return has_bit(reset_stat_ids, stat_id); }
  bool stale_backend(uint32_t stat_id) const { return has_bit(stale_stat_ids, stat_id); }
  // Port index owning local address `a`, or -1.
  int32_t local_port(const IpAddr& a) const {
    const int32_t i = local_index.find(a);
    return i < 0 ? -1 : local_address_port[uint32_t(i)];
  }
  AddrClass addr_class(const IpAddr& a) const {
    const int32_t i = addr_class_index.find(a);
    return i < 0 ? AddrClass::kOther : addr_classes[uint32_t(i)];
  }
  const StaticNeighbor* find_neighbor(const IpAddr& a) const {
    const int32_t i = neighbor_index.find(a);
    return i < 0 ? nullptr : &neighbors[uint32_t(i)];
  }
};

// Frees a snapshot, and the lookup and LPM tables no other snapshot (or the builder's cache)
// shares. Control thread, after a grace period.
void snapshot_free(Snapshot* s);

}  // namespace meshgate::dp
