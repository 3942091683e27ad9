// What the host does to a start: the replay input checked as a file and a capture, and other
// processes' busy threads found on the workers' CPUs from a fake /proc.
#include "control/runtime/host_checks.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace meshgate::ctl {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// ---- --pcap-in ----

TEST(PcapInput, AMissingFileADirectoryAFifoAndNotACaptureAreSaidPlainly) {
  test::TempDir dir;
  EXPECT_EQ(check_pcap_input(dir.str() + "/none.pcap"), "No such file or directory");
  EXPECT_EQ(check_pcap_input(dir.str()), "is a directory");
  const std::string fifo = dir.str() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(check_pcap_input(fifo), "not a regular file");
  write(dir.path() / "text.pcap", "not a capture at all, just some text\n");
  EXPECT_EQ(check_pcap_input(dir.str() + "/text.pcap").rfind("not a pcap capture (libpcap: ", 0),
            0u);
}

TEST(PcapInput, AnEmptyCaptureIsAcceptable) {
  test::TempDir dir;
  // The pcap global header alone: magic, version 2.4, zone 0, sigfigs 0, snaplen 65535, Ethernet.
  const uint32_t hdr[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  write(dir.path() / "empty.pcap", std::string(reinterpret_cast<const char*>(hdr), sizeof hdr));
  EXPECT_EQ(check_pcap_input(dir.str() + "/empty.pcap"), "");
}

// ---- offloads ----

TEST(KernelOffloads, OnlyNetAfPacketPortsAreLookedAt) {
  EXPECT_TRUE(kernel_offload_warnings("net_null0").empty());
  EXPECT_TRUE(kernel_offload_warnings("0000:3b:00.1").empty());
  EXPECT_TRUE(kernel_offload_warnings("net_pcap0,iface=lo").empty());
  // An interface that does not exist is the device check's error, not a warning.
  EXPECT_TRUE(kernel_offload_warnings("net_af_packet0,iface=mg-no-such-if").empty());
}

// ---- CPUs shared with other processes ----

// A fake /proc: threads with their stat line (utime at field 14, processor at 39) and their
// allowed CPUs.
class SharedCpuTest : public testing::Test {
 protected:
  void thread(pid_t pid, pid_t tid, const std::string& comm, uint64_t utime, int cpu,
              const std::string& allowed) {
    const fs::path task = dir_.path() / std::to_string(pid) / "task" / std::to_string(tid);
    std::string stat = std::to_string(tid) + " (" + comm + ") R 1";
    // Fields 5..13, then utime (14), stime (15), then 16..38, then processor (39) and two more.
    for (int f = 5; f <= 13; ++f) stat += " 0";
    stat += " " + std::to_string(utime) + " 0";
    for (int f = 16; f <= 38; ++f) stat += " 0";
    stat += " " + std::to_string(cpu) + " 0 0\n";
    write(task / "stat", stat);
    write(task / "status", "Name:\t" + comm + "\nCpus_allowed_list:\t" + allowed + "\n");
  }
  static cpu_set_t cpus(std::initializer_list<int> list) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c : list) CPU_SET(c, &s);
    return s;
  }
  test::TempDir dir_;
};

TEST_F(SharedCpuTest, StatLinesAreReadWithCommsHoldingSpacesAndParentheses) {
  thread(500, 501, "lcore-worker-1", 1000, 1, "1");
  thread(600, 600, "a (b) c", 7, 0, "0-1");
  auto s = read_thread_samples(dir_.str());
  ASSERT_EQ(s.size(), 2u);
  std::sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.tid < b.tid; });
  EXPECT_EQ(s[0].pid, 500);
  EXPECT_EQ(s[0].tid, 501);
  EXPECT_EQ(s[0].comm, "lcore-worker-1");
  EXPECT_EQ(s[0].processor, 1);
  EXPECT_EQ(s[0].ticks, 1000u);
  EXPECT_EQ(s[1].comm, "a (b) c");
  EXPECT_EQ(s[1].processor, 0);
  EXPECT_EQ(s[1].ticks, 7u);
}

// Another DPDK process's lcore pinned to the worker's CPU and spinning is reported; the same
// thread idle, an unpinned busy thread, a thread on another CPU and our own threads are not.
TEST_F(SharedCpuTest, OnlyAnotherProcesssBusyThreadPinnedToAWorkerCpuIsReported) {
  const pid_t self = 100;
  thread(500, 501, "lcore-worker-1", 1000, 1, "1");     // the other gateway's worker
  thread(500, 502, "lcore-worker-2", 1000, 1, "1");     // idle
  thread(600, 600, "cc1plus", 1000, 1, "0-1");          // busy but may move to CPU 0
  thread(700, 700, "spinner", 1000, 0, "0");            // busy on CPU 0, not a worker's
  thread(self, self, "meshgate", 1000, 1, "1");         // ourselves
  const auto before = read_thread_samples(dir_.str());
  thread(500, 501, "lcore-worker-1", 1010, 1, "1");
  thread(500, 502, "lcore-worker-2", 1001, 1, "1");
  thread(600, 600, "cc1plus", 1010, 1, "0-1");
  thread(700, 700, "spinner", 1010, 0, "0");
  thread(self, self, "meshgate", 1010, 1, "1");
  const auto after = read_thread_samples(dir_.str());
  const auto busy = busy_threads_on(before, after, 10, cpus({1}), self, dir_.str());
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].pid, 500);
  EXPECT_EQ(busy[0].tid, 501);
  EXPECT_EQ(busy[0].comm, "lcore-worker-1");
  EXPECT_EQ(busy[0].cpu, 1);
  EXPECT_DOUBLE_EQ(busy[0].busy, 1.0);
}

TEST_F(SharedCpuTest, HalfTheIntervalIsBusyAndLessIsNot) {
  thread(500, 501, "a", 0, 2, "2");
  thread(500, 502, "b", 0, 2, "2-3");
  thread(500, 503, "c", 0, 3, "3");
  const auto before = read_thread_samples(dir_.str());
  thread(500, 501, "a", 5, 2, "2");
  thread(500, 502, "b", 4, 2, "2-3");  // pinned within the workers' CPUs (2 and 3), but 40%
  thread(500, 503, "c", 5, 3, "3");
  const auto after = read_thread_samples(dir_.str());
  auto busy = busy_threads_on(before, after, 10, cpus({2, 3}), 1, dir_.str());
  ASSERT_EQ(busy.size(), 2u);
  std::sort(busy.begin(), busy.end(), [](const auto& a, const auto& b) { return a.tid < b.tid; });
  EXPECT_EQ(busy[0].tid, 501);
  EXPECT_EQ(busy[1].tid, 503);
  // A thread that appeared between the samples, and a zero interval, report nothing.
  EXPECT_TRUE(busy_threads_on({}, after, 10, cpus({2, 3}), 1, dir_.str()).empty());
  EXPECT_TRUE(busy_threads_on(before, after, 0, cpus({2, 3}), 1, dir_.str()).empty());
}

}  // namespace
}  // namespace meshgate::ctl
