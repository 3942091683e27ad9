#include "control/names/name_compile.h"

#include <cstdlib>
#include <string>

namespace meshgate::ctl {
namespace {

using dp::names::kMaxHostnameBytes;
using dp::names::MatchEngine;
using dp::names::NameMatcher;
using dp::names::PatternKind;

// RFC 1035 2.3.4.
constexpr size_t kMaxLabelBytes = 63;

// Caseless, and one report per pattern and scan: the rank of a pattern does not depend on how
// often or where it matches. Empty matches are allowed so that "~.*" is a valid catch-all; a
// scanned name is never empty in practice, and an empty one matches such a regex in every
// engine alike.
constexpr unsigned kHsFlags = HS_FLAG_CASELESS | HS_FLAG_SINGLEMATCH | HS_FLAG_ALLOWEMPTY;
// Literals report every match with its start (SOM and single-match do not combine).
constexpr unsigned kHsLiteralFlags = HS_FLAG_CASELESS | HS_FLAG_SOM_LEFTMOST;

std::string hs_code(hs_error_t rc) {
  switch (rc) {
    case HS_NOMEM:
      return "out of memory";
    case HS_INVALID:
      return "invalid parameter";
    default:
      return "error " + std::to_string(rc);
  }
}

// A regex body (without '~') alone through Hyperscan's parser: a body that does not parse on
// its own (an unbalanced ')' would close the anchoring group) is rejected with offsets of its
// own, not of the anchored expression.
std::string check_regex(const std::string& body) {
  hs_expr_info_t* info = nullptr;
  hs_compile_error_t* err = nullptr;
  if (hs_expression_info(body.c_str(), kHsFlags, &info, &err) != HS_SUCCESS) {
    std::string why = err != nullptr ? err->message : "rejected by Hyperscan";
    hs_free_compile_error(err);
    return why;
  }
  std::free(info);  // allocated with malloc(): no allocator is set
  return "";
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = char(c | 0x20);
  }
  return out;
}

// Exact and wildcard names hold only letters, digits, '-', '_' and '.': '.' is the one
// Hyperscan metacharacter among them.
std::string hs_literal(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '.') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string check_name_pattern(std::string_view pattern) {
  if (pattern.empty()) return "empty hostname pattern";
  if (pattern[0] == '~') {
    if (pattern.size() == 1) return "empty regex after '~'";
    return check_regex(std::string(pattern.substr(1)));
  }
  if (pattern.size() > kMaxHostnameBytes) {
    return "longer than " + std::to_string(kMaxHostnameBytes) + " bytes";
  }
  std::string_view name = pattern;
  if (name[0] == '*') {
    if (name.size() == 1 || name[1] != '.') {
      return "'*' must be the whole first label, followed by a suffix (\"*.example.com\")";
    }
    name.remove_prefix(2);
  }
  size_t label = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (i == label) {
        return i == name.size() && i > 0 ? "trailing '.' (write names without it)" : "empty label";
      }
      if (i - label > kMaxLabelBytes) {
        return "label longer than " + std::to_string(kMaxLabelBytes) + " bytes";
      }
      label = i + 1;
      continue;
    }
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (c == '*') return "'*' only as the whole first label";
    if (!ok) {
      return std::string("character '") + c + "' not allowed (letters, digits, '-', '_', '.')";
    }
  }
  return "";
}

Result<std::shared_ptr<const NameMatcher>, PatternError> compile_names(
    const std::vector<std::string>& patterns, MatchEngine engine) {
  if (patterns.size() >= PatternError::kNoPattern) {
    return PatternError{PatternError::kNoPattern, "too many hostname patterns"};
  }
  NameMatcher::Parts parts;
  parts.kinds.reserve(patterns.size());
  parts.ranks.reserve(patterns.size());
  std::vector<std::string> exprs;
  std::vector<unsigned> flags;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < patterns.size(); ++i) {
    const std::string& p = patterns[i];
    if (std::string why = check_name_pattern(p); !why.empty()) return PatternError{i, why};
    PatternKind kind = PatternKind::kExact;
    size_t suffix_bytes = 0;
    std::string expr;
    unsigned expr_flags = kHsFlags;
    if (p[0] == '~') {
      kind = PatternKind::kRegex;
      // Anchored at both ends: a regex names the whole name. \A and \z, not ^ and $: '$' would
      // also match before a final newline. \E ends a \Q quote the regex may leave open (and is
      // ignored otherwise), which would quote the closing group.
      expr = "\\A(?:" + p.substr(1) + "\\E)\\z";
    } else if (p[0] == '*') {
      kind = PatternKind::kWildcard;
      const std::string suffix = lower(std::string_view(p).substr(2));
      suffix_bytes = suffix.size();
      if (engine == MatchEngine::kHyperscanAll) {
        expr = "\\." + hs_literal(suffix);
        expr_flags = kHsLiteralFlags;
      } else {
        parts.wildcard.emplace_back(suffix, i);
      }
    } else if (engine == MatchEngine::kHyperscanAll) {
      expr = hs_literal(lower(p));
      expr_flags = kHsLiteralFlags;
    } else {
      parts.exact.emplace_back(lower(p), i);
    }
    parts.kinds.push_back(kind);
    parts.ranks.push_back(NameMatcher::rank_of(kind, suffix_bytes, i));
    if (!expr.empty()) {
      exprs.push_back(std::move(expr));
      flags.push_back(expr_flags);
      ids.push_back(i);
    }
  }
  parts.literals_in_database = engine == MatchEngine::kHyperscanAll;
  if (!exprs.empty()) {
    // SOM (HS_FLAG_SOM_LEFTMOST) where needed. The ranking never needs it: a match that is
    // accepted spans the whole name, and what ranks it (kind, suffix length, index) is known per
    // pattern at compile time (NameMatcher::Parts::ranks, looked up by id in the callback).
    // Regexes are anchored at both ends (\A, \z), so they need no SOM either. Exact names and
    // wildcard suffixes, in kHyperscanAll only, are unanchored literals instead: anchored, each
    // becomes an anchored automaton of its own and the compile of 100,000 names takes minutes
    // and gigabytes (docs/NAMES.md); as literals they share Hyperscan's literal matcher, and the
    // start of their match is what tells whether they span the name.
    std::vector<const char*> cexprs;
    cexprs.reserve(exprs.size());
    for (const auto& e : exprs) cexprs.push_back(e.c_str());
    hs_compile_error_t* err = nullptr;
    const hs_error_t rc =
        hs_compile_multi(cexprs.data(), flags.data(), ids.data(), unsigned(exprs.size()),
                         HS_MODE_BLOCK, nullptr, &parts.database, &err);
    if (rc != HS_SUCCESS) {
      PatternError e{PatternError::kNoPattern, "Hyperscan: " + hs_code(rc)};
      if (err != nullptr) {
        if (err->expression >= 0 && size_t(err->expression) < ids.size()) {
          e.index = ids[size_t(err->expression)];
        }
        e.message = err->message;
        hs_free_compile_error(err);
      }
      return e;
    }
  }
  return std::shared_ptr<const NameMatcher>(std::make_shared<NameMatcher>(std::move(parts)));
}

Result<std::shared_ptr<const dp::names::ScratchSet>> make_scratch_set(
    const std::vector<const hs_database_t*>& dbs, uint32_t workers) {
  hs_scratch_t* proto = nullptr;
  for (const hs_database_t* db : dbs) {
    if (db == nullptr) continue;
    if (const hs_error_t rc = hs_alloc_scratch(db, &proto); rc != HS_SUCCESS) {
      hs_free_scratch(proto);
      return Error{"hs_alloc_scratch: " + hs_code(rc)};
    }
  }
  std::vector<hs_scratch_t*> scratches;
  if (proto != nullptr && workers == 0) hs_free_scratch(proto);
  if (proto != nullptr && workers > 0) {
    scratches.reserve(workers);
    scratches.push_back(proto);
    for (uint32_t w = 1; w < workers; ++w) {
      hs_scratch_t* s = nullptr;
      if (const hs_error_t rc = hs_clone_scratch(proto, &s); rc != HS_SUCCESS) {
        for (hs_scratch_t* t : scratches) hs_free_scratch(t);
        return Error{"hs_clone_scratch: " + hs_code(rc)};
      }
      scratches.push_back(s);
    }
  }
  return std::shared_ptr<const dp::names::ScratchSet>(
      std::make_shared<dp::names::ScratchSet>(std::move(scratches)));
}

}  // namespace meshgate::ctl
