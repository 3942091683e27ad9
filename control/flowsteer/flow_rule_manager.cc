#include "control/flowsteer/flow_rule_manager.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "control/common/log.h"
#include "dataplane/common/compiler.h"

namespace meshgate::ctl {
namespace {

// The spec's fields as bytes: equal keys for equal specs, for a hash diff of large rule sets
// (a block list may hold thousands of prefixes).
std::string spec_key(const FlowRuleSpec& s) {
  std::string k;
  auto put = [&k](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  const uint8_t head[] = {uint8_t(s.kind), uint8_t(s.ipv6), uint8_t(s.has_destination), s.proto,
                          uint8_t(s.action), s.source.len};
  put(head, sizeof head);
  put(&s.port_id, sizeof s.port_id);
  put(&s.priority, sizeof s.priority);
  put(s.source.addr.b, 16);
  put(s.destination.b, 16);
  put(&s.dst_port, sizeof s.dst_port);
  put(&s.dst_port_mask, sizeof s.dst_port_mask);
  put(&s.queue, sizeof s.queue);
  put(&s.rss_queues, sizeof s.rss_queues);
  return k;
}

std::string reason_of(const char* call, const Error& e) {
  return std::string(call) + ": " + (e.message.empty() ? "refused" : e.message);
}

class DpdkFlowApi final : public FlowApi {
 public:
  std::optional<Error> validate(uint16_t port_id, const RteFlowRule& r) override {
    rte_flow_error err{};
    if (rte_flow_validate(port_id, &r.attr, r.pattern.data(), r.actions.data(), &err) == 0) {
      return std::nullopt;
    }
    return error_of(err, "not supported");
  }
  Result<FlowHandle> create(uint16_t port_id, const RteFlowRule& r) override {
    rte_flow_error err{};
    rte_flow* f = rte_flow_create(port_id, &r.attr, r.pattern.data(), r.actions.data(), &err);
    if (f == nullptr) return error_of(err, "failed");
    return reinterpret_cast<FlowHandle>(f);
  }
  std::optional<Error> destroy(uint16_t port_id, FlowHandle h) override {
    rte_flow_error err{};
    if (rte_flow_destroy(port_id, reinterpret_cast<rte_flow*>(h), &err) == 0) return std::nullopt;
    return error_of(err, "failed");
  }
  std::optional<Error> flush(uint16_t port_id) override {
    rte_flow_error err{};
    if (rte_flow_flush(port_id, &err) == 0) return std::nullopt;
    return error_of(err, "failed");
  }

 private:
  static Error error_of(const rte_flow_error& e, const char* fallback) {
    return Error{e.message ? e.message : fallback};
  }
};

}  // namespace

std::unique_ptr<FlowApi> make_dpdk_flow_api() { return std::make_unique<DpdkFlowApi>(); }

const char* flow_rule_state_name(FlowRuleState s) {
  switch (s) {
    case FlowRuleState::kInstalled: return "installed";
    case FlowRuleState::kRefused: return "refused";
    case FlowRuleState::kStale: return "stale";
  }
  return "unknown";
}

void FlowRuleManager::add_port(FlowPortFacts facts) {
  MG_CHECK(port(facts.port_id) == nullptr);
  Port p;
  p.facts = std::move(facts);
  ports_.push_back(std::move(p));
}

FlowRuleManager::Port* FlowRuleManager::port(uint16_t port_id) {
  for (Port& p : ports_) {
    if (p.facts.port_id == port_id) return &p;
  }
  return nullptr;
}

const FlowRuleManager::Port* FlowRuleManager::port(uint16_t port_id) const {
  return const_cast<FlowRuleManager*>(this)->port(port_id);
}

std::string FlowRuleManager::port_note(uint16_t port_id) const {
  const Port* p = port(port_id);
  return p ? p->note : std::string();
}

std::vector<FlowPortFacts> FlowRuleManager::ports() const {
  std::vector<FlowPortFacts> out;
  for (const Port& p : ports_) out.push_back(p.facts);
  return out;
}

std::optional<Error> FlowRuleManager::probe(uint16_t port_id, const FlowRuleSpec& s) {
  const Port* p = port(port_id);
  MG_CHECK(p != nullptr);
  return api_.validate(port_id, translate_flow_rule(s, p->facts));
}

void FlowRuleManager::set_port_note(uint16_t port_id, std::string note) {
  Port* p = port(port_id);
  MG_CHECK(p != nullptr);
  p->note = std::move(note);
}

void FlowRuleManager::install(Port& p, Entry& e) {
  const RteFlowRule r = translate_flow_rule(e.spec, p.facts);
  const size_t kind = size_t(e.spec.kind);
  if (auto err = api_.validate(p.facts.port_id, r)) {
    e.state = FlowRuleState::kRefused;
    e.reason = reason_of("rte_flow_validate", *err);
    e.sticky = true;
    ++counters_.refusals[kind];
    return;
  }
  auto h = api_.create(p.facts.port_id, r);
  if (!h) {
    e.state = FlowRuleState::kRefused;
    e.reason = reason_of("rte_flow_create", h.error());
    e.sticky = true;
    ++counters_.refusals[kind];
    return;
  }
  e.handle = *h;
  e.state = FlowRuleState::kInstalled;
  e.reason.clear();
  e.sticky = false;
  ++counters_.installs[kind];
}

bool FlowRuleManager::destroy(Port& p, Entry& e) {
  if (e.handle == 0) return true;
  if (auto err = api_.destroy(p.facts.port_id, e.handle)) {
    ++counters_.destroy_failures;
    e.state = FlowRuleState::kStale;
    e.reason = reason_of("rte_flow_destroy", *err);
    log(LogLevel::kWarn, "flow_rule_destroy_failed", "port=%s kind=%s match=\"%s\" error=\"%s\"",
        p.facts.name.c_str(), flow_rule_kind_name(e.spec.kind),
        flow_rule_match_text(e.spec).c_str(), err->message.c_str());
    return false;
  }
  e.handle = 0;
  return true;
}

void FlowRuleManager::sync(uint16_t port_id, const std::vector<FlowRuleSpec>& desired) {
  Port* pp = port(port_id);
  MG_CHECK(pp != nullptr);
  Port& p = *pp;
  std::unordered_map<std::string, size_t> want;  // key -> index in desired
  for (size_t i = 0; i < desired.size(); ++i) {
    MG_CHECK(desired[i].port_id == port_id);
    want.emplace(spec_key(desired[i]), i);
  }
  std::vector<Entry> old = std::move(p.entries);
  p.entries.clear();
  std::vector<std::optional<Entry>> kept(desired.size());
  std::vector<Entry> stale;
  uint64_t removed = 0, installed_before = 0, refused_before = 0;
  for (size_t k = 0; k < kFlowRuleKinds; ++k) {
    installed_before += counters_.installs[k];
    refused_before += counters_.refusals[k];
  }

  // Gone rules: the DROP rules first, so an allow rule never disappears before its DROP.
  std::stable_partition(old.begin(), old.end(),
                        [](const Entry& e) { return e.spec.action == FlowRuleAction::kDrop; });
  bool destroy_failed = false;
  for (Entry& e : old) {
    const auto it = want.find(spec_key(e.spec));
    if (it != want.end() && !kept[it->second]) {
      kept[it->second] = std::move(e);
      continue;
    }
    if (e.handle == 0) continue;
    if (destroy(p, e)) {
      ++counters_.removals;
      ++removed;
    } else {
      destroy_failed = true;
      stale.push_back(std::move(e));
    }
  }
  if (destroy_failed) {
    // A rule that should be gone may still drop traffic: start the port over.
    if (auto err = api_.flush(port_id)) {
      log(LogLevel::kError, "flow_rules_flush_failed", "port=%s error=\"%s\"",
          p.facts.name.c_str(), err->message.c_str());
    } else {
      ++counters_.flushes;
      stale.clear();
      for (auto& k : kept) {
        if (k && k->handle != 0) {
          k->handle = 0;
          k->state = FlowRuleState::kRefused;
          k->sticky = false;  // lost to the flush, not refused: install again below
        }
      }
    }
  }

  // Desired rules: the source-range DROPs last, once their allow rules are known.
  std::vector<Entry> next(desired.size());
  auto settle = [&](size_t i) {
    Entry e = kept[i] ? std::move(*kept[i]) : Entry{desired[i], 0, FlowRuleState::kRefused, "",
                                                     false};
    if (e.state == FlowRuleState::kStale) {  // still in the NIC and wanted again
      e.state = FlowRuleState::kInstalled;
      e.reason.clear();
    }
    if (is_source_range_drop(e.spec)) {
      bool allows_in = true;
      for (size_t j = 0; j < desired.size(); ++j) {
        if (j != i && same_service(desired[j], desired[i]) && !is_source_range_drop(desired[j])) {
          allows_in &= next[j].state == FlowRuleState::kInstalled;
        }
      }
      if (!allows_in) {
        if (e.handle != 0 && !destroy(p, e)) {
          stale.push_back(std::move(e));
          e = Entry{desired[i], 0, FlowRuleState::kRefused, "", false};
        }
        e.state = FlowRuleState::kRefused;
        e.reason = "allow rule not installed: dropping here would drop allowed sources";
        e.sticky = false;
        next[i] = std::move(e);
        return;
      }
    }
    const bool retry = e.state == FlowRuleState::kRefused && !e.sticky;
    if (retry) install(p, e);
    next[i] = std::move(e);
  };
  for (size_t i = 0; i < desired.size(); ++i) {
    if (!is_source_range_drop(desired[i])) settle(i);
  }
  for (size_t i = 0; i < desired.size(); ++i) {
    if (is_source_range_drop(desired[i])) settle(i);
  }
  p.entries = std::move(next);
  for (Entry& e : stale) p.entries.push_back(std::move(e));

  uint64_t installed_now = 0, refused_now = 0;
  for (size_t k = 0; k < kFlowRuleKinds; ++k) {
    installed_now += counters_.installs[k];
    refused_now += counters_.refusals[k];
  }
  if (installed_now != installed_before || refused_now != refused_before || removed != 0 ||
      destroy_failed) {
    std::string first_reason;
    for (const Entry& e : p.entries) {
      if (e.state == FlowRuleState::kRefused) {
        first_reason = e.reason;
        break;
      }
    }
    log(LogLevel::kInfo, "flow_rules_synced",
        "port=%s desired=%zu created=%lu refused=%lu removed=%lu reason=\"%s\"",
        p.facts.name.c_str(), desired.size(), (unsigned long)(installed_now - installed_before),
        (unsigned long)(refused_now - refused_before), (unsigned long)removed,
        first_reason.c_str());
  }
}

void FlowRuleManager::sync_all(const FlowRuleInputs& in) {
  for (Port& p : ports_) sync(p.facts.port_id, desired_rules(in, p.facts));
}

void FlowRuleManager::flush_all() {
  for (Port& p : ports_) {
    const bool held = std::any_of(p.entries.begin(), p.entries.end(),
                                  [](const Entry& e) { return e.handle != 0; });
    if (held) {
      if (auto err = api_.flush(p.facts.port_id)) {
        log(LogLevel::kWarn, "flow_rules_flush_failed", "port=%s error=\"%s\"",
            p.facts.name.c_str(), err->message.c_str());
      }
    }
    p.entries.clear();
  }
}

bool FlowRuleManager::all_installed(uint16_t port_id, FlowRuleKind kind) const {
  const Port* p = port(port_id);
  if (p == nullptr) return false;
  bool any = false;
  for (const Entry& e : p->entries) {
    if (e.spec.kind != kind) continue;
    if (e.state != FlowRuleState::kInstalled) return false;
    any = true;
  }
  return any;
}

std::vector<FlowRuleStatus> FlowRuleManager::status() const {
  std::vector<FlowRuleStatus> out;
  for (const Port& p : ports_) {
    for (const Entry& e : p.entries) {
      out.push_back({p.facts.name, e.spec, e.state, e.reason, e.handle != 0});
    }
  }
  return out;
}

nlohmann::json flow_rules_json(const FlowRuleManager& m) {
  using nlohmann::json;
  const std::vector<FlowRuleStatus> st = m.status();
  json ports = json::array();
  for (const FlowPortFacts& f : m.ports()) {
    uint64_t installed = 0, refused = 0;
    for (const FlowRuleStatus& s : st) {
      if (s.spec.port_id != f.port_id) continue;
      installed += s.state == FlowRuleState::kInstalled;
      refused += s.state == FlowRuleState::kRefused;
    }
    ports.push_back({{"port", f.name},
                     {"port_id", f.port_id},
                     {"queues", f.queues},
                     {"installed", installed},
                     {"refused", refused},
                     {"note", m.port_note(f.port_id)}});
  }
  json rules = json::array();
  for (const FlowRuleStatus& s : st) {
    rules.push_back({{"port", s.port},
                     {"kind", flow_rule_kind_name(s.spec.kind)},
                     {"priority", s.spec.priority},
                     {"match", flow_rule_match_text(s.spec)},
                     {"action", flow_rule_action_text(s.spec)},
                     {"state", flow_rule_state_name(s.state)},
                     {"reason", s.reason},
                     {"handle", s.handle}});
  }
  const FlowRuleCounters& c = m.counters();
  json installs = json::object(), refusals = json::object();
  for (uint32_t k = 0; k < kFlowRuleKinds; ++k) {
    installs[flow_rule_kind_name(FlowRuleKind(k))] = c.installs[k];
    refusals[flow_rule_kind_name(FlowRuleKind(k))] = c.refusals[k];
  }
  return {{"ports", ports},
          {"rules", rules},
          {"counters",
           {{"installs", installs},
            {"refusals", refusals},
            {"removals", c.removals},
            {"destroy_failures", c.destroy_failures},
            {"flushes", c.flushes}}}};
}

}  // namespace meshgate::ctl
