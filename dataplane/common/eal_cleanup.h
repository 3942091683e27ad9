// Ending the EAL without leaving anything behind. rte_eal_cleanup() keeps the runtime directory
// (/var/run/dpdk/<file prefix>), even with --no-shconf, so every process with its own prefix
// (tests, tools, each gateway run) would leave one more empty directory.
#pragma once

namespace meshgate::dp {

// rte_eal_cleanup(), then removes the EAL's runtime directory if it is empty (a directory
// another process still uses, one sharing the prefix, keeps its files and stays).
void eal_cleanup();
// eal_cleanup() at exit (atexit), for programs with many ways out of main.
void eal_cleanup_at_exit();

}  // namespace meshgate::dp
