// The EAL argument list (control/runtime/eal.h plan_eal_on): meshgate's defaults merged with the
// user's arguments after `--`, one row per rule of which default the user's option replaces,
// and how the EAL's getopt reads an argument list (parse_eal_options).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "control/runtime/eal.h"

namespace meshgate::ctl {
namespace {

using Args = std::vector<std::string>;

std::string joined(const Args& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

Config config_with_ports(const Args& devices) {
  Config cfg;
  for (size_t i = 0; i < devices.size(); ++i) {
    PortConfig p;
    p.name = "net" + std::to_string(i);
    p.device = devices[i];
    cfg.ports.push_back(p);
  }
  return cfg;
}

EalHost host_with(uint64_t free_hugepage_mb) {
  EalHost h;
  h.free_hugepage_mb = free_hugepage_mb;
  h.cpus = {2, 3};
  h.file_prefix = "meshgate-test";
  return h;
}

// Without hugepages (0 MiB free, the estimate for one worker is far above).
EalPlan plan(const Args& user, const Args& devices = {"net_tap0,iface=mg0"},
             uint64_t free_hugepage_mb = 0) {
  return plan_eal_on(config_with_ports(devices), 1, 1024, user, LogLevel::kInfo,
                     host_with(free_hugepage_mb));
}

TEST(EalPlan, DefaultsWithoutHugepages) {
  const EalPlan p = plan({});
  const std::string m = std::to_string(p.memory_mb);
  EXPECT_EQ(joined(p.args), "--lcores=0@2,1@3 --file-prefix=meshgate-test --no-huge --no-shconf "
                            "--no-telemetry -m " + m + " --no-pci --log-level=notice");
  EXPECT_FALSE(p.hugepages);
  EXPECT_FALSE(p.user_args);
  EXPECT_FALSE(p.user_memory);
  EXPECT_TRUE(p.replaced.empty());
}

TEST(EalPlan, DefaultsWithHugepagesAndPciPorts) {
  const EalPlan p = plan({}, {"0000:3b:02.0", "0000:3b:02.1"}, 1u << 20);
  EXPECT_EQ(joined(p.args), "--lcores=0@2,1@3 --file-prefix=meshgate-test --in-memory "
                            "-a 0000:3b:02.0 -a 0000:3b:02.1 --log-level=notice");
  EXPECT_TRUE(p.hugepages);
}

// One rule each: the user's arguments, the host, what must be in the merged list (as one
// space-joined run of words), what must not, and the defaults reported as replaced. "$EST" in
// a run stands for meshgate's memory estimate.
struct MergeCase {
  const char* rule;
  Args user;
  Args devices;
  uint64_t free_hugepage_mb;
  std::vector<std::string> present;
  std::vector<std::string> absent;
  std::vector<std::string> replaced;
};

const std::string kTap = "net_tap0,iface=mg0";

TEST(EalPlan, UserArgumentsReplaceOnlyTheDefaultTheySayOrConflictWith) {
  const std::vector<MergeCase> cases = {
      {"-l keeps no PCI probing and the memory defaults", {"-l", "0-1"}, {kTap}, 0,
       {"--no-pci", "--no-huge", "--no-shconf", "--no-telemetry", "--file-prefix=meshgate-test",
        "--log-level=notice", "-l 0-1"},
       {"--lcores="}, {"lcores"}},
      {"-c replaces the core list", {"-c", "0x3"}, {kTap}, 0, {"--no-pci", "-c 0x3"},
       {"--lcores="}, {"lcores"}},
      {"--lcores= replaces the core list", {"--lcores=0@0,1@0"}, {kTap}, 0,
       {"--no-pci", "--lcores=0@0,1@0"}, {"--lcores=0@2"}, {"lcores"}},
      {"a long option by its prefix", {"--lcore", "0@0,1@0"}, {kTap}, 0, {"--lcore 0@0,1@0"},
       {"--lcores=0@2"}, {"lcores"}},
      {"--main-lcore replaces nothing", {"--main-lcore", "1"}, {kTap}, 0,
       {"--lcores=0@2,1@3", "--no-pci", "--main-lcore 1"}, {}, {}},
      {"--file-prefix replaces the prefix", {"--file-prefix", "gw1"}, {kTap}, 0,
       {"--file-prefix gw1"}, {"--file-prefix=meshgate-test"}, {"file-prefix"}},
      {"-m replaces the default -m", {"-m", "512"}, {kTap}, 0, {"--no-huge", "-m 512"},
       {"-m $EST"}, {"m"}},
      {"-m in one word", {"-m512"}, {kTap}, 0, {"--no-huge", "-m512"}, {"-m $EST"}, {"m"}},
      {"--no-huge with hugepages free: --no-huge's defaults", {"--no-huge"}, {kTap}, 1u << 20,
       {"--no-shconf", "--no-telemetry", "--no-pci", "--no-huge"}, {"--in-memory"},
       {"no-huge"}},
      {"--socket-mem without free hugepages still means hugepages", {"--socket-mem", "4096"},
       {kTap}, 0, {"--in-memory", "--no-pci", "--socket-mem 4096"},
       {"--no-huge", "--no-shconf", "-m "}, {}},
      {"--in-memory replaces the default --in-memory", {"--in-memory"}, {kTap}, 1u << 20,
       {"--in-memory"}, {}, {"in-memory"}},
      {"--no-shconf is not given twice", {"--no-shconf"}, {kTap}, 0, {"--no-huge"}, {},
       {"no-shconf"}},
      {"--telemetry conflicts with --no-telemetry", {"--telemetry"}, {kTap}, 0,
       {"--no-huge", "--telemetry"}, {"--no-telemetry"}, {"no-telemetry"}},
      {"--vdev replaces nothing", {"--vdev=net_null0"}, {kTap}, 0,
       {"--lcores=0@2,1@3", "--no-pci", "--no-huge", "--vdev=net_null0"}, {}, {}},
      {"-a of a PCI device allows PCI", {"-a", "0000:00:08.0"}, {kTap}, 0,
       {"--no-huge", "-a 0000:00:08.0"}, {"--no-pci"}, {"no-pci"}},
      {"--allow= with devargs allows PCI", {"--allow=0000:00:08.0,txq_inline=128"}, {kTap}, 0,
       {"--allow=0000:00:08.0,txq_inline=128"}, {"--no-pci"}, {"no-pci"}},
      {"-a of a device on another bus keeps no PCI probing", {"-a", "auxiliary:mlx5_core.sf.2"},
       {kTap}, 0, {"--no-pci", "-a auxiliary:mlx5_core.sf.2"}, {}, {}},
      {"-b keeps no PCI probing", {"-b", "0000:00:03.0"}, {kTap}, 0,
       {"--no-pci", "-b 0000:00:03.0"}, {}, {}},
      {"-a next to the config's PCI ports adds to them",
       {"-a", "0000:3b:02.1"}, {"0000:3b:02.0", "0000:3b:02.1"}, 0,
       {"-a 0000:3b:02.0 --log-level=notice -a 0000:3b:02.1"}, {"--no-pci"}, {}},
      {"-b conflicts with the config ports' -a", {"-b", "0000:00:03.0"}, {"0000:3b:02.0"}, 0,
       {"-b 0000:00:03.0"}, {"-a 0000:3b:02.0", "--no-pci"}, {"allow"}},
      {"--no-pci replaces --no-pci", {"--no-pci"}, {kTap}, 0, {"--no-huge", "--no-pci"}, {},
       {"no-pci"}},
      {"--no-pci drops the config ports' -a", {"--no-pci"}, {"0000:3b:02.0"}, 0, {"--no-pci"},
       {"-a 0000:3b:02.0"}, {"allow"}},
      {"a global --log-level replaces ours", {"--log-level=debug"}, {kTap}, 0,
       {"--log-level=debug"}, {"--log-level=notice"}, {"log-level"}},
      {"a --log-level for some types adds to ours", {"--log-level", "pmd.net.tap:debug"}, {kTap},
       0, {"--log-level=notice", "--log-level pmd.net.tap:debug"}, {}, {}},
      {"the README's tuned host line",
       {"-l", "2-6", "--main-lcore", "2", "-a", "0000:3b:02.0", "-a", "0000:3b:02.1",
        "--socket-mem", "4096"},
       {"0000:3b:02.0", "0000:3b:02.1"}, 0,
       {"--file-prefix=meshgate-test --in-memory --log-level=notice -l 2-6"},
       {"--lcores=", "--no-huge", "--no-pci"}, {"lcores"}},
  };
  for (const auto& c : cases) {
    const EalPlan p = plan(c.user, c.devices, c.free_hugepage_mb);
    auto words = [&](std::string w) {
      if (const auto at = w.find("$EST"); at != std::string::npos) {
        w.replace(at, 4, std::to_string(p.memory_mb));
      }
      return " " + w;
    };
    // The words as one string with a space at each end: " -m 5" never matches " -m 512".
    const std::string all = " " + joined(p.args) + " ";
    for (const auto& want : c.present) {
      EXPECT_NE(all.find(words(want) + " "), std::string::npos)
          << c.rule << ": no '" << want << "' in" << all;
    }
    for (const auto& unwanted : c.absent) {
      EXPECT_EQ(all.find(words(unwanted)), std::string::npos)
          << c.rule << ": '" << unwanted << "' in" << all;
    }
    EXPECT_EQ(p.replaced, c.replaced) << c.rule << ":" << all;
    // The user's arguments pass through unchanged, last.
    ASSERT_GE(p.args.size(), c.user.size()) << c.rule;
    EXPECT_TRUE(std::equal(c.user.begin(), c.user.end(), p.args.end() - c.user.size()))
        << c.rule << ":" << all;
    EXPECT_TRUE(p.user_args) << c.rule;
  }
}

TEST(EalPlan, UserMemoryIsSetByNoHugeMAndSocketMemOnly) {
  EXPECT_TRUE(plan({"--no-huge"}).user_memory);
  EXPECT_TRUE(plan({"-m", "64"}).user_memory);
  EXPECT_TRUE(plan({"--socket-mem=1024"}).user_memory);
  EXPECT_FALSE(plan({"-l", "0-1", "--in-memory"}).user_memory);
}

TEST(ParseEalOptions, ReadsValuesAsGetoptDoes) {
  const auto o = parse_eal_options({"-l0-1", "-vm", "64", "--file-prefix=x", "--vdev", "net_null0",
                                    "--huge-unlink", "--no-pci", "app-word", "-a", "0000:00:08.0",
                                    "--unknown", "--", "-c", "0x1"});
  std::string s;
  for (const auto& e : o) s += e.name + "=" + e.value + ";";
  EXPECT_EQ(s, "l=0-1;v=;m=64;file-prefix=x;vdev=net_null0;huge-unlink=;no-pci=;"
               "allow=0000:00:08.0;unknown=;");
}

TEST(ParseEalOptions, AnAmbiguousPrefixIsUnknown) {
  // "--no-" begins no-hpet, no-huge, no-pci, ...: getopt rejects it, so it replaces nothing.
  const auto o = parse_eal_options({"--no-", "--no-h"});
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].name, "no-");
  EXPECT_EQ(o[1].name, "no-h");
}

}  // namespace
}  // namespace meshgate::ctl
