// What a binary was built from: meshgate's version and git commit, and the versions of DPDK,
// OpenSSL and Hyperscan. `meshgate --version`, `meshgate-ctl --version` and the
// meshgate_build_info gauge print them. Any thread.
#pragma once

#include <string>

namespace meshgate {

struct BuildInfo {
  std::string version;    // the project's version (CMakeLists.txt project())
  std::string commit;     // `git describe --always --dirty` at build time, "unknown" without git
  std::string dpdk;       // "22.11.11"
  std::string openssl;    // "3.0.17"
  std::string hyperscan;  // "5.4.0"
};

// The versions of the headers the binary was compiled against. Calls no library, so a program
// that does not link DPDK or Hyperscan (meshgate-ctl) can print them.
BuildInfo compiled_build_info();

// The versions of the libraries loaded at run time (rte_version(), OpenSSL_version(),
// hs_version()): what actually runs, which a distribution's library update may change without
// a rebuild. Needs DPDK, OpenSSL and Hyperscan linked (control/common/build_info_linked.cc, in
// meshgate_control).
BuildInfo linked_build_info();

// The `--version` text of `program`: one "key: value" line per field after the first line, no
// newline after the last.
// `libraries_note` follows the library versions' keys (e.g. " (compiled against)"), or "".
std::string version_text(const char* program, const BuildInfo& info,
                         const char* libraries_note = "");

}  // namespace meshgate
