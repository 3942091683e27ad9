#include "control/runtime/devices.h"

#include <rte_config.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <string_view>

#include "control/common/edit_distance.h"
#include "control/runtime/eal.h"

namespace meshgate::ctl {
namespace {

std::string device_name(const std::string& device) {
  return device.substr(0, device.find(','));
}

// The value of `key=` in a vdev's argument list ("net_pcap0,iface=eth1"), or "".
std::string kvarg(const std::string& device, std::string_view key) {
  size_t at = device.find(',');
  while (at != std::string::npos) {
    const size_t start = at + 1;
    at = device.find(',', start);
    const std::string_view kv = std::string_view(device).substr(
        start, at == std::string::npos ? std::string::npos : at - start);
    if (kv.size() > key.size() && kv.substr(0, key.size()) == key && kv[key.size()] == '=') {
      return std::string(kv.substr(key.size() + 1));
    }
  }
  return "";
}

// The driver a vdev name belongs to: the EAL matches a vdev to the driver whose name (or alias)
// is a prefix of it ("net_null_s1" -> net_null). Net PMDs register "eth_<x>" aliases too, and
// net_tap also drives "net_tun".
std::string driver_of(const std::string& name, const std::vector<std::string>& pmds) {
  std::string best;
  for (const std::string& p : pmds) {
    const std::string x = p.substr(4);  // after "net_"
    for (const std::string& cand : {p, "eth_" + x}) {
      if (name.compare(0, cand.size(), cand) == 0 && cand.size() > best.size()) best = p;
    }
    if (p == "net_tap" && name.compare(0, 7, "net_tun") == 0) best = p;
  }
  return best;
}

// The interfaces a vdev opens by name: net_af_packet's iface=, net_pcap's iface= / rx_iface= /
// rx_iface_in= / tx_iface=. (net_tap's iface= is a name it creates, not one that must exist.)
std::vector<std::string> opened_interfaces(const std::string& device, const std::string& driver) {
  std::vector<std::string> out;
  std::vector<std::string_view> keys;
  if (driver == "net_af_packet") keys = {"iface"};
  if (driver == "net_pcap") keys = {"iface", "rx_iface", "rx_iface_in", "tx_iface"};
  for (auto k : keys) {
    if (std::string v = kvarg(device, k); !v.empty()) out.push_back(std::move(v));
  }
  return out;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// "0000:3b:00.1" for "3b:00.1" too, in lower case, as sysfs names devices.
std::string full_pci_address(const std::string& d) {
  std::string s = d.size() == 7 ? "0000:" + d : d;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool has_cap_net_raw() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return geteuid() == 0;
  return (data[CAP_NET_RAW / 32].effective >> (CAP_NET_RAW % 32)) & 1;
}

}  // namespace

std::string default_pmd_dir() { return RTE_EAL_PMD_PATH; }

std::vector<std::string> net_pmd_names(const std::string& pmd_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(pmd_dir, ec)) {
    const std::string f = e.path().filename();  // librte_net_af_packet.so.23
    constexpr std::string_view kPrefix = "librte_net_";
    const size_t so = f.find(".so");
    if (f.compare(0, kPrefix.size(), kPrefix) != 0 || so == std::string::npos) continue;
    out.push_back("net_" + f.substr(kPrefix.size(), so - kPrefix.size()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string check_device(const std::string& device, const std::vector<std::string>& pmds,
                         const std::string& sysfs) {
  if (is_pci_address(device)) {
    const std::string addr = full_pci_address(device);
    if (!exists(sysfs + "/bus/pci/devices/" + addr)) {
      return "PCI device " + addr + " is absent (no " + sysfs + "/bus/pci/devices/" + addr +
             "; dpdk-devbind.py --status lists the devices)";
    }
    return "";
  }
  if (pmds.empty()) return "";  // no driver directory to compare with: the EAL will say
  const std::string name = device_name(device);
  const std::string driver = driver_of(name, pmds);
  if (driver.empty()) {
    // The name without its instance suffix ("net_afpacket0" -> "net_afpacket").
    std::string stem = name;
    while (!stem.empty() && std::isdigit(static_cast<unsigned char>(stem.back()))) stem.pop_back();
    std::string best;
    size_t best_d = 3;
    for (const std::string& p : pmds) {
      const size_t d = edit_distance(stem, p);
      if (d < best_d) {
        best_d = d;
        best = p;
      }
    }
    std::string hint = best.empty() ? "" : " (did you mean '" + best + "'?)";
    if (hint.empty() && exists(sysfs + "/class/net/" + name)) {
      hint = " (a kernel interface: use \"net_af_packet0,iface=" + name + "\")";
    }
    if (hint.empty()) hint = " (expected a PCI address like \"0000:3b:00.1\" or a vdev like "
                             "\"net_af_packet0,iface=eth1\")";
    return "unknown DPDK net driver in \"" + name + "\"" + hint;
  }
  for (const std::string& ifname : opened_interfaces(device, driver)) {
    if (!exists(sysfs + "/class/net/" + ifname)) {
      return "network interface \"" + ifname + "\" does not exist (" + driver +
             " opens an existing interface; ip link lists them)";
    }
  }
  return "";
}

std::string probe_failure_cause(const std::string& device, int rc, const std::string& sysfs) {
  const std::string name = device_name(device);
  const bool raw = name.rfind("net_af_packet", 0) == 0 || name.rfind("eth_af_packet", 0) == 0 ||
                   ((name.rfind("net_pcap", 0) == 0 || name.rfind("eth_pcap", 0) == 0) &&
                    device.find("iface=") != std::string::npos);
  if (raw) {
    const std::string driver = name.find("af_packet") != std::string::npos ? "net_af_packet"
                                                                          : "net_pcap";
    for (const std::string& ifname : opened_interfaces(device, driver)) {
      if (!exists(sysfs + "/class/net/" + ifname)) {
        return "network interface \"" + ifname + "\" does not exist";
      }
    }
    if (!has_cap_net_raw()) {
      return driver + " opens a raw socket: run as root or grant CAP_NET_RAW";
    }
  }
  if (rc == -EPERM || rc == -EACCES) return "permission denied: run as root";
  return "";
}

}  // namespace meshgate::ctl
