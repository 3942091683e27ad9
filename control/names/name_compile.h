// Compiling a listener's hostname patterns into a NameMatcher, and the workers' Hyperscan
// scratches for the snapshot's databases. Control thread only.
//
// Pattern syntax: "shop.example.com" (exact), "*.example.com" (one or more labels before the
// suffix, as Gateway API), "~REGEX" (a regex that must match the whole name; Hyperscan syntax).
// Case-insensitive. Exact and wildcard names are validated (letters, digits, '-', '_', '.', no
// empty label, labels of at most 63 bytes, at most 253 bytes, '*' only as the whole first
// label) and lowercased. Design, precedence and limits: docs/NAMES.md.
#pragma once

#include <hs/hs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "control/common/result.h"
#include "dataplane/names/name_matcher.h"
#include "dataplane/names/scratch_set.h"

namespace meshgate::ctl {

struct PatternError {
  // Index of the failing pattern; kNoPattern when Hyperscan's error names none (a resource
  // limit of the whole set).
  static constexpr uint32_t kNoPattern = UINT32_MAX;
  uint32_t index;
  std::string message;  // Hyperscan's or ours
};

// "" when `pattern` is fine, else why not. A regex is checked by Hyperscan's parser on its own
// (hs_expression_info), so its message's offsets are the pattern's; a regex can still fail the
// compile of the whole set (compile_names).
std::string check_name_pattern(std::string_view pattern);

// The matcher of `patterns`, indices as given. The default engine is the per-shape choice
// documented in dataplane/names/name_matcher.h; kHyperscanAll is for the benchmark and tests.
Result<std::shared_ptr<const dp::names::NameMatcher>, PatternError> compile_names(
    const std::vector<std::string>& patterns,
    dp::names::MatchEngine engine = dp::names::MatchEngine::kMapsAndRegex);

// Scratches for `workers` workers, valid for every database in `dbs` (nulls skipped): one
// prototype grown with hs_alloc_scratch for each, then hs_clone_scratch for the other workers
// (the prototype is worker 0's). No database: a set whose scratches are all nullptr.
Result<std::shared_ptr<const dp::names::ScratchSet>> make_scratch_set(
    const std::vector<const hs_database_t*>& dbs, uint32_t workers);

}  // namespace meshgate::ctl
