#include "control/host/host_interface.h"

#include <pthread.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <chrono>

#include "control/common/log.h"
#include "control/host/kernel_link.h"
#include "dataplane/worker/burst.h"
#include "dataplane/worker/context.h"

namespace meshgate::ctl {
namespace {

// The pump sleeps when a pass moved nothing: from kMinIdleUs, doubling up to kMaxIdleUs (a
// BGP keepalive or an SSH keystroke waits at most that long; traffic keeps it awake).
constexpr uint32_t kMinIdleUs = 20;
constexpr uint32_t kMaxIdleUs = 1000;

std::string tap_vdev_name(uint16_t port_index) { return "net_tap_mg" + std::to_string(port_index); }

// Creates and starts port `rt`'s TAP, named `ifname`, with the port's MAC and MTU.
Result<uint16_t> start_tap(const dp::PortRuntime& rt, const std::string& ifname,
                           rte_mempool* pool) {
  const std::string vdev = tap_vdev_name(rt.index);
  const std::string args = vdev + ",iface=" + ifname + ",mac=" + rt.mac.str();
  if (const int rc = rte_dev_probe(args.c_str()); rc != 0) {
    return Error{"cannot create TAP interface \"" + ifname + "\" (" + rte_strerror(-rc) +
                 "; the kernel needs TUN/TAP: /dev/net/tun)"};
  }
  uint16_t id;
  if (rte_eth_dev_get_port_by_name(vdev.c_str(), &id) != 0) {
    return Error{"TAP \"" + ifname + "\" attached but is not an ethdev"};
  }
  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(id, 1, 1, &conf);
  if (rc == 0) rc = rte_eth_rx_queue_setup(id, 0, HostInterfaces::kTapDescriptors,
                                           SOCKET_ID_ANY, nullptr, pool);
  if (rc == 0) rc = rte_eth_tx_queue_setup(id, 0, HostInterfaces::kTapDescriptors,
                                           SOCKET_ID_ANY, nullptr);
  if (rc == 0) rc = rte_eth_dev_set_mtu(id, rt.mtu);
  if (rc == 0) rc = rte_eth_dev_start(id);  // also sets the kernel interface up
  if (rc != 0) {
    rte_eth_dev_close(id);
    return Error{"TAP \"" + ifname + "\": " + rte_strerror(-rc)};
  }
  return id;
}

}  // namespace

HostInterfaces::~HostInterfaces() { stop(); }

Result<std::unique_ptr<HostInterfaces>> HostInterfaces::create(
    const std::vector<PortConfig>& configs, const std::vector<dp::PortRuntime>& ports,
    rte_mempool* pool) {
  auto h = std::make_unique<HostInterfaces>();
  for (size_t i = 0; i < configs.size() && i < ports.size(); ++i) {
    const std::string& ifname = configs[i].host_interface;
    if (ifname.empty()) continue;
    const dp::PortRuntime& rt = ports[i];
    const std::string where = "port " + rt.name + ": host_interface \"" + ifname + "\": ";
    if (interface_index(ifname) != 0) {
      return Error{where + "an interface of that name exists already in this network namespace"};
    }
    auto t = std::make_unique<Twin>();
    t->port = rt.name;
    t->interface = ifname;
    t->port_index = rt.index;
    auto id = start_tap(rt, ifname, pool);
    if (!id) return Error{where + id.error().message};
    t->tap_port_id = *id;
    Twin& twin = *t;
    h->twins_.push_back(std::move(t));
    h->by_port_[rt.index] = &twin;
    const bool v6 = std::any_of(rt.addresses.begin(), rt.addresses.end(),
                                [](const IpPrefix& p) { return !p.addr.is_v4(); });
    // The twin takes no router advertisements: its addresses and routes are the config's.
    for (const char* key : {"accept_ra", "accept_dad"}) {
      if (std::string e = set_interface_sysctl("ipv6", ifname, key, "0"); !e.empty() && v6) {
        log(LogLevel::kWarn, "host_interface_sysctl", "port=%s interface=%s error=\"%s\"",
            rt.name.c_str(), ifname.c_str(), e.c_str());
      }
    }
    const int ifindex = interface_index(ifname);
    if (ifindex == 0) return Error{where + "the TAP's kernel interface is missing"};
    for (const IpPrefix& a : rt.addresses) {
      if (std::string e = add_interface_address(ifindex, a); !e.empty()) return Error{where + e};
    }
    const std::string ring = "mg_host_in" + std::to_string(rt.index);
    twin.in = rte_ring_create(ring.c_str(), kRingSize, SOCKET_ID_ANY,
                              RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!twin.in) return Error{where + "no DPDK memory for its ring"};
    log(LogLevel::kInfo, "host_interface_up", "port=%s interface=%s ifindex=%d mac=%s mtu=%u "
        "addresses=%zu", rt.name.c_str(), ifname.c_str(), ifindex, rt.mac.str().c_str(), rt.mtu,
        rt.addresses.size());
  }
  if (!h->twins_.empty()) {
    h->out_ = rte_ring_create("mg_host_out", kRingSize, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (!h->out_) return Error{"host interfaces: no DPDK memory for their ring"};
  }
  return h;
}

void HostInterfaces::attach(dp::WorkerParams& wp) const {
  if (twins_.empty()) return;
  wp.host_out = out_;
  for (const auto& t : twins_) {
    wp.host_twin[t->port_index] = true;
    if (wp.index == 0) wp.host_in[t->port_index] = t->in;
  }
}

void HostInterfaces::start() {
  if (twins_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { pump(); });
  pthread_setname_np(thread_.native_handle(), "mg-host");
}

void HostInterfaces::pump() {
  uint32_t idle_us = kMinIdleUs;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (pump_once() != 0) {
      idle_us = kMinIdleUs;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
    idle_us = std::min(2 * idle_us, kMaxIdleUs);
  }
}

uint32_t HostInterfaces::pump_once() {
  rte_mbuf* pkts[dp::kBurst];
  // Workers -> kernel: runs of packets for the same twin go to its TAP in one burst.
  const unsigned n = rte_ring_sc_dequeue_burst(out_, reinterpret_cast<void**>(pkts), dp::kBurst,
                                               nullptr);
  for (unsigned i = 0; i < n;) {
    const uint16_t port = pkts[i]->port;
    unsigned j = i + 1;
    while (j < n && pkts[j]->port == port) ++j;
    Twin* t = port < dp::kMaxPorts ? by_port_[port] : nullptr;
    const uint16_t sent = t ? rte_eth_tx_burst(t->tap_port_id, 0, pkts + i, uint16_t(j - i)) : 0;
    if (t) {
      t->counters.to_kernel.fetch_add(sent, std::memory_order_relaxed);
      t->counters.tap_full.fetch_add(j - i - sent, std::memory_order_relaxed);
    }
    for (unsigned k = i + sent; k < j; ++k) rte_pktmbuf_free(pkts[k]);
    i = j;
  }
  uint32_t moved = n;
  // Kernel -> port: worker 0 sends them.
  for (const auto& t : twins_) {
    const uint16_t got = rte_eth_rx_burst(t->tap_port_id, 0, pkts, dp::kBurst);
    if (got == 0) continue;
    const unsigned queued = rte_ring_sp_enqueue_burst(t->in, reinterpret_cast<void**>(pkts), got,
                                                      nullptr);
    t->counters.from_kernel.fetch_add(queued, std::memory_order_relaxed);
    t->counters.port_queue_full.fetch_add(got - queued, std::memory_order_relaxed);
    for (unsigned k = queued; k < got; ++k) rte_pktmbuf_free(pkts[k]);
    moved += got;
  }
  return moved;
}

void HostInterfaces::stop() {
  if (closed_) return;
  closed_ = true;
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  // What is still queued never reaches its side: the workers (or the kernel) are gone.
  uint64_t left = 0;
  void* objs[dp::kBurst];
  for (rte_ring* r : {out_}) {
    if (!r) continue;
    unsigned n;
    while ((n = rte_ring_dequeue_burst(r, objs, dp::kBurst, nullptr)) > 0) {
      left += n;
      for (unsigned i = 0; i < n; ++i) rte_pktmbuf_free(static_cast<rte_mbuf*>(objs[i]));
    }
  }
  for (const auto& t : twins_) {
    unsigned n;
    while (t->in && (n = rte_ring_dequeue_burst(t->in, objs, dp::kBurst, nullptr)) > 0) {
      left += n;
      for (unsigned i = 0; i < n; ++i) rte_pktmbuf_free(static_cast<rte_mbuf*>(objs[i]));
    }
    rte_ring_free(t->in);
    rte_eth_dev_stop(t->tap_port_id);
    rte_eth_dev_close(t->tap_port_id);  // a TAP that is not persistent leaves with its fd
    log(LogLevel::kInfo, "host_interface_down", "port=%s interface=%s to_kernel=%lu "
        "from_kernel=%lu", t->port.c_str(), t->interface.c_str(),
        (unsigned long)t->counters.to_kernel.load(), (unsigned long)t->counters.from_kernel.load());
  }
  if (left) log(LogLevel::kInfo, "host_interface_unsent", "packets=%lu", (unsigned long)left);
  rte_ring_free(out_);
  out_ = nullptr;
}

}  // namespace meshgate::ctl
