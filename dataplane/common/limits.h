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
// Counter slots per worker of [[listener]]s, their routes and deny patterns (the proxy's
// ListenerCounters, RouteCounters and deny arrays). Slot 0 is the shared overflow slot: more
// listeners, routes or patterns than this still work and count there.
inline constexpr uint32_t kMaxListenerStats = 256;
inline constexpr uint32_t kMaxRouteStats = 4096;
inline constexpr uint32_t kMaxDenyStats = 4096;
// The most a listener reads to find a name (its peek_bytes): the proxy's contiguous copy.
inline constexpr uint32_t kMaxPeekBytes = 65536;

}  // namespace meshgate::dp
