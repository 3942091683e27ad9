// Config loading in two passes over one TOML tree:
//
// - Parser: what only the TOML tree can tell. Unknown keys and tables, wrong types, strings that
//   are not addresses / MACs / enum names, numbers that do not fit their field, missing required
//   keys. It fills the plain structs and records where every value was written.
// - Validator: everything a Config built in code could also get wrong (ranges, references between
//   tables, duplicates). Running the same checks for parsed and hand-built configs keeps one
//   definition of "valid".
//
// The parser hands the validator the source position of every key it read and the set of keys it
// already reported; the validator skips checks that involve a reported key, so one mistake gives
// one error, at the value that is wrong.
#include "control/config/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <tuple>
#include <utility>

#include "control/common/edit_distance.h"
#include "control/common/file_read.h"
#include "control/snapshot/maglev.h"
#include "dataplane/tls/spiffe.h"

namespace meshgate::ctl {
namespace {

using Positions = std::map<std::string, SourcePos, std::less<>>;
using KeySet = std::set<std::string, std::less<>>;

// An integer key's accepted values. `what` replaces "an integer lo..hi" in messages when the
// plain range does not say everything (e.g. table_size must also be prime).
struct IntSpec {
  int64_t lo;
  int64_t hi;
  const char* what = nullptr;
};

constexpr IntSpec kWorkersSpec{1, kMaxWorkers};
constexpr IntSpec kBuildThreadsSpec{0, kMaxBuildThreads, "0 (automatic) or 1..64 threads"};
constexpr IntSpec kDrainTimeoutSpec{0, kMaxDrainTimeoutMs};
constexpr IntSpec kL4PortSpec{1, 65535};
// Requested certificate lifetime: renewal at half-life must leave time for retries.
constexpr IntSpec kCertTtlSpec{60, 31536000};
// Smaller rings cannot hold one burst per queue with headroom; larger ones only add latency and
// cache misses. PMDs round to their own limits in rte_eth_dev_adjust_nb_rx_tx_desc().
constexpr IntSpec kDescriptorsSpec{64, 16384};
// RFC 791: every IPv4 host must accept 576-byte datagrams; 9000 is the usual jumbo frame.
constexpr IntSpec kMtuSpec{576, 9000};
// RFC 8200 §5: IPv6 requires links with an MTU of at least 1280.
constexpr int64_t kMinIpv6Mtu = 1280;
// IPVS weights are 0..65535; keeping to it lets weights move between the two unchanged.
constexpr IntSpec kWeightSpec{0, 65535};
// Largest prime below 2^22: a service's Maglev table stays within 16 MiB of 4-byte slots.
constexpr int64_t kMaxTableSize = 4194301;
constexpr int64_t kMinTableSize = 7;
constexpr IntSpec kTableSizeSpec{0, kMaxTableSize, "0 (automatic) or a prime 7..4194301"};
// Below 1024 the per-worker tables are too small to be useful; 2^26 flows is already ~8 GiB.
constexpr IntSpec kMaxFlowsSpec{1024, 67108864};
// Seconds; one week bounds how long a forgotten flow can pin a table slot.
constexpr IntSpec kTimeoutSpec{1, 604800};
// [proxy]. Idle timeout: 0 (none) up to a week, like the conntrack timeouts.
constexpr IntSpec kProxyIdleSpec{0, 604800};
// TCBs per worker: below 64 a worker cannot hold a handful of sessions and their TIME-WAITs;
// 2^22 TCBs are 4 GiB.
constexpr IntSpec kProxyConnectionsSpec{64, 4194304};
// Below 16 KiB a window holds a few segments; above 64 MiB is beyond RFC 7323's largest
// useful window for any data-center path.
constexpr IntSpec kProxyBufferSpec{16384, 67108864};
constexpr IntSpec kProxyMemorySpec{1, 1048576};
// [hbone]: at least one connection; 2^20 connections of ~25 KiB are 25 GiB.
constexpr IntSpec kHboneConnectionsSpec{1, 1048576};
// Below 100 ms a handshake over any WAN fails; above 2 min a silent connect holds too long.
constexpr IntSpec kHboneHandshakeTimeoutSpec{100, 120000};
// At least one stream window (4 MiB): less would stall a single tunnel.
constexpr IntSpec kHboneMemorySpec{4, 1048576};
// RFC 9293 §3.8.1: 2 MSL of 2 minutes at most; at least 1 s.
constexpr IntSpec kProxyTimeWaitSpec{1, 240};

template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};

constexpr EnumName<L4Proto> kProtocols[] = {{"tcp", L4Proto::kTcp}, {"udp", L4Proto::kUdp}};
constexpr EnumName<ForwardMode> kModes[] = {{"dnat", ForwardMode::kDnat},
                                            {"fullnat", ForwardMode::kFullnat},
                                            {"dsr-ipip", ForwardMode::kDsrIpip},
                                            {"dsr-gue", ForwardMode::kDsrGue},
                                            {"proxy", ForwardMode::kProxy}};
constexpr EnumName<BackendRemoval> kBackendRemovals[] = {{"keep", BackendRemoval::kKeep},
                                                         {"reset", BackendRemoval::kReset}};
constexpr EnumName<IcmpEcho> kIcmpEchoes[] = {{"answer", IcmpEcho::kAnswer},
                                              {"forward", IcmpEcho::kForward}};
constexpr EnumName<ProxyProtocol> kProxyProtocols[] = {{"none", ProxyProtocol::kNone},
                                                      {"v2", ProxyProtocol::kV2}};
constexpr EnumName<MeshSource> kMeshSources[] = {
    {"none", MeshSource::kNone}, {"file", MeshSource::kFile}, {"xds", MeshSource::kXds}};

using Keys = std::span<const std::string_view>;

// The valid keys at each place. Tables are listed with plain keys: TOML does not tell them apart
// by name, and a suggestion must be able to cross the two (`[[services]]` -> `service`).
constexpr std::string_view kRootKeys[] = {"gateway", "port",      "route", "neighbor", "service",
                                          "fullnat", "proxy",     "conntrack", "mesh", "hbone",
                                          "control", "admin"};
constexpr std::string_view kGatewayKeys[] = {"workers", "locality", "drain_timeout_ms"};
constexpr std::string_view kPortKeys[] = {"name",           "device",         "addresses", "mac",
                                          "rx_descriptors", "tx_descriptors", "mtu"};
constexpr std::string_view kRouteKeys[] = {"prefix", "via", "port"};
constexpr std::string_view kNeighborKeys[] = {"address", "mac", "port"};
constexpr std::string_view kServiceKeys[] = {"name",     "vip",        "port",
                                             "protocol", "mode",       "table_size",
                                             "backend",  "gue_port",   "on_backend_removal",
                                             "icmp_echo", "proxy_protocol"};
constexpr std::string_view kBackendKeys[] = {"address", "port", "weight"};
constexpr std::string_view kFullnatKeys[] = {"local_addresses"};
constexpr std::string_view kProxyKeys[] = {"idle_timeout_s", "max_connections", "buffer_bytes",
                                           "memory_mb", "time_wait_s"};
constexpr std::string_view kConntrackKeys[] = {"max_flows", "tcp_syn",       "tcp_established",
                                               "tcp_fin",   "tcp_time_wait", "udp",
                                               "icmp"};
constexpr std::string_view kMeshKeys[] = {"source",  "path",       "address",    "tls",
                                          "ca_file", "token_file", "cluster_id", "node_id",
                                          "network", "mode",       "table_size"};
constexpr std::string_view kHboneKeys[] = {"port",       "cert_chain", "private_key", "trust_bundle",
                                           "trust_domain", "ca_address", "ca_tls",  "ca_file",
                                           "token_file", "cluster_id", "identity",  "cert_ttl",
                                           "max_connections", "max_handshakes",
                                           "max_handshakes_per_source", "handshake_timeout_ms",
                                           "memory_mb"};
constexpr std::string_view kControlKeys[] = {"build_threads"};
constexpr std::string_view kAdminKeys[] = {"listen"};

// Single tables, for the hint when one of their keys is written at the top level (usually
// because it was put above its [table] header).
constexpr std::pair<std::string_view, Keys> kSingleTables[] = {
    {"gateway", kGatewayKeys}, {"fullnat", kFullnatKeys}, {"proxy", kProxyKeys},
    {"conntrack", kConntrackKeys},
    {"mesh", kMeshKeys},       {"hbone", kHboneKeys},     {"control", kControlKeys},
    {"admin", kAdminKeys}};

// ---- small text helpers ----

std::string join(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  std::string s(path);
  s += '.';
  s += key;
  return s;
}

std::string indexed(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

// "service[0].backend" -> "service.backend", as the table header is written.
std::string without_indices(std::string_view key) {
  std::string s;
  bool in_index = false;
  for (char c : key) {
    if (c == '[') in_index = true;
    if (!in_index) s += c;
    if (c == ']') in_index = false;
  }
  return s;
}

std::string quoted(std::string_view s) {
  constexpr size_t kMaxShown = 60;
  if (s.size() > kMaxShown) return "\"" + std::string(s.substr(0, kMaxShown)) + "...\"";
  return "\"" + std::string(s) + "\"";
}

std::string where(const SourcePos& p) {
  if (p.line == 0) return p.file;
  return p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

std::string list(Keys keys) {
  std::string s;
  for (auto k : keys) {
    if (!s.empty()) s += ", ";
    s += k;
  }
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The closest candidate within two edits (one for words of up to four letters: two edits turn
// "sctp" into "tcp"), or "" when nothing is that close.
template <typename Range>
std::string closest(std::string_view got, const Range& candidates) {
  constexpr size_t kShortWord = 4;
  const size_t max_distance = got.size() <= kShortWord ? 1 : 2;
  const std::string g = lower(got);
  std::string best;
  size_t best_d = max_distance + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(g, lower(c));
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best;
}

std::string did_you_mean(const std::string& suggestion) {
  return suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)";
}

std::string int_expected(const IntSpec& spec) {
  if (spec.what) return std::string("an integer: ") + spec.what;
  return "an integer " + std::to_string(spec.lo) + ".." + std::to_string(spec.hi);
}

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

std::string family(const IpAddr& a) { return a.is_v4() ? "IPv4" : "IPv6"; }

bool is_multicast(const IpAddr& a) {
  return a.is_v4() ? (a.v4_host() >> 28) == 0xe : a.b[0] == 0xff;
}

// Why `a` cannot be a service VIP (nullptr when it can): addresses that name no single host a
// client could reach through the gateway.
const char* unusable_vip(const IpAddr& a) {
  if (a.is_zero()) return "the unspecified address";
  if (is_multicast(a)) return "a multicast address";
  if (a.is_v4()) {
    const uint32_t h = a.v4_host();
    if (h == 0xffffffffu) return "the limited broadcast address";
    if (h >> 24 == 127) return "a loopback address";
    if (h >> 24 == 0) return "a \"this network\" address, 0.0.0.0/8";  // RFC 1122 3.2.1.3
    return nullptr;
  }
  static const IpAddr kLoopback6 = *IpAddr::parse("::1");
  if (a == kLoopback6) return "a loopback address";
  return nullptr;
}

// The first control character of a name (NUL, ESC, DEL...), which would corrupt logs, metric
// labels and terminal output: its offset, or npos.
size_t control_char_at(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return i;
  }
  return std::string_view::npos;
}

// "host:port" with an IPv6 host in brackets. Returns the host (brackets removed) and port.
struct HostPort {
  std::string host;
  bool bracketed = false;
  int64_t port = -1;
};

std::optional<HostPort> split_host_port(std::string_view s) {
  HostPort hp;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      return std::nullopt;
    }
    hp.host = std::string(s.substr(1, close - 1));
    hp.bracketed = true;
    port = s.substr(close + 2);
  } else {
    const auto colon = s.rfind(':');
    if (colon == std::string_view::npos || s.find(':') != colon) return std::nullopt;
    hp.host = std::string(s.substr(0, colon));
    port = s.substr(colon + 1);
  }
  if (hp.host.empty() || port.empty() || port.size() > 5) return std::nullopt;
  hp.port = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    hp.port = hp.port * 10 + (c - '0');
  }
  return hp;
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

  template <typename E, size_t N>
  void read_enum(const toml::table& t, const std::string& path, std::string_view key,
                 const EnumName<E> (&names)[N], E& out) {
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
  void parse_fullnat(const toml::table& t, FullnatConfig& f);
  void parse_conntrack(const toml::table& t, ConntrackConfig& c);
  void parse_proxy(const toml::table& t, ProxyConfig& c);
  void parse_mesh(const toml::table& t, MeshConfig& m);
  void parse_hbone(const toml::table& t, HboneConfig& h);
  void parse_control(const toml::table& t, ControlConfig& c);
  void parse_admin(const toml::table& t, AdminConfig& a);

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
    // No valid key is anywhere near that long: skip the edit distances.
    const bool too_long = name.size() > kMaxEchoedKey;
    std::string hint = too_long ? "" : did_you_mean(closest(name, valid));
    if (hint.empty() && path.empty() && !is_table && !too_long) {
      // A table's key written at the top level: say which table it belongs to.
      for (const auto& [table, keys] : kSingleTables) {
        if (std::find(keys.begin(), keys.end(), name) != keys.end()) {
          hint = " (did you mean '" + std::string(table) + "." + std::string(name) +
                 "'? put it under [" + std::string(table) + "])";
          break;
        }
      }
    }
    if (hint.empty()) {
      hint = std::string(" (valid ") + (is_table && path.empty() ? "tables" : "keys") + ": " +
             list(valid) + ")";
    }
    fail(k.source(), join(path, echoed_key(name)), kind + hint);
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
  if (const auto* t = single_table(root, "fullnat")) parse_fullnat(*t, c.fullnat);
  if (const auto* t = single_table(root, "proxy")) parse_proxy(*t, c.proxy);
  if (const auto* t = single_table(root, "conntrack")) parse_conntrack(*t, c.conntrack);
  if (const auto* t = single_table(root, "mesh")) parse_mesh(*t, c.mesh);
  if (const auto* t = single_table(root, "hbone")) parse_hbone(*t, c.hbone);
  if (const auto* t = single_table(root, "control")) parse_control(*t, c.control);
  if (const auto* t = single_table(root, "admin")) parse_admin(*t, c.admin);
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
  read_enum(t, p, "mode", kModes, s.mode);
  read_int(t, p, "table_size", kTableSizeSpec, s.table_size);
  read_int(t, p, "gue_port", kL4PortSpec, s.gue_port);
  read_enum(t, p, "on_backend_removal", kBackendRemovals, s.on_backend_removal);
  read_enum(t, p, "icmp_echo", kIcmpEchoes, s.icmp_echo);
  read_enum(t, p, "proxy_protocol", kProxyProtocols, s.proxy_protocol);
  table_array(t, p, "backend", [&](const toml::table& bt, const std::string& bp) {
    s.backends.push_back(parse_backend(bt, bp));
  });
  return s;
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
  read_enum(t, p, "mode", kModes, m.mode);
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

// ---- validator ----

class Validator {
 public:
  Validator(const Config& c, const Positions& positions, const KeySet& failed)
      : c_(c), positions_(positions), failed_(failed) {}

  std::vector<ConfigError> run() {
    check_gateway();
    check_ports();
    check_routes();
    check_neighbors();
    check_services();
    check_fullnat();
    check_proxy();
    check_conntrack();
    check_mesh();
    check_hbone();
    check_range("control.build_threads", c_.control.build_threads, kBuildThreadsSpec);
    check_admin();
    return std::move(errors_);
  }

 private:
  // Walks from `key` to its ancestors: "service[1].backend[0].port", "service[1].backend[0]",
  // "service[1].backend", "service[1]", "service", "".
  static std::string_view parent(std::string_view key) {
    const auto cut = key.find_last_of(".[");
    return cut == std::string_view::npos ? std::string_view{} : key.substr(0, cut);
  }

  // Where `key` was written, else where its nearest enclosing table was (missing keys).
  SourcePos at(std::string_view key) const {
    for (;;) {
      if (auto it = positions_.find(key); it != positions_.end()) return it->second;
      if (key.empty()) return SourcePos{c_.path, 0, 0};
      key = parent(key);
    }
  }

  // True when the parser already reported `key` or a table holding it: its value is a default
  // or placeholder, and checking it would only repeat the first error.
  bool bad(std::string_view key) const {
    for (;;) {
      if (failed_.contains(key)) return true;
      if (key.empty()) return false;
      key = parent(key);
    }
  }

  void error(const std::string& key, std::string message) {
    errors_.push_back({at(key), key, std::move(message)});
  }

  void check_range(const std::string& key, int64_t v, const IntSpec& spec) {
    if (bad(key) || (v >= spec.lo && v <= spec.hi)) return;
    error(key, "expected " + int_expected(spec) + ", got " + std::to_string(v));
  }

  void check_non_empty(const std::string& key, const std::string& v, const char* what) {
    if (!bad(key) && v.empty()) error(key, std::string("expected ") + what + ", got \"\"");
  }

  // A name: not empty, no control characters.
  void check_name(const std::string& key, const std::string& v, const char* what) {
    check_non_empty(key, v, what);
    if (bad(key)) return;
    if (const size_t at_byte = control_char_at(v); at_byte != std::string::npos) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(v[at_byte]));
      error(key, std::string("control character ") + hex + " at byte " +
                     std::to_string(at_byte) + " of the name (names are printable text)");
    }
  }

  std::string port_names() const {
    std::string s;
    for (const auto& p : c_.ports) s += (s.empty() ? "" : ", ") + p.name;
    return s;
  }

  // The port named `name`, or nullptr (reported at `key`).
  const PortConfig* find_port(const std::string& key, const std::string& name) {
    for (const auto& p : c_.ports) {
      if (p.name == name) return &p;
    }
    std::vector<std::string> names;
    for (const auto& p : c_.ports) names.push_back(p.name);
    std::string hint = did_you_mean(closest(name, names));
    if (hint.empty()) hint = c_.ports.empty() ? " (no [[port]] is defined)" : " (ports: " +
                                                                                 port_names() + ")";
    error(key, "unknown port " + quoted(name) + hint);
    return nullptr;
  }

  // Whether all port addresses parsed: on-link checks against a partial list would report
  // next hops that are fine once the address typo is fixed.
  bool ports_known() const {
    if (bad("port")) return false;
    for (size_t i = 0; i < c_.ports.size(); ++i) {
      if (bad(indexed("port", i) + ".addresses")) return false;
      for (size_t j = 0; j < c_.ports[i].addresses.size(); ++j) {
        if (bad(indexed(indexed("port", i) + ".addresses", j))) return false;
      }
    }
    return true;
  }

  static std::string prefixes_of(const PortConfig& p) {
    std::string s;
    for (const auto& a : p.addresses) s += (s.empty() ? "" : ", ") + a.str();
    return s.empty() ? "none" : s;
  }

  static bool on_link(const PortConfig& p, const IpAddr& a) {
    return std::any_of(p.addresses.begin(), p.addresses.end(),
                       [&](const IpPrefix& pre) { return pre.contains(a); });
  }

  const PortConfig* local_owner(const IpAddr& a) const {
    for (const auto& p : c_.ports) {
      for (const auto& pre : p.addresses) {
        if (pre.addr == a) return &p;
      }
    }
    return nullptr;
  }

  // A next hop (route via, neighbor address) must be reachable on `port` or on some port.
  // `check_address` false: the address is already reported, check only the port reference.
  void check_next_hop(const std::string& key, const std::string& port_key, const IpAddr& a,
                      const std::string& port_name, const char* what, bool check_address) {
    // The port reference is checked on its own: it is wrong whatever the address is.
    const PortConfig* named = nullptr;
    if (!port_name.empty()) {
      if (bad(port_key) || bad("port")) return;
      named = find_port(port_key, port_name);
      if (!named) return;
    }
    if (!check_address || bad(key)) return;
    if (a.is_zero() || is_multicast(a)) {
      error(key, std::string("not a usable ") + what + ": " + a.str());
      return;
    }
    if (!ports_known()) return;
    if (const PortConfig* owner = local_owner(a)) {
      error(key, std::string(what) + " " + a.str() + " is a local address of port " +
                     quoted(owner->name));
      return;
    }
    if (named) {
      const PortConfig* p = named;
      if (!on_link(*p, a)) {
        error(key, std::string(what) + " " + a.str() + " is not on-link of port " +
                       quoted(p->name) + " (its prefixes: " + prefixes_of(*p) + ")");
      }
      return;
    }
    for (const auto& p : c_.ports) {
      if (on_link(p, a)) return;
    }
    std::string all;
    for (const auto& p : c_.ports) {
      for (const auto& pre : p.addresses) all += (all.empty() ? "" : ", ") + pre.str();
    }
    error(key, std::string(what) + " " + a.str() + " is not on-link of any port address" +
                   (all.empty() ? " (no port has an address)" : " (port prefixes: " + all + ")"));
  }

  void check_mac(const std::string& key, const MacAddr& m) {
    if (bad(key)) return;
    if (m.is_zero() || m.is_multicast()) {
      error(key, "expected a unicast MAC address, got " + m.str() +
                     (m.is_zero() ? "" : " (the group bit, bit 0 of the first byte, is set)"));
    }
  }

  void check_gateway() {
    check_range("gateway.workers", c_.gateway.workers, kWorkersSpec);
    check_range("gateway.drain_timeout_ms", c_.gateway.drain_timeout_ms, kDrainTimeoutSpec);
  }

  void check_ports() {
    if (c_.ports.empty()) {
      if (!bad("port")) {
        error("port", "no [[port]] defined (meshgate needs at least one port to receive on)");
      }
      return;
    }
    if (c_.ports.size() > kMaxPorts && !bad("port")) {
      error(indexed("port", kMaxPorts),
            "too many ports: " + std::to_string(c_.ports.size()) + " (at most " +
                std::to_string(kMaxPorts) + " [[port]] tables; the dataplane's per-port arrays "
                "hold that many)");
    }
    std::map<std::string, std::string> names, devices;  // value -> key of the first use
    std::map<IpAddr, std::string> locals;
    for (size_t i = 0; i < c_.ports.size(); ++i) {
      const PortConfig& p = c_.ports[i];
      const std::string k = indexed("port", i);
      check_name(k + ".name", p.name, "a port name");
      if (!bad(k + ".name") && !p.name.empty()) {
        if (auto [it, fresh] = names.emplace(p.name, k + ".name"); !fresh) {
          error(k + ".name", "duplicate port name " + quoted(p.name) + " (first defined at " +
                                 where(at(it->second)) + ")");
        }
      }
      check_non_empty(k + ".device", p.device, "a PCI address or DPDK vdev string");
      if (!bad(k + ".device") && !p.device.empty()) {
        if (auto [it, fresh] = devices.emplace(p.device, k + ".device"); !fresh) {
          error(k + ".device", "device " + quoted(p.device) + " is already used by " +
                                   it->second.substr(0, it->second.find('.')) + " (" +
                                   where(at(it->second)) + ")");
        }
      }
      bool has_v6 = false;
      for (size_t j = 0; j < p.addresses.size(); ++j) {
        const std::string ak = indexed(k + ".addresses", j);
        if (bad(ak)) continue;
        const IpAddr& a = p.addresses[j].addr;
        has_v6 |= !a.is_v4();
        if (a.is_zero() || is_multicast(a)) {
          error(ak, "not a usable local address: " + a.str());
          continue;
        }
        if (auto [it, fresh] = locals.emplace(a, ak); !fresh) {
          error(ak, "address " + a.str() + " is already used at " + it->second + " (" +
                        where(at(it->second)) + ")");
        }
      }
      if (p.mac) check_mac(k + ".mac", *p.mac);
      check_range(k + ".rx_descriptors", p.rx_descriptors, kDescriptorsSpec);
      check_range(k + ".tx_descriptors", p.tx_descriptors, kDescriptorsSpec);
      const std::string mk = k + ".mtu";
      if (has_v6 && !bad(mk) && p.mtu >= kMtuSpec.lo && p.mtu < kMinIpv6Mtu) {
        error(mk, "expected an integer " + std::to_string(kMinIpv6Mtu) + ".." +
                      std::to_string(kMtuSpec.hi) +
                      " (the port has an IPv6 address; RFC 8200 §5 needs 1280), got " +
                      std::to_string(p.mtu));
      } else {
        check_range(mk, p.mtu, kMtuSpec);
      }
    }
  }

  void check_routes() {
    std::map<std::pair<IpAddr, uint8_t>, std::string> seen;
    for (size_t i = 0; i < c_.routes.size(); ++i) {
      const RouteConfig& r = c_.routes[i];
      const std::string k = indexed("route", i);
      const bool prefix_ok = !bad(k + ".prefix");
      if (prefix_ok) {
        const IpPrefix net = r.prefix.network();
        if (!(net == r.prefix)) {
          error(k + ".prefix", "host bits set in " + r.prefix.str() + " (did you mean '" +
                                   net.str() + "'?)");
        } else if (auto [it, fresh] = seen.emplace(std::pair{net.addr, net.len}, k + ".prefix");
                   !fresh) {
          error(k + ".prefix", "duplicate route for " + net.str() + " (first at " +
                                   where(at(it->second)) + ")");
        }
      }
      const bool mixed = prefix_ok && !bad(k + ".via") && r.via.is_v4() != r.prefix.addr.is_v4();
      if (mixed) {
        error(k + ".via", "next hop " + r.via.str() + " is " + family(r.via) + " but prefix " +
                              r.prefix.str() + " is " + family(r.prefix.addr));
      }
      check_next_hop(k + ".via", k + ".port", r.via, r.port, "next hop", !mixed);
    }
  }

  void check_neighbors() {
    std::map<std::pair<IpAddr, std::string>, std::string> seen;
    for (size_t i = 0; i < c_.neighbors.size(); ++i) {
      const NeighborConfig& nb = c_.neighbors[i];
      const std::string k = indexed("neighbor", i);
      check_mac(k + ".mac", nb.mac);
      bool duplicate = false;
      if (!bad(k + ".address")) {
        auto [it, fresh] = seen.emplace(std::pair{nb.address, nb.port}, k + ".address");
        if (!fresh) {
          duplicate = true;
          error(k + ".address", "duplicate neighbor " + nb.address.str() + " (first at " +
                                    where(at(it->second)) + ")");
        }
      }
      check_next_hop(k + ".address", k + ".port", nb.address, nb.port, "neighbor", !duplicate);
    }
  }

  static std::string endpoint(const IpAddr& a, uint16_t port) {
    return a.is_v4() ? a.str() + ":" + std::to_string(port)
                     : "[" + a.str() + "]:" + std::to_string(port);
  }

  bool has_local_address(bool v4) const {
    return std::any_of(c_.fullnat.local_addresses.begin(), c_.fullnat.local_addresses.end(),
                       [&](const IpAddr& a) { return a.is_v4() == v4; });
  }

  void check_services() {
    std::map<std::string, std::string> names;  // name -> key of the first use
    std::map<std::tuple<IpAddr, uint16_t, L4Proto>, size_t> vips;
    for (size_t i = 0; i < c_.services.size(); ++i) {
      const ServiceConfig& s = c_.services[i];
      const std::string k = indexed("service", i);
      check_name(k + ".name", s.name, "a service name");
      if (!bad(k + ".name") && !s.name.empty()) {
        if (auto [it, fresh] = names.emplace(s.name, k + ".name"); !fresh) {
          error(k + ".name", "duplicate service name " + quoted(s.name) + " (first defined at " +
                                 where(at(it->second)) + ")");
        }
      }
      const bool vip_ok = !bad(k + ".vip");
      if (const char* why = vip_ok ? unusable_vip(s.vip) : nullptr) {
        error(k + ".vip", "not a usable VIP: " + s.vip.str() + " (" + why + ")");
      } else if (const PortConfig* owner = vip_ok && ports_known() ? local_owner(s.vip)
                                                                    : nullptr) {
        error(k + ".vip", "VIP " + s.vip.str() + " is a local address of port " +
                              quoted(owner->name) + " (the gateway answers it itself; give the "
                              "service an address of its own)");
      }
      check_range(k + ".port", s.port, kL4PortSpec);
      const bool port_ok = !bad(k + ".port") && s.port != 0;
      if (vip_ok && port_ok && !bad(k + ".protocol")) {
        const auto key = std::tuple{s.vip, s.port, s.protocol};
        if (auto [it, fresh] = vips.emplace(key, i); !fresh) {
          const ServiceConfig& first = c_.services[it->second];
          error(k + ".vip", "services " + quoted(first.name) + " and " + quoted(s.name) +
                                " both use " + endpoint(s.vip, s.port) + "/" +
                                (s.protocol == L4Proto::kTcp ? "tcp" : "udp") + " (" +
                                quoted(first.name) + " at " +
                                where(at(indexed("service", it->second))) + ")");
        }
      }
      check_table_size(k, s);
      check_range(k + ".gue_port", s.gue_port, kL4PortSpec);
      if (s.backends.empty()) {
        if (!bad(k + ".backend")) {
          error(k + ".backend",
                "no backends (add at least one [[service.backend]] with address and port)");
        }
      }
      check_backends(k, s, vip_ok);
      check_snat_mode(k + ".mode", s.mode, vip_ok ? std::optional<bool>(s.vip.is_v4())
                                                  : std::nullopt);
      if (s.mode == ForwardMode::kProxy && s.protocol != L4Proto::kTcp && !bad(k + ".mode") &&
          !bad(k + ".protocol")) {
        error(k + ".protocol", "mode \"proxy\" carries TCP only, got protocol \"udp\"");
      }
      if (s.proxy_protocol != ProxyProtocol::kNone && s.mode != ForwardMode::kProxy &&
          !bad(k + ".mode")) {
        error(k + ".proxy_protocol", std::string("proxy_protocol applies to mode \"proxy\" "
                                                 "only, the service's mode is ") +
                                         quoted(forward_mode_name(s.mode)));
      }
    }
  }

  void check_table_size(const std::string& k, const ServiceConfig& s) {
    const std::string tk = k + ".table_size";
    if (bad(tk) || s.table_size == 0) return;
    const std::string got = ", got " + std::to_string(s.table_size);
    if (s.table_size < kMinTableSize || s.table_size > kMaxTableSize) {
      error(tk, "expected " + int_expected(kTableSizeSpec) + got);
    } else if (!is_prime(s.table_size)) {
      // Maglev §3.4: the permutation covers every slot only when the size is prime.
      error(tk, "expected " + int_expected(kTableSizeSpec) + got + " (not prime; next prime: " +
                    std::to_string(next_prime(s.table_size)) + ")");
    } else if (s.table_size < s.backends.size()) {
      error(tk, "table_size " + std::to_string(s.table_size) + " is smaller than the " +
                    std::to_string(s.backends.size()) + " backends (every backend needs a slot)");
    }
  }

  void check_backends(const std::string& k, const ServiceConfig& s, bool vip_ok) {
    const bool dsr = s.mode == ForwardMode::kDsrIpip || s.mode == ForwardMode::kDsrGue;
    std::map<std::pair<IpAddr, uint16_t>, std::string> seen;
    for (size_t j = 0; j < s.backends.size(); ++j) {
      const BackendConfig& b = s.backends[j];
      const std::string bk = indexed(k + ".backend", j);
      const bool addr_ok = !bad(bk + ".address");
      check_range(bk + ".port", b.port, kL4PortSpec);
      check_range(bk + ".weight", b.weight, kWeightSpec);
      const bool port_ok = !bad(bk + ".port") && b.port != 0;
      if (addr_ok) {
        if (b.address.is_zero() || is_multicast(b.address)) {
          error(bk + ".address", "not a usable backend address: " + b.address.str());
        } else if (vip_ok && b.address.is_v4() != s.vip.is_v4()) {
          error(bk + ".address", "backend " + b.address.str() + " is " + family(b.address) +
                                     " but the service VIP " + s.vip.str() + " is " +
                                     family(s.vip));
        }
      }
      if (addr_ok && port_ok) {
        if (auto [it, fresh] = seen.emplace(std::pair{b.address, b.port}, bk); !fresh) {
          error(bk + ".address", "duplicate backend " + endpoint(b.address, b.port) +
                                     " (first at " + where(at(it->second)) + ")");
        }
      }
      // DSR forwards the client's packet unchanged inside a tunnel and the backend answers
      // the client directly, so there is no place to translate the port.
      if (dsr && port_ok && !bad(k + ".port") && b.port != s.port) {
        error(bk + ".port", std::string(forward_mode_name(s.mode)) +
                                " cannot translate ports: expected the service port " +
                                std::to_string(s.port) + ", got " + std::to_string(b.port));
      }
    }
  }

  // `who` opens `what` from [fullnat] local_addresses: an error at `key` when there are none.
  // True when it reported one.
  bool need_local_addresses(const std::string& key, const std::string& who, const char* what) {
    if (!c_.fullnat.local_addresses.empty()) return false;
    error(key, who + " needs [fullnat] local_addresses (the source addresses of " + what + ")");
    return true;
  }

  // fullnat and proxy open connections from one of our own addresses; `v4` is the family the
  // connections need, when known.
  void check_snat_mode(const std::string& key, ForwardMode mode, std::optional<bool> v4) {
    if (bad(key) || (mode != ForwardMode::kFullnat && mode != ForwardMode::kProxy)) return;
    if (bad("fullnat")) return;
    const std::string name = quoted(forward_mode_name(mode));
    if (need_local_addresses(key, "mode " + name, "connections to backends")) return;
    if (v4 && !has_local_address(*v4) && !bad("fullnat.local_addresses")) {
      error(key, "mode " + name + " needs an " + (*v4 ? "IPv4" : "IPv6") +
                     " address in [fullnat] local_addresses");
    }
  }

  void check_fullnat() {
    std::map<IpAddr, std::string> seen;
    for (size_t i = 0; i < c_.fullnat.local_addresses.size(); ++i) {
      const std::string k = indexed("fullnat.local_addresses", i);
      if (bad(k)) continue;
      const IpAddr& a = c_.fullnat.local_addresses[i];
      if (a.is_zero() || is_multicast(a)) {
        error(k, "not a usable local address: " + a.str());
      } else if (auto [it, fresh] = seen.emplace(a, k); !fresh) {
        error(k, "duplicate local address " + a.str() + " (first at " + where(at(it->second)) +
                     ")");
      }
    }
  }

  void check_proxy() {
    const ProxyConfig& px = c_.proxy;
    check_range("proxy.idle_timeout_s", px.idle_timeout_s, kProxyIdleSpec);
    check_range("proxy.max_connections", px.max_connections, kProxyConnectionsSpec);
    check_range("proxy.buffer_bytes", px.buffer_bytes, kProxyBufferSpec);
    check_range("proxy.memory_mb", px.memory_mb, kProxyMemorySpec);
    check_range("proxy.time_wait_s", px.time_wait_s, kProxyTimeWaitSpec);
    if (!bad("proxy.memory_mb") && !bad("proxy.buffer_bytes") &&
        uint64_t(px.memory_mb) << 20 < 4ull * px.buffer_bytes) {
      error("proxy.memory_mb", "expected room for at least one session's four buffers (4 x "
                               "buffer_bytes = " + std::to_string(4ull * px.buffer_bytes) +
                               " bytes), got " + std::to_string(px.memory_mb) + " MiB");
    }
  }

  void check_conntrack() {
    const ConntrackConfig& ct = c_.conntrack;
    check_range("conntrack.max_flows", ct.max_flows, kMaxFlowsSpec);
    check_range("conntrack.tcp_syn", ct.tcp_syn, kTimeoutSpec);
    check_range("conntrack.tcp_established", ct.tcp_established, kTimeoutSpec);
    check_range("conntrack.tcp_fin", ct.tcp_fin, kTimeoutSpec);
    check_range("conntrack.tcp_time_wait", ct.tcp_time_wait, kTimeoutSpec);
    check_range("conntrack.udp", ct.udp, kTimeoutSpec);
    check_range("conntrack.icmp", ct.icmp, kTimeoutSpec);
  }

  void check_mesh() {
    const MeshConfig& m = c_.mesh;
    if (bad("mesh")) return;
    const bool source_ok = !bad("mesh.source");
    if (source_ok && m.source == MeshSource::kFile && m.path.empty() && !bad("mesh.path")) {
      error("mesh.path", "missing required key (source = \"file\" reads the mesh from this file)");
    }
    if (source_ok && m.source == MeshSource::kXds && !bad("mesh.address")) {
      if (m.address.empty()) {
        error("mesh.address",
              "missing required key (source = \"xds\" needs the xDS server as \"host:port\", "
              "e.g. \"istiod.istio-system.svc:15012\")");
      } else if (auto hp = split_host_port(m.address); !hp || hp->port < 1 || hp->port > 65535) {
        error("mesh.address", "expected \"host:port\" (port 1..65535; IPv6 as \"[::1]:15012\"), "
                              "got " + quoted(m.address));
      }
    }
    if (!bad("mesh.table_size") && m.table_size != 0) {
      const std::string got = ", got " + std::to_string(m.table_size);
      if (m.table_size < kMinTableSize) {
        error("mesh.table_size", "expected " + int_expected(kTableSizeSpec) + got);
      } else if (!is_prime(m.table_size)) {
        // Maglev §3.4: the permutation covers every slot only when the size is prime.
        error("mesh.table_size", "expected " + int_expected(kTableSizeSpec) + got +
                                     " (not prime; next prime: " +
                                     std::to_string(next_prime(m.table_size)) + ")");
      }
    }
    if (!bad("mesh.mode")) {
      if (m.mode != ForwardMode::kDnat && m.mode != ForwardMode::kFullnat &&
          m.mode != ForwardMode::kProxy) {
        error("mesh.mode", std::string("expected one of dnat, fullnat, proxy, got \"") +
                               forward_mode_name(m.mode) +
                               "\" (mesh endpoints are not set up for DSR)");
      } else if (m.source != MeshSource::kNone) {
        check_snat_mode("mesh.mode", m.mode, std::nullopt);
      }
    }
  }

  void check_hbone() {
    const HboneConfig& h = c_.hbone;
    if (bad("hbone")) return;
    check_range("hbone.port", h.port, kL4PortSpec);
    check_range("hbone.cert_ttl", h.cert_ttl, kCertTtlSpec);
    check_range("hbone.max_connections", h.max_connections, kHboneConnectionsSpec);
    check_range("hbone.max_handshakes", h.max_handshakes, kHboneConnectionsSpec);
    check_range("hbone.max_handshakes_per_source", h.max_handshakes_per_source,
                kHboneConnectionsSpec);
    check_range("hbone.handshake_timeout_ms", h.handshake_timeout_ms, kHboneHandshakeTimeoutSpec);
    check_range("hbone.memory_mb", h.memory_mb, kHboneMemorySpec);
    // A certificate without its key (or the reverse) cannot be loaded.
    if (!bad("hbone.cert_chain") && !bad("hbone.private_key") &&
        h.cert_chain.empty() != h.private_key.empty()) {
      const bool missing_key = h.private_key.empty();
      error(missing_key ? "hbone.private_key" : "hbone.cert_chain",
            missing_key ? "missing required key (cert_chain is set, so the matching private_key "
                          "is needed)"
                        : "missing required key (private_key is set, so the matching cert_chain "
                          "is needed)");
    }
    check_non_empty("hbone.trust_domain", h.trust_domain, "a trust domain like \"cluster.local\"");
    if (!h.ca_address.empty() && !bad("hbone.ca_address")) {
      // One source of the gateway's certificate.
      if (!h.cert_chain.empty() && !bad("hbone.cert_chain")) {
        error("hbone.cert_chain", "expected no cert_chain when ca_address is set (the certificate "
                                  "comes from the Istio CA)");
      }
      if (!bad("hbone.identity")) {
        dp::tls::SpiffeId id;
        if (h.identity.empty()) {
          error("hbone.identity", "missing required key (ca_address is set, so the SPIFFE id to "
                                  "request is needed, e.g. \"spiffe://cluster.local/ns/istio-system/"
                                  "sa/meshgate\")");
        } else if (!dp::tls::parse_spiffe_id(h.identity, id)) {
          error("hbone.identity", "expected a SPIFFE id \"spiffe://<trust domain>/ns/<namespace>/"
                                  "sa/<service account>\", got \"" + h.identity + "\"");
        }
      }
    }
    // Terminated tunnels connect upstream, originated ones dial <pod>:15008: from our own
    // addresses, like fullnat and proxy.
    const char* key = h.ca_address.empty() ? "hbone.cert_chain" : "hbone.ca_address";
    if (uses_hbone(c_) && !bad("fullnat") && !bad(key)) {
      need_local_addresses(key, "HBONE", "the connections it opens to upstreams and to HBONE peers");
    }
  }

  void check_admin() {
    const std::string& l = c_.admin.listen;
    if (bad("admin.listen") || l.empty()) return;
    auto hp = split_host_port(l);
    bool ok = hp && hp->port >= 1 && hp->port <= 65535;
    if (ok) {
      // The admin server binds, so the host must be an address (or localhost), not a name to
      // resolve; IPv6 must be bracketed so the port is unambiguous.
      const auto a = IpAddr::parse(hp->host);
      ok = hp->host == "localhost" ? !hp->bracketed : a && a->is_v4() != hp->bracketed;
    }
    if (!ok) {
      error("admin.listen",
            "expected \"host:port\" with an IP address host (IPv6 as \"[::1]:15000\"), or \"\" "
            "to disable, got " + quoted(l));
    }
  }

  const Config& c_;
  const Positions& positions_;
  const KeySet& failed_;
  std::vector<ConfigError> errors_;
};

// Positions for a config built in code: only the table positions its structs carry.
Positions struct_positions(const Config& c) {
  Positions p;
  auto add = [&](const std::string& key, const SourcePos& pos) {
    if (pos.line != 0) p[key] = pos;
  };
  add("gateway", c.gateway.pos);
  for (size_t i = 0; i < c.ports.size(); ++i) add(indexed("port", i), c.ports[i].pos);
  for (size_t i = 0; i < c.routes.size(); ++i) add(indexed("route", i), c.routes[i].pos);
  for (size_t i = 0; i < c.neighbors.size(); ++i) add(indexed("neighbor", i), c.neighbors[i].pos);
  for (size_t i = 0; i < c.services.size(); ++i) {
    const std::string k = indexed("service", i);
    add(k, c.services[i].pos);
    for (size_t j = 0; j < c.services[i].backends.size(); ++j) {
      add(indexed(k + ".backend", j), c.services[i].backends[j].pos);
    }
  }
  add("fullnat", c.fullnat.pos);
  add("proxy", c.proxy.pos);
  add("conntrack", c.conntrack.pos);
  add("mesh", c.mesh.pos);
  add("hbone", c.hbone.pos);
  add("control", c.control.pos);
  add("admin", c.admin.pos);
  return p;
}

// File order, so the first error a reader meets is the first one in the file.
void sort_by_position(std::vector<ConfigError>& errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const ConfigError& a, const ConfigError& b) {
    return std::pair{a.pos.line, a.pos.column} < std::pair{b.pos.line, b.pos.column};
  });
}

}  // namespace

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

Result<Config, ConfigErrors> parse_config(std::string_view toml_text, const std::string& name) {
  toml::table root;
  try {
    root = toml::parse(toml_text, std::string_view(name));
  } catch (const toml::parse_error& err) {
    const auto& b = err.source().begin;
    return ConfigErrors{{ConfigError{SourcePos{name, b.line, b.column}, "",
                                     "invalid TOML: " + std::string(err.description())}}};
  }
  Parser parser(name);
  Config config = parser.parse(root);
  std::vector<ConfigError> errors = std::move(parser.errors());
  for (auto& e : Validator(config, parser.positions(), parser.failed()).run()) {
    errors.push_back(std::move(e));
  }
  if (!errors.empty()) {
    sort_by_position(errors);
    return ConfigErrors{std::move(errors)};
  }
  config.positions = parser.positions();
  return config;
}

Result<Config, ConfigErrors> load_config(const std::string& path) {
  auto text = read_regular_file(path, kMaxConfigFileBytes);
  if (!text) {
    return ConfigErrors{
        {ConfigError{SourcePos{path, 0, 0}, "", "config file " + text.error().message}}};
  }
  return parse_config(*text, path);
}

SourcePos position_of(const Config& config, std::string_view key) {
  for (;;) {
    if (auto it = config.positions.find(key); it != config.positions.end()) return it->second;
    if (key.empty()) return SourcePos{config.path, 0, 0};
    const auto cut = key.find_last_of(".[");
    key = cut == std::string_view::npos ? std::string_view{} : key.substr(0, cut);
  }
}

ConfigErrors validate_config(const Config& config) {
  const Positions positions = struct_positions(config);
  const KeySet none;
  ConfigErrors out{Validator(config, positions, none).run()};
  sort_by_position(out.errors);
  return out;
}

}  // namespace meshgate::ctl

namespace meshgate::ctl {

uint32_t resolve_build_threads(uint32_t configured, uint32_t workers, uint32_t cpus) {
  if (configured != 0) return configured;
  return cpus > workers ? std::min(cpus - workers, kMaxAutoBuildThreads) : 1;
}

bool uses_proxy(const Config& c) {
  if (c.mesh.source != MeshSource::kNone && c.mesh.mode == ForwardMode::kProxy) return true;
  return std::any_of(c.services.begin(), c.services.end(),
                     [](const ServiceConfig& s) { return s.mode == ForwardMode::kProxy; });
}

bool uses_hbone(const Config& c) {
  return !c.hbone.ca_address.empty() || !c.hbone.cert_chain.empty();
}

}  // namespace meshgate::ctl
