// Copies of a worker's flows for the control thread (GET /flows, meshgate-ctl flows). Flows are
// owned by their worker and never read by another thread: the control thread posts a request
// and the worker fills it between bursts, a bounded number of entries per poll iteration.
#pragma once

#include <atomic>
#include <cstdint>

#include "dataplane/common/net_types.h"
#include "dataplane/conntrack/conntrack.h"

namespace meshgate::dp {

struct FlowRecord {
  IpAddr client;
  IpAddr vip;
  IpAddr backend;
  IpAddr local;               // fullnat source address (zero otherwise)
  uint16_t client_port = 0;   // host order
  uint16_t vip_port = 0;
  uint16_t backend_port = 0;
  uint16_t local_port = 0;
  uint8_t proto = 0;
  TcpState state = TcpState::kNone;
  Mode mode = Mode::kDnat;
  uint32_t stat_id = 0;
  int64_t expires_in_ms = 0;  // at the time of the copy, on the worker's clock
  uint32_t age_ms = 0;
  uint16_t worker = 0;
};

// Allocated and owned by the control thread; `records` holds `max` entries.
struct FlowDumpRequest {
  FlowRecord* records = nullptr;
  uint32_t max = 0;
  uint32_t count = 0;  // written by the worker before `done`
  uint32_t cursor = 0; // the worker's position in its flow pool
  std::atomic<bool> done{false};
};

// Entries a worker copies per poll iteration: bounds the time taken from packet work.
inline constexpr uint32_t kFlowDumpPerIteration = 4096;

}  // namespace meshgate::dp
