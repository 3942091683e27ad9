// Limits of the dataplane's fixed-size arrays. The config validator and the command line check
// against these same constants (control/config/config.h), so a config that passes --check never
// asks for more than the arrays hold.
#pragma once

#include <cstdint>

namespace meshgate::dp {

// Ports per gateway: WorkerParams::rss / flow_steered and the worker's TX buffers are arrays of
// this many. Eight covers a dual-homed node with VF pairs per NUMA node and then some.
inline constexpr uint32_t kMaxPorts = 8;
// Workers per gateway: a packet handed between workers carries the set of workers it visited
// as a 32-bit mask (mbuf hash.usr), and the handoff ring tables are arrays of this many.
inline constexpr uint32_t kMaxWorkers = 32;

}  // namespace meshgate::dp
