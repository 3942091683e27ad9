#include "control/mesh/mesh_runtime.h"

#include "control/common/log.h"
#include "control/mesh/file_provider.h"

namespace meshgate::ctl::mesh {

Result<std::unique_ptr<MeshRuntime>> MeshRuntime::create(const Config& cfg) {
  std::unique_ptr<MeshRuntime> rt;
  if (cfg.mesh.source == MeshSource::kNone) return rt;
  rt.reset(new MeshRuntime(cfg));
  if (cfg.mesh.source == MeshSource::kFile) {
    rt->provider_ = std::make_unique<FileProvider>(cfg.mesh.path);
  } else {
    auto xds = std::make_unique<XdsProvider>(xds_options_from_config(cfg));
    rt->xds_ = xds.get();
    rt->provider_ = std::move(xds);
  }
  return rt;
}

MeshRuntime::MeshRuntime(const Config& cfg) : cfg_(cfg) {
  mapping_.locality = cfg.gateway.locality;
  mapping_.network = cfg.mesh.network;
  mapping_.cluster_id = cfg.mesh.cluster_id;
  mapping_.mode = cfg.mesh.mode;
  mapping_.table_size = cfg.mesh.table_size;
}

MeshRuntime::~MeshRuntime() { stop(); }

Result<bool> MeshRuntime::start() { return provider_->start(); }

void MeshRuntime::stop() {
  if (provider_) provider_->stop();
}

std::optional<MeshRuntime::Pending> MeshRuntime::poll() {
  auto upd = provider_->take();
  if (!upd) return std::nullopt;
  last_ = std::move(upd);
  return map(*last_);
}

std::optional<MeshRuntime::Pending> MeshRuntime::remap() {
  if (!last_) return std::nullopt;
  return map(*last_);
}

MeshRuntime::Pending MeshRuntime::map(const MeshUpdate& upd) {
  Pending p;
  p.services = services_from_config(cfg_);
  MappingResult m = map_mesh(*upd.model, mapping_, p.services);
  for (const auto& note : m.notes) log(LogLevel::kWarn, "mesh_spec_dropped", "reason=\"%s\"", note.c_str());
  if (m.stats.hbone_endpoints > 0 && !uses_hbone(cfg_)) {
    // Without an [hbone] certificate source the gateway cannot originate HBONE: such endpoints
    // are forwarded with [mesh] mode.
    log(LogLevel::kWarn, "mesh_hbone_unavailable", "endpoints=%zu forwarded_as=%s reason=%s",
        m.stats.hbone_endpoints, dp::mode_name(cfg_.mesh.mode),
        "no [hbone] cert_chain or ca_address");
  }
  for (auto& s : m.specs) p.services.push_back(std::move(s));
  p.policies.reserve(upd.model->policies.size());
  for (const auto& [key, pol] : upd.model->policies) p.policies.push_back(pol);
  p.stats = m.stats;
  p.generation = upd.generation;
  p.synced = upd.synced;
  return p;
}

void MeshRuntime::published(const Pending& p) {
  generation_.store(p.generation, std::memory_order_relaxed);
  if (p.synced) synced_.store(true, std::memory_order_release);
}

const XdsCounters* MeshRuntime::xds_counters() const { return xds_ ? &xds_->counters() : nullptr; }

}  // namespace meshgate::ctl::mesh
