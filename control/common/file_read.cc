#include "control/common/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace meshgate::ctl {
namespace {

const char* file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a file";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::string, FileReadFailure> read_regular_file(const std::string& path,
                                                       uint64_t max_bytes) {
  const Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    const int err = errno;
    // open(O_RDONLY) of a directory succeeds on Linux; EISDIR comes only with write access,
    // but say it the same way whichever way it is reported.
    if (err == EISDIR) return FileReadFailure{FileReadError::kDirectory, "is a directory"};
    return FileReadFailure{FileReadError::kOpen,
                           std::string("cannot be opened: ") + std::strerror(err)};
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return FileReadFailure{FileReadError::kOpen, std::string("cannot be opened: ") +
                                                     std::strerror(errno)};
  }
  if (S_ISDIR(st.st_mode)) return FileReadFailure{FileReadError::kDirectory, "is a directory"};
  if (!S_ISREG(st.st_mode)) {
    return FileReadFailure{FileReadError::kNotRegular,
                           std::string("is not a regular file (") + file_kind(st.st_mode) + ")"};
  }
  const auto too_large = [&] {
    return FileReadFailure{FileReadError::kTooLarge,
                           "is larger than " + std::to_string(max_bytes) + " bytes"};
  };
  if (uint64_t(st.st_size) > max_bytes) return too_large();
  // Regular files never return EAGAIN, so O_NONBLOCK changes nothing from here on. The size is
  // read again from the data: the file may grow while we read it, and the limit still holds.
  std::string out;
  out.resize(size_t(st.st_size));
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (out.size() >= max_bytes + 1) break;
      out.resize(std::min<uint64_t>(max_bytes + 1, std::max<uint64_t>(out.size() * 2, 4096)));
    }
    const ssize_t n = read(fd.get(), out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileReadFailure{FileReadError::kRead, std::string("cannot be read: ") +
                                                       std::strerror(errno)};
    }
    if (n == 0) break;
    have += size_t(n);
  }
  if (have > max_bytes) return too_large();
  out.resize(have);
  return out;
}

}  // namespace meshgate::ctl
