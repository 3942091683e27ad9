#include "control/snapshot/listeners.h"

#include <arpa/inet.h>

#include <algorithm>

#include "control/names/deny_compile.h"
#include "control/names/name_compile.h"
#include "dataplane/names/deny.h"
#include "dataplane/names/name_matcher.h"
#include "dataplane/names/scratch_set.h"
#include "dataplane/packet/wire.h"

namespace meshgate::ctl {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x + '\n';
  return s;
}

// The service a route names: a [[service]] by name, else a mesh service by hostname at `port`.
int32_t route_target(const dp::Snapshot& snap,
                     const std::unordered_map<std::string, uint32_t>& by_name,
                     const std::string& service, uint16_t port) {
  if (auto it = by_name.find(service); it != by_name.end()) return int32_t(it->second);
  auto it = snap.services_by_host.find(service);
  if (it == snap.services_by_host.end()) return -1;
  for (uint32_t i : it->second) {
    const dp::SnapService& s = snap.services[i];
    if (s.proto == dp::kProtoTcp && ntohs(s.port_be) == port) return int32_t(i);
  }
  return -1;
}

// The matcher of `patterns` from the cache, compiled when it is not there; `what` names them in
// an error (the config validator compiles the same patterns: a failure here is a mesh's).
Result<std::shared_ptr<const dp::names::NameMatcher>> cached_matcher(
    const std::vector<std::string>& patterns, const std::string& what, NameCache& cache) {
  const std::string key = joined(patterns);
  auto it = cache.matchers.find(key);
  if (it == cache.matchers.end()) {
    auto m = compile_names(patterns);
    if (!m) {
      const uint32_t i = m.error().index;
      return Error{what + (i < patterns.size() ? " (" + patterns[i] + ")" : "") + ": " +
                   m.error().message};
    }
    it = cache.matchers.emplace(key, std::move(m.value())).first;
  }
  cache.used.insert(key);
  return it->second;
}

}  // namespace

Result<uint32_t> add_deny_set(const std::vector<std::string>& patterns, uint32_t inspect_bytes,
                              const std::string& owner, NameCache& cache, dp::Snapshot* snap) {
  if (patterns.empty()) return 0u;
  const std::string key = joined(patterns);
  auto it = cache.deny_sets.find(key);
  if (it == cache.deny_sets.end()) {
    auto set = compile_deny(patterns);
    if (!set) {
      // The config validator compiles the same patterns: only a mesh resource gets here.
      const uint32_t i = set.error().index;
      return Error{owner + ": deny pattern" +
                   (i < patterns.size() ? " " + std::to_string(i) + " (" + patterns[i] + ")" : "") +
                   ": " + set.error().message};
    }
    it = cache.deny_sets.emplace(key, std::move(set.value())).first;
  }
  cache.used.insert(key);
  dp::SnapDeny d;
  d.set = it->second;
  d.inspect_bytes = inspect_bytes;
  for (const std::string& p : patterns) d.stat_ids.push_back(cache.deny_slots.id_for(owner + '\n' + p));
  snap->deny_sets.push_back(std::move(d));
  return uint32_t(snap->deny_sets.size());
}

Result<bool> add_listeners(const Config& cfg, NameCache& cache, AddrRegistry& addrs,
                           dp::Snapshot* snap, std::vector<dp::ServiceKey>& keys) {
  if (cfg.listeners.empty()) return true;
  std::unordered_map<std::string, uint32_t> by_name;
  for (uint32_t i = 0; i < snap->services.size(); ++i) {
    if (snap->services[i].hostname.empty()) by_name.emplace(snap->services[i].name, i);
  }
  for (const ListenerConfig& lc : cfg.listeners) {
    dp::SnapListener l;
    l.name = lc.name;
    l.source = lc.match == NameMatch::kHost ? dp::NameSource::kHost : dp::NameSource::kSni;
    l.peek_bytes = lc.peek_bytes;
    l.peek_timeout_ms = lc.peek_timeout_ms;
    l.stat_id = cache.listener_slots.id_for(lc.name);
    std::vector<std::string> patterns;
    for (uint32_t r = 0; r < lc.routes.size(); ++r) {
      const ListenerRouteConfig& rc = lc.routes[r];
      for (const std::string& h : rc.hostnames) {
        patterns.push_back(h);
        l.pattern_route.push_back(r);
      }
      dp::SnapRoute sr;
      sr.service = route_target(*snap, by_name, rc.service, rc.port ? rc.port : lc.port);
      sr.stat_id = cache.route_slots.id_for(lc.name + '\n' + std::to_string(r));
      l.routes.push_back(sr);
    }
    if (!lc.default_service.empty()) {
      dp::SnapRoute sr;
      sr.service = route_target(*snap, by_name, lc.default_service, lc.port);
      sr.stat_id = cache.route_slots.id_for(lc.name + "\ndefault");
      l.default_route = int32_t(l.routes.size());
      l.routes.push_back(sr);
    }
    if (!patterns.empty()) {
      auto m = cached_matcher(patterns, "listener " + lc.name + ": hostnames", cache);
      if (!m) return m.error();
      l.names = std::move(m.value());
    }
    std::vector<std::string> deny;
    for (const DenyConfig& d : lc.deny) deny.push_back(d.pattern);
    auto di = add_deny_set(deny, lc.inspect_bytes, "listener/" + lc.name, cache, snap);
    if (!di) return di.error();
    l.deny = di.value();
    snap->listeners.push_back(std::move(l));

    // The VIP:port, as a proxy-mode entry without backends: steering, ARP / ND and the proxy's
    // listening follow services.
    dp::SnapService s;
    s.vip = lc.vip;
    s.vip_id = addrs.id_for(lc.vip);
    if (s.vip_id == 0) return Error{"listener " + lc.name + ": address table full"};
    s.port_be = htons(lc.port);
    s.proto = dp::kProtoTcp;
    s.mode = dp::Mode::kProxy;
    s.first_backend = uint32_t(snap->backends.size());
    s.name = lc.name;
    s.listener = uint32_t(snap->listeners.size());
    keys.push_back(dp::ServiceKey{s.vip, s.port_be, s.proto});
    snap->services.push_back(std::move(s));
  }
  return true;
}

Result<bool> add_host_patterns(NameCache& cache, dp::Snapshot* snap) {
  std::vector<std::string> patterns;
  for (const auto& [host, services] : snap->services_by_host) {
    if (host.starts_with("*.") && check_name_pattern(host).empty()) patterns.push_back(host);
  }
  if (patterns.empty()) return true;
  std::sort(patterns.begin(), patterns.end());  // the map's order is not the cache key's
  auto m = cached_matcher(patterns, "mesh wildcard hostnames", cache);
  if (!m) return m.error();
  snap->host_patterns = std::move(m.value());
  snap->host_pattern_names = std::move(patterns);
  return true;
}

namespace {

// cached_name_keys' tags: a hostname set and a deny set of the same patterns are two databases.
constexpr char kMatcherTag = 'm';
constexpr char kDenyTag = 'd';

// What a reload may compile: each listener's hostname set and deny set, each service's deny set,
// as add_listeners and add_deny_set will ask for them.
struct NameSet {
  std::vector<std::string> patterns;
  bool deny = false;
};

std::vector<NameSet> name_sets(const Config& cfg) {
  std::vector<NameSet> out;
  auto add_deny = [&](const std::vector<DenyConfig>& deny) {
    NameSet d{{}, true};
    for (const DenyConfig& x : deny) d.patterns.push_back(x.pattern);
    if (!d.patterns.empty()) out.push_back(std::move(d));
  };
  for (const ListenerConfig& lc : cfg.listeners) {
    NameSet n;
    for (const ListenerRouteConfig& rc : lc.routes) {
      n.patterns.insert(n.patterns.end(), rc.hostnames.begin(), rc.hostnames.end());
    }
    if (!n.patterns.empty()) out.push_back(std::move(n));
    add_deny(lc.deny);
  }
  for (const ServiceConfig& sc : cfg.services) add_deny(sc.deny);
  return out;
}

}  // namespace

CompiledNames compile_listener_names(const Config& cfg,
                                     const std::unordered_set<std::string>& have) {
  CompiledNames c;
  for (const NameSet& n : name_sets(cfg)) {
    std::string key = joined(n.patterns);
    if (have.contains((n.deny ? kDenyTag : kMatcherTag) + key)) continue;
    if (n.deny) {
      if (c.deny_sets.contains(key)) continue;
      if (auto d = compile_deny(n.patterns)) c.deny_sets.emplace(std::move(key), std::move(d.value()));
    } else {
      if (c.matchers.contains(key)) continue;
      if (auto m = compile_names(n.patterns)) c.matchers.emplace(std::move(key), std::move(m.value()));
    }
  }
  return c;
}

std::unordered_set<std::string> cached_name_keys(const NameCache& cache) {
  std::unordered_set<std::string> keys;
  for (const auto& kv : cache.matchers) keys.insert(kMatcherTag + kv.first);
  for (const auto& kv : cache.deny_sets) keys.insert(kDenyTag + kv.first);
  return keys;
}

void adopt_names(NameCache& cache, CompiledNames c) {
  for (auto& kv : c.matchers) cache.matchers.try_emplace(kv.first, std::move(kv.second));
  for (auto& kv : c.deny_sets) cache.deny_sets.try_emplace(kv.first, std::move(kv.second));
}

Result<bool> finish_names(uint32_t workers, NameCache& cache, dp::Snapshot* snap) {
  std::vector<const hs_database_t*> dbs;
  if (snap->host_patterns && snap->host_patterns->database()) {
    dbs.push_back(snap->host_patterns->database());
  }
  for (const dp::SnapListener& l : snap->listeners) {
    if (l.names && l.names->database()) dbs.push_back(l.names->database());
  }
  for (const dp::SnapDeny& d : snap->deny_sets) dbs.push_back(d.set->database());
  // Compared by address: the last build's databases are alive (in the cache and the published
  // snapshot) until after this comparison, so no new database can have one of their addresses.
  if (dbs.empty()) {
    cache.scratch.reset();
  } else if (dbs != cache.scratch_dbs || !cache.scratch) {
    auto s = make_scratch_set(dbs, workers);
    if (!s) return s.error();
    cache.scratch = std::move(s.value());
  }
  cache.scratch_dbs = std::move(dbs);
  snap->name_scratch = cache.scratch;
  std::erase_if(cache.matchers, [&](const auto& kv) { return !cache.used.contains(kv.first); });
  std::erase_if(cache.deny_sets, [&](const auto& kv) { return !cache.used.contains(kv.first); });
  cache.used.clear();
  return true;
}

}  // namespace meshgate::ctl
