// Compiling deny signatures ([[listener.deny]] and [[service]] deny patterns) into a DenySet for
// streaming inspection (dataplane/names/deny.h). Control thread only.
//
// Pattern syntax: Hyperscan's (PCRE without back-references, lookaround or other constructs
// that need backtracking). Flags: HS_FLAG_SINGLEMATCH and HS_FLAG_DOTALL; no implicit anchoring
// (`^` anchors at the connection's first byte); case-sensitive unless the pattern says `(?i)`.
// Rejected: what Hyperscan rejects (its message and the pattern's index); a pattern that can
// match the empty string; a pattern that can only match at the end of the stream (`foo$`: the
// inspection never sees the end); a NUL byte (write \x00); a set whose per-connection stream
// state is over dp::names::kMaxDenyStreamBytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control/common/result.h"
#include "dataplane/names/deny.h"

namespace meshgate::ctl {

struct DenyPatternError {
  // Index of the failing pattern; kNoPattern when the error is the whole set's (its stream
  // state, or a Hyperscan resource limit that names no expression).
  static constexpr uint32_t kNoPattern = UINT32_MAX;
  uint32_t index;
  std::string message;  // Hyperscan's or ours
};

// The set of `patterns`, pattern i reported as index i. No patterns: nullptr (nothing to
// inspect).
Result<std::shared_ptr<const dp::names::DenySet>, DenyPatternError> compile_deny(
    const std::vector<std::string>& patterns);

}  // namespace meshgate::ctl
