#include "control/mesh/mesh_provider.h"

namespace meshgate::ctl::mesh {

std::optional<MeshUpdate> MeshProvider::take() {
  std::lock_guard lock(mu_);
  std::optional<MeshUpdate> out = std::move(pending_);
  pending_.reset();
  return out;
}

void MeshProvider::deliver(std::shared_ptr<const MeshModel> model, bool synced) {
  std::lock_guard lock(mu_);
  pending_ = MeshUpdate{std::move(model), synced, ++generation_};
  if (synced) synced_.store(true, std::memory_order_release);
}

}  // namespace meshgate::ctl::mesh
