#include "control/snapshot/stat_registry.h"

#include <charconv>

#include "dataplane/worker/counters.h"

namespace meshgate::ctl {

StatRegistry::Service& StatRegistry::service(const std::string& service) {
  auto [it, added] = services_.try_emplace(service);
  if (added) it->second.name_ = &it->first;
  return it->second;
}

uint32_t StatRegistry::id_for(Service& s, const IpAddr& address, uint16_t port) {
  auto it = s.by_backend_.find(Backend{address, port});
  if (it != s.by_backend_.end()) return it->second;
  if (names_.size() >= dp::kMaxBackendStats) return 0;
  const uint32_t id = uint32_t(names_.size());
  names_.push_back(Name{s.name(), endpoint_str(address, port)});
  s.by_backend_.emplace(Backend{address, port}, id);
  s.ids_.push_back(id);
  return id;
}

std::vector<uint32_t> StatRegistry::ids_of(const std::string& service) const {
  auto it = services_.find(service);
  return it == services_.end() ? std::vector<uint32_t>{} : it->second.ids_;
}

uint32_t SlotRegistry::id_for(const std::string& key) {
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (keys_.size() >= capacity_) return 0;
  const uint32_t id = uint32_t(keys_.size());
  keys_.push_back(key);
  ids_.emplace(key, id);
  return id;
}

std::string endpoint_str(const IpAddr& a, uint16_t port) {
  char buf[IpAddr::kMaxStrLen + 8];  // "[" address "]:" 5 digits
  char* p = buf;
  const bool v6 = !a.is_v4();
  if (v6) *p++ = '[';
  p = a.format(p);
  if (v6) *p++ = ']';
  *p++ = ':';
  p = std::to_chars(p, buf + sizeof buf, port).ptr;
  return std::string(buf, p);
}

}  // namespace meshgate::ctl
