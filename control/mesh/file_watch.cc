#include "control/mesh/file_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <utility>

#include "control/common/file_read.h"

namespace meshgate::ctl::mesh {

namespace {

// The directory entries whose events are changes of `path`: its own name and, for a symlink
// with a relative target, the target's first component (a ConfigMap's
// config.toml -> ..data/config.toml, swapped by renaming a new "..data" link over the old).
// Taken afresh at every wait: a rename over the name may turn a file into a link or back.
// Empty for "dir/.": the whole directory (every name counts).
std::vector<std::string> watched_names(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.filename() == ".") return {};
  std::vector<std::string> names{p.filename().string()};
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::read_symlink(p, ec);
  if (!ec && target.is_relative() && !target.empty()) {
    const std::string first = target.begin()->string();
    if (first != "." && first != "..") names.push_back(first);
  }
  return names;
}

}  // namespace

FileWatch::~FileWatch() {
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool FileWatch::open(const std::string& path) {
  path_ = path;
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (inotify_fd_ < 0 || wake_fd_ < 0) return false;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  // Directory events cover in-place writes, renames over the file and symlink swaps alike.
  // Only completed changes: IN_CLOSE_WRITE, not IN_MODIFY / IN_CREATE, so a file being written
  // (truncated, half written) is never read as the new mesh.
  const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB;
  return inotify_add_watch(inotify_fd_, dir.c_str(), mask) >= 0;
}

bool FileWatch::read_events(const std::vector<std::string>& names) {
  bool relevant = false;
  alignas(inotify_event) char buf[4096];
  for (;;) {
    const ssize_t n = read(inotify_fd_, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += ssize_t(sizeof(inotify_event) + ev->len);
      // An overflowed queue lost events; an ignored watch lost the directory: both may hide a
      // change of the file.
      if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED)) {
        relevant = true;
        continue;
      }
      if (ev->len == 0) continue;
      if (names.empty()) {
        relevant = true;
        continue;
      }
      const std::string name(ev->name);  // NUL-padded to len
      relevant |= std::find(names.begin(), names.end(), name) != names.end();
    }
  }
  return relevant;
}

bool FileWatch::wait(int timeout_ms, int settle_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::vector<std::string> names = watched_names(path_);
  for (;;) {
    int left = -1;
    if (timeout_ms >= 0) {
      left = int(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                 .count()));
    }
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, left) <= 0) return false;
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = read(wake_fd_, &v, sizeof v);
      return false;
    }
    if (read_events(names)) break;
    // Only other names: keep waiting, within the caller's timeout.
    if (timeout_ms >= 0 && Clock::now() >= deadline) return false;
  }
  // Merge the rest of an editor's write / rename sequence into this change, in a window counted
  // from the first event: later events never extend it, so steady writes cannot hold it back.
  const auto settled = Clock::now() + std::chrono::milliseconds(settle_ms);
  for (;;) {
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(settled - Clock::now()).count();
    if (left <= 0) break;
    pollfd more{inotify_fd_, POLLIN, 0};
    if (poll(&more, 1, int(left)) <= 0) break;
    read_events(names);
  }
  return true;
}

void FileWatch::wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
}

bool read_file(const std::string& path, uint64_t max_bytes, std::string* out,
               std::string* error) {
  auto r = read_regular_file(path, max_bytes);
  if (!r) {
    if (error) *error = r.error().str(path);
    return false;
  }
  *out = std::move(r.value());
  return true;
}

bool read_token_file(const std::string& path, std::string* out, std::string* error) {
  std::string s;
  if (!read_file(path, kMaxPemFileBytes, &s, error)) return false;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  *out = s.substr(i);
  return true;
}

}  // namespace meshgate::ctl::mesh
