#include "control/admin/workloads.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace meshgate::ctl {

nlohmann::json workloads_json(const mesh::MeshModel* model) {
  using nlohmann::json;
  std::vector<const mesh::Workload*> all;
  if (model != nullptr) {
    for (const auto& [uid, w] : model->workloads) all.push_back(&w);
  }
  std::sort(all.begin(), all.end(), [](const mesh::Workload* a, const mesh::Workload* b) {
    return std::tie(a->ns, a->name, a->uid) < std::tie(b->ns, b->name, b->uid);
  });
  json list = json::array();
  for (const mesh::Workload* w : all) {
    json addrs = json::array();
    for (const IpAddr& a : w->addresses) addrs.push_back(a.str());
    json services = json::array();
    for (const auto& [key, ports] : w->services) services.push_back(key);
    list.push_back({{"uid", w->uid},
                    {"name", w->name},
                    {"namespace", w->ns},
                    {"addresses", addrs},
                    {"node", w->node},
                    {"cluster_id", w->cluster_id},
                    {"network", w->network},
                    {"protocol", w->tunnel == mesh::Tunnel::kHbone ? "HBONE" : "TCP"},
                    {"identity", w->identity()},
                    {"waypoint", nullptr},
                    {"healthy", w->healthy},
                    {"services", services}});
  }
  return {{"workloads", list}};
}

}  // namespace meshgate::ctl
