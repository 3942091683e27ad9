// TcpStack output: what to send (window, congestion and SACK recovery), building IPv4/IPv6 +
// TCP frames, the receive window we advertise, and the timers (RTO, persist, delayed ACK,
// keepalive, TIME-WAIT, FIN-WAIT-2).
#include <rte_mbuf.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"
#include "dataplane/tcp/seq.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::dp::tcp {

namespace {

// Bounds one output() call: a burst of at most this many segments; the ACK clock sends more.
constexpr uint32_t kMaxBurstSegments = 64;
// IPv6 header + the largest TCP header: what a frame needs beside its payload.
constexpr uint32_t kMaxHeaders = 40 + 60;

// Copies [seq, seq + len) of the send buffer to dst, moving the buffer's cursor there.
void copy_send_data(SendBuf* sb, uint32_t seq, uint32_t len, uint8_t* dst) {
  rte_mbuf* s = sb->head;
  uint32_t sseq = sb->seq;
  if (sb->cur != nullptr && seq_ge(seq, sb->cur_seq)) {
    s = sb->cur;
    sseq = sb->cur_seq;
  }
  while (seq_ge(seq, sseq + s->data_len)) {
    sseq += s->data_len;
    s = s->next;
  }
  sb->cur = s;
  sb->cur_seq = sseq;
  uint32_t off = seq - sseq;
  while (len > 0) {
    const uint32_t n = std::min<uint32_t>(len, s->data_len - off);
    std::memcpy(dst, rte_pktmbuf_mtod_offset(s, const uint8_t*, off), n);
    dst += n;
    len -= n;
    off = 0;
    if (len > 0) s = s->next;
  }
}

}  // namespace

// ---- Frames -----------------------------------------------------------------------------------

bool TcpStack::emit(const TcpTuple& tp, bool v6, uint32_t seq, uint32_t ack, uint8_t flags,
                    uint16_t win, const TcpOptionsOut& opts, const SendBuf* data, uint32_t len) {
  rte_mbuf* m = rte_pktmbuf_alloc(deps_.pool);
  if (m == nullptr) {
    count(kDropNoMbuf);
    return false;
  }
  uint8_t optbuf[40];
  const uint32_t olen = write_tcp_options(optbuf, opts);
  const uint32_t ip_hl = v6 ? kIpv6HdrLen : kIpv4HdrLen;
  const uint32_t tcp_hl = kTcpHdrLen + olen;
  const uint32_t total = ip_hl + tcp_hl + len;
  auto* ip = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(total)));
  if (ip == nullptr) {
    rte_pktmbuf_free(m);
    count(kDropNoMbuf);
    return false;
  }
  uint8_t* th = ip + ip_hl;
  uint32_t pseudo;
  if (v6) {
    wr32(ip, 0x60000000u);
    wr16(ip + 4, uint16_t(tcp_hl + len));
    ip[6] = kProtoTcp;
    ip[7] = cfg_.ttl;
    std::memcpy(ip + 8, tp.local.b, 16);
    std::memcpy(ip + 24, tp.remote.b, 16);
    pseudo = csum_pseudo_v6(ip + 8, ip + 24, kProtoTcp, tcp_hl + len);
  } else {
    ip[0] = 0x45;
    ip[1] = 0;
    wr16(ip + 2, uint16_t(total));
    // RFC 6864 §4.1: an atomic datagram (DF set) may carry any ID; 0 it is.
    wr16(ip + 4, 0);
    wr16(ip + 6, 0x4000);
    ip[8] = cfg_.ttl;
    ip[9] = kProtoTcp;
    std::memcpy(ip + 12, tp.local.v4_ptr(), 4);
    std::memcpy(ip + 16, tp.remote.v4_ptr(), 4);
    csum_store(ip + 10, ipv4_header_csum(ip, kIpv4HdrLen));
    pseudo = csum_pseudo_v4(ip + 12, ip + 16, kProtoTcp, tcp_hl + len);
  }
  wr16(th, tp.local_port);
  wr16(th + 2, tp.remote_port);
  wr32(th + 4, seq);
  wr32(th + 8, ack);
  th[12] = uint8_t((tcp_hl / 4) << 4);
  th[13] = flags;
  wr16(th + 14, win);
  wr16(th + 16, 0);
  wr16(th + 18, 0);
  std::memcpy(th + kTcpHdrLen, optbuf, olen);
  if (len > 0) copy_send_data(const_cast<SendBuf*>(data), seq, len, th + tcp_hl);
  csum_store(th + 16, csum_finish(csum_partial(th, tcp_hl + len, pseudo)));
  m->l2_len = 0;
  m->l3_len = uint16_t(ip_hl);
  m->l4_len = uint16_t(tcp_hl);
  m->packet_type = (v6 ? RTE_PTYPE_L3_IPV6 : RTE_PTYPE_L3_IPV4) | RTE_PTYPE_L4_TCP;
  count(kSegsOut);
  count(kBytesOut, len);
  if (flags & kTcpRst) count(kRstOut);
  deps_.output(deps_.output_ctx, m, tp);
  return true;
}

uint32_t TcpStack::rcv_window(Tcb* t, bool* mem_limited) const {
  const uint64_t used = uint64_t(t->rq_bytes) + t->reass.queued_bytes();
  uint64_t space = cfg_.rcv_buf_bytes > used ? cfg_.rcv_buf_bytes - used : 0;
  // The worker budget: a worker near its limit stops offering new window on every connection.
  if (mem_limited != nullptr) *mem_limited = mem_room() < space;
  space = std::min(space, mem_room());
  space = std::min<uint64_t>(space, uint64_t(65535) << t->rcv_wscale);
  // RFC 9293 §3.8.6.2.2 receiver SWS avoidance: move the right edge only by at least
  // min(RCV.BUFF / 2, Eff.snd.MSS).
  const uint32_t adv = seq_gt(t->rcv_adv, t->rcv_nxt) ? t->rcv_adv - t->rcv_nxt : 0;
  const uint32_t step = std::min<uint32_t>(cfg_.rcv_buf_bytes / 2, t->v6 ? cfg_.mss_v6 : cfg_.mss);
  if (space > adv && space - adv < step) space = adv;
  return uint32_t(space);
}

uint16_t TcpStack::window_field(Tcb* t) {
  const uint32_t ws = t->rcv_wscale;
  bool mem_limited = false;
  const uint32_t own = rcv_window(t, &mem_limited);
  if (mem_limited) {
    t->wnd_mem_limited = true;  // advance() sends an update when memory frees
    wnd_mem_limited_ = true;
  }
  const uint32_t adv = seq_gt(t->rcv_adv, t->rcv_nxt) ? t->rcv_adv - t->rcv_nxt : 0;
  // RFC 9293 §3.8.6.2.2 / RFC 7323 §2.4: never shrink the window we offered; round the scaled
  // field up when rounding down would move the right edge back.
  const uint32_t wnd = std::max(own, adv);
  uint32_t field = std::min<uint32_t>(wnd >> ws, 65535);
  if ((uint64_t(field) << ws) < adv) field = std::min<uint32_t>((adv + (1u << ws) - 1) >> ws, 65535);
  t->rcv_adv = seq_max(t->rcv_adv, t->rcv_nxt + (field << ws));
  return uint16_t(field);
}

void TcpStack::send_segment(Tcb* t, uint32_t seq, uint32_t len, uint8_t flags) {
  flags |= kTcpAck;
  TcpOptionsOut o;
  if (t->ts_ok) {
    o.ts = true;
    o.tsval = ts_now();
    o.tsecr = t->ts_recent;
  }
  SackBlock blocks[kMaxSackBlocksIn];
  if (t->sack_ok && (t->dsack_pending || !t->reass.empty())) {
    // RFC 2018 §4: as many blocks as fit, 3 beside a timestamp; RFC 2883 D-SACK first. On a
    // data segment, options count against the MSS (RFC 6691, RFC 9293 §3.7.1): smss leaves
    // room for the timestamp only, so a full segment carries no blocks (2 NOPs, kind and
    // length, then 8 bytes each) — pure ACKs, sent on every out-of-order arrival, carry them
    // all, and the scoreboard's segment sizes stay as they are.
    uint32_t max = t->ts_ok ? 3 : 4;
    if (len > 0) {
      const uint32_t spare = t->smss > len ? t->smss - len : 0;
      max = std::min<uint32_t>(max, spare >= 12 ? (spare - 4) / 8 : 0);
    }
    o.nsack = uint8_t(t->reass.sack_blocks(blocks, max, t->dsack_pending ? &t->dsack : nullptr));
    o.sack = blocks;
  }
  const uint16_t win = window_field(t);
  emit(t->tuple, t->v6, seq, t->rcv_nxt, flags, win, o, &t->sb, len);
  t->last_ack_sent = t->rcv_nxt;
  t->ack_now = false;
  t->dsack_pending = false;
  deps_.wheel->cancel(&t->delack_timer);
}

void TcpStack::send_syn(Tcb* t) {
  TcpOptionsOut o;
  o.mss = t->v6 ? cfg_.mss_v6 : cfg_.mss;
  uint8_t flags = kTcpSyn;
  uint32_t ack = 0;
  if (t->state == TcpState::kSynSent) {
    o.wscale = cfg_.window_scaling ? t->rcv_wscale : 0xff;
    o.sack_permitted = cfg_.sack;
    o.ts = cfg_.timestamps;
    o.tsval = ts_now();
  } else {
    // RFC 7323 §2.2 / §3.2, RFC 2018 §2: options in a SYN-ACK only when the SYN had them.
    flags |= kTcpAck;
    ack = t->rcv_nxt;
    o.wscale = t->ws_ok ? t->rcv_wscale : 0xff;
    o.sack_permitted = t->sack_ok;
    o.ts = t->ts_ok;
    o.tsval = ts_now();
    o.tsecr = t->ts_recent;
  }
  // RFC 7323 §2.2: the window in a SYN is never scaled.
  const uint16_t win = uint16_t(std::min<uint32_t>(cfg_.rcv_buf_bytes, 65535));
  emit(t->tuple, t->v6, t->iss, ack, flags, win, o, nullptr, 0);
  if (t->state == TcpState::kSynReceived) {
    t->rcv_adv = t->rcv_nxt + win;
    t->last_ack_sent = t->rcv_nxt;
  }
}

void TcpStack::send_rst(Tcb* t) {
  // RFC 9293 §3.10.5 ABORT: <SEQ=SND.NXT><CTL=RST>; the ACK lets peers that check it (and
  // middleboxes) match it to the connection.
  emit(t->tuple, t->v6, t->snd_max, t->rcv_nxt, kTcpRst | kTcpAck, 0, TcpOptionsOut{}, nullptr, 0);
}

// ---- What to send -----------------------------------------------------------------------------

void TcpStack::xmit(Tcb* t, uint32_t seq, uint32_t max_len) {
  const uint32_t end = t->data_end();
  const uint32_t dlen = seq_lt(seq, end) ? std::min(max_len, end - seq) : 0;
  uint8_t flags = 0;
  const bool fin_state = t->state == TcpState::kFinWait1 || t->state == TcpState::kClosing ||
                         t->state == TcpState::kLastAck;
  if (t->shut_wr && fin_state && seq + dlen == end) {
    flags |= kTcpFin;
    if (!t->fin_sent) {
      t->fin_sent = true;
      t->fin_seq = end;
    }
  }
  if (dlen == 0 && flags == 0) return;
  const uint32_t seg_end = seq + dlen + ((flags & kTcpFin) ? 1 : 0);
  if (dlen > 0) t->last_send_ns = now_ns_;
  if (seq_lt(seq, t->snd_max)) {
    count(kRetransSegs);
    t->rtt_timing = false;  // RFC 6298 §3 (Karn): no sample across a retransmission
  } else if (!t->ts_ok && !t->rtt_timing) {
    t->rtt_timing = true;
    t->rtt_seq = seg_end;
    t->rtt_start_ns = now_ns_;
  }
  send_segment(t, seq, dlen, flags);
  if (seq_gt(seg_end, t->snd_nxt)) t->snd_nxt = seg_end;
  if (seq_gt(seg_end, t->snd_max)) t->snd_max = seg_end;
  t->sack.on_sent_new(t->snd_max);
}

void TcpStack::output(Tcb* t) {
  switch (t->state) {
    case TcpState::kEstablished:
    case TcpState::kCloseWait:
    case TcpState::kFinWait1:
    case TcpState::kClosing:
    case TcpState::kLastAck: break;
    case TcpState::kSynReceived:
    case TcpState::kFinWait2:
    case TcpState::kTimeWait:
      if (t->ack_now) send_ack(t);
      return;
    default: return;
  }
  const uint32_t wnd_end = t->snd_una + t->snd_wnd;
  if (t->snd_una == t->snd_max && t->last_send_ns != 0 &&
      now_ns_ - t->last_send_ns > uint64_t(t->rto.rto_us()) * 1000 && t->snd_nxt != t->data_end()) {
    // RFC 5681 §4.1: after an idle period longer than RTO the ACK clock is gone; restart from
    // the restart window rather than bursting a stale cwnd.
    t->cc.on_idle_restart();
    t->last_send_ns = now_ns_;
    count(kIdleRestarts);
  }
  if (t->sack_ok && t->sack.in_recovery()) {
    // RFC 6675 §5 (C): while cwnd - pipe >= 1 SMSS, send what NextSeg() picks.
    for (uint32_t n = 0; n < kMaxBurstSegments; ++n) {
      const uint32_t pipe = t->sack.pipe();
      const uint32_t cwnd = t->cc.cwnd_bytes();
      if (pipe >= cwnd || cwnd - pipe < t->smss) break;
      const uint32_t end = t->data_end();
      uint32_t new_bytes = 0;
      if (seq_lt(t->snd_max, end) && seq_gt(wnd_end, t->snd_max)) {
        new_bytes = std::min(end - t->snd_max, wnd_end - t->snd_max);
      }
      const SackSegment seg = t->sack.next_seg(new_bytes);
      if (seg.rule == NextSegRule::kNone) break;
      if (seg.rule != NextSegRule::kNewData) count(kSackRecoverySegs);
      xmit(t, seg.seq, seg.len);
      t->sack.on_sent(seg);
    }
  } else {
    for (uint32_t n = 0; n < kMaxBurstSegments; ++n) {
      // An unconfirmed active open sends nothing beyond its first segment (input_syn_sent).
      if (t->peer_unconfirmed && t->snd_nxt != t->iss + 1) break;
      const uint32_t end = t->data_end();
      const uint32_t avail = seq_lt(t->snd_nxt, end) ? end - t->snd_nxt : 0;
      const bool fin_due = t->shut_wr && t->snd_nxt == end;
      if (avail == 0) {
        // A FIN needs no window (every stack accepts it at the right edge); send it alone.
        if (fin_due) xmit(t, t->snd_nxt, 0);
        break;
      }
      const uint32_t flight = t->snd_nxt - t->snd_una;
      const uint32_t cwnd = t->cc.cwnd_bytes();
      const uint32_t usable_peer = seq_gt(wnd_end, t->snd_nxt) ? wnd_end - t->snd_nxt : 0;
      const uint32_t usable_cc = cwnd > flight ? cwnd - flight : 0;
      const uint32_t len = std::min({avail, usable_peer, usable_cc, uint32_t(t->smss)});
      if (len == 0) break;
      // RFC 9293 §3.8.6.2.1 sender SWS avoidance: a partial segment only when it is all we
      // have, or at least half the largest window the peer offered, or nothing is in flight.
      if (len < t->smss && len < avail && flight > 0 && len < t->max_snd_wnd / 2) break;
      xmit(t, t->snd_nxt, len);
    }
  }
  if (t->ack_now) send_ack(t);
  arm_rtx(t);
}

void TcpStack::retransmit_una(Tcb* t) {
  // RFC 5681 §3.2 step 2 / RFC 6582 step 5: the first unacknowledged segment again (within the
  // peer's window, as rto_retransmit).
  xmit(t, t->snd_una, t->snd_wnd > 0 ? std::min<uint32_t>(t->smss, t->snd_wnd) : t->smss);
}

// ---- Timers -----------------------------------------------------------------------------------

void TcpStack::arm_rtx(Tcb* t) {
  if (t->rtx_kind == RtxKind::kTimeWait || t->rtx_kind == RtxKind::kFinWait2) return;
  TimerWheel* w = deps_.wheel;
  const bool handshake = t->state == TcpState::kSynSent || t->state == TcpState::kSynReceived;
  if (handshake || t->snd_una != t->snd_max) {
    t->persist_backoff = 0;
    // RFC 6298 §5.1: start the timer when data goes out and it is not running.
    if ((t->rtx_kind == RtxKind::kRto || t->rtx_kind == RtxKind::kTlp) && t->rtx_timer.pending()) {
      return;
    }
    const uint32_t pto_us = handshake ? 0 : tlp_timeout_us(t);
    if (pto_us != 0) {
      t->rtx_kind = RtxKind::kTlp;
      w->schedule(&t->rtx_timer, now_ms() + (pto_us + 999) / 1000);
    } else {
      t->rtx_kind = RtxKind::kRto;
      w->schedule(&t->rtx_timer, now_ms() + (t->rto.rto_us() + 999) / 1000);
    }
    return;
  }
  const bool pending = t->snd_nxt != t->data_end() || (t->shut_wr && !t->fin_sent);
  if (t->snd_wnd == 0 && pending) {
    // RFC 9293 §3.8.6.1: probe a zero window, backing off like RTO, for as long as the peer
    // answers (RFC 1122 4.2.2.17: never give up while it does).
    if (t->rtx_kind != RtxKind::kPersist || !t->rtx_timer.pending()) {
      const uint64_t base_ms = (t->rto.rto_us() + 999) / 1000;
      const uint64_t ms = std::min<uint64_t>(base_ms << std::min<uint32_t>(t->persist_backoff, 20),
                                             cfg_.persist_max_ms);
      t->rtx_kind = RtxKind::kPersist;
      w->schedule(&t->rtx_timer, now_ms() + uint32_t(ms));
    }
    return;
  }
  // RFC 6298 §5.2: all data acknowledged: stop the timer.
  w->cancel(&t->rtx_timer);
  t->rtx_kind = RtxKind::kNone;
}

uint32_t TcpStack::tlp_timeout_us(const Tcb* t) const {
  // RFC 8985 §7.2: schedule a probe only with SACK, outside recovery, with an RTT measured,
  // once per episode, and when it would fire before the RTO.
  if (!t->sack_ok || t->tlp_sent || t->cc.in_recovery() || t->sack.in_recovery() ||
      !t->rto.has_sample() || t->rto.backoffs() != 0) {
    return 0;
  }
  uint64_t pto = 2 * uint64_t(t->rto.srtt_us());
  if (t->snd_max - t->snd_una <= t->smss) pto += kTlpDelayedAckUs;
  pto = std::max<uint64_t>(pto, kTlpMinUs);
  return pto < t->rto.rto_us() ? uint32_t(pto) : 0;
}

void TcpStack::send_tail_loss_probe(Tcb* t) {
  // RFC 8985 §7.3: new data when the windows allow, else the last segment sent again; either
  // way its ACK (with SACK) shows what the tail lost. Then the RTO as usual.
  count(kTlpProbes);
  t->tlp_sent = true;
  const uint32_t end = t->data_end();
  const uint32_t wnd_end = t->snd_una + t->snd_wnd;
  if (t->snd_nxt == t->snd_max && seq_lt(t->snd_nxt, end) && seq_lt(t->snd_nxt, wnd_end) &&
      !t->peer_unconfirmed) {
    xmit(t, t->snd_nxt, std::min({uint32_t(t->smss), end - t->snd_nxt, wnd_end - t->snd_nxt}));
  } else {
    const uint32_t len = std::min<uint32_t>(t->smss, t->snd_max - t->snd_una);
    xmit(t, t->snd_max - len, len);
  }
  t->rtx_kind = RtxKind::kRto;
  deps_.wheel->schedule(&t->rtx_timer, now_ms() + (t->rto.rto_us() + 999) / 1000);
}

void TcpStack::rto_retransmit(Tcb* t) {
  count(kRtoFired);
  // RFC 6298 §5.5 back off, §5.4 retransmit the earliest unacknowledged segment; RFC 5681 §3.1
  // and RFC 9438 §4.8 cwnd = 1 SMSS; RFC 6675 §5.1 / RFC 2018 §8 forget SACK state. Then
  // go-back-N from SND.UNA as the ACKs come.
  t->rto.on_timeout();
  t->cc.on_rto(now_ns_ / 1000, t->snd_max - t->snd_una, t->snd_max);
  t->sack.on_rto();
  t->dupacks = 0;
  t->rtt_timing = false;
  t->snd_nxt = t->snd_una;
  if (t->ts_ok && !t->eifel_check) {
    // RFC 3522: remember the TSval of the first retransmission; an ACK echoing an older one
    // acknowledges the original transmission, so the timeout was spurious.
    t->eifel_check = true;
    t->rto_tsval = ts_now();
  }
  // Even into a zero window: the peer answers with its current window. Within a window the
  // peer shrank below a segment, only what fits (as Linux's tcp_retransmit_skb): a receiver
  // short of memory drops the whole segment otherwise, at every backoff.
  xmit(t, t->snd_una, t->snd_wnd > 0 ? std::min<uint32_t>(t->smss, t->snd_wnd) : t->smss);
  t->rtx_kind = RtxKind::kRto;
  deps_.wheel->schedule(&t->rtx_timer, now_ms() + (t->rto.rto_us() + 999) / 1000);
}

void TcpStack::on_rtx_timer(Tcb* t) {
  const RtxKind kind = t->rtx_kind;
  t->rtx_kind = RtxKind::kNone;
  switch (kind) {
    case RtxKind::kTimeWait:
    case RtxKind::kFinWait2:
      // TIME-WAIT over (the application already had kClosed), or an orphaned FIN-WAIT-2 whose
      // peer never closed.
      terminate(t, 0);
      return;
    case RtxKind::kPersist:
      count(kWindowProbes);
      // A zero-length probe below SND.UNA: the peer must answer with an ACK carrying its
      // current window (RFC 9293 §3.10.7.4 unacceptable-segment rule).
      send_segment(t, t->snd_una - 1, 0, 0);
      ++t->persist_backoff;
      arm_rtx(t);
      return;
    case RtxKind::kTlp:
      if (t->snd_una != t->snd_max) {
        send_tail_loss_probe(t);
      } else {
        arm_rtx(t);
      }
      return;
    case RtxKind::kRto: break;
    case RtxKind::kNone: return;
  }
  if (t->state == TcpState::kSynSent || t->state == TcpState::kSynReceived) {
    // RFC 9293 §3.8.3: give up on the handshake after R2 (counted in retransmissions).
    if (++t->retries > cfg_.max_syn_retries) {
      count(kTimeouts);
      terminate(t, kEvClosed);
      return;
    }
    t->rto.on_timeout();
    t->syn_rexmit = true;
    count(kRetransSegs);
    send_syn(t);
    t->rtx_kind = RtxKind::kRto;
    deps_.wheel->schedule(&t->rtx_timer, now_ms() + (t->rto.rto_us() + 999) / 1000);
    return;
  }
  if (t->snd_una == t->snd_max) {
    arm_rtx(t);
    return;
  }
  if (++t->retries > cfg_.max_retries) {
    count(kTimeouts);
    send_rst(t);
    terminate(t, kEvClosed);
    return;
  }
  rto_retransmit(t);
}

void TcpStack::schedule_ack(Tcb* t) {
  // RFC 9293 §3.8.6.3 / RFC 5681 §4.2: ACK at least every second full-sized segment, and
  // within 500 ms (our delayed_ack_ms) otherwise.
  const uint32_t full = t->v6 ? cfg_.mss_v6 : cfg_.mss;
  if (cfg_.delayed_ack_ms == 0 || t->rcv_nxt - t->last_ack_sent >= 2 * full) {
    t->ack_now = true;
    return;
  }
  if (!t->delack_timer.pending()) {
    deps_.wheel->schedule(&t->delack_timer, now_ms() + cfg_.delayed_ack_ms);
  }
}

void TcpStack::on_delack_timer(Tcb* t) {
  if (!t->synchronized() && t->state != TcpState::kSynReceived) return;
  if (t->last_ack_sent == t->rcv_nxt && !t->ack_now) return;
  count(kDelayedAcks);
  send_ack(t);
}

void TcpStack::on_keep_timer(Tcb* t) {
  if (!t->ka_enabled || !t->synchronized() || t->state == TcpState::kTimeWait) return;
  const uint32_t idle = now_ms() - t->last_rcv_ms;
  if (t->ka_probes == 0 && idle < t->ka_idle_ms) {
    deps_.wheel->schedule(&t->keep_timer, t->last_rcv_ms + t->ka_idle_ms);
    return;
  }
  if (t->snd_una != t->snd_max) {
    // Data outstanding: the retransmission timer watches the peer.
    t->ka_probes = 0;
    deps_.wheel->schedule(&t->keep_timer, now_ms() + t->ka_idle_ms);
    return;
  }
  if (t->ka_probes >= t->ka_max_probes) {
    // RFC 9293 §3.8.4: the peer is gone.
    count(kTimeouts);
    send_rst(t);
    terminate(t, kEvClosed);
    return;
  }
  // RFC 9293 §3.8.4: SEG.SEQ = SND.NXT - 1 with no data draws an ACK from a live peer.
  count(kKeepaliveProbes);
  send_segment(t, t->snd_una - 1, 0, 0);
  ++t->ka_probes;
  deps_.wheel->schedule(&t->keep_timer, now_ms() + t->ka_interval_ms);
}

}  // namespace meshgate::dp::tcp
