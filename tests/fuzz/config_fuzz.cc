// libFuzzer target for the config loader: TOML text → validated Config, through parse_config,
// the function load_config (and so `meshgate --check`) runs on a file's text. It touches no
// file: the files a config names are checked later, by check_referenced_files. A config that
// parses must validate again without errors; one that does not must say why, with a position.
#include <cstdint>
#include <string>
#include <string_view>

#include "control/config/config.h"

using namespace meshgate::ctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Real configs are a few KiB; the loader's own size limit is not what this target explores.
  if (size > 64 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = parse_config(text, "fuzz.toml");
  if (!cfg) {
    if (cfg.error().errors.empty()) __builtin_trap();
    const std::string msg = cfg.error().str();
    if (msg.rfind("fuzz.toml:", 0) != 0) __builtin_trap();
    return 0;
  }
  if (!validate_config(*cfg).errors.empty()) __builtin_trap();
  return 0;
}
