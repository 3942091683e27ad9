// meshgate-ctl's views of admin API answers: plain functions from JSON to aligned text, so
// they are tested without a gateway. They throw nlohmann::json::exception on an answer that
// lacks what they need (main reports it as an unexpected answer).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
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

// `services`, the rows of `ipvsadm -Ln --stats --rate` as JSON (what `-o json` prints):
// snapshot_version, rate_interval_s, conns_counted (available, flows, more_exist, workers,
// workers_answered: the flow dump the connections were counted from), services (name, vip,
// port, protocol, mode, backends: endpoint, address, port, weight, health, active_conns
// (established TCP flows), inactive_conns (every other flow), conns (flows created), packets,
// bytes_in, bytes_out, conns_per_s, packets_per_s, bytes_in_per_s, bytes_out_per_s). Inputs:
// GET /config_dump, GET /stats, GET /flows (null when it could not be fetched: the connection
// counts are then null). A value /stats does not carry (the rates before two samples, the
// backends' reply bytes) is null. health is the backend's health check state (healthy,
// unhealthy), null ("-" in the table) for a backend no health check probes, unless its source
// marked it unhealthy.
nlohmann::json services_view(const nlohmann::json& config, const nlohmann::json& stats,
                             const nlohmann::json& flows);
// services_view() as the ipvsadm table: per service its protocol, VIP:port, mode and name, then
// each backend's row; "-" for what is null.
std::string render_services(const nlohmann::json& view);
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


// GET /workloads as istioctl ztunnel-config workloads prints them.
std::string render_workloads(const nlohmann::json& workloads);

// `certificates` from GET /config_dump's certificates, as JSON: {"certificates": [{name (the
// identity, else the subject), type (Leaf / Intermediate / Root), valid (now_unix within its
// validity), serial, not_after, not_before, identity, file}]}.
nlohmann::json certificates_view(const nlohmann::json& config, int64_t now_unix);
std::string render_certificates(const nlohmann::json& view);

// `policies` from GET /config_dump's policies: {"policies": [...]} as the dump has them
// (name, namespace, scope, action, dry_run, groups); the table shows namespace, name, action
// and scope.
nlohmann::json policies_view(const nlohmann::json& config);
std::string render_policies(const nlohmann::json& view);

// GET /logging or POST /logging's answer: "log level: debug (was info)".
std::string render_log_level(const nlohmann::json& answer);
// The levels `log-level` accepts, as POST /logging does.
const std::vector<std::string>& log_levels();

// `flows` filters as given on the command line; unset = not given.
struct FlowsFilterArgs {
  std::optional<std::string> service, backend, state, client;
};
// The states --state accepts (GET /flows' state= values).
const std::vector<std::string>& flow_states();
// "" when every given filter is well-formed; else the message naming the option.
std::string check_flows_filter(const FlowsFilterArgs& f);

// The command `got` is most likely a misspelling of, or "" when none is close.
std::string closest_command(const std::string& got, const std::vector<std::string>& commands);

}  // namespace meshgate::ctl_tool
