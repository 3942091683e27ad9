// The file provider: first load at start, reload on in-place writes and on editors' rename-over,
// an invalid edit keeps the last model (counted), and the fixed file applies again. The watch
// under it: only the file's own name (and a symlink's first hop, a ConfigMap's ..data) counts.
#include "control/mesh/file_provider.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "control/mesh/file_watch.h"
#include "tests/support/temp_dir.h"

namespace meshgate::ctl::mesh {
namespace {

using namespace std::chrono_literals;

std::string mesh(const char* addr) {
  return std::string(R"(
[[mesh_service]]
namespace = "ns"
hostname = "web.ns.svc.cluster.local"
vips = ["10.96.0.10"]
ports = [{ service_port = 80, target_port = 8080 }]
[[workload]]
uid = "w"
namespace = "ns"
addresses = [")") + addr + R"("]
services = { "ns/web.ns.svc.cluster.local" = [] }
)";
}

std::shared_ptr<const MeshModel> wait_update(FileProvider& p, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto u = p.take()) return u->model;
    std::this_thread::sleep_for(5ms);
  }
  return nullptr;
}

std::string address_of(const MeshModel& m) { return m.workloads.at("w").addresses[0].str(); }

TEST(FileProvider, ReloadsOnWritesAndRenamesAndKeepsTheLastGoodModel) {
  char tmpl[] = "/tmp/mg-file-provider.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/mesh.toml";
  std::ofstream(path) << mesh("10.0.0.1");

  FileProvider p(path);
  ASSERT_TRUE(p.start().ok());
  EXPECT_TRUE(p.synced());
  auto m = wait_update(p, 100ms);  // delivered by start()
  ASSERT_TRUE(m);
  EXPECT_EQ(address_of(*m), "10.0.0.1");

  // In-place write.
  std::ofstream(path, std::ios::trunc) << mesh("10.0.0.2");
  m = wait_update(p, 2s);
  ASSERT_TRUE(m);
  EXPECT_EQ(address_of(*m), "10.0.0.2");

  // An editor writing a new file and renaming it over the old one.
  std::ofstream(dir + "/.mesh.toml.swp") << mesh("10.0.0.3");
  std::filesystem::rename(dir + "/.mesh.toml.swp", path);
  m = wait_update(p, 2s);
  ASSERT_TRUE(m);
  EXPECT_EQ(address_of(*m), "10.0.0.3");

  // Invalid: nothing delivered, counted.
  std::ofstream(path, std::ios::trunc) << mesh("10.0.0.300");
  EXPECT_FALSE(wait_update(p, 300ms));
  EXPECT_EQ(p.counters().reload_errors.load(), 1u);

  // Fixed again.
  std::ofstream(path, std::ios::trunc) << mesh("10.0.0.4");
  m = wait_update(p, 2s);
  ASSERT_TRUE(m);
  EXPECT_EQ(address_of(*m), "10.0.0.4");
  EXPECT_EQ(p.counters().reloads.load(), 4u);
  p.stop();
  std::filesystem::remove_all(dir);
}

// A FIFO or a link to /dev/zero put in place of the mesh file: refused at once (no open() that
// waits for a writer, no read until memory runs out), the last model kept, the thread still
// answers the next good edit and stops promptly.
TEST(FileProvider, FifoOrDevZeroInPlaceOfTheFileKeepsTheLastModelAndStopsPromptly) {
  const test::TempDir tmp;
  const std::string dir = tmp.str();
  const std::string path = dir + "/mesh.toml";
  std::ofstream(path) << mesh("10.0.0.1");
  FileProvider p(path);
  ASSERT_TRUE(p.start().ok());
  ASSERT_TRUE(wait_update(p, 100ms));

  ASSERT_EQ(mkfifo((dir + "/next").c_str(), 0600), 0);
  std::filesystem::rename(dir + "/next", path);
  EXPECT_FALSE(wait_update(p, 300ms));
  const auto errors_deadline = std::chrono::steady_clock::now() + 2s;
  while (p.counters().reload_errors.load() < 1 &&
         std::chrono::steady_clock::now() < errors_deadline) {
    std::this_thread::sleep_for(5ms);
  }
  if (p.counters().reload_errors.load() != 1u) {
    // Blocked in open(): a writer comes and goes to release it, and the test stops here.
    const int w = open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) close(w);
    p.stop();
    FAIL() << "a FIFO in place of the mesh file was not refused";
  }

  std::filesystem::create_symlink("/dev/zero", dir + "/next");
  std::filesystem::rename(dir + "/next", path);
  EXPECT_FALSE(wait_update(p, 300ms));
  EXPECT_EQ(p.counters().reload_errors.load(), 2u);

  // The provider's thread is not wedged: a good file applies again.
  std::ofstream(dir + "/next") << mesh("10.0.0.5");
  std::filesystem::rename(dir + "/next", path);
  auto m = wait_update(p, 2s);
  ASSERT_TRUE(m);
  EXPECT_EQ(address_of(*m), "10.0.0.5");

  // And a FIFO again, then stop: within a second, not blocked in open().
  ASSERT_EQ(mkfifo((dir + "/next").c_str(), 0600), 0);
  std::filesystem::rename(dir + "/next", path);
  std::this_thread::sleep_for(100ms);
  auto stopped = std::async(std::launch::async, [&] { p.stop(); });
  if (stopped.wait_for(1s) != std::future_status::ready) {
    const int w = open(path.c_str(), O_WRONLY | O_NONBLOCK);  // release a blocked open()
    if (w >= 0) close(w);
    stopped.wait();
    ADD_FAILURE() << "stop() blocked behind a FIFO";
  }
}

TEST(FileProvider, InvalidFileAtStartIsAnErrorWithItsPosition) {
  char tmpl[] = "/tmp/mg-file-provider.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/mesh.toml";
  std::ofstream(path) << "[[workload]]\nuid = 7\n";
  FileProvider p(path);
  auto r = p.start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(path + ":2:7: workload[0].uid: expected a string, got 7"),
            std::string::npos)
      << r.error().message;
  std::filesystem::remove_all(dir);
}

TEST(FileWatch, OtherNamesInTheDirectoryAreNoChange) {
  test::TempDir dir;
  const std::string path = dir.str() + "/mesh.toml";
  std::ofstream(path) << "a";
  FileWatch w;
  ASSERT_TRUE(w.open(path));
  std::ofstream(dir.str() + "/sibling.log") << "x";
  std::ofstream(dir.str() + "/.mesh.toml.swp") << "x";
  std::filesystem::remove(dir.str() + "/sibling.log");
  EXPECT_FALSE(w.wait(300, 20)) << "a sibling's write, an editor's swap file";
  std::ofstream(path) << "b";
  EXPECT_TRUE(w.wait(1000, 20));
  // An editor's write-and-rename: the rename onto the name is the change.
  std::ofstream(dir.str() + "/.mesh.toml.swp") << "c";
  std::filesystem::rename(dir.str() + "/.mesh.toml.swp", path);
  EXPECT_TRUE(w.wait(1000, 20));
  EXPECT_FALSE(w.wait(100, 20));
}

TEST(FileWatch, DirectoryDotWatchesEveryName) {
  test::TempDir dir;
  FileWatch w;
  ASSERT_TRUE(w.open(dir.str() + "/."));
  std::ofstream(dir.str() + "/key.pem") << "x";
  EXPECT_TRUE(w.wait(1000, 20));
  EXPECT_FALSE(w.wait(100, 20));
}

TEST(FileWatch, ConfigMapSymlinkSwapIsAChange) {
  // A Kubernetes ConfigMap volume: mesh.toml -> ..data/mesh.toml, ..data -> ..<timestamp>; an
  // update writes a new timestamped directory and renames a new ..data link over the old one.
  test::TempDir dir;
  const std::string d = dir.str();
  std::filesystem::create_directory(d + "/..2026_01");
  std::ofstream(d + "/..2026_01/mesh.toml") << "a";
  std::filesystem::create_directory_symlink("..2026_01", d + "/..data");
  std::filesystem::create_symlink("..data/mesh.toml", d + "/mesh.toml");
  FileWatch w;
  ASSERT_TRUE(w.open(d + "/mesh.toml"));
  std::filesystem::create_directory(d + "/..2026_02");
  std::ofstream(d + "/..2026_02/mesh.toml") << "b";
  std::filesystem::create_directory_symlink("..2026_02", d + "/..data_tmp");
  std::filesystem::rename(d + "/..data_tmp", d + "/..data");
  EXPECT_TRUE(w.wait(1000, 20));
}

TEST(FileWatch, SettleIsCountedFromTheFirstEventNotExtendedByLaterOnes) {
  test::TempDir dir;
  const std::string path = dir.str() + "/mesh.toml";
  std::ofstream(path) << "a";
  FileWatch w;
  ASSERT_TRUE(w.open(path));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 60 && !stop; ++i) {  // at most 3 s
      std::ofstream(path) << i;
      std::this_thread::sleep_for(50ms);
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const bool changed = w.wait(2000, 200);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0).count();
  stop = true;
  writer.join();
  EXPECT_TRUE(changed);
  EXPECT_LT(ms, 600) << "writes every 50 ms must not hold the change back";
}

}  // namespace
}  // namespace meshgate::ctl::mesh
