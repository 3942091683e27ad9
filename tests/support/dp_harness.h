// Runs the real worker burst functions on packets a test injects: ports are net_ring devices
// (frames in through an RX ring, out through a TX ring), the config is inline TOML, the clock
// follows the timestamps the test gives. One EAL per test process (no hugepages, no PCI).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/config/config.h"
#include "control/snapshot/builder.h"
#include "dataplane/lb/affinity.h"
#include "dataplane/nat/rss.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/snapshot/snapshot_slot.h"
#include "dataplane/worker/worker.h"
#include "tools/pktlib/build.h"

struct rte_ring;
struct rte_mempool;

namespace meshgate::test {

// Initializes the EAL once for this process.
void init_eal_once();
rte_mempool* test_pool();

struct HarnessOptions {
  uint32_t max_flows = 4096;  // per worker
  uint16_t workers = 1;
  // Steer injected TCP/UDP packets to queues like a NIC with RSS: Toeplitz with the default key
  // over a RETA that spreads 128 entries over the workers. The workers get the same predictor.
  bool rss = false;
  // WorkerParams::pipeline: full bursts of fast-path candidates are held for the next poll.
  bool pipeline = false;
  // Each TX ring's size (a power of two; it holds one less): small to make TX fill up.
  uint32_t tx_ring_size = 1024;
  // Deliver 802.1Q-tagged frames as a NIC that strips the tag does: without it in the frame,
  // in mbuf->vlan_tci with RTE_MBUF_F_RX_VLAN_STRIPPED.
  bool strip_vlan = false;
  // Host interfaces: ports whose config sets host_interface get a kernel twin whose rings
  // (WorkerParams::host_out / host_in) hold this many packets, less one; 0: no twins.
  uint32_t host_ring_size = 0;
  // Entries of the session affinity table the workers share (0: none).
  uint32_t affinity_entries = 4096;
  // Changes the config's service specs before each build (e.g. mesh identities and Istio
  // labels on endpoints, which inline TOML cannot give); none: as configured.
  std::function<void(std::vector<ctl::ServiceSpec>&)> edit_specs;
  // Worker 0's access-log ring (WorkerParams::access_log; the test drains it), and whether
  // packet-mode flows write flow-end records too.
  dp::AccessRing* access_log = nullptr;
  bool access_log_flows = false;
};

class DataplaneHarness {
 public:
  // Port devices in the config are ignored; each [[port]] becomes a net_ring port with one RX
  // and one TX ring per worker. Ports without `mac` get 02:00:00:00:00:0<index+1>.
  DataplaneHarness(const std::string& config_toml, HarnessOptions opt);
  explicit DataplaneHarness(const std::string& config_toml, uint32_t max_flows = 4096)
      : DataplaneHarness(config_toml, HarnessOptions{max_flows, 1, false}) {}
  ~DataplaneHarness();
  DataplaneHarness(const DataplaneHarness&) = delete;
  DataplaneHarness& operator=(const DataplaneHarness&) = delete;

  // Injects frames on port `port` with capture time `ts_ns` (to queue 0, or to the RSS queue
  // with HarnessOptions::rss), polls every worker until nothing moves (handoffs included) and
  // returns what every port transmitted (port 0 first).
  std::vector<pkt::Bytes> send(const std::vector<pkt::Bytes>& frames, uint64_t ts_ns,
                               uint16_t port = 0);
  // Only enqueues the frames (as send does); poll_each_once then runs one poll iteration of
  // every worker and returns what the ports transmitted.
  void inject(const std::vector<pkt::Bytes>& frames, uint64_t ts_ns, uint16_t port = 0);
  std::vector<pkt::Bytes> poll_each_once(uint64_t ts_ns);
  // Only enqueues the frames into one queue (worker) of a port: no worker polls.
  void enqueue_to_queue(const std::vector<pkt::Bytes>& frames, uint64_t ts_ns, uint16_t port,
                        uint16_t queue);
  // The same into one queue (worker) explicitly.
  std::vector<pkt::Bytes> send_to_queue(const std::vector<pkt::Bytes>& frames, uint64_t ts_ns,
                                        uint16_t port, uint16_t queue);
  // The queue RSS steers a frame to (0 without RSS).
  uint16_t rss_queue(const pkt::Bytes& frame) const;
  std::vector<pkt::Bytes> send(const pkt::Bytes& frame, uint64_t ts_ns, uint16_t port = 0) {
    return send(std::vector<pkt::Bytes>{frame}, ts_ns, port);
  }
  // Moves the clock to `ts_ns` and runs one poll iteration with no input (timers).
  std::vector<pkt::Bytes> tick(uint64_t ts_ns);
  // Host interfaces (HarnessOptions::host_ring_size): what the workers gave the ports' kernel
  // twins, as (port index, frame), taken out of their ring.
  std::vector<std::pair<uint16_t, pkt::Bytes>> take_host();
  // Queues frames as the kernel sends them through port `port`'s twin; the next poll of
  // worker 0 transmits them.
  void from_host(uint16_t port, const std::vector<pkt::Bytes>& frames);
  // Output of the last call, per port.
  const std::vector<pkt::Bytes>& sent_on(uint16_t port) const { return last_by_port_[port]; }

  // Replaces the snapshot with one built from `config_toml` (same ports).
  void publish(const std::string& config_toml);
  // Stops the workers as at exit (pending packets dropped), then finish_stopped(); returns
  // what was flushed.
  std::vector<pkt::Bytes> finish();
  // What the gateway does once every worker has stopped: Worker::drop_late_handoffs.
  void finish_stopped();

  // Counters summed over the workers.
  const dp::WorkerCounters& counters() const;
  const dp::WorkerCounters& counters_of(uint16_t w) const { return workers_[w]->counters(); }
  uint64_t drops(dp::Drop r) const { return counters().drops[uint32_t(r)]; }
  uint64_t drops_total() const;
  // in + generated == out + consumed + drops + pending
  bool balanced() const;
  dp::BackendCounters backend(const std::string& service, const std::string& ep) const;
  const ctl::Config& config() const { return cfg_; }
  const dp::Snapshot* snapshot() const { return slot_.load(); }
  dp::Worker& worker(uint16_t w = 0) { return *workers_[w]; }
  uint16_t workers() const { return uint16_t(workers_.size()); }
  const MacAddr& port_mac(uint16_t port) const { return ports_[port].mac; }
  const std::vector<dp::PortRuntime>& ports() const { return ports_; }
  const dp::AffinityTable* affinity() const { return affinity_.get(); }
  const ctl::Registries& registries() const { return *reg_; }

 private:
  std::vector<pkt::Bytes> collect();
  void poll_all(uint64_t ts_ns);
  void poll_round(uint64_t ts_ns);  // one poll_once of every worker

  HarnessOptions opt_;
  ctl::Config cfg_;
  std::unique_ptr<ctl::Registries> reg_;
  std::vector<dp::PortRuntime> ports_;
  std::vector<std::vector<rte_ring*>> rx_rings_, tx_rings_;  // [port][queue]
  std::vector<std::vector<rte_ring*>> handoff_;               // [from][to]
  rte_ring* host_out_ = nullptr;                              // workers -> kernel twins
  std::vector<rte_ring*> host_in_;                            // [port]: twin -> worker 0
  std::unique_ptr<dp::RssPredictor> rss_;
  dp::SnapshotSlot slot_;
  std::unique_ptr<dp::AffinityTable> affinity_;
  std::vector<std::unique_ptr<dp::Worker>> workers_;
  mutable dp::WorkerCounters total_;
  std::vector<std::vector<pkt::Bytes>> last_by_port_;
  bool proxy_ = false;  // a service uses mode = "proxy": every worker runs the L4 proxy
  dp::ProxyParams proxy_params_;
  uint64_t version_ = 0;
};

// Expects two workers' flow tables to hold the same flows, slot for slot and byte for byte
// (a worker that took the fast path against one that took the stages).
void expect_same_flows(const dp::FlowTable& a, const dp::FlowTable& b);

// A config prelude most dataplane tests share (the demo topology): port net0 with MAC
// 02:00:00:00:00:01 and 198.51.100.1/24 + 2001:db8:1::1/64, default routes via the router
// .254 / ::fe (02:00:00:00:00:fe), backends with static neighbors, services web / dns / web6.
extern const char* const kDemoTopology;

}  // namespace meshgate::test
