// Ending the EAL without leaving anything behind. rte_eal_cleanup() keeps the runtime directory
// (/var/run/dpdk/<file prefix>), even with --no-shconf, so every process with its own prefix
// (tests, tools, each gateway run) would leave one more empty directory.
// Control thread (or a tool's main thread), after the workers stopped: never on a worker lcore.
// Its own small library (meshgate_eal_cleanup) so that test peers and tools that link only the
// dataplane need not link the whole control plane for it.
#pragma once

namespace meshgate::ctl {

// rte_eal_cleanup(), then removes the EAL's runtime directory if it is empty (a directory
// another process still uses, one sharing the prefix, keeps its files and stays).
void eal_cleanup();
// eal_cleanup() at exit (atexit), for programs with many ways out of main.
void eal_cleanup_at_exit();

}  // namespace meshgate::ctl
