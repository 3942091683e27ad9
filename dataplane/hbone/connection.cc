#include "dataplane/hbone/connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dataplane/common/compiler.h"

namespace meshgate::dp::hbone {

// Per-stream state. Lives from the request (server) / open_stream (client) until
// stream_release(), or until nghttp2 closes a stream the caller never saw.
struct Connection::Stream {
  int32_t id = 0;
  ByteQueue in;          // received, not yet read by the caller (credited back on read)
  ByteQueue out;         // accepted from the caller, not yet framed
  size_t credit_owed = 0; // read bytes not credited back yet (budget full)
  std::string authority; // server: :authority as received (bounded by the header budget)
  Resolution dst;        // server: where the authority resolved (re-checked on policy change)
  uint32_t header_bytes = 0;
  int status = 0;        // client: :status of the response
  uint64_t begun_ms = 0;  // server: when its HEADERS began (premature resets)
  bool method_connect = false;
  bool saw_method = false;
  bool headers_too_large = false;
  bool surfaced = false;   // the caller knows this stream (events are delivered)
  bool open = false;       // tunnel established (200 sent / received): DATA may flow out
  bool rejected = false;   // server answered with an error status
  bool connect_pending = false; // server: accepted, its upstream dial not started yet
  bool connecting = false; // server: waiting for upstream_connected()
  bool out_fin = false;    // caller shut down its side: END_STREAM after `out`
  bool data_deferred = false;
  bool readable_signalled = false;
  bool write_blocked = false;
  bool in_fin = false;
  bool h2_closed = false;
};

const char* close_reason_name(CloseReason r) {
  switch (r) {
    case CloseReason::kGraceful: return "graceful";
    case CloseReason::kPeerClosed: return "peer_closed";
    case CloseReason::kTlsFailed: return "tls_failed";
    case CloseReason::kHandshakeTimeout: return "handshake_timeout";
    case CloseReason::kProtocolError: return "protocol_error";
    case CloseReason::kPingTimeout: return "ping_timeout";
    case CloseReason::kMemoryBudget: return "memory_budget";
    case CloseReason::kAborted: return "aborted";
  }
  return "?";
}

namespace {

constexpr size_t kReadChunk = 16 * 1024;  // one TLS record of plaintext per SSL_read

Counter tls_failure_counter(tls::Failure f) {
  switch (f) {
    case tls::Failure::kChainUntrusted: return Counter::k_tls_failed_chain_untrusted;
    case tls::Failure::kNoPeerCertificate: return Counter::k_tls_failed_no_peer_certificate;
    case tls::Failure::kNoSpiffeId: return Counter::k_tls_failed_no_spiffe_id;
    case tls::Failure::kWrongTrustDomain: return Counter::k_tls_failed_wrong_trust_domain;
    case tls::Failure::kUnexpectedIdentity: return Counter::k_tls_failed_unexpected_identity;
    case tls::Failure::kNoAlpnH2: return Counter::k_tls_failed_no_alpn_h2;
    case tls::Failure::kPeerClosed: return Counter::k_tls_failed_peer_closed;
    case tls::Failure::kNone:
    case tls::Failure::kProtocol: break;
  }
  return Counter::k_tls_failed_protocol;
}

// nghttp2's allocator with a byte budget: a block carries its size in a 16-byte header.
struct MemHeader {
  size_t size;
  size_t pad;
};

nghttp2_nv nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

// nghttp2 → Connection glue. Every callback runs inside mem_recv / mem_send of this
// connection's session.
struct Connection::Callbacks {
  static Connection& conn(void* user) { return *static_cast<Connection*>(user); }

  static void* mem_malloc(size_t size, void* user) {
    Connection& c = conn(user);
    if (c.h2_mem_used_ + size > c.limits_.h2_memory_bytes) {
      c.h2_mem_exceeded_ = true;
      return nullptr;
    }
    auto* h = static_cast<MemHeader*>(std::malloc(sizeof(MemHeader) + size));
    if (h == nullptr) return nullptr;
    h->size = size;
    c.h2_mem_used_ += size;
    return h + 1;
  }
  static void mem_free(void* p, void* user) {
    if (p == nullptr) return;
    auto* h = static_cast<MemHeader*>(p) - 1;
    conn(user).h2_mem_used_ -= h->size;
    std::free(h);
  }
  static void* mem_calloc(size_t n, size_t size, void* user) {
    if (size != 0 && n > SIZE_MAX / size) return nullptr;
    void* p = mem_malloc(n * size, user);
    if (p != nullptr) std::memset(p, 0, n * size);
    return p;
  }
  static void* mem_realloc(void* p, size_t size, void* user) {
    if (p == nullptr) return mem_malloc(size, user);
    auto* h = static_cast<MemHeader*>(p) - 1;
    void* q = mem_malloc(size, user);
    if (q == nullptr) return nullptr;
    std::memcpy(q, p, std::min(size, h->size));
    mem_free(p, user);
    return q;
  }

  static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    Connection& c = conn(user);
    if (c.role_ != tls::Role::kServer || frame->hd.type != NGHTTP2_HEADERS ||
        frame->headers.cat != NGHTTP2_HCAT_REQUEST)
      return 0;
    auto s = std::make_unique<Stream>();
    s->id = frame->hd.stream_id;
    s->begun_ms = c.now_ms_;
    nghttp2_session_set_stream_user_data(session, s->id, s.get());
    c.streams_[s->id] = std::move(s);
    ++c.open_h2_streams_;
    c.counters_.add(Counter::k_streams_requested);
    return 0;
  }

  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    Connection& c = conn(user);
    const size_t cost = namelen + valuelen + 32;  // RFC 7541 4.1 entry size
    if (!c.charge_header_bytes(cost)) {
      c.counters_.add(Counter::k_header_budget_exceeded);
      nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM);
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    Stream* s = c.find(frame->hd.stream_id);
    if (s == nullptr || frame->hd.type != NGHTTP2_HEADERS) return 0;
    const uint32_t list_limit = c.role_ == tls::Role::kServer ? c.limits_.server_max_header_list_bytes
                                                              : c.limits_.client_max_header_list_bytes;
    s->header_bytes += uint32_t(std::min<size_t>(cost, UINT32_MAX / 2));
    if (s->header_bytes > list_limit) {
      s->headers_too_large = true;
      return 0;  // keep decoding (HPACK state must stay in sync), keep nothing
    }
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (c.role_ == tls::Role::kServer) {
      if (n == ":method") {
        s->saw_method = true;
        s->method_connect = v == "CONNECT";
      } else if (n == ":authority") {
        s->authority.assign(v);
      }
    } else if (n == ":status" && valuelen == 3) {
      s->status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    Connection& c = conn(user);
    const int32_t id = frame->hd.stream_id;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS: {
        Stream* s = c.find(id);
        if (s == nullptr) break;
        if (c.role_ == tls::Role::kServer && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
          c.handle_request(*s);
        } else if (c.role_ == tls::Role::kClient && s->status >= 200 && !s->open && !s->rejected) {
          if (s->status == 200) {
            s->open = true;
            if (s->data_deferred) {
              s->data_deferred = false;
              nghttp2_session_resume_data(session, id);
            }
          } else {
            s->rejected = true;
            c.counters_.add(Counter::k_client_non_200);
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
          }
          c.push(EventKind::kStreamResponse, id, uint32_t(s->status));
        }
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !s->in_fin) {
          s->in_fin = true;
          if (s->surfaced && !s->rejected) c.push(EventKind::kStreamRemoteEnd, id);
        }
        break;
      }
      case NGHTTP2_DATA: {
        Stream* s = c.find(id);
        if (s != nullptr && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !s->in_fin) {
          s->in_fin = true;
          if (s->surfaced && !s->rejected) c.push(EventKind::kStreamRemoteEnd, id);
        }
        break;
      }
      case NGHTTP2_RST_STREAM: {
        const uint32_t code = frame->rst_stream.error_code;
        c.counters_.add(is_clean_reset(code) ? Counter::k_rst_received_clean
                                             : Counter::k_rst_received_error);
        Stream* s = c.find(id);
        if (c.role_ == tls::Role::kServer && !c.charge_reset(s)) {
          // RFC 9113 5.4.1 / 7: ENHANCE_YOUR_CALM, the peer's behaviour may be a flood.
          c.calmed_ = true;
          c.counters_.add(Counter::k_rapid_reset_goaway);
          nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM);
        }
        if (s != nullptr && s->connect_pending) {
          s->connect_pending = false;  // dispatch_connects() skips it
          c.counters_.add(Counter::k_reset_before_dial);
        }
        if (s != nullptr && s->surfaced) c.push(EventKind::kStreamReset, id, code);
        break;
      }
      case NGHTTP2_GOAWAY:
        c.counters_.add(Counter::k_goaway_received);
        c.goaway_received_ = true;
        c.push(EventKind::kGoaway, frame->goaway.last_stream_id, frame->goaway.error_code);
        break;
      case NGHTTP2_PING:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) c.ping_outstanding_ = false;
        break;
      case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) c.peer_settings_ = true;
        break;
      default:
        break;
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data,
                           size_t len, void* user) {
    Connection& c = conn(user);
    Stream* s = c.find(id);
    if (s == nullptr || s->rejected) {
      // Nobody will read it: credit the window back at once.
      nghttp2_session_consume(session, id, len);
      return 0;
    }
    s->in.append(data, len);
    c.hold(len, 0);
    if (s->surfaced && !s->readable_signalled) {
      s->readable_signalled = true;
      c.push(EventKind::kStreamReadable, id);
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
    Connection& c = conn(user);
    auto it = c.streams_.find(id);
    if (it == c.streams_.end()) return 0;
    Stream& s = *it->second;
    if (!s.h2_closed) {
      s.h2_closed = true;
      --c.open_h2_streams_;
    }
    if (s.surfaced) {
      c.push(EventKind::kStreamClosed, id, error_code);
    } else {
      if (!s.in.empty()) nghttp2_session_consume_connection(c.h2_, s.in.size());
      c.send_buffered_ -= s.out.size();
      c.hold(0, s.in.size() + s.out.size());
      c.streams_.erase(it);
    }
    return 0;
  }

  static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    Connection& c = conn(user);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS: {
        // RFC 9113 8.1: after a complete error response, ask the client to stop sending with
        // RST_STREAM(NO_ERROR), sent only after the response so the status always arrives.
        Stream* s = c.find(frame->hd.stream_id);
        if (s != nullptr && s->rejected && c.role_ == tls::Role::kServer && !s->in_fin)
          nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
        break;
      }
      case NGHTTP2_RST_STREAM: c.counters_.add(Counter::k_rst_sent); break;
      case NGHTTP2_GOAWAY: c.counters_.add(Counter::k_goaway_sent); break;
      case NGHTTP2_PING:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) c.counters_.add(Counter::k_pings_sent);
        break;
      default: break;
    }
    return 0;
  }

  static int on_invalid_frame(nghttp2_session*, const nghttp2_frame*, int, void* user) {
    conn(user).counters_.add(Counter::k_h2_invalid_frames);
    return 0;
  }

  static ssize_t read_length(nghttp2_session*, uint8_t, int32_t, int32_t session_window,
                             int32_t stream_window, uint32_t max_frame, void*) {
    // Frames as large as the windows and the peer's SETTINGS_MAX_FRAME_SIZE allow: fewer
    // frame headers and fewer calls per byte than nghttp2's 16 KiB default.
    return std::max<ssize_t>(1, std::min<ssize_t>({session_window, stream_window, ssize_t(max_frame)}));
  }

  static ssize_t read_data(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                           uint32_t* flags, nghttp2_data_source*, void* user) {
    Connection& c = conn(user);
    Stream* s = c.find(id);
    if (s == nullptr) return NGHTTP2_ERR_DEFERRED;  // released; its RST_STREAM is queued
    if (!s->open) {
      s->data_deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    const size_t n = s->out.read(buf, length);
    c.send_buffered_ -= n;
    c.hold(0, n);
    if (s->out.empty() && s->out_fin) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return ssize_t(n);
    }
    if (n == 0) {
      s->data_deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return ssize_t(n);
  }
};

std::unique_ptr<Connection> Connection::server(const tls::Context& tls, ServerHooks& hooks,
                                               Counters& counters, uint64_t now_ms,
                                               const Limits& limits) {
  return std::unique_ptr<Connection>(
      new Connection(tls, tls::Role::kServer, {}, &hooks, counters, now_ms, limits));
}

std::unique_ptr<Connection> Connection::client(const tls::Context& tls,
                                               std::vector<std::string> expected_ids,
                                               Counters& counters, uint64_t now_ms,
                                               const Limits& limits) {
  return std::unique_ptr<Connection>(new Connection(tls, tls::Role::kClient,
                                                    std::move(expected_ids), nullptr, counters,
                                                    now_ms, limits));
}

Connection::Connection(const tls::Context& tls, tls::Role role, std::vector<std::string> expected_ids,
                       ServerHooks* hooks, Counters& counters, uint64_t now_ms, const Limits& limits)
    : tls_(tls, role, std::move(expected_ids)),
      role_(role),
      hooks_(hooks),
      counters_(counters),
      limits_(limits),
      now_ms_(now_ms),
      created_ms_(now_ms),
      header_tokens_(limits.header_bytes_burst),
      header_refill_ms_(now_ms) {
  resets_.init(limits.reset_burst, limits.reset_rate_per_s, now_ms);
  premature_resets_.init(limits.premature_reset_burst, limits.premature_reset_per_s, now_ms);
  init_h2();
  // The client speaks first: its ClientHello goes out now.
  if (role_ == tls::Role::kClient) drive();
}

Connection::~Connection() {
  nghttp2_session_del(h2_);
  if (budget_ != nullptr) budget_->used_bytes -= held_;
}

void Connection::hold(size_t add, size_t sub) {
  held_ = held_ + add - sub;
  if (budget_ != nullptr) budget_->used_bytes = budget_->used_bytes + add - sub;
}

void Connection::credit(Stream& s, size_t n) {
  if (budget_blocks()) {
    // The peer's window stays as small as it is: it cannot make this worker buffer more.
    if (s.credit_owed == 0 && credit_owed_ == 0) counters_.add(Counter::k_buffer_budget_windows_held);
    s.credit_owed += n;
    credit_owed_ += n;
    budget_->waiting = true;
    return;
  }
  if (s.h2_closed) {
    nghttp2_session_consume_connection(h2_, n);
  } else {
    nghttp2_session_consume(h2_, s.id, n);
  }
}

void Connection::budget_room_back() {
  if (closed_) return;
  if (credit_owed_ > 0) {
    credit_owed_ = 0;
    for (auto& [id, s] : streams_) {
      if (s->credit_owed == 0) continue;
      const size_t n = s->credit_owed;
      s->credit_owed = 0;
      credit(*s, n);
    }
  }
  flush();  // window updates out; signal_writable() wakes writers the budget held back
}

void Connection::init_h2() {
  nghttp2_session_callbacks* cb;
  MG_CHECK(nghttp2_session_callbacks_new(&cb) == 0);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, Callbacks::on_frame_send);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, Callbacks::on_invalid_frame);
  nghttp2_session_callbacks_set_data_source_read_length_callback(cb, Callbacks::read_length);

  nghttp2_option* opt;
  MG_CHECK(nghttp2_option_new(&opt) == 0);
  // Credit goes back as the caller consumes (stream_read), not as nghttp2 receives.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_continuations(opt, limits_.max_continuations);
  nghttp2_option_set_no_closed_streams(opt, 1);
  if (role_ == tls::Role::kServer) {
    // A backstop only: charge_reset() spends the same budget first and answers
    // ENHANCE_YOUR_CALM, where nghttp2's own limit would answer INTERNAL_ERROR.
    nghttp2_option_set_stream_reset_rate_limit(opt, 2 * limits_.reset_burst,
                                               2 * limits_.reset_rate_per_s);
  } else {
    nghttp2_option_set_peer_max_concurrent_streams(opt, limits_.client_max_streams);
  }

  static nghttp2_mem mem_template = {nullptr, Callbacks::mem_malloc, Callbacks::mem_free,
                                     Callbacks::mem_calloc, Callbacks::mem_realloc};
  nghttp2_mem mem = mem_template;
  mem.mem_user_data = this;
  const int rv = role_ == tls::Role::kServer ? nghttp2_session_server_new3(&h2_, cb, this, opt, &mem)
                                             : nghttp2_session_client_new3(&h2_, cb, this, opt, &mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  MG_CHECK(rv == 0);

  std::vector<nghttp2_settings_entry> settings = {
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.stream_window_bytes},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, limits_.max_frame_bytes},
  };
  if (role_ == tls::Role::kServer) {
    settings.push_back({NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.server_max_streams});
    settings.push_back({NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.server_max_header_list_bytes});
  } else {
    settings.push_back({NGHTTP2_SETTINGS_ENABLE_PUSH, 0});
    settings.push_back({NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.client_max_header_list_bytes});
  }
  MG_CHECK(nghttp2_submit_settings(h2_, NGHTTP2_FLAG_NONE, settings.data(), settings.size()) == 0);
  MG_CHECK(nghttp2_session_set_local_window_size(h2_, NGHTTP2_FLAG_NONE, 0,
                                                 int32_t(limits_.connection_window_bytes)) == 0);
}

void Connection::push(EventKind kind, int32_t stream, uint32_t code) {
  events_.push_back(Event{kind, stream, code});
}

bool Connection::poll_event(Event& ev) {
  if (events_.empty()) return false;
  ev = events_.front();
  events_.pop_front();
  return true;
}

Connection::Stream* Connection::find(int32_t id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

bool Connection::charge_reset(const Stream* s) {
  if (calmed_) return true;  // GOAWAY already queued
  if (!resets_.take(now_ms_)) return false;
  // Not refused by us, and not open yet (its dial may have started) or open only briefly.
  const bool premature =
      s != nullptr && !s->rejected &&
      (!s->open || now_ms_ - s->begun_ms < limits_.premature_reset_lifetime_ms);
  return !premature || premature_resets_.take(now_ms_);
}

bool Connection::charge_header_bytes(size_t n) {
  if (header_tokens_ < n) return false;
  header_tokens_ -= n;
  return true;
}

void Connection::recv_transport(const uint8_t* p, size_t n, uint64_t now_ms) {
  now_ms_ = now_ms;
  if (closed_) return;
  tls_.put_transport(p, n);
  drive();
  if (!defer_connects_) dispatch_connects();
}

void Connection::recv_transport_eof(uint64_t now_ms) {
  now_ms_ = now_ms;
  if (closed_) return;
  tls_.put_transport_eof();
  drive();
  if (!closed_) close(CloseReason::kPeerClosed);
}

void Connection::transport_out_consumed(size_t n) {
  tls_.transport_out().consume(n);
  if (!closed_) {
    flush();
    check_done();
  }
}

void Connection::drive() {
  if (closed_) return;
  if (!established_) {
    const tls::Session::State st = tls_.advance();
    if (st == tls::Session::State::kHandshaking) return;
    if (st != tls::Session::State::kEstablished) {
      counters_.add(tls_failure_counter(tls_.failure()));
      close(CloseReason::kTlsFailed);
      return;
    }
    established_ = true;
    counters_.add(Counter::k_tls_handshakes);
    last_ping_ms_ = now_ms_;
    push(EventKind::kEstablished);
  }
  uint8_t buf[kReadChunk];
  while (!closed_) {
    const size_t n = tls_.read(buf, sizeof buf);
    if (n == 0) break;
    const ssize_t rv = nghttp2_session_mem_recv(h2_, buf, n);
    if (rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
      // nghttp2 stops without a GOAWAY; RFC 9113 10.5 (a peer that makes us hold header
      // state without end): ENHANCE_YOUR_CALM tells it why.
      counters_.add(Counter::k_continuation_flood);
      nghttp2_session_terminate_session(h2_, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    if (rv < 0) {
      // nghttp2 queued GOAWAY for protocol errors it detected; send it before closing.
      if (!h2_mem_exceeded_ && rv != NGHTTP2_ERR_NOMEM) flush();
      h2_failed(int(rv));
      return;
    }
  }
  if (closed_) return;
  if (tls_.state() == tls::Session::State::kFailed) {
    counters_.add(tls_failure_counter(tls_.failure()));
    close(CloseReason::kTlsFailed);
    return;
  }
  if (tls_.state() == tls::Session::State::kClosed) {
    close(CloseReason::kPeerClosed);
    return;
  }
  flush();
  check_done();
}

void Connection::h2_failed(int nghttp2_error) {
  if (closed_) return;
  if (h2_mem_exceeded_ || nghttp2_error == NGHTTP2_ERR_NOMEM) {
    counters_.add(Counter::k_memory_budget_exceeded);
    close(CloseReason::kMemoryBudget);
  } else {
    counters_.add(Counter::k_h2_protocol_errors);
    close(CloseReason::kProtocolError);
  }
}

void Connection::flush() {
  if (!established_ || closed_) return;
  while (tls_.transport_out().size() < limits_.transport_high_water_bytes) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(h2_, &data);
    if (n < 0) {
      h2_failed(int(n));
      return;
    }
    if (n == 0) break;
    if (!tls_.write(data, size_t(n))) {
      counters_.add(tls_failure_counter(tls_.failure()));
      close(CloseReason::kTlsFailed);
      return;
    }
  }
  signal_writable();
}

void Connection::signal_writable() {
  if (write_blocked_.empty() || send_buffered_ > limits_.connection_send_buffer_bytes / 2) return;
  if (budget_ != nullptr && held_ >= kBudgetFloorBytes &&
      budget_->used_bytes > budget_->resume_bytes()) {
    return;  // the worker's budget is still (nearly) spent: budget_room_back() comes later
  }
  std::vector<int32_t> blocked;
  blocked.swap(write_blocked_);
  for (int32_t id : blocked) {
    Stream* s = find(id);
    if (s == nullptr || !s->write_blocked) continue;
    if (s->out.size() > limits_.stream_send_buffer_bytes / 2) {
      write_blocked_.push_back(id);  // this stream's own buffer is still full
      continue;
    }
    s->write_blocked = false;
    push(EventKind::kStreamWritable, id);
  }
}

void Connection::check_done() {
  if (closed_ || !established_) return;
  if (nghttp2_session_want_read(h2_) == 0 && nghttp2_session_want_write(h2_) == 0) {
    tls_.shutdown();
    close(CloseReason::kGraceful);
  }
}

void Connection::close(CloseReason reason) {
  if (closed_) return;
  closed_ = true;
  // Streams the caller knows end here too: an abrupt end is an error for their TCP side.
  for (auto& [id, s] : streams_) {
    if (!s->surfaced || s->h2_closed) continue;
    s->h2_closed = true;
    push(EventKind::kStreamReset, id, NGHTTP2_INTERNAL_ERROR);
    push(EventKind::kStreamClosed, id, NGHTTP2_INTERNAL_ERROR);
  }
  open_h2_streams_ = 0;
  push(EventKind::kClosed, 0, uint32_t(reason));
}

void Connection::on_timer(uint64_t now_ms) {
  now_ms_ = now_ms;
  if (closed_) return;
  if (!ready() && now_ms - created_ms_ >= limits_.handshake_timeout_ms) {
    counters_.add(Counter::k_handshake_timeouts);
    close(CloseReason::kHandshakeTimeout);
    return;
  }
  if (!established_) return;
  // Refill the decoded-header budget.
  const uint64_t elapsed = now_ms - header_refill_ms_;
  if (elapsed > 0) {
    header_tokens_ = std::min(limits_.header_bytes_burst,
                              header_tokens_ + elapsed * limits_.header_bytes_per_s / 1000);
    header_refill_ms_ = now_ms;
  }
  if (ping_outstanding_) {
    if (now_ms - ping_sent_ms_ >= limits_.ping_timeout_ms) {
      counters_.add(Counter::k_ping_timeouts);
      close(CloseReason::kPingTimeout);
    }
    return;
  }
  if (now_ms - last_ping_ms_ >= limits_.ping_interval_ms) {
    nghttp2_submit_ping(h2_, NGHTTP2_FLAG_NONE, nullptr);
    ping_outstanding_ = true;
    ping_sent_ms_ = last_ping_ms_ = now_ms;
    flush();
  }
}

void Connection::handle_request(Stream& s) {
  if (s.headers_too_large) return reject(s, 431, Counter::k_connect_431_headers);
  if (!s.method_connect) return reject(s, 400, Counter::k_connect_400_method);
  Authority authority;
  if (!parse_authority(s.authority, authority)) return reject(s, 400, Counter::k_connect_400_authority);
  const Resolution dst = hooks_->resolve(authority);
  if (dst.kind == Resolution::Kind::kNotServed) return reject(s, 400, Counter::k_connect_400_not_served);
  if (!hooks_->authorize(tls_.peer_id(), dst)) return reject(s, 401, Counter::k_connect_401_denied);
  if (dst.kind == Resolution::Kind::kNoEndpoint) return reject(s, 503, Counter::k_connect_503_no_endpoint);
  // The dial waits until the bytes that brought this request are all processed (see
  // dispatch_connects): a RST_STREAM right behind the HEADERS costs nothing upstream.
  s.dst = dst;
  s.connect_pending = true;
  pending_connects_.push_back({s.id, epoch_});
}

void Connection::dispatch_connects(uint64_t max_epoch) {
  // In arrival order; connect() never calls back into this connection. Younger requests stay.
  size_t kept = 0;
  for (size_t i = 0; i < pending_connects_.size(); ++i) {
    const PendingConnect pc = pending_connects_[i];
    Stream* s = find(pc.stream);
    if (s == nullptr || !s->connect_pending) continue;  // reset meanwhile: never dialled
    if (pc.epoch > max_epoch && !closed_) {
      pending_connects_[kept++] = pc;
      continue;
    }
    s->connect_pending = false;
    if (closed_ || s->h2_closed || s->rejected) continue;
    s->connecting = true;
    s->surfaced = true;
    hooks_->connect(s->id, s->dst);
  }
  pending_connects_.resize(kept);
}

void Connection::reject(Stream& s, int status, Counter c) {
  counters_.add(c);
  s.rejected = true;
  s.surfaced = false;
  s.connecting = false;
  if (!s.in.empty()) {
    nghttp2_session_consume(h2_, s.id, s.in.size());
    hold(0, s.in.size());
    s.in.clear();
  }
  char code[4] = {char('0' + status / 100), char('0' + status / 10 % 10), char('0' + status % 10), 0};
  const nghttp2_nv hdrs[] = {nv(":status", std::string_view(code, 3))};
  nghttp2_submit_response(h2_, s.id, hdrs, 1, nullptr);  // HEADERS with END_STREAM
}

void Connection::upstream_connected(int32_t id, bool ok) {
  Stream* s = find(id);
  if (closed_ || s == nullptr || !s->connecting) return;
  s->connecting = false;
  if (s->h2_closed) return;  // the client gave up meanwhile; kStreamClosed is queued
  if (!ok) {
    reject(*s, 503, Counter::k_connect_503_upstream_failed);
    // The caller dropped the stream with its failed connect: forget it once nghttp2 closes it.
  } else {
    counters_.add(Counter::k_connect_200);
    s->open = true;
    const nghttp2_nv hdrs[] = {nv(":status", "200")};
    nghttp2_data_provider prd{};
    prd.source.ptr = s;
    prd.read_callback = Callbacks::read_data;
    nghttp2_submit_response(h2_, id, hdrs, 1, &prd);
    if (!s->in.empty() && !s->readable_signalled) {
      s->readable_signalled = true;
      push(EventKind::kStreamReadable, id);  // bytes that came with the request
    }
    if (s->in_fin) push(EventKind::kStreamRemoteEnd, id);
  }
  flush();
  check_done();
}

bool Connection::can_open_stream() const {
  if (role_ != tls::Role::kClient || !established_ || closed_ || goaway_received_ || draining_)
    return false;
  const uint32_t peer_max =
      nghttp2_session_get_remote_settings(h2_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  const size_t limit = std::min<size_t>(limits_.client_max_streams, peer_max);
  return open_h2_streams_ < limit && nghttp2_session_get_next_stream_id(h2_) < (1u << 31) - 1;
}

int32_t Connection::open_stream(const ConnectRequest& req) {
  if (!can_open_stream()) {
    counters_.add(Counter::k_client_no_capacity);
    return -1;
  }
  nghttp2_nv hdrs[7];
  size_t n = 0;
  hdrs[n++] = nv(":method", "CONNECT");
  hdrs[n++] = nv(":authority", req.authority);
  if (!req.baggage.empty()) hdrs[n++] = nv("baggage", req.baggage);
  if (!req.forwarded.empty()) hdrs[n++] = nv("forwarded", req.forwarded);
  if (!req.traceparent.empty()) hdrs[n++] = nv("traceparent", req.traceparent);
  if (!req.forwarded_network.empty()) hdrs[n++] = nv("x-forwarded-network", req.forwarded_network);
  auto s = std::make_unique<Stream>();
  s->surfaced = true;
  nghttp2_data_provider prd{};
  prd.source.ptr = s.get();
  prd.read_callback = Callbacks::read_data;
  const int32_t id = nghttp2_submit_request(h2_, nullptr, hdrs, n, &prd, s.get());
  if (id < 0) {
    counters_.add(Counter::k_client_no_capacity);
    return -1;
  }
  s->id = id;
  streams_[id] = std::move(s);
  ++open_h2_streams_;
  counters_.add(Counter::k_streams_requested);
  flush();
  return id;
}

size_t Connection::stream_readable(int32_t id) const {
  const Stream* s = find(id);
  return s == nullptr ? 0 : s->in.size();
}

size_t Connection::stream_read(int32_t id, uint8_t* out, size_t cap) {
  Stream* s = find(id);
  if (s == nullptr) return 0;
  const size_t n = s->in.read(out, cap);
  hold(0, n);
  if (s->in.empty()) s->readable_signalled = false;
  if (n > 0 && !closed_) {
    credit(*s, n);
    flush();
  }
  return n;
}

size_t Connection::stream_send_room(int32_t id) const {
  const Stream* s = find(id);
  if (s == nullptr || closed_ || s->out_fin || s->h2_closed || s->rejected) return 0;
  const size_t stream_room = limits_.stream_send_buffer_bytes - std::min(s->out.size(), limits_.stream_send_buffer_bytes);
  const size_t conn_room = limits_.connection_send_buffer_bytes - std::min(send_buffered_, limits_.connection_send_buffer_bytes);
  size_t room = std::min(stream_room, conn_room);
  if (budget_ != nullptr) {
    // The worker's budget, except below this connection's floor (see BufferBudget).
    const size_t floor_room = kBudgetFloorBytes - std::min(held_, kBudgetFloorBytes);
    room = std::min(room, std::max(budget_->room(), floor_room));
  }
  return room;
}

size_t Connection::stream_write(int32_t id, const uint8_t* p, size_t n) {
  Stream* s = find(id);
  const size_t take = std::min(n, stream_send_room(id));
  if (s == nullptr) return 0;
  if (take < n && !s->write_blocked && !closed_ && !s->h2_closed && !s->out_fin) {
    if (budget_blocks()) {
      counters_.add(Counter::k_buffer_budget_full);
      budget_->waiting = true;  // budget_room_back() wakes it
    } else {
      counters_.add(Counter::k_send_budget_full);
    }
    s->write_blocked = true;
    write_blocked_.push_back(id);
  }
  if (take == 0) return 0;
  s->out.append(p, take);
  send_buffered_ += take;
  hold(take, 0);
  if (s->data_deferred && s->open) {
    s->data_deferred = false;
    nghttp2_session_resume_data(h2_, id);
  }
  flush();
  return take;
}

void Connection::stream_shutdown(int32_t id) {
  Stream* s = find(id);
  if (s == nullptr || s->out_fin || closed_) return;
  s->out_fin = true;
  if (s->data_deferred && s->open) {
    s->data_deferred = false;
    nghttp2_session_resume_data(h2_, id);
  }
  flush();
  check_done();
}

static_assert(kH2ConnectError == NGHTTP2_CONNECT_ERROR);

size_t Connection::recheck_authorization() {
  if (role_ != tls::Role::kServer || closed_) return 0;
  std::vector<int32_t> denied;
  for (const auto& [id, s] : streams_) {
    if (!s->surfaced || s->rejected || s->h2_closed || (!s->open && !s->connecting)) continue;
    if (!hooks_->authorize(tls_.peer_id(), s->dst)) denied.push_back(id);
  }
  for (const int32_t id : denied) {
    Stream* s = find(id);
    counters_.add(Counter::k_policy_revoked);
    // The tunnel ends as an error on both sides: the peer resets its TCP side, the caller
    // resets the upstream (kStreamReset with the code, then kStreamClosed).
    s->connecting = false;
    stream_reset(id, kH2ConnectError);
    push(EventKind::kStreamReset, id, kH2ConnectError);
  }
  return denied.size();
}

void Connection::stream_reset(int32_t id, uint32_t h2_error) {
  Stream* s = find(id);
  if (s == nullptr || closed_ || s->h2_closed) return;
  nghttp2_submit_rst_stream(h2_, NGHTTP2_FLAG_NONE, id, h2_error);
  send_buffered_ -= s->out.size();
  hold(0, s->out.size());
  s->out.clear();
  s->out_fin = true;
  flush();
  check_done();
}

void Connection::stream_release(int32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  if (!s.h2_closed && open_h2_streams_ > 0) --open_h2_streams_;  // on_stream_close won't see it
  if (!closed_) {
    if (!s.h2_closed) nghttp2_submit_rst_stream(h2_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    // Everything of this stream is gone: its withheld credit too (the connection's window
    // must not shrink for good).
    const size_t n = s.in.size() + s.credit_owed;
    if (n > 0) {
      if (s.h2_closed) {
        nghttp2_session_consume_connection(h2_, n);
      } else {
        nghttp2_session_consume(h2_, id, n);
      }
    }
    nghttp2_session_set_stream_user_data(h2_, id, nullptr);
  }
  credit_owed_ -= s.credit_owed;
  send_buffered_ -= s.out.size();
  hold(0, s.in.size() + s.out.size());
  streams_.erase(it);
  if (!closed_) {
    flush();
    check_done();
  }
}

void Connection::drain() {
  if (closed_ || draining_) return;
  draining_ = true;
  if (!established_) {
    close(CloseReason::kGraceful);
    return;
  }
  nghttp2_submit_goaway(h2_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h2_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  flush();
  check_done();
}

void Connection::abort() { close(CloseReason::kAborted); }

}  // namespace meshgate::dp::hbone
