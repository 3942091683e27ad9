#include "dataplane/names/name_matcher.h"

#include <cstring>

#include "dataplane/common/compiler.h"
#include "dataplane/common/hash.h"

namespace meshgate::dp::names {
namespace {

struct Best {
  const uint64_t* ranks;
  uint64_t rank;
  uint64_t name_bytes;
  // First '.' that ends an empty label (name_bytes if none): a wildcard's labels must end
  // before it.
  uint64_t empty_label;
  bool dns_name;  // the name fits kMaxHostnameBytes: exact and wildcard patterns may match
};

constexpr uint64_t kWildcardRank = uint64_t(PatternKind::kWildcard) << 41;
constexpr uint64_t kRegexRank = uint64_t(PatternKind::kRegex) << 41;

// Every match this accepts spans the whole name: regexes are anchored at both ends, exact
// names must start at 0 and wildcard suffixes (".example.com") after one or more non-empty
// labels, both ending at the end (literals in MatchEngine::kHyperscanAll: see
// control/names/name_compile.cc). What ranks a whole-name match is known per pattern, so the
// best is the smallest precomputed rank, in whatever order Hyperscan reports them.
int on_match(unsigned id, unsigned long long from, unsigned long long to, unsigned, void* ctx) {
  auto* b = static_cast<Best*>(ctx);
  const uint64_t r = b->ranks[id];
  if (r >= b->rank) return 0;
  if (r < kRegexRank) {
    if (!b->dns_name || to != b->name_bytes) return 0;
    if (r < kWildcardRank ? from != 0 : from == 0 || from >= b->empty_label) return 0;
  }
  b->rank = r;
  return 0;
}

}  // namespace

size_t NameMatcher::Crc32cHash::operator()(std::string_view s) const noexcept {
  return crc32c(s.data(), s.size(), 0x9e3779b9);
}

NameMatcher::NameMatcher(Parts parts)
    : kinds_(std::move(parts.kinds)),
      ranks_(std::move(parts.ranks)),
      exact_(0, Crc32cHash{}, std::equal_to<>{}, Map::allocator_type(&table_bytes_)),
      wildcard_(0, Crc32cHash{}, std::equal_to<>{}, Map::allocator_type(&table_bytes_)),
      database_(parts.database),
      literals_in_database_(parts.literals_in_database) {
  size_t bytes = 0;
  for (const auto& [n, i] : parts.exact) bytes += n.size();
  for (const auto& [n, i] : parts.wildcard) bytes += n.size();
  names_ = std::make_unique<char[]>(bytes);
  table_bytes_ += bytes;
  char* p = names_.get();
  auto fill = [&p](Map& m, const std::vector<std::pair<std::string, uint32_t>>& from) {
    if (!from.empty()) m.reserve(from.size());
    for (const auto& [n, i] : from) {
      std::memcpy(p, n.data(), n.size());
      m.try_emplace(std::string_view(p, n.size()), i);  // a duplicate keeps the first index
      p += n.size();
    }
  };
  fill(exact_, parts.exact);
  fill(wildcard_, parts.wildcard);
}

NameMatcher::~NameMatcher() { hs_free_database(database_); }

size_t NameMatcher::database_bytes() const {
  size_t bytes = 0;
  if (database_ != nullptr && hs_database_size(database_, &bytes) != HS_SUCCESS) return 0;
  return bytes;
}

int32_t NameMatcher::match(std::string_view name, hs_scratch_t* scratch) const {
  const bool dns_name = name.size() <= kMaxHostnameBytes;
  if (dns_name && (!exact_.empty() || !wildcard_.empty())) {
    char buf[kMaxHostnameBytes];
    for (size_t i = 0; i < name.size(); ++i) {
      const char c = name[i];
      buf[i] = c >= 'A' && c <= 'Z' ? char(c | 0x20) : c;
    }
    const std::string_view n(buf, name.size());
    if (const auto it = exact_.find(n); it != exact_.end()) return int32_t(it->second);
    // "*." stands for one or more non-empty labels: try the suffix after each dot, leftmost
    // (longest) first, and stop at an empty label.
    if (!wildcard_.empty()) {
      size_t label = 0;
      for (size_t i = 0; i < n.size(); ++i) {
        if (n[i] != '.') continue;
        if (i == label) break;
        if (const auto it = wildcard_.find(n.substr(i + 1)); it != wildcard_.end()) {
          return int32_t(it->second);
        }
        label = i + 1;
      }
    }
  }
  if (database_ == nullptr) return -1;
  Best best{ranks_.data(), UINT64_MAX, name.size(), name.size(), dns_name};
  if (literals_in_database_) {
    for (size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '.' && (i == 0 || name[i - 1] == '.')) {
        best.empty_label = i;
        break;
      }
    }
  }
  const hs_error_t rc =
      hs_scan(database_, name.data(), unsigned(name.size()), 0, scratch, on_match, &best);
  MG_ASSERT(rc == HS_SUCCESS);
  if (rc != HS_SUCCESS) return -1;
  return best.rank == UINT64_MAX ? -1 : int32_t(uint32_t(best.rank));
}

}  // namespace meshgate::dp::names
