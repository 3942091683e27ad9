// The hostname matcher (dataplane/names/name_matcher.h) against 10, 1,000 and 100,000
// hostnames, mostly exact, a tenth wildcards, one regex per thousand (at least one): the cost
// of one match per query shape (exact hit, wildcard hit, regex hit, miss, and a mix), for both
// engines in the same run: every pattern in one Hyperscan database, and the maps (a hash map of
// exact names, a suffix walk over a map of wildcard suffixes) with Hyperscan for the regexes
// only. Compile time, database and map bytes are counters. No EAL. Figures: docs/NAMES.md.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "control/names/name_compile.h"

namespace {

using meshgate::ctl::compile_names;
using meshgate::ctl::make_scratch_set;
using meshgate::dp::names::MatchEngine;
using meshgate::dp::names::NameMatcher;
using meshgate::dp::names::ScratchSet;

enum Shape : int { kExactHit, kWildcardHit, kRegexHit, kMiss, kMixed, kShapes };
const char* const kShapeNames[kShapes] = {"exact_hit", "wildcard_hit", "regex_hit", "miss",
                                          "mixed"};
constexpr size_t kQueries = 1024;  // per shape, cycled

struct Workload {
  std::vector<std::string> patterns;
  std::vector<std::string> queries[kShapes];
};

std::string exact_name(size_t i, uint32_t salt) {
  return "svc" + std::to_string(i) + "-" + std::to_string(salt % 100000) + ".ns" +
         std::to_string(i % 97) + ".example" + std::to_string(i % 17) + ".com";
}
std::string wildcard_suffix(size_t j) {
  return (j % 4 == 0 ? "eu.team" : "team") + std::to_string(j) + ".example" +
         std::to_string(j % 17) + ".net";
}

Workload make_workload(size_t n) {
  std::mt19937 rng{uint32_t(n)};
  const size_t regexes = std::max<size_t>(1, n / 1000);
  const size_t wildcards = std::max<size_t>(1, n / 10);
  const size_t exacts = n - regexes - wildcards;
  Workload w;
  std::vector<uint32_t> salts;
  for (size_t i = 0; i < exacts; ++i) {
    salts.push_back(rng());
    w.patterns.push_back(exact_name(i, salts.back()));
  }
  for (size_t j = 0; j < wildcards; ++j) w.patterns.push_back("*." + wildcard_suffix(j));
  for (size_t k = 0; k < regexes; ++k) {
    w.patterns.push_back(k % 2 == 0
                             ? "~api-[0-9]+\\.region" + std::to_string(k) + "\\.example\\.io"
                             : "~(www|m)\\.shop" + std::to_string(k) + "[0-9]*\\.example\\.org");
  }
  // Config order is not grouped by kind in practice.
  std::shuffle(w.patterns.begin(), w.patterns.end(), rng);

  auto pick = [&rng](size_t n) { return size_t(rng() % n); };
  for (size_t q = 0; q < kQueries; ++q) {
    const size_t i = pick(exacts);
    w.queries[kExactHit].push_back(exact_name(i, salts[i]));
    w.queries[kWildcardHit].push_back((q % 3 == 0 ? "a.b.host" : "host") + std::to_string(q) + "." +
                                      wildcard_suffix(pick(wildcards)));
    const size_t k = pick(regexes);
    w.queries[kRegexHit].push_back(
        k % 2 == 0 ? "api-" + std::to_string(q) + ".region" + std::to_string(k) + ".example.io"
                   : "www.shop" + std::to_string(k) + std::to_string(q) + ".example.org");
    w.queries[kMiss].push_back(q % 2 == 0 ? exact_name(i, salts[i] + 1)
                                          : "www" + std::to_string(q) + ".unknown.example.org");
  }
  // Mixed: 60% exact hits, 20% wildcard hits, 5% regex hits, 15% misses.
  for (size_t q = 0; q < kQueries; ++q) {
    const size_t r = pick(100);
    const Shape s = r < 60 ? kExactHit : r < 80 ? kWildcardHit : r < 85 ? kRegexHit : kMiss;
    w.queries[kMixed].push_back(w.queries[s][q]);
  }
  return w;
}

const Workload& workload(size_t n) {
  static std::map<size_t, Workload> cache;
  auto it = cache.find(n);
  if (it == cache.end()) it = cache.emplace(n, make_workload(n)).first;
  return it->second;
}

struct Built {
  std::shared_ptr<const NameMatcher> matcher;
  std::shared_ptr<const ScratchSet> scratch;
  double compile_ms = 0;
};

Built compile(size_t n, MatchEngine engine) {
  const auto t0 = std::chrono::steady_clock::now();
  auto m = compile_names(workload(n).patterns, engine);
  const auto t1 = std::chrono::steady_clock::now();
  if (!m.ok()) return {};
  auto s = make_scratch_set({m.value()->database()}, 1);
  if (!s.ok()) return {};
  return {m.value(), s.value(), std::chrono::duration<double, std::milli>(t1 - t0).count()};
}

const Built& built(size_t n, MatchEngine engine) {
  static std::map<std::pair<size_t, MatchEngine>, Built> cache;
  const auto key = std::make_pair(n, engine);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, compile(n, engine)).first;
  return it->second;
}

void set_memory_counters(benchmark::State& state, const Built& b) {
  state.counters["db_bytes"] = double(b.matcher->database_bytes());
  state.counters["map_bytes"] = double(b.matcher->table_bytes());
  state.counters["scratch_bytes"] = double(b.scratch->scratch_bytes());
}

// One iteration: one name matched. The answers of both engines are compared before timing.
template <MatchEngine kEngine>
void BM_Match(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const Shape shape = Shape(state.range(1));
  const Built& b = built(n, kEngine);
  const Built& other = built(n, kEngine == MatchEngine::kHyperscanAll ? MatchEngine::kMapsAndRegex
                                                                      : MatchEngine::kHyperscanAll);
  if (!b.matcher || !other.matcher) {
    state.SkipWithError("compile failed");
    return;
  }
  const auto& queries = workload(n).queries[shape];
  hs_scratch_t* scratch = b.scratch->for_worker(0);
  size_t hits = 0;
  for (const auto& q : queries) {
    const int32_t got = b.matcher->match(q, scratch);
    if (got != other.matcher->match(q, other.scratch->for_worker(0))) {
      state.SkipWithError(("engines disagree on " + q).c_str());
      return;
    }
    hits += got >= 0;
  }
  if ((shape == kMiss) != (hits == 0)) {
    state.SkipWithError("workload does not hit or miss as its shape says");
    return;
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(b.matcher->match(queries[i], scratch));
    i = (i + 1) % queries.size();
  }
  state.SetLabel(kShapeNames[shape]);
  state.counters["hit_pct"] = 100.0 * double(hits) / double(queries.size());
  set_memory_counters(state, b);
}

// One iteration: compile_names of the whole set (and one scratch for it).
template <MatchEngine kEngine>
void BM_Compile(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const auto& patterns = workload(n).patterns;
  for (auto _ : state) {
    auto m = compile_names(patterns, kEngine);
    if (!m.ok()) {
      state.SkipWithError(m.error().message.c_str());
      return;
    }
    auto s = make_scratch_set({m.value()->database()}, 1);
    benchmark::DoNotOptimize(s);
  }
  set_memory_counters(state, built(n, kEngine));
}

void match_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"patterns", "shape"});
  for (int64_t n : {10, 1000, 100000}) {
    for (int s = 0; s < kShapes; ++s) b->Args({n, s});
  }
}

void compile_args(benchmark::internal::Benchmark* b) {
  b->ArgName("patterns")->Arg(10)->Arg(1000)->Arg(100000);
  b->Unit(benchmark::kMillisecond)->Iterations(1);
}

BENCHMARK(BM_Match<MatchEngine::kHyperscanAll>)->Name("BM_Match/hyperscan_all")->Apply(match_args);
BENCHMARK(BM_Match<MatchEngine::kMapsAndRegex>)->Name("BM_Match/maps_regex")->Apply(match_args);
BENCHMARK(BM_Compile<MatchEngine::kHyperscanAll>)
    ->Name("BM_Compile/hyperscan_all")
    ->Apply(compile_args);
BENCHMARK(BM_Compile<MatchEngine::kMapsAndRegex>)
    ->Name("BM_Compile/maps_regex")
    ->Apply(compile_args);

}  // namespace
