// Stable ids for per-backend counters: (service name, "ip:port") -> slot in every worker's
// BackendCounters array. Ids survive snapshot swaps so counters keep accumulating. Slot 0 is the
// shared overflow slot. Control thread only.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace meshgate::ctl {

class StatRegistry {
 public:
  struct Name {
    std::string service;
    std::string backend;  // "ip:port", IPv6 as "[v6]:port"
  };

  uint32_t id_for(const std::string& service, const std::string& backend);
  // Names by id (index 0 = overflow).
  const std::vector<Name>& names() const { return names_; }
  // Every id ever given to a backend of `service`, in the order given.
  std::vector<uint32_t> ids_of(const std::string& service) const;

 private:
  // Hash maps: a mesh of 10,000 services and 100,000 endpoints is looked up on every rebuild
  // whose services changed (docs/PERFORMANCE.md, control plane).
  struct ServiceIds {
    std::unordered_map<std::string, uint32_t> by_backend;
    std::vector<uint32_t> ids;
  };
  std::unordered_map<std::string, ServiceIds> services_;
  std::vector<Name> names_{Name{"", "other"}};
};

}  // namespace meshgate::ctl
