#include "control/snapshot/stat_registry.h"

#include "dataplane/worker/counters.h"

namespace meshgate::ctl {

uint32_t StatRegistry::id_for(const std::string& service, const std::string& backend) {
  ServiceIds& s = services_[service];
  auto it = s.by_backend.find(backend);
  if (it != s.by_backend.end()) return it->second;
  if (names_.size() >= dp::kMaxBackendStats) return 0;
  const uint32_t id = uint32_t(names_.size());
  names_.push_back(Name{service, backend});
  s.by_backend.emplace(backend, id);
  s.ids.push_back(id);
  return id;
}

std::vector<uint32_t> StatRegistry::ids_of(const std::string& service) const {
  auto it = services_.find(service);
  return it == services_.end() ? std::vector<uint32_t>{} : it->second.ids;
}

}  // namespace meshgate::ctl
