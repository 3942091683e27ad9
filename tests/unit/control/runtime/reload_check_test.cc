// check_reload against files on disk: a reload checks what --check checks besides the file
// (its referenced files, positioned), and refuses a config whose new Maglev tables need more
// memory than the host has available, naming both figures and leaving `*next` unset.
#include "control/runtime/reload.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "control/runtime/eal.h"
#include "control/runtime/preflight.h"

namespace meshgate::ctl {
namespace {

namespace fs = std::filesystem;

// 4194301 slots x 4 bytes: 16 MiB less 12 bytes.
constexpr uint32_t kBigTable = 4194301;

class ReloadCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mg-reload-check.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/gw.toml";
    for (const char* f : {"cert.pem", "key.pem", "roots.pem"}) write(dir_ + "/" + f, "PEM\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  }
  // A config with an [hbone] section on lines 5..8 (its private_key on line 7) and `services`
  // services s0.. of one backend each, every table `table_size` slots (0: automatic);
  // service `heavy` (if any) with `weight`.
  std::string config(int services, uint32_t table_size, uint32_t workers = 1,
                     uint32_t weight = 1) const {
    std::string t = "[gateway]\nworkers = " + std::to_string(workers) +
                    "\n[fullnat]\nlocal_addresses = [\"198.51.100.2\"]\n"
                    "[hbone]\n"
                    "cert_chain = \"" + dir_ + "/cert.pem\"\n"
                    "private_key = \"" + dir_ + "/key.pem\"\n"
                    "trust_bundle = \"" + dir_ + "/roots.pem\"\n"
                    "[[port]]\nname = \"net0\"\ndevice = \"net_null0\"\n"
                    "addresses = [\"198.51.100.1/24\"]\n";
    for (int i = 0; i < services; ++i) {
      t += "[[service]]\nname = \"s" + std::to_string(i) + "\"\nvip = \"203.0.113.10\"\nport = " +
           std::to_string(1000 + i) + "\n";
      if (table_size) t += "table_size = " + std::to_string(table_size) + "\n";
      t += "  [[service.backend]]\n  address = \"198.51.100.11\"\n  port = 8080\n";
      if (i == 0) t += "  weight = " + std::to_string(weight) + "\n";
    }
    return t;
  }
  Config running(const std::string& text) {
    write(path_, text);
    auto c = load_config(path_);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().str());
    return c.ok() ? std::move(c.value()) : Config{};
  }

  std::string dir_, path_;
};

TEST_F(ReloadCheck, TablesThatDoNotFitAreRefusedWithTheFigures) {
  const Config run = running(config(1, 0));
  // 65 tables of 16 MiB built (s0's automatic one grows): about 1041 MiB, against 1000.
  write(path_, config(65, kBigTable));
  std::optional<Config> next;
  const ReloadOutcome o = check_reload(run, "sighup", 1000, &next);
  EXPECT_EQ(o.result, ReloadResult::kInvalid);
  EXPECT_FALSE(next.has_value());
  EXPECT_EQ(o.needed_mb, 1041u);
  EXPECT_EQ(o.available_mb, 1000u);
  EXPECT_TRUE(o.memory_refused());
  ASSERT_EQ(o.errors.errors.size(), 1u);
  const ConfigError& e = o.errors.errors[0];
  EXPECT_EQ(e.key, "service[0].table_size");
  EXPECT_EQ(e.pos.file, path_);
  EXPECT_EQ(e.pos.line, 17);  // service[0]'s table_size
  EXPECT_NE(e.message.find("needs about 1041 MiB (Maglev tables of 65 services added or changed"),
            std::string::npos) << e.message;
  EXPECT_NE(e.message.find("more than the 1000 MiB this host has available"), std::string::npos)
      << e.message;
  // The same file where the memory is there: accepted, with its figure.
  const ReloadOutcome ok = check_reload(run, "sighup", 1041, &next);
  EXPECT_EQ(ok.result, ReloadResult::kOk) << ok.errors.str();
  EXPECT_EQ(ok.needed_mb, 1041u);
  EXPECT_FALSE(ok.memory_refused());
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->services.size(), 65u);
}

TEST_F(ReloadCheck, UnchangedTablesAreReusedAndCostOnlyTheirEntries) {
  const Config run = running(config(10, kBigTable));
  std::optional<Config> next;
  // Nothing changed: the ten tables are reused, 10 services' entries (12.5 KiB) remain.
  write(path_, config(10, kBigTable) + "# a comment\n");
  ReloadOutcome o = check_reload(run, "sighup", 1, &next);
  EXPECT_EQ(o.result, ReloadResult::kOk) << o.errors.str();
  EXPECT_EQ(o.needed_mb, 1u);
  // One weight changed: that service's table is built again, 16 MiB + the entries.
  write(path_, config(10, kBigTable, 1, 2));
  o = check_reload(run, "sighup", 16, &next);
  EXPECT_EQ(o.result, ReloadResult::kInvalid);
  EXPECT_EQ(o.needed_mb, 17u);
  ASSERT_EQ(o.errors.errors.size(), 1u);
  EXPECT_NE(o.errors.errors[0].message.find("Maglev tables of 1 services added or changed"),
            std::string::npos) << o.errors.errors[0].message;
  EXPECT_EQ(check_reload(run, "sighup", 17, &next).result, ReloadResult::kOk);
}

// What the host really has (available_memory_mb): the reload of a config a start would refuse.
TEST_F(ReloadCheck, BeyondTheHostsMemoryIsRefused) {
  const uint64_t avail = available_memory_mb();
  if (avail == 0) GTEST_SKIP() << "available memory unknown here";
  const Config run = running(config(1, 0));
  const int n = int(avail / 16 + 64);  // 16 MiB tables, 1 GiB past what is available
  write(path_, config(n, kBigTable));
  std::optional<Config> next;
  const ReloadOutcome o = check_reload(run, "sighup", &next);
  EXPECT_EQ(o.result, ReloadResult::kInvalid) << "accepted: " << n << " tables of 16 MiB";
  EXPECT_FALSE(next.has_value());
  ASSERT_EQ(o.errors.errors.size(), 1u);
  EXPECT_NE(o.errors.errors[0].message.find("MiB this host has available"), std::string::npos)
      << o.errors.errors[0].message;
}

TEST_F(ReloadCheck, UnknownAvailableMemoryRefusesNothing) {
  const Config run = running(config(1, 0));
  write(path_, config(65, kBigTable));
  std::optional<Config> next;
  const ReloadOutcome o = check_reload(run, "sighup", 0, &next);
  EXPECT_EQ(o.result, ReloadResult::kOk) << o.errors.str();
  EXPECT_EQ(o.needed_mb, 1041u);
  EXPECT_FALSE(o.memory_refused());
}

TEST_F(ReloadCheck, MissingKeyFileIsInvalidAsCheckSaysIt) {
  const Config run = running(config(1, 0));
  fs::remove(dir_ + "/key.pem");
  std::optional<Config> next;
  const ReloadOutcome o = check_reload(run, "sighup", &next);
  EXPECT_EQ(o.result, ReloadResult::kInvalid);
  EXPECT_FALSE(next.has_value());
  ASSERT_EQ(o.errors.errors.size(), 1u);
  const ConfigError& e = o.errors.errors[0];
  EXPECT_EQ(e.key, "hbone.private_key");
  EXPECT_EQ(e.pos.file, path_);
  EXPECT_EQ(e.pos.line, 7);
  // --check's checks of the same file (but the device) give the same error.
  const ConfigErrors check = preflight(run, /*replay=*/false, /*devices=*/false);
  EXPECT_EQ(o.errors.str(), check.str());
  EXPECT_NE(e.str().find("key.pem"), std::string::npos) << e.str();
}

TEST_F(ReloadCheck, MissingFileComesBeforeRestartRequired) {
  // A restart_required answer asks for a restart, which the missing file would fail.
  const Config run = running(config(1, 0));
  write(path_, config(1, 0, /*workers=*/2));
  fs::remove(dir_ + "/roots.pem");
  std::optional<Config> next;
  const ReloadOutcome o = check_reload(run, "admin", &next);
  EXPECT_EQ(o.result, ReloadResult::kInvalid);
  ASSERT_EQ(o.errors.errors.size(), 1u);
  EXPECT_EQ(o.errors.errors[0].key, "hbone.trust_bundle");
  // With the file back the same config is restart_required, as before.
  write(dir_ + "/roots.pem", "PEM\n");
  EXPECT_EQ(check_reload(run, "admin", &next).result, ReloadResult::kRestartRequired);
}

}  // namespace
}  // namespace meshgate::ctl
