#include "control/snapshot/istio_labels.h"

#include <initializer_list>

namespace meshgate::ctl {
namespace {

// The fields joined with NUL, which no label value holds: one key per distinct set.
std::string join(std::initializer_list<const std::string*> fields) {
  std::string k;
  for (const std::string* f : fields) {
    k += *f;
    k += '\0';
  }
  return k;
}

template <typename Labels>
uint32_t intern(std::unordered_map<std::string, uint32_t>& ids, std::vector<Labels>& by_id,
                uint32_t cap, std::string key, const Labels& l, uint64_t& full) {
  const auto it = ids.find(key);
  if (it != ids.end()) return it->second;
  if (by_id.size() > cap) {
    ++full;
    return 0;
  }
  const uint32_t id = uint32_t(by_id.size());
  by_id.push_back(l);
  ids.emplace(std::move(key), id);
  return id;
}

}  // namespace

uint32_t IstioLabelRegistry::workload_id(const IstioWorkloadLabels& l) {
  if (l == IstioWorkloadLabels{}) return 0;  // a static backend: no key to build
  return intern(workload_ids_, workloads_, kMaxIstioWorkloads,
                join({&l.workload, &l.canonical_service, &l.canonical_revision, &l.ns,
                      &l.principal, &l.cluster}),
                l, full_);
}

uint32_t IstioLabelRegistry::service_id(const IstioServiceLabels& l) {
  if (l == IstioServiceLabels{}) return 0;
  return intern(service_ids_, services_, kMaxIstioServices, join({&l.hostname, &l.ns, &l.name}),
                l, full_);
}

const IstioWorkloadLabels& IstioLabelRegistry::workload(uint32_t id) const {
  return id < workloads_.size() ? workloads_[id] : workloads_[0];
}

const IstioServiceLabels& IstioLabelRegistry::service(uint32_t id) const {
  return id < services_.size() ? services_[id] : services_[0];
}

}  // namespace meshgate::ctl
