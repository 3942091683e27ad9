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

std::vector<uint32_t> StatRegistry::ids_of(const std::string& service) const {
  std::vector<uint32_t> out;
  for (auto it = ids_.lower_bound({service, ""}); it != ids_.end() && it->first.first == service;
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

}  // namespace meshgate::ctl
