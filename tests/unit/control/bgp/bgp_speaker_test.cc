// The BGP speaker (control/bgp/bgp_speaker.h) running the real daemon, BIRD 2, in a network
// namespace of the test's own: what it logs as the daemon starts and stops, and how it treats
// the runtime directory it is given (one it may not trust, things planted in it).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/bgp/bgp_speaker.h"
#include "control/common/log.h"

namespace meshgate::ctl {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBird = "/usr/sbin/bird";
constexpr uid_t kNobody = 65534;

IpAddr A(const char* s) { return *IpAddr::parse(s); }

BgpPlan plan() {
  BgpPlan p;
  p.router_id = A("192.0.2.1");
  p.local_as = 65001;
  p.hold_time_s = 6;
  BgpSession s;
  s.name = "peer0";
  s.address = A("192.0.2.254");
  s.local = A("192.0.2.1");
  s.interface = "mgh";  // absent: the session waits, nothing leaves the namespace
  s.remote_as = 65000;
  s.password = "s3cret";
  p.sessions.push_back(s);
  return p;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A pid that no process has now: a child's that was reaped.
pid_t dead_pid() {
  const pid_t p = fork();
  if (p == 0) _exit(0);
  int st;
  waitpid(p, &st, 0);
  return p;
}

class BgpSpeakerTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace for the daemon, chown";
    ASSERT_EQ(access(kBird, X_OK), 0) << "bird2 is not installed (tools/setup.sh)";
    // The daemon listens on TCP 179 and reads the interfaces: of this namespace only.
    ASSERT_EQ(unshare(CLONE_NEWNET), 0) << std::strerror(errno);
    char tmpl[] = "/tmp/mg-bgp-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    top_ = tmpl;
    base_ = top_ + "/run";
    ASSERT_EQ(mkdir(base_.c_str(), 0755), 0);
    outside_ = top_ + "/precious";
    std::ofstream(outside_) << "precious\n";
  }
  void TearDown() override {
    set_log_format(LogFormat::kText);
    std::error_code ec;
    if (!top_.empty()) fs::remove_all(top_, ec);
  }
  std::string own_dir() const { return base_ + "/bgp." + std::to_string(getpid()); }

  // Ticks the speaker as the control loop does until the daemon answers (at most 5 s).
  static bool run_until_running(BgpSpeaker& s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      s.tick(std::chrono::steady_clock::now());
      if (s.status().running) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  // What the speaker logs from start to stop with `vips` announced at once, as the gateway does
  // when it becomes ready.
  std::string start_announce_stop(const std::string& base) {
    testing::internal::CaptureStderr();
    {
      BgpSpeaker s(plan(), kBird, base);
      const std::string e = s.start();
      EXPECT_EQ(e, "");
      if (e.empty()) {
        s.announce({A("203.0.113.10")}, {A("203.0.113.10")});
        EXPECT_TRUE(run_until_running(s));
      }
      s.stop();
    }
    return testing::internal::GetCapturedStderr();
  }

  std::string top_, base_, outside_;
};

TEST_F(BgpSpeakerTest, a_normal_start_reloads_once_the_daemon_answers_and_logs_no_failure) {
  const std::string out = start_announce_stop(base_);
  EXPECT_EQ(count(out, "bgp_reconfigure_failed"), 0u) << out;
  EXPECT_EQ(count(out, "event=bgp_reconfigured "), 1u) << out;
}

TEST_F(BgpSpeakerTest, json_logs_stay_json_with_the_daemons_lines_as_events) {
  set_log_format(LogFormat::kJson);
  const std::string out = start_announce_stop(base_);
  set_log_format(LogFormat::kText);
  std::istringstream lines(out);
  std::string line;
  size_t n = 0;
  bool started = false, shut_down = false;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++n;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line << "\nin:\n" << out;
    if (j.value("event", "") != "bgp_daemon_output") continue;
    const std::string msg = j.value("msg", "");
    started |= msg == "Started" && j.value("level", "") == "info";
    // BIRD's FATAL at every normal stop is not an error of the gateway's.
    shut_down |= msg == "Shutdown completed" && j.value("level", "") == "info";
  }
  EXPECT_GT(n, 3u) << out;
  EXPECT_TRUE(started) << out;
  EXPECT_TRUE(shut_down) << out;
}

TEST_F(BgpSpeakerTest, a_runtime_dir_writable_by_everyone_without_the_sticky_bit_is_refused) {
  ASSERT_EQ(chmod(base_.c_str(), 0777), 0);
  {
    BgpSpeaker s(plan(), kBird, base_);
    const std::string e = s.start();
    EXPECT_NE(e.find("is unsafe: writable by everyone without the sticky bit"), std::string::npos)
        << e;
    EXPECT_FALSE(fs::exists(own_dir()));
  }
  // /tmp's mode: nobody can rename or remove what is not theirs.
  ASSERT_EQ(chmod(base_.c_str(), 01777), 0);
  BgpSpeaker s(plan(), kBird, base_);
  EXPECT_EQ(s.start(), "");
  s.stop();
}

TEST_F(BgpSpeakerTest, a_runtime_dir_of_another_user_is_refused) {
  ASSERT_EQ(chown(base_.c_str(), kNobody, kNobody), 0);
  BgpSpeaker s(plan(), kBird, base_);
  const std::string e = s.start();
  EXPECT_NE(e.find("is unsafe: owned by uid 65534"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(own_dir()));
}

TEST_F(BgpSpeakerTest, links_planted_in_a_leftover_dir_of_ours_touch_no_outside_file) {
  // What an earlier process of the same pid left (a container's gateway has the same pid at
  // every start), with links where the config and its temporary file go.
  const std::string d = own_dir();
  ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
  ASSERT_EQ(symlink(outside_.c_str(), (d + "/bird.conf.tmp").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), (d + "/bird.conf").c_str()), 0);
  BgpSpeaker s(plan(), kBird, base_);
  ASSERT_EQ(s.start(), "");
  s.announce({A("203.0.113.10")}, {A("203.0.113.10")});  // a rewrite too
  EXPECT_EQ(slurp(outside_), "precious\n");
  struct stat st{};
  ASSERT_EQ(lstat((d + "/bird.conf").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // it holds the MD5 passwords
  EXPECT_NE(slurp(d + "/bird.conf").find("route 203.0.113.10/32 blackhole;"), std::string::npos);
  s.stop();
  EXPECT_EQ(slurp(outside_), "precious\n");
  EXPECT_FALSE(fs::exists(d));
}

TEST_F(BgpSpeakerTest, a_planted_dir_of_another_user_is_refused_and_left_alone) {
  const std::string d = own_dir();
  const std::string link = d + "/bird.conf.tmp";
  ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
  ASSERT_EQ(symlink(outside_.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chown(d.c_str(), kNobody, kNobody), 0);
  BgpSpeaker s(plan(), kBird, base_);
  const std::string e = s.start();
  EXPECT_NE(e.find("it exists and is not"), std::string::npos) << e;
  s.stop();
  EXPECT_EQ(slurp(outside_), "precious\n");
  struct stat st{};
  EXPECT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST_F(BgpSpeakerTest, a_dead_gateways_dir_is_removed_but_not_another_users) {
  const std::string ours = base_ + "/bgp." + std::to_string(dead_pid());
  const std::string theirs = base_ + "/bgp." + std::to_string(dead_pid());
  for (const std::string& d : {ours, theirs}) {
    ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
    std::ofstream(d + "/bird.conf") << "# left\n";
  }
  ASSERT_EQ(chown((theirs + "/bird.conf").c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chown(theirs.c_str(), kNobody, kNobody), 0);
  BgpSpeaker s(plan(), kBird, base_);
  ASSERT_EQ(s.start(), "");
  s.stop();
  EXPECT_FALSE(fs::exists(ours));
  EXPECT_TRUE(fs::exists(theirs + "/bird.conf"));
}

TEST_F(BgpSpeakerTest, the_longest_runtime_dir_the_config_takes_holds_the_control_socket) {
  std::string base = top_ + "/";
  base += std::string(kMaxBgpRuntimeDirBytes - base.size(), 'd');
  ASSERT_EQ(base.size(), kMaxBgpRuntimeDirBytes);
  ASSERT_EQ(mkdir(base.c_str(), 0755), 0);
  const std::string out = start_announce_stop(base);
  EXPECT_EQ(count(out, "event=bgp_reconfigured "), 1u) << out;
}

TEST(BirdOutputLine, takes_the_daemons_class_as_the_level_and_drops_its_timestamp) {
  struct Case {
    const char* line;
    LogLevel level;
    const char* msg;
  };
  const Case cases[] = {
      {"2026-12-02 04:56:57.441 <INFO> Started", LogLevel::kInfo, "Started"},
      {"2026-12-02 04:56:57.441 <RMT> peer0: Received: Hold timer expired", LogLevel::kInfo,
       "peer0: Received: Hold timer expired"},
      {"2026-12-02 04:56:57.441 <WARN> Kernel dropped some netlink messages", LogLevel::kWarn,
       "Kernel dropped some netlink messages"},
      {"2026-12-02 04:56:57.441 <ERR> peer0: Socket error: bind: Address in use",
       LogLevel::kError, "peer0: Socket error: bind: Address in use"},
      {"2026-12-02 04:56:57.441 <DBG> x", LogLevel::kDebug, "x"},
      {"2026-12-02 04:56:59.006 <FATAL> Shutdown completed", LogLevel::kInfo,
       "Shutdown completed"},
      {"2026-12-02 04:56:59.006 <FATAL> Out of memory", LogLevel::kError, "Out of memory"},
      {"<BUG> no timestamp\r\n", LogLevel::kError, "no timestamp"},
      // What it prints before it dies, untagged.
      {"bird: /run/meshgate/bgp.7/bird.conf:3:10 syntax error", LogLevel::kError,
       "bird: /run/meshgate/bgp.7/bird.conf:3:10 syntax error"},
  };
  for (const Case& c : cases) {
    const DaemonLine l = bird_output_line(c.line);
    EXPECT_EQ(l.level, c.level) << c.line;
    EXPECT_EQ(l.msg, c.msg) << c.line;
  }
}

}  // namespace
}  // namespace meshgate::ctl
