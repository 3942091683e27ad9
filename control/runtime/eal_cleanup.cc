#include "control/runtime/eal_cleanup.h"

#include <rte_eal.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace meshgate::ctl {

void eal_cleanup() {
  const std::filesystem::path dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::error_code ec;
  // The telemetry library unlinks its socket only in its own exit handler, after this: the
  // socket is ours (a prefix has one primary process), and nothing answers on it any more.
  std::filesystem::remove(dir / "dpdk_telemetry.v2", ec);
  std::filesystem::remove(dir, ec);  // only when empty
}

void eal_cleanup_at_exit() { std::atexit([] { eal_cleanup(); }); }

}  // namespace meshgate::ctl
