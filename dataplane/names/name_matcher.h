// The hostname matcher of the SNI/Host listeners and of the HBONE terminator's FQDN
// `:authority`: which of a listener's hostname patterns a name selects.
//
// Built on the control thread (control/names/name_compile.h), immutable afterwards, shared by
// snapshots as std::shared_ptr<const NameMatcher>, read by any worker with its own Hyperscan
// scratch (dataplane/names/scratch_set.h).
//
// Engines, chosen per pattern shape from bench/names_bench.cc (figures in docs/NAMES.md):
//   - exact names live in a hash map (one lookup), and wildcard suffixes in a second one, walked
//     label by label from the left so that the longest suffix is tried first;
//   - regexes, and only they, are compiled into one Hyperscan block-mode database, scanned only
//     when no exact name or wildcard matched (regexes rank last).
// Against every pattern in one Hyperscan database (MatchEngine::kHyperscanAll) the maps cost
// 2-3x less per exact or wildcard name at 10 hostnames, 2.5-9x less at 1,000 and 35-1000x less
// at 100,000 (where one scan of the database costs 4 to 37 us), compile in 0.2 s instead of 9 s
// at 100,000 and take less memory. Hyperscan alone wins only regex hits (2x at 10 hostnames,
// 1.2x at 100,000: the map lookup and the suffix walk come first), and is the only engine for
// regexes. kHyperscanAll is kept for the benchmark and the equivalence test
// (tests/unit/names/name_matcher_test.cc), which hold both engines to the same answers.
#pragma once

#include <hs/hs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace meshgate::dp::names {

enum class PatternKind : uint8_t { kExact, kWildcard, kRegex };

enum class MatchEngine : uint8_t {
  kMapsAndRegex,  // exact and wildcard names in hash maps, regexes in Hyperscan (the default)
  kHyperscanAll,  // every pattern in one Hyperscan database
};

// Longest exact name or wildcard pattern (RFC 1035 2.3.4 without the trailing dot).
inline constexpr size_t kMaxHostnameBytes = 253;

// Counts the bytes a container asks of the allocator, for NameMatcher::table_bytes().
template <typename T>
struct CountingAllocator {
  using value_type = T;
  size_t* bytes;
  explicit CountingAllocator(size_t* b) : bytes(b) {}
  template <typename U>
  CountingAllocator(const CountingAllocator<U>& o) : bytes(o.bytes) {}  // NOLINT: rebind
  T* allocate(size_t n) {
    *bytes += n * sizeof(T);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) {
    *bytes -= n * sizeof(T);
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  bool operator==(const CountingAllocator<U>& o) const {
    return bytes == o.bytes;
  }
};

class NameMatcher {
 public:
  // What the control thread's compile hands over. Names are lowercased and validated; the
  // matcher takes ownership of `database`.
  struct Parts {
    std::vector<PatternKind> kinds;  // per pattern index
    // Per pattern index: the precedence key of a Hyperscan match of that pattern (smaller is
    // better); see rank_of().
    std::vector<uint64_t> ranks;
    std::vector<std::pair<std::string, uint32_t>> exact;     // name, pattern index
    std::vector<std::pair<std::string, uint32_t>> wildcard;  // suffix without "*.", index
    hs_database_t* database = nullptr;
    // Exact names and wildcard suffixes are unanchored literals in `database`, reported with
    // their start (HS_FLAG_SOM_LEFTMOST) for match() to check they span the name.
    bool literals_in_database = false;
  };

  // Precedence key: kind (exact, wildcard, regex), then a longer wildcard suffix, then the
  // lower index. The low 32 bits are the index.
  static constexpr uint64_t rank_of(PatternKind kind, size_t suffix_bytes, uint32_t index) {
    return (uint64_t(kind) << 41) | (uint64_t(511 - suffix_bytes) << 32) | index;
  }

  // Control thread. Builds the maps (the first index of a duplicate name wins).
  explicit NameMatcher(Parts parts);
  ~NameMatcher();  // hs_free_database
  NameMatcher(const NameMatcher&) = delete;
  NameMatcher& operator=(const NameMatcher&) = delete;

  // The index (into the pattern list it was compiled from) of the best pattern matching `name`
  // (lowercase ASCII, no trailing dot, as the extractor gives it; upper case is folded too), or
  // -1. Precedence as Gateway API: exact over wildcard, a longer wildcard suffix over a shorter,
  // regex last, then the lowest index (config order). `scratch`: from a ScratchSet built for
  // this matcher's database (may be nullptr when database() is); one thread at a time. Any
  // thread; no allocation.
  int32_t match(std::string_view name, hs_scratch_t* scratch) const;

  size_t patterns() const { return kinds_.size(); }
  PatternKind kind(uint32_t i) const { return kinds_[i]; }
  const hs_database_t* database() const { return database_; }  // nullptr: no regex
  size_t database_bytes() const;                               // hs_database_size, 0 without one
  // Bytes the exact and wildcard maps asked of the allocator (buckets, nodes, the names),
  // without the allocator's own per-block overhead.
  size_t table_bytes() const { return table_bytes_; }

 private:
  struct Crc32cHash {
    size_t operator()(std::string_view s) const noexcept;
  };
  using Map = std::unordered_map<std::string_view, uint32_t, Crc32cHash, std::equal_to<>,
                                 CountingAllocator<std::pair<const std::string_view, uint32_t>>>;

  size_t table_bytes_ = 0;  // before the maps: their allocators point here
  std::vector<PatternKind> kinds_;
  std::vector<uint64_t> ranks_;
  std::unique_ptr<char[]> names_;  // every map key, back to back
  Map exact_;
  Map wildcard_;
  hs_database_t* database_ = nullptr;
  bool literals_in_database_ = false;
};

}  // namespace meshgate::dp::names
