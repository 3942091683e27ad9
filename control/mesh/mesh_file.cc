// Mesh file parser: one pass over the TOML tree that types and ranges every value (with its
// position), then the checks across tables (unique keys, references to services).
#include "control/mesh/mesh_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <tuple>

#include "control/common/edit_distance.h"
#include "control/common/file_read.h"
#include "control/names/name_compile.h"

namespace meshgate::ctl::mesh {
namespace {

using Keys = std::span<const std::string_view>;

constexpr std::string_view kRootKeys[] = {"mesh_service", "workload", "policy"};
constexpr std::string_view kServiceKeys[] = {"name",  "namespace",         "hostname",
                                             "vips",  "network",           "ports",
                                             "subject_alt_names", "load_balancing"};
constexpr std::string_view kLbKeys[] = {"mode", "routing_preference", "health_policy"};
constexpr std::string_view kPortKeys[] = {"service_port", "target_port", "app_protocol"};
constexpr std::string_view kWorkloadKeys[] = {
    "uid",      "name",        "namespace",  "addresses",      "hostname",
    "network",  "tunnel",      "service_account", "trust_domain", "services",
    "capacity", "status",      "node",       "cluster_id",     "locality",
    "authorization_policies",  "canonical_name", "canonical_revision", "workload_name"};
constexpr std::string_view kPolicyKeys[] = {"name", "namespace", "scope", "action", "dry_run",
                                            "group"};
constexpr std::string_view kGroupKeys[] = {"clause"};
constexpr std::string_view kClauseKeys[] = {"match"};
constexpr std::string_view kMatchKeys[] = {
    "namespaces",      "not_namespaces",      "principals",          "not_principals",
    "source_ips",      "not_source_ips",      "destination_ips",     "not_destination_ips",
    "destination_ports", "not_destination_ports", "service_accounts", "not_service_accounts"};

template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};
constexpr EnumName<Tunnel> kTunnels[] = {{"none", Tunnel::kNone}, {"hbone", Tunnel::kHbone}};
constexpr EnumName<LbMode> kLbModes[] = {{"unspecified", LbMode::kUnspecified},
                                         {"strict", LbMode::kStrict},
                                         {"failover", LbMode::kFailover},
                                         {"passthrough", LbMode::kPassthrough}};
constexpr EnumName<LbScope> kScopes[] = {{"region", LbScope::kRegion},   {"zone", LbScope::kZone},
                                         {"subzone", LbScope::kSubzone}, {"node", LbScope::kNode},
                                         {"cluster", LbScope::kCluster},
                                         {"network", LbScope::kNetwork}};
constexpr EnumName<HealthPolicy> kHealthPolicies[] = {{"only_healthy", HealthPolicy::kOnlyHealthy},
                                                      {"allow_all", HealthPolicy::kAllowAll}};
constexpr EnumName<bool> kStatuses[] = {{"healthy", true}, {"unhealthy", false}};
constexpr EnumName<uint8_t> kAppProtocols[] = {{"unknown", 0}, {"http11", 1}, {"http2", 2},
                                               {"grpc", 3},    {"tcp", 4},    {"tls", 5}};
constexpr EnumName<PolicyScope> kPolicyScopes[] = {{"global", PolicyScope::kGlobal},
                                                   {"namespace", PolicyScope::kNamespace},
                                                   {"workload", PolicyScope::kWorkloadSelector}};
constexpr EnumName<PolicyAction> kActions[] = {{"allow", PolicyAction::kAllow},
                                               {"deny", PolicyAction::kDeny}};

std::string join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}
std::string indexed(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

std::string describe(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "\"" + std::string(n.as_string()->get()) + "\"";
    case toml::node_type::integer: return std::to_string(n.as_integer()->get());
    case toml::node_type::floating_point: {
      std::ostringstream os;
      os << *n.as_floating_point();
      return os.str();
    }
    case toml::node_type::boolean: return n.as_boolean()->get() ? "true" : "false";
    case toml::node_type::array: return n.is_array_of_tables() ? "an array of tables" : "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

template <typename Range>
std::string did_you_mean(std::string_view got, const Range& candidates) {
  const size_t max_d = got.size() <= 4 ? 1 : 2;
  std::string best;
  size_t best_d = max_d + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(got, c);
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

class Parser {
 public:
  Parser(std::string file, const MeshFileOptions& opt) : file_(std::move(file)), opt_(opt) {}

  MeshModel parse(const toml::table& root);
  std::vector<ConfigError>& errors() { return errors_; }

 private:
  SourcePos pos(const toml::node& n) const {
    return {file_, n.source().begin.line, n.source().begin.column};
  }
  void fail(const toml::node& n, const std::string& key, std::string msg) {
    errors_.push_back({pos(n), key, std::move(msg)});
  }

  void check_keys(const toml::table& t, const std::string& path, Keys valid) {
    for (auto&& [k, v] : t) {
      const std::string_view name = k.str();
      if (std::find(valid.begin(), valid.end(), name) != valid.end()) continue;
      std::string hint = did_you_mean(name, valid);
      if (hint.empty()) {
        hint = " (valid keys:";
        for (auto x : valid) hint += " " + std::string(x);
        hint += ")";
      }
      errors_.push_back({SourcePos{file_, k.source().begin.line, k.source().begin.column},
                         join(path, echoed_key(name)),
                         std::string(v.is_table() || v.is_array_of_tables() ? "unknown table"
                                                                             : "unknown key") +
                             hint});
    }
  }

  bool string(const toml::table& t, const std::string& path, std::string_view key,
              std::string& out, bool required = false) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(t, join(path, key), "missing required key (expected a string)");
      return false;
    }
    if (const auto* s = n->as_string()) {
      out = s->get();
      if (required && out.empty()) {
        fail(*n, join(path, key), "expected a non-empty string, got \"\"");
        return false;
      }
      return true;
    }
    fail(*n, join(path, key), "expected a string, got " + describe(*n));
    return false;
  }

  template <typename T>
  bool integer(const toml::node& n, const std::string& key, int64_t lo, int64_t hi, T& out) {
    const auto* v = n.as_integer();
    if (!v || v->get() < lo || v->get() > hi) {
      fail(n, key, "expected an integer " + std::to_string(lo) + ".." + std::to_string(hi) +
                       ", got " + describe(n));
      return false;
    }
    out = T(v->get());
    return true;
  }

  template <typename T>
  void integer_key(const toml::table& t, const std::string& path, std::string_view key,
                   int64_t lo, int64_t hi, T& out, bool required = false) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) {
        fail(t, join(path, key), "missing required key (expected an integer " +
                                     std::to_string(lo) + ".." + std::to_string(hi) + ")");
      }
      return;
    }
    integer(*n, join(path, key), lo, hi, out);
  }

  void boolean(const toml::table& t, const std::string& path, std::string_view key, bool& out) {
    const toml::node* n = t.get(key);
    if (!n) return;
    if (const auto* b = n->as_boolean()) {
      out = b->get();
    } else {
      fail(*n, join(path, key), "expected true or false, got " + describe(*n));
    }
  }

  template <typename E, size_t N>
  bool enum_value(const toml::node& n, const std::string& key, const EnumName<E> (&names)[N],
                  E& out) {
    std::string expected = "one of";
    std::vector<std::string_view> all;
    for (const auto& e : names) {
      expected += std::string(all.empty() ? " " : ", ") + std::string(e.name);
      all.push_back(e.name);
    }
    if (const auto* s = n.as_string()) {
      for (const auto& e : names) {
        if (e.name == s->get()) {
          out = e.value;
          return true;
        }
      }
      fail(n, key, "expected " + expected + ", got " + describe(n) + did_you_mean(s->get(), all));
      return false;
    }
    fail(n, key, "expected " + expected + ", got " + describe(n));
    return false;
  }

  template <typename E, size_t N>
  void enum_key(const toml::table& t, const std::string& path, std::string_view key,
                const EnumName<E> (&names)[N], E& out) {
    if (const toml::node* n = t.get(key)) enum_value(*n, join(path, key), names, out);
  }

  // An array at `key`; calls fn(element, "key[i]") for each element.
  void array(const toml::table& t, const std::string& path, std::string_view key,
             const std::string& what,
             const std::function<void(const toml::node&, const std::string&)>& fn) {
    const toml::node* n = t.get(key);
    if (!n) return;
    const auto* arr = n->as_array();
    if (!arr) {
      fail(*n, join(path, key), "expected an array of " + what + ", got " + describe(*n));
      return;
    }
    for (size_t i = 0; i < arr->size(); ++i) fn(*arr->get(i), indexed(join(path, key), i));
  }

  void string_array(const toml::table& t, const std::string& path, std::string_view key,
                    std::vector<std::string>& out) {
    array(t, path, key, "strings", [&](const toml::node& e, const std::string& k) {
      if (const auto* s = e.as_string()) {
        out.push_back(s->get());
      } else {
        fail(e, k, "expected a string, got " + describe(e));
      }
    });
  }

  void prefix_array(const toml::table& t, const std::string& path, std::string_view key,
                    std::vector<IpPrefix>& out) {
    array(t, path, key, "address or \"address/length\" strings",
          [&](const toml::node& e, const std::string& k) {
            const auto* s = e.as_string();
            std::optional<IpPrefix> p;
            if (s) p = IpPrefix::parse(s->get());
            if (p) {
              out.push_back(*p);
            } else {
              fail(e, k, "expected an address or \"address/length\" string, got " + describe(e));
            }
          });
  }

  void table_array(const toml::table& parent, const std::string& path, std::string_view key,
                   const std::function<void(const toml::table&, const std::string&)>& fn) {
    const toml::node* n = parent.get(key);
    if (!n) return;
    const auto* arr = n->as_array();
    if (arr && arr->empty()) return;
    if (!arr || !arr->is_array_of_tables()) {
      fail(*n, join(path, key), "expected an array of tables ([[" + std::string(key) +
                                    "]]), got " + describe(*n));
      return;
    }
    for (size_t i = 0; i < arr->size(); ++i) {
      fn(*arr->get(i)->as_table(), indexed(join(path, key), i));
    }
  }

  std::vector<PortMapping> ports(const toml::node& n, const std::string& key);
  void parse_service(const toml::table& t, const std::string& p, Service& s);
  void parse_workload(const toml::table& t, const std::string& p, Workload& w);
  void parse_policy(const toml::table& t, const std::string& p, Policy& pol);
  void parse_match(const toml::table& t, const std::string& p, PolicyMatch& m);

  std::string file_;
  MeshFileOptions opt_;
  std::vector<ConfigError> errors_;
};

std::vector<PortMapping> Parser::ports(const toml::node& n, const std::string& key) {
  std::vector<PortMapping> out;
  const auto* arr = n.as_array();
  if (!arr) {
    fail(n, key, "expected an array of { service_port, target_port } tables, got " + describe(n));
    return out;
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    const std::string k = indexed(key, i);
    const auto* t = e.as_table();
    if (!t) {
      fail(e, k, "expected a { service_port, target_port } table, got " + describe(e));
      continue;
    }
    check_keys(*t, k, kPortKeys);
    PortMapping pm;
    integer_key(*t, k, "service_port", 1, 65535, pm.service_port, true);
    integer_key(*t, k, "target_port", 0, 65535, pm.target_port);
    enum_key(*t, k, "app_protocol", kAppProtocols, pm.app_protocol);
    out.push_back(pm);
  }
  return out;
}

void Parser::parse_service(const toml::table& t, const std::string& p, Service& s) {
  check_keys(t, p, kServiceKeys);
  string(t, p, "name", s.name);
  string(t, p, "namespace", s.ns, true);
  string(t, p, "hostname", s.hostname, true);
  if (s.hostname.find('*') != std::string::npos) {
    // A ServiceEntry-style wildcard host: HBONE authorities match it (docs/NAMES.md).
    const std::string why = check_name_pattern(s.hostname);
    if (!why.empty() || s.hostname[0] == '~') {
      fail(*t.get("hostname"), p + ".hostname",
           "not a hostname or wildcard hostname (\"*.example.com\"): " + describe(*t.get("hostname")) +
               (why.empty() ? "" : " (" + why + ")"));
    }
  }
  if (s.name.empty()) s.name = s.hostname.substr(0, s.hostname.find('.'));
  std::string network;
  string(t, p, "network", network);
  array(t, p, "vips", "address strings", [&](const toml::node& e, const std::string& k) {
    const auto* str = e.as_string();
    std::optional<IpPrefix> pre;
    if (str) pre = IpPrefix::parse(str->get());
    if (!pre) {
      fail(e, k, "expected an IPv4/IPv6 address string, got " + describe(e));
      return;
    }
    NetworkAddress na{network, pre->addr, std::nullopt};
    if (str->get().find('/') != std::string::npos) na.length = pre->len;
    s.vips.push_back(na);
  });
  if (const toml::node* n = t.get("ports")) s.ports = ports(*n, join(p, "ports"));
  string_array(t, p, "subject_alt_names", s.subject_alt_names);
  if (const toml::node* n = t.get("load_balancing")) {
    const std::string k = join(p, "load_balancing");
    if (const auto* lt = n->as_table()) {
      check_keys(*lt, k, kLbKeys);
      enum_key(*lt, k, "mode", kLbModes, s.load_balancing.mode);
      enum_key(*lt, k, "health_policy", kHealthPolicies, s.load_balancing.health_policy);
      array(*lt, k, "routing_preference", "scope names",
            [&](const toml::node& e, const std::string& ek) {
              LbScope sc{};
              if (enum_value(e, ek, kScopes, sc)) s.load_balancing.routing_preference.push_back(sc);
            });
    } else {
      fail(*n, k, "expected a table { mode, routing_preference, health_policy }, got " +
                      describe(*n));
    }
  }
}

void Parser::parse_workload(const toml::table& t, const std::string& p, Workload& w) {
  check_keys(t, p, kWorkloadKeys);
  string(t, p, "uid", w.uid, true);
  string(t, p, "name", w.name);
  string(t, p, "namespace", w.ns, true);
  array(t, p, "addresses", "address strings", [&](const toml::node& e, const std::string& k) {
    const auto* s = e.as_string();
    std::optional<IpAddr> a;
    if (s) a = IpAddr::parse(s->get());
    if (a) {
      w.addresses.push_back(*a);
    } else {
      fail(e, k, "expected an IPv4/IPv6 address string, got " + describe(e));
    }
  });
  string(t, p, "hostname", w.hostname);
  string(t, p, "network", w.network);
  if (const toml::node* n = t.get("tunnel")) {
    const std::string k = join(p, "tunnel");
    const auto* s = n->as_string();
    if (s && s->get() == "legacy_istio_mtls") {
      if (opt_.allow_legacy_tunnel) {
        w.tunnel = Tunnel::kLegacyIstioMtls;
      } else {
        fail(*n, k, "\"legacy_istio_mtls\" is not supported (ztunnel does not support sending "
                    "legacy Istio mTLS); expected one of none, hbone");
      }
    } else {
      enum_value(*n, k, kTunnels, w.tunnel);
    }
  }
  string(t, p, "service_account", w.service_account);
  string(t, p, "trust_domain", w.trust_domain);
  if (w.service_account.empty()) w.service_account = kDefaultServiceAccount;
  if (w.trust_domain.empty()) w.trust_domain = kDefaultTrustDomain;
  if (const toml::node* n = t.get("services")) {
    const std::string k = join(p, "services");
    if (const auto* st = n->as_table()) {
      for (auto&& [name, v] : *st) {
        const std::string sk = k + ".\"" + std::string(name.str()) + "\"";
        w.services[std::string(name.str())] = ports(v, sk);
      }
    } else {
      fail(*n, k, "expected a table { \"namespace/hostname\" = [ports...] }, got " +
                      describe(*n));
    }
  }
  integer_key(t, p, "capacity", 0, 65535, w.capacity);
  enum_key(t, p, "status", kStatuses, w.healthy);
  string(t, p, "node", w.node);
  string(t, p, "cluster_id", w.cluster_id);
  if (const toml::node* n = t.get("locality")) {
    const auto* s = n->as_string();
    std::optional<Locality> l;
    if (s) l = Locality::parse(s->get());
    if (l) {
      w.locality = *l;
    } else {
      fail(*n, join(p, "locality"), "expected \"region/zone/subzone\", got " + describe(*n));
    }
  }
  string_array(t, p, "authorization_policies", w.authorization_policies);
  string(t, p, "canonical_name", w.canonical_name);
  string(t, p, "canonical_revision", w.canonical_revision);
  string(t, p, "workload_name", w.workload_name);
}

void Parser::parse_match(const toml::table& t, const std::string& p, PolicyMatch& m) {
  check_keys(t, p, kMatchKeys);
  auto patterns = [&](std::string_view key, std::vector<StringMatch>& out) {
    std::vector<std::string> v;
    string_array(t, p, key, v);
    for (const auto& s : v) out.push_back(StringMatch::from_pattern(s));
  };
  patterns("namespaces", m.namespaces);
  patterns("not_namespaces", m.not_namespaces);
  patterns("principals", m.principals);
  patterns("not_principals", m.not_principals);
  prefix_array(t, p, "source_ips", m.source_ips);
  prefix_array(t, p, "not_source_ips", m.not_source_ips);
  prefix_array(t, p, "destination_ips", m.destination_ips);
  prefix_array(t, p, "not_destination_ips", m.not_destination_ips);
  auto port_list = [&](std::string_view key, std::vector<uint16_t>& out) {
    array(t, p, key, "port numbers", [&](const toml::node& e, const std::string& k) {
      uint16_t v = 0;
      if (integer(e, k, 1, 65535, v)) out.push_back(v);
    });
  };
  port_list("destination_ports", m.destination_ports);
  port_list("not_destination_ports", m.not_destination_ports);
  auto accounts = [&](std::string_view key, std::vector<ServiceAccountMatch>& out) {
    array(t, p, key, "\"namespace/service_account\" strings",
          [&](const toml::node& e, const std::string& k) {
            const auto* s = e.as_string();
            const auto slash = s ? s->get().find('/') : std::string::npos;
            if (!s || slash == std::string::npos || slash == 0 || slash + 1 == s->get().size()) {
              fail(e, k, "expected a \"namespace/service_account\" string, got " + describe(e));
              return;
            }
            out.push_back({s->get().substr(0, slash), s->get().substr(slash + 1)});
          });
  };
  accounts("service_accounts", m.service_accounts);
  accounts("not_service_accounts", m.not_service_accounts);
}

void Parser::parse_policy(const toml::table& t, const std::string& p, Policy& pol) {
  check_keys(t, p, kPolicyKeys);
  string(t, p, "name", pol.name, true);
  string(t, p, "namespace", pol.ns, true);
  enum_key(t, p, "scope", kPolicyScopes, pol.scope);
  enum_key(t, p, "action", kActions, pol.action);
  boolean(t, p, "dry_run", pol.dry_run);
  table_array(t, p, "group", [&](const toml::table& gt, const std::string& gp) {
    check_keys(gt, gp, kGroupKeys);
    PolicyGroup g;
    table_array(gt, gp, "clause", [&](const toml::table& ct, const std::string& cp) {
      check_keys(ct, cp, kClauseKeys);
      PolicyClause c;
      table_array(ct, cp, "match", [&](const toml::table& mt, const std::string& mp) {
        PolicyMatch m;
        parse_match(mt, mp, m);
        c.matches.push_back(std::move(m));
      });
      g.clauses.push_back(std::move(c));
    });
    pol.groups.push_back(std::move(g));
  });
}

MeshModel Parser::parse(const toml::table& root) {
  MeshModel m;
  check_keys(root, "", kRootKeys);
  std::map<std::string, SourcePos> first;  // resource key -> where it was first defined
  auto where = [](const SourcePos& p) {
    return p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
  };
  std::map<std::tuple<IpAddr, uint16_t>, std::string> vip_ports;
  table_array(root, "", "mesh_service", [&](const toml::table& t, const std::string& p) {
    Service s;
    const size_t before = errors_.size();
    parse_service(t, p, s);
    if (errors_.size() != before) return;
    if (auto [it, fresh] = first.emplace("svc:" + s.key(), pos(t)); !fresh) {
      fail(t, p, "duplicate mesh_service " + s.key() + " (first at " + where(it->second) + ")");
      return;
    }
    for (const auto& v : s.vips) {
      for (const auto& port : s.ports) {
        auto [it, fresh] = vip_ports.emplace(std::tuple{v.address, port.service_port}, s.key());
        if (!fresh) {
          fail(t, p + ".vips", "VIP " + v.address.str() + " port " +
                                   std::to_string(port.service_port) + " is also used by " +
                                   it->second);
        }
      }
    }
    m.services.emplace(s.key(), std::move(s));
  });
  std::vector<std::pair<const toml::table*, std::string>> workload_tables;
  table_array(root, "", "workload", [&](const toml::table& t, const std::string& p) {
    Workload w;
    const size_t before = errors_.size();
    parse_workload(t, p, w);
    if (errors_.size() != before) return;
    if (auto [it, fresh] = first.emplace("wl:" + w.uid, pos(t)); !fresh) {
      fail(*t.get("uid"), p + ".uid",
           "duplicate workload uid \"" + w.uid + "\" (first at " + where(it->second) + ")");
      return;
    }
    // A service reference must name a [[mesh_service]]: a typo would silently serve nothing.
    for (const auto& [key, ports] : w.services) {
      if (m.services.contains(key)) continue;
      std::vector<std::string> known;
      for (const auto& [k, s] : m.services) known.push_back(k);
      const toml::node* sn = t.get("services");
      const toml::node* kn = sn && sn->as_table() ? sn->as_table()->get(key) : nullptr;
      fail(kn ? *kn : t, p + ".services.\"" + key + "\"",
           "unknown service \"" + key + "\" (no [[mesh_service]] has this namespace/hostname)" +
               did_you_mean(key, known));
    }
    m.workloads.emplace(w.uid, std::move(w));
  });
  table_array(root, "", "policy", [&](const toml::table& t, const std::string& p) {
    Policy pol;
    const size_t before = errors_.size();
    parse_policy(t, p, pol);
    if (errors_.size() != before) return;
    if (auto [it, fresh] = first.emplace("pol:" + pol.key(), pos(t)); !fresh) {
      fail(t, p, "duplicate policy " + pol.key() + " (first at " + where(it->second) + ")");
      return;
    }
    m.policies.emplace(pol.key(), std::move(pol));
  });
  return m;
}

}  // namespace

Result<MeshModel, ConfigErrors> parse_mesh_file(std::string_view text, const std::string& name,
                                                const MeshFileOptions& opt) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(name));
  } catch (const toml::parse_error& err) {
    const auto& b = err.source().begin;
    return ConfigErrors{{ConfigError{SourcePos{name, b.line, b.column}, "",
                                     "invalid TOML: " + std::string(err.description())}}};
  }
  Parser parser(name, opt);
  MeshModel m = parser.parse(root);
  auto& errors = parser.errors();
  if (!errors.empty()) {
    sort_by_position(errors);
    return ConfigErrors{std::move(errors)};
  }
  return m;
}

Result<MeshModel, ConfigErrors> load_mesh_file(const std::string& path,
                                               const MeshFileOptions& opt) {
  auto text = read_regular_file(path, kMaxMeshFileBytes);
  if (!text) {
    return ConfigErrors{
        {ConfigError{SourcePos{path, 0, 0}, "", "mesh file " + text.error().message}}};
  }
  return parse_mesh_file(*text, path, opt);
}

}  // namespace meshgate::ctl::mesh
