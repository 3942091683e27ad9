#include "control/snapshot/stat_registry.h"

#include "dataplane/worker/counters.h"

namespace meshgate::ctl {

uint32_t StatRegistry::id_for(const std::string& service, const std::string& backend) {
  auto key = std::make_pair(service, backend);
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  if (names_.size() >= dp::kMaxBackendStats) return 0;
  const uint32_t id = uint32_t(names_.size());
  names_.push_back(Name{service, backend});
  ids_.emplace(std::move(key), id);
  return id;
}

}  // namespace meshgate::ctl
