// The fullnat source choice of one worker (docs/DATAPLANE.md, "Flow ownership across
// workers"): the local address and port of every connection the gateway originates toward a
// backend, for both of its users, so that they never share a reply tuple:
//   - conntrack's fullnat flows (pick(): the worker's flow stage);
//   - the userspace TCP stack's active opens (the proxy's backend connections, the HBONE
//     terminator's upstreams and the HBONE originator's dials: StackHost::connect, which walks
//     the stack's ephemeral range and asks port_ok() for each port).
//
// The address is the [fullnat] address of the destination's family at flow_hash % count. A port
// is taken when
//   1. port % workers == this worker: a worker that receives a reply hands it to its owner by
//      the destination port alone;
//   2. among the first kFullnatRssTries candidates, the reply's RSS queue is this worker's
//      (software Toeplitz of the port toward the backend, unless its NIC steers by rte_flow
//      rules: then rule 1 is what steers);
//   3. no conntrack flow and no connection of the stack (any state, TIME-WAIT included) has the
//      reply tuple.
//
// Threads: init() at setup; every other call on the worker lcore that owns it.
#pragma once

#include <cstdint>

#include "dataplane/common/net_types.h"
#include "dataplane/drop_reasons.h"

namespace meshgate::dp {

class FlowTable;
class RssPredictor;
struct FlowTarget;
struct LocalNat;
struct Snapshot;
namespace tcp {
class TcpStack;
}

// First port conntrack tries for a fullnat source; below are the well-known and registered-low
// ports. (The TCP stack tries its ephemeral range instead, TcpConfig::ephemeral_lo.)
inline constexpr uint16_t kFullnatFirstPort = 1024;
// Candidates examined for a port whose reply RSS steers to this worker; after that any free
// port of this worker's residue is taken (the reply is then handed over).
inline constexpr uint32_t kFullnatRssTries = 64;
// Candidates conntrack examines before it gives up (Drop::kFullnatNoPort).
inline constexpr uint32_t kFullnatMaxTries = 4096;

// What the choice needs from its worker; pointers stay valid for the worker's life.
struct FullnatSourceDeps {
  uint16_t index = 0;
  uint16_t n_workers = 1;
  const FlowTable* flows = nullptr;          // conntrack: reply tuples in use
  const RssPredictor* const* rss = nullptr;  // per port index (kMaxPorts), may hold nulls
  const bool* flow_steered = nullptr;        // per port index
};

// One choice in progress (begin() fills it, port_ok() tests ports for it).
struct FullnatChoice {
  const LocalNat* local = nullptr;
  IpAddr remote;
  uint16_t remote_port_be = 0;
  uint8_t proto = 0;
  const RssPredictor* rss = nullptr;  // null: the reply's queue is not predicted
  uint32_t rss_fixed = 0;             // its hash of the reply tuple without the local port
  uint32_t candidates = 0;            // ports of this worker's residue tested so far
};

class FullnatSource {
 public:
  void init(const FullnatSourceDeps& d);
  // The TCP stack whose connections share the [fullnat] addresses (null: this worker has none).
  void set_stack(const tcp::TcpStack* s) { stack_ = s; }

  // Starts a choice toward remote:remote_port_be for a flow of hash `flow_hash`: false when the
  // snapshot has no [fullnat] address of remote's family.
  bool begin(const Snapshot& snap, const IpAddr& remote, uint16_t remote_port_be, uint8_t proto,
             uint32_t flow_hash, FullnatChoice* c) const;
  // May `port` (host order) be c's local port (rules 1-3)? Counts the candidate.
  bool port_ok(FullnatChoice& c, uint16_t port) const;

  // Conntrack's choice for a new fullnat flow toward backend:backend_port_be: fills
  // to->local_id and to->local_port (and for an ICMP echo to->backend_port: an echo's
  // identifier is its port both ways), or says why not (kFullnatNoAddress, kFullnatNoPort).
  bool pick(const Snapshot& snap, const IpAddr& backend, uint16_t backend_port_be, uint8_t proto,
            uint32_t flow_hash, FlowTarget* to, Drop* why);

 private:
  FullnatSourceDeps d_;
  const tcp::TcpStack* stack_ = nullptr;
  uint32_t cursor_ = 0;  // pick(): where the next walk over this worker's residue starts
};

}  // namespace meshgate::dp
