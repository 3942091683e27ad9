// A source of mesh state (file, xDS) behind one interface. A provider runs its own thread (and,
// for xDS, gRPC's threads): it builds an immutable MeshModel and hands it over through a
// mutex-protected slot; the control loop polls the slot each tick (take()), builds a snapshot and
// publishes it. Workers never see providers. Thread roles are named on each member.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "control/common/result.h"
#include "control/mesh/mesh_model.h"

namespace meshgate::ctl::mesh {

struct MeshUpdate {
  std::shared_ptr<const MeshModel> model;
  bool synced = false;      // the provider had its first full view when it made this model
  uint64_t generation = 0;  // increases with every model the provider delivers
};

class MeshProvider {
 public:
  virtual ~MeshProvider() = default;
  // Control thread: starts the provider's thread. An error means nothing was started.
  virtual Result<bool> start() = 0;
  // Control thread: stops and joins the provider's threads; idempotent.
  virtual void stop() = 0;

  // Any thread: the provider has delivered its first full view (file: first good load; xDS: the
  // first response of each wildcard type, applied and answered).
  bool synced() const { return synced_.load(std::memory_order_acquire); }
  // Control thread: the newest model delivered since the last call, if any. Only the newest is
  // kept: a slow control loop skips intermediate models, never applies an older one.
  std::optional<MeshUpdate> take();

 protected:
  // Provider thread: publishes a new immutable model.
  void deliver(std::shared_ptr<const MeshModel> model, bool synced);

 private:
  std::mutex mu_;
  std::optional<MeshUpdate> pending_;
  uint64_t generation_ = 0;
  std::atomic<bool> synced_{false};
};

}  // namespace meshgate::ctl::mesh
