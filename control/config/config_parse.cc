// The config parser: what only the TOML tree can tell. Unknown keys and tables, wrong types,
// strings that are not addresses / MACs / enum names, numbers that do not fit their field,
// missing required keys. It fills the plain structs of config.h, records where every value was
// written, and hands the validator (config_validate.cc) those positions and the keys it already
// reported. parse_config and load_config run both passes.
#include <toml++/toml.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <utility>

#include "control/common/file_read.h"
#include "control/common/sha256.h"
#include "control/config/config_internal.h"

namespace meshgate::ctl {
namespace config_detail {
namespace {

// An enum key's names (the forwarding modes' table is dp::kModeNames, shared with every output).
template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};

constexpr EnumName<L4Proto> kProtocols[] = {{"tcp", L4Proto::kTcp}, {"udp", L4Proto::kUdp}};
constexpr EnumName<BackendRemoval> kBackendRemovals[] = {{"keep", BackendRemoval::kKeep},
                                                         {"reset", BackendRemoval::kReset}};
constexpr EnumName<IcmpEcho> kIcmpEchoes[] = {{"answer", IcmpEcho::kAnswer},
                                              {"forward", IcmpEcho::kForward}};
constexpr EnumName<ProxyProtocol> kProxyProtocols[] = {{"none", ProxyProtocol::kNone},
                                                      {"v2", ProxyProtocol::kV2}};
constexpr EnumName<SessionAffinity> kSessionAffinities[] = {
    {"none", SessionAffinity::kNone}, {"client_ip", SessionAffinity::kClientIp}};
constexpr EnumName<NameMatch> kNameMatches[] = {{"sni", NameMatch::kSni},
                                                {"host", NameMatch::kHost}};
constexpr EnumName<HealthCheckType> kHealthCheckTypes[] = {{"tcp", HealthCheckType::kTcp},
                                                          {"http", HealthCheckType::kHttp}};
constexpr EnumName<MeshSource> kMeshSources[] = {
    {"none", MeshSource::kNone}, {"file", MeshSource::kFile}, {"xds", MeshSource::kXds}};

// How a value looks in a message: strings quoted, scalars as written, containers by kind.
std::string describe(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return quoted(n.as_string()->get());
    case toml::node_type::integer: return std::to_string(n.as_integer()->get());
    case toml::node_type::floating_point: {
      std::ostringstream os;
      os << *n.as_floating_point();
      return os.str();
    }
    case toml::node_type::boolean: return n.as_boolean()->get() ? "true" : "false";
    case toml::node_type::array: return n.is_array_of_tables() ? "an array of tables" : "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

// ---- parser ----

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  Config parse(const toml::table& root);

  std::vector<ConfigError>& errors() { return errors_; }
  const Positions& positions() const { return positions_; }
  const KeySet& failed() const { return failed_; }

 private:
  SourcePos pos(const toml::source_region& r) const {
    return {file_, r.begin.line, r.begin.column};
  }

  void fail(const toml::source_region& r, const std::string& key, std::string message) {
    errors_.push_back({pos(r), key, std::move(message)});
    failed_.insert(key);
  }

  void check_keys(const toml::table& t, const std::string& path, Keys valid);

  // The node for `key`, recording its position; nullptr when absent (an error if required).
  const toml::node* field(const toml::table& t, const std::string& path, std::string_view key,
                          bool required, const std::string& expected) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(t.source(), join(path, key), "missing required key (expected " +
                                                          expected + ")");
      return nullptr;
    }
    positions_[join(path, key)] = pos(n->source());
    return n;
  }

  // [name]: the table, nullptr when absent or not a table (reported).
  const toml::table* single_table(const toml::table& root, std::string_view name);
  // [[name]] (or an array of inline tables): calls fn(table, "name[i]") for each element.
  void table_array(const toml::table& parent, const std::string& path, std::string_view name,
                   const std::function<void(const toml::table&, const std::string&)>& fn);

  template <typename T>
  void read_int(const toml::table& t, const std::string& path, std::string_view key,
                const IntSpec& spec, T& out, bool required = false) {
    const std::string expected = int_expected(spec);
    const toml::node* n = field(t, path, key, required, expected);
    if (!n) return;
    const auto* v = n->as_integer();
    // Values that fit the field but are out of range are stored and left to the validator.
    if (!v || !std::in_range<T>(v->get())) {
      fail(n->source(), join(path, key), "expected " + expected + ", got " + describe(*n));
      return;
    }
    out = T(v->get());
  }

  void read_string(const toml::table& t, const std::string& path, std::string_view key,
                   std::string& out, bool required = false) {
    const toml::node* n = field(t, path, key, required, "a string");
    if (!n) return;
    if (const auto* v = n->as_string()) {
      out = v->get();
    } else {
      fail(n->source(), join(path, key), "expected a string, got " + describe(*n));
    }
  }

  void read_bool(const toml::table& t, const std::string& path, std::string_view key, bool& out) {
    const toml::node* n = field(t, path, key, false, "true or false");
    if (!n) return;
    if (const auto* v = n->as_boolean()) {
      out = v->get();
    } else {
      fail(n->source(), join(path, key), "expected true or false, got " + describe(*n));
    }
  }

  // `names`: a table of {name, value} rows (EnumName here, dp::kModeNames for modes).
  template <typename Row, size_t N, typename E>
  void read_enum(const toml::table& t, const std::string& path, std::string_view key,
                 const Row (&names)[N], E& out) {
    std::string expected = "one of ";
    for (size_t i = 0; i < N; ++i) expected += (i ? ", " : "") + std::string(names[i].name);
    const toml::node* n = field(t, path, key, false, expected);
    if (!n) return;
    if (const auto* v = n->as_string()) {
      for (const auto& e : names) {
        if (e.name == v->get()) {
          out = e.value;
          return;
        }
      }
      std::vector<std::string_view> candidates;
      for (const auto& e : names) candidates.push_back(e.name);
      fail(n->source(), join(path, key),
           "expected " + expected + ", got " + describe(*n) +
               did_you_mean(closest(v->get(), candidates)));
      return;
    }
    fail(n->source(), join(path, key), "expected " + expected + ", got " + describe(*n));
  }

  // One address / prefix / MAC value (a field or an array element) at `key`.
  std::optional<IpAddr> ip_value(const toml::node& n, const std::string& key);
  std::optional<IpPrefix> prefix_value(const toml::node& n, const std::string& key);
  std::optional<MacAddr> mac_value(const toml::node& n, const std::string& key);
  std::optional<std::string> string_value(const toml::node& n, const std::string& key);

  void read_ip(const toml::table& t, const std::string& path, std::string_view key, IpAddr& out,
               bool required) {
    const toml::node* n = field(t, path, key, required, "an IPv4/IPv6 address string");
    if (!n) return;
    if (auto a = ip_value(*n, join(path, key))) out = *a;
  }

  void read_prefix(const toml::table& t, const std::string& path, std::string_view key,
                   IpPrefix& out, bool required) {
    const toml::node* n = field(t, path, key, required, "an \"address/length\" string");
    if (!n) return;
    if (auto p = prefix_value(*n, join(path, key))) out = *p;
  }

  template <typename Out>
  void read_mac(const toml::table& t, const std::string& path, std::string_view key, Out& out,
                bool required) {
    const toml::node* n = field(t, path, key, required, "a MAC address string");
    if (!n) return;
    if (auto m = mac_value(*n, join(path, key))) out = *m;
  }

  // An array of strings, each parsed by `one`. Bad elements keep a placeholder so that indices
  // in the struct match indices in the file (the validator looks positions up by index).
  template <typename T, typename One>
  void read_array(const toml::table& t, const std::string& path, std::string_view key,
                  const std::string& what, std::vector<T>& out, One one) {
    const std::string k = join(path, key);
    const toml::node* n = field(t, path, key, false, "an array of " + what);
    if (!n) return;
    const auto* arr = n->as_array();
    if (!arr) {
      std::string hint;
      if (n->is_string()) hint = " (write [" + describe(*n) + "])";
      fail(n->source(), k, "expected an array of " + what + ", got " + describe(*n) + hint);
      return;
    }
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node& e = *arr->get(i);
      const std::string ek = indexed(k, i);
      positions_[ek] = pos(e.source());
      auto v = (this->*one)(e, ek);
      out.push_back(v ? *v : T{});
    }
  }

  void parse_gateway(const toml::table& t, GatewayConfig& g);
  PortConfig parse_port(const toml::table& t, const std::string& path);
  RouteConfig parse_route(const toml::table& t, const std::string& path);
  NeighborConfig parse_neighbor(const toml::table& t, const std::string& path);
  ServiceConfig parse_service(const toml::table& t, const std::string& path);
  BackendConfig parse_backend(const toml::table& t, const std::string& path);
  void parse_health_check(const toml::table& service, const std::string& path,
                          HealthCheckConfig& h);
  ListenerConfig parse_listener(const toml::table& t, const std::string& path);
  ListenerRouteConfig parse_listener_route(const toml::table& t, const std::string& path);
  DenyConfig parse_deny(const toml::table& t, const std::string& path);
  void parse_fullnat(const toml::table& t, FullnatConfig& f);
  void parse_conntrack(const toml::table& t, ConntrackConfig& c);
  void parse_proxy(const toml::table& t, ProxyConfig& c);
  void parse_access_log(const toml::table& t, AccessLogConfig& c);
  void parse_mesh(const toml::table& t, MeshConfig& m);
  void parse_hbone(const toml::table& t, HboneConfig& h);
  void parse_control(const toml::table& t, ControlConfig& c);
  void parse_admin(const toml::table& t, AdminConfig& a);
  void parse_bgp(const toml::table& t, BgpConfig& b);

  std::string file_;
  std::vector<ConfigError> errors_;
  Positions positions_;
  KeySet failed_;
};

void Parser::check_keys(const toml::table& t, const std::string& path, Keys valid) {
  for (auto&& [k, v] : t) {
    const std::string_view name = k.str();
    if (std::find(valid.begin(), valid.end(), name) != valid.end()) continue;
    const bool is_table = v.is_table() || v.is_array_of_tables();
    const std::string kind = is_table ? "unknown table" : "unknown key";
    fail(k.source(), join(path, echoed_key(name)),
         kind + unknown_key_hint(name, path, is_table, valid));
  }
}

const toml::table* Parser::single_table(const toml::table& root, std::string_view name) {
  const toml::node* n = root.get(name);
  if (!n) return nullptr;
  const std::string key(name);
  positions_[key] = pos(n->source());
  if (const auto* t = n->as_table()) return t;
  fail(n->source(), key,
       "expected a table ([" + key + "]), got " + describe(*n) +
           (n->is_array_of_tables() ? " (write [" + key + "], not [[" + key + "]])" : ""));
  return nullptr;
}

void Parser::table_array(const toml::table& parent, const std::string& path, std::string_view name,
                         const std::function<void(const toml::table&, const std::string&)>& fn) {
  const toml::node* n = parent.get(name);
  if (!n) return;
  const std::string key = join(path, name);
  positions_[key] = pos(n->source());
  const auto* arr = n->as_array();
  if (arr && arr->empty()) return;  // `backend = []`: no elements, nothing wrong with the type
  if (!arr || !arr->is_array_of_tables()) {
    // The whole array is reported once; its elements are not guessed at.
    fail(n->source(), key,
         "expected an array of tables ([[" + without_indices(key) + "]]), got " + describe(*n));
    return;
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table& t = *arr->get(i)->as_table();
    const std::string p = indexed(key, i);
    positions_[p] = pos(t.source());
    fn(t, p);
  }
}

std::optional<IpAddr> Parser::ip_value(const toml::node& n, const std::string& key) {
  const auto* s = n.as_string();
  if (!s) {
    fail(n.source(), key, "expected an IPv4/IPv6 address string, got " + describe(n));
    return std::nullopt;
  }
  if (auto a = IpAddr::parse(s->get())) return a;
  const bool has_len = s->get().find('/') != std::string::npos;
  fail(n.source(), key,
       "not an IPv4/IPv6 address: " + describe(n) +
           (has_len ? " (a prefix length is not allowed here)" : ""));
  return std::nullopt;
}

std::optional<IpPrefix> Parser::prefix_value(const toml::node& n, const std::string& key) {
  const auto* s = n.as_string();
  if (!s) {
    fail(n.source(), key, "expected an \"address/length\" string, got " + describe(n));
    return std::nullopt;
  }
  if (auto p = IpPrefix::parse(s->get())) return p;
  // Say which half is wrong.
  const std::string_view text = s->get();
  const auto slash = text.find('/');
  const auto addr = IpAddr::parse(text.substr(0, slash));
  if (!addr) {
    fail(n.source(), key,
         "not an IPv4/IPv6 address: " + quoted(text.substr(0, slash)) +
             (slash == std::string_view::npos ? "" : " in prefix " + describe(n)));
  } else {
    const int max_len = addr->is_v4() ? 32 : 128;
    fail(n.source(), key,
         "bad prefix length " + quoted(text.substr(slash + 1)) + " in " + describe(n) +
             " (expected 0.." + std::to_string(max_len) + " for " + family(*addr) + ")");
  }
  return std::nullopt;
}

std::optional<std::string> Parser::string_value(const toml::node& n, const std::string& key) {
  if (const auto* s = n.as_string()) return s->get();
  fail(n.source(), key, "expected a string, got " + describe(n));
  return std::nullopt;
}

std::optional<MacAddr> Parser::mac_value(const toml::node& n, const std::string& key) {
  const auto* s = n.as_string();
  if (!s) {
    fail(n.source(), key, "expected a MAC address string, got " + describe(n));
    return std::nullopt;
  }
  if (auto m = MacAddr::parse(s->get())) return m;
  fail(n.source(), key,
       "not a MAC address (six hex bytes like \"02:00:00:00:00:01\"): " + describe(n));
  return std::nullopt;
}

Config Parser::parse(const toml::table& root) {
  Config c;
  c.path = file_;
  // Errors about the file as a whole (no [[port]]) point at its first character.
  positions_[""] = SourcePos{file_, 1, 1};
  check_keys(root, "", kRootKeys);

  if (const auto* t = single_table(root, "gateway")) parse_gateway(*t, c.gateway);
  table_array(root, "", "port", [&](const toml::table& t, const std::string& p) {
    c.ports.push_back(parse_port(t, p));
  });
  table_array(root, "", "route", [&](const toml::table& t, const std::string& p) {
    c.routes.push_back(parse_route(t, p));
  });
  table_array(root, "", "neighbor", [&](const toml::table& t, const std::string& p) {
    c.neighbors.push_back(parse_neighbor(t, p));
  });
  table_array(root, "", "service", [&](const toml::table& t, const std::string& p) {
    c.services.push_back(parse_service(t, p));
  });
  table_array(root, "", "listener", [&](const toml::table& t, const std::string& p) {
    c.listeners.push_back(parse_listener(t, p));
  });
  table_array(root, "", "deny", [&](const toml::table& t, const std::string& p) {
    check_keys(t, p, kDenySourceKeys);
    IpPrefix source;
    read_prefix(t, p, "source", source, true);
    c.deny_sources.push_back(source);
  });
  if (const auto* t = single_table(root, "fullnat")) parse_fullnat(*t, c.fullnat);
  if (const auto* t = single_table(root, "proxy")) parse_proxy(*t, c.proxy);
  if (const auto* t = single_table(root, "conntrack")) parse_conntrack(*t, c.conntrack);
  if (const auto* t = single_table(root, "mesh")) parse_mesh(*t, c.mesh);
  if (const auto* t = single_table(root, "hbone")) parse_hbone(*t, c.hbone);
  if (const auto* t = single_table(root, "control")) parse_control(*t, c.control);
  if (const auto* t = single_table(root, "admin")) parse_admin(*t, c.admin);
  if (const auto* t = single_table(root, "bgp")) parse_bgp(*t, c.bgp);
  if (const auto* t = single_table(root, "access_log")) parse_access_log(*t, c.access_log);
  return c;
}

void Parser::parse_gateway(const toml::table& t, GatewayConfig& g) {
  const std::string p = "gateway";
  g.pos = pos(t.source());
  check_keys(t, p, kGatewayKeys);
  read_int(t, p, "workers", kWorkersSpec, g.workers);
  std::string locality;
  read_string(t, p, "locality", locality);
  if (const toml::node* n = t.get("locality"); n && n->is_string()) {
    if (auto l = Locality::parse(locality)) {
      g.locality = *l;
    } else {
      fail(n->source(), "gateway.locality",
           "expected \"region/zone/subzone\" (at most three parts), got " + describe(*n));
    }
  }
  read_int(t, p, "drain_timeout_ms", kDrainTimeoutSpec, g.drain_timeout_ms);
  read_bool(t, p, "watch_config", g.watch_config);
}

PortConfig Parser::parse_port(const toml::table& t, const std::string& p) {
  PortConfig port;
  port.pos = pos(t.source());
  check_keys(t, p, kPortKeys);
  read_string(t, p, "name", port.name, true);
  read_string(t, p, "device", port.device, true);
  read_array(t, p, "addresses", "\"address/length\" strings", port.addresses,
             &Parser::prefix_value);
  read_mac(t, p, "mac", port.mac, false);
  read_int(t, p, "rx_descriptors", kDescriptorsSpec, port.rx_descriptors);
  read_int(t, p, "tx_descriptors", kDescriptorsSpec, port.tx_descriptors);
  read_int(t, p, "mtu", kMtuSpec, port.mtu);
  read_string(t, p, "host_interface", port.host_interface);
  read_bool(t, p, "promiscuous", port.promiscuous);
  return port;
}

RouteConfig Parser::parse_route(const toml::table& t, const std::string& p) {
  RouteConfig r;
  r.pos = pos(t.source());
  check_keys(t, p, kRouteKeys);
  read_prefix(t, p, "prefix", r.prefix, true);
  read_ip(t, p, "via", r.via, true);
  read_string(t, p, "port", r.port);
  return r;
}

NeighborConfig Parser::parse_neighbor(const toml::table& t, const std::string& p) {
  NeighborConfig nb;
  nb.pos = pos(t.source());
  check_keys(t, p, kNeighborKeys);
  read_ip(t, p, "address", nb.address, true);
  read_mac(t, p, "mac", nb.mac, true);
  read_string(t, p, "port", nb.port);
  return nb;
}

ServiceConfig Parser::parse_service(const toml::table& t, const std::string& p) {
  ServiceConfig s;
  s.pos = pos(t.source());
  check_keys(t, p, kServiceKeys);
  read_string(t, p, "name", s.name, true);
  read_ip(t, p, "vip", s.vip, true);
  read_int(t, p, "port", kL4PortSpec, s.port, true);
  read_enum(t, p, "protocol", kProtocols, s.protocol);
  read_enum(t, p, "mode", dp::kModeNames, s.mode);
  read_int(t, p, "table_size", kTableSizeSpec, s.table_size);
  read_int(t, p, "gue_port", kL4PortSpec, s.gue_port);
  read_enum(t, p, "on_backend_removal", kBackendRemovals, s.on_backend_removal);
  read_enum(t, p, "icmp_echo", kIcmpEchoes, s.icmp_echo);
  read_enum(t, p, "proxy_protocol", kProxyProtocols, s.proxy_protocol);
  table_array(t, p, "backend", [&](const toml::table& bt, const std::string& bp) {
    s.backends.push_back(parse_backend(bt, bp));
  });
  table_array(t, p, "deny", [&](const toml::table& dt, const std::string& dp) {
    s.deny.push_back(parse_deny(dt, dp));
  });
  read_int(t, p, "inspect_bytes", kInspectBytesSpec, s.inspect_bytes);
  parse_health_check(t, p, s.health_check);
  read_array(t, p, "source_ranges", "\"address/length\" strings", s.source_ranges,
             &Parser::prefix_value);
  read_enum(t, p, "session_affinity", kSessionAffinities, s.session_affinity);
  read_int(t, p, "affinity_timeout_s", kAffinityTimeoutSpec, s.affinity_timeout_s);
  read_int(t, p, "node_port", kL4PortSpec, s.node_port);
  return s;
}

// `health_check = { ... }` or a [service.health_check] table: TOML makes both one table.
void Parser::parse_health_check(const toml::table& service, const std::string& sp,
                                HealthCheckConfig& h) {
  const toml::node* n = field(service, sp, "health_check", false, "a table");
  if (!n) return;
  const std::string p = join(sp, "health_check");
  const auto* t = n->as_table();
  if (!t) {
    fail(n->source(), p,
         "expected a table (health_check = { type = \"tcp\" } or [service.health_check]), got " +
             describe(*n) +
             (n->is_array_of_tables() ? " (write [service.health_check], not [[...]])" : ""));
    return;
  }
  h.enabled = true;
  h.pos = pos(t->source());
  check_keys(*t, p, kHealthCheckKeys);
  read_enum(*t, p, "type", kHealthCheckTypes, h.type);
  read_int(*t, p, "port", kL4PortSpec, h.port);
  read_string(*t, p, "path", h.path);
  read_int(*t, p, "interval_ms", kHealthIntervalSpec, h.interval_ms);
  read_int(*t, p, "timeout_ms", kHealthTimeoutSpec, h.timeout_ms);
  read_int(*t, p, "rise", kHealthCountSpec, h.rise);
  read_int(*t, p, "fall", kHealthCountSpec, h.fall);
}

ListenerConfig Parser::parse_listener(const toml::table& t, const std::string& p) {
  ListenerConfig l;
  l.pos = pos(t.source());
  check_keys(t, p, kListenerKeys);
  read_string(t, p, "name", l.name, true);
  read_ip(t, p, "vip", l.vip, true);
  read_int(t, p, "port", kL4PortSpec, l.port, true);
  read_enum(t, p, "match", kNameMatches, l.match);
  table_array(t, p, "route", [&](const toml::table& rt, const std::string& rp) {
    l.routes.push_back(parse_listener_route(rt, rp));
  });
  read_string(t, p, "default_service", l.default_service);
  read_int(t, p, "peek_bytes", kPeekBytesSpec, l.peek_bytes);
  read_int(t, p, "peek_timeout_ms", kPeekTimeoutSpec, l.peek_timeout_ms);
  read_int(t, p, "inspect_bytes", kInspectBytesSpec, l.inspect_bytes);
  table_array(t, p, "deny", [&](const toml::table& dt, const std::string& dp) {
    l.deny.push_back(parse_deny(dt, dp));
  });
  return l;
}

ListenerRouteConfig Parser::parse_listener_route(const toml::table& t, const std::string& p) {
  ListenerRouteConfig r;
  r.pos = pos(t.source());
  check_keys(t, p, kListenerRouteKeys);
  if (field(t, p, "hostnames", true, "an array of hostname strings")) {
    read_array(t, p, "hostnames", "hostname strings", r.hostnames, &Parser::string_value);
  }
  read_string(t, p, "service", r.service, true);
  read_int(t, p, "port", kL4PortSpec, r.port);
  return r;
}

DenyConfig Parser::parse_deny(const toml::table& t, const std::string& p) {
  DenyConfig d;
  d.pos = pos(t.source());
  check_keys(t, p, kDenyKeys);
  read_string(t, p, "pattern", d.pattern, true);
  return d;
}

BackendConfig Parser::parse_backend(const toml::table& t, const std::string& p) {
  BackendConfig b;
  b.pos = pos(t.source());
  check_keys(t, p, kBackendKeys);
  read_ip(t, p, "address", b.address, true);
  read_int(t, p, "port", kL4PortSpec, b.port, true);
  read_int(t, p, "weight", kWeightSpec, b.weight);
  return b;
}

void Parser::parse_fullnat(const toml::table& t, FullnatConfig& f) {
  const std::string p = "fullnat";
  f.pos = pos(t.source());
  check_keys(t, p, kFullnatKeys);
  read_array(t, p, "local_addresses", "IPv4/IPv6 address strings", f.local_addresses,
             &Parser::ip_value);
}

void Parser::parse_proxy(const toml::table& t, ProxyConfig& c) {
  const std::string p = "proxy";
  c.pos = pos(t.source());
  check_keys(t, p, kProxyKeys);
  read_int(t, p, "idle_timeout_s", kProxyIdleSpec, c.idle_timeout_s);
  read_int(t, p, "max_connections", kProxyConnectionsSpec, c.max_connections);
  read_int(t, p, "buffer_bytes", kProxyBufferSpec, c.buffer_bytes);
  read_int(t, p, "memory_mb", kProxyMemorySpec, c.memory_mb);
  read_int(t, p, "time_wait_s", kProxyTimeWaitSpec, c.time_wait_s);
}

void Parser::parse_access_log(const toml::table& t, AccessLogConfig& c) {
  const std::string p = "access_log";
  c.pos = pos(t.source());
  check_keys(t, p, kAccessLogKeys);
  read_string(t, p, "path", c.path);
  read_bool(t, p, "flows", c.flows);
  read_int(t, p, "ring_size", kAccessLogRingSpec, c.ring_size);
}

void Parser::parse_conntrack(const toml::table& t, ConntrackConfig& c) {
  const std::string p = "conntrack";
  c.pos = pos(t.source());
  check_keys(t, p, kConntrackKeys);
  read_int(t, p, "max_flows", kMaxFlowsSpec, c.max_flows);
  read_int(t, p, "tcp_syn", kTimeoutSpec, c.tcp_syn);
  read_int(t, p, "tcp_established", kTimeoutSpec, c.tcp_established);
  read_int(t, p, "tcp_fin", kTimeoutSpec, c.tcp_fin);
  read_int(t, p, "tcp_time_wait", kTimeoutSpec, c.tcp_time_wait);
  read_int(t, p, "udp", kTimeoutSpec, c.udp);
  read_int(t, p, "icmp", kTimeoutSpec, c.icmp);
}

void Parser::parse_mesh(const toml::table& t, MeshConfig& m) {
  const std::string p = "mesh";
  m.pos = pos(t.source());
  check_keys(t, p, kMeshKeys);
  read_enum(t, p, "source", kMeshSources, m.source);
  read_string(t, p, "path", m.path);
  read_string(t, p, "address", m.address);
  read_bool(t, p, "tls", m.tls);
  read_string(t, p, "ca_file", m.ca_file);
  read_string(t, p, "token_file", m.token_file);
  read_string(t, p, "cluster_id", m.cluster_id);
  read_string(t, p, "node_id", m.node_id);
  read_string(t, p, "network", m.network);
  read_enum(t, p, "mode", dp::kModeNames, m.mode);
  read_int(t, p, "table_size", kTableSizeSpec, m.table_size);
}

void Parser::parse_hbone(const toml::table& t, HboneConfig& h) {
  const std::string p = "hbone";
  h.pos = pos(t.source());
  check_keys(t, p, kHboneKeys);
  read_int(t, p, "port", kL4PortSpec, h.port);
  read_string(t, p, "cert_chain", h.cert_chain);
  read_string(t, p, "private_key", h.private_key);
  read_string(t, p, "trust_bundle", h.trust_bundle);
  read_string(t, p, "trust_domain", h.trust_domain);
  read_string(t, p, "ca_address", h.ca_address);
  if (t.contains("ca_tls")) {
    bool tls = true;
    read_bool(t, p, "ca_tls", tls);
    h.ca_tls = tls;
  }
  read_string(t, p, "ca_file", h.ca_file);
  read_string(t, p, "token_file", h.token_file);
  read_string(t, p, "cluster_id", h.cluster_id);
  read_string(t, p, "identity", h.identity);
  read_int(t, p, "cert_ttl", kCertTtlSpec, h.cert_ttl);
  read_int(t, p, "max_connections", kHboneConnectionsSpec, h.max_connections);
  read_int(t, p, "max_handshakes", kHboneConnectionsSpec, h.max_handshakes);
  read_int(t, p, "max_handshakes_per_source", kHboneConnectionsSpec, h.max_handshakes_per_source);
  read_int(t, p, "handshake_timeout_ms", kHboneHandshakeTimeoutSpec, h.handshake_timeout_ms);
  read_int(t, p, "memory_mb", kHboneMemorySpec, h.memory_mb);
}

void Parser::parse_control(const toml::table& t, ControlConfig& c) {
  const std::string p = "control";
  c.pos = pos(t.source());
  check_keys(t, p, kControlKeys);
  read_int(t, p, "build_threads", kBuildThreadsSpec, c.build_threads);
}

void Parser::parse_admin(const toml::table& t, AdminConfig& a) {
  const std::string p = "admin";
  a.pos = pos(t.source());
  check_keys(t, p, kAdminKeys);
  read_string(t, p, "listen", a.listen);
}

void Parser::parse_bgp(const toml::table& t, BgpConfig& b) {
  const std::string p = "bgp";
  b.enabled = true;
  b.pos = pos(t.source());
  check_keys(t, p, kBgpKeys);
  read_int(t, p, "local_as", kAsSpec, b.local_as, true);
  if (t.get("router_id")) {
    IpAddr id;
    read_ip(t, p, "router_id", id, false);
    b.router_id = id;
  }
  read_int(t, p, "hold_time_s", kHoldTimeSpec, b.hold_time_s);
  read_int(t, p, "withdraw_wait_ms", kWithdrawWaitSpec, b.withdraw_wait_ms);
  read_string(t, p, "daemon", b.daemon);
  read_string(t, p, "runtime_dir", b.runtime_dir);
  table_array(t, p, "peer", [&](const toml::table& pt, const std::string& pp) {
    BgpPeerConfig peer;
    peer.pos = pos(pt.source());
    check_keys(pt, pp, kBgpPeerKeys);
    read_ip(pt, pp, "address", peer.address, true);
    read_int(pt, pp, "remote_as", kAsSpec, peer.remote_as, true);
    read_string(pt, pp, "password", peer.password);
    b.peers.push_back(std::move(peer));
  });
}

}  // namespace
}  // namespace config_detail

std::optional<Locality> Locality::parse(std::string_view s) {
  Locality l;
  std::string* parts[] = {&l.region, &l.zone, &l.subzone};
  size_t i = 0;
  for (;;) {
    const auto slash = s.find('/');
    if (i == 3) return std::nullopt;
    *parts[i++] = std::string(s.substr(0, slash));
    if (slash == std::string_view::npos) break;
    s.remove_prefix(slash + 1);
  }
  return l;
}

std::string Locality::str() const {
  if (subzone.empty() && zone.empty()) return region;
  if (subzone.empty()) return region + "/" + zone;
  return region + "/" + zone + "/" + subzone;
}

ConfigCheck check_config(std::string_view toml_text, const std::string& name) {
  toml::table root;
  try {
    root = toml::parse(toml_text, std::string_view(name));
  } catch (const toml::parse_error& err) {
    const auto& b = err.source().begin;
    return {std::nullopt, ConfigErrors{{ConfigError{SourcePos{name, b.line, b.column}, "",
                                                    "invalid TOML: " +
                                                        std::string(err.description())}}}};
  }
  using namespace config_detail;
  Parser parser(name);
  Config config = parser.parse(root);
  std::vector<ConfigError> errors = std::move(parser.errors());
  for (auto& e : validate(config, parser.positions(), parser.failed())) {
    errors.push_back(std::move(e));
  }
  sort_by_position(errors);
  config.positions = parser.positions();
  return {std::move(config), ConfigErrors{std::move(errors)}};
}

ConfigCheck check_config_file(const std::string& path) {
  auto text = read_regular_file(path, kMaxConfigFileBytes);
  if (!text) {
    return {std::nullopt, ConfigErrors{{ConfigError{SourcePos{path, 0, 0}, "",
                                                    "config file " + text.error().message}}}};
  }
  ConfigCheck c = check_config(*text, path);
  if (c.config) c.config->sha256 = sha256_hex(*text);
  return c;
}

Result<Config, ConfigErrors> parse_config(std::string_view toml_text, const std::string& name) {
  ConfigCheck c = check_config(toml_text, name);
  if (!c.errors.errors.empty()) return std::move(c.errors);
  return std::move(*c.config);
}

Result<Config, ConfigErrors> load_config(const std::string& path) {
  ConfigCheck c = check_config_file(path);
  if (!c.errors.errors.empty()) return std::move(c.errors);
  return std::move(*c.config);
}

SourcePos position_of(const Config& config, std::string_view key) {
  for (;;) {
    if (auto it = config.positions.find(key); it != config.positions.end()) return it->second;
    if (key.empty()) return SourcePos{config.path, 0, 0};
    const auto cut = key.find_last_of(".[");
    key = cut == std::string_view::npos ? std::string_view{} : key.substr(0, cut);
  }
}

}  // namespace meshgate::ctl
