// SYN cookies (RFC 4987 §3.6, in the manner of Linux's net/ipv4/syncookies.c): a listener under
// SYN flood answers without keeping state, encoding what it must remember in the ISN of its
// SYN-ACK, and rebuilds the connection from the client's ACK.
//
// ISN layout (RFC 4987 §3.6):  31..27  t mod 32, t = now_s / 64 (a coarse time counter)
//                              26..24  index into kSynCookieMss (the client's MSS, rounded down)
//                              23..0   24 bits of SipHash-2-4(secret, client addr/port,
//                                      our addr/port, client ISN, t, MSS index)
// The MAC covers the full t, not t mod 32, so a cookie cannot come back to life 32 periods
// later. check() accepts the current and the previous period: a cookie lives 64-128 s.
//
// Options a cookie cannot hold (RFC 4987 §3.6 names the loss of window scaling and SACK as the
// cost of cookies): when the client sent timestamps (RFC 7323), the low 6 bits of our SYN-ACK's
// TSval carry its window scale and SACK-permitted, as Linux does; the client echoes them in
// TSecr. Without timestamps the connection runs without window scaling and SACK. Our own
// window scale must be recomputable from the listener's config (it is not stored).
//
// Threads: SynCookies is per worker. The control thread sets the secret before the worker
// starts (or publishes a new object through the snapshot, never writing one a worker reads);
// make_isn() / check() then run on that worker only. No allocation, no locks.
#pragma once

#include <cstdint>

#include "dataplane/common/net_types.h"
#include "dataplane/tcp/siphash.h"

namespace meshgate::dp::tcp {

// MSS values a cookie can carry: the RFC 9293 §3.7.1 IPv4 default (536), the IPv6 minimum
// (1280 - 60), common tunnel/PPPoE paths, Ethernet (1500 - 40), 9000-byte jumbo frames.
inline constexpr uint16_t kSynCookieMss[] = {536, 1220, 1440, 1460, 8940};
inline constexpr uint32_t kSynCookieMssCount = sizeof(kSynCookieMss) / sizeof(kSynCookieMss[0]);
// RFC 4987 §3.6: t increments every 64 seconds.
inline constexpr uint32_t kSynCookiePeriodS = 64;
// TSval low bits (Linux TSBITS): bits 0-3 window scale (kNoWindowScale = none), bit 4 SACK.
inline constexpr uint32_t kSynCookieTsBits = 6;
inline constexpr uint8_t kNoWindowScale = 0xf;
// RFC 7323 §2.3: the largest shift a window scale option may carry.
inline constexpr uint8_t kMaxWindowScale = 14;

// The connection as the client's SYN (and its ACK) carries it.
struct SynCookieTuple {
  IpAddr client;
  IpAddr server;
  uint16_t client_port = 0;  // network order, as on the wire
  uint16_t server_port = 0;
};

// What check() rebuilds.
struct SynCookieResult {
  uint32_t client_isn = 0;  // IRS
  uint32_t server_isn = 0;  // our ISS
  uint16_t mss = 0;         // the client's MSS, rounded down to a table entry
};

// Options carried in TSval.
struct SynCookieTsOptions {
  uint8_t wscale = kNoWindowScale;  // the client's shift count, kNoWindowScale when it sent none
  bool sack_ok = false;
};

class SynCookies {
 public:
  // Control thread, before the worker uses this object.
  void set_secret(const SipKey& key) { key_ = key; }

  // The table entry a client MSS is rounded down to (the smallest when it is below them all,
  // like Linux: RFC 9293 §3.7.1 makes 536 every IPv4 host's minimum).
  static uint32_t mss_index(uint16_t client_mss);

  // The ISN for the SYN-ACK answering a SYN with sequence number `client_isn` and MSS option
  // `client_mss` (536 when absent, RFC 9293 §3.7.1) at time `now_s`.
  uint32_t make_isn(const SynCookieTuple& t, uint32_t client_isn, uint16_t client_mss,
                    uint32_t now_s) const;

  // Validates the ACK completing the handshake (SEG.SEQ = client ISN + 1, SEG.ACK = our
  // ISN + 1). False when the MAC does not match, the period is neither the current nor the
  // previous one, or the MSS index is out of the table.
  bool check(const SynCookieTuple& t, uint32_t seg_seq, uint32_t seg_ack, uint32_t now_s,
             SynCookieResult* out) const;

  // TSval for the SYN-ACK: now_ts with its low 6 bits replaced by the options, and moved back
  // one 64-tick step if that put it in the future (TSval must not run ahead of our clock, or
  // the peer's PAWS check, RFC 7323 §5, would reject our next segments).
  static uint32_t make_tsval(uint32_t now_ts, const SynCookieTsOptions& opt);
  // The options back from the TSecr of the client's ACK.
  static SynCookieTsOptions decode_tsecr(uint32_t ts_ecr);

 private:
  uint32_t mac24(const SynCookieTuple& t, uint32_t client_isn, uint32_t count,
                 uint32_t mss_idx) const;

  SipKey key_;
};

}  // namespace meshgate::dp::tcp
