// The HBONE gateway's records of one connection (Conn) and of one tunnel (Up), and the
// constants its files share. Private to the gateway's files: gateway.cc (the worker interface
// and the HBONE connection machinery), terminator.cc, originator.cc and splice.cc.
#pragma once

#include <rte_mbuf.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/hbone/gateway.h"
#include "dataplane/stack/stack_host.h"

namespace meshgate::dp::hbone {

// Bytes moved per copy between the stack and the engine (both copy anyway: TLS records in,
// stream data out).
inline constexpr size_t kChunk = 16 * 1024;
// Per-source handshake counts live in this many hashed buckets (a secret seed, so a client
// cannot aim at another's bucket); addresses that share one share its count.
inline constexpr uint32_t kSourceBuckets = 4096;
// RFC 9113 §8.5: an upstream TCP connection that ends abnormally resets the stream with
// CONNECT_ERROR; a stream reset from the client resets the upstream connection.
inline constexpr uint32_t kUpstreamResetCode = kH2ConnectError;

// One HBONE connection: accepted by the terminator, or dialled by the originator (`client`).
struct Gateway::Conn {
  Gateway* gw = nullptr;
  tcp::TcpConnId tcp = tcp::kNoConn;
  std::shared_ptr<const tls::Context> tls;  // the context it started with
  std::unique_ptr<Connection> engine;
  IpAddr peer, local;
  uint16_t peer_port = 0;
  uint16_t requests = 0;  // CONNECTs seen: spreads a connection's streams over endpoints
  std::vector<Up*> ups;
  Conn* prev = nullptr;
  Conn* next = nullptr;
  bool dead = false;
  bool dial_queued = false;  // in Gateway::to_dial_: accepted CONNECTs wait for advance()
  // Handshake stage (terminated connections): TLS or the client's SETTINGS not done yet.
  bool handshaking = false;
  uint32_t source_bucket = 0;
  Conn* hs_prev = nullptr;
  Conn* hs_next = nullptr;
  // Origination: a pooled client connection to an endpoint's HBONE port.
  bool client = false;
  bool dialing = false;  // TCP handshake in flight
  Pool::ConnId pool_id = 0;  // 0: not (or no longer) in the pool
  PoolKey key;
};

// One tunnel: an HTTP/2 stream and its upstream TCP connection.
struct Gateway::Up {
  Gateway* gw = nullptr;
  Conn* conn = nullptr;  // null while an origination waits for a stream
  int32_t stream = 0;
  tcp::TcpConnId tcp = tcp::kNoConn;
  bool connected = false;   // upstream handshake done (the stream got its 200)
  bool fin_in = false;      // upstream sent FIN (→ END_STREAM once its bytes are in the stream)
  bool stream_end = false;  // we ended the stream's sending side
  bool remote_end = false;  // END_STREAM received (→ FIN upstream once the bytes are out)
  bool shut = false;        // we sent FIN upstream
  bool h2_closed = false;
  // Origination: the TCP side is the client; `connected` means the CONNECT got its 200.
  bool origin = false;
  // Double hop: the other stream of the splice (no TCP side then), or null.
  Up* bridge = nullptr;
  PoolKey key;
  ConnectRequest req;
  // Origination: client bytes read before the handover (a listener's peek), sent first from
  // offset `head_off`; freed with the Up.
  rte_mbuf* head = nullptr;
  uint32_t head_off = 0;
  RouteCounters* route = nullptr;  // a listener route's byte counters (origination), or null
  uint32_t istio_row = kNoIstioRow;  // its Istio metrics row once opened (closed with the Up)
  // Access log: bytes [0] from the client side, [1] to it (the stream's peer for a terminated
  // tunnel, the TCP client for an origination); the side whose end came first (0 client,
  // 1 backend); when it started; its addresses and names.
  uint64_t bytes[2] = {0, 0};
  int8_t first_end = -1;
  uint32_t created_ms = 0;
  AccessTuple tuple;
  AccessNames names;
  void saw_end(bool client_side) {
    if (first_end < 0) first_end = client_side ? 0 : 1;
  }
  Up() = default;
  Up(const Up&) = delete;
  Up& operator=(const Up&) = delete;
  ~Up() {
    if (head != nullptr) rte_pktmbuf_free(head);
    if (istio_row != kNoIstioRow) gw->host_.istio().close(istio_row);
  }
};

}  // namespace meshgate::dp::hbone
