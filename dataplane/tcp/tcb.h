// The transmission control block (RFC 9293 §3.3.1) and the send buffer. Internal to the stack:
// upper layers see only TcpConnId handles. Per worker; no locks.
#pragma once

#include <cstdint>

#include "dataplane/tcp/cc.h"
#include "dataplane/tcp/reass.h"
#include "dataplane/tcp/rto.h"
#include "dataplane/tcp/sack.h"
#include "dataplane/tcp/tcp_types.h"
#include "dataplane/tcp/timer_wheel.h"

namespace meshgate::dp::tcp {

class TcpStack;

// Bytes the application queued and the peer has not acknowledged yet, as a chain of mbufs
// filled by copy (send()) or given whole (send_chain()). `seq` is the sequence number of the
// first byte. A cursor remembers the last lookup, so sending a window in order walks the chain
// once.
struct SendBuf {
  rte_mbuf* head = nullptr;
  rte_mbuf* tail = nullptr;
  uint32_t seq = 0;
  uint32_t bytes = 0;
  rte_mbuf* cur = nullptr;  // an mbuf of the chain, holding byte cur_seq
  uint32_t cur_seq = 0;     // sequence number of cur's first byte
};

// What the retransmission timer (one Timer) is currently timing.
enum class RtxKind : uint8_t { kNone, kRto, kTlp, kPersist, kTimeWait, kFinWait2 };

// Pending events for the application, delivered after the segment that caused them.
inline constexpr uint8_t kEvConnected = 1 << 0;
inline constexpr uint8_t kEvReadable = 1 << 1;
inline constexpr uint8_t kEvWritable = 1 << 2;
inline constexpr uint8_t kEvPeerFin = 1 << 3;
inline constexpr uint8_t kEvReset = 1 << 4;
inline constexpr uint8_t kEvClosed = 1 << 5;

struct Tcb {
  // Timers first: their callbacks find the Tcb from the Timer (container_of).
  Timer rtx_timer;    // RTO, SYN retransmission, persist, TIME-WAIT, FIN-WAIT-2
  Timer delack_timer;
  Timer keep_timer;   // keepalive
  TcpStack* stack = nullptr;

  TcpTuple tuple;
  uint32_t hash = 0;
  uint32_t gen = 0;
  uint32_t next_free = 0;
  uint16_t listener = 0;  // 1 + listener index for passive opens (SYN backlog accounting)
  TcpState state = TcpState::kClosed;
  RtxKind rtx_kind = RtxKind::kNone;

  // Options negotiated (RFC 7323, RFC 2018).
  bool ts_ok = false;
  bool sack_ok = false;
  bool ws_ok = false;
  bool v6 = false;
  uint8_t snd_wscale = 0;  // the peer's shift: SND.WND = SEG.WND << snd_wscale
  uint8_t rcv_wscale = 0;  // ours
  // Lifecycle.
  bool app_owned = false;     // the application holds a handle (until close()/abort())
  bool active_open = false;   // made by connect(): counted in TcpStack's local-port index
  bool orphaned = false;      // the application released it (close()): never owned again
  bool syn_counted = false;   // counted in its listener's SYN backlog
  bool shut_wr = false;       // the application will send no more: FIN after the data
  bool fin_sent = false;      // FIN's sequence number was used (fin_seq valid)
  bool peer_fin = false;      // the peer's FIN was received in order
  bool ooo_fin = false;       // a FIN arrived beyond RCV.NXT (peer_fin_seq)
  bool syn_rexmit = false;    // SYN / SYN-ACK retransmitted (RFC 6298 §5.7, RFC 5681 §3.1)
  bool want_writable = false; // send() accepted less than offered
  bool rtt_timing = false;    // Karn: a segment is being timed (no timestamps)
  bool ack_now = false;       // an ACK must go out at the end of this input
  bool dsack_pending = false;
  bool eifel_check = false;   // the next ACK of new data decides whether the RTO was spurious
  bool tlp_sent = false;      // a tail loss probe went out; none again until SND.UNA moves
  bool wnd_mem_limited = false;  // the window we offered was cut by the worker budget
  // An active open whose peer has sent nothing since its SYN-ACK: only the segment at ISS + 1
  // may go out (TcpStack::output: a SYN-cookie listener resets any other).
  bool peer_unconfirmed = false;
  uint8_t events = 0;
  uint8_t dupacks = 0;        // NewReno duplicate ACK counter (no SACK)
  uint8_t retries = 0;        // consecutive RTO / persist / keepalive expiries
  uint8_t ka_probes = 0;
  uint8_t ka_max_probes = 0;
  bool ka_enabled = false;
  uint32_t ka_idle_ms = 0;
  uint32_t ka_interval_ms = 0;
  uint16_t chack_count = 0;   // challenge ACKs in the current one-second window
  uint32_t chack_window_ms = 0;

  // Send sequence space (RFC 9293 §3.3.1).
  uint32_t iss = 0;
  uint32_t snd_una = 0;
  uint32_t snd_nxt = 0;
  uint32_t snd_max = 0;      // highest sequence number sent + 1
  uint32_t snd_wnd = 0;      // bytes
  uint32_t snd_wl1 = 0;
  uint32_t snd_wl2 = 0;
  uint32_t max_snd_wnd = 0;  // RFC 5961 §5.2 MAX.SND.WND
  uint32_t fin_seq = 0;      // our FIN's sequence number (fin_sent)
  uint16_t smss = 0;         // payload per segment (RFC 9293 §3.7.1 Eff.snd.MSS)
  uint16_t peer_mss = 0;
  uint32_t rtt_seq = 0;      // Karn: the timed segment's end
  uint64_t rtt_start_ns = 0;
  uint64_t last_send_ns = 0;  // last data segment sent (RFC 5681 §4.1 idle restart)
  uint32_t rto_tsval = 0;     // TSval of the first retransmission after a timeout (RFC 3522)
  uint32_t persist_backoff = 0;
  SendBuf sb;

  // Receive sequence space.
  uint32_t irs = 0;
  uint32_t rcv_nxt = 0;
  uint32_t rcv_adv = 0;        // right edge of the window last advertised (never shrinks)
  uint32_t last_ack_sent = 0;  // RCV.NXT of the last segment sent (delayed ACK accounting)
  uint32_t peer_fin_seq = 0;
  uint32_t ts_recent = 0;      // RFC 7323 §4.3 TS.Recent
  uint32_t ts_recent_ms = 0;   // when TS.Recent was set (RFC 7323 §5.5: invalid after 24 days)
  uint32_t last_rcv_ms = 0;    // keepalive idle time
  SackBlock dsack;
  rte_mbuf* rq_head = nullptr;  // in-order data not read yet (zero-copy)
  rte_mbuf* rq_tail = nullptr;
  uint32_t rq_bytes = 0;
  uint32_t rq_mbufs = 0;        // mbuf segments in rq (tiny segments cost a whole mbuf each)
  Reassembly reass;

  RtoEstimator rto;
  CongestionControl cc;
  SackScoreboard sack;

  // Application.
  TcpEventFn fn = nullptr;
  void* user = nullptr;

  bool synchronized() const {
    return state != TcpState::kClosed && state != TcpState::kListen &&
           state != TcpState::kSynSent && state != TcpState::kSynReceived;
  }
  // One past the last byte the application queued (our FIN's sequence number once shut_wr).
  uint32_t data_end() const { return sb.seq + sb.bytes; }
};
static_assert(sizeof(Tcb) <= 1024, "Tcb is per connection (docs/TCP.md): keep it small");

}  // namespace meshgate::dp::tcp
