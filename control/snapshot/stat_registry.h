// Stable ids for per-backend counters: (service name, "ip:port") -> slot in every worker's
// BackendCounters array. Ids survive snapshot swaps so counters keep accumulating. Slot 0 is the
// shared overflow slot. Control thread only.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/common/hash.h"
#include "dataplane/common/net_types.h"

namespace meshgate::ctl {

class StatRegistry {
 public:
  struct Name {
    std::string service;
    std::string backend;  // "ip:port", IPv6 as "[v6]:port"
  };

 private:
  // A backend by address and port: the same identity as its "ip:port" name, without formatting
  // the name for every lookup (docs/PERFORMANCE.md, control plane).
  struct Backend {
    IpAddr address;
    uint16_t port = 0;
    friend bool operator==(const Backend&, const Backend&) = default;
  };
  struct BackendHash {
    size_t operator()(const Backend& b) const { return crc32c(b.address.b, sizeof b.address.b, b.port); }
  };

 public:
  // The ids of one service's backends. Looked up once per service, not once per backend.
  class Service {
   public:
    const std::string& name() const { return *name_; }

   private:
    friend class StatRegistry;
    const std::string* name_ = nullptr;  // the key in StatRegistry::services_ (stable)
    std::unordered_map<Backend, uint32_t, BackendHash> by_backend_;
    std::vector<uint32_t> ids_;
  };

  // `service`'s ids, created empty on first use; valid as long as the registry.
  Service& service(const std::string& service);
  // The id of `s`'s backend address:port, given on first use; 0 (overflow) when all are taken.
  uint32_t id_for(Service& s, const IpAddr& address, uint16_t port);
  uint32_t id_for(const std::string& s, const IpAddr& address, uint16_t port) {
    return id_for(service(s), address, port);
  }
  // Names by id (index 0 = overflow).
  const std::vector<Name>& names() const { return names_; }
  // Every id ever given to a backend of `service`, in the order given.
  std::vector<uint32_t> ids_of(const std::string& service) const;

 private:
  // Hash maps: a mesh of 10,000 services and 100,000 endpoints is looked up on every rebuild
  // whose services changed (docs/PERFORMANCE.md, control plane).
  std::unordered_map<std::string, Service> services_;
  std::vector<Name> names_{Name{"", "other"}};
};

// Stable counter slots by key (a listener's name, a route, a deny pattern): given on first use,
// never reused; slot 0 is the overflow slot once `capacity` slots are given. Control thread.
class SlotRegistry {
 public:
  explicit SlotRegistry(uint32_t capacity) : capacity_(capacity) {}
  uint32_t id_for(const std::string& key);
  const std::vector<std::string>& keys() const { return keys_; }  // by id ([0]: "")

 private:
  uint32_t capacity_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> keys_{""};
};

// "ip:port" with IPv6 in brackets, as used in stats and logs.
std::string endpoint_str(const IpAddr& a, uint16_t port);

}  // namespace meshgate::ctl
