// Reading the files a config names (the config itself, the mesh file, PEM files, tokens): only
// regular files, only up to a size limit, and never blocking in open() or read(). A FIFO, a
// device (/dev/zero) or a directory put where a file belongs is an error that says so, not a
// wedged thread or a read until memory runs out. Any thread.
#pragma once

#include <cstdint>
#include <string>

#include "control/common/result.h"

namespace meshgate::ctl {

// Limits, each well above what a real file of its kind holds.
// The gateway config: a few hundred bytes per service, so 16 MiB is tens of thousands of them.
inline constexpr uint64_t kMaxConfigFileBytes = 16ull << 20;
// A mesh file: ~300 bytes per workload; 64 MiB holds a 100,000-endpoint mesh with room.
inline constexpr uint64_t kMaxMeshFileBytes = 64ull << 20;
// A PEM certificate chain, key, CA or trust bundle (the Mozilla bundle is ~220 KiB), or a
// service account token (a few KiB).
inline constexpr uint64_t kMaxPemFileBytes = 1ull << 20;

// Why a read failed, for callers that word their own message (e.g. at a config key).
enum class FileReadError : uint8_t {
  kNone,
  kOpen,        // open() failed (errno in `message`)
  kDirectory,   // a directory
  kNotRegular,  // a FIFO, socket, character or block device
  kTooLarge,    // larger than max_bytes
  kRead,        // read() failed or the file changed size while being read
};

struct FileReadFailure {
  FileReadError kind = FileReadError::kNone;
  // What follows the file's name in a sentence: "is a directory", "is not a regular file
  // (a FIFO)", "is larger than 1048576 bytes", "cannot be opened: No such file or directory".
  std::string message;
  // "<path>: <message>".
  std::string str(const std::string& path) const { return path + ": " + message; }
};

// The whole of `path`. Opened with O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY (a FIFO without
// a writer does not block the open), then fstat: anything but a regular file is refused before
// a byte is read, as is a file larger than `max_bytes`. Symlinks are followed (Kubernetes
// mounts ConfigMaps and secrets through them); what they point at is what is checked.
Result<std::string, FileReadFailure> read_regular_file(const std::string& path,
                                                       uint64_t max_bytes);

}  // namespace meshgate::ctl
