#include "control/bgp/bgp_speaker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "control/common/log.h"

namespace meshgate::ctl {
namespace {

constexpr auto kMaxBackoff = std::chrono::seconds(30);
constexpr auto kStableRun = std::chrono::seconds(60);  // a run this long resets the backoff
constexpr auto kPollPeriod = std::chrono::seconds(1);
constexpr auto kStopGrace = std::chrono::seconds(3);

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t");
  const size_t b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The value after "key:" on a line of `show protocols all`, or "".
std::string field(const std::string& line, const char* key) {
  const size_t at = line.find(key);
  return at == std::string::npos ? "" : trim(line.substr(at + std::strlen(key)));
}

}  // namespace

BgpSpeaker::BgpSpeaker(BgpPlan plan, std::string daemon, std::string runtime_dir)
    : plan_(std::move(plan)), daemon_(std::move(daemon)), base_dir_(std::move(runtime_dir)) {
  if (base_dir_.empty()) {
    const char* rd = std::getenv("RUNTIME_DIRECTORY");  // systemd's RuntimeDirectory=
    base_dir_ = rd && *rd ? rd : "/run/meshgate";
  }
  for (const BgpSession& s : plan_.sessions) {
    BgpSessionStatus st;
    st.name = s.name;
    st.peer = s.address;
    st.remote_as = s.remote_as;
    st.state = "Down";
    status_.sessions.push_back(st);
  }
}

BgpSpeaker::~BgpSpeaker() { stop(); }

std::string BgpSpeaker::start() {
  if (access(daemon_.c_str(), X_OK) != 0) {
    return "BGP daemon " + daemon_ + " is not an executable (" + std::strerror(errno) +
           "; Debian's package is bird2, or set [bgp] daemon)";
  }
  if (mkdir(base_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return "cannot create runtime directory " + base_dir_ + ": " + std::strerror(errno);
  }
  remove_stale_dirs();
  dir_ = base_dir_ + "/bgp." + std::to_string(getpid());
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    const std::string e = "cannot create " + dir_ + ": " + std::strerror(errno);
    dir_.clear();
    return e;
  }
  conf_path_ = dir_ + "/bird.conf";
  ctl_path_ = dir_ + "/bird.ctl";
  if (ctl_path_.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return "runtime directory path too long for a control socket: " + ctl_path_;
  }
  if (std::string e = write_config(); !e.empty()) return e;
  if (!spawn()) return "cannot start " + daemon_ + ": " + std::strerror(errno);
  return "";
}

void BgpSpeaker::remove_stale_dirs() const {
  // A gateway that was killed left its directory; its daemon died with it (PR_SET_PDEATHSIG).
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(base_dir_, ec)) {
    const std::string name = e.path().filename();
    if (name.rfind("bgp.", 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + 4, nullptr, 10);
    if (pid <= 0 || kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;
    std::filesystem::remove_all(e.path(), ec);
  }
}

std::string BgpSpeaker::write_config() {
  const std::string tmp = conf_path_ + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << bird_config(plan_, announce_);
    f.flush();
    if (!f) return "cannot write " + tmp;
  }
  if (rename(tmp.c_str(), conf_path_.c_str()) != 0) {
    return "cannot write " + conf_path_ + ": " + std::strerror(errno);
  }
  return "";
}

bool BgpSpeaker::spawn() {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    // Only async-signal-safe calls until exec. The daemon dies with the gateway.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    close_range(3, ~0u, 0);
    execl(daemon_.c_str(), "bird", "-f", "-c", conf_path_.c_str(), "-s", ctl_path_.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_ = pid;
  started_at_ = std::chrono::steady_clock::now();
  next_poll_ = started_at_ + std::chrono::milliseconds(200);
  reload_pending_ = false;  // it reads the current config at start
  std::lock_guard lock(mu_);
  status_.pid = pid;
  log(LogLevel::kInfo, "bgp_daemon_started", "pid=%d daemon=%s config=%s announced=%zu", pid,
      daemon_.c_str(), conf_path_.c_str(), announce_.size());
  return true;
}

void BgpSpeaker::announce(const std::vector<IpAddr>& vips, const std::vector<IpAddr>& all) {
  auto sorted = [](std::vector<IpAddr> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  std::vector<IpAddr> next = sorted(vips);
  {
    std::lock_guard lock(mu_);
    status_.vips = sorted(all);
    status_.announced = next;
  }
  if (next == announce_ || dir_.empty()) return;
  announce_ = std::move(next);
  if (std::string e = write_config(); !e.empty()) {
    log(LogLevel::kError, "bgp_config_failed", "error=\"%s\"", e.c_str());
    return;
  }
  reload_pending_ = true;
  if (pid_ && reload()) reload_pending_ = false;
}

bool BgpSpeaker::reload() {
  std::vector<std::string> lines;
  const bool ok = command("configure", &lines);
  log(ok ? LogLevel::kInfo : LogLevel::kWarn, ok ? "bgp_reconfigured" : "bgp_reconfigure_failed",
      "announced=%zu reply=\"%s\"", announce_.size(), lines.empty() ? "" : lines.back().c_str());
  return ok;
}

bool BgpSpeaker::command(const std::string& cmd, std::vector<std::string>* lines) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A daemon that does not answer costs the control loop this long, at most once a second.
  timeval tv{0, 500'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, ctl_path_.c_str(), ctl_path_.size() + 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  // BIRD's control protocol: a greeting, then per command lines "CODE-text" (more follow),
  // " text" (continuation) and a last "CODE text"; codes 8000 and up are errors.
  std::string buf;
  auto read_line = [&](std::string* out) {
    for (;;) {
      if (const size_t nl = buf.find('\n'); nl != std::string::npos) {
        *out = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        return true;
      }
      char tmp[4096];
      const ssize_t n = read(fd, tmp, sizeof tmp);
      if (n <= 0) return false;
      buf.append(tmp, size_t(n));
    }
  };
  std::string line;
  ok = ok && read_line(&line);
  const std::string wire = cmd + "\n";
  // MSG_NOSIGNAL: a daemon that just died must not take the gateway with it (SIGPIPE).
  ok = ok && send(fd, wire.data(), wire.size(), MSG_NOSIGNAL) == ssize_t(wire.size());
  int last_code = 0;
  bool done = false;
  while (ok && !done && read_line(&line)) {
    const bool coded = line.size() >= 5 && std::all_of(line.begin(), line.begin() + 4, [](char c) {
                         return c >= '0' && c <= '9';
                       });
    if (coded) last_code = std::atoi(line.substr(0, 4).c_str());
    lines->push_back(coded ? line.substr(5) : line.substr(std::min<size_t>(1, line.size())));
    done = coded && line[4] == ' ';
  }
  close(fd);
  return ok && done && last_code < 8000;
}

void BgpSpeaker::poll_sessions() {
  const int64_t now = unix_now();
  std::vector<BgpSessionStatus> next;
  bool answered = true;
  {
    std::lock_guard lock(mu_);
    next = status_.sessions;
  }
  for (auto& s : next) {
    std::vector<std::string> lines;
    std::string state = "Down";
    uint64_t exported = 0;
    if (!command("show protocols all " + s.name, &lines)) {
      answered = false;
    } else {
      for (const auto& l : lines) {
        if (std::string v = field(l, "BGP state:"); !v.empty()) state = v;
        if (std::string v = field(l, "Routes:"); !v.empty()) {
          // "0 imported, 2 exported, 0 preferred"
          const size_t e = v.find(" exported");
          const size_t c = v.rfind(',', e);
          if (e != std::string::npos) {
            exported = std::strtoull(v.substr(c == std::string::npos ? 0 : c + 1).c_str(),
                                     nullptr, 10);
          }
        }
      }
    }
    const bool up = state == "Established";
    if (up != s.up) {
      log(LogLevel::kInfo, up ? "bgp_session_up" : "bgp_session_down", "peer=%s state=%s",
          s.peer.str().c_str(), state.c_str());
    }
    if (up && !s.up) s.up_since_unix = now;
    if (!up) s.up_since_unix = 0;
    s.up = up;
    s.state = state;
    s.prefixes_announced = up ? exported : 0;
  }
  std::lock_guard lock(mu_);
  status_.sessions = std::move(next);
  status_.running = pid_ != 0 && answered;
}

void BgpSpeaker::tick(std::chrono::steady_clock::time_point now) {
  if (dir_.empty()) return;
  if (pid_) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      log(LogLevel::kWarn, "bgp_daemon_exited", "pid=%d %s=%d restart_in_s=%ld", pid_,
          WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
          (long)backoff_.count());
      if (now - started_at_ >= kStableRun) backoff_ = std::chrono::seconds(1);
      restart_at_ = now + backoff_;
      backoff_ = std::min(2 * backoff_, kMaxBackoff);
      pid_ = 0;
      mark_down();
    }
  }
  if (!pid_ && now >= restart_at_) {
    if (write_config().empty() && spawn()) {
      std::lock_guard lock(mu_);
      ++status_.restarts;
    } else {
      restart_at_ = now + backoff_;
    }
    return;
  }
  if (now < next_poll_) return;
  next_poll_ = now + kPollPeriod;
  if (reload_pending_ && reload()) reload_pending_ = false;
  poll_sessions();
}

void BgpSpeaker::stop() {
  if (pid_) {
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
    int st;
    while (waitpid(pid_, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    log(LogLevel::kInfo, "bgp_daemon_stopped", "pid=%d", pid_);
    pid_ = 0;
  }
  if (!dir_.empty()) {
    for (const std::string& f : {conf_path_, conf_path_ + ".tmp", ctl_path_}) unlink(f.c_str());
    rmdir(dir_.c_str());
    dir_.clear();
  }
  mark_down();
}

void BgpSpeaker::mark_down() {
  std::lock_guard lock(mu_);
  status_.running = false;
  status_.pid = 0;
  for (auto& s : status_.sessions) {
    s.up = false;
    s.state = "Down";
    s.up_since_unix = 0;
    s.prefixes_announced = 0;
  }
}

BgpStatus BgpSpeaker::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

nlohmann::json bgp_status_json(const BgpStatus& s, int64_t now_unix) {
  nlohmann::json j;
  j["daemon"] = {{"running", s.running}, {"pid", s.pid}, {"restarts", s.restarts}};
  j["sessions"] = nlohmann::json::array();
  for (const auto& p : s.sessions) {
    j["sessions"].push_back({{"peer", p.peer.str()},
                             {"remote_as", p.remote_as},
                             {"state", p.state},
                             {"up", p.up},
                             {"uptime_s", p.up ? std::max<int64_t>(0, now_unix - p.up_since_unix) : 0},
                             {"prefixes_announced", p.prefixes_announced}});
  }
  j["vips"] = nlohmann::json::array();
  for (const auto& v : s.vips) {
    const bool on = std::binary_search(s.announced.begin(), s.announced.end(), v);
    j["vips"].push_back({{"vip", v.str()}, {"announced", on}});
  }
  return j;
}

}  // namespace meshgate::ctl
