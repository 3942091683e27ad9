// WorkerCtx's TX buffers and drops (dataplane/worker/context.h).
#include "dataplane/worker/context.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

namespace meshgate::dp {

void WorkerCtx::tx(uint16_t port_index, rte_mbuf* m) { tx(port_index, m, m->pkt_len); }

void WorkerCtx::flush_tx() {
  for (uint16_t pi = 0; pi < p.ports.size(); ++pi) {
    TxBuffer& b = txq[pi];
    if (b.n == 0) continue;
    uint64_t bytes = b.bytes;
    const uint16_t sent = rte_eth_tx_burst(p.ports[pi].port_id, p.index, b.pkts, b.n);
    for (uint16_t i = sent; i < b.n; ++i) {
      bytes -= b.pkts[i]->pkt_len;
      drop(b.pkts[i], Drop::kTxFull);
    }
    counter_add(counters.tx_packets, sent);
    counter_add(counters.tx_bytes, bytes);
    b.n = 0;
    b.bytes = 0;
  }
}

void WorkerCtx::drop(rte_mbuf* m, Drop reason) {
  counter_add(counters.drops[uint32_t(reason)], 1);
  rte_pktmbuf_free(m);
}

}  // namespace meshgate::dp
