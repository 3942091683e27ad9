// meshgate-ctl's views of admin API answers: plain functions from JSON to aligned text, so
// they are tested without a gateway. They throw nlohmann::json::exception on an answer that
// lacks what they need (main reports it as an unexpected answer).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace meshgate::ctl_tool {

// Columns padded to their widest cell; `right[i]` right-aligns column i (numbers).
class Table {
 public:
  Table(std::vector<std::string> header, std::vector<bool> right);
  void row(std::vector<std::string> cells);
  std::string str(const std::string& indent = "") const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// `ipvsadm -Ln` style: per service its VIP:port, protocol, mode and name, then each backend
// with weight, health, active flows (counted from `flows`, a GET /flows answer; null when it
// could not be fetched), packets and flows created. Inputs: GET /config_dump and GET /stats.
std::string render_services(const nlohmann::json& config, const nlohmann::json& stats,
                            const nlohmann::json& flows);

// GET /flows as a table (age and expiry in whole seconds; a Local column when some flow is
// fullnat), with a line saying when the list is partial.
std::string render_flows(const nlohmann::json& flows);

// GET /stats: the key counters, non-zero drops, and one line per worker.
std::string render_stats(const nlohmann::json& stats);

// GET /bgp: the daemon's state, one line per session (peer, AS, state, uptime, prefixes
// announced), one per VIP (announced or withdrawn).
std::string render_bgp(const nlohmann::json& bgp);

// GET /flow_rules, testpmd `flow list` style: per port its totals and why steering is in
// software, then one line per rule (port, kind, priority, match, action, state, handle, and
// the PMD's reason when refused).
std::string render_flow_rules(const nlohmann::json& rules);
// POST /reload's answer: on "ok" one line with what changed and the new config's hash; else the
// result and every error, one "file:line:column: key: message" per line.
std::string render_reload(const nlohmann::json& reload);

}  // namespace meshgate::ctl_tool
