// The hostname matcher (dataplane/names/name_matcher.h) built by control/names/name_compile.h:
// Gateway API precedence as a table, pattern validation, Hyperscan compile errors with the
// pattern's index, per-worker scratches valid for several databases, and both engines against a
// brute-force reference on random pattern sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "control/names/name_compile.h"

namespace meshgate::ctl {
namespace {

using dp::names::MatchEngine;
using dp::names::NameMatcher;
using dp::names::PatternKind;
using dp::names::ScratchSet;

constexpr MatchEngine kEngines[] = {MatchEngine::kMapsAndRegex, MatchEngine::kHyperscanAll};

const char* engine_name(MatchEngine e) {
  return e == MatchEngine::kMapsAndRegex ? "maps+regex" : "hyperscan-all";
}

struct Compiled {
  std::shared_ptr<const NameMatcher> m;
  std::shared_ptr<const ScratchSet> scratch;
  int32_t match(std::string_view name) const { return m->match(name, scratch->for_worker(0)); }
};

Compiled compile(const std::vector<std::string>& patterns, MatchEngine engine) {
  auto m = compile_names(patterns, engine);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  if (!m.ok()) return {};
  auto s = make_scratch_set({m.value()->database()}, 1);
  EXPECT_TRUE(s.ok());
  return {m.value(), s.value()};
}

struct PrecedenceCase {
  const char* description;
  std::vector<std::string> patterns;
  const char* name;
  int32_t expected;
};

TEST(NameMatcher, precedence_follows_gateway_api) {
  const PrecedenceCase cases[] = {
      {"exact beats a wildcard listed first",
       {"*.example.com", "shop.example.com"},
       "shop.example.com",
       1},
      {"exact beats a regex listed first",
       {"~shop\\..*", "shop.example.com"},
       "shop.example.com",
       1},
      {"wildcard beats a regex listed first",
       {"~.*\\.example\\.com", "*.example.com"},
       "shop.example.com",
       1},
      {"longer wildcard suffix beats a shorter one listed first",
       {"*.example.com", "*.eu.example.com"},
       "shop.eu.example.com",
       1},
      {"shorter wildcard suffix when the longer one does not match",
       {"*.example.com", "*.eu.example.com"},
       "shop.us.example.com",
       0},
      {"config order between two regexes", {"~shop.*", "~.*\\.com"}, "shop.example.com", 0},
      {"config order between two regexes, reversed",
       {"~.*\\.com", "~shop.*"},
       "shop.example.com",
       0},
      {"duplicate exact names: the first",
       {"a.example.com", "b.example.com", "a.example.com"},
       "a.example.com",
       0},
      {"duplicate wildcards: the first", {"*.example.com", "*.EXAMPLE.com"}, "x.example.com", 0},
      {"exact names are case-insensitive", {"Shop.Example.COM"}, "shop.example.com", 0},
      {"upper case names are folded", {"shop.example.com"}, "SHOP.example.com", 0},
      {"wildcards are case-insensitive", {"*.Example.com"}, "a.EXAMPLE.com", 0},
      {"regexes are case-insensitive", {"~SHOP\\.[a-z]+\\.com"}, "shop.Example.com", 0},
      {"a wildcard needs at least one label", {"*.example.com"}, "example.com", -1},
      {"a wildcard spans several labels", {"*.example.com"}, "a.b.example.com", 0},
      {"a wildcard does not match an empty label", {"*.example.com"}, ".example.com", -1},
      {"a wildcard does not match across an empty label", {"*.example.com"}, "a..example.com", -1},
      {"a wildcard suffix is whole labels", {"*.example.com"}, "shopexample.com", -1},
      {"an exact name is the whole name", {"example.com"}, "www.example.com", -1},
      {"an exact name has no trailing dot", {"example.com"}, "example.com.", -1},
      {"a regex must match the whole name", {"~shop"}, "shop.example.com", -1},
      {"a regex with its own anchors", {"~^shop\\.example\\.com$"}, "shop.example.com", 0},
      {"'$' before a newline does not count", {"~shop\\.example\\.com"}, "shop.example.com\n", -1},
      {"alternation stays inside the anchors", {"~a|b"}, "ab", -1},
      {"a quote left open ends with the regex", {"~x\\.y\\Q"}, "x.y", 0},
      {"no pattern matches", {"a.example.com", "*.b.example.com", "~c\\..*"}, "d.example.com", -1},
      {"a catch-all regex ranks last", {"~.*", "*.com", "x.com"}, "y.com", 1},
      {"a name longer than 253 bytes matches only regexes",
       {"*.example.com", "~.*\\.example\\.com"},
       nullptr,
       1},
  };
  const std::string long_name = std::string(250, 'a') + ".example.com";
  for (const auto& c : cases) {
    for (const MatchEngine e : kEngines) {
      const Compiled m = compile(c.patterns, e);
      ASSERT_TRUE(m.m) << c.description;
      EXPECT_EQ(m.match(c.name != nullptr ? c.name : long_name), c.expected)
          << c.description << " (" << engine_name(e) << ")";
    }
  }
}

TEST(NameMatcher, kinds_and_databases_follow_the_engine) {
  const std::vector<std::string> patterns = {"a.example.com", "*.example.com", "~b.*"};
  auto maps = compile(patterns, MatchEngine::kMapsAndRegex);
  auto all = compile(patterns, MatchEngine::kHyperscanAll);
  ASSERT_TRUE(maps.m && all.m);
  for (const auto* m : {maps.m.get(), all.m.get()}) {
    EXPECT_EQ(m->patterns(), 3u);
    EXPECT_EQ(m->kind(0), PatternKind::kExact);
    EXPECT_EQ(m->kind(1), PatternKind::kWildcard);
    EXPECT_EQ(m->kind(2), PatternKind::kRegex);
    EXPECT_NE(m->database(), nullptr);
    EXPECT_GT(m->database_bytes(), 0u);
  }
  EXPECT_GT(maps.m->table_bytes(), 0u);
  EXPECT_EQ(all.m->table_bytes(), 0u);

  // Exact names and wildcards alone need no Hyperscan database in the default engine.
  auto no_regex = compile({"a.example.com", "*.example.com"}, MatchEngine::kMapsAndRegex);
  ASSERT_TRUE(no_regex.m);
  EXPECT_EQ(no_regex.m->database(), nullptr);
  EXPECT_EQ(no_regex.m->database_bytes(), 0u);
  EXPECT_EQ(no_regex.scratch->for_worker(0), nullptr);
  EXPECT_EQ(no_regex.m->match("x.example.com", nullptr), 1);
  EXPECT_EQ(no_regex.m->match("example.com", nullptr), -1);
}

TEST(NameMatcher, empty_pattern_list_matches_nothing) {
  for (const MatchEngine e : kEngines) {
    const auto m = compile_names({}, e);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m.value()->patterns(), 0u);
    EXPECT_EQ(m.value()->database(), nullptr);
    EXPECT_EQ(m.value()->database_bytes(), 0u);
    EXPECT_EQ(m.value()->match("shop.example.com", nullptr), -1);
    EXPECT_EQ(m.value()->match("", nullptr), -1);
  }
}

TEST(NamePattern, validation_names_what_is_wrong) {
  struct Case {
    const char* pattern;
    const char* expected;  // "" when valid, else a part of the message
  };
  const Case cases[] = {
      {"shop.example.com", ""},
      {"SHOP.Example.com", ""},
      {"a_b-c.example.com", ""},
      {"localhost", ""},
      {"*.example.com", ""},
      {"*.com", ""},
      {"~.*", ""},
      {"~shop[0-9]+\\.example\\.com", ""},
      {"", "empty hostname pattern"},
      {"~", "empty regex"},
      {"*", "whole first label"},
      {"*example.com", "whole first label"},
      {"a.*.example.com", "'*' only as the whole first label"},
      {"*.*.example.com", "'*' only as the whole first label"},
      {"shop*.example.com", "'*' only as the whole first label"},
      {"shop..example.com", "empty label"},
      {".example.com", "empty label"},
      {"*..example.com", "empty label"},
      {"example.com.", "trailing '.'"},
      {"shop example.com", "character ' ' not allowed"},
      {"shop/example.com", "character '/' not allowed"},
      {"shop.exämple.com", "not allowed"},
      {"x.example.com:443", "character ':' not allowed"},
  };
  for (const auto& c : cases) {
    const std::string why = check_name_pattern(c.pattern);
    if (*c.expected == '\0') {
      EXPECT_EQ(why, "") << c.pattern;
    } else {
      EXPECT_NE(why.find(c.expected), std::string::npos) << c.pattern << ": " << why;
    }
  }
  const std::string label63(63, 'a');
  EXPECT_EQ(check_name_pattern(label63 + ".com"), "");
  EXPECT_NE(check_name_pattern(label63 + "a.com").find("label longer than 63"), std::string::npos);
  std::string name253;
  while (name253.size() < 253) name253 += name253.empty() ? "a" : ".a";
  ASSERT_EQ(name253.size(), 253u);
  EXPECT_EQ(check_name_pattern(name253), "");
  EXPECT_NE(check_name_pattern(name253 + "a").find("longer than 253"), std::string::npos);
}

TEST(NamePattern, compile_reports_the_failing_index_and_hyperscan_message) {
  struct Case {
    std::vector<std::string> patterns;
    uint32_t index;
    const char* message;  // a part of it
  };
  const Case cases[] = {
      {{"a.example.com", "*.example.com", "~(a"}, 2, "parenthes"},
      {{"~a", "~(a)\\1", "b.example.com"}, 1, "Back-references are unsupported"},
      // Would close the anchoring group if spliced in unchecked.
      {{"~a)|(b"}, 0, "parenthes"},
      {{"ok.example.com", "bad..example.com"}, 1, "empty label"},
      {{"~x", "*.ok", "~"}, 2, "empty regex"},
  };
  for (const auto& c : cases) {
    for (const MatchEngine e : kEngines) {
      const auto m = compile_names(c.patterns, e);
      ASSERT_FALSE(m.ok()) << c.patterns.back();
      EXPECT_EQ(m.error().index, c.index) << m.error().message;
      EXPECT_NE(m.error().message.find(c.message), std::string::npos) << m.error().message;
    }
  }
}

TEST(NamePattern, a_set_compile_error_names_the_regex_that_failed) {
  // Parses alone (hs_expression_info), fails to compile: the index is the pattern's even with
  // exact names before it that never reach Hyperscan in the default engine.
  const std::vector<std::string> patterns = {"a.example.com", "~ok\\..*", "*.b.example.com",
                                             "~.*(a|b.{20}){500}z"};
  ASSERT_EQ(check_name_pattern(patterns[3]), "");
  for (const MatchEngine e : kEngines) {
    const auto m = compile_names(patterns, e);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().index, 3u) << engine_name(e) << ": " << m.error().message;
    EXPECT_EQ(m.error().message, "Pattern is too large.");
  }
}

TEST(ScratchSet, one_scratch_per_worker_valid_for_every_database) {
  const auto small = compile_names({"~a+\\.example\\.com"});
  const auto large = compile_names(
      {"x.example.com", "*.example.org", "~(foo|bar)[0-9]{2,40}\\.[a-z]+\\.net", "~.*\\.svc"},
      MatchEngine::kHyperscanAll);
  ASSERT_TRUE(small.ok() && large.ok());
  const auto set =
      make_scratch_set({small.value()->database(), nullptr, large.value()->database()}, 4);
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set.value()->workers(), 4u);
  EXPECT_GT(set.value()->scratch_bytes(), 0u);
  std::vector<hs_scratch_t*> seen;
  for (uint32_t w = 0; w < 4; ++w) {
    hs_scratch_t* s = set.value()->for_worker(w);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), s), 0) << "worker " << w << " shares one";
    seen.push_back(s);
    EXPECT_EQ(small.value()->match("aaa.example.com", s), 0);
    EXPECT_EQ(large.value()->match("x.example.com", s), 0);
    EXPECT_EQ(large.value()->match("m.example.org", s), 1);
    EXPECT_EQ(large.value()->match("bar42.q.net", s), 2);
    EXPECT_EQ(large.value()->match("reviews.svc", s), 3);
    EXPECT_EQ(large.value()->match("nothing.here", s), -1);
  }

  const auto none = make_scratch_set({nullptr}, 3);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value()->for_worker(0), nullptr);
  EXPECT_EQ(none.value()->scratch_bytes(), 0u);
}

// Brute force, written from the rules rather than from the matcher: every pattern that matches,
// then the best by kind, wildcard suffix length and index.
int32_t reference_match(const std::vector<std::string>& patterns, const std::string& name_in) {
  std::string name = name_in;
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  int best = -1, best_kind = 3;
  size_t best_suffix = 0;
  for (size_t i = 0; i < patterns.size(); ++i) {
    const std::string& p = patterns[i];
    int kind;
    size_t suffix = 0;
    bool hit;
    if (p[0] == '~') {
      kind = 2;
      hit = std::regex_match(name, std::regex(p.substr(1), std::regex::icase));
    } else if (p[0] == '*') {
      kind = 1;
      const std::string s = "." + lower(p.substr(2));
      suffix = s.size() - 1;
      hit = name.size() <= 253 && name.size() > s.size() &&
            name.compare(name.size() - s.size(), s.size(), s) == 0;
      if (hit) {  // the labels before the suffix: one or more, none empty
        const std::string prefix = name.substr(0, name.size() - s.size());
        hit =
            prefix.front() != '.' && prefix.back() != '.' && prefix.find("..") == std::string::npos;
      }
    } else {
      kind = 0;
      hit = name == lower(p);
    }
    if (!hit) continue;
    const bool better =
        kind < best_kind || (kind == best_kind && kind == 1 && suffix > best_suffix);
    if (better) {
      best = int(i);
      best_kind = kind;
      best_suffix = suffix;
    }
  }
  return best;
}

TEST(NameMatcher, engines_agree_with_a_brute_force_reference_on_random_sets) {
  // A small alphabet of labels so that random names hit exact names, several wildcards and
  // regexes at once.
  const std::vector<std::string> labels = {"a", "b", "ab", "c", "A", "xy"};
  // Regexes both std::regex (ECMAScript) and Hyperscan read the same way.
  const std::vector<std::string> regexes = {"~a.*",        "~.*\\.c",     "~[ab]+\\.[ab]+",
                                            "~(a|b)\\..*", "~.*b\\.ab.*", "~xy(\\.[a-c]+)*"};
  std::mt19937 rng(20231);
  auto pick = [&rng](size_t n) {
    return size_t(std::uniform_int_distribution<size_t>(0, n - 1)(rng));
  };
  auto random_name = [&](size_t max_labels) {
    std::string n = labels[pick(labels.size())];
    for (size_t k = pick(max_labels); k > 0; --k) n += "." + labels[pick(labels.size())];
    return n;
  };
  size_t checked = 0, hits = 0;
  for (int round = 0; round < 150; ++round) {
    std::vector<std::string> patterns;
    for (size_t k = 1 + pick(12); k > 0; --k) {
      switch (pick(6)) {
        case 0:
        case 1:
        case 2:
          patterns.push_back(random_name(3));
          break;
        case 3:
        case 4:
          patterns.push_back("*." + random_name(2));
          break;
        default:
          patterns.push_back(regexes[pick(regexes.size())]);
      }
    }
    const Compiled maps = compile(patterns, MatchEngine::kMapsAndRegex);
    const Compiled all = compile(patterns, MatchEngine::kHyperscanAll);
    ASSERT_TRUE(maps.m && all.m);
    for (int q = 0; q < 40; ++q) {
      std::string name = random_name(4);
      if (pick(10) == 0) name.insert(pick(name.size() + 1), ".");  // an empty label
      const int32_t want = reference_match(patterns, name);
      ASSERT_EQ(maps.match(name), want) << name << " (maps+regex), round " << round;
      ASSERT_EQ(all.match(name), want) << name << " (hyperscan-all), round " << round;
      ++checked;
      hits += want >= 0;
    }
  }
  EXPECT_EQ(checked, 6000u);
  EXPECT_GT(hits, checked / 4);  // the sets are dense enough to test precedence
}

}  // namespace
}  // namespace meshgate::ctl
