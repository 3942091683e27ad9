// The sans-I/O HBONE engine: one mTLS + HTTP/2 connection, either role.
//
//   transport bytes in  ──► recv_transport() ──► TLS ──► nghttp2 (mem_recv) ──► stream events
//   transport bytes out ◄── transport_out()  ◄── TLS ◄── nghttp2 (mem_send) ◄── stream_write()
//
// It never touches a socket or a clock: the caller moves bytes between transport_out() and its
// transport (the userspace TCP stack, or a kernel socket in tests and tools), passes the time
// in, and drains events with poll_event(). Wire details: docs/HBONE.md "The engine".
//
// Server role (terminator, port 15008): only CONNECT. Each request goes through the caller's
// ServerHooks: resolve the :authority (400 when not served), authorize the verified peer
// (401), then connect upstream; the caller reports the connect result with
// upstream_connected() and the engine answers 200 (or 503). Client role (origination):
// open_stream() sends CONNECT with the given headers; the response arrives as
// kStreamResponse, and any status but 200 resets the stream.
//
// Streams carry bytes both ways with HTTP/2 flow control: received bytes are credited back to
// the peer only as the caller reads them (stream_read), and stream_write() accepts only what
// the send budget allows (the rest is back-pressure on the caller's side). END_STREAM in ↔
// kStreamRemoteEnd (FIN the TCP side), stream_shutdown() ↔ END_STREAM out.
//
// Threading: one worker owns a connection; no locks, no blocking. The contexts it uses are
// built on the control thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dataplane/common/byte_queue.h"
#include "dataplane/common/net_types.h"
#include "dataplane/hbone/authority.h"
#include "dataplane/hbone/counters.h"
#include "dataplane/tls/tls.h"

typedef struct nghttp2_session nghttp2_session;

namespace meshgate::dp::hbone {

inline constexpr uint32_t kKiB = 1024, kMiB = 1024 * 1024;

// docs/HBONE.md "HTTP/2 settings and limits": the settings and the engine's own hard limits.
struct Limits {
  uint32_t stream_window_bytes = 4 * kMiB;       // SETTINGS_INITIAL_WINDOW_SIZE
  uint32_t connection_window_bytes = 16 * kMiB;  // WINDOW_UPDATE on stream 0
  uint32_t max_frame_bytes = 1 * kMiB;           // SETTINGS_MAX_FRAME_SIZE
  uint32_t server_max_streams = 200;             // advertised as a server
  uint32_t client_max_streams = 100;             // used at most as a client (min with peer's)
  uint32_t server_max_header_list_bytes = 64 * kKiB;
  uint32_t client_max_header_list_bytes = 16 * kKiB;
  uint64_t ping_interval_ms = 10'000;
  uint64_t ping_timeout_ms = 20'000;
  // Not in the spec: a peer that never finishes the handshake (TLS, then its HTTP/2 preface and
  // SETTINGS) holds a TLS state and a connection slot.
  uint64_t handshake_timeout_ms = 5'000;
  // RST_STREAM frames received (server; CVE-2023-44487 rapid reset): a token bucket with
  // nghttp2's defaults, enforced by the engine so that the answer is GOAWAY ENHANCE_YOUR_CALM
  // (nghttp2's own limit, set to twice these as a backstop, answers INTERNAL_ERROR).
  uint64_t reset_burst = 1000;
  uint64_t reset_rate_per_s = 33;
  // Resets of streams whose tunnel was not open yet (no 200), or had been open for less than
  // `premature_reset_lifetime_ms`: each cost (or may have cost) an upstream dial, so they get
  // a tighter bucket of their own. Envoy counts such "premature" resets the same way (reset
  // before the response, or within a second of the stream's start): a backend that answers
  // fast must not let a rapid-reset client dial once per stream.
  uint64_t premature_reset_burst = 100;
  uint64_t premature_reset_per_s = 10;
  uint64_t premature_reset_lifetime_ms = 1'000;
  // CONTINUATION frames after one HEADERS (CVE-2024-27316 style floods).
  uint32_t max_continuations = 8;
  // Decoded header bytes (name + value + 32, RFC 7541 4.1) per connection: a token bucket, so
  // an HPACK-amplified header flood over many short streams is cut off (GOAWAY
  // ENHANCE_YOUR_CALM). A full 64 KiB header list on 200 streams fits in the burst.
  uint64_t header_bytes_burst = 16 * kMiB;
  uint64_t header_bytes_per_s = 4 * kMiB;
  // Memory nghttp2 may allocate for this connection (HPACK tables, stream state, frame
  // queues); beyond it allocation fails and the connection closes.
  size_t h2_memory_bytes = 8 * kMiB;
  // Bytes accepted from the caller and not yet framed, per stream and per connection: the
  // "HTTP/2 bomb" guard (a peer that keeps tiny windows cannot make us buffer without bound).
  size_t stream_send_buffer_bytes = 1 * kMiB;
  size_t connection_send_buffer_bytes = 16 * kMiB;
  // Stop pulling frames from nghttp2 while this much ciphertext waits for the transport.
  size_t transport_high_water_bytes = 512 * kKiB;
};

// The HBONE buffers of all connections of one worker (GatewayParams::memory_bytes): bytes
// accepted from the caller and not yet framed, and bytes received and not yet read. Past the
// limit, stream_write() takes nothing and read bytes are not credited back to the peer (its
// window stays closed), except on a connection holding less than kBudgetFloorBytes, so that
// one abuser filling the budget cannot stall every other tunnel. Owned by the caller; one
// thread.
struct BufferBudget {
  size_t limit_bytes = SIZE_MAX;
  size_t used_bytes = 0;
  // A writer or a window credit was held back: the owner calls budget_room_back() on its
  // connections once used_bytes fell below resume_bytes().
  bool waiting = false;
  bool full() const { return used_bytes >= limit_bytes; }
  size_t room() const { return full() ? 0 : limit_bytes - used_bytes; }
  size_t resume_bytes() const { return limit_bytes - limit_bytes / 4; }
};
inline constexpr size_t kBudgetFloorBytes = 256 * 1024;

enum class EventKind : uint8_t {
  kEstablished,     // TLS verified and HTTP/2 started; peer_id() is known
  kStreamResponse,  // client: the CONNECT answer; code = :status (200 = tunnel open)
  kStreamReadable,  // stream_read() has bytes (sent once until the stream is read empty)
  kStreamRemoteEnd, // peer sent END_STREAM: after reading the rest, FIN the TCP side
  kStreamWritable,  // send budget available again after stream_write() was cut short
  kStreamReset,     // peer reset the stream; code = HTTP/2 error (0 NO_ERROR, 8 CANCEL = clean)
  kStreamClosed,    // the HTTP/2 stream is gone (code = error code); call stream_release()
  kGoaway,          // peer GOAWAY: no new streams; stream = last stream id, code = error
  kClosed,          // connection over; code = CloseReason. Flush transport_out(), then close.
};

enum class CloseReason : uint8_t {
  kGraceful,          // GOAWAY exchanged and every stream finished
  kPeerClosed,        // transport ended / close_notify
  kTlsFailed,         // handshake or record failure (see tls_failure())
  kHandshakeTimeout,
  kProtocolError,     // nghttp2 fatal error
  kPingTimeout,
  kMemoryBudget,
  kAborted,           // the caller called abort()
};
const char* close_reason_name(CloseReason r);

struct Event {
  EventKind kind;
  int32_t stream = 0;
  uint32_t code = 0;
};

inline bool is_clean_reset(uint32_t h2_error) { return h2_error == 0 || h2_error == 8; }
// RFC 9113 CONNECT_ERROR: the tunnel was reset or closed abnormally (also: a policy change
// ended it).
inline constexpr uint32_t kH2ConnectError = 0xa;

// What the server's resolve hook found for an :authority.
struct Resolution {
  enum class Kind : uint8_t { kServed, kNotServed, kNoEndpoint };
  Kind kind = Kind::kNotServed;
  IpAddr ip;         // the real destination (for policy: destination_ips / destination_ports)
  uint16_t port = 0;
  uint64_t cookie = 0;  // the caller's handle for the chosen endpoint
};

// Server-role callbacks. Called from inside recv_transport(), once per CONNECT request, in
// this order; none may call back into the connection synchronously.
class ServerHooks {
 public:
  virtual ~ServerHooks() = default;
  virtual Resolution resolve(const Authority& authority) = 0;
  // The TLS-verified peer id (full spiffe://...) and the resolved destination.
  virtual bool authorize(std::string_view peer_id, const Resolution& dst) = 0;
  // Start the upstream connect; report with Connection::upstream_connected(stream, ok).
  virtual void connect(int32_t stream, const Resolution& dst) = 0;
};

// Client-role CONNECT request (docs/HBONE.md "Client role"); empty headers are omitted.
struct ConnectRequest {
  std::string authority;     // "<ip>:<port>", "[v6]:<port>" or "<fqdn>:<port>"
  std::string baggage;
  std::string forwarded;
  std::string traceparent;
  std::string forwarded_network;  // x-forwarded-network (inner request of double HBONE)
};

class Connection {
 public:
  static std::unique_ptr<Connection> server(const tls::Context& tls, ServerHooks& hooks,
                                            Counters& counters, uint64_t now_ms,
                                            const Limits& limits = {});
  // `expected_ids`: the server identities to accept (docs/HBONE.md "TLS").
  static std::unique_ptr<Connection> client(const tls::Context& tls,
                                            std::vector<std::string> expected_ids,
                                            Counters& counters, uint64_t now_ms,
                                            const Limits& limits = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // ---- transport ----
  void recv_transport(const uint8_t* p, size_t n, uint64_t now_ms);
  void recv_transport_eof(uint64_t now_ms);
  const ByteQueue& transport_out() const { return tls_.transport_out(); }
  void transport_out_consumed(size_t n);
  // Keepalive and timeouts; call at least every second or so.
  void on_timer(uint64_t now_ms);

  bool poll_event(Event& ev);

  // ---- client role ----
  bool can_open_stream() const;
  // Stream id, or -1 when the connection has no free slot (not established, GOAWAY, limit).
  int32_t open_stream(const ConnectRequest& req);

  // ---- server role ----
  // Upstream connects of accepted requests are started (ServerHooks::connect) only after every
  // byte given to one recv_transport() call was processed, so a stream its client reset in the
  // same bytes (rapid reset) never costs a dial. With deferral on, they wait for the caller's
  // dispatch_connects() instead: requests are stamped with the caller's epoch when they arrive
  // (set_epoch), and dispatch_connects(e) starts those of epoch <= e (the worker: the ones that
  // survived one more poll iteration, whose burst would have carried a RST right behind).
  void set_defer_connects(bool on) { defer_connects_ = on; }
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  bool has_pending_connects() const { return !pending_connects_.empty(); }
  void dispatch_connects(uint64_t max_epoch = UINT64_MAX);
  void upstream_connected(int32_t stream, bool ok);
  // Policies changed: asks hooks.authorize() again for every live tunnel (connecting or open)
  // and ends the ones now denied with RST_STREAM(CONNECT_ERROR), each reported as
  // kStreamReset(CONNECT_ERROR) so the caller resets its upstream. Returns how many ended.
  size_t recheck_authorization();

  // ---- streams ----
  size_t stream_readable(int32_t stream) const;
  size_t stream_read(int32_t stream, uint8_t* out, size_t cap);
  // Accepts up to the send budget; returns how many bytes were taken.
  size_t stream_write(int32_t stream, const uint8_t* p, size_t n);
  size_t stream_send_room(int32_t stream) const;
  // END_STREAM once the written bytes are out (the TCP side sent FIN).
  void stream_shutdown(int32_t stream);
  // RST_STREAM with `h2_error` (the TCP side was reset: INTERNAL_ERROR(2) or CANCEL(8)).
  void stream_reset(int32_t stream, uint32_t h2_error);
  // Forget the stream (after kStreamClosed, or earlier: then it is reset with CANCEL).
  void stream_release(int32_t stream);

  // ---- connection ----
  // Charge this connection's buffers to `budget` (null: only the per-connection limits).
  // Call before any byte flows.
  void set_budget(BufferBudget* budget) { budget_ = budget; }
  // The budget has room again: credit withheld windows, wake writers it held back.
  void budget_room_back();
  void drain();    // GOAWAY(NO_ERROR); existing streams finish, then kClosed
  void abort();    // close now, no GOAWAY
  bool closed() const { return closed_; }
  bool established() const { return established_; }
  // TLS verified and the peer's first SETTINGS received: the handshake stage is over.
  bool ready() const { return established_ && peer_settings_; }
  tls::Role role() const { return role_; }
  const std::string& peer_id() const { return tls_.peer_id(); }
  tls::Failure tls_failure() const { return tls_.failure(); }
  const std::string& tls_failure_detail() const { return tls_.failure_detail(); }
  size_t active_streams() const { return open_h2_streams_; }
  size_t h2_memory_bytes() const { return h2_mem_used_; }
  size_t send_buffered_bytes() const { return send_buffered_; }

  // nghttp2 callbacks (internal).
  struct Stream;
  struct Callbacks;

 private:
  Connection(const tls::Context& tls, tls::Role role, std::vector<std::string> expected_ids,
             ServerHooks* hooks, Counters& counters, uint64_t now_ms, const Limits& limits);
  void init_h2();
  void drive();
  void flush();
  void h2_failed(int nghttp2_error);  // a fatal nghttp2 return: close with the reason
  void check_done();
  void close(CloseReason reason);
  void push(EventKind kind, int32_t stream = 0, uint32_t code = 0);
  Stream* find(int32_t id) const;
  void handle_request(Stream& s);
  void reject(Stream& s, int status, Counter c);
  void signal_writable();
  // Bytes entering (+) or leaving (-) this connection's stream buffers.
  void hold(size_t add, size_t sub);
  bool budget_blocks() const {
    return budget_ != nullptr && budget_->full() && held_ >= kBudgetFloorBytes;
  }
  // `n` bytes of stream `s` were read (or dropped): WINDOW_UPDATE credit, unless the budget
  // holds it back.
  void credit(Stream& s, size_t n);
  bool charge_header_bytes(size_t n);
  // A RST_STREAM from the peer on `s` (null: a stream we no longer track): false when a reset
  // budget is spent (the caller answers GOAWAY ENHANCE_YOUR_CALM).
  bool charge_reset(const Stream* s);

  // Requests per second style budget: `burst` tokens, refilled at `per_s` (fractions kept).
  struct TokenBucket {
    uint64_t tokens = 0, burst = 0, per_s = 0, last_ms = 0;
    void init(uint64_t b, uint64_t rate, uint64_t now_ms) {
      tokens = burst = b;
      per_s = rate;
      last_ms = now_ms;
    }
    bool take(uint64_t now_ms) {
      const uint64_t add = (now_ms - last_ms) * per_s / 1000;
      if (add > 0) {
        tokens = std::min(burst, tokens + add);
        last_ms = now_ms;
      }
      if (tokens == 0) return false;
      --tokens;
      return true;
    }
  };

  tls::Session tls_;
  tls::Role role_;
  ServerHooks* hooks_;
  Counters& counters_;
  Limits limits_;
  nghttp2_session* h2_ = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;
  std::deque<Event> events_;
  std::vector<int32_t> write_blocked_;
  struct PendingConnect {
    int32_t stream;
    uint64_t epoch;
  };
  std::vector<PendingConnect> pending_connects_;  // accepted requests not dialled yet
  uint64_t epoch_ = 0;
  TokenBucket resets_, premature_resets_;
  uint64_t now_ms_;
  uint64_t created_ms_;
  uint64_t last_ping_ms_ = 0;
  uint64_t ping_sent_ms_ = 0;
  uint64_t header_tokens_;
  uint64_t header_refill_ms_;
  size_t h2_mem_used_ = 0;
  size_t send_buffered_ = 0;
  BufferBudget* budget_ = nullptr;
  size_t held_ = 0;          // this connection's bytes in budget_
  size_t credit_owed_ = 0;   // read bytes whose window credit the budget held back
  size_t open_h2_streams_ = 0;
  bool h2_mem_exceeded_ = false;
  bool ping_outstanding_ = false;
  bool established_ = false;
  bool peer_settings_ = false;
  bool closed_ = false;
  bool goaway_received_ = false;
  bool draining_ = false;
  bool in_callbacks_ = false;
  bool defer_connects_ = false;
  bool calmed_ = false;  // GOAWAY ENHANCE_YOUR_CALM queued for a reset flood
};

}  // namespace meshgate::dp::hbone
