// The validator: every check a Config built in code could also fail (ranges, references between
// tables, duplicates, mode-specific needs), run on parsed and hand-built configs alike so there
// is one definition of "valid". Keys the parser already reported are skipped, so one mistake
// gives one error, at the value that is wrong. Also the questions asked of a valid Config
// (uses_proxy, uses_hbone, resolve_build_threads).
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "control/config/config_internal.h"
#include "control/names/deny_compile.h"
#include "control/names/name_compile.h"
#include "control/snapshot/maglev.h"
#include "dataplane/tls/spiffe.h"

namespace meshgate::ctl {
namespace config_detail {
namespace {

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

// Why `name` cannot be a kernel interface the gateway creates, or "". Linux takes up to 15
// bytes (IFNAMSIZ - 1) without '/', ':' or white space; ',' and '=' would end the DPDK device
// argument that carries it, so the set is the portable one.
std::string interface_name_problem(std::string_view name) {
  constexpr size_t kMaxLen = 15;
  if (name.size() > kMaxLen) return std::to_string(name.size()) + " characters";
  if (name == "." || name == "..") return "a directory name";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') {
      return std::string("character '") + (c < 0x20 || c >= 0x7f ? '?' : ch) + "'";
    }
  }
  return "";
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
    check_node_ports();
    check_listeners();
    check_fullnat();
    check_proxy();
    check_conntrack();
    check_mesh();
    check_hbone();
    check_range("control.build_threads", c_.control.build_threads, kBuildThreadsSpec);
    check_admin();
    check_bgp();
    check_access_log();
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
    std::vector<std::string_view> names;
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
    // value -> key of the first use
    std::map<std::string, std::string> names, devices, host_ifs;
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
      if (!p.host_interface.empty() && !bad(k + ".host_interface")) {
        const std::string hk = k + ".host_interface";
        if (const std::string why = interface_name_problem(p.host_interface); !why.empty()) {
          error(hk, "expected a kernel interface name (1 to 15 letters, digits, '-', '_' or "
                    "'.'), got " + quoted(p.host_interface) + ": " + why);
        } else if (auto [it, fresh] = host_ifs.emplace(p.host_interface, hk); !fresh) {
          error(hk, "interface " + quoted(p.host_interface) + " is already the host interface "
                    "of " + it->second.substr(0, it->second.find('.')) + " (" +
                    where(at(it->second)) + ")");
        }
      }
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

  // A name (check_name) not used before in `names` (name -> key of its first use); `what`:
  // "service", "listener".
  void check_unique_name(const std::string& key, const std::string& name, const std::string& what,
                         std::map<std::string, std::string>& names) {
    check_name(key, name, ("a " + what + " name").c_str());
    if (bad(key) || name.empty()) return;
    if (auto [it, fresh] = names.emplace(name, key); !fresh) {
      error(key, "duplicate " + what + " name " + quoted(name) + " (first defined at " +
                     where(at(it->second)) + ")");
    }
  }

  // A VIP at `key` a `who` ("service", "listener") may take: unicast, not a port's own
  // address. False when the parser already reported it (its value is a placeholder).
  bool check_vip(const std::string& key, const IpAddr& vip, const char* who) {
    if (bad(key)) return false;
    if (const char* why = unusable_vip(vip)) {
      error(key, "not a usable VIP: " + vip.str() + " (" + why + ")");
    } else if (const PortConfig* owner = ports_known() ? local_owner(vip) : nullptr) {
      error(key, "VIP " + vip.str() + " is a local address of port " + quoted(owner->name) +
                     " (the gateway answers it itself; give the " + who +
                     " an address of its own)");
    }
    return true;
  }

  void check_services() {
    std::map<std::string, std::string> names;  // name -> key of the first use
    std::map<std::tuple<IpAddr, uint16_t, L4Proto>, size_t> vips;
    for (size_t i = 0; i < c_.services.size(); ++i) {
      const ServiceConfig& s = c_.services[i];
      const std::string k = indexed("service", i);
      check_unique_name(k + ".name", s.name, "service", names);
      const bool vip_ok = check_vip(k + ".vip", s.vip, "service");
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
      check_health_check(k, s);
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
                                         quoted(dp::mode_name(s.mode)));
      }
      check_range(k + ".inspect_bytes", s.inspect_bytes, kInspectBytesSpec);
      check_service_options(k, s);
      check_deny(k, s.deny);
      if (!s.deny.empty() && s.mode != ForwardMode::kProxy && !bad(k + ".mode")) {
        error(k + ".deny", std::string("deny signatures apply to mode \"proxy\" only (the "
                                       "gateway reads the client's bytes), the service's mode "
                                       "is ") + quoted(dp::mode_name(s.mode)));
      }
    }
  }

  // session_affinity, affinity_timeout_s, node_port.
  void check_service_options(const std::string& k, const ServiceConfig& s) {
    check_range(k + ".affinity_timeout_s", s.affinity_timeout_s, kAffinityTimeoutSpec);
    if (s.session_affinity == SessionAffinity::kClientIp && s.mode == ForwardMode::kProxy &&
        !bad(k + ".mode") && !bad(k + ".session_affinity")) {
      error(k + ".session_affinity",
            "session_affinity applies to the packet modes (dnat, fullnat, dsr-ipip, dsr-gue); "
            "mode \"proxy\" picks per connection");
    }
    if (s.node_port == 0 || bad(k + ".node_port")) return;
    const std::string nk = k + ".node_port";
    if (!bad(k + ".mode") && (dp::is_dsr(s.mode) || s.mode == ForwardMode::kProxy)) {
      error(nk, std::string("node_port needs replies through the gateway; mode ") +
                    quoted(dp::mode_name(s.mode)) +
                    (dp::is_dsr(s.mode)
                         ? " has the backend answer the client directly, and it cannot answer "
                           "as the port address"
                         : " is not supported with node_port"));
      return;
    }
    const bool tcp = s.protocol == L4Proto::kTcp;
    if (tcp && uses_hbone(c_) && s.node_port == c_.hbone.port) {
      error(nk, "node_port " + std::to_string(s.node_port) +
                    " is the [hbone] port on every port address");
    }
    if (tcp && c_.bgp.enabled && s.node_port == 179) {
      error(nk, "node_port 179 is BGP's port (the [bgp] daemon listens on the port addresses)");
    }
  }

  // Two services with one node_port and protocol would share every port address:port.
  void check_node_ports() {
    std::map<std::pair<uint16_t, L4Proto>, size_t> seen;
    for (size_t i = 0; i < c_.services.size(); ++i) {
      const ServiceConfig& s = c_.services[i];
      const std::string k = indexed("service", i);
      if (s.node_port == 0 || bad(k + ".node_port") || bad(k + ".protocol")) continue;
      const auto [it, fresh] = seen.emplace(std::pair{s.node_port, s.protocol}, i);
      if (fresh) continue;
      error(k + ".node_port", "node_port " + std::to_string(s.node_port) + " is taken by service " +
                                  quoted(c_.services[it->second].name) + " (at " +
                                  where(at(indexed("service", it->second) + ".node_port")) + ")");
    }
  }

  // A listener's route target: a [[service]] (TCP) by name, or a mesh service hostname when a
  // mesh source is configured (resolved in each snapshot; a name the mesh does not have yet
  // resets its connections until it does). `port_key`: the route's port, for mesh services only.
  void check_route_service(const std::string& key, const std::string& name,
                           const std::string& port_key, bool has_port) {
    if (bad(key)) return;
    if (name.empty()) {
      error(key, "expected a [[service]] name or a mesh service hostname, got \"\"");
      return;
    }
    for (size_t i = 0; i < c_.services.size(); ++i) {
      const ServiceConfig& s = c_.services[i];
      if (s.name != name) continue;
      if (s.protocol != L4Proto::kTcp && !bad(indexed("service", i) + ".protocol")) {
        error(key, "service " + quoted(name) + " is UDP; a listener routes TCP connections");
      }
      if (has_port && !bad(port_key)) {
        error(port_key, "port applies to mesh service hostnames; service " + quoted(name) +
                            " brings its backends' ports");
      }
      return;
    }
    const bool fqdn = name.find('.') != std::string::npos;
    if (fqdn && c_.mesh.source != MeshSource::kNone) return;
    std::vector<std::string_view> names;
    for (const auto& s : c_.services) names.push_back(s.name);
    std::string hint = did_you_mean(closest(name, names));
    if (hint.empty()) {
      hint = fqdn ? " (a mesh service hostname needs [mesh] source)"
                  : " (a mesh service is named by its hostname, e.g. "
                    "\"reviews.bookinfo.svc.cluster.local\")";
    }
    error(key, "no [[service]] named " + quoted(name) + hint);
  }

  void check_listeners() {
    std::map<std::string, std::string> names;
    std::map<std::pair<IpAddr, uint16_t>, std::string> taken;  // TCP VIP:port -> key
    for (size_t i = 0; i < c_.services.size(); ++i) {
      const ServiceConfig& s = c_.services[i];
      const std::string k = indexed("service", i);
      if (s.protocol == L4Proto::kTcp && !bad(k + ".vip") && !bad(k + ".port")) {
        taken.emplace(std::pair{s.vip, s.port}, k);
      }
    }
    for (size_t i = 0; i < c_.listeners.size(); ++i) {
      const ListenerConfig& l = c_.listeners[i];
      const std::string k = indexed("listener", i);
      check_unique_name(k + ".name", l.name, "listener", names);
      const bool vip_ok = check_vip(k + ".vip", l.vip, "listener");
      check_range(k + ".port", l.port, kL4PortSpec);
      if (vip_ok && !bad(k + ".port") && l.port != 0) {
        if (auto [it, fresh] = taken.emplace(std::pair{l.vip, l.port}, k); !fresh) {
          error(k + ".vip", endpoint(l.vip, l.port) + "/tcp is already taken by " +
                                it->second + " (at " + where(at(it->second)) + ")");
        }
      }
      check_range(k + ".peek_bytes", l.peek_bytes, kPeekBytesSpec);
      check_range(k + ".peek_timeout_ms", l.peek_timeout_ms, kPeekTimeoutSpec);
      check_range(k + ".inspect_bytes", l.inspect_bytes, kInspectBytesSpec);
      if (!bad(k + ".peek_bytes") && !bad("proxy.buffer_bytes") &&
          l.peek_bytes > c_.proxy.buffer_bytes) {
        error(k + ".peek_bytes", "peek_bytes " + std::to_string(l.peek_bytes) +
                                     " exceeds [proxy] buffer_bytes " +
                                     std::to_string(c_.proxy.buffer_bytes) +
                                     " (the bytes read are replayed to the backend in one piece)");
      }
      if (l.routes.empty() && l.default_service.empty() && !bad(k + ".route") &&
          !bad(k + ".default_service")) {
        error(k + ".route", "no [[listener.route]] and no default_service: every connection "
                            "would be reset");
      }
      for (size_t j = 0; j < l.routes.size(); ++j) {
        const ListenerRouteConfig& r = l.routes[j];
        const std::string rk = indexed(k + ".route", j);
        if (r.hostnames.empty() && !bad(rk + ".hostnames")) {
          error(rk + ".hostnames", "expected at least one hostname");
        }
        if (positions_.contains(rk + ".port")) check_range(rk + ".port", r.port, kL4PortSpec);
        check_route_service(rk + ".service", r.service, rk + ".port",
                            positions_.contains(rk + ".port"));
      }
      if (!l.default_service.empty()) {
        check_route_service(k + ".default_service", l.default_service, "", false);
      }
      if (!bad(k)) need_local_addresses(k, "listener " + quoted(l.name), "connections to backends");
      check_hostnames(k, l);
      check_deny(k, l.deny);
    }
  }

  // Every hostname pattern on its own, then the listener's set compiled as the snapshot will
  // (a regex can fail only in company: Hyperscan's limits are the whole set's).
  void check_hostnames(const std::string& k, const ListenerConfig& l) {
    std::vector<std::string> patterns;
    std::vector<std::string> keys;
    std::map<std::string, std::string> seen;  // lowercased pattern -> key of its first use
    bool all_ok = true;
    for (size_t j = 0; j < l.routes.size(); ++j) {
      const std::string hk = indexed(k + ".route", j) + ".hostnames";
      if (bad(hk)) {
        all_ok = false;
        continue;
      }
      for (size_t h = 0; h < l.routes[j].hostnames.size(); ++h) {
        const std::string& p = l.routes[j].hostnames[h];
        const std::string key = indexed(hk, h);
        if (bad(key)) {
          all_ok = false;
          continue;
        }
        if (const std::string why = check_name_pattern(p); !why.empty()) {
          error(key, "bad hostname pattern " + quoted(p) + ": " + why);
          all_ok = false;
          continue;
        }
        std::string lower = p;
        for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
        if (auto [it, fresh] = seen.emplace(lower, key); !fresh) {
          error(key, "hostname " + quoted(p) + " is already routed (at " + where(at(it->second)) +
                         "; the first route would always win)");
        }
        patterns.push_back(p);
        keys.push_back(key);
      }
    }
    if (!all_ok || patterns.empty()) return;
    auto m = compile_names(patterns);
    if (m) return;
    const uint32_t i = m.error().index;
    error(i < keys.size() ? keys[i] : k + ".route",
          "hostname patterns do not compile: " + m.error().message);
  }

  void check_deny(const std::string& k, const std::vector<DenyConfig>& deny) {
    std::vector<std::string> patterns;
    for (size_t j = 0; j < deny.size(); ++j) {
      const std::string pk = indexed(k + ".deny", j) + ".pattern";
      if (bad(pk)) return;
      if (deny[j].pattern.empty()) {
        error(pk, "expected a regular expression, got \"\"");
        return;
      }
      patterns.push_back(deny[j].pattern);
    }
    if (patterns.empty()) return;
    auto d = compile_deny(patterns);
    if (d) return;
    const uint32_t i = d.error().index;
    error(i < patterns.size() ? indexed(k + ".deny", i) + ".pattern" : k + ".deny",
          "deny pattern does not compile: " + d.error().message);
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
    const bool dsr = dp::is_dsr(s.mode);
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
        error(bk + ".port", std::string(dp::mode_name(s.mode)) +
                                " cannot translate ports: expected the service port " +
                                std::to_string(s.port) + ", got " + std::to_string(b.port));
      }
    }
  }

  // health_check: the timing, the HTTP path, and a way out for every probe. Probes are kernel
  // sockets bound to a port address and leave through that port's kernel twin (the TAP has the
  // port's addresses and their on-link routes only), so every backend must be on-link of a
  // port that has a host_interface.
  void check_health_check(const std::string& k, const ServiceConfig& s) {
    const HealthCheckConfig& h = s.health_check;
    if (!h.enabled) return;
    const std::string hk = k + ".health_check";
    if (bad(hk)) return;
    if (positions_.contains(hk + ".port")) check_range(hk + ".port", h.port, kL4PortSpec);
    check_range(hk + ".interval_ms", h.interval_ms, kHealthIntervalSpec);
    check_range(hk + ".timeout_ms", h.timeout_ms, kHealthTimeoutSpec);
    check_range(hk + ".rise", h.rise, kHealthCountSpec);
    check_range(hk + ".fall", h.fall, kHealthCountSpec);
    if (!bad(hk + ".interval_ms") && !bad(hk + ".timeout_ms") && h.timeout_ms >= h.interval_ms &&
        h.interval_ms >= kHealthIntervalSpec.lo) {
      error(hk + ".timeout_ms", "timeout_ms " + std::to_string(h.timeout_ms) +
                                    " must be below interval_ms " +
                                    std::to_string(h.interval_ms) +
                                    " (one probe of a backend ends before the next starts)");
    }
    check_health_path(hk, h);
    if (s.protocol == L4Proto::kUdp && h.port == 0 && !bad(k + ".protocol")) {
      error(hk, "a UDP service's backends are probed over TCP: set health_check.port to a port "
                "they accept TCP connections on");
    }
    if (!ports_known()) return;
    for (size_t j = 0; j < s.backends.size(); ++j) {
      const BackendConfig& b = s.backends[j];
      const std::string bk = indexed(k + ".backend", j) + ".address";
      if (bad(bk) || b.address.is_zero()) continue;
      const PortConfig* on = nullptr;
      bool twin = false;
      for (const auto& p : c_.ports) {
        for (const auto& a : p.addresses) {
          if (a.addr.is_v4() != b.address.is_v4() || !a.contains(b.address)) continue;
          if (!on) on = &p;
          twin |= !p.host_interface.empty();
        }
      }
      if (twin) continue;
      error(bk, "health_check: backend " + b.address.str() +
                    (on ? " is on-link of port " + quoted(on->name) +
                              ", which has no host_interface"
                        : std::string(" is not on-link of any port address")) +
                    " (probes are kernel connections through a port's kernel twin, which reaches "
                    "that port's prefixes only)");
    }
  }

  void check_health_path(const std::string& hk, const HealthCheckConfig& h) {
    const std::string pk = hk + ".path";
    if (bad(pk)) return;
    const bool written = positions_.contains(pk);
    if (h.type != HealthCheckType::kHttp) {
      if (written && !bad(hk + ".type")) {
        error(pk, "path applies to type \"http\" only, the check's type is \"tcp\"");
      }
      return;
    }
    if (h.path.empty() || h.path[0] != '/') {
      error(pk, "expected a path starting with '/' (the GET request target), got " +
                    quoted(h.path));
    } else if (h.path.size() > kMaxHealthPathBytes) {
      error(pk, "path of " + std::to_string(h.path.size()) + " bytes, at most " +
                    std::to_string(kMaxHealthPathBytes));
    } else if (std::any_of(h.path.begin(), h.path.end(), [](char ch) {
                 const auto c = static_cast<unsigned char>(ch);
                 return c <= 0x20 || c == 0x7f;
               })) {
      error(pk, "expected a path without spaces or control characters (RFC 9112 §3.2: one "
                "token of the request line), got " + quoted(h.path));
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
    const std::string name = quoted(dp::mode_name(mode));
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
                               dp::mode_name(m.mode) +
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

  void check_access_log() {
    const AccessLogConfig& al = c_.access_log;
    struct stat st{};
    check_range("access_log.ring_size", al.ring_size, kAccessLogRingSpec);
    if (!bad("access_log.path") && positions_.contains("access_log.path") && al.path.empty()) {
      error("access_log.path", "expected a file path or \"-\" (stdout), got \"\"; leave "
                               "[access_log] out to write no access log");
    } else if (!bad("access_log.path") && !al.path.empty() && al.path != "-" &&
               (al.path.back() == '/' || (::stat(al.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))) {
      error("access_log.path", "expected a file path, got the directory \"" + al.path + "\"");
    }
    if (!bad("access_log.flows") && al.flows && al.path.empty()) {
      error("access_log.flows", "flow-end records need [access_log] path");
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

  // A string that goes into the BGP daemon's generated config inside double quotes.
  // BIRD 2's lexer takes a string up to the next '"' or newline, without escapes.
  bool check_quotable(const std::string& key, const std::string& v) {
    if (bad(key)) return false;
    for (const char ch : v) {
      const auto c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c == 0x7f || ch == '"' || ch == '\\') {
        error(key, "expected printable text without '\"' or '\\', got " + quoted(v));
        return false;
      }
    }
    return true;
  }

  void check_max_bytes(const std::string& key, const std::string& v, size_t max,
                       const char* why) {
    if (v.size() > max) {
      error(key, "expected at most " + std::to_string(max) + " bytes (" + why + "), got " +
                     std::to_string(v.size()));
    }
  }

  // [bgp]: sessions are direct (the peers on-link of a port address), through the port's kernel
  // twin, where the daemon runs.
  void check_bgp() {
    const BgpConfig& b = c_.bgp;
    if (!b.enabled) return;
    check_range("bgp.local_as", b.local_as, kAsSpec);
    check_range("bgp.hold_time_s", b.hold_time_s, kHoldTimeSpec);
    check_range("bgp.withdraw_wait_ms", b.withdraw_wait_ms, kWithdrawWaitSpec);
    check_non_empty("bgp.daemon", b.daemon, "the path of the BGP daemon (BIRD 2)");
    if (check_quotable("bgp.runtime_dir", b.runtime_dir)) {
      check_max_bytes("bgp.runtime_dir", b.runtime_dir, kMaxBgpRuntimeDirBytes,
                      "the daemon's control socket <runtime_dir>/bgp.<pid>/bird.ctl must fit a "
                      "Unix socket address, 108 bytes");
    }
    if (b.router_id && !bad("bgp.router_id") && !b.router_id->is_v4()) {
      error("bgp.router_id", "expected an IPv4 address (a BGP identifier is 32 bits), got " +
                                 b.router_id->str());
    }
    if (!b.router_id) {
      const bool any_v4 = std::any_of(c_.ports.begin(), c_.ports.end(), [](const PortConfig& p) {
        return std::any_of(p.addresses.begin(), p.addresses.end(),
                           [](const IpPrefix& a) { return a.addr.is_v4(); });
      });
      if (!any_v4) {
        error("bgp", "no router_id and no IPv4 port address to take it from (set "
                     "bgp.router_id = \"<IPv4 address>\")");
      }
    }
    if (b.peers.empty() && !bad("bgp.peer")) {
      error("bgp", "no [[bgp.peer]]: nothing to announce the VIPs to");
    }
    std::map<IpAddr, std::string> seen;
    for (size_t i = 0; i < b.peers.size(); ++i) {
      const BgpPeerConfig& peer = b.peers[i];
      const std::string k = indexed("bgp.peer", i);
      check_range(k + ".remote_as", peer.remote_as, kAsSpec);
      if (check_quotable(k + ".password", peer.password)) {
        check_max_bytes(k + ".password", peer.password, kMaxBgpPasswordBytes,
                        "the kernel's longest TCP MD5 key, TCP_MD5SIG_MAXKEYLEN");
      }
      const std::string ak = k + ".address";
      if (bad(ak)) continue;
      if (auto [it, fresh] = seen.emplace(peer.address, ak); !fresh) {
        error(ak, "duplicate peer " + peer.address.str() + " (first at " + where(at(it->second)) +
                      ")");
        continue;
      }
      const PortConfig* on = nullptr;
      bool own = false;
      for (const auto& p : c_.ports) {
        for (const auto& a : p.addresses) {
          own |= a.addr == peer.address;
          if (!on && a.addr.is_v4() == peer.address.is_v4() && a.contains(peer.address)) on = &p;
        }
      }
      if (own) {
        error(ak, peer.address.str() + " is one of the gateway's own addresses");
      } else if (!on) {
        error(ak, "peer " + peer.address.str() + " is not on-link of any port address (BGP "
                  "sessions are direct: the peer must be in a port's prefix)");
      } else if (on->host_interface.empty()) {
        error(ak, "peer " + peer.address.str() + " is reached through port " + quoted(on->name) +
                      ", which has no host_interface (the BGP daemon talks to its peers through "
                      "the port's kernel twin)");
      }
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
    add(k + ".health_check", c.services[i].health_check.pos);
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
  add("bgp", c.bgp.pos);
  add("access_log", c.access_log.pos);
  for (size_t i = 0; i < c.bgp.peers.size(); ++i) add(indexed("bgp.peer", i), c.bgp.peers[i].pos);
  return p;
}

}  // namespace

std::vector<ConfigError> validate(const Config& c, const Positions& positions,
                                  const KeySet& failed) {
  return Validator(c, positions, failed).run();
}

}  // namespace config_detail

ConfigErrors validate_config(const Config& config) {
  using namespace config_detail;
  const Positions positions = struct_positions(config);
  const KeySet none;
  ConfigErrors out{validate(config, positions, none)};
  sort_by_position(out.errors);
  return out;
}

uint32_t resolve_build_threads(uint32_t configured, uint32_t workers, uint32_t cpus) {
  if (configured != 0) return configured;
  return cpus > workers ? std::min(cpus - workers, kMaxAutoBuildThreads) : 1;
}

bool uses_proxy(const Config& c) {
  if (c.mesh.source != MeshSource::kNone && c.mesh.mode == ForwardMode::kProxy) return true;
  if (!c.listeners.empty()) return true;
  return std::any_of(c.services.begin(), c.services.end(),
                     [](const ServiceConfig& s) { return s.mode == ForwardMode::kProxy; });
}

bool uses_hbone(const Config& c) {
  return !c.hbone.ca_address.empty() || !c.hbone.cert_chain.empty();
}

}  // namespace meshgate::ctl
