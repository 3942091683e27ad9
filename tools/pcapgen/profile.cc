#include "tools/pcapgen/profile.h"

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "tools/pktlib/malformed.h"

namespace meshgate::pcapgen {
namespace {

// Collects "file:line:col: key: message" errors while walking the document.
class Reader {
 public:
  explicit Reader(std::string name) : name_(std::move(name)) {}

  void error(const toml::node* at, const std::string& key, const std::string& msg) {
    error(at ? &at->source() : nullptr, key, msg);
  }
  void error(const toml::source_region* at, const std::string& key, const std::string& msg) {
    std::string s = name_;
    if (at && at->begin) {
      s += ":" + std::to_string(at->begin.line) + ":" + std::to_string(at->begin.column);
    }
    errors_ += s + ": " + key + ": " + msg + "\n";
  }
  bool failed() const { return !errors_.empty(); }
  const std::string& errors() const { return errors_; }

  // Rejects keys the section does not define: a typo must not silently become a default.
  void check_keys(const toml::table& t, const std::string& where,
                  std::initializer_list<std::string_view> allowed) {
    for (const auto& [k, v] : t) {
      (void)v;
      bool known = false;
      for (auto a : allowed) known |= k.str() == a;
      if (!known) error(&k.source(), where + std::string(k.str()), "unknown key");
    }
  }

  template <typename T>
  void integer(const toml::table& t, std::string_view key, const std::string& path, T* out,
               int64_t min, int64_t max) {
    const toml::node* n = t.get(key);
    if (!n) return;
    const auto v = n->value<int64_t>();
    if (!n->is_integer() || !v || *v < min || *v > max) {
      error(n, path + std::string(key),
            "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
      return;
    }
    *out = T(*v);
  }

  void boolean(const toml::table& t, std::string_view key, const std::string& path, bool* out) {
    const toml::node* n = t.get(key);
    if (!n) return;
    if (!n->is_boolean()) {
      error(n, path + std::string(key), "expected true or false");
      return;
    }
    *out = *n->value<bool>();
  }

  std::optional<std::string> string(const toml::table& t, std::string_view key,
                                    const std::string& path) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_string()) {
      error(n, path + std::string(key), "expected a string");
      return std::nullopt;
    }
    return *n->value<std::string>();
  }

  // A string or an array of strings.
  std::optional<std::vector<std::string>> strings(const toml::table& t, std::string_view key,
                                                  const std::string& path) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    std::vector<std::string> out;
    if (n->is_string()) {
      out.push_back(*n->value<std::string>());
      return out;
    }
    if (const auto* a = n->as_array()) {
      for (const auto& e : *a) {
        if (!e.is_string()) {
          error(&e, path + std::string(key), "expected strings");
          return std::nullopt;
        }
        out.push_back(*e.value<std::string>());
      }
      return out;
    }
    error(n, path + std::string(key), "expected a string or an array of strings");
    return std::nullopt;
  }

  void prefix(const toml::table& t, std::string_view key, const std::string& path, bool v4,
              IpPrefix* out) {
    const auto s = string(t, key, path);
    if (!s) return;
    const auto p = IpPrefix::parse(*s);
    if (!p || p->addr.is_v4() != v4) {
      error(t.get(key), path + std::string(key),
            std::string("expected an ") + (v4 ? "IPv4" : "IPv6") + " prefix like \"" +
                std::string(v4 ? kDefaultClients4 : kDefaultClients6) + "\"");
      return;
    }
    *out = p->network();
  }

  void ports(const toml::table& t, std::string_view key, const std::string& path, uint16_t* lo,
             uint16_t* hi) {
    const toml::node* n = t.get(key);
    if (!n) return;
    const auto* a = n->as_array();
    if (!a || a->size() != 2 || !(*a)[0].is_integer() || !(*a)[1].is_integer() ||
        *(*a)[0].value<int64_t>() < 1 || *(*a)[1].value<int64_t>() > 65535 ||
        *(*a)[0].value<int64_t>() > *(*a)[1].value<int64_t>()) {
      error(n, path + std::string(key), "expected [first, last] with 1 <= first <= last <= 65535");
      return;
    }
    *lo = uint16_t(*(*a)[0].value<int64_t>());
    *hi = uint16_t(*(*a)[1].value<int64_t>());
  }

  void size(const toml::table& t, std::string_view key, const std::string& path, SizeMix* out) {
    const toml::node* n = t.get(key);
    if (!n) return;
    if (n->is_string() && *n->value<std::string>() == "imix") {
      out->imix = true;
      return;
    }
    const auto v = n->value<int64_t>();
    if (n->is_integer() && v && *v >= kMinFrameBytes && *v <= kMaxFrameBytes) {
      out->imix = false;
      out->frame_bytes = uint16_t(*v);
      return;
    }
    error(n, path + std::string(key),
          "expected \"imix\" or a frame size in bytes (with FCS) in [64, 1518]");
  }

 private:
  std::string name_;
  std::string errors_;
};

// "a.b.c.d:port" with a nonzero port.
std::optional<std::pair<IpAddr, uint16_t>> parse_endpoint4(std::string_view s) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto addr = IpAddr::parse(s.substr(0, colon));
  const auto digits = s.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (!addr || !addr->is_v4() || ec != std::errc() || end != digits.data() + digits.size() ||
      port == 0 || port > 65535) {
    return std::nullopt;
  }
  return std::pair{*addr, uint16_t(port)};
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + int64_t(doe) - 719468;
}

struct Defaults {
  IpPrefix clients4 = *IpPrefix::parse(kDefaultClients4);
  IpPrefix clients6 = *IpPrefix::parse(kDefaultClients6);
  uint16_t port_min = kDefaultPortMin;
  uint16_t port_max = kDefaultPortMax;
  bool backend_replies = true;
  SizeMix size;
};

void parse_class(Reader& r, const toml::table& t, size_t index, const Defaults& d,
                 TrafficClass* c) {
  const std::string path = "class[" + std::to_string(index) + "].";
  c->clients4 = d.clients4;
  c->clients6 = d.clients6;
  c->port_min = d.port_min;
  c->port_max = d.port_max;
  c->backend_replies = d.backend_replies;
  c->size = d.size;

  const auto name = r.string(t, "name", path);
  if (!name || name->empty()) {
    r.error(&t, path + "name", "every class needs a non-empty name (the sidecar's key)");
  } else {
    c->name = *name;
  }
  const auto type = r.string(t, "type", path);
  if (!type) {
    r.error(&t, path + "type", "required: tcp | udp | icmp | malformed");
    return;
  }
  if (*type == "tcp") c->type = ClassType::kTcp;
  else if (*type == "udp") c->type = ClassType::kUdp;
  else if (*type == "icmp") c->type = ClassType::kIcmp;
  else if (*type == "malformed") c->type = ClassType::kMalformed;
  else {
    r.error(t.get("type"), path + "type", "expected tcp | udp | icmp | malformed");
    return;
  }

  if (c->type == ClassType::kMalformed) {
    r.check_keys(t, path, {"name", "type", "reasons", "count", "client_prefix", "client_prefix6",
                           "client_ports"});
    if (auto rs = r.strings(t, "reasons", path)) c->reasons = *rs;
    else c->reasons = {"all"};
    for (const auto& reason : c->reasons) {
      if (reason != "all" && !pkt::find_malformed(reason)) {
        r.error(t.get("reasons"), path + "reasons",
                "unknown malformation \"" + reason + "\" (pcapgen --list-malformed)");
      }
    }
    r.integer(t, "count", path, &c->count, 0, 100000000);
  } else {
    const bool tcp = c->type == ClassType::kTcp;
    if (tcp) {
      r.check_keys(t, path, {"name", "type", "flows", "targets", "client_prefix",
                             "client_prefix6", "client_ports", "shape", "close", "data_packets",
                             "size", "backend_replies", "vlan", "ttl"});
    } else {
      r.check_keys(t, path, {"name", "type", "flows", "targets", "client_prefix",
                             "client_prefix6", "client_ports", "requests", "size",
                             "backend_replies", "vlan", "ttl"});
    }
    r.integer(t, "flows", path, &c->flows, 0, 100000000);
    if (auto ts = r.strings(t, "targets", path)) c->targets = *ts;
    else c->targets = {"all"};
    if (c->targets.empty()) r.error(t.get("targets"), path + "targets", "must not be empty");
    if (tcp) {
      if (auto s = r.string(t, "shape", path)) {
        if (*s == "handshake") c->shape = TcpShape::kHandshake;
        else if (*s == "syn_only") c->shape = TcpShape::kSynOnly;
        else if (*s == "established") c->shape = TcpShape::kEstablished;
        else r.error(t.get("shape"), path + "shape", "expected handshake | syn_only | established");
      }
      if (auto s = r.string(t, "close", path)) {
        if (*s == "fin") c->close = TcpClose::kFin;
        else if (*s == "rst") c->close = TcpClose::kRst;
        else if (*s == "none") c->close = TcpClose::kNone;
        else r.error(t.get("close"), path + "close", "expected fin | rst | none");
      }
      r.integer(t, "data_packets", path, &c->data_packets, 0, 100000);
    } else {
      r.integer(t, "requests", path, &c->requests, 1, 100000);
    }
    r.size(t, "size", path, &c->size);
    r.boolean(t, "backend_replies", path, &c->backend_replies);
    uint16_t vlan = 0;
    if (t.get("vlan")) {
      r.integer(t, "vlan", path, &vlan, 0, 4095);
      c->vlan = vlan;
    }
    r.integer(t, "ttl", path, &c->ttl, 1, 255);
  }
  r.prefix(t, "client_prefix", path, true, &c->clients4);
  r.prefix(t, "client_prefix6", path, false, &c->clients6);
  r.ports(t, "client_ports", path, &c->port_min, &c->port_max);
}

}  // namespace

const char* class_type_name(ClassType t) {
  switch (t) {
    case ClassType::kTcp: return "tcp";
    case ClassType::kUdp: return "udp";
    case ClassType::kIcmp: return "icmp";
    case ClassType::kMalformed: return "malformed";
  }
  return "?";
}

ctl::Result<Profile> parse_profile(std::string_view toml_text, const std::string& name) {
  toml::table doc;
  try {
    doc = toml::parse(toml_text, name);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return ctl::Error{name + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                      ": " + std::string(e.description())};
  }
  Reader r(name);
  Profile p;
  p.path = name;
  r.check_keys(doc, "", {"seed", "packets", "rate_pps", "start", "start_ns", "concurrency",
                         "backend_replies", "client_prefix", "client_prefix6", "client_ports",
                         "size", "transit", "class"});
  r.integer(doc, "seed", "", &p.seed, 0, INT64_MAX);
  r.integer(doc, "packets", "", &p.packets, 0, INT64_MAX);
  r.integer(doc, "rate_pps", "", &p.rate_pps, 1, 1000000000);
  r.integer(doc, "start_ns", "", &p.start_ns, 0, INT64_MAX);
  if (const toml::node* n = doc.get("start")) {
    const auto dt = n->value<toml::date_time>();
    if (!dt || !dt->offset) {
      r.error(n, "start", "expected an offset date-time like 2024-01-01T00:00:00Z");
    } else {
      const int64_t days = days_from_civil(dt->date.year, dt->date.month, dt->date.day);
      const int64_t secs = days * 86400 + dt->time.hour * 3600 + dt->time.minute * 60 +
                           dt->time.second - int64_t(dt->offset->minutes) * 60;
      if (secs < 0) r.error(n, "start", "must not be before 1970");
      else p.start_ns = uint64_t(secs) * 1000000000ull + dt->time.nanosecond;
    }
  }
  r.integer(doc, "concurrency", "", &p.concurrency, 1, 1000000);

  Defaults d;
  r.boolean(doc, "backend_replies", "", &d.backend_replies);
  r.prefix(doc, "client_prefix", "", true, &d.clients4);
  r.prefix(doc, "client_prefix6", "", false, &d.clients6);
  r.ports(doc, "client_ports", "", &d.port_min, &d.port_max);
  r.size(doc, "size", "", &d.size);

  const std::string transit = r.string(doc, "transit", "").value_or(std::string(kDefaultTransit));
  if (const auto ep = parse_endpoint4(transit)) {
    p.transit_addr = ep->first;
    p.transit_port = ep->second;
  } else {
    r.error(doc.get("transit"), "transit", "expected \"<IPv4 address>:<port>\"");
  }

  if (const toml::node* n = doc.get("class")) {
    const auto* a = n->as_array();
    if (!a || !a->is_array_of_tables()) {
      r.error(n, "class", "expected [[class]] tables");
    } else {
      std::set<std::string> names;
      for (size_t i = 0; i < a->size(); ++i) {
        TrafficClass c;
        parse_class(r, *(*a)[i].as_table(), i, d, &c);
        if (!c.name.empty() && !names.insert(c.name).second) {
          r.error(&(*a)[i], "class[" + std::to_string(i) + "].name",
                  "duplicate class name \"" + c.name + "\"");
        }
        p.classes.push_back(std::move(c));
      }
    }
  }
  if (p.classes.empty() && !r.failed()) r.error(&doc, "class", "the profile defines no [[class]]");
  if (r.failed()) return ctl::Error{r.errors()};
  return p;
}

ctl::Result<Profile> load_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ctl::Error{path + ": cannot open"};
  std::ostringstream s;
  s << in.rdbuf();
  return parse_profile(s.str(), path);
}

}  // namespace meshgate::pcapgen
