#include "control/mesh/file_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <utility>

#include "control/common/file_read.h"

namespace meshgate::ctl::mesh {

FileWatch::~FileWatch() {
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool FileWatch::open(const std::string& path) {
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

bool FileWatch::wait(int timeout_ms, int settle_ms) {
  pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) <= 0) return false;
  if (fds[1].revents & POLLIN) {
    uint64_t v;
    [[maybe_unused]] ssize_t n = read(wake_fd_, &v, sizeof v);
    return false;
  }
  bool changed = false;
  alignas(inotify_event) char buf[4096];
  for (;;) {
    while (read(inotify_fd_, buf, sizeof buf) > 0) changed = true;
    // Merge the rest of an editor's write / rename sequence into this change.
    pollfd more{inotify_fd_, POLLIN, 0};
    if (poll(&more, 1, settle_ms) <= 0) break;
  }
  return changed;
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
