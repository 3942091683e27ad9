#include "apps/meshgate-ctl/render.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "control/common/edit_distance.h"

namespace meshgate::ctl_tool {
namespace {

using nlohmann::json;

std::string num(uint64_t v) { return std::to_string(v); }

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// "ip:port", IPv6 in brackets: the key of backends in GET /stats.
std::string endpoint(const std::string& address, uint64_t port) {
  const bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

}  // namespace

Table::Table(std::vector<std::string> header, std::vector<bool> right) : right_(std::move(right)) {
  right_.resize(header.size(), false);
  rows_.push_back(std::move(header));
}

void Table::row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

std::string Table::str(const std::string& indent) const {
  std::vector<size_t> width;
  for (const auto& r : rows_) {
    if (r.size() > width.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows_) {
    std::string line = indent;
    for (size_t i = 0; i < r.size(); ++i) {
      const size_t pad = width[i] - r[i].size();
      const bool right = i < right_.size() && right_[i];
      if (i) line += "  ";
      if (right) line.append(pad, ' ');
      line += r[i];
      if (!right && i + 1 < r.size()) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

json services_view(const json& config, const json& stats, const json& flows) {
  // Flows per (service, backend) from the flow dump, split as ipvsadm splits them: ActiveConn
  // are established TCP connections, InActConn every other flow (handshakes, closing, UDP).
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> conns;
  const bool have_flows = flows.is_object();
  if (have_flows) {
    for (const json& f : flows.at("flows")) {
      auto& c = conns[{f.at("service").get<std::string>(), f.at("backend").get<std::string>()}];
      const bool active = f.at("protocol") == "tcp" && f.at("state") == "ESTABLISHED";
      ++(active ? c.first : c.second);
    }
  }
  const json& stat_services = stats.at("services");
  // Backends a health check probes (/config_dump's health_checks). Any other backend's health
  // is not known: "healthy" would claim a check that never ran.
  std::set<std::pair<std::string, std::string>> checked;
  if (config.contains("health_checks")) {
    for (const json& h : config.at("health_checks")) {
      checked.insert({h.at("service").get<std::string>(), h.at("backend").get<std::string>()});
    }
  }
  auto opt = [](const json* o, const char* key) { return o && o->contains(key) ? o->at(key) : json(); };
  json services = json::array();
  for (const json& s : config.at("services")) {
    const std::string name = s.at("name");
    const json* sb = stat_services.contains(name) ? &stat_services.at(name).at("backends") : nullptr;
    json backends = json::array();
    for (const json& e : s.at("endpoints")) {
      const std::string be = endpoint(e.at("address"), e.at("port"));
      const json* st = sb && sb->contains(be) ? &sb->at(be) : nullptr;
      const json* rates = st && st->contains("rates") ? &st->at("rates") : nullptr;
      // Without a check only a source's own verdict (a mesh workload marked unhealthy) shows.
      const json health = checked.count({name, be}) || e.at("health") != "healthy" ? e.at("health")
                                                                                   : json();
      json b = {{"endpoint", be},
                {"address", e.at("address")},
                {"port", e.at("port")},
                {"weight", e.at("weight")},
                {"health", health},
                {"active_conns", nullptr},
                {"inactive_conns", nullptr},
                {"conns", st ? st->at("flows") : json(0)},
                {"packets", st ? st->at("packets") : json(0)},
                {"bytes_in", st ? st->value("bytes", json(0)) : json(0)},
                {"bytes_out", opt(st, "reply_bytes")},
                {"conns_per_s", opt(rates, "flows_per_s")},
                {"packets_per_s", opt(rates, "packets_per_s")},
                {"bytes_in_per_s", opt(rates, "bytes_per_s")},
                {"bytes_out_per_s", opt(rates, "reply_bytes_per_s")}};
      if (have_flows) {
        auto it = conns.find({name, be});
        b["active_conns"] = it == conns.end() ? 0 : it->second.first;
        b["inactive_conns"] = it == conns.end() ? 0 : it->second.second;
      }
      backends.push_back(std::move(b));
    }
    services.push_back({{"name", name},
                        {"vip", s.at("vip")},
                        {"port", s.at("port")},
                        {"protocol", s.at("protocol")},
                        {"mode", s.at("mode")},
                        {"backends", std::move(backends)}});
  }
  json counted = {{"available", have_flows}};
  if (have_flows) {
    counted["flows"] = flows.at("count");
    counted["more_exist"] = flows.at("truncated");
    counted["workers"] = flows.at("workers");
    counted["workers_answered"] = flows.at("workers_answered");
  }
  return {{"snapshot_version", config.at("snapshot_version")},
          {"rate_interval_s", stats.value("rate_interval_s", json())},
          {"conns_counted", std::move(counted)},
          {"services", std::move(services)}};
}

std::string render_services(const json& view) {
  // Two kinds of rows share the first two columns (ipvsadm -Ln): "TCP  vip:port" for a
  // service, "  -> backend:port" for each of its backends.
  struct Line {
    bool service;
    std::vector<std::string> cells;
  };
  std::vector<Line> lines;
  size_t addr_w = std::string("Backend:Port").size();
  const std::vector<std::string> svc_head = {"Prot", "VIP:Port", "Mode", "Service"};
  const std::vector<std::string> be_head = {"  ->",     "Backend:Port", "Weight", "Health",
                                            "ActiveConn", "InActConn",  "Conns",  "Packets",
                                            "InBytes",  "OutBytes",     "CPS",    "InBPS",
                                            "OutBPS"};
  std::vector<size_t> svc_w(svc_head.size() - 2, 0), be_w(be_head.size() - 2, 0);
  auto widen = [](std::vector<size_t>& w, const std::vector<std::string>& c, size_t from) {
    for (size_t i = from; i < c.size(); ++i) w[i - from] = std::max(w[i - from], c[i].size());
  };
  // Counters as they are, rates rounded to whole units (ipvsadm --rate), "-" when unknown.
  auto count = [](const json& v) { return v.is_null() ? std::string("-") : num(v.get<uint64_t>()); };
  auto rate = [](const json& v) { return v.is_null() ? std::string("-") : fixed(v.get<double>(), 0); };
  widen(svc_w, svc_head, 2);
  widen(be_w, be_head, 2);
  const json& services = view.at("services");
  for (const json& s : services) {
    const std::string vip = endpoint(s.at("vip"), s.at("port"));
    Line sl{true, {upper(s.at("protocol")), vip, s.at("mode"), s.at("name")}};
    addr_w = std::max(addr_w, vip.size());
    widen(svc_w, sl.cells, 2);
    lines.push_back(sl);
    for (const json& b : s.at("backends")) {
      Line bl{false,
              {"  ->", b.at("endpoint"), num(b.at("weight")),
               b.at("health").is_null() ? std::string("-") : b.at("health").get<std::string>(),
               count(b.at("active_conns")), count(b.at("inactive_conns")), count(b.at("conns")),
               count(b.at("packets")), count(b.at("bytes_in")), count(b.at("bytes_out")),
               rate(b.at("conns_per_s")), rate(b.at("bytes_in_per_s")),
               rate(b.at("bytes_out_per_s"))}};
      addr_w = std::max(addr_w, bl.cells[1].size());
      widen(be_w, bl.cells, 2);
      lines.push_back(bl);
    }
  }

  auto format = [&](const std::vector<std::string>& c, bool service) {
    std::string line = c[0];
    line.append(4 - std::min<size_t>(4, c[0].size()), ' ');
    line += ' ' + c[1];
    line.append(addr_w - c[1].size(), ' ');
    const std::vector<size_t>& w = service ? svc_w : be_w;
    for (size_t i = 2; i < c.size(); ++i) {
      const size_t pad = w[i - 2] - c[i].size();
      line += "  ";
      // Backend numbers right-aligned; names and words left-aligned.
      const bool right = !service && i != 3;
      if (right) line.append(pad, ' ');
      line += c[i];
      if (!right) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };

  std::string out = "meshgate snapshot " + num(view.at("snapshot_version")) + ": " +
                    num(services.size()) + " service" + (services.size() == 1 ? "" : "s") + "\n";
  out += format(svc_head, true);
  out += format(be_head, false);
  for (const Line& l : lines) out += format(l.cells, l.service);
  const json& counted = view.at("conns_counted");
  if (!counted.at("available").get<bool>()) {
    out += "(connections unavailable: GET /flows failed)\n";
  } else if (counted.at("more_exist").get<bool>() ||
             counted.at("workers_answered") != counted.at("workers")) {
    out += "(connections counted from " + num(counted.at("flows")) + " flows";
    if (counted.at("more_exist").get<bool>()) out += ", more exist";
    if (counted.at("workers_answered") != counted.at("workers")) {
      out += ", " + num(counted.at("workers_answered")) + " of " + num(counted.at("workers")) +
             " workers answered";
    }
    out += ")\n";
  }
  return out;
}

std::string render_services(const json& config, const json& stats, const json& flows) {
  return render_services(services_view(config, stats, flows));
}

std::string render_flows(const json& flows) {
  // The Local column (fullnat's source address:port toward the backend) only when a flow has
  // one, as `ipvsadm -Lnc` shows FromIP / DestIP only for what exists.
  bool local = false;
  for (const json& f : flows.at("flows")) local |= !f.at("local").get<std::string>().empty();
  std::vector<std::string> head = {"Worker", "Proto", "Client", "VIP"};
  if (local) head.push_back("Local");
  for (const char* h : {"Backend", "Service", "Mode", "State", "Age(s)", "Expires(s)"}) head.push_back(h);
  std::vector<bool> right(head.size(), false);
  right[0] = right[head.size() - 2] = right[head.size() - 1] = true;
  Table t(head, right);
  for (const json& f : flows.at("flows")) {
    const int64_t ms = f.at("expires_in_ms");
    std::vector<std::string> row = {num(f.at("worker")), upper(f.at("protocol")), f.at("client"),
                                    f.at("vip")};
    if (local) row.push_back(f.at("local").get<std::string>().empty() ? "-" : f.at("local"));
    for (const std::string& c : {f.at("backend").get<std::string>(), f.at("service").get<std::string>(),
                                f.at("mode").get<std::string>(), f.at("state").get<std::string>()}) {
      row.push_back(c);
    }
    row.push_back(num(f.at("age_ms").get<uint64_t>() / 1000));
    row.push_back(num(uint64_t(std::max<int64_t>(0, ms)) / 1000));
    t.row(row);
  }
  std::string out = t.str();
  const uint64_t n = flows.at("count");
  out += num(n) + " flow" + (n == 1 ? "" : "s");
  if (flows.at("truncated").get<bool>()) {
    out += " (limit " + num(flows.at("limit")) + " reached; more exist: use --limit)";
  }
  if (!flows.at("complete").get<bool>()) {
    out += " (only " + num(flows.at("workers_answered")) + " of " + num(flows.at("workers")) +
           " workers answered in time)";
  }
  return out + "\n";
}

std::string render_stats(const json& s) {
  Table t({"counter", "value"}, {false, true});
  auto add = [&](const char* name, const char* key) { t.row({name, num(s.at(key))}); };
  add("snapshot version", "snapshot_version");
  add("packets in", "packets_in");
  add("bytes in", "bytes_in");
  add("packets out", "packets_out");
  add("bytes out", "bytes_out");
  add("packets generated", "packets_generated");
  add("packets consumed", "packets_consumed");
  add("packets pending", "packets_pending");
  add("flows active", "flows_active");
  add("flows established", "flows_established");
  add("flows closing", "flows_closing");
  add("flows created", "flows_created");
  add("flows expired", "flows_expired");
  add("stateless packets", "stateless_packets");
  add("drops", "drops_total");
  for (const auto& [reason, n] : s.at("drops").items()) {
    if (n.get<uint64_t>() != 0) t.row({"  " + reason, num(n)});
  }
  std::string out = t.str();
  // The header row of a key/value list says nothing: drop it.
  out.erase(0, out.find('\n') + 1);
  if (s.contains("workers") && !s.at("workers").empty()) {
    Table w({"worker", "packets_in", "packets_out", "loops", "flows_active", "cycles/packet", "Mpps"},
            {true, true, true, true, true, true, true});
    for (const json& wj : s.at("workers")) {
      w.row({num(wj.at("index")), num(wj.at("packets_in")), num(wj.at("packets_out")),
             num(wj.at("loops")), num(wj.at("flows_active")),
             fixed(wj.at("cycles_per_packet").get<double>(), 1), fixed(wj.at("mpps").get<double>(), 3)});
    }
    out += "\n" + w.str();
  }
  return out;
}

std::string render_bgp(const json& b) {
  const json& d = b.at("daemon");
  std::string out = "daemon " + std::string(d.at("running").get<bool>() ? "running" : "not running") +
                    " (pid " + num(d.at("pid")) + ", restarts " + num(d.at("restarts")) + ")\n";
  Table s({"peer", "AS", "state", "uptime_s", "prefixes"}, {false, true, false, true, true});
  for (const json& p : b.at("sessions")) {
    s.row({p.at("peer").get<std::string>(), num(p.at("remote_as")), p.at("state").get<std::string>(),
           num(p.at("uptime_s")), num(p.at("prefixes_announced"))});
  }
  out += s.str();
  Table v({"vip", "announced"}, {false, false});
  for (const json& x : b.at("vips")) {
    v.row({x.at("vip").get<std::string>(), x.at("announced").get<bool>() ? "yes" : "no"});
  }
  out += v.str();
  return out;
}

std::string render_flow_rules(const json& r) {
  std::string out;
  for (const json& p : r.at("ports")) {
    out += "port " + p.at("port").get<std::string>() + " (id " + num(p.at("port_id")) + ", " +
           num(p.at("queues")) + " queues): " + num(p.at("installed")) + " installed, " +
           num(p.at("refused")) + " refused\n";
    const std::string note = p.value("note", "");
    if (!note.empty()) out += "  " + note + "\n";
  }
  const json& rules = r.at("rules");
  if (rules.empty()) return out + "no rules\n";
  Table t({"port", "kind", "prio", "match", "action", "state", "handle", "reason"},
          {false, false, true, false, false, false, false, false});
  for (const json& x : rules) {
    t.row({x.at("port").get<std::string>(), x.at("kind").get<std::string>(),
           num(x.at("priority")), x.at("match").get<std::string>(),
           x.at("action").get<std::string>(), x.at("state").get<std::string>(),
           x.at("handle").get<bool>() ? "yes" : "no", x.at("reason").get<std::string>()});
  }
  return out + t.str();
}

std::string render_reload(const json& r) {
  const std::string result = r.at("result").get<std::string>();
  std::ostringstream out;
  if (result == "ok") {
    const json& c = r.at("changes");
    out << "reloaded: services +" << c.at("services_added").get<uint32_t>() << " -"
        << c.at("services_removed").get<uint32_t>() << " ~"
        << c.at("services_changed").get<uint32_t>() << ", listeners +"
        << c.at("listeners_added").get<uint32_t>() << " -"
        << c.at("listeners_removed").get<uint32_t>() << " ~"
        << c.at("listeners_changed").get<uint32_t>();
    std::string other;
    for (const auto& o : c.at("other")) other += (other.empty() ? "" : ", ") + o.get<std::string>();
    if (!other.empty()) out << ", also changed: " << other;
    out << "\nsha256 " << r.at("sha256").get<std::string>() << "\n";
    return out.str();
  }
  if (result == "in_progress") {
    out << "reload not started: reload " << r.value("id", uint64_t(0)) << " ("
        << r.value("trigger", "") << ") is in progress; nothing changed, try again when it is done\n";
    return out.str();
  }
  out << "reload refused (" << result << "): nothing changed, the running config stays\n";
  for (const auto& e : r.at("errors")) out << "  " << e.at("text").get<std::string>() << "\n";
  return out.str();
}

std::string render_workloads(const json& w) {
  // istioctl ztunnel-config workloads: NAMESPACE, POD NAME, ADDRESS, NODE, WAYPOINT, PROTOCOL.
  Table t({"NAMESPACE", "POD NAME", "ADDRESS", "NODE", "WAYPOINT", "PROTOCOL"}, {});
  for (const json& x : w.at("workloads")) {
    std::string addrs;
    for (const json& a : x.at("addresses")) addrs += (addrs.empty() ? "" : ",") + a.get<std::string>();
    const std::string node = x.at("node").get<std::string>();
    const json& wp = x.at("waypoint");
    t.row({x.at("namespace").get<std::string>(), x.at("name").get<std::string>(),
           addrs.empty() ? "-" : addrs, node.empty() ? "-" : node,
           wp.is_null() ? "None" : wp.get<std::string>(), x.at("protocol").get<std::string>()});
  }
  return t.str();
}

namespace {

// "2026-11-22T01:02:03Z" (what /config_dump writes) as seconds since the epoch; -1 otherwise.
int64_t rfc3339_to_unix(const std::string& s) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return -1;
  return int64_t(timegm(&tm));
}

const char* certificate_type(const std::string& role) {
  if (role == "leaf") return "Leaf";
  if (role == "intermediate") return "Intermediate";
  if (role == "trust_anchor") return "Root";
  return "Other";
}

}  // namespace

json certificates_view(const json& config, int64_t now_unix) {
  json list = json::array();
  for (const json& c : config.at("certificates")) {
    const std::string identity = c.at("identity").get<std::string>();
    const std::string not_before = c.at("not_before").get<std::string>();
    const std::string not_after = c.at("not_after").get<std::string>();
    const int64_t nb = rfc3339_to_unix(not_before), na = rfc3339_to_unix(not_after);
    list.push_back({{"name", identity.empty() ? c.at("subject").get<std::string>() : identity},
                    {"type", certificate_type(c.at("role").get<std::string>())},
                    {"valid", nb >= 0 && na >= 0 && nb <= now_unix && now_unix < na},
                    {"serial", c.at("serial")},
                    {"not_after", not_after},
                    {"not_before", not_before},
                    {"identity", identity},
                    {"file", c.at("file")}});
  }
  return {{"certificates", list}};
}

std::string render_certificates(const json& view) {
  // istioctl ztunnel-config certificates: name, type, validity, serial, not after / before.
  Table t({"CERTIFICATE NAME", "TYPE", "VALID", "SERIAL NUMBER", "NOT AFTER", "NOT BEFORE"}, {});
  for (const json& c : view.at("certificates")) {
    t.row({c.at("name").get<std::string>(), c.at("type").get<std::string>(),
           c.at("valid").get<bool>() ? "true" : "false", c.at("serial").get<std::string>(),
           c.at("not_after").get<std::string>(), c.at("not_before").get<std::string>()});
  }
  return t.str();
}

json policies_view(const json& config) { return {{"policies", config.at("policies")}}; }

std::string render_policies(const json& view) {
  // istioctl ztunnel-config authorization: NAMESPACE, POLICY NAME, ACTION, SCOPE.
  auto title = [](std::string s) {
    if (!s.empty()) s[0] = char(std::toupper(static_cast<unsigned char>(s[0])));
    return s;
  };
  Table t({"NAMESPACE", "POLICY NAME", "ACTION", "SCOPE"}, {});
  for (const json& p : view.at("policies")) {
    std::string action = title(p.at("action").get<std::string>());
    if (p.value("dry_run", false)) action += " (dry run)";
    t.row({p.at("namespace").get<std::string>(), p.at("name").get<std::string>(), action,
           title(p.at("scope").get<std::string>())});
  }
  return t.str();
}

std::string render_log_level(const json& answer) {
  std::string out = "log level: " + answer.at("level").get<std::string>();
  if (answer.contains("previous")) out += " (was " + answer.at("previous").get<std::string>() + ")";
  return out + "\n";
}

const std::vector<std::string>& log_levels() {
  static const std::vector<std::string> kLevels = {"error", "warn", "info", "debug"};
  return kLevels;
}

const std::vector<std::string>& flow_states() {
  static const std::vector<std::string> kStates = {
      "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK",
      "TIME_WAIT", "CLOSE", "UDP", "ICMP", "ICMPV6", "OTHER"};
  return kStates;
}

namespace {

bool is_ip(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool is_number_in(const std::string& s, unsigned lo, unsigned hi) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const unsigned v = unsigned(std::stoul(s));
  return v >= lo && v <= hi;
}

bool valid_backend(const std::string& v) {
  if (!v.empty() && v.front() == '[') {
    const auto close = v.find(']');
    if (close == std::string::npos || !is_ip(v.substr(1, close - 1))) return false;
    return close + 1 == v.size() || (v[close + 1] == ':' && is_number_in(v.substr(close + 2), 1, 65535));
  }
  const auto colon = v.find(':');
  if (colon != std::string::npos && v.find(':', colon + 1) == std::string::npos) {
    return is_ip(v.substr(0, colon)) && is_number_in(v.substr(colon + 1), 1, 65535);
  }
  return is_ip(v);
}

bool valid_client(const std::string& v) {
  const auto slash = v.find('/');
  const std::string addr = v.substr(0, slash);
  if (!is_ip(addr)) return false;
  if (slash == std::string::npos) return true;
  return is_number_in(v.substr(slash + 1), 0, addr.find(':') == std::string::npos ? 32 : 128);
}

}  // namespace

std::string check_flows_filter(const FlowsFilterArgs& f) {
  if (f.service && f.service->empty()) return "--service: expected a service name, got \"\"";
  if (f.backend && !valid_backend(*f.backend)) {
    return "--backend: expected IP, IP:PORT or [IPv6]:PORT, got \"" + *f.backend + "\"";
  }
  if (f.state) {
    const std::string s = upper(*f.state);
    const auto& all = flow_states();
    if (std::find(all.begin(), all.end(), s) == all.end()) {
      std::string list;
      for (const auto& n : all) list += (list.empty() ? "" : ", ") + n;
      return "--state: expected one of " + list + ", got \"" + *f.state + "\"";
    }
  }
  if (f.client && !valid_client(*f.client)) {
    return "--client: expected IP or IP/PREFIX, got \"" + *f.client + "\"";
  }
  return "";
}

std::string closest_command(const std::string& got, const std::vector<std::string>& commands) {
  // Short words allow one edit, longer ones two (as the config's "did you mean").
  const size_t max_distance = got.size() <= 4 ? 1 : 2;
  std::string best;
  size_t best_d = max_distance + 1;
  for (const std::string& c : commands) {
    const size_t d = meshgate::ctl::edit_distance(got, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace meshgate::ctl_tool
