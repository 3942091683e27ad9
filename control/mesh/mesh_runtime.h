// The mesh side of the control loop: owns the configured provider, turns each new model into
// ServiceSpecs (after the static services) and tracks readiness. Control thread, except the
// accessors marked "any thread" (for the admin API).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <vector>


#include "control/config/config.h"
#include "control/mesh/mesh_mapping.h"
#include "control/mesh/mesh_provider.h"
#include "control/mesh/xds_provider.h"
#include "control/snapshot/model.h"

namespace meshgate::ctl::mesh {

class MeshRuntime {
 public:
  // The provider for [mesh] source (file | xds); nullptr result for source = "none".
  static Result<std::unique_ptr<MeshRuntime>> create(const Config& cfg);
  ~MeshRuntime();

  // Starts the provider. For a file, the first model is loaded here (an invalid file fails).
  Result<bool> start();
  void stop();

  // Control thread, every tick: when the provider delivered a new model, the full service list
  // for the next snapshot (static services first, then the mesh's), else nullopt. Call
  // published() once that snapshot is live.
  struct Pending {
    std::vector<ServiceSpec> services;
    std::vector<Policy> policies;  // the model's authorization policies, by key
    MappingStats stats;
    uint64_t generation = 0;
    bool synced = false;
  };
  std::optional<Pending> poll();
  // The last model the provider delivered, mapped again after the static services of the config
  // as it is now (a config reload changed them); nullopt before the first model.
  std::optional<Pending> remap();
  void published(const Pending& p);
  // Control thread: the last model the provider delivered (GET /workloads); null before one.
  std::shared_ptr<const MeshModel> model() const { return last_ ? last_->model : nullptr; }

  // Any thread: true once a snapshot built from the provider's first full view is published.
  // /ready waits for this (README.md "With a service mesh").
  bool synced() const { return synced_.load(std::memory_order_acquire); }
  // Any thread: the xDS counters (meshgate_xds_* metrics); nullptr for the file provider.
  const XdsCounters* xds_counters() const;

 private:
  explicit MeshRuntime(const Config& cfg);

  Pending map(const MeshUpdate& upd);

  // The runtime's config: a reload replaces its contents in place (GatewayRun::reload), so the
  // static services read here are always the running ones.
  const Config& cfg_;
  std::optional<MeshUpdate> last_;
  MappingOptions mapping_;
  std::unique_ptr<MeshProvider> provider_;
  XdsProvider* xds_ = nullptr;  // provider_ when it is the xDS one
  std::atomic<bool> synced_{false};
  std::atomic<uint64_t> generation_{0};
};

}  // namespace meshgate::ctl::mesh
