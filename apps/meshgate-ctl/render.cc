#include "apps/meshgate-ctl/render.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

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

std::string render_services(const json& config, const json& stats, const json& flows) {
  // Active flows per (service, backend), from the flow dump.
  std::map<std::pair<std::string, std::string>, uint64_t> active;
  const bool have_flows = flows.is_object();
  if (have_flows) {
    for (const json& f : flows.at("flows")) {
      ++active[{f.at("service").get<std::string>(), f.at("backend").get<std::string>()}];
    }
  }
  const json& services = config.at("services");
  const json& stat_services = stats.at("services");

  // Two kinds of rows share the first two columns (ipvsadm -Ln): "TCP  vip:port" for a
  // service, "  -> backend:port" for each of its backends.
  struct Line {
    bool service;
    std::vector<std::string> cells;
  };
  std::vector<Line> lines;
  size_t addr_w = std::string("Backend:Port").size();
  std::vector<size_t> svc_w(2, 0), be_w(5, 0);
  auto widen = [](std::vector<size_t>& w, const std::vector<std::string>& c, size_t from) {
    for (size_t i = from; i < c.size(); ++i) w[i - from] = std::max(w[i - from], c[i].size());
  };
  const std::vector<std::string> svc_head = {"Prot", "VIP:Port", "Mode", "Service"};
  const std::vector<std::string> be_head = {"  ->", "Backend:Port", "Weight", "Health",
                                            "ActiveFlows", "Packets", "Flows"};
  widen(svc_w, svc_head, 2);
  widen(be_w, be_head, 2);
  for (const json& s : services) {
    const std::string name = s.at("name");
    const std::string vip = endpoint(s.at("vip"), s.at("port"));
    Line sl{true, {upper(s.at("protocol")), vip, s.at("mode"), name}};
    addr_w = std::max(addr_w, vip.size());
    widen(svc_w, sl.cells, 2);
    lines.push_back(sl);
    const json* sb = stat_services.contains(name) ? &stat_services.at(name).at("backends") : nullptr;
    for (const json& e : s.at("endpoints")) {
      const std::string be = endpoint(e.at("address"), e.at("port"));
      uint64_t packets = 0, created = 0;
      if (sb && sb->contains(be)) {
        packets = sb->at(be).at("packets");
        created = sb->at(be).at("flows");
      }
      auto it = active.find({name, be});
      const std::string act = !have_flows ? "-" : num(it == active.end() ? 0 : it->second);
      Line bl{false, {"  ->", be, num(e.at("weight")), e.at("health"), act, num(packets),
                      num(created)}};
      addr_w = std::max(addr_w, be.size());
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

  std::string out = "meshgate snapshot " + num(config.at("snapshot_version")) + ": " +
                    num(services.size()) + " service" + (services.size() == 1 ? "" : "s") + "\n";
  out += format(svc_head, true);
  out += format(be_head, false);
  for (const Line& l : lines) out += format(l.cells, l.service);
  if (!have_flows) {
    out += "(active flows unavailable: GET /flows failed)\n";
  } else if (flows.at("truncated").get<bool>() || !flows.at("complete").get<bool>()) {
    out += "(active flows counted from " + num(flows.at("count")) + " flows";
    if (flows.at("truncated").get<bool>()) out += ", more exist";
    if (!flows.at("complete").get<bool>()) {
      out += ", " + num(flows.at("workers_answered")) + " of " + num(flows.at("workers")) +
             " workers answered";
    }
    out += ")\n";
  }
  return out;
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
  out << "reload refused (" << result << "): nothing changed, the running config stays\n";
  for (const auto& e : r.at("errors")) out << "  " << e.at("text").get<std::string>() << "\n";
  return out.str();
}

}  // namespace meshgate::ctl_tool
