// Waits for changes to one file with inotify on its directory, so that editors that write a new
// file and rename it over the old one (vim, sed -i, Kubernetes ConfigMap symlink swaps) are seen
// as well as in-place writes. Only events for the file's own name count, and, when the file is a
// symlink, for the first hop of its target in the same directory (a ConfigMap's "..data"): a
// busy sibling (a log file, an editor's swap file) is no change. Any thread; one waiter at a
// time; wake() from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/common/file_read.h"

namespace meshgate::ctl::mesh {

class FileWatch {
 public:
  FileWatch() = default;
  ~FileWatch();
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  // Watches the directory holding `path`; "dir/." watches every name in dir (several files of
  // one directory). False (with errno set) when inotify cannot be set up.
  bool open(const std::string& path);
  // Blocks up to `timeout_ms` (-1: forever) for an event for the file or a wake(). Returns true
  // when the file may have changed (the caller re-reads and compares), false on timeout or
  // wake. Events arriving within `settle_ms` of the first are merged (an editor's write + rename
  // is one change); the window counts from the first event, so a file written more often than
  // that is still reported every `settle_ms`.
  bool wait(int timeout_ms, int settle_ms = 20);
  void wake();

 private:
  // Reads every queued event; whether one was for `names` (or the queue overflowed).
  bool read_events(const std::vector<std::string>& names);

  std::string path_;
  int inotify_fd_ = -1;
  int wake_fd_ = -1;
};

// The whole file: a regular file of at most `max_bytes` (read_regular_file in
// control/common/file_read.h, which never blocks on a FIFO). False when it cannot be read, with
// `*error` (when given) saying why: "<path>: is not a regular file (a FIFO)".
bool read_file(const std::string& path, uint64_t max_bytes, std::string* out,
               std::string* error = nullptr);
// A bearer token file (a Kubernetes service account token, at most kMaxPemFileBytes): the whole
// file without the whitespace around it (editors and `echo` add a newline). False when it
// cannot be read, with `*error` as read_file's.
bool read_token_file(const std::string& path, std::string* out, std::string* error = nullptr);

}  // namespace meshgate::ctl::mesh
