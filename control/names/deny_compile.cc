#include "control/names/deny_compile.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace meshgate::ctl {
namespace {

using dp::names::DenySet;
using dp::names::kMaxDenyStreamBytes;

// One report per pattern and stream (inspection stops at the first anyway, and SINGLEMATCH
// lets Hyperscan drop a pattern's state once it fired); '.' also matches '\n' because a
// signature may span the lines of a request.
constexpr unsigned kDenyFlags = HS_FLAG_SINGLEMATCH | HS_FLAG_DOTALL;

struct DbFree {
  void operator()(hs_database_t* db) const { hs_free_database(db); }
};
using DbPtr = std::unique_ptr<hs_database_t, DbFree>;

struct Compiled {
  DbPtr db;
  DenyPatternError error;
};

// `patterns[first, first + count)` as one streaming database; an error's index is the
// pattern's in `patterns`.
Compiled compile(const std::vector<std::string>& patterns, size_t first, size_t count) {
  std::vector<const char*> exprs(count);
  std::vector<unsigned> flags(count, kDenyFlags);
  std::vector<unsigned> ids(count);
  for (size_t i = 0; i < count; ++i) {
    exprs[i] = patterns[first + i].c_str();
    ids[i] = unsigned(first + i);
  }
  hs_database_t* db = nullptr;
  hs_compile_error_t* err = nullptr;
  Compiled out{nullptr, {DenyPatternError::kNoPattern, ""}};
  if (hs_compile_multi(exprs.data(), flags.data(), ids.data(), unsigned(count), HS_MODE_STREAM,
                       nullptr, &db, &err) != HS_SUCCESS) {
    if (err != nullptr) {
      if (err->expression >= 0) out.error.index = uint32_t(first + size_t(err->expression));
      out.error.message = err->message;
    } else {
      out.error.message = "rejected by Hyperscan";
    }
    hs_free_compile_error(err);
    return out;
  }
  out.db.reset(db);
  return out;
}

size_t stream_bytes(const hs_database_t* db) {
  size_t bytes = 0;
  return hs_stream_size(db, &bytes) == HS_SUCCESS ? bytes : SIZE_MAX;
}

// Inspection closes a stream without asking for end-of-stream matches (deny.h), so a pattern
// that can match nowhere else would never fire.
bool matches_only_at_end(const std::string& pattern) {
  hs_expr_info_t* info = nullptr;
  hs_compile_error_t* err = nullptr;
  if (hs_expression_info(pattern.c_str(), kDenyFlags, &info, &err) != HS_SUCCESS) {
    hs_free_compile_error(err);
    return false;  // the set compiled: not reached
  }
  const bool only = info->matches_only_at_eod != 0;
  std::free(info);  // allocated with malloc(): no misc allocator is set
  return only;
}

std::string over_limit(size_t bytes) {
  return std::to_string(bytes) + " bytes of stream state per connection, over the " +
         std::to_string(kMaxDenyStreamBytes) +
         " bytes limit (long bounded repeats such as {1000} cost state: shorten them";
}

}  // namespace

Result<std::shared_ptr<const DenySet>, DenyPatternError> compile_deny(
    const std::vector<std::string>& patterns) {
  if (patterns.empty()) return std::shared_ptr<const DenySet>();
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (patterns[i].find('\0') != std::string::npos) {
      return DenyPatternError{uint32_t(i), "contains a NUL byte (write \\x00 to match one)"};
    }
  }
  Compiled set = compile(patterns, 0, patterns.size());
  if (!set.db) return std::move(set.error);
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (matches_only_at_end(patterns[i])) {
      return DenyPatternError{uint32_t(i),
                              "can only match at the end of the stream, which inspection "
                              "never reaches (drop the trailing $ or \\z)"};
    }
  }
  const size_t bytes = stream_bytes(set.db.get());
  if (bytes > kMaxDenyStreamBytes) {
    // Name the pattern that is over the limit on its own, if one is.
    for (size_t i = 0; i < patterns.size(); ++i) {
      Compiled one = compile(patterns, i, 1);
      const size_t own = one.db ? stream_bytes(one.db.get()) : 0;
      if (own > kMaxDenyStreamBytes) {
        return DenyPatternError{uint32_t(i), "needs " + over_limit(own) + ")"};
      }
    }
    return DenyPatternError{DenyPatternError::kNoPattern,
                            "the " + std::to_string(patterns.size()) +
                                " deny patterns together need " + over_limit(bytes) +
                                ", or use fewer patterns)"};
  }
  return std::shared_ptr<const DenySet>(
      std::make_shared<DenySet>(set.db.release(), patterns, bytes));
}

}  // namespace meshgate::ctl
