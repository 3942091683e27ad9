// Public value types of the TCP stack: configuration, connection handles, events, counters.
// Pure data, any thread (a TcpConfig is built by the control thread, the rest is per worker).
#pragma once

#include <cstdint>

#include "dataplane/common/counter_table.h"
#include "dataplane/common/net_types.h"
#include "dataplane/tcp/cc.h"
#include "dataplane/tcp/reass.h"
#include "dataplane/tcp/siphash.h"

namespace meshgate::dp::tcp {

// RFC 9293 §3.3.2.
enum class TcpState : uint8_t {
  kClosed,
  kListen,
  kSynSent,
  kSynReceived,
  kEstablished,
  kFinWait1,
  kFinWait2,
  kCloseWait,
  kClosing,
  kLastAck,
  kTimeWait,
};
const char* state_name(TcpState s);

// A connection seen from this stack. Ports in host order.
struct TcpTuple {
  IpAddr local;
  IpAddr remote;
  uint16_t local_port = 0;
  uint16_t remote_port = 0;
  friend bool operator==(const TcpTuple&, const TcpTuple&) = default;
};

// A handle to a connection: pool index and generation, so a handle kept after its connection
// was released is recognised as stale (every API call checks it). 0 is never a valid handle.
using TcpConnId = uint64_t;
inline constexpr TcpConnId kNoConn = 0;

enum class TcpEvent : uint8_t {
  kConnected,  // the handshake completed (active open, or a listener's connection)
  kReadable,   // in-order data arrived: recv() / recv_chain() have something
  kWritable,   // send buffer space opened after send() accepted less than offered
  kPeerFin,    // the peer closed its direction (after every byte it sent was delivered)
  kReset,      // the peer reset the connection, or refused the active open
  kClosed,     // the connection is over (timeout, or both directions closed and acknowledged)
};

// Upper layers get events through one plain function pointer (no std::function, no virtual
// call per segment). Runs on the worker inside input() / advance(); it may call any API of the
// stack (send, recv, close, abort), for this or another connection. After kReset and kClosed
// the handle stays valid (data already received can still be read) until close() or abort().
using TcpEventFn = void (*)(void* user, TcpConnId c, TcpEvent ev);

// A listener's decision on a SYN (and, for a SYN-cookie connection, on the ACK completing it):
// return false to refuse (the client gets a RST), or true and the event function and user
// pointer of the new connection.
using TcpAcceptFn = bool (*)(void* ctx, const TcpTuple& t, TcpEventFn* fn, void** user);

// connect(): may this local port be used toward the remote? The worker passes "the reply
// hashes to my RSS queue" (dataplane/nat/rss.h).
using TcpPortOkFn = bool (*)(void* ctx, const TcpTuple& t);

// Frames out: an mbuf holding one IPv4 or IPv6 packet (IP header at the data pointer, with
// headroom for L2, pkt_len = the IP length), checksums filled in, and the connection it belongs
// to (source = t.local, destination = t.remote; the family is theirs), so the consumer routes
// it without parsing it again. The callee owns the mbuf.
using TcpOutputFn = void (*)(void* ctx, rte_mbuf* pkt, const TcpTuple& t);

// ISN generator (RFC 6528); the default is SipHash of the 4-tuple plus a 4 µs clock.
using TcpIsnFn = uint32_t (*)(void* ctx, const TcpTuple& t, uint64_t now_ns);

// Defaults, each with its reason.
// RFC 9293 §3.8.1 MSL is 2 minutes; like Linux we hold TIME-WAIT 60 s: with RFC 6191/timestamp
// reuse and random ISNs, old duplicates do not survive that long in a data center.
inline constexpr uint32_t kDefaultTimeWaitMs = 60'000;
// Orphaned FIN-WAIT-2 (the app closed, the peer never sends FIN): Linux's tcp_fin_timeout.
inline constexpr uint32_t kDefaultFinWait2Ms = 60'000;
// RFC 9293 §3.8.6.3: an ACK must not be delayed more than 500 ms; 40 ms is Linux's minimum.
inline constexpr uint32_t kDefaultDelayedAckMs = 40;
// RFC 9293 §3.8.3: R2 for data at least 100 s; we count retransmissions (Linux tcp_retries2
// is 15); SYNs: R2 at least 3 minutes, 6 retries at 1 s doubling is 127 s (Linux tcp_syn_retries).
inline constexpr uint32_t kDefaultMaxRetries = 15;
inline constexpr uint32_t kDefaultMaxSynRetries = 6;
// RFC 9293 §3.8.4 / RFC 1122 4.2.3.6: keepalive off by default, 2 h idle when enabled.
inline constexpr uint32_t kDefaultKeepaliveIdleMs = 7'200'000;
inline constexpr uint32_t kDefaultKeepaliveIntervalMs = 75'000;
inline constexpr uint32_t kDefaultKeepaliveProbes = 9;
// RFC 5961 §7 / RFC 9293 §3.10.7.4: challenge ACKs per connection per second. Per connection,
// never global (a global limit is a side channel: CVE-2016-5696).
inline constexpr uint32_t kDefaultChallengeAcksPerSec = 10;
// RFC 8985 §7.2: the tail loss probe timeout is 2 * SRTT, plus the peer's worst-case delayed
// ACK (200 ms) when one segment is in flight, never below 10 ms (Linux's floor: timers are
// not finer than the wheel's ticks plus scheduling noise).
inline constexpr uint32_t kTlpMinUs = 10'000;
inline constexpr uint32_t kTlpDelayedAckUs = 200'000;
// Persist timer bounds (RFC 9293 §3.8.6.1 probes with exponential backoff, like RTO).
inline constexpr uint32_t kDefaultPersistMaxMs = 60'000;

// Connections per worker: 4096 TCBs are 4 MB, sized for a proxy worker's share of a node.
inline constexpr uint32_t kDefaultMaxConnections = 4096;
// Listeners per worker: proxy VIP ports plus the HBONE port; scanned on SYNs only.
inline constexpr uint32_t kDefaultMaxListeners = 64;
// 256 KiB per direction: a 2 Gbit/s x 1 ms data-center BDP, Linux's default order of size.
inline constexpr uint32_t kDefaultBufBytes = 256 * 1024;
// All send + receive buffers of one worker: 1000 connections with full buffers both ways.
inline constexpr uint64_t kDefaultWorkerMemBytes = 256ull << 20;
// RFC 9293 §3.7.1 MSS for a 1500-byte MTU: 1500 - 20 - 20 (IPv4), 1500 - 40 - 20 (IPv6).
inline constexpr uint16_t kDefaultMssV4 = 1460;
inline constexpr uint16_t kDefaultMssV6 = 1440;
// Half-open connections per listener before SYN cookies: Linux's somaxconn-era default order.
inline constexpr uint32_t kDefaultSynBacklog = 256;
// Linux's ip_local_port_range, so tuples look like the kernel's to middleboxes and peers.
inline constexpr uint16_t kDefaultEphemeralLo = 32768;
inline constexpr uint16_t kDefaultEphemeralHi = 60999;
// Linux's ip_default_ttl.
inline constexpr uint8_t kDefaultTtl = 64;

struct TcpConfig {
  uint32_t max_connections = kDefaultMaxConnections;  // per worker, TIME-WAIT and SYN-RECEIVED included
  uint32_t max_listeners = kDefaultMaxListeners;
  uint32_t snd_buf_bytes = kDefaultBufBytes;  // per connection: send() accepts up to this much queued
  uint32_t rcv_buf_bytes = kDefaultBufBytes;  // per connection: the most the receive window offers
  uint64_t worker_mem_bytes = kDefaultWorkerMemBytes;  // all send + receive buffers of this stack
  uint16_t mss = kDefaultMssV4;       // bytes, advertised in our SYNs over IPv4
  uint16_t mss_v6 = kDefaultMssV6;    // bytes, over IPv6
  bool window_scaling = true;         // RFC 7323 §2
  bool timestamps = true;             // RFC 7323 §3
  bool sack = true;                   // RFC 2018
  CcAlgo cc = CcAlgo::kCubic;         // RFC 9438 by default, NewReno (RFC 6582) on request
  uint32_t time_wait_ms = kDefaultTimeWaitMs;
  uint32_t fin_wait2_ms = kDefaultFinWait2Ms;      // orphaned connections only
  uint32_t delayed_ack_ms = kDefaultDelayedAckMs;  // 0 = ACK every segment
  uint32_t max_retries = kDefaultMaxRetries;       // RTOs in a row before the connection dies
  uint32_t max_syn_retries = kDefaultMaxSynRetries;
  uint32_t challenge_acks_per_sec = kDefaultChallengeAcksPerSec;  // per connection
  uint32_t persist_max_ms = kDefaultPersistMaxMs;  // the longest zero-window probe interval
  // Half-open (SYN-RECEIVED) connections per listener before the listener answers with SYN
  // cookies instead of state (RFC 4987 §3.6).
  uint32_t syn_backlog = kDefaultSynBacklog;
  bool syncookies = true;
  ReassLimits reass;                  // per-connection out-of-order limits
  uint16_t ephemeral_lo = kDefaultEphemeralLo;  // connect(): local ports tried
  uint16_t ephemeral_hi = kDefaultEphemeralHi;
  uint8_t ttl = kDefaultTtl;          // IPv4 TTL / IPv6 hop limit of our segments
  SipKey secret;                      // ISNs (RFC 6528) and SYN cookies; set it randomly
};

enum TcpCounter : uint32_t {
#define MG_COUNTER MG_COUNTER_ENUMERATOR
#include "dataplane/tcp/tcp_counters.def"
#undef MG_COUNTER
  kTcpCounterCount
};

inline constexpr const char* kTcpCounterNames[] = {
#define MG_COUNTER MG_COUNTER_NAME
#include "dataplane/tcp/tcp_counters.def"
#undef MG_COUNTER
};
inline constexpr const char* kTcpCounterHelp[] = {
#define MG_COUNTER MG_COUNTER_HELP
#include "dataplane/tcp/tcp_counters.def"
#undef MG_COUNTER
};

struct TcpCounters {
  uint64_t v[kTcpCounterCount] = {};
  uint64_t operator[](TcpCounter c) const { return v[c]; }
};

// Per-connection information for tests, flow dumps and the proxy.
struct TcpConnInfo {
  TcpState state = TcpState::kClosed;
  TcpTuple tuple;
  uint32_t snd_una = 0, snd_nxt = 0, snd_wnd = 0, rcv_nxt = 0, rcv_wnd = 0;
  uint32_t cwnd = 0, ssthresh = 0, srtt_us = 0, rto_us = 0;
  uint32_t send_queued = 0;  // bytes in the send buffer (unacknowledged + unsent)
  uint32_t recv_queued = 0;  // bytes delivered in order, not read yet
  uint32_t mss = 0;          // effective send MSS (payload per segment)
  uint8_t snd_wscale = 0, rcv_wscale = 0;
  bool ts = false, sack = false, ws = false;
};

}  // namespace meshgate::dp::tcp
