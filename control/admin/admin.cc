#include "control/admin/admin.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_map>

#include "control/admin/workloads.h"
#include "control/snapshot/builder.h"
#include "control/stats/stats.h"
#include "dataplane/conntrack/conntrack.h"

namespace meshgate::ctl {
namespace {

using nlohmann::json;

const char* protocol_name(uint8_t proto) {
  switch (proto) {
    case 1: return "icmp";
    case 6: return "tcp";
    case 17: return "udp";
    case 58: return "icmpv6";
  }
  return "other";
}

// Name of the port whose prefixes hold `a` (how [[route]] / [[neighbor]] pick one by default).
std::string port_for(const Config& cfg, const std::string& given, const IpAddr& a) {
  if (!given.empty()) return given;
  for (const auto& p : cfg.ports) {
    for (const auto& pre : p.addresses) {
      if (pre.contains(a)) return p.name;
    }
  }
  return "";
}

AdminReply json_reply(const json& j) {
  AdminReply r;
  r.body = j.dump(2);
  r.body += '\n';
  return r;
}

// Records per worker buffer: what the worker holds now plus room for flows created while it
// copies, never more than the request's limit.
uint32_t dump_capacity(uint64_t active, uint32_t limit) {
  return uint32_t(std::min<uint64_t>(limit, active + active / 8 + 256));
}

}  // namespace

Admin::Admin(const Config& cfg, const StatRegistry& registry, const SnapshotPublisher& publisher)
    : cfg_(cfg), registry_(registry), publisher_(publisher) {}

Admin::~Admin() { stop(); }

Result<std::unique_ptr<Admin>> Admin::start(const Config& cfg, const StatRegistry& registry,
                                            const SnapshotPublisher& publisher) {
  std::unique_ptr<Admin> a(new Admin(cfg, registry, publisher));
  a->bridge_.set_mesh_required(cfg.mesh.source != MeshSource::kNone);
  auto s = AdminServer::start(cfg.admin.listen, a->bridge_);
  if (!s) return s.error();
  a->server_ = std::move(s.value());
  return a;
}

void Admin::start_serving(std::vector<dp::Worker*> workers, std::vector<dp::PortRuntime> ports) {
  workers_ = std::move(workers);
  ports_ = std::move(ports);
  views_.assign(workers_.begin(), workers_.end());
  std::vector<const uint64_t*> loops;
  for (const dp::Worker* w : workers_) loops.push_back(&w->counters().loops);
  bridge_.watch_workers(std::move(loops));
  bridge_.start_serving();
}

void Admin::tick(Clock::time_point now) {
  if (stopped_) return;
  bridge_.observe_workers(now);
  if (rates_.due(now)) sample_rates(now);
  for (auto& q : bridge_.take()) {
    if (q->kind == QueryKind::kFlows) {
      FlowJob job;
      job.query = std::move(q);
      flow_jobs_.push_back(std::move(job));
      continue;
    }
    if (q->kind == QueryKind::kReload && reload_handler_) {
      reload_handler_(std::move(q));
      continue;
    }
    q->promise.set_value(answer(q->kind));
  }
  // Flow dumps one at a time: a worker holds one request at a time.
  while (!flow_jobs_.empty()) {
    FlowJob& job = flow_jobs_.front();
    if (!job.started) start_flow_job(job, now);
    if (!advance_flow_job(job, now)) break;
    flow_jobs_.pop_front();
  }
  reap_orphans();
}

void Admin::stop() {
  if (stopped_) return;
  stopped_ = true;
  bridge_.close();
  for (auto& job : flow_jobs_) {
    job.query->promise.set_value(text_reply(503, "meshgate is shutting down"));
  }
  flow_jobs_.clear();
  if (server_) server_->stop();
  // The workers have stopped: nobody writes into these buffers any more.
  orphans_.clear();
}

AdminReply Admin::answer(QueryKind kind) {
  switch (kind) {
    case QueryKind::kHealth:
      return bridge_.health(Clock::now());
    case QueryKind::kStats:
      return json_reply(stats_with_rates());
    case QueryKind::kMetrics: {
      AdminReply r;
      r.content_type = kPrometheusContentType;
      r.body = metrics_text();
      return r;
    }
    case QueryKind::kConfigDump: {
      AdminReply r;
      r.body = config_dump();
      return r;
    }
    case QueryKind::kFlows: break;  // served by flow jobs
    case QueryKind::kBgp:
      if (!bgp_source_) return text_reply(404, "BGP is not configured (no [bgp] table)");
      return json_reply(bgp_source_());
    case QueryKind::kFlowRules:
      if (!flow_rules_source_) {
        return text_reply(404, "no rte_flow rules are managed (ports not started)");
      }
      return json_reply(flow_rules_source_());
    case QueryKind::kWorkloads:
      return json_reply(workloads_source_ ? workloads_source_() : workloads_json(nullptr));
    case QueryKind::kReload:  // with a handler, handed to it
      return text_reply(503, "config reload is not available");
  }
  return text_reply(500, "unknown query");
}

void Admin::sample_rates(Clock::time_point now) {
  std::vector<std::pair<uint32_t, RateSample>> samples;
  if (const dp::Snapshot* snap = publisher_.current()) {
    std::set<uint32_t> seen;
    for (const dp::SnapBackend& be : snap->backends) {
      if (!seen.insert(be.stat_id).second) continue;
      const dp::BackendCounters c = backend_totals(views_, be.stat_id);
      samples.push_back({be.stat_id, RateSample{c.flows, c.packets, c.bytes, c.reply_bytes}});
    }
  }
  rates_.update(now, samples);
}

nlohmann::json Admin::stats_with_rates() {
  const dp::Snapshot* snap = publisher_.current();
  json j = stats_json(views_, registry_, snap, read_port_counters(ports_));
  j["rate_interval_s"] = kRateInterval.count();
  if (!snap) return j;
  json& services = j["services"];
  for (const dp::SnapService& s : snap->services) {
    if (!services.contains(s.name)) continue;  // listeners and node ports are not listed
    json& backends = services[s.name]["backends"];
    for (uint32_t b = 0; b < s.n_backends; ++b) {
      const dp::SnapBackend& be = snap->backends[s.first_backend + b];
      const std::string& name = registry_.names()[be.stat_id].backend;
      const Rates* r = rates_.rates(be.stat_id);
      if (r == nullptr || !backends.contains(name)) continue;
      backends[name]["rates"] = {{"flows_per_s", r->flows_per_s},
                                 {"packets_per_s", r->packets_per_s},
                                 {"bytes_per_s", r->bytes_per_s},
                                 {"reply_bytes_per_s", r->reply_bytes_per_s}};
    }
  }
  return j;
}

std::string Admin::metrics_text() {
  MetricsInput in;
  for (const dp::Worker* w : views_) in.workers.push_back(&w->counters());
  const dp::Snapshot* snap = publisher_.current();
  if (snap) {
    in.snapshot_version = snap->version;
    std::set<uint32_t> seen;  // stat id 0 (overflow) may be shared: one sample per id
    for (const dp::SnapService& s : snap->services) {
      for (uint32_t b = 0; b < s.n_backends; ++b) {
        const dp::SnapBackend& be = snap->backends[s.first_backend + b];
        if (!seen.insert(be.stat_id).second) continue;
        const dp::BackendCounters c = backend_totals(views_, be.stat_id);
        const StatRegistry::Name& n = registry_.names()[be.stat_id];
        in.backends.push_back({be.stat_id ? s.name : n.service, n.backend, c.packets, c.bytes,
                               c.flows, c.reply_bytes});
      }
    }
  }
  in.ports = read_port_counters(ports_);
  in.ready = bridge_.readiness().ready;
  in.draining = bridge_.draining();
  PromWriter w;
  write_core_metrics(in, w);
  for (const MetricsSource& src : metrics_sources_) src(w);
  return w.text();
}

namespace {

// A policy as the mesh file writes it (docs/MESH.md "The mesh file"): only the fields a match sets.
json policy_json(const dp::policy::ScopedPolicy& sp) {
  auto patterns = [](const std::vector<dp::policy::StringMatch>& v) {
    json a = json::array();
    for (const auto& m : v) a.push_back(dp::policy::pattern(m));
    return a;
  };
  auto prefixes = [](const std::vector<IpPrefix>& v) {
    json a = json::array();
    for (const auto& x : v) a.push_back(x.str());
    return a;
  };
  auto accounts = [](const std::vector<dp::policy::ServiceAccountMatch>& v) {
    json a = json::array();
    for (const auto& x : v) a.push_back(x.ns + "/" + x.service_account);
    return a;
  };
  const dp::policy::Policy& p = sp.policy;
  json groups = json::array();
  for (const dp::policy::Group& g : p.groups) {
    json clauses = json::array();
    for (const dp::policy::Clause& c : g.clauses) {
      json matches = json::array();
      for (const dp::policy::Match& m : c.matches) {
        json o = json::object();
        auto put = [&o](const char* key, json v) {
          if (!v.empty()) o[key] = std::move(v);
        };
        put("namespaces", patterns(m.namespaces));
        put("not_namespaces", patterns(m.not_namespaces));
        put("principals", patterns(m.principals));
        put("not_principals", patterns(m.not_principals));
        put("source_ips", prefixes(m.source_ips));
        put("not_source_ips", prefixes(m.not_source_ips));
        put("destination_ips", prefixes(m.destination_ips));
        put("not_destination_ips", prefixes(m.not_destination_ips));
        put("destination_ports", json(m.destination_ports));
        put("not_destination_ports", json(m.not_destination_ports));
        put("service_accounts", accounts(m.service_accounts));
        put("not_service_accounts", accounts(m.not_service_accounts));
        matches.push_back(std::move(o));
      }
      clauses.push_back({{"matches", std::move(matches)}});
    }
    groups.push_back({{"clauses", std::move(clauses)}});
  }
  static constexpr const char* kScope[] = {"global", "namespace", "workload"};
  return {{"name", sp.name},
          {"namespace", sp.ns},
          {"scope", kScope[uint8_t(sp.scope)]},
          {"action", p.action == dp::policy::Action::kDeny ? "deny" : "allow"},
          {"dry_run", p.dry_run},
          {"groups", std::move(groups)}};
}

}  // namespace

std::string Admin::config_dump() {
  const dp::Snapshot* snap = publisher_.current();
  json j;
  j["snapshot_version"] = snap ? snap->version : 0;
  j["config"] = config_status_;
  // The lookup table size is decided by the builder; names are unique among services.
  std::unordered_map<std::string_view, uint32_t> table_sizes;
  if (snap) {
    for (const dp::SnapService& ss : snap->services) table_sizes[ss.name] = ss.table_size;
  }
  json services = json::array();
  for (const ServiceSpec& s : services_) {
    const auto ts = table_sizes.find(s.name);
    const uint32_t table_size = ts == table_sizes.end() ? 0 : ts->second;
    json eps = json::array();
    for (const EndpointSpec& e : s.endpoints) {
      eps.push_back({{"address", e.address.str()},
                     {"port", e.port},
                     {"weight", e.weight},
                     {"health", e.healthy ? "healthy" : "unhealthy"},
                     {"tunnel_protocol", e.tunnel == TunnelProtocol::kHbone ? "hbone" : "none"},
                     {"identity", e.identity},
                     {"uid", e.uid}});
    }
    services.push_back({{"name", s.name},
                        {"vip", s.vip.str()},
                        {"port", s.port},
                        {"protocol", s.protocol == L4Proto::kTcp ? "tcp" : "udp"},
                        {"mode", dp::mode_name(s.mode)},
                        {"table_size", table_size},
                        {"source", s.source},
                        {"endpoints", eps}});
  }
  j["services"] = services;
  if (health_source_) j["health_checks"] = health_source_();
  json ports = json::array();
  json locals = json::array();
  for (const PortConfig& p : cfg_.ports) {
    json addrs = json::array();
    for (const IpPrefix& a : p.addresses) {
      addrs.push_back(a.str());
      locals.push_back({{"address", a.addr.str()}, {"prefix", a.str()}, {"port", p.name}});
    }
    ports.push_back({{"name", p.name}, {"device", p.device}, {"addresses", addrs}, {"mtu", p.mtu}});
  }
  j["ports"] = ports;
  j["local_addresses"] = locals;
  json fullnat = json::array();
  for (const IpAddr& a : cfg_.fullnat.local_addresses) fullnat.push_back(a.str());
  j["fullnat_local_addresses"] = fullnat;
  json routes = json::array();
  for (const RouteConfig& r : cfg_.routes) {
    routes.push_back(
        {{"prefix", r.prefix.str()}, {"via", r.via.str()}, {"port", port_for(cfg_, r.port, r.via)}});
  }
  j["routes"] = routes;
  json neighbors = json::array();
  for (const NeighborConfig& n : cfg_.neighbors) {
    neighbors.push_back({{"address", n.address.str()},
                         {"mac", n.mac.str()},
                         {"port", port_for(cfg_, n.port, n.address)}});
  }
  j["neighbors"] = neighbors;
  // Policies and certificates as the published snapshot carries them.
  json policies = json::array();
  if (snap && snap->policies) {
    for (const dp::policy::ScopedPolicy& p : snap->policies->policies) {
      policies.push_back(policy_json(p));
    }
  }
  j["policies"] = policies;
  json certs = json::array();
  const int64_t now = int64_t(std::time(nullptr));
  static const std::vector<CertInfo> kNoCerts;
  for (const CertInfo& c : snap && snap->certificates ? *snap->certificates : kNoCerts) {
    certs.push_back({{"file", c.file},
                     {"role", c.role},
                     {"identity", c.identity},
                     {"uri_sans", c.uri_sans},
                     {"subject", c.subject},
                     {"issuer", c.issuer},
                     {"serial", c.serial},
                     {"not_before", unix_to_rfc3339(c.not_before_unix)},
                     {"not_after", unix_to_rfc3339(c.not_after_unix)},
                     {"expires_in_s", c.not_after_unix - now}});
  }
  j["certificates"] = certs;
  // The TLS contexts workers would use for HBONE: one per worker, of that certificate.
  json tls = {{"contexts", snap ? snap->tls_contexts.size() : 0}, {"identity", ""}};
  if (snap && !snap->tls_contexts.empty()) tls["identity"] = snap->tls_contexts.front()->own_id();
  j["tls"] = tls;
  return j.dump(2) + "\n";
}

void Admin::start_flow_job(FlowJob& job, Clock::time_point now) {
  job.started = true;
  job.deadline = now + kFlowDumpWait;
  // With a filter the limit counts matching flows: each worker copies all of its flows.
  const uint32_t limit = job.query->filter.empty() ? job.query->limit : UINT32_MAX;
  for (uint32_t w = 0; w < workers_.size(); ++w) {
    auto d = std::make_unique<WorkerDump>();
    d->worker = w;
    dp::Worker* worker = workers_[w];
    const uint32_t cap =
        dump_capacity(dp::counter_read(worker->counters().flows_active), limit);
    d->records.resize(cap);
    d->req.records = d->records.data();
    d->req.max = cap;
    if (worker->done()) {
      worker->dump_flows_stopped(&d->req);  // legal once the worker no longer runs
      d->answered = true;
    } else if (cap == 0) {
      d->answered = true;
    } else {
      // False when an earlier, abandoned dump is still pending on that worker: it then
      // counts as not answered.
      d->posted = worker->post_flow_dump(&d->req);
    }
    job.dumps.push_back(std::move(d));
  }
}

bool Admin::advance_flow_job(FlowJob& job, Clock::time_point now) {
  bool all = true;
  for (auto& d : job.dumps) {
    if (d->posted && !d->answered && d->req.done.load(std::memory_order_acquire)) {
      d->answered = true;
    }
    all &= d->answered;
  }
  if (!all && now < job.deadline) return false;
  job.query->promise.set_value(AdminReply{200, "application/json", flows_json(job)});
  for (auto& d : job.dumps) {
    if (d->posted && !d->answered) orphans_.push_back(std::move(d));
  }
  return true;
}

nlohmann::json flow_record_json(const dp::FlowRecord& f,
                                const std::vector<StatRegistry::Name>& names) {
  const bool named = f.stat_id != 0 && f.stat_id < names.size();
  const bool snat = f.mode == dp::Mode::kFullnat || f.mode == dp::Mode::kProxy;
  return {{"worker", f.worker},
          {"protocol", protocol_name(f.proto)},
          {"client", endpoint_str(f.client, f.client_port)},
          {"vip", endpoint_str(f.vip, f.vip_port)},
          {"local", snat ? endpoint_str(f.local, f.local_port) : ""},
          {"backend", endpoint_str(f.backend, f.backend_port)},
          {"service", named ? names[f.stat_id].service : ""},
          {"mode", dp::mode_name(f.mode)},
          {"state", flow_state(f)},
          {"age_ms", f.age_ms},
          {"expires_in_ms", f.expires_in_ms}};
}

std::string Admin::flows_json(const FlowJob& job) {
  const uint32_t limit = job.query->limit;
  const FlowFilter& filter = job.query->filter;
  const auto& names = registry_.names();
  static const std::string kNoService;
  json flows = json::array();
  bool truncated = false;
  uint32_t answered = 0;
  for (const auto& d : job.dumps) {
    if (!d->answered) continue;
    ++answered;
    const dp::FlowDumpRequest& r = d->req;
    if (r.max > 0 && r.count == r.max) truncated = true;  // the worker may hold more
    for (uint32_t i = 0; i < r.count; ++i) {
      const dp::FlowRecord& f = d->records[i];
      const bool named = f.stat_id != 0 && f.stat_id < names.size();
      if (!flow_matches(filter, f, named ? names[f.stat_id].service : kNoService)) continue;
      if (flows.size() >= limit) {
        truncated = true;
        break;
      }
      flows.push_back(flow_record_json(f, names));
    }
  }
  json j;
  j["count"] = flows.size();
  j["limit"] = limit;
  j["filter"] = flow_filter_json(filter);
  j["truncated"] = truncated;
  j["workers"] = job.dumps.size();
  j["workers_answered"] = answered;
  // False when a worker did not copy its flows within the wait: the list misses its flows.
  j["complete"] = answered == job.dumps.size();
  j["flows"] = flows;
  return j.dump(2) + "\n";
}

void Admin::reap_orphans() {
  std::erase_if(orphans_, [this](const std::unique_ptr<WorkerDump>& d) {
    return d->req.done.load(std::memory_order_acquire) || workers_[d->worker]->done();
  });
}

}  // namespace meshgate::ctl
