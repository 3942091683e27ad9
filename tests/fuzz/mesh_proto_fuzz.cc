// libFuzzer target for the xDS resource decoder (control/mesh/mesh_proto.cc): the bytes of an
// istio.workload.Address and of an istio.security.Authorization, as the xDS client unpacks
// them from a delta response, → mesh model values. Whatever decodes must encode back to a
// message that decodes to the same value (what tools/meshserver would serve for it).
#include <cstdint>

#include "control/mesh/mesh_proto.h"
#include "tests/fuzz/mesh_fuzz_support.h"

using namespace meshgate::ctl::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  istio::workload::Address a;
  if (a.ParseFromArray(data, int(size))) {
    if (a.has_workload()) {
      if (auto w = workload_from_proto(a.workload())) {
        if (!round_trips(*w, workload_to_proto, workload_from_proto)) __builtin_trap();
      } else if (w.error().message.empty()) {
        __builtin_trap();
      }
    } else if (a.has_service()) {
      if (auto s = service_from_proto(a.service())) {
        if (!round_trips(*s, service_to_proto, service_from_proto)) __builtin_trap();
      } else if (s.error().message.empty()) {
        __builtin_trap();
      }
    }
  }
  istio::security::Authorization z;
  if (z.ParseFromArray(data, int(size))) {
    if (auto p = policy_from_proto(z)) {
      if (!round_trips(*p, policy_to_proto, policy_from_proto)) __builtin_trap();
    } else if (p.error().message.empty()) {
      __builtin_trap();
    }
  }
  return 0;
}
