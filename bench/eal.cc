#include "bench/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "control/runtime/eal_cleanup.h"

namespace meshgate::bench {

void init_eal_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string prefix = "--file-prefix=mgbench-" + std::to_string(getpid());
    // 512 MB holds the 1M-flow table (about 120 MB) next to the smaller ones.
    std::vector<std::string> args = {"meshgate_microbench", "--no-huge", "-m", "512",
                                     "--no-pci", "--no-shconf", "--no-telemetry", "-l", "0",
                                     prefix, "--log-level=error"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (rte_eal_init(int(argv.size()), argv.data()) < 0) {
      std::fprintf(stderr, "meshgate_microbench: EAL init failed: %s\n", rte_strerror(rte_errno));
      std::exit(1);
    }
    meshgate::ctl::eal_cleanup_at_exit();
  });
}

}  // namespace meshgate::bench
