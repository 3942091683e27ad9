// Installs the rte_flow rules a port should carry (flow_rules.h) and keeps them in step with
// the rule set the running config asks for: sync() creates what is new and destroys what is
// gone, diffing by spec equality, so an unchanged rule is never touched and a rule whose input
// went away (a removed source range) goes away with it. Every NIC call goes through FlowApi,
// a thin interface over rte_flow_validate / create / destroy / flush, so the lifecycle is
// tested against a recording fake (tests/unit/control/flowsteer/).
//
// Refusals: a rule the port refuses (validate or create fails) is recorded as refused with the
// PMD's reason and left to software (the dataplane checks every packet whatever the NIC does).
// It is not tried again while it stays in the desired set: the same spec on the same port
// would be refused again, and a reload storm must not turn into a validate storm. A rule that
// leaves the desired set and comes back, or any changed spec, is a new rule and is tried.
// A source-range DROP waits for every allow rule of its service (same_service()): while one is
// not installed the DROP is refused as "allow rule not installed" (re-checked on each sync,
// no NIC call), because the NIC would otherwise drop clients the config allows.
//
// Destroy failures are counted; the port is then flushed and its desired rules installed
// again, so a rule that should be gone cannot keep dropping traffic. If the flush fails too,
// the rule stays listed as "stale" (its handle kept) and is destroyed on the next sync.
//
// Control thread only.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "control/common/result.h"
#include "control/flowsteer/flow_rules.h"

namespace meshgate::ctl {

// An installed rule (an rte_flow*). 0: none.
using FlowHandle = uintptr_t;

class FlowApi {
 public:
  virtual ~FlowApi() = default;
  // nullopt when the port would take the rule; else the PMD's reason.
  virtual std::optional<Error> validate(uint16_t port_id, const RteFlowRule& r) = 0;
  virtual Result<FlowHandle> create(uint16_t port_id, const RteFlowRule& r) = 0;
  virtual std::optional<Error> destroy(uint16_t port_id, FlowHandle h) = 0;
  // Removes every rule of the port (this process's and any other's).
  virtual std::optional<Error> flush(uint16_t port_id) = 0;
};

// rte_flow_validate / create / destroy / flush on real ports.
std::unique_ptr<FlowApi> make_dpdk_flow_api();

enum class FlowRuleState : uint8_t { kInstalled, kRefused, kStale };
const char* flow_rule_state_name(FlowRuleState s);  // "installed" | "refused" | "stale"

struct FlowRuleStatus {
  std::string port;
  FlowRuleSpec spec;
  FlowRuleState state = FlowRuleState::kRefused;
  std::string reason;  // why refused or stale; "" when installed
  bool handle = false; // an rte_flow handle is held
};

struct FlowRuleCounters {
  std::array<uint64_t, kFlowRuleKinds> installs{};  // creates that succeeded, by kind
  std::array<uint64_t, kFlowRuleKinds> refusals{};  // validate or create refused, by kind
  uint64_t removals = 0;                            // rules destroyed because they went away
  uint64_t destroy_failures = 0;
  uint64_t flushes = 0;  // recovery flushes after a destroy failure
};

class FlowRuleManager {
 public:
  // `api` must outlive the manager.
  explicit FlowRuleManager(FlowApi& api) : api_(api) {}
  FlowRuleManager(const FlowRuleManager&) = delete;
  FlowRuleManager& operator=(const FlowRuleManager&) = delete;

  // A started port whose rules this manager owns. Call once per port before sync().
  void add_port(FlowPortFacts facts);
  // Brings the port's rules to `desired` (specs of this port; see the file comment).
  void sync(uint16_t port_id, const std::vector<FlowRuleSpec>& desired);
  // sync() of every added port with desired_rules(in, port): what a reload calls.
  void sync_all(const FlowRuleInputs& in);
  // Removes every rule of every port (rte_flow_flush) and forgets them; before the ports
  // stop. Idempotent.
  void flush_all();

  // rte_flow_validate of one rule, nothing installed or recorded (start-up capability probe).
  std::optional<Error> probe(uint16_t port_id, const FlowRuleSpec& s);
  // Why a port does software fullnat steering, shown with its rules ("" when steered).
  void set_port_note(uint16_t port_id, std::string note);
  // Rules of `kind` are desired on the port and all of them are installed.
  bool all_installed(uint16_t port_id, FlowRuleKind kind) const;
  // Every rule known, port by port in sync order.
  std::vector<FlowRuleStatus> status() const;
  const FlowRuleCounters& counters() const { return counters_; }
  std::vector<FlowPortFacts> ports() const;
  std::string port_note(uint16_t port_id) const;

 private:
  struct Entry {
    FlowRuleSpec spec;
    FlowHandle handle = 0;
    FlowRuleState state = FlowRuleState::kRefused;
    std::string reason;
    bool sticky = false;  // refused by the NIC: not tried again for this spec
  };
  struct Port {
    FlowPortFacts facts;
    std::string note;
    std::vector<Entry> entries;
  };

  Port* port(uint16_t port_id);
  const Port* port(uint16_t port_id) const;
  void install(Port& p, Entry& e);
  // False when destroy failed (the entry is then stale).
  bool destroy(Port& p, Entry& e);

  FlowApi& api_;
  std::vector<Port> ports_;
  FlowRuleCounters counters_;
};

// GET /flow_rules: {"ports": [{port, port_id, queues, installed, refused, note}], "rules":
// [{port, kind, priority, match, action, state, reason, handle}], "counters": {...}}, the
// equivalent of testpmd's `flow list` for every port.
nlohmann::json flow_rules_json(const FlowRuleManager& m);

}  // namespace meshgate::ctl
