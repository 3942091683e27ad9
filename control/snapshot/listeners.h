// The name-routing part of a snapshot (docs/NAMES.md): [[listener]]s with their compiled
// hostname matchers and routes, the deny signature sets of listeners and proxy services, and
// the Hyperscan scratch each worker uses with them. Compiling is the expensive part, so
// databases are cached by their pattern lists and reused while those do not change; the
// scratch set is remade only when the set of databases changes. Control thread only.
#pragma once

#include <hs/hs_common.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "control/common/result.h"
#include "control/config/config.h"
#include "control/snapshot/addr_registry.h"
#include "control/snapshot/stat_registry.h"
#include "dataplane/common/limits.h"
#include "dataplane/snapshot/snapshot.h"

namespace meshgate::ctl {

struct NameCache {
  SlotRegistry listener_slots{dp::kMaxListenerStats};
  SlotRegistry route_slots{dp::kMaxRouteStats};   // key: listener '\n' route index
  SlotRegistry deny_slots{dp::kMaxDenyStats};     // key: owner '\n' pattern
  // By pattern list (joined with '\n'): the last build's databases.
  std::unordered_map<std::string, std::shared_ptr<const dp::names::NameMatcher>> matchers;
  std::unordered_map<std::string, std::shared_ptr<const dp::names::DenySet>> deny_sets;
  // Keys of the two maps used by the build in progress (the rest is dropped at its end).
  std::unordered_set<std::string> used;
  // The databases `scratch` was made for, in snapshot order.
  std::vector<const hs_database_t*> scratch_dbs;
  std::shared_ptr<const dp::names::ScratchSet> scratch;
};

// The deny set of `patterns` for `owner` ("listener/NAME" or "service/NAME"), appended to
// snap->deny_sets; returns 1 + its index (0 when `patterns` is empty).
Result<uint32_t> add_deny_set(const std::vector<std::string>& patterns, uint32_t inspect_bytes,
                              const std::string& owner, NameCache& cache, dp::Snapshot* snap);

// Appends cfg's listeners to snap->listeners, and their VIP:ports to snap->services and `keys`
// (the service index keys). Call after the services are in `snap` (and services_by_host), before
// its VIP and service indexes are built. Route targets resolve against the snapshot's services:
// a [[service]] by name, a mesh service by hostname and port.
Result<bool> add_listeners(const Config& cfg, NameCache& cache, AddrRegistry& addrs,
                           dp::Snapshot* snap, std::vector<dp::ServiceKey>& keys);

// The matcher of the mesh's wildcard service hostnames (keys of snap->services_by_host with a
// leading "*."), for HBONE authorities: snap->host_patterns and host_pattern_names. Hostnames
// that are not valid patterns were rejected with their mesh resource; any left are skipped.
Result<bool> add_host_patterns(NameCache& cache, dp::Snapshot* snap);

// Databases compiled ahead of a build, by NameCache key: what a config reload compiles off the
// control thread (compile_listener_names) so that the build that follows on it finds them cached
// (adopt_names) and compiles nothing.
struct CompiledNames {
  std::unordered_map<std::string, std::shared_ptr<const dp::names::NameMatcher>> matchers;
  std::unordered_map<std::string, std::shared_ptr<const dp::names::DenySet>> deny_sets;
};

// Compiles the hostname and deny sets of cfg's listeners and services that `have`
// (cached_name_keys when the job was handed out) lacks. Sets that do not compile are left out:
// the build reports them. Pure, for any thread: it reads `cfg` and `have` only.
CompiledNames compile_listener_names(const Config& cfg, const std::unordered_set<std::string>& have);

// What `cache` holds now, for compile_listener_names. Control thread.
std::unordered_set<std::string> cached_name_keys(const NameCache& cache);

// Puts `c`'s databases into `cache` where it has none under their key (the next build uses
// them, finish_names drops those it did not). Control thread.
void adopt_names(NameCache& cache, CompiledNames c);

// Gives `snap` the scratch set for its databases (reused from the last build when they are the
// same), one scratch per worker. Call last; drops cached databases no longer used.
Result<bool> finish_names(uint32_t workers, NameCache& cache, dp::Snapshot* snap);

}  // namespace meshgate::ctl
