// Builds the immutable dataplane Snapshot: services from ServiceSpecs (static and mesh), and
// routes, neighbors and local addresses from the configuration. Control thread, after EAL init
// (LPM tables live in DPDK memory).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/common/result.h"
#include "control/config/config.h"
#include "control/snapshot/addr_registry.h"
#include "control/snapshot/build_pool.h"
#include "control/snapshot/listeners.h"
#include "control/snapshot/model.h"
#include "control/snapshot/stat_registry.h"
#include "control/snapshot/maglev.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/worker/port.h"

namespace meshgate::ctl {

// What one build leaves to the next, so that a rebuild after a small change does the work of
// the change only. Everything here is immutable once built and shared by reference, so reuse
// gives the same snapshot a build from scratch would (tests/unit/control/snapshot/snapshot_builder_test.cc).
struct BuildCache {
  struct Service {
    std::vector<LbBackend> backends;  // as given to lb_build_table: order and weights matter
    std::vector<uint32_t> stat_ids;       // per backend
    std::vector<uint32_t> identity_ids;   // per backend: IdentityRegistry ids
    std::vector<dp::Tunnel> tunnels;      // per backend
    IpAddr vip;                           // and its AddrRegistry id (0: not looked up yet)
    uint32_t vip_id = 0;
    uint32_t table_size = 0;
    bool built = false;                        // `table` is lb_build_table(backends, table_size)
    std::shared_ptr<const dp::LbTable> table;  // null when no backend is eligible
    uint64_t used = 0;                         // generation of the last build that had it
    // Some backend of an earlier build is no longer one of `backends` (its flows may live on).
    bool lost_backends = false;
  };
  // The services of the last build, by ServiceSpec::name.
  std::unordered_map<std::string, Service> services;
  // The same entries in the last build's service order: the next build, given the services in
  // the same order, finds each by position and a name compare instead of a hash lookup.
  std::vector<std::pair<const std::string, Service>*> order;
  uint64_t generation = 0;
  // The last route list (prefixes as added to the LPM tables, next hops) and its tables.
  std::vector<std::pair<IpPrefix, uint32_t>> routes;
  std::vector<dp::NextHop> next_hops;
  std::shared_ptr<const dp::RouteTables> route_tables;
};

// What the last build did, for logs and the benchmark.
struct BuildStats {
  size_t tables_built = 0;
  size_t tables_reused = 0;
  bool routes_reused = false;
};

// SPIFFE identities of endpoints by id (0 = none). Ids are never reused, so a snapshot's list is
// valid for any later id lookup; the list is copied into a new shared vector only when a build
// added an identity.
class IdentityRegistry {
 public:
  // Consecutive endpoints mostly share an identity (a service's pods run as one service
  // account): the last id found is compared first.
  uint32_t id_for(const std::string& identity);
  const std::string& name(uint32_t id) const { return names_[id]; }
  // The list as of now, shared with earlier snapshots when nothing was added since.
  std::shared_ptr<const std::vector<std::string>> table();

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_{""};
  uint32_t last_ = 0;
  std::shared_ptr<const std::vector<std::string>> published_;
};

// Ids that outlive snapshots (backend counter slots, the addresses flows refer to, endpoint
// identities), the build cache, the builder's helper threads, and what every snapshot carries
// besides services and routes: the mesh's compiled authorization policies and the certificate
// metadata, set by the runtime before a build. Control thread only.
struct Registries {
  StatRegistry stats;
  AddrRegistry addrs;
  IdentityRegistry identities;
  IstioLabelRegistry istio;  // Istio metric label sets (Snapshot::backend_istio, service_istio)
  BuildCache cache;
  NameCache names;  // listeners, deny sets, Hyperscan scratches
  // Maglev fills of changed services are split over pool.threads() threads (the control thread
  // and the helpers); not started: serial. The tables are the same either way.
  BuildPool pool;
  BuildStats last_build;
  std::shared_ptr<const dp::policy::PolicySet> policies;
  std::shared_ptr<const std::vector<dp::CertMeta>> certificates;
  std::vector<std::shared_ptr<const dp::tls::Context>> tls_contexts;  // one per worker
};

// The settings of `cfg` that workers hold themselves (timeouts): every snapshot carries them, so
// that a config reload reaches the workers with its first publish (dp::WorkerSettings).
dp::WorkerSettings worker_settings(const Config& cfg);

// Builds a snapshot of `services` with the routes and neighbors of `cfg` and `ports`, and
// worker_settings(cfg). Reuses
// from `reg.cache` the lookup tables of services whose backends, weights and table size did not
// change and the LPM tables when the routes did not; on success the cache holds this build.
// A service without a table_size gets lb_auto_table_size(). The tables to fill are split
// into contiguous runs of services over `reg.pool`; the snapshot does not depend on how.
Result<dp::Snapshot*> build_snapshot(const Config& cfg, const std::vector<ServiceSpec>& services,
                                     const std::vector<dp::PortRuntime>& ports, Registries& reg,
                                     uint64_t version);

}  // namespace meshgate::ctl
