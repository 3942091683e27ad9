// Out-of-order reassembly over real mbufs from the test pool: in-order delivery, holding and
// releasing, overlap and duplicate trimming (single mbufs and chains), the receive window, the
// byte / mbuf / run limits, SACK block order (RFC 2018 §4) and D-SACK (RFC 2883 §4), random
// permutations of overlapping segments across the sequence wrap, and no leaked mbufs.
#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

#include "dataplane/tcp/reass.h"
#include "tests/support/dp_harness.h"

namespace meshgate::dp::tcp {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint32_t kMaxPiece = 1500;

class TcpReass : public ::testing::Test {
 protected:
  void SetUp() override {
    test::init_eal_once();
    pool_ = test::test_pool();
    avail_ = rte_mempool_avail_count(pool_);
  }
  void TearDown() override {
    q_.clear();
    EXPECT_EQ(rte_mempool_avail_count(pool_), avail_) << "mbufs leaked";
  }

  // A segment carrying stream[off, off + len), as one mbuf or split in a chain of `pieces`.
  rte_mbuf* seg(const Bytes& stream, uint32_t off, uint32_t len, uint32_t pieces = 1) {
    // A piece must fit one mbuf's data room (2048 bytes in the test pool).
    pieces = std::max(pieces, (len + kMaxPiece - 1) / kMaxPiece);
    rte_mbuf* head = nullptr;
    uint32_t done = 0;
    for (uint32_t p = 0; p < pieces; ++p) {
      const uint32_t n = p + 1 == pieces ? len - done : len / pieces;
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      EXPECT_NE(m, nullptr);
      // Room in front, as if headers had been stripped with rte_pktmbuf_adj.
      char* d = rte_pktmbuf_append(m, uint16_t(n));
      if (n > 0) std::copy_n(stream.begin() + off + done, n, d);
      done += n;
      if (head == nullptr) {
        head = m;
      } else {
        EXPECT_EQ(rte_pktmbuf_chain(head, m), 0);
      }
    }
    return head;
  }
  // The bytes of a delivered chain, which is then freed.
  static Bytes take(rte_mbuf* m) {
    Bytes out;
    EXPECT_EQ(rte_pktmbuf_pkt_len(m), [&] {
      uint32_t n = 0;
      for (rte_mbuf* s = m; s; s = s->next) n += s->data_len;
      return n;
    }());
    for (rte_mbuf* s = m; s; s = s->next) {
      const auto* p = rte_pktmbuf_mtod(s, const uint8_t*);
      out.insert(out.end(), p, p + s->data_len);
    }
    rte_pktmbuf_free(m);
    return out;
  }
  ReassResult add(const Bytes& stream, uint32_t base, uint32_t off, uint32_t len,
                  uint32_t wnd = 1 << 20, uint32_t pieces = 1) {
    return q_.add(seg(stream, off, len, pieces), base + off, wnd);
  }
  static Bytes pattern(size_t n, uint32_t seed = 1) {
    Bytes b(n);
    std::mt19937 rng(seed);
    for (auto& x : b) x = uint8_t(rng());
    return b;
  }
  static Bytes slice(const Bytes& b, uint32_t off, uint32_t len) {
    return Bytes(b.begin() + off, b.begin() + off + len);
  }

  rte_mempool* pool_ = nullptr;
  unsigned avail_ = 0;
  Reassembly q_;
};

TEST_F(TcpReass, in_order_segment_is_delivered_at_once) {
  const Bytes s = pattern(1000);
  q_.init(5000);
  ReassResult r = add(s, 5000, 0, 100);
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(r.len, 100u);
  EXPECT_EQ(q_.rcv_nxt(), 5100u);
  EXPECT_EQ(take(r.data), slice(s, 0, 100));
  EXPECT_TRUE(q_.empty());
}

TEST_F(TcpReass, out_of_order_segments_are_held_until_the_gap_fills) {
  const Bytes s = pattern(1000);
  q_.init(0);
  EXPECT_EQ(add(s, 0, 100, 100).status, ReassStatus::kQueued);
  EXPECT_EQ(add(s, 0, 300, 100).status, ReassStatus::kQueued);
  EXPECT_EQ(q_.run_count(), 2u);
  EXPECT_EQ(q_.queued_bytes(), 200u);
  EXPECT_EQ(q_.rcv_nxt(), 0u);
  ReassResult r = add(s, 0, 0, 100);  // fills [0, 100) and reaches the run [100, 200)
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(r.len, 200u);
  EXPECT_EQ(take(r.data), slice(s, 0, 200));
  EXPECT_EQ(q_.rcv_nxt(), 200u);
  EXPECT_EQ(q_.run_count(), 1u);
  r = add(s, 0, 200, 100);
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(take(r.data), slice(s, 200, 200));
  EXPECT_TRUE(q_.empty());
  EXPECT_EQ(q_.queued_mbufs(), 0u);
}

TEST_F(TcpReass, a_segment_covering_a_queued_run_replaces_it_and_merges_neighbours) {
  const Bytes s = pattern(1000);
  q_.init(0);
  add(s, 0, 100, 50);    // [100, 150)
  add(s, 0, 200, 50);    // [200, 250)
  add(s, 0, 300, 100);   // [300, 400)
  // [120, 320): overlaps the first run's tail, covers the second, overlaps the third's head.
  EXPECT_EQ(add(s, 0, 120, 200, 1 << 20, 3).status, ReassStatus::kQueued);
  EXPECT_EQ(q_.run_count(), 1u);
  EXPECT_EQ(q_.queued_bytes(), 300u);
  SackBlock b[4];
  ASSERT_EQ(q_.sack_blocks(b, 4), 1u);
  EXPECT_EQ(b[0].start, 100u);
  EXPECT_EQ(b[0].end, 400u);
  ReassResult r = add(s, 0, 0, 100);
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(take(r.data), slice(s, 0, 400));
}

TEST_F(TcpReass, duplicates_are_dropped_and_reported_for_dsack) {
  const Bytes s = pattern(1000);
  q_.init(1000);
  take(add(s, 1000, 0, 100).data);
  // Entirely old: RFC 2883 D-SACK material.
  ReassResult r = add(s, 1000, 20, 50);
  EXPECT_EQ(r.status, ReassStatus::kDuplicate);
  EXPECT_EQ(r.dup_seq, 1020u);
  EXPECT_EQ(r.dup_len, 50u);
  // Inside a queued run.
  add(s, 1000, 200, 100);
  add(s, 1000, 400, 100);
  r = add(s, 1000, 220, 30);
  EXPECT_EQ(r.status, ReassStatus::kDuplicate);
  EXPECT_EQ(r.dup_seq, 1220u);
  EXPECT_EQ(r.dup_len, 30u);
  // RFC 2883 §4: the D-SACK block first, then the run that holds it.
  const SackBlock d{r.dup_seq, r.dup_seq + r.dup_len};
  SackBlock b[4];
  ASSERT_EQ(q_.sack_blocks(b, 4, &d), 3u);
  EXPECT_EQ(b[0].start, 1220u);
  EXPECT_EQ(b[0].end, 1250u);
  EXPECT_EQ(b[1].start, 1200u);
  EXPECT_EQ(b[1].end, 1300u);
  EXPECT_EQ(b[2].start, 1400u);
  EXPECT_EQ(q_.queued_bytes(), 200u);
}

TEST_F(TcpReass, a_segment_straddling_rcv_nxt_delivers_only_its_new_part) {
  const Bytes s = pattern(1000);
  q_.init(0);
  take(add(s, 0, 0, 100).data);
  ReassResult r = add(s, 0, 60, 100, 1 << 20, 2);  // [60, 160) as a two-mbuf chain
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(r.len, 60u);
  EXPECT_EQ(r.dup_seq, 60u);
  EXPECT_EQ(r.dup_len, 40u);
  EXPECT_EQ(take(r.data), slice(s, 100, 60));
}

TEST_F(TcpReass, trimming_frees_whole_leading_and_trailing_chain_segments) {
  const Bytes s = pattern(2000);
  q_.init(0);
  take(add(s, 0, 0, 500).data);
  add(s, 0, 950, 250);  // a run [950, 1200)
  // [100, 1100) in 10 pieces of 100: the first 4 lie below RCV.NXT (freed whole), the 9th is
  // cut inside ([900, 950) kept) and the 10th lies inside the run (freed). The result must
  // stay a valid chain (nb_segs, pkt_len) for take() to read.
  ReassResult r = add(s, 0, 100, 1000, 1 << 20, 10);
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(r.len, 700u);  // [500, 1200)
  EXPECT_EQ(r.data->nb_segs, 5 + 1);  // pieces 5-9 and the run's mbuf
  EXPECT_EQ(take(r.data), slice(s, 500, 700));
}

TEST_F(TcpReass, data_outside_the_receive_window_is_refused_or_trimmed) {
  const Bytes s = pattern(1000);
  q_.init(0);
  EXPECT_EQ(add(s, 0, 500, 100, 500).status, ReassStatus::kOutOfWindow);
  EXPECT_EQ(add(s, 0, 0, 100, 0).status, ReassStatus::kOutOfWindow);  // zero window
  // Straddles the right edge at 450: only [300, 450) is kept.
  EXPECT_EQ(add(s, 0, 300, 200, 450).status, ReassStatus::kQueued);
  EXPECT_EQ(q_.queued_bytes(), 150u);
  ReassResult r = add(s, 0, 0, 300, 450);
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(take(r.data), slice(s, 0, 450));
}

TEST_F(TcpReass, limits_drop_the_arriving_segment_and_keep_what_is_queued) {
  const Bytes s = pattern(4000);
  q_.init(0, ReassLimits{300, 1000});
  EXPECT_EQ(add(s, 0, 100, 100).status, ReassStatus::kQueued);
  EXPECT_EQ(add(s, 0, 300, 100).status, ReassStatus::kQueued);
  EXPECT_EQ(add(s, 0, 500, 100).status, ReassStatus::kQueued);
  EXPECT_EQ(add(s, 0, 700, 100).status, ReassStatus::kNoRoom);  // 400 > 300 bytes
  EXPECT_EQ(q_.queued_bytes(), 300u);
  // A copy of queued bytes is a duplicate, whatever the limits.
  EXPECT_EQ(add(s, 0, 100, 100).status, ReassStatus::kDuplicate);
  // In-order data is never refused: it leaves the queue at once.
  ReassResult r = add(s, 0, 0, 700);
  ASSERT_EQ(r.status, ReassStatus::kDelivered);
  EXPECT_EQ(take(r.data), slice(s, 0, 700));
  EXPECT_TRUE(q_.empty());

  q_.clear();
  q_.init(0, ReassLimits{1 << 20, 4});
  EXPECT_EQ(add(s, 0, 100, 300, 1 << 20, 3).status, ReassStatus::kQueued);  // 3 mbufs
  EXPECT_EQ(add(s, 0, 500, 100, 1 << 20, 2).status, ReassStatus::kNoRoom);  // 5 > 4
  EXPECT_EQ(add(s, 0, 500, 100).status, ReassStatus::kQueued);
  EXPECT_EQ(q_.queued_mbufs(), 4u);
}

TEST_F(TcpReass, at_most_eight_runs_but_a_segment_that_joins_runs_still_fits) {
  const Bytes s = pattern(4000);
  q_.init(0);
  for (uint32_t i = 1; i <= Reassembly::kMaxRuns; ++i) {
    ASSERT_EQ(add(s, 0, i * 200, 100).status, ReassStatus::kQueued);
  }
  EXPECT_EQ(q_.run_count(), Reassembly::kMaxRuns);
  EXPECT_EQ(add(s, 0, 2000, 100).status, ReassStatus::kNoRoom);  // a ninth hole
  EXPECT_EQ(add(s, 0, 300, 100).status, ReassStatus::kQueued);   // joins runs 1 and 2
  EXPECT_EQ(q_.run_count(), Reassembly::kMaxRuns - 1);
  EXPECT_EQ(add(s, 0, 1500, 50).status, ReassStatus::kQueued);   // extends run 7
  EXPECT_EQ(q_.run_count(), Reassembly::kMaxRuns - 1);
}

TEST_F(TcpReass, sack_blocks_start_with_the_run_that_took_the_latest_segment) {
  const Bytes s = pattern(4000);
  q_.init(0);
  add(s, 0, 1000, 100);  // run A
  add(s, 0, 2000, 100);  // run B
  add(s, 0, 3000, 100);  // run C
  add(s, 0, 1100, 100);  // extends A: A is now the most recent
  SackBlock b[3];
  ASSERT_EQ(q_.sack_blocks(b, 3), 3u);
  EXPECT_EQ(b[0].start, 1000u);
  EXPECT_EQ(b[0].end, 1200u);
  EXPECT_EQ(b[1].start, 3000u);  // then C, then B: most recent first (RFC 2018 §4)
  EXPECT_EQ(b[2].start, 2000u);
  ASSERT_EQ(q_.sack_blocks(b, 2), 2u);  // bounded by the option space
  // An in-order segment is not reported: it moved the ACK instead.
  take(add(s, 0, 0, 1000).data);
  ASSERT_EQ(q_.sack_blocks(b, 3), 2u);
  EXPECT_EQ(b[0].start, 3000u);
  EXPECT_EQ(b[1].start, 2000u);
}

TEST_F(TcpReass, advance_over_a_fin_frees_runs_it_reaches) {
  const Bytes s = pattern(1000);
  q_.init(0);
  take(add(s, 0, 0, 100).data);
  add(s, 0, 101, 100);  // "data" after the FIN's sequence number
  add(s, 0, 300, 100);
  q_.advance(1);
  EXPECT_EQ(q_.rcv_nxt(), 101u);
  EXPECT_EQ(q_.run_count(), 1u);  // [101, 201) could never be delivered: freed
  EXPECT_EQ(q_.queued_bytes(), 100u);
}

// Random permutations of overlapping, duplicated segments (some chained) reassemble to the
// original stream, whatever the order and wherever the sequence space wraps.
TEST_F(TcpReass, random_permutations_of_overlapping_segments_reassemble_the_stream) {
  constexpr uint32_t kLen = 24000;
  uint32_t refused = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const Bytes s = pattern(kLen, seed);
    const uint32_t base = uint32_t(seed % 2 ? 0xffffd000u + rng() % 4096 : rng());
    struct Piece {
      uint32_t off, len, pieces;
    };
    std::vector<Piece> pieces;
    // A covering partition into segments of 1..1460 bytes...
    for (uint32_t off = 0; off < kLen;) {
      const uint32_t len = std::min<uint32_t>(1 + rng() % 1460, kLen - off);
      pieces.push_back({off, len, uint32_t(1 + rng() % 3)});
      off += len;
    }
    // ...plus overlapping retransmissions and exact duplicates.
    const size_t base_count = pieces.size();
    for (size_t i = 0; i < base_count / 2; ++i) {
      const uint32_t off = rng() % kLen;
      const uint32_t len = std::min<uint32_t>(1 + rng() % 3000, kLen - off);
      pieces.push_back({off, len, uint32_t(1 + rng() % 4)});
      pieces.push_back(pieces[rng() % base_count]);
    }
    std::shuffle(pieces.begin(), pieces.end(), rng);
    q_.init(base, ReassLimits{1 << 20, 4096});
    Bytes got;
    // A segment refused for lack of runs (more than 8 holes) is "retransmitted": offered again
    // after the others, as the sender's recovery would.
    std::deque<Piece> todo(pieces.begin(), pieces.end());
    for (uint32_t steps = 0; !todo.empty(); ++steps) {
      ASSERT_LT(steps, 100000u) << "seed " << seed;
      const Piece p = todo.front();
      todo.pop_front();
      ReassResult r = q_.add(seg(s, p.off, p.len, std::min(p.pieces, p.len)), base + p.off,
                             1 << 20);
      ASSERT_NE(r.status, ReassStatus::kOutOfWindow) << "seed " << seed;
      if (r.status == ReassStatus::kNoRoom) {
        ++refused;
        todo.push_back(p);
      }
      if (r.status == ReassStatus::kDelivered) {
        const Bytes part = take(r.data);
        got.insert(got.end(), part.begin(), part.end());
      }
      ASSERT_LE(q_.run_count(), Reassembly::kMaxRuns);
      ASSERT_EQ(q_.rcv_nxt(), base + uint32_t(got.size()));
    }
    ASSERT_EQ(got.size(), s.size()) << "seed " << seed;
    EXPECT_EQ(got, s) << "seed " << seed;
    EXPECT_TRUE(q_.empty());
    EXPECT_EQ(q_.queued_bytes(), 0u);
    EXPECT_EQ(q_.rcv_nxt(), base + kLen);
    EXPECT_EQ(rte_mempool_avail_count(pool_), avail_) << "seed " << seed;
  }
  EXPECT_GT(refused, 0u) << "the run limit was never reached: the test lost its edge";
}

}  // namespace
}  // namespace meshgate::dp::tcp
