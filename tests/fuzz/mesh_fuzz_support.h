// Shared by the mesh fuzz targets (mesh_file, mesh_proto); each is its own binary, so this
// header defines their libFuzzer initializer.
#pragma once

#include <google/protobuf/stubs/logging.h>

#include "control/mesh/mesh_proto.h"

// Protobuf logs every invalid UTF-8 string it rejects; the fuzzer makes millions.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

namespace meshgate::ctl::mesh {

// A model value survives its workload API message: encoded as tools/meshserver serves it and
// decoded as the xDS client does, it comes back equal.
template <typename T, typename Msg>
bool round_trips(const T& v, Msg (*encode)(const T&), Result<T> (*decode)(const Msg&)) {
  auto back = decode(encode(v));
  return back && *back == v;
}

}  // namespace meshgate::ctl::mesh
