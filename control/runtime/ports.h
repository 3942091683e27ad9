// Port bring-up: attach the device (PCI probed by EAL, vdevs hot-plugged with rte_dev_probe),
// one RX and one TX queue per worker, RSS (Toeplitz, key and RETA kept), checksum offloads when
// present, MTU, MAC override, start, link status logged. Control thread.
#pragma once

#include <string>
#include <vector>

#include "control/common/result.h"
#include "control/config/config.h"
#include "dataplane/worker/port.h"

struct rte_mempool;

namespace meshgate::ctl {

struct PortSetup {
  const PortConfig* config = nullptr;
  std::string device;  // possibly replaced (replay)
  bool promiscuous = false;  // [[port]] promiscuous, or --promiscuous on the replayed port
};

// The RSS key we program (the well-known Microsoft Toeplitz key), 40 bytes.
const std::vector<uint8_t>& default_rss_key();

Result<std::vector<dp::PortRuntime>> setup_ports(const std::vector<PortSetup>& setups,
                                                 uint16_t queues, rte_mempool* pool,
                                                 bool rx_timestamps);
void stop_ports(const std::vector<dp::PortRuntime>& ports);

}  // namespace meshgate::ctl
