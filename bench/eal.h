// DPDK memory for the benchmarks that need it (flow tables, snapshots, the RCU publisher).
// The EAL is started on first use only, so benchmarks that run without DPDK (parser, Maglev,
// checksums) start no EAL when they are filtered alone. Main thread only.
#pragma once

namespace meshgate::bench {

// Starts the EAL once per process: no hugepages, 512 MB, no PCI, lcore 0, a per-pid file
// prefix (like tests/support/dp_harness.cc). Aborts with a message when the EAL refuses.
void init_eal_once();

}  // namespace meshgate::bench
