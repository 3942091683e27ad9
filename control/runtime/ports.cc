#include "control/runtime/ports.h"

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "control/common/log.h"
#include "control/runtime/devices.h"
#include "control/runtime/eal.h"
#include "control/runtime/host_checks.h"

namespace meshgate::ctl {
namespace {

std::string device_name(const std::string& device) {
  const auto comma = device.find(',');
  return comma == std::string::npos ? device : device.substr(0, comma);
}

Result<uint16_t> attach(const std::string& device) {
  const std::string name = device_name(device);
  uint16_t port_id;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) == 0) return port_id;
  if (is_pci_address(device)) {
    return Error{"PCI device " + device +
                 " is not available to DPDK (bound to vfio-pci / uio? see README)"};
  }
  const int rc = rte_dev_probe(device.c_str());
  if (rc != 0) {
    // The PMDs' own errno is often unhelpful ("Bad address" for a missing interface).
    const std::string cause = probe_failure_cause(device, rc);
    return Error{"cannot attach device '" + device + "': " +
                 (cause.empty() ? std::string(rte_strerror(-rc))
                                : cause + " (" + rte_strerror(-rc) + ")")};
  }
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    return Error{"device '" + device + "' attached but is not an ethdev"};
  }
  return port_id;
}

}  // namespace

const std::vector<uint8_t>& default_rss_key() {
  static const std::vector<uint8_t> key = {
      0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
      0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
      0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
  return key;
}

Result<std::vector<dp::PortRuntime>> setup_ports(const std::vector<PortSetup>& setups,
                                                 uint16_t queues, rte_mempool* pool,
                                                 bool rx_timestamps) {
  std::vector<dp::PortRuntime> out;
  for (size_t i = 0; i < setups.size(); ++i) {
    const PortConfig& pc = *setups[i].config;
    auto id = attach(setups[i].device);
    if (!id) return Error{"port " + pc.name + ": " + id.error().message};
    const uint16_t port_id = *id;
    rte_eth_dev_info info;
    if (rte_eth_dev_info_get(port_id, &info) != 0) {
      return Error{"port " + pc.name + ": cannot read device info"};
    }
    if (info.max_rx_queues < queues || info.max_tx_queues < queues) {
      return Error{"port " + pc.name + ": device has " + std::to_string(info.max_rx_queues) +
                   " RX / " + std::to_string(info.max_tx_queues) + " TX queues, " +
                   std::to_string(queues) + " workers need one each"};
    }
    dp::PortRuntime rt;
    rt.name = pc.name;
    rt.port_id = port_id;
    rt.index = uint16_t(i);
    rt.mtu = pc.mtu;
    rt.addresses = pc.addresses;

    rte_eth_conf conf{};
    const uint64_t want_hf = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;
    if (queues > 1 && (info.flow_type_rss_offloads & want_hf)) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = want_hf & info.flow_type_rss_offloads;
      if (info.hash_key_size == default_rss_key().size()) {
        rt.rss_key = default_rss_key();
        conf.rx_adv_conf.rss_conf.rss_key = rt.rss_key.data();
        conf.rx_adv_conf.rss_conf.rss_key_len = uint8_t(rt.rss_key.size());
      }
      rt.rss_hf = conf.rx_adv_conf.rss_conf.rss_hf;
    }
    // RX: the NIC's IPv4 header check spares the parser its own (RTE_MBUF_F_RX_IP_CKSUM_*).
    // TX: translation updates checksums incrementally (RFC 1624), which costs less than
    // filling offload metadata per packet, so no TX checksum offload is requested.
    conf.rxmode.offloads = info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
    if (rx_timestamps) conf.rxmode.offloads |= info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_TIMESTAMP;
    conf.txmode.offloads = info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS;

    int rc = rte_eth_dev_configure(port_id, queues, queues, &conf);
    if (rc != 0) return Error{"port " + pc.name + ": configure failed: " + rte_strerror(-rc)};
    uint16_t nrx = pc.rx_descriptors, ntx = pc.tx_descriptors;
    rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nrx, &ntx);
    const int socket = rte_eth_dev_socket_id(port_id);
    for (uint16_t q = 0; q < queues; ++q) {
      rc = rte_eth_rx_queue_setup(port_id, q, nrx, socket < 0 ? SOCKET_ID_ANY : socket, nullptr, pool);
      if (rc != 0) return Error{"port " + pc.name + ": RX queue setup: " + rte_strerror(-rc)};
      rc = rte_eth_tx_queue_setup(port_id, q, ntx, socket < 0 ? SOCKET_ID_ANY : socket, nullptr);
      if (rc != 0) return Error{"port " + pc.name + ": TX queue setup: " + rte_strerror(-rc)};
    }
    rc = rte_eth_dev_set_mtu(port_id, pc.mtu);
    if (rc != 0 && rc != -ENOTSUP) {
      log(LogLevel::kWarn, "port_mtu_not_set", "port=%s mtu=%u error=\"%s\"", pc.name.c_str(),
          pc.mtu, rte_strerror(-rc));
    }

    rte_ether_addr mac;
    rte_eth_macaddr_get(port_id, &mac);
    std::memcpy(rt.mac.b.data(), mac.addr_bytes, 6);
    if (pc.mac) {
      rte_ether_addr want;
      std::memcpy(want.addr_bytes, pc.mac->b.data(), 6);
      if (rte_eth_dev_default_mac_addr_set(port_id, &want) != 0) {
        // The device keeps its own MAC filter: listen promiscuously and filter in software.
        rte_eth_promiscuous_enable(port_id);
        log(LogLevel::kInfo, "port_mac_software", "port=%s mac=%s", pc.name.c_str(),
            pc.mac->str().c_str());
      }
      rt.mac = *pc.mac;
    }
    if (setups[i].promiscuous) {
      // Frames to other MACs must reach the workers, which then skip their own MAC check.
      rc = rte_eth_promiscuous_enable(port_id);
      if (rc != 0 && rc != -ENOTSUP) {
        return Error{"port " + pc.name + ": promiscuous mode: " + rte_strerror(-rc)};
      }
      rt.promiscuous = true;
    }
    rc = rte_eth_dev_start(port_id);
    if (rc != 0) return Error{"port " + pc.name + ": start failed: " + rte_strerror(-rc)};

    if (conf.rxmode.mq_mode == RTE_ETH_MQ_RX_RSS && info.reta_size > 0) {
      std::vector<rte_eth_rss_reta_entry64> reta(info.reta_size / RTE_ETH_RETA_GROUP_SIZE + 1);
      for (auto& r : reta) r.mask = ~0ull;
      if (rte_eth_dev_rss_reta_query(port_id, reta.data(), info.reta_size) == 0) {
        for (uint16_t e = 0; e < info.reta_size; ++e) {
          rt.reta.push_back(reta[e / RTE_ETH_RETA_GROUP_SIZE].reta[e % RTE_ETH_RETA_GROUP_SIZE]);
        }
      }
    }
    rte_eth_link link;
    char link_str[RTE_ETH_LINK_MAX_STR_LEN];
    rte_eth_link_get_nowait(port_id, &link);
    rte_eth_link_to_str(link_str, sizeof link_str, &link);
    log(LogLevel::kInfo, "port_started",
        "port=%s device=\"%s\" driver=%s queues=%u mac=%s rss=%s reta=%zu rx_offloads=0x%lx "
        "tx_offloads=0x%lx link=\"%s\"",
        pc.name.c_str(), setups[i].device.c_str(), info.driver_name, queues, rt.mac.str().c_str(),
        rt.rss_hf ? "on" : "off", rt.reta.size(), (unsigned long)conf.rxmode.offloads,
        (unsigned long)conf.txmode.offloads, link_str);
    warn_kernel_offloads(pc.name, setups[i].device);
    out.push_back(std::move(rt));
  }
  return out;
}

void stop_ports(const std::vector<dp::PortRuntime>& ports) {
  for (const auto& p : ports) {
    rte_eth_dev_stop(p.port_id);
    rte_eth_dev_close(p.port_id);
  }
}

}  // namespace meshgate::ctl
