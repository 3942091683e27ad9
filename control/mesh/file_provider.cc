#include "control/mesh/file_provider.h"

#include <cerrno>
#include <cstring>

#include "control/common/file_read.h"
#include "control/common/log.h"
#include "control/mesh/mesh_file.h"

namespace meshgate::ctl::mesh {

Result<bool> FileProvider::start() {
  if (!watch_.open(path_)) {
    return Error{"cannot watch the directory of " + path_ + ": " + std::strerror(errno)};
  }
  std::string error;
  if (!load(true, &error)) return Error{error};
  thread_ = std::thread([this] { run(); });
  return true;
}

void FileProvider::stop() {
  stopping_ = true;
  watch_.wake();
  if (thread_.joinable()) thread_.join();
}

bool FileProvider::load(bool first, std::string* error) {
  std::string text;
  std::string why;
  if (!read_file(path_, kMaxMeshFileBytes, &text, &why)) {
    *error = "cannot read mesh file " + why;
    return false;
  }
  if (!first && text == last_text_) return true;  // an event that changed nothing we read
  auto model = parse_mesh_file(text, path_);
  if (!model) {
    *error = model.error().str();
    return false;
  }
  last_text_ = std::move(text);
  counters_.reloads++;
  log(LogLevel::kInfo, "mesh_file_loaded", "path=\"%s\" services=%zu workloads=%zu policies=%zu",
      path_.c_str(), model->services.size(), model->workloads.size(), model->policies.size());
  deliver(std::make_shared<const MeshModel>(std::move(model.value())), true);
  return true;
}

void FileProvider::run() {
  while (!stopping_) {
    if (!watch_.wait(-1)) continue;
    if (stopping_) break;
    std::string error;
    if (!load(false, &error)) {
      counters_.reload_errors++;
      // One line per error, each with its file:line:column.
      size_t start = 0;
      while (start < error.size()) {
        size_t end = error.find('\n', start);
        if (end == std::string::npos) end = error.size();
        std::string line = error.substr(start, end - start);
        for (char& c : line) c = c == '"' ? '\'' : c;  // keep the key=value line parseable
        log(LogLevel::kError, "mesh_file_invalid", "error=\"%s\" action=keep_last", line.c_str());
        start = end + 1;
      }
    }
  }
}

}  // namespace meshgate::ctl::mesh
