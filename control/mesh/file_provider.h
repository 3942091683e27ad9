// [mesh] source = "file": the mesh file, loaded at start and reloaded whenever it changes
// (inotify on its directory). A file that fails to parse is logged with file:line:column and
// ignored: the last good model (and the snapshot built from it) stays.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "control/mesh/file_watch.h"
#include "control/mesh/mesh_provider.h"

namespace meshgate::ctl::mesh {

struct FileProviderCounters {
  std::atomic<uint64_t> reloads{0};        // good loads, the first included
  std::atomic<uint64_t> reload_errors{0};  // loads that failed (file kept)
};

class FileProvider : public MeshProvider {
 public:
  explicit FileProvider(std::string path) : path_(std::move(path)) {}
  ~FileProvider() override { stop(); }
  // Loads the file once (an invalid file is an error: nothing starts), then watches it.
  Result<bool> start() override;
  void stop() override;
  const FileProviderCounters& counters() const { return counters_; }

 private:
  void run();
  bool load(bool first, std::string* error);

  std::string path_;
  std::string last_text_;
  FileWatch watch_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  FileProviderCounters counters_;
};

}  // namespace meshgate::ctl::mesh
