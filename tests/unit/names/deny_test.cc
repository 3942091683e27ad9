// Deny signatures: streaming inspection of a connection's first bytes across any segmentation,
// the inspect limit, per-stream state in a worker's fixed arena, and compile errors.
#include <gtest/gtest.h>
#include <hs/hs.h>
#include <rte_memory.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "control/names/deny_compile.h"
#include "dataplane/names/deny.h"
#include "tests/support/dp_harness.h"

namespace meshgate::dp::names {
namespace {

using ctl::compile_deny;
using ctl::DenyPatternError;

constexpr uint32_t kInspect = 64 * 1024;

class DenyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::init_eal_once();
    ASSERT_TRUE(arena_.init(kMaxDenyStreamBytes, 16, SOCKET_ID_ANY));
  }
  void TearDown() override { hs_free_scratch(scratch_); }

  // The set of `patterns`, with the scratch grown for it (control-side work, on the test's
  // thread).
  std::shared_ptr<const DenySet> compile(const std::vector<std::string>& patterns) {
    auto r = compile_deny(patterns);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (!r.ok()) return nullptr;
    EXPECT_EQ(hs_alloc_scratch(r.value()->database(), &scratch_), HS_SUCCESS);
    return r.value();
  }

  static DenyPatternError error_of(const std::vector<std::string>& patterns) {
    auto r = compile_deny(patterns);
    EXPECT_FALSE(r.ok());
    return r.ok() ? DenyPatternError{0, ""} : r.error();
  }

  int32_t feed(DenyStream& s, const DenySet& set, std::string_view bytes) {
    return s.scan(&set, reinterpret_cast<const uint8_t*>(bytes.data()), uint32_t(bytes.size()),
                  scratch_);
  }

  StreamArena arena_;
  hs_scratch_t* scratch_ = nullptr;
};

const std::string kRequest =
    "GET /search?q=1 HTTP/1.1\r\nHost: shop.example.com\r\n"
    "User-Agent: sqlmap/1.7\r\nAccept: */*\r\n\r\n";
const std::string kSignature = "User-Agent: sqlmap";

size_t signature_end() { return kRequest.find(kSignature) + kSignature.size(); }

TEST_F(DenyTest, signature_in_one_byte_segments_matches_at_its_last_byte) {
  auto set = compile({"evil\\.example", kSignature});
  ASSERT_NE(set, nullptr);
  DenyStream s;
  ASSERT_EQ(s.open(*set, arena_, kInspect), DenyOpen::kOpened);
  EXPECT_EQ(arena_.blocks_in_use(), 1u);
  size_t matched_at = SIZE_MAX;
  int32_t verdict = DenyStream::kNoMatch;
  for (size_t i = 0; i < kRequest.size() && s.active(); ++i) {
    verdict = feed(s, *set, std::string_view(kRequest).substr(i, 1));
    if (verdict != DenyStream::kNoMatch) matched_at = i;
  }
  EXPECT_EQ(verdict, 1);
  EXPECT_EQ(set->pattern(uint32_t(verdict)), kSignature);
  EXPECT_EQ(matched_at, signature_end() - 1);
  EXPECT_EQ(s.scanned(), signature_end());
  EXPECT_EQ(s.status(), DenyStatus::kMatched);
  EXPECT_FALSE(s.active());
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
}

TEST_F(DenyTest, signature_split_at_every_pair_of_offsets_matches_in_the_segment_ending_it) {
  auto set = compile({kSignature});
  ASSERT_NE(set, nullptr);
  const size_t end = signature_end();
  const std::string_view req(kRequest);
  for (size_t i = 0; i <= req.size(); ++i) {
    for (size_t j = i; j <= req.size(); ++j) {
      const std::string_view seg[3] = {req.substr(0, i), req.substr(i, j - i), req.substr(j)};
      DenyStream s;
      ASSERT_EQ(s.open(*set, arena_, kInspect), DenyOpen::kOpened);
      int matched_in = -1;
      for (int k = 0; k < 3 && s.active(); ++k) {
        if (feed(s, *set, seg[k]) == 0) matched_in = k;
      }
      const int want = end <= i ? 0 : end <= j ? 1 : 2;
      ASSERT_EQ(matched_in, want) << "split at " << i << " and " << j;
      ASSERT_EQ(s.scanned(), end) << "split at " << i << " and " << j;
      ASSERT_EQ(arena_.blocks_in_use(), 0u);
    }
  }
}

TEST_F(DenyTest, match_ending_after_the_inspect_limit_is_not_reported) {
  auto set = compile({kSignature});
  ASSERT_NE(set, nullptr);
  const uint32_t end = uint32_t(signature_end());

  // The limit falls inside the signature: its last byte is never inspected.
  DenyStream cut;
  ASSERT_EQ(cut.open(*set, arena_, end - 1), DenyOpen::kOpened);
  EXPECT_EQ(feed(cut, *set, std::string_view(kRequest).substr(0, 10)), DenyStream::kNoMatch);
  EXPECT_TRUE(cut.active());
  EXPECT_EQ(feed(cut, *set, std::string_view(kRequest).substr(10)), DenyStream::kNoMatch);
  EXPECT_EQ(cut.status(), DenyStatus::kLimit);
  EXPECT_EQ(cut.scanned(), end - 1);
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
  // Bytes after the limit are not looked at, whatever they hold.
  EXPECT_EQ(feed(cut, *set, kRequest), DenyStream::kNoMatch);
  EXPECT_EQ(cut.status(), DenyStatus::kLimit);

  // A signature ending on the limit's last byte is inside it.
  DenyStream edge;
  ASSERT_EQ(edge.open(*set, arena_, end), DenyOpen::kOpened);
  EXPECT_EQ(feed(edge, *set, kRequest), 0);
  EXPECT_EQ(edge.status(), DenyStatus::kMatched);

  // Reaching the limit exactly, without a match, returns the block at once.
  DenyStream exact;
  ASSERT_EQ(exact.open(*set, arena_, 10), DenyOpen::kOpened);
  EXPECT_EQ(feed(exact, *set, std::string_view(kRequest).substr(0, 10)), DenyStream::kNoMatch);
  EXPECT_EQ(exact.status(), DenyStatus::kLimit);
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
}

TEST_F(DenyTest, interleaved_streams_on_one_scratch_keep_their_own_state) {
  auto set = compile({"evil", "^GET /admin"});
  ASSERT_NE(set, nullptr);
  DenyStream a, b, c;
  ASSERT_EQ(a.open(*set, arena_, kInspect), DenyOpen::kOpened);
  ASSERT_EQ(b.open(*set, arena_, kInspect), DenyOpen::kOpened);
  ASSERT_EQ(c.open(*set, arena_, kInspect), DenyOpen::kOpened);
  EXPECT_EQ(arena_.blocks_in_use(), 3u);
  // A signature split over a's segments, with other streams' bytes scanned in between.
  EXPECT_EQ(feed(a, *set, "xx ev"), DenyStream::kNoMatch);
  EXPECT_EQ(feed(b, *set, "il"), DenyStream::kNoMatch);  // b never saw "ev"
  EXPECT_EQ(feed(c, *set, "GET /ad"), DenyStream::kNoMatch);
  EXPECT_EQ(feed(b, *set, "ev"), DenyStream::kNoMatch);
  EXPECT_EQ(feed(a, *set, "il"), 0);
  EXPECT_EQ(feed(b, *set, "GET /admin"), DenyStream::kNoMatch);  // not at b's first byte
  EXPECT_EQ(feed(c, *set, "min"), 1);  // at c's first byte, across its two segments
  EXPECT_TRUE(b.active());
  EXPECT_EQ(feed(b, *set, " evi"), DenyStream::kNoMatch);
  EXPECT_EQ(feed(b, *set, "l"), 0);
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
}

TEST_F(DenyTest, full_arena_refuses_to_open_and_blocks_return_on_close) {
  auto set = compile({kSignature});
  ASSERT_NE(set, nullptr);
  StreamArena small;
  ASSERT_TRUE(small.init(kMaxDenyStreamBytes, 4, SOCKET_ID_ANY));
  EXPECT_EQ(small.capacity_bytes(), 4u * kMaxDenyStreamBytes);
  std::vector<DenyStream> s(5);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(s[i].open(*set, small, kInspect), DenyOpen::kOpened);
  EXPECT_TRUE(small.full());
  EXPECT_EQ(small.bytes_in_use(), small.capacity_bytes());
  EXPECT_EQ(s[4].open(*set, small, kInspect), DenyOpen::kNoBlock);
  EXPECT_FALSE(s[4].active());
  EXPECT_EQ(s[4].status(), DenyStatus::kIdle);
  EXPECT_EQ(feed(s[4], *set, kRequest), DenyStream::kNoMatch);  // not open: nothing inspected
  EXPECT_EQ(small.blocks_in_use(), 4u);

  EXPECT_EQ(feed(s[1], *set, "User-Agent: sql"), DenyStream::kNoMatch);
  s[1].close();
  EXPECT_EQ(s[1].status(), DenyStatus::kClosed);
  EXPECT_EQ(small.blocks_in_use(), 3u);
  s[1].close();  // idempotent
  EXPECT_EQ(small.blocks_in_use(), 3u);
  ASSERT_EQ(s[4].open(*set, small, kInspect), DenyOpen::kOpened);  // s[1]'s block
  EXPECT_EQ(feed(s[4], *set, "map"), DenyStream::kNoMatch);  // from a fresh state
  EXPECT_EQ(feed(s[4], *set, kRequest), 0);
  EXPECT_EQ(small.blocks_in_use(), 3u);

  // Moving a stream moves its block; destroying an open stream closes it.
  DenyStream moved = std::move(s[0]);
  EXPECT_FALSE(s[0].active());
  EXPECT_TRUE(moved.active());
  EXPECT_EQ(small.blocks_in_use(), 3u);
  s.clear();
  EXPECT_EQ(small.blocks_in_use(), 1u);
  moved = DenyStream();
  EXPECT_EQ(small.blocks_in_use(), 0u);
  EXPECT_EQ(small.bytes_in_use(), 0u);
}

TEST_F(DenyTest, stream_state_larger_than_a_block_fails_to_open) {
  auto set = compile({"a.{1000}b"});
  ASSERT_NE(set, nullptr);
  ASSERT_GT(set->stream_bytes(), 64u);
  StreamArena tiny;
  ASSERT_TRUE(tiny.init(64, 4, SOCKET_ID_ANY));
  DenyStream s;
  EXPECT_EQ(s.open(*set, tiny, kInspect), DenyOpen::kStateTooLarge);
  EXPECT_FALSE(s.active());
  EXPECT_EQ(tiny.blocks_in_use(), 0u);
  // The same set fits the worker's arena, whose blocks are kMaxDenyStreamBytes.
  EXPECT_EQ(s.open(*set, arena_, kInspect), DenyOpen::kOpened);
}

TEST_F(DenyTest, set_over_the_stream_state_limit_is_a_compile_error) {
  // Alone over the limit: that pattern is named.
  const DenyPatternError one = error_of({"GET /", "a[^b]{14000}c"});
  EXPECT_EQ(one.index, 1u);
  EXPECT_NE(one.message.find("bytes of stream state"), std::string::npos) << one.message;
  EXPECT_NE(one.message.find(std::to_string(kMaxDenyStreamBytes)), std::string::npos);
  // Each fits alone, not together: the whole set is at fault.
  auto alone = compile_deny({"a[^b]{5000}c"});
  ASSERT_TRUE(alone.ok());
  EXPECT_LE(alone.value()->stream_bytes(), kMaxDenyStreamBytes);
  const DenyPatternError both = error_of({"a[^b]{5000}c", "d[^e]{5000}f"});
  EXPECT_EQ(both.index, DenyPatternError::kNoPattern);
  EXPECT_NE(both.message.find("together"), std::string::npos) << both.message;
}

TEST_F(DenyTest, compile_errors_name_the_pattern_index_and_hyperscan_message) {
  const DenyPatternError paren = error_of({"fine", "(a"});
  EXPECT_EQ(paren.index, 1u);
  EXPECT_EQ(paren.message, "Missing close parenthesis for group started at index 0.");
  const DenyPatternError backref = error_of({"(a)\\1", "fine"});
  EXPECT_EQ(backref.index, 0u);
  EXPECT_EQ(backref.message, "Back-references are unsupported.");
  const DenyPatternError empty = error_of({"x", "y", "a*"});
  EXPECT_EQ(empty.index, 2u);
  EXPECT_NE(empty.message.find("empty"), std::string::npos) << empty.message;
  const DenyPatternError eod = error_of({"x", "foo$"});
  EXPECT_EQ(eod.index, 1u);
  EXPECT_NE(eod.message.find("end of the stream"), std::string::npos) << eod.message;
  const DenyPatternError nul = error_of({std::string("a\0b", 3)});
  EXPECT_EQ(nul.index, 0u);
  EXPECT_NE(nul.message.find("NUL"), std::string::npos) << nul.message;
  // No patterns: nothing to inspect.
  auto none = compile_deny({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), nullptr);
}

TEST_F(DenyTest, case_insensitive_only_where_the_pattern_says_so) {
  auto set = compile({"(?i)union\\s+select", "DROP TABLE", "x(?i:abc)y"});
  ASSERT_NE(set, nullptr);
  auto verdict = [&](std::string_view bytes) {
    DenyStream s;
    EXPECT_EQ(s.open(*set, arena_, kInspect), DenyOpen::kOpened);
    const int32_t v = feed(s, *set, bytes);
    s.close();
    return v;
  };
  EXPECT_EQ(verdict("q=1 UnIoN  SeLeCt *"), 0);
  EXPECT_EQ(verdict("q=1 union\tselect *"), 0);
  EXPECT_EQ(verdict("DROP TABLE users"), 1);
  EXPECT_EQ(verdict("drop table users"), DenyStream::kNoMatch);
  EXPECT_EQ(verdict("xAbCy"), 2);
  EXPECT_EQ(verdict("XabcY"), DenyStream::kNoMatch);
}

TEST_F(DenyTest, dot_spans_lines_and_patterns_are_not_anchored) {
  auto set = compile({"POST /login.*password=admin"});
  ASSERT_NE(set, nullptr);
  DenyStream s;
  ASSERT_EQ(s.open(*set, arena_, kInspect), DenyOpen::kOpened);
  EXPECT_EQ(feed(s, *set, "junk POST /login HTTP/1.1\r\nHost: a\r\n\r\nuser=x&"),
            DenyStream::kNoMatch);
  EXPECT_EQ(feed(s, *set, "password=admin"), 0);
}

TEST_F(DenyTest, stream_of_a_replaced_set_closes_without_scanning) {
  auto old_set = compile({"evil"});
  auto new_set = compile({"evil", "good"});
  ASSERT_NE(old_set, nullptr);
  ASSERT_NE(new_set, nullptr);
  DenyStream s;
  ASSERT_EQ(s.open(*old_set, arena_, kInspect), DenyOpen::kOpened);
  EXPECT_EQ(feed(s, *old_set, "ev"), DenyStream::kNoMatch);
  EXPECT_EQ(s.scan(new_set.get(), reinterpret_cast<const uint8_t*>("il"), 2, scratch_),
            DenyStream::kNoMatch);
  EXPECT_EQ(s.status(), DenyStatus::kSetReplaced);
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
  ASSERT_EQ(s.open(*old_set, arena_, kInspect), DenyOpen::kOpened);
  EXPECT_EQ(s.scan(nullptr, reinterpret_cast<const uint8_t*>("evil"), 4, scratch_),
            DenyStream::kNoMatch);
  EXPECT_EQ(s.status(), DenyStatus::kSetReplaced);
  // Closing does not read the database: the stream's set may be gone already.
  ASSERT_EQ(s.open(*old_set, arena_, kInspect), DenyOpen::kOpened);
  old_set.reset();
  s.close();
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
}

TEST_F(DenyTest, scan_failure_closes_the_stream) {
  auto set = compile({"evil"});
  ASSERT_NE(set, nullptr);
  DenyStream s;
  ASSERT_EQ(s.open(*set, arena_, kInspect), DenyOpen::kOpened);
  EXPECT_EQ(s.scan(set.get(), reinterpret_cast<const uint8_t*>("evil"), 4, nullptr),
            DenyStream::kNoMatch);
  EXPECT_EQ(s.status(), DenyStatus::kError);
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
}

// Hyperscan's stream allocator is one per process: each worker's streams still come from, and
// go back to, that worker's own arena.
TEST_F(DenyTest, workers_on_two_threads_take_blocks_from_their_own_arenas) {
  auto set = compile({kSignature});
  ASSERT_NE(set, nullptr);
  StreamArena arenas[2];
  hs_scratch_t* scratches[2] = {nullptr, nullptr};
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(arenas[w].init(kMaxDenyStreamBytes, 8, SOCKET_ID_ANY));
    ASSERT_EQ(hs_clone_scratch(scratch_, &scratches[w]), HS_SUCCESS);
  }
  uint32_t matched[2] = {0, 0};
  uint32_t peak[2] = {0, 0};
  auto worker = [&](int w) {
    DenyStream open[8];
    for (uint32_t round = 0; round < 200; ++round) {
      for (DenyStream& s : open) {
        if (s.open(*set, arenas[w], kInspect) != DenyOpen::kOpened) return;
      }
      peak[w] = std::max(peak[w], arenas[w].blocks_in_use());
      for (DenyStream& s : open) {
        for (size_t off = 0; off < kRequest.size() && s.active(); off += 3) {
          const std::string_view seg = std::string_view(kRequest).substr(off, 3);
          if (s.scan(set.get(), reinterpret_cast<const uint8_t*>(seg.data()),
                     uint32_t(seg.size()), scratches[w]) == 0) {
            ++matched[w];
          }
        }
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(matched[w], 200u * 8) << "worker " << w;
    EXPECT_EQ(peak[w], 8u) << "worker " << w;
    EXPECT_EQ(arenas[w].blocks_in_use(), 0u) << "worker " << w;
    hs_free_scratch(scratches[w]);
  }
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
}

TEST_F(DenyTest, thousand_connections_opened_and_closed_leave_the_arena_empty) {
  auto set = compile({kSignature, "(?i)<script"});
  ASSERT_NE(set, nullptr);
  std::vector<DenyStream> live(arena_.capacity_blocks());
  uint32_t matched = 0;
  for (uint32_t c = 0; c < 1000; ++c) {
    DenyStream& s = live[c % live.size()];
    s.close();
    ASSERT_EQ(s.open(*set, arena_, c % 7 == 0 ? 16 : kInspect), DenyOpen::kOpened) << c;
    const std::string body = c % 3 == 0 ? kRequest : "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    for (size_t off = 0; off < body.size() && s.active(); off += 5) {
      if (feed(s, *set, std::string_view(body).substr(off, 5)) == 0) ++matched;
    }
    ASSERT_LE(arena_.blocks_in_use(), arena_.capacity_blocks());
  }
  // Every third carries the signature; every seventh stops after 16 bytes, before it.
  uint32_t want = 0;
  for (uint32_t c = 0; c < 1000; ++c) want += c % 3 == 0 && c % 7 != 0;
  EXPECT_EQ(matched, want);
  for (DenyStream& s : live) s.close();
  EXPECT_EQ(arena_.blocks_in_use(), 0u);
  EXPECT_EQ(arena_.bytes_in_use(), 0u);
}

}  // namespace
}  // namespace meshgate::dp::names
