// [[port]] device strings checked without the EAL: net PMD names from a driver directory, PCI
// addresses against sysfs, interfaces a vdev opens; and the cause named when a probe fails.
#include "control/runtime/devices.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace meshgate::ctl {
namespace {

namespace fs = std::filesystem;

class DevicesTest : public testing::Test {
 protected:
  void SetUp() override {
    // A driver directory as Debian's (pmds-23.0) and a sysfs with one PCI device, one interface.
    for (const char* f : {"librte_net_af_packet.so.23", "librte_net_null.so.23",
                          "librte_net_pcap.so.23", "librte_net_tap.so.23", "librte_net_ring.so",
                          "librte_bus_vdev.so.23", "librte_crypto_null.so.23"}) {
      touch(root_ / "pmds" / f);
    }
    fs::create_directories(root_ / "sys/bus/pci/devices/0000:3b:00.1");
    fs::create_directories(root_ / "sys/class/net/veth-gw");
    pmds_ = net_pmd_names((root_ / "pmds").string());
  }
  static void touch(const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "";
  }
  std::string check(const std::string& device) {
    return check_device(device, pmds_, (root_ / "sys").string());
  }

  const test::TempDir tmp_;
  const fs::path& root_ = tmp_.path();
  std::vector<std::string> pmds_;
};

TEST_F(DevicesTest, NetPmdNamesComeFromTheNetLibrariesOfTheDriverDirectory) {
  EXPECT_EQ(pmds_, (std::vector<std::string>{"net_af_packet", "net_null", "net_pcap", "net_ring",
                                             "net_tap"}));
}

TEST_F(DevicesTest, TheInstalledDpdkHasTheDriversTheTestsUse) {
  const std::vector<std::string> real = net_pmd_names(default_pmd_dir());
  for (const char* want : {"net_af_packet", "net_null", "net_pcap", "net_ring", "net_tap"}) {
    EXPECT_NE(std::find(real.begin(), real.end(), want), real.end()) << want;
  }
}

TEST_F(DevicesTest, KnownVdevsPass) {
  for (const char* d : {"net_null0", "net_null_s123", "net_pcap_replay0,rx_pcap=a.pcap,tx_pcap=b",
                        "net_af_packet0,iface=veth-gw", "net_tap0,iface=gw-new", "net_tun0",
                        "eth_null0", "net_ring0"}) {
    EXPECT_EQ(check(d), "") << d;
  }
}

TEST_F(DevicesTest, MisspeltDriverSuggestsTheClosest) {
  EXPECT_EQ(check("net_afpacket0,iface=veth-gw"),
            "unknown DPDK net driver in \"net_afpacket0\" (did you mean 'net_af_packet'?)");
  EXPECT_EQ(check("net_pcep0,rx_pcap=in.pcap"),
            "unknown DPDK net driver in \"net_pcep0\" (did you mean 'net_pcap'?)");
}

TEST_F(DevicesTest, AKernelInterfaceNameSaysHowToUseIt) {
  EXPECT_EQ(check("veth-gw"), "unknown DPDK net driver in \"veth-gw\" (a kernel interface: use "
                              "\"net_af_packet0,iface=veth-gw\")");
}

TEST_F(DevicesTest, AnythingElseSaysWhatIsExpected) {
  EXPECT_EQ(check("eth0"), "unknown DPDK net driver in \"eth0\" (expected a PCI address like "
                           "\"0000:3b:00.1\" or a vdev like \"net_af_packet0,iface=eth1\")");
  // A crypto vdev is a driver, but not a port.
  EXPECT_NE(check("crypto_null0"), "");
}

TEST_F(DevicesTest, PresentPciAddressPassesInEitherForm) {
  EXPECT_EQ(check("0000:3b:00.1"), "");
  EXPECT_EQ(check("3b:00.1"), "");
  EXPECT_EQ(check("0000:3B:00.1"), "");
}

TEST_F(DevicesTest, AbsentPciAddressSaysItIsAbsent) {
  const std::string sys = (root_ / "sys").string();
  EXPECT_EQ(check("0000:3b:00.2"), "PCI device 0000:3b:00.2 is absent (no " + sys +
                                       "/bus/pci/devices/0000:3b:00.2; dpdk-devbind.py --status "
                                       "lists the devices)");
}

TEST_F(DevicesTest, MissingInterfaceOfAfPacketOrPcapIsNamed) {
  EXPECT_EQ(check("net_af_packet0,iface=veth-nope"),
            "network interface \"veth-nope\" does not exist (net_af_packet opens an existing "
            "interface; ip link lists them)");
  EXPECT_EQ(check("net_pcap0,rx_iface=veth-gw,tx_iface=veth-nope"),
            "network interface \"veth-nope\" does not exist (net_pcap opens an existing "
            "interface; ip link lists them)");
}

TEST_F(DevicesTest, ProbeFailureOfAMissingInterfaceNamesIt) {
  EXPECT_EQ(probe_failure_cause("net_af_packet0,iface=veth-nope", -14, (root_ / "sys").string()),
            "network interface \"veth-nope\" does not exist");
}

TEST_F(DevicesTest, WithoutADriverDirectoryOnlyPciAddressesAreChecked) {
  EXPECT_EQ(check_device("net_whatever0", {}, (root_ / "sys").string()), "");
  EXPECT_NE(check_device("0000:3b:00.7", {}, (root_ / "sys").string()), "");
}

}  // namespace
}  // namespace meshgate::ctl
