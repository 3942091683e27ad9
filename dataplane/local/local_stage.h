// Packets to the gateway's own addresses (port addresses, VIPs, fullnat addresses) that no
// flow, service or application took: echo requests are answered in place; what is addressed
// to a port address goes to that port's kernel twin when it has a host interface
// (WorkerParams::host_out); the rest is dropped with its reason. Worker thread only.
#pragma once

#include <cstdint>

#include "dataplane/worker/context.h"

namespace meshgate::dp {

// Packets whose next step is kNextLocal.
void stage_local(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n);

// Packet i is for the kernel twin of the port that owns its destination (any packet to a port
// address but an echo request): sets next = kNextHost and out = that port, returns true.
bool to_host_twin(const WorkerCtx& c, Burst& b, uint16_t i);

// Gives packet i to port `port`'s kernel twin (next = kNextHost, out = port) when the port has
// one; false, and nothing set, when it has none.
inline bool give_to_twin(const WorkerCtx& c, Burst& b, uint16_t i, uint16_t port) {
  if (!c.p.host_twin[port]) return false;
  b.next[i] = kNextHost;
  b.out[i] = port;
  return true;
}

}  // namespace meshgate::dp
