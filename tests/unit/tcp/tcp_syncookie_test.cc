// SYN cookies: SipHash-2-4 against the paper's test vectors, the RFC 4987 §3.6 ISN layout,
// encode/decode round trips for every MSS table entry, rejection of tampered tuples, sequence
// numbers and acknowledgments, expiry after two periods (and after the 5-bit counter wraps),
// and the window scale / SACK bits carried in TSval.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "dataplane/tcp/syncookie.h"

namespace meshgate::dp::tcp {
namespace {

// The paper's key: bytes 00 01 .. 0f, read little-endian.
constexpr SipKey kPaperKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

uint64_t sip_of_counting_bytes(size_t n) {
  uint8_t msg[64];
  for (size_t i = 0; i < n; ++i) msg[i] = uint8_t(i);
  return siphash24(kPaperKey, msg, n);
}

TEST(TcpSipHash, matches_the_reference_test_vectors) {
  // Aumasson & Bernstein, Appendix A: the 15-byte message 00..0e -> a129ca6149be45e5; the
  // reference implementation's vectors for messages 00..n-1 of length 0, 1 and 8.
  EXPECT_EQ(sip_of_counting_bytes(15), 0xa129ca6149be45e5ULL);
  EXPECT_EQ(sip_of_counting_bytes(0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(sip_of_counting_bytes(1), 0x74f839c593dc67fdULL);
  EXPECT_EQ(sip_of_counting_bytes(8), 0x93f5f5799a932462ULL);
}

class TcpSynCookie : public ::testing::Test {
 protected:
  void SetUp() override {
    cookies_.set_secret(SipKey{0x0123456789abcdefULL, 0xfedcba9876543210ULL});
    tuple_.client = IpAddr::v4(0xc0000201);  // 192.0.2.1
    tuple_.server = IpAddr::v4(0xcb00710a);  // 203.0.113.10
    tuple_.client_port = htons(40000);
    tuple_.server_port = htons(443);
  }
  // The handshake's ACK: SEG.SEQ = client ISN + 1, SEG.ACK = our ISN + 1.
  bool check(const SynCookieTuple& t, uint32_t client_isn, uint32_t isn, uint32_t now_s,
             SynCookieResult* out = nullptr) const {
    SynCookieResult r;
    return cookies_.check(t, client_isn + 1, isn + 1, now_s, out ? out : &r);
  }

  SynCookies cookies_;
  SynCookieTuple tuple_;
  static constexpr uint32_t kClientIsn = 0xfffffffeu;  // the ACK's SEQ wraps to 0xffffffff
  static constexpr uint32_t kNow = 1'700'000'000;
};

TEST_F(TcpSynCookie, round_trip_recovers_isns_and_mss) {
  const uint32_t isn = cookies_.make_isn(tuple_, kClientIsn, 1460, kNow);
  SynCookieResult r;
  ASSERT_TRUE(check(tuple_, kClientIsn, isn, kNow, &r));
  EXPECT_EQ(r.client_isn, kClientIsn);
  EXPECT_EQ(r.server_isn, isn);
  EXPECT_EQ(r.mss, 1460);
}

TEST_F(TcpSynCookie, isn_holds_the_time_counter_and_mss_index_in_its_top_byte) {
  const uint32_t isn = cookies_.make_isn(tuple_, kClientIsn, 1460, kNow);
  EXPECT_EQ(isn >> 27, (kNow / 64) & 31);  // RFC 4987 §3.6: t mod 32, t in 64 s steps
  EXPECT_EQ((isn >> 24) & 7, 3u);          // 1460 is kSynCookieMss[3]
  // The ISN still rises with time (one step of t adds 2^27), as RFC 9293 §3.4.1 wants.
  const uint32_t later = cookies_.make_isn(tuple_, kClientIsn, 1460, kNow + 64);
  EXPECT_EQ((later >> 27) - (isn >> 27), 1u);
}

TEST_F(TcpSynCookie, every_mss_table_entry_round_trips) {
  for (uint32_t i = 0; i < kSynCookieMssCount; ++i) {
    const uint16_t mss = kSynCookieMss[i];
    const uint32_t isn = cookies_.make_isn(tuple_, kClientIsn, mss, kNow);
    SynCookieResult r;
    ASSERT_TRUE(check(tuple_, kClientIsn, isn, kNow, &r)) << mss;
    EXPECT_EQ(r.mss, mss);
    EXPECT_EQ((isn >> 24) & 7, i);
  }
}

TEST_F(TcpSynCookie, mss_rounds_down_to_the_table) {
  EXPECT_EQ(kSynCookieMss[SynCookies::mss_index(1459)], 1440);
  EXPECT_EQ(kSynCookieMss[SynCookies::mss_index(1300)], 1220);
  EXPECT_EQ(kSynCookieMss[SynCookies::mss_index(9000)], 8940);
  EXPECT_EQ(kSynCookieMss[SynCookies::mss_index(65535)], 8940);
  EXPECT_EQ(kSynCookieMss[SynCookies::mss_index(536)], 536);
  EXPECT_EQ(kSynCookieMss[SynCookies::mss_index(100)], 536);  // below the table: its floor
}

TEST_F(TcpSynCookie, a_changed_tuple_is_rejected) {
  const uint32_t isn = cookies_.make_isn(tuple_, kClientIsn, 1460, kNow);
  SynCookieTuple t = tuple_;
  t.client_port = htons(40001);
  EXPECT_FALSE(check(t, kClientIsn, isn, kNow));
  t = tuple_;
  t.server_port = htons(444);
  EXPECT_FALSE(check(t, kClientIsn, isn, kNow));
  t = tuple_;
  t.client = IpAddr::v4(0xc0000202);
  EXPECT_FALSE(check(t, kClientIsn, isn, kNow));
  t = tuple_;
  t.server = IpAddr::v6_bytes(tuple_.server.b);
  t.server.b[0] = 0x20;  // same low bytes, IPv6 now
  EXPECT_FALSE(check(t, kClientIsn, isn, kNow));
}

TEST_F(TcpSynCookie, a_wrong_sequence_or_acknowledgment_number_is_rejected) {
  const uint32_t isn = cookies_.make_isn(tuple_, kClientIsn, 1460, kNow);
  EXPECT_FALSE(check(tuple_, kClientIsn + 1, isn, kNow));  // SEQ not the client ISN + 1
  EXPECT_FALSE(check(tuple_, kClientIsn, isn + 1, kNow));  // MAC bits off by one
  EXPECT_FALSE(check(tuple_, kClientIsn, isn ^ (1u << 24), kNow));  // MSS index changed
  EXPECT_FALSE(check(tuple_, kClientIsn, isn ^ (1u << 27), kNow));  // counter changed
  // An index past the table is refused even before the MAC.
  EXPECT_FALSE(check(tuple_, kClientIsn, (isn & ~(7u << 24)) | (7u << 24), kNow));
}

TEST_F(TcpSynCookie, another_secret_rejects_the_cookie) {
  const uint32_t isn = cookies_.make_isn(tuple_, kClientIsn, 1460, kNow);
  SynCookies other;
  other.set_secret(SipKey{1, 2});
  SynCookieResult r;
  EXPECT_FALSE(other.check(tuple_, kClientIsn + 1, isn + 1, kNow, &r));
}

TEST_F(TcpSynCookie, the_current_and_previous_periods_are_accepted_and_nothing_older) {
  const uint32_t start = (kNow / 64) * 64;  // the first second of a period
  const uint32_t isn = cookies_.make_isn(tuple_, kClientIsn, 1460, start);
  EXPECT_TRUE(check(tuple_, kClientIsn, isn, start + 63));   // same period
  EXPECT_TRUE(check(tuple_, kClientIsn, isn, start + 64));   // previous period
  EXPECT_TRUE(check(tuple_, kClientIsn, isn, start + 127));
  EXPECT_FALSE(check(tuple_, kClientIsn, isn, start + 128)); // two periods: expired
  EXPECT_FALSE(check(tuple_, kClientIsn, isn, start - 1));   // made "in the future"
  // 32 periods later the 5 counter bits match again, but the MAC covers the full counter.
  EXPECT_FALSE(check(tuple_, kClientIsn, isn, start + 32 * 64));
  EXPECT_FALSE(check(tuple_, kClientIsn, isn, start + 33 * 64));
}

TEST_F(TcpSynCookie, tsval_carries_window_scale_and_sack_in_its_low_six_bits) {
  const uint32_t now_ts = 1000;  // 1000 = 15 * 64 + 40
  const uint32_t ts = SynCookies::make_tsval(now_ts, SynCookieTsOptions{7, true});
  EXPECT_EQ(ts & 63, 7u | 16u);
  EXPECT_EQ(ts, 960u + 23u);  // low bits 23 <= 40: stays in now_ts's 64-tick step
  const SynCookieTsOptions back = SynCookies::decode_tsecr(ts);
  EXPECT_EQ(back.wscale, 7);
  EXPECT_TRUE(back.sack_ok);
}

TEST_F(TcpSynCookie, tsval_never_runs_ahead_of_the_clock) {
  // now_ts = 965 has low bits 5 < 23: the same step would give 983 > 965, so one step back.
  const uint32_t ts = SynCookies::make_tsval(965, SynCookieTsOptions{7, true});
  EXPECT_EQ(ts, 919u);
  EXPECT_LE(ts, 965u);
  EXPECT_GT(ts, 965u - 128);
  // Across the TSval wrap.
  const uint32_t w = SynCookies::make_tsval(3, SynCookieTsOptions{7, true});
  EXPECT_EQ(w, 0xffffffc0u + 23u);
  EXPECT_LT(int32_t(w - 3u), 0);  // before now_ts in sequence-space terms
}

TEST_F(TcpSynCookie, no_window_scale_and_oversized_shifts_are_encoded_safely) {
  SynCookieTsOptions none = SynCookies::decode_tsecr(
      SynCookies::make_tsval(100000, SynCookieTsOptions{kNoWindowScale, false}));
  EXPECT_EQ(none.wscale, kNoWindowScale);
  EXPECT_FALSE(none.sack_ok);
  // RFC 7323 §2.3: a shift above 14 is used as 14.
  SynCookieTsOptions big = SynCookies::decode_tsecr(
      SynCookies::make_tsval(100000, SynCookieTsOptions{20, true}));
  EXPECT_EQ(big.wscale, 14);
  EXPECT_TRUE(big.sack_ok);
}

}  // namespace
}  // namespace meshgate::dp::tcp
