// TcpStack input: segment arrival (RFC 9293 §3.10.7) for listeners, SYN-SENT and the
// synchronized states, with RFC 5961 (RST / SYN / ACK validation), RFC 7323 (PAWS, TS.Recent,
// RTTM), RFC 5681 / 6582 / 6675 loss recovery, reassembly, SYN cookies and TIME-WAIT reuse.
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <algorithm>

#include "dataplane/packet/checksum.h"
#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"
#include "dataplane/tcp/seq.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::dp::tcp {

namespace {

// RFC 7323 §5.5: TS.Recent is invalid after 24 days idle (the peer's clock may have wrapped).
constexpr uint32_t kPawsIdleMs = 24u * 24 * 3600 * 1000;
// RFC 9293 §3.7.1 / RFC 8200 §5: the send MSS when the peer sends no MSS option.
constexpr uint16_t kPeerDefaultMssV4 = 536;
constexpr uint16_t kPeerDefaultMssV6 = 1220;
// Linux tcp_min_snd_mss: a peer advertising a tiny MSS must not make us send 1-byte segments.
constexpr uint16_t kMinSendMss = 48;
// Room for IP and TCP headers (with options) in a transmitted frame.
constexpr uint32_t kFrameHeaders = 40 + 60;

}  // namespace

struct TcpStack::Seg {
  TcpTuple tp;
  bool v6 = false;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint8_t flags = 0;
  uint16_t wnd = 0;
  uint32_t len = 0;      // payload bytes
  uint32_t seg_len = 0;  // payload + SYN + FIN (RFC 9293 §3.4 SEG.LEN)
  TcpOptions opt;
  bool has(uint8_t f) const { return (flags & f) != 0; }
};

void TcpStack::input(rte_mbuf* m, const PacketMeta& meta, uint64_t now_ns) {
  set_now(now_ns);
  count(kSegsIn);
  const uint32_t hdr_len = meta.l4_hdr_len;
  if (!meta.is_ip() || meta.l4_proto != kProtoTcp || hdr_len < kTcpHdrLen ||
      meta.l4_len < hdr_len || uint32_t(meta.l4_off) + hdr_len > m->data_len) {
    count(kDropMalformed);
    rte_pktmbuf_free(m);
    return;
  }
  Seg s;
  s.v6 = meta.l3 == L3::kIpv6;
  if ((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) != RTE_MBUF_F_RX_L4_CKSUM_GOOD) {
    const uint32_t pseudo =
        s.v6 ? csum_pseudo_v6(meta.src.b, meta.dst.b, kProtoTcp, meta.l4_len)
             : csum_pseudo_v4(meta.src.v4_ptr(), meta.dst.v4_ptr(), kProtoTcp, meta.l4_len);
    uint16_t raw = 0;
    if (rte_raw_cksum_mbuf(m, meta.l4_off, meta.l4_len, &raw) != 0 ||
        csum_fold(csum_add(pseudo, raw)) != 0xffff) {
      count(kDropBadChecksum);
      rte_pktmbuf_free(m);
      return;
    }
  }
  const uint8_t* th = rte_pktmbuf_mtod_offset(m, const uint8_t*, meta.l4_off);
  s.tp.local = meta.dst;
  s.tp.remote = meta.src;
  s.tp.local_port = rd16(th + 2);
  s.tp.remote_port = rd16(th);
  s.seq = rd32(th + 4);
  s.ack = rd32(th + 8);
  s.flags = th[13] & 0x3f;
  s.wnd = rd16(th + 14);
  s.len = meta.l4_len - hdr_len;
  s.seg_len = s.len + (s.has(kTcpSyn) ? 1 : 0) + (s.has(kTcpFin) ? 1 : 0);
  const bool bad_flags = (s.has(kTcpSyn) && (s.has(kTcpRst) || s.has(kTcpFin)));
  if (bad_flags || s.tp.local_port == 0 || s.tp.remote_port == 0 ||
      !parse_tcp_options(th + kTcpHdrLen, hdr_len - kTcpHdrLen, &s.opt)) {
    count(kDropMalformed);
    rte_pktmbuf_free(m);
    return;
  }
  // Keep the payload only: headers off the front, link padding off the back.
  rte_pktmbuf_adj(m, uint16_t(meta.l4_off + hdr_len));
  if (m->pkt_len > s.len && rte_pktmbuf_trim(m, uint16_t(m->pkt_len - s.len)) != 0) {
    count(kDropMalformed);
    rte_pktmbuf_free(m);
    return;
  }

  Tcb* t = lookup(s.tp);
  if (t != nullptr && t->state == TcpState::kTimeWait && s.has(kTcpSyn) && !s.has(kTcpAck)) {
    // RFC 9293 §3.6.1 / RFC 6191: a new SYN may take over a TIME-WAIT tuple when it is
    // provably newer (timestamp, or sequence number beyond the old connection's).
    if (find_listener(s.tp.local, s.tp.local_port) != nullptr && time_wait_reusable(t, s)) {
      count(kTimeWaitReused);
      terminate(t, 0);
      t = nullptr;
    }
  }
  if (t == nullptr) {
    Listener* l = find_listener(s.tp.local, s.tp.local_port);
    if (l != nullptr) {
      input_listen(l, m, s);
      return;
    }
    // RFC 9293 §3.10.7.1: CLOSED. Everything but a RST draws a RST.
    count(kDropNoConnection);
    if (s.has(kTcpSyn) && !s.has(kTcpAck)) count(kRefused);
    reply_rst(s);
    rte_pktmbuf_free(m);
    return;
  }
  const uint32_t gen = t->gen;
  if (t->state == TcpState::kSynSent) {
    input_syn_sent(t, m, s);
  } else {
    input_synchronized(t, m, s);
  }
  if (t->gen == gen) dispatch(t);
}

void TcpStack::reply_rst(const Seg& s) {
  if (s.has(kTcpRst)) return;
  // RFC 9293 §3.10.7.1: <SEQ=SEG.ACK><CTL=RST>, or <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
  if (s.has(kTcpAck)) {
    emit(s.tp, s.v6, s.ack, 0, kTcpRst, 0, TcpOptionsOut{}, nullptr, 0);
  } else {
    emit(s.tp, s.v6, 0, s.seq + s.seg_len, kTcpRst | kTcpAck, 0, TcpOptionsOut{}, nullptr, 0);
  }
}

uint8_t TcpStack::our_wscale() const {
  if (!cfg_.window_scaling) return 0;
  uint8_t ws = 0;
  while (ws < kMaxWindowScale && (uint64_t(65535) << ws) < cfg_.rcv_buf_bytes) ++ws;
  return ws;
}

void TcpStack::negotiate(Tcb* t, const TcpOptions& o) {
  // RFC 7323 §2.2: window scaling only when both SYNs carry the option; shifts above 14 are
  // used as 14 (§2.3).
  t->ws_ok = cfg_.window_scaling && o.wscale != 0xff;
  t->snd_wscale = t->ws_ok ? std::min<uint8_t>(o.wscale, kMaxWindowScale) : 0;
  t->rcv_wscale = t->ws_ok ? our_wscale() : 0;
  // RFC 7323 §3.2: timestamps when both SYNs carry them.
  t->ts_ok = cfg_.timestamps && o.has_ts;
  if (t->ts_ok) {
    t->ts_recent = o.tsval;
    t->ts_recent_ms = now_ms();
  }
  t->sack_ok = cfg_.sack && o.sack_permitted;  // RFC 2018 §2
  // RFC 9293 §3.7.1: Eff.snd.MSS = min(SendMSS, our MTU's MSS) - TCP options (the 12 bytes of
  // a timestamp on every segment); and a frame must fit one mbuf.
  t->peer_mss = o.mss != 0 ? o.mss : (t->v6 ? kPeerDefaultMssV6 : kPeerDefaultMssV4);
  uint32_t mss = std::min<uint32_t>(t->peer_mss, t->v6 ? cfg_.mss_v6 : cfg_.mss);
  if (t->ts_ok) mss -= std::min<uint32_t>(mss, 12);
  const uint32_t room = rte_pktmbuf_data_room_size(deps_.pool) - RTE_PKTMBUF_HEADROOM - kFrameHeaders;
  mss = std::min(mss, room);
  t->smss = uint16_t(std::max<uint32_t>(mss, kMinSendMss));
}

void TcpStack::enter_established(Tcb* t) {
  // A shutdown_write() during the handshake (simultaneous open) queued a FIN already.
  t->state = t->shut_wr ? TcpState::kFinWait1 : TcpState::kEstablished;
  if (t->syn_counted && t->listener != 0) {
    --listeners_[t->listener - 1].syn_recv;
    t->syn_counted = false;
  }
  // RFC 6298 §5.7 and RFC 5681 §3.1: a retransmitted SYN means a conservative start.
  t->rto.on_handshake_done(t->syn_rexmit);
  t->cc.init(cfg_.cc, t->smss, t->iss, t->sack_ok, t->syn_rexmit);
  t->sack.init(t->snd_una, t->smss);
  t->reass.init(t->rcv_nxt, cfg_.reass);
  t->retries = 0;
  // A listener's connection becomes the application's now. An active open the application
  // already closed (simultaneous open) finishes in the background without events.
  if (!t->orphaned) {
    t->app_owned = true;
    t->events |= kEvConnected;
  }
  t->last_rcv_ms = now_ms();
  count(kEstablished);
  if (t->ka_enabled) deps_.wheel->schedule(&t->keep_timer, t->last_rcv_ms + t->ka_idle_ms);
}

// ---- LISTEN -----------------------------------------------------------------------------------

void TcpStack::input_listen(Listener* l, rte_mbuf* m, const Seg& s) {
  // RFC 9293 §3.10.7.2: first RST (ignore), second ACK (RST unless a SYN cookie validates),
  // third SYN.
  if (s.has(kTcpRst)) {
    count(kDropListenState);
    rte_pktmbuf_free(m);
    return;
  }
  if (s.has(kTcpAck) && !s.has(kTcpSyn)) {
    if (cfg_.syncookies && l->cookies_sent && int32_t(l->cookie_until_ms - now_ms()) > 0) {
      Tcb* t = cookie_ack(l, s);
      if (t != nullptr) {
        const uint32_t gen = t->gen;
        input_synchronized(t, m, s);
        if (t->gen == gen) dispatch(t);
        return;
      }
    } else {
      count(kDropListenState);
    }
    reply_rst(s);
    rte_pktmbuf_free(m);
    return;
  }
  if (!s.has(kTcpSyn) || s.has(kTcpAck)) {
    count(kDropListenState);
    reply_rst(s);
    rte_pktmbuf_free(m);
    return;
  }
  rte_pktmbuf_free(m);  // data on a SYN is not kept: the peer sends it again after the handshake
  TcpEventFn fn = nullptr;
  void* user = nullptr;
  if (l->accept == nullptr || !l->accept(l->ctx, s.tp, &fn, &user)) {
    count(kRefused);
    reply_rst(s);
    return;
  }
  if (l->syn_recv >= cfg_.syn_backlog) {
    // RFC 4987 §3.6: past the backlog, answer without state.
    if (cfg_.syncookies) {
      syn_ack_cookie(l, s);
    } else {
      count(kDropTableFull);
    }
    return;
  }
  Tcb* t = alloc_tcb(s.tp);
  if (t == nullptr) {
    if (cfg_.syncookies) syn_ack_cookie(l, s);
    return;
  }
  init_tcb_common(t, s.v6);
  t->fn = fn;
  t->user = user;
  t->listener = uint16_t(l - listeners_.data() + 1);
  t->syn_counted = true;
  ++l->syn_recv;
  t->irs = s.seq;
  t->rcv_nxt = s.seq + 1;
  t->iss = make_isn(s.tp);
  t->snd_una = t->iss;
  t->snd_nxt = t->snd_max = t->iss + 1;
  t->sb.seq = t->iss + 1;
  negotiate(t, s.opt);
  // RFC 7323 §2.2: the window of a SYN is not scaled.
  t->snd_wnd = s.wnd;
  t->max_snd_wnd = s.wnd;
  t->snd_wl1 = s.seq;
  t->snd_wl2 = t->iss;
  t->state = TcpState::kSynReceived;
  t->rtt_start_ns = now_ns_;
  count(kPassiveOpens);
  send_syn(t);
  arm_rtx(t);
}

void TcpStack::syn_ack_cookie(Listener* l, const Seg& s) {
  const SynCookieTuple ct{s.tp.remote, s.tp.local, __builtin_bswap16(s.tp.remote_port),
                          __builtin_bswap16(s.tp.local_port)};
  const uint16_t client_mss = s.opt.mss != 0 ? s.opt.mss : (s.v6 ? kPeerDefaultMssV6 : kPeerDefaultMssV4);
  const uint32_t isn = cookies_.make_isn(ct, s.seq, client_mss, uint32_t(now_ns_ / 1'000'000'000));
  TcpOptionsOut o;
  o.mss = s.v6 ? cfg_.mss_v6 : cfg_.mss;
  if (cfg_.timestamps && s.opt.has_ts) {
    // syncookie.h: window scale and SACK-permitted ride in the low bits of our TSval.
    SynCookieTsOptions co;
    if (cfg_.window_scaling && s.opt.wscale != 0xff) {
      co.wscale = std::min<uint8_t>(s.opt.wscale, kMaxWindowScale);
      o.wscale = our_wscale();
    }
    co.sack_ok = cfg_.sack && s.opt.sack_permitted;
    o.sack_permitted = co.sack_ok;
    o.ts = true;
    o.tsval = SynCookies::make_tsval(ts_now(), co);
    o.tsecr = s.opt.tsval;
  }
  const uint16_t win = uint16_t(std::min<uint32_t>(cfg_.rcv_buf_bytes, 65535));
  emit(s.tp, s.v6, isn, s.seq + 1, kTcpSyn | kTcpAck, win, o, nullptr, 0);
  count(kSyncookiesSent);
  // Bare ACKs to this listener are checked as cookies for as long as a cookie can live.
  l->cookie_until_ms = now_ms() + 2 * kSynCookiePeriodS * 1000;
  l->cookies_sent = true;
}

Tcb* TcpStack::cookie_ack(Listener* l, const Seg& s) {
  const SynCookieTuple ct{s.tp.remote, s.tp.local, __builtin_bswap16(s.tp.remote_port),
                          __builtin_bswap16(s.tp.local_port)};
  SynCookieResult r;
  if (!cookies_.check(ct, s.seq, s.ack, uint32_t(now_ns_ / 1'000'000'000), &r)) {
    count(kSyncookiesFailed);
    return nullptr;
  }
  TcpEventFn fn = nullptr;
  void* user = nullptr;
  if (l->accept == nullptr || !l->accept(l->ctx, s.tp, &fn, &user)) {
    count(kRefused);
    return nullptr;
  }
  Tcb* t = alloc_tcb(s.tp);
  if (t == nullptr) return nullptr;
  init_tcb_common(t, s.v6);
  t->fn = fn;
  t->user = user;
  t->iss = r.server_isn;
  t->snd_una = t->snd_nxt = t->snd_max = t->iss + 1;
  t->sb.seq = t->iss + 1;
  t->irs = r.client_isn;
  t->rcv_nxt = t->irs + 1;
  TcpOptions o;
  o.mss = r.mss;
  if (cfg_.timestamps && s.opt.has_ts) {
    const SynCookieTsOptions co = SynCookies::decode_tsecr(s.opt.tsecr);
    o.has_ts = true;
    o.tsval = s.opt.tsval;
    o.wscale = co.wscale == kNoWindowScale ? 0xff : co.wscale;
    o.sack_permitted = co.sack_ok;
  }
  negotiate(t, o);
  enter_established(t);
  t->snd_wnd = uint32_t(s.wnd) << t->snd_wscale;
  t->max_snd_wnd = t->snd_wnd;
  t->snd_wl1 = s.seq;
  t->snd_wl2 = s.ack;
  // What our cookie SYN-ACK offered (unscaled), so data in this ACK is accepted.
  t->rcv_adv = t->rcv_nxt + std::min<uint32_t>(cfg_.rcv_buf_bytes, 65535);
  t->last_ack_sent = t->rcv_nxt;
  count(kSyncookiesValidated);
  return t;
}

// ---- SYN-SENT ---------------------------------------------------------------------------------

void TcpStack::input_syn_sent(Tcb* t, rte_mbuf* m, const Seg& s) {
  rte_pktmbuf_free(m);  // data on a SYN-ACK is not kept: the peer sends it again
  // RFC 9293 §3.10.7.3 first: the ACK must acknowledge our SYN.
  const bool ack_ok = s.has(kTcpAck) && seq_gt(s.ack, t->iss) && seq_le(s.ack, t->snd_max);
  if (s.has(kTcpAck) && !ack_ok) {
    reply_rst(s);
    return;
  }
  // Second: a RST is acceptable only with an acceptable ACK (RFC 5961 §3.2 leaves SYN-SENT so).
  if (s.has(kTcpRst)) {
    if (ack_ok) {
      count(kRstIn);
      terminate(t, kEvReset);
    } else {
      count(kDropRstIgnored);
    }
    return;
  }
  if (!s.has(kTcpSyn)) return;
  t->irs = s.seq;
  t->rcv_nxt = s.seq + 1;
  negotiate(t, s.opt);
  t->snd_wnd = s.wnd;  // RFC 7323 §2.2: never scaled in a SYN
  t->max_snd_wnd = s.wnd;
  t->snd_wl1 = s.seq;
  t->snd_wl2 = s.ack;
  if (ack_ok) {
    // RFC 6298 §2: the handshake's RTT (RFC 7323 §4.2: from the echo when timestamps are on).
    if (t->ts_ok && s.opt.tsecr != 0) {
      t->rto.on_timestamp_echo(ts_now(), s.opt.tsecr, 1000);
    } else if (!t->syn_rexmit) {
      t->rto.on_rtt_sample(uint32_t((now_ns_ - t->rtt_start_ns) / 1000));
    }
    t->snd_una = s.ack;
    t->rcv_adv = t->rcv_nxt;
    enter_established(t);
    // The SYN-ACK may be a SYN cookie of a listener whose accept queue is full: it then drops
    // our third ACK (and data at ISS + 1) without keeping state, and answers any later segment
    // with a RST <SEQ=SEG.ACK>, which is exactly our RCV.NXT and so resets us (Linux
    // cookie_v4_check, then tcp_v4_send_reset from LISTEN). Until the peer shows it holds the
    // connection, only the segment at ISS + 1 goes out (output()): its retransmissions are
    // valid cookies, so the connection completes once the backend accepts.
    t->peer_unconfirmed = true;
    t->ack_now = true;
    output(t);
    return;
  }
  // RFC 9293 §3.10.7.3 simultaneous open: SYN-RECEIVED, <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>.
  t->state = TcpState::kSynReceived;
  send_syn(t);
  arm_rtx(t);
}

// ---- Synchronized states ----------------------------------------------------------------------

bool TcpStack::time_wait_reusable(const Tcb* t, const Seg& s) const {
  // RFC 6191 §2: with timestamps on both, the SYN's TSval must be above TS.Recent; otherwise
  // (RFC 9293 §3.6.1, RFC 1122 4.2.2.13) its sequence number above the old RCV.NXT.
  if (t->ts_ok && s.opt.has_ts) return seq_gt(s.opt.tsval, t->ts_recent);
  return seq_gt(s.seq, t->rcv_nxt);
}

void TcpStack::challenge_ack(Tcb* t) {
  // RFC 5961 §7: rate-limited, per connection.
  const uint32_t now = now_ms();
  if (now - t->chack_window_ms >= 1000) {
    t->chack_window_ms = now;
    t->chack_count = 0;
  }
  if (t->chack_count >= cfg_.challenge_acks_per_sec) {
    count(kChallengeAcksLimited);
    return;
  }
  ++t->chack_count;
  count(kChallengeAcks);
  send_ack(t);
}

void TcpStack::input_synchronized(Tcb* t, rte_mbuf* m, const Seg& s) {
  const uint32_t now = now_ms();
  if (t->state == TcpState::kSynReceived && s.has(kTcpSyn) && s.seq == t->irs) {
    if (s.has(kTcpAck) && seq_gt(s.ack, t->snd_una) && seq_le(s.ack, t->snd_max)) {
      // RFC 9293 Figure 7, simultaneous open: the peer's SYN-ACK completes ours.
      rte_pktmbuf_free(m);
      if (t->ts_ok && s.opt.has_ts) t->ts_recent = s.opt.tsval;
      t->snd_una = s.ack;
      t->snd_wnd = s.wnd;
      t->max_snd_wnd = std::max(t->max_snd_wnd, t->snd_wnd);
      t->snd_wl1 = s.seq;
      t->snd_wl2 = s.ack;
      enter_established(t);
      t->ack_now = true;
      output(t);
      return;
    }
    if (!s.has(kTcpAck)) {
      // The peer retransmitted its SYN: our SYN-ACK was lost. Send it again.
      rte_pktmbuf_free(m);
      send_syn(t);
      return;
    }
  }

  // RFC 7323 §5.3 PAWS: a timestamp older than TS.Recent marks an old duplicate.
  if (t->ts_ok && s.opt.has_ts && !s.has(kTcpRst) && seq_lt(s.opt.tsval, t->ts_recent) &&
      now - t->ts_recent_ms < kPawsIdleMs) {
    count(kPawsRejected);
    send_ack(t);
    rte_pktmbuf_free(m);
    return;
  }

  // RFC 9293 §3.10.7.4 first: is the sequence number acceptable?
  const uint32_t wnd = seq_gt(t->rcv_adv, t->rcv_nxt) ? t->rcv_adv - t->rcv_nxt : 0;
  bool ok;
  if (s.seg_len == 0) {
    // The right edge itself is accepted too (as Linux does): a sender that filled our window
    // sends its ACKs from there, and dropping them would lose their SACK blocks and window
    // updates while we wait for the holes to fill.
    ok = wnd == 0 ? s.seq == t->rcv_nxt : in_window(s.seq, t->rcv_nxt, wnd + 1);
  } else {
    ok = wnd != 0 && (in_window(s.seq, t->rcv_nxt, wnd) ||
                      in_window(s.seq + s.seg_len - 1, t->rcv_nxt, wnd));
  }
  // A zero window still takes the ACK (and RST) of a segment at RCV.NXT; its data is dropped.
  const bool zero_window_data = !ok && wnd == 0 && s.seq == t->rcv_nxt;
  if (zero_window_data) ok = true;
  if (!ok) {
    if (!s.has(kTcpRst)) {
      if (t->state == TcpState::kTimeWait && s.has(kTcpFin)) {
        // RFC 9293 §3.10.7.4 eighth: a retransmitted FIN restarts the 2 MSL timeout.
        deps_.wheel->schedule(&t->rtx_timer, now + cfg_.time_wait_ms);
      }
      if (t->sack_ok && s.len > 0 && seq_le(s.seq + s.len, t->rcv_nxt)) {
        t->dsack = SackBlock{s.seq, s.seq + s.len};  // RFC 2883 §4
        t->dsack_pending = true;
      }
      send_ack(t);
    }
    count(seq_lt(s.seq, t->rcv_nxt) ? kDupSegs : kDropOutOfWindow);
    rte_pktmbuf_free(m);
    return;
  }

  // Second: RST (RFC 5961 §3.2).
  if (s.has(kTcpRst)) {
    rte_pktmbuf_free(m);
    if (t->state == TcpState::kTimeWait) {
      count(kDropRstIgnored);  // RFC 1337: no TIME-WAIT assassination
      return;
    }
    if (s.seq != t->rcv_nxt) {
      count(kDropRstIgnored);
      challenge_ack(t);
      return;
    }
    count(kRstIn);
    // A passive open in SYN-RECEIVED goes back to LISTEN (its TCB is freed); every other
    // connection is reset.
    terminate(t, t->app_owned ? kEvReset : 0);
    return;
  }
  // Fourth: a SYN in a synchronized state (RFC 5961 §4.2).
  if (s.has(kTcpSyn)) {
    rte_pktmbuf_free(m);
    count(kDropSynInWindow);
    challenge_ack(t);
    return;
  }
  // Fifth: no ACK, no processing.
  if (!s.has(kTcpAck)) {
    rte_pktmbuf_free(m);
    return;
  }
  // An acceptable segment past the SYN-ACK comes from a socket: the peer holds the connection.
  t->peer_unconfirmed = false;
  // RFC 7323 §4.3: TS.Recent from a segment that is acceptable and covers Last.ACK.sent.
  if (t->ts_ok && s.opt.has_ts && seq_ge(s.opt.tsval, t->ts_recent) &&
      seq_le(s.seq, t->last_ack_sent)) {
    t->ts_recent = s.opt.tsval;
    t->ts_recent_ms = now;
  }
  t->last_rcv_ms = now;
  t->ka_probes = 0;

  if (t->state == TcpState::kSynReceived) {
    // RFC 9293 §3.10.7.4 fifth, SYN-RECEIVED: an ACK of our SYN establishes the connection.
    if (!(seq_gt(s.ack, t->snd_una) && seq_le(s.ack, t->snd_max))) {
      rte_pktmbuf_free(m);
      reply_rst(s);
      return;
    }
    if (t->ts_ok && s.opt.has_ts && s.opt.tsecr != 0) {
      t->rto.on_timestamp_echo(ts_now(), s.opt.tsecr, 1000);
    } else if (!t->syn_rexmit) {
      t->rto.on_rtt_sample(uint32_t((now_ns_ - t->rtt_start_ns) / 1000));
    }
    t->snd_una = s.ack;
    enter_established(t);
    // This ACK carries the first scaled window (RFC 7323 §2.2).
    t->snd_wnd = uint32_t(s.wnd) << t->snd_wscale;
    t->max_snd_wnd = std::max(t->max_snd_wnd, t->snd_wnd);
    t->snd_wl1 = s.seq;
    t->snd_wl2 = s.ack;
  }
  if (!process_ack(t, s)) {
    rte_pktmbuf_free(m);
    return;
  }

  // Seventh: segment text.
  if (s.len > 0 && !zero_window_data) {
    switch (t->state) {
      case TcpState::kEstablished:
      case TcpState::kFinWait1:
      case TcpState::kFinWait2:
        if (!t->app_owned) {
          // RFC 9293 §3.10.4 / RFC 2525 2.17: nobody will read it: reset.
          rte_pktmbuf_free(m);
          send_rst(t);
          terminate(t, 0);
          return;
        }
        process_data(t, m, s);
        m = nullptr;
        break;
      default: break;  // the peer already sent its FIN: ignore
    }
  }
  if (m != nullptr) rte_pktmbuf_free(m);
  if (zero_window_data && s.len > 0) t->ack_now = true;

  // Eighth: FIN, once every byte before it arrived.
  if (s.has(kTcpFin) && !t->peer_fin) {
    const uint32_t fin = s.seq + s.len;
    if (seq_gt(fin, t->rcv_nxt)) {
      t->ooo_fin = true;
      t->peer_fin_seq = fin;
      t->ack_now = true;
    } else if (fin == t->rcv_nxt) {
      t->ooo_fin = true;
      t->peer_fin_seq = fin;
    }
  }
  if (t->ooo_fin && !t->peer_fin && t->rcv_nxt == t->peer_fin_seq) process_fin(t);
  output(t);
}

bool TcpStack::process_ack(Tcb* t, const Seg& s) {
  // RFC 5961 §5.2: acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.NXT]; RFC 9293 §3.10.7.4:
  // an ACK of something not yet sent draws an ACK.
  if (seq_gt(s.ack, t->snd_max)) {
    count(kDropBadAck);
    send_ack(t);
    return false;
  }
  if (seq_lt(s.ack, t->snd_una - t->max_snd_wnd)) {
    count(kDropBadAck);
    challenge_ack(t);
    return false;
  }
  const uint32_t seg_wnd = uint32_t(s.wnd) << t->snd_wscale;
  const uint32_t old_wnd = t->snd_wnd;
  // RFC 9293 §3.10.7.4: update the window from the newest segment (SND.WL1 / SND.WL2).
  if (seq_lt(t->snd_wl1, s.seq) || (t->snd_wl1 == s.seq && seq_le(t->snd_wl2, s.ack))) {
    t->snd_wnd = seg_wnd;
    t->snd_wl1 = s.seq;
    t->snd_wl2 = s.ack;
    t->max_snd_wnd = std::max(t->max_snd_wnd, seg_wnd);
  }
  const uint64_t now_us = now_ns_ / 1000;
  const bool new_data = seq_gt(s.ack, t->snd_una);
  uint32_t acked = 0;
  bool cwnd_limited = false;
  if (new_data) {
    acked = s.ack - t->snd_una;
    cwnd_limited = (t->snd_max - t->snd_una) + t->smss >= t->cc.cwnd_bytes();
    // RFC 7323 §4.2 RTTM (only an ACK that advances SND.UNA), else Karn's timed segment.
    if (t->ts_ok && s.opt.has_ts && s.opt.tsecr != 0) {
      t->rto.on_timestamp_echo(ts_now(), s.opt.tsecr, 1000);
    } else if (t->rtt_timing && seq_ge(s.ack, t->rtt_seq)) {
      t->rto.on_rtt_sample(uint32_t((now_ns_ - t->rtt_start_ns) / 1000));
      t->rtt_timing = false;
    }
    if (t->eifel_check) {
      t->eifel_check = false;
      if (s.opt.has_ts && s.opt.tsecr != 0 && seq_lt(s.opt.tsecr, t->rto_tsval) && t->cc.undo()) {
        // RFC 3522 detection, RFC 4015 response: the original transmission arrived. Restore
        // the window and carry on after what was already sent instead of going back N.
        count(kSpuriousRto);
        t->snd_nxt = t->snd_max;
      }
    }
    free_send_acked(t, s.ack);
    t->snd_una = s.ack;
    if (seq_lt(t->snd_nxt, t->snd_una)) t->snd_nxt = t->snd_una;
    t->retries = 0;
    t->persist_backoff = 0;
    // RFC 6298 §5.3: new data acknowledged restarts the timer (output() re-arms it).
    t->tlp_sent = false;
    if (t->rtx_kind == RtxKind::kRto || t->rtx_kind == RtxKind::kTlp ||
        t->rtx_kind == RtxKind::kPersist) {
      deps_.wheel->cancel(&t->rtx_timer);
      t->rtx_kind = RtxKind::kNone;
    }
    if (t->want_writable && t->sb.bytes < cfg_.snd_buf_bytes && mem_room() > 0) {
      t->want_writable = false;
      t->events |= kEvWritable;
    }
  }

  if (t->sack_ok) {
    // RFC 6675 §5.
    const SackAckResult r = t->sack.on_ack(s.ack, s.opt.sack, s.opt.nsack);
    if (r.dup_ack) count(kDupAcksIn);
    if (r.exit_recovery) {
      t->cc.on_exit_recovery(t->snd_max - t->snd_una);
    } else if (new_data && !t->cc.in_recovery()) {
      t->cc.on_ack(acked, now_us, t->rto.srtt_us(), cwnd_limited);
    }
    if (r.enter_recovery && !t->cc.in_recovery()) {
      count(kFastRetrans);
      const SackSegment seg = t->sack.enter_recovery();
      t->cc.on_enter_recovery(now_us, t->snd_max - t->snd_una, t->snd_max);
      t->snd_nxt = t->snd_max;
      xmit(t, seg.seq, seg.len);
    }
  } else if (new_data) {
    t->dupacks = 0;
    if (t->cc.in_recovery()) {
      // RFC 6582 §3.2 step 5.
      if (t->cc.is_full_ack(s.ack)) {
        t->cc.on_exit_recovery(t->snd_max - t->snd_una);
      } else {
        t->cc.on_partial_ack(acked);
        retransmit_una(t);
      }
    } else {
      t->cc.on_ack(acked, now_us, t->rto.srtt_us(), cwnd_limited);
    }
  } else if (s.ack == t->snd_una && s.len == 0 && !s.has(kTcpSyn | kTcpFin) &&
             seg_wnd == old_wnd && t->snd_una != t->snd_max) {
    // RFC 5681 §2: a duplicate ACK.
    count(kDupAcksIn);
    if (t->dupacks < 255) ++t->dupacks;
    if (t->cc.in_recovery()) {
      t->cc.on_dup_ack();  // RFC 5681 §3.2 step 4
    } else if (t->dupacks == kDupThresh && t->cc.may_fast_retransmit(s.ack)) {
      // RFC 5681 §3.2 steps 2-3, RFC 6582 §3.2 step 2.
      count(kFastRetrans);
      t->cc.on_enter_recovery(now_us, t->snd_max - t->snd_una, t->snd_max);
      t->snd_nxt = t->snd_max;
      retransmit_una(t);
    }
  }

  // Our FIN acknowledged?
  const bool fin_acked = t->fin_sent && seq_gt(t->snd_una, t->fin_seq);
  switch (t->state) {
    case TcpState::kFinWait1:
      if (fin_acked) {
        t->state = TcpState::kFinWait2;
        if (!t->app_owned) {
          t->rtx_kind = RtxKind::kFinWait2;
          deps_.wheel->schedule(&t->rtx_timer, now_ms() + cfg_.fin_wait2_ms);
        }
      }
      break;
    case TcpState::kClosing:
      if (fin_acked) enter_time_wait(t);
      break;
    case TcpState::kLastAck:
      if (fin_acked) {
        terminate(t, kEvClosed);
        return false;
      }
      break;
    default: break;
  }
  return true;
}

void TcpStack::process_data(Tcb* t, rte_mbuf* m, const Seg& s) {
  // The byte budget alone would let a peer sending tiny segments pin one mbuf per byte: cap
  // the mbufs a connection holds too (dropped data is not acknowledged; the sender resends).
  if (t->rq_mbufs + t->reass.queued_mbufs() + m->nb_segs > max_rcv_mbufs()) {
    count(kDropRcvBufFull);
    rte_pktmbuf_free(m);
    t->ack_now = true;
    return;
  }
  const uint32_t queued_before = t->reass.queued_bytes();
  const bool had_holes = !t->reass.empty();
  const uint32_t wnd = seq_gt(t->rcv_adv, t->rcv_nxt) ? t->rcv_adv - t->rcv_nxt : 0;
  const ReassResult r = t->reass.add(m, s.seq, wnd);
  mem_used_ += t->reass.queued_bytes();
  mem_used_ -= queued_before;
  if (r.dup_len > 0 && t->sack_ok) {
    t->dsack = SackBlock{r.dup_seq, r.dup_seq + r.dup_len};  // RFC 2883 §4
    t->dsack_pending = true;
  }
  switch (r.status) {
    case ReassStatus::kDelivered:
      if (t->rq_tail == nullptr) {
        t->rq_head = r.data;
      } else {
        t->rq_tail->next = r.data;
      }
      t->rq_tail = rte_pktmbuf_lastseg(r.data);
      t->rq_bytes += r.len;
      t->rq_mbufs += r.data->nb_segs;
      mem_used_ += r.len;
      count(kBytesIn, r.len);
      t->rcv_nxt = t->reass.rcv_nxt();
      t->events |= kEvReadable;
      // RFC 5681 §4.2: ACK at once when the segment filled (part of) a hole.
      if (had_holes || r.dup_len > 0) {
        t->ack_now = true;
      } else {
        schedule_ack(t);
      }
      break;
    case ReassStatus::kQueued:
      count(kOooSegs);
      t->ack_now = true;  // RFC 5681 §4.2: out-of-order data is ACKed at once
      break;
    case ReassStatus::kDuplicate:
      count(kDupSegs);
      t->ack_now = true;
      break;
    case ReassStatus::kOutOfWindow:
      count(kDropOutOfWindow);
      t->ack_now = true;
      break;
    case ReassStatus::kNoRoom:
      count(kDropReassNoRoom);
      t->ack_now = true;
      break;
  }
}

void TcpStack::process_fin(Tcb* t) {
  // RFC 9293 §3.10.7.4 eighth.
  t->reass.advance(1);
  t->rcv_nxt = t->reass.rcv_nxt();
  t->peer_fin = true;
  t->ooo_fin = false;
  t->ack_now = true;
  t->events |= kEvPeerFin;
  switch (t->state) {
    case TcpState::kSynReceived:
    case TcpState::kEstablished: t->state = TcpState::kCloseWait; break;
    case TcpState::kFinWait1:
      if (t->fin_sent && seq_gt(t->snd_una, t->fin_seq)) {
        enter_time_wait(t);
      } else {
        t->state = TcpState::kClosing;  // simultaneous close
      }
      break;
    case TcpState::kFinWait2: enter_time_wait(t); break;
    default: break;
  }
}

void TcpStack::free_send_acked(Tcb* t, uint32_t ack) {
  SendBuf& sb = t->sb;
  const uint32_t upto = seq_min(ack, t->data_end());  // SYN and FIN are not data
  if (!seq_gt(upto, sb.seq)) return;
  uint32_t n = upto - sb.seq;
  sb.seq = upto;
  sb.bytes -= n;
  mem_used_ -= n;
  sb.cur = nullptr;
  while (n > 0 && sb.head != nullptr) {
    rte_mbuf* s = sb.head;
    if (n >= s->data_len) {
      n -= s->data_len;
      sb.head = s->next;
      s->next = nullptr;
      rte_pktmbuf_free_seg(s);
    } else {
      s->data_off = uint16_t(s->data_off + n);
      s->data_len = uint16_t(s->data_len - n);
      n = 0;
    }
  }
  if (sb.head == nullptr) sb.tail = nullptr;
}

}  // namespace meshgate::dp::tcp
