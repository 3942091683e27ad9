// What --check can tell about a [[port]] device string before the EAL runs: a PCI address must
// be present in sysfs, a vdev must name a net driver the EAL can load, and an interface a vdev
// opens (iface= of net_af_packet, the *iface= keys of net_pcap) must exist. Also the likely cause
// of a probe that fails anyway. Main thread; no DPDK state.
#pragma once

#include <string>
#include <vector>

namespace meshgate::ctl {

// Where the EAL loads its drivers from (DPDK's RTE_EAL_PMD_PATH, compiled into librte_eal).
std::string default_pmd_dir();

// The vdev driver names of the net PMDs in `pmd_dir`: "net_<x>" for each librte_net_<x>.so*
// file. These are the libraries the EAL loads at start, so the list is what this host can probe
// (a Debian librte-net-* package removed is a driver gone), not what some build once had.
// Empty when the directory cannot be read.
std::vector<std::string> net_pmd_names(const std::string& pmd_dir);

// Why `device` cannot be a port ("" when it can, as far as can be told without probing).
// `pmds` from net_pmd_names (empty: driver names are not checked); `sysfs` is "/sys" but for
// tests.
std::string check_device(const std::string& device, const std::vector<std::string>& pmds,
                         const std::string& sysfs = "/sys");

// A probe of `device` failed with `rc` (a negative errno): a sentence naming the likely cause
// (a missing interface, missing CAP_NET_RAW), or "" when there is nothing better than strerror.
std::string probe_failure_cause(const std::string& device, int rc,
                                const std::string& sysfs = "/sys");

}  // namespace meshgate::ctl
