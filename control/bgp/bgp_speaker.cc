#include "control/bgp/bgp_speaker.h"

#include <dirent.h>
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
#include <thread>

#include "control/common/log.h"

namespace meshgate::ctl {
namespace {

constexpr auto kMaxBackoff = std::chrono::seconds(30);
constexpr auto kStableRun = std::chrono::seconds(60);  // a run this long resets the backoff
constexpr auto kPollPeriod = std::chrono::seconds(1);
constexpr auto kStopGrace = std::chrono::seconds(3);
// Until the daemon first answers, its socket is tried this often (it binds it as it starts).
constexpr auto kReadyProbePeriod = std::chrono::milliseconds(50);
constexpr auto kNotAnsweringWarn = std::chrono::seconds(10);
// A line the daemon does not end is logged in pieces this long.
constexpr size_t kMaxOutputLine = 4096;
constexpr const char* kDirPrefix = "/bgp.";
constexpr const char* kSocketName = "/bird.ctl";
// [bgp] runtime_dir's limit (config.h) is what this socket name leaves of sun_path.
static_assert(kMaxBgpRuntimeDirBytes + std::char_traits<char>::length(kDirPrefix) + 7 +
                  std::char_traits<char>::length(kSocketName) <
              sizeof(sockaddr_un{}.sun_path));

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

// Why `base` may not hold the gateway's runtime directory, or "": anyone but root and this user
// who can add or rename entries in it could plant bgp.<pid> or a link in its place.
std::string unsafe_base_dir(const std::string& base) {
  struct stat st{};
  if (stat(base.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return "owned by uid " + std::to_string(st.st_uid) + ", neither root nor this user";
  }
  if (st.st_mode & S_ISVTX) return "";
  if (st.st_mode & S_IWOTH) return "writable by everyone without the sticky bit";
  if ((st.st_mode & S_IWGRP) && st.st_gid != 0 && st.st_gid != getegid()) {
    return "writable by group " + std::to_string(st.st_gid) + " without the sticky bit";
  }
  return "";
}

// Empties and removes a bgp.<pid> directory if it is a directory of this user's (not a link);
// its entries are unlinked, never followed, and it has no subdirectories of ours.
bool remove_own_dir(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
    close(fd);
    return false;
  }
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    return false;
  }
  bool ok = true;
  while (const dirent* e = readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    ok &= unlinkat(fd, e->d_name, 0) == 0;
  }
  closedir(d);
  return ok && rmdir(path.c_str()) == 0;
}

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

}  // namespace

DaemonLine bird_output_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  // "2026-12-02 04:56:59.006 " (BIRD's default stderr timestamp): the gateway's line has its own.
  if (line.size() >= 24 && line[4] == '-' && line[7] == '-' && line[10] == ' ' &&
      line[13] == ':' && line[16] == ':' && line[23] == ' ') {
    line.remove_prefix(24);
  }
  DaemonLine out;
  const size_t end = line.find("> ");
  if (line.empty() || line[0] != '<' || end == std::string_view::npos) {
    out.msg = std::string(line);
    return out;
  }
  const std::string_view tag = line.substr(1, end - 1);
  out.msg = std::string(line.substr(end + 2));
  // BIRD's classes (log.c): DBG TRACE INFO RMT WARN ERR AUTH FATAL BUG.
  if (tag == "DBG") {
    out.level = LogLevel::kDebug;
  } else if (tag == "TRACE" || tag == "INFO" || tag == "RMT" || tag == "AUTH") {
    out.level = LogLevel::kInfo;
  } else if (tag == "WARN") {
    out.level = LogLevel::kWarn;
  } else {
    out.level = LogLevel::kError;
  }
  // BIRD logs the end of every normal shutdown as FATAL, its last word.
  if (tag == "FATAL" && out.msg == "Shutdown completed") out.level = LogLevel::kInfo;
  return out;
}

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
  // [bgp] runtime_dir was checked with the config; $RUNTIME_DIRECTORY only now.
  if (base_dir_.size() > kMaxBgpRuntimeDirBytes) {
    return "runtime directory " + base_dir_ + " is longer than " +
           std::to_string(kMaxBgpRuntimeDirBytes) +
           " bytes: the daemon's control socket in it would not fit a Unix socket address";
  }
  if (mkdir(base_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return "cannot create runtime directory " + base_dir_ + ": " + std::strerror(errno);
  }
  if (std::string why = unsafe_base_dir(base_dir_); !why.empty()) {
    return "runtime directory " + base_dir_ + " is unsafe: " + why;
  }
  remove_stale_dirs();
  dir_ = base_dir_ + kDirPrefix + std::to_string(getpid());
  if (std::string e = make_own_dir(); !e.empty()) {
    dir_.clear();
    return e;
  }
  conf_path_ = dir_ + "/bird.conf";
  ctl_path_ = dir_ + kSocketName;
  if (std::string e = write_config(); !e.empty()) return e;
  if (!spawn()) return "cannot start " + daemon_ + ": " + std::strerror(errno);
  return "";
}

std::string BgpSpeaker::make_own_dir() {
  if (mkdir(dir_.c_str(), 0700) == 0) return "";
  if (errno != EEXIST) return "cannot create " + dir_ + ": " + std::strerror(errno);
  // An earlier process of ours with this pid (a container's gateway is often the same pid at
  // every start) was killed before it removed it; anything else there is someone else's.
  if (!remove_own_dir(dir_)) {
    return "cannot create " + dir_ + ": it exists and is not an empty-able directory of this "
           "user's (remove it)";
  }
  if (mkdir(dir_.c_str(), 0700) != 0) {
    return "cannot create " + dir_ + ": " + std::strerror(errno);
  }
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
    remove_own_dir(e.path());
  }
}

std::string BgpSpeaker::write_config() {
  // The directory is ours and 0700: a leftover .tmp is one of ours that failed halfway.
  const std::string tmp = conf_path_ + ".tmp";
  unlink(tmp.c_str());
  // 0600: the config holds the sessions' MD5 passwords.
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot create " + tmp + ": " + std::strerror(errno);
  const bool ok = write_all(fd, bird_config(plan_, announce_));
  const int saved = errno;
  if (close(fd) != 0 || !ok) {
    unlink(tmp.c_str());
    return "cannot write " + tmp + ": " + std::strerror(ok ? errno : saved);
  }
  if (rename(tmp.c_str(), conf_path_.c_str()) != 0) {
    return "cannot write " + conf_path_ + ": " + std::strerror(errno);
  }
  return "";
}

bool BgpSpeaker::spawn() {
  drain_output(true);  // an earlier run's last words
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return false;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int saved = errno;
    close(out[0]);
    close(out[1]);
    errno = saved;
    return false;
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec. The daemon dies with the gateway.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close_range(3, ~0u, 0);
    execl(daemon_.c_str(), "bird", "-f", "-c", conf_path_.c_str(), "-s", ctl_path_.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  // Read in tick(): the control loop never waits on the daemon.
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  output_fd_ = out[0];
  pid_ = pid;
  ready_ = false;
  warned_not_answering_ = false;
  started_at_ = std::chrono::steady_clock::now();
  next_poll_ = started_at_ + kReadyProbePeriod;
  reload_pending_ = false;  // it reads the current config at start
  std::lock_guard lock(mu_);
  status_.pid = pid;
  log(LogLevel::kInfo, "bgp_daemon_started", "pid=%d daemon=%s config=%s announced=%zu", pid,
      daemon_.c_str(), conf_path_.c_str(), announce_.size());
  return true;
}

void BgpSpeaker::drain_output(bool to_eof) {
  if (output_fd_ < 0) return;
  auto emit = [](std::string_view line) {
    const DaemonLine l = bird_output_line(line);
    if (!l.msg.empty()) log_message(l.level, "bgp_daemon_output", l.msg);
  };
  // Bounded: a daemon that writes without end is read again at the next tick.
  for (int i = 0; i < 64 || to_eof; ++i) {
    char buf[4096];
    const ssize_t n = read(output_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && to_eof) {
      // Exited, yet the write end is open: only a child of its own still holds it.
      break;
    }
    if (n <= 0) {
      if (n == 0 || errno != EAGAIN) {
        if (!output_.empty()) emit(output_);
        output_.clear();
        close(output_fd_);
        output_fd_ = -1;
      }
      return;
    }
    output_.append(buf, size_t(n));
    size_t start = 0;
    for (size_t nl; (nl = output_.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(std::string_view(output_).substr(start, nl - start));
    }
    output_.erase(0, start);
    if (output_.size() >= kMaxOutputLine) {
      emit(output_);
      output_.clear();
    }
  }
  if (to_eof) {
    if (!output_.empty()) emit(output_);
    output_.clear();
    close(output_fd_);
    output_fd_ = -1;
  }
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
  // A daemon still starting is told at its first answer (tick).
  if (pid_ && ready_ && reload()) reload_pending_ = false;
}

bool BgpSpeaker::reload() {
  std::vector<std::string> lines;
  std::string error;
  const bool ok = command("configure", &lines, &error);
  log(ok ? LogLevel::kInfo : LogLevel::kWarn, ok ? "bgp_reconfigured" : "bgp_reconfigure_failed",
      "announced=%zu reply=\"%s\"", announce_.size(),
      ok ? (lines.empty() ? "" : lines.back().c_str()) : error.c_str());
  return ok;
}

bool BgpSpeaker::command(const std::string& cmd, std::vector<std::string>* lines,
                         std::string* error) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  // A daemon that does not answer costs the control loop this long, at most once a second.
  timeval tv{0, 500'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, ctl_path_.c_str(), ctl_path_.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    *error = "connect " + ctl_path_ + ": " + std::strerror(errno);
    close(fd);
    return false;
  }
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
  bool ok = read_line(&line);
  if (!ok) *error = "no greeting on " + ctl_path_;
  ready_ |= ok;
  if (!ok || cmd.empty()) {
    close(fd);
    return ok;
  }
  const std::string wire = cmd + "\n";
  // MSG_NOSIGNAL: a daemon that just died must not take the gateway with it (SIGPIPE).
  ok = send(fd, wire.data(), wire.size(), MSG_NOSIGNAL) == ssize_t(wire.size());
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
  if (!ok || !done) {
    *error = "no complete reply to \"" + cmd + "\"";
    return false;
  }
  if (last_code >= 8000) {
    *error = lines->empty() ? "error " + std::to_string(last_code) : lines->back();
    return false;
  }
  return true;
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
    std::string error;
    if (!command("show protocols all " + s.name, &lines, &error)) {
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
  drain_output(false);
  if (pid_) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      drain_output(true);  // why it died, before the line that says it did
      log(LogLevel::kWarn, "bgp_daemon_exited", "pid=%d %s=%d restart_in_s=%ld", pid_,
          WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
          (long)backoff_.count());
      if (now - started_at_ >= kStableRun) backoff_ = std::chrono::seconds(1);
      restart_at_ = now + backoff_;
      backoff_ = std::min(2 * backoff_, kMaxBackoff);
      pid_ = 0;
      ready_ = false;
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
  if (!pid_ || now < next_poll_) return;
  if (!ready_) {
    std::vector<std::string> none;
    std::string error;
    if (!command("", &none, &error)) {
      next_poll_ = now + kReadyProbePeriod;
      if (!warned_not_answering_ && now - started_at_ >= kNotAnsweringWarn) {
        warned_not_answering_ = true;
        log(LogLevel::kWarn, "bgp_daemon_not_answering", "pid=%d waited_s=%ld error=\"%s\"",
            pid_, (long)kNotAnsweringWarn.count(), error.c_str());
      }
      return;
    }
  }
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
    drain_output(true);
    log(LogLevel::kInfo, "bgp_daemon_stopped", "pid=%d", pid_);
    pid_ = 0;
    ready_ = false;
  }
  drain_output(true);
  if (!dir_.empty()) {
    remove_own_dir(dir_);
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
