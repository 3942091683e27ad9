// Host interfaces: a port's kernel twin (a TAP device created with DPDK's net_tap), so the
// kernel in the gateway's network namespace can use the port's addresses (a BGP daemon, SSH,
// ping) as if the NIC were its own.
//
//   workers --host_out (MP/SC)--> pump --TAP--> kernel
//   kernel --TAP--> pump --host_in[port] (SP/SC)--> worker 0 --> the port's TX queue
//
// The workers give the twin what is addressed to a port address and that they do not serve
// themselves, and the ARP replies and neighbor advertisements they learned from
// (dataplane/local/local_stage.h, dataplane/l2/l2_stage.h); the twin has the port's MAC, its
// addresses and MTU, so what the kernel sends leaves by the port as it is. The pump is a
// thread of its own: a slow or absent kernel reader fills a ring, and the workers count the
// packets they could not queue (drop reason host_queue_full) instead of waiting.
//
// Threads: create() and the accessors on the control thread; the pump thread between start()
// and stop(); counters() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/config/config.h"
#include "control/common/result.h"
#include "dataplane/worker/port.h"

struct rte_mempool;
struct rte_ring;

namespace meshgate::dp {
struct WorkerParams;
}

namespace meshgate::ctl {

struct HostTwinCounters {
  std::atomic<uint64_t> to_kernel{0};    // written to the TAP
  std::atomic<uint64_t> from_kernel{0};  // read from the TAP and queued for the port
  std::atomic<uint64_t> tap_full{0};     // the TAP refused them (the kernel's queue was full)
  std::atomic<uint64_t> port_queue_full{0};  // the ring to worker 0 was full
};

class HostInterfaces {
 public:
  // TAP queue sizes and ring sizes; each twin needs this many mbufs of the pool.
  static constexpr uint16_t kTapDescriptors = 256;
  static constexpr uint32_t kRingSize = 1024;
  static constexpr uint32_t kMbufsPerTwin = 2 * kTapDescriptors + 2 * kRingSize;

  struct Twin {
    std::string port;       // [[port]] name
    std::string interface;  // the kernel interface
    uint16_t port_index = 0;
    uint16_t tap_port_id = 0;  // the TAP's ethdev
    rte_ring* in = nullptr;    // kernel -> worker 0
    HostTwinCounters counters;
  };

  HostInterfaces() = default;
  HostInterfaces(const HostInterfaces&) = delete;
  HostInterfaces& operator=(const HostInterfaces&) = delete;
  ~HostInterfaces();

  // The twins of the ports with a host_interface (`configs` and `ports` in the same order),
  // with their addresses, MTU and link up; nullptr-free result with no twin when no port has
  // one. An error names the port and what failed; what was created is removed.
  static Result<std::unique_ptr<HostInterfaces>> create(const std::vector<PortConfig>& configs,
                                                       const std::vector<dp::PortRuntime>& ports,
                                                       rte_mempool* pool);
  bool empty() const { return twins_.empty(); }
  // Gives a worker its rings (host_out for every worker, host_in for worker 0).
  void attach(dp::WorkerParams& wp) const;
  void start();
  // Stops the pump, frees what is still queued (logged as host_interface_unsent), and
  // removes the twins (closing a TAP removes its kernel interface).
  void stop();
  const std::vector<std::unique_ptr<Twin>>& twins() const { return twins_; }

 private:
  void pump();
  // One pass of the pump; returns packets moved.
  uint32_t pump_once();

  std::vector<std::unique_ptr<Twin>> twins_;
  Twin* by_port_[dp::kMaxPorts] = {};
  rte_ring* out_ = nullptr;  // workers -> pump
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool closed_ = false;
};

}  // namespace meshgate::ctl
