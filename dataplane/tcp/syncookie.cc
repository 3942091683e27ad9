#include "dataplane/tcp/syncookie.h"

#include <cstring>

namespace meshgate::dp::tcp {

namespace {

constexpr uint32_t kCountShift = 27;  // t mod 32 in bits 31..27
constexpr uint32_t kMssShift = 24;    // MSS index in bits 26..24
constexpr uint32_t kMacMask = 0xffffff;
constexpr uint32_t kTsMask = (1u << kSynCookieTsBits) - 1;
constexpr uint32_t kTsSack = 1u << 4;
constexpr uint32_t kTsWscaleMask = 0xf;

static_assert(kSynCookieMssCount <= 8, "the MSS index has 3 bits");

}  // namespace

uint32_t SynCookies::mss_index(uint16_t client_mss) {
  uint32_t i = kSynCookieMssCount - 1;
  while (i > 0 && client_mss < kSynCookieMss[i]) --i;
  return i;
}

uint32_t SynCookies::mac24(const SynCookieTuple& t, uint32_t client_isn, uint32_t count,
                           uint32_t mss_idx) const {
  // 16 + 16 + 2 + 2 + 4 + 4 + 4 = 48 bytes: six SipHash words, no tail bytes.
  uint8_t msg[48];
  std::memcpy(msg, t.client.b, 16);
  std::memcpy(msg + 16, t.server.b, 16);
  std::memcpy(msg + 32, &t.client_port, 2);
  std::memcpy(msg + 34, &t.server_port, 2);
  std::memcpy(msg + 36, &client_isn, 4);
  std::memcpy(msg + 40, &count, 4);
  std::memcpy(msg + 44, &mss_idx, 4);
  return uint32_t(siphash24(key_, msg, sizeof(msg))) & kMacMask;
}

uint32_t SynCookies::make_isn(const SynCookieTuple& t, uint32_t client_isn, uint16_t client_mss,
                              uint32_t now_s) const {
  const uint32_t count = now_s / kSynCookiePeriodS;
  const uint32_t idx = mss_index(client_mss);
  return (count << kCountShift) | (idx << kMssShift) | mac24(t, client_isn, count, idx);
}

bool SynCookies::check(const SynCookieTuple& t, uint32_t seg_seq, uint32_t seg_ack,
                       uint32_t now_s, SynCookieResult* out) const {
  const uint32_t isn = seg_ack - 1;
  const uint32_t client_isn = seg_seq - 1;
  const uint32_t now = now_s / kSynCookiePeriodS;
  // The 5 bits say which of the two acceptable periods made the cookie; any other value is
  // too old (or forged).
  const uint32_t t5 = isn >> kCountShift;
  uint32_t count;
  if ((now & 31) == t5) {
    count = now;
  } else if (((now - 1) & 31) == t5) {
    count = now - 1;
  } else {
    return false;
  }
  const uint32_t idx = (isn >> kMssShift) & 7;
  if (idx >= kSynCookieMssCount) return false;
  if ((isn & kMacMask) != mac24(t, client_isn, count, idx)) return false;
  out->client_isn = client_isn;
  out->server_isn = isn;
  out->mss = kSynCookieMss[idx];
  return true;
}

uint32_t SynCookies::make_tsval(uint32_t now_ts, const SynCookieTsOptions& opt) {
  // RFC 7323 §2.3: a shift above 14 is used as 14.
  const uint32_t ws = opt.wscale == kNoWindowScale
                          ? kNoWindowScale
                          : (opt.wscale > kMaxWindowScale ? kMaxWindowScale : opt.wscale);
  const uint32_t bits = ws | (opt.sack_ok ? kTsSack : 0);
  uint32_t ts = (now_ts & ~kTsMask) | bits;
  if (bits > (now_ts & kTsMask)) ts -= 1u << kSynCookieTsBits;
  return ts;
}

SynCookieTsOptions SynCookies::decode_tsecr(uint32_t ts_ecr) {
  SynCookieTsOptions opt;
  opt.wscale = uint8_t(ts_ecr & kTsWscaleMask);
  opt.sack_ok = (ts_ecr & kTsSack) != 0;
  return opt;
}

}  // namespace meshgate::dp::tcp
