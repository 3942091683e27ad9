// The label values of Istio's standard TCP metrics (docs/MESH.md, "Istio metrics") as small
// ids: a workload's label set (what ztunnel takes from a Workload for source_* or
// destination_*) and a service's (destination_service*). The snapshot builder interns them and
// the snapshot carries the ids per backend and per service (Snapshot::backend_istio,
// service_istio); workers key their counters by the ids (dataplane/common/istio_metrics.h) and
// GET /metrics turns them back into names here.
//
// Ids are given on first use and never reused, so a counter row keeps its names across snapshot
// swaps and a workload that leaves the mesh keeps its series until restart. That is what bounds
// the label cardinality together with the workers' row cap: at most kMaxIstioWorkloads workload
// and kMaxIstioServices service label sets; past them new ones get id 0 (every label
// "unknown") and `full` counts the lookups that found no room.
//
// Control thread only (the builder and the /metrics sources run there).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace meshgate::ctl {

inline constexpr uint32_t kMaxIstioWorkloads = 16384;
inline constexpr uint32_t kMaxIstioServices = 16384;

// Empty fields are rendered "unknown", as ztunnel does for values it does not have.
struct IstioWorkloadLabels {
  std::string workload;            // Workload.workload_name
  std::string canonical_service;   // Workload.canonical_name (also the *_app label)
  std::string canonical_revision;  // Workload.canonical_revision (also the *_version label)
  std::string ns;                  // Workload.namespace
  std::string principal;           // its SPIFFE id (destination_principal)
  std::string cluster;             // Workload.cluster_id
  friend bool operator==(const IstioWorkloadLabels&, const IstioWorkloadLabels&) = default;
};

struct IstioServiceLabels {
  std::string hostname;  // destination_service: the FQDN (a static service: its name)
  std::string ns;        // destination_service_namespace
  std::string name;      // destination_service_name
  friend bool operator==(const IstioServiceLabels&, const IstioServiceLabels&) = default;
};

class IstioLabelRegistry {
 public:
  // The id of `l` (given when new); 0 when it is all empty or the registry is full (counted).
  uint32_t workload_id(const IstioWorkloadLabels& l);
  uint32_t service_id(const IstioServiceLabels& l);
  // By id; id 0 (and any id not given) is the all-unknown set.
  const IstioWorkloadLabels& workload(uint32_t id) const;
  const IstioServiceLabels& service(uint32_t id) const;
  uint32_t workloads() const { return uint32_t(workloads_.size() - 1); }
  uint32_t services() const { return uint32_t(services_.size() - 1); }
  uint64_t full() const { return full_; }

 private:
  std::unordered_map<std::string, uint32_t> workload_ids_;  // joined fields -> id
  std::unordered_map<std::string, uint32_t> service_ids_;
  std::vector<IstioWorkloadLabels> workloads_{IstioWorkloadLabels{}};
  std::vector<IstioServiceLabels> services_{IstioServiceLabels{}};
  uint64_t full_ = 0;
};

}  // namespace meshgate::ctl
