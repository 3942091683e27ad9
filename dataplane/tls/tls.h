// Mutual TLS 1.3 for HBONE (docs/HBONE.md "TLS"): contexts and sans-I/O sessions.
//
// A Context (one SSL_CTX) is built on the control thread from the workload's certificate chain,
// key and trust bundle (control/certs/tls_context.h), then handed to one worker; this folder
// holds only what that worker runs. Sessions are made and driven by the worker:
// ciphertext goes in and out through ByteQueues (a custom BIO), so the same session runs over
// the userspace TCP stack or a kernel socket. Nothing here blocks or touches a file descriptor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dataplane/common/byte_queue.h"
#include "dataplane/tls/spiffe.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace meshgate::dp::tls {

enum class Role : uint8_t { kServer, kClient };

inline constexpr std::string_view kAlpnH2 = "h2";

// One SSL_CTX, built and configured on the control thread (control/certs/tls_context.h), then
// read by one worker, which makes its sessions from it. Owns the SSL_CTX.
class Context {
 public:
  // Takes `ctx` (freed with the Context); `own_id` is our leaf's SPIFFE id in `trust_domain`.
  Context(SSL_CTX* ctx, std::string trust_domain, std::string own_id)
      : ctx_(ctx), trust_domain_(std::move(trust_domain)), own_id_(std::move(own_id)) {}
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  SSL_CTX* ssl_ctx() const { return ctx_; }
  const std::string& trust_domain() const { return trust_domain_; }
  const std::string& own_id() const { return own_id_; }  // our leaf's SPIFFE id

 private:
  SSL_CTX* ctx_ = nullptr;
  std::string trust_domain_;
  std::string own_id_;
};

// The server's ALPN choice: h2, or a fatal no_application_protocol alert. The control thread
// installs it on each SSL_CTX (SSL_CTX_set_alpn_select_cb); it runs in a worker's handshake.
int alpn_select_h2(SSL* ssl, const unsigned char** out, unsigned char* outlen,
                   const unsigned char* in, unsigned int inlen, void* arg);
// The OpenSSL error queue of this thread as one line (the queue is emptied).
std::string openssl_errors();

// Why a handshake failed (one counter each in the HBONE engine).
enum class Failure : uint8_t {
  kNone,
  kChainUntrusted,      // the peer's chain does not verify against the trust bundle
  kNoPeerCertificate,   // server side: the client sent no certificate
  kNoSpiffeId,          // the leaf has no well-formed SPIFFE URI SAN
  kWrongTrustDomain,    // server side: no SPIFFE id in our trust domain
  kUnexpectedIdentity,  // client side: the id is none of the expected ones
  kNoAlpnH2,            // the peer did not agree on ALPN h2
  kProtocol,            // any other TLS error (bad record, version, alert from the peer...)
  kPeerClosed,          // transport ended before the handshake finished
};

class Session {
 public:
  enum class State : uint8_t { kHandshaking, kEstablished, kFailed, kClosed };

  // Server: the client must present a chain to the bundle with a SPIFFE id in our trust
  // domain (which identity is allowed is L4 authorization's job). Client: the server's SPIFFE
  // id must equal one of `expected_ids` (full "spiffe://..." strings); no SNI is sent.
  Session(const Context& ctx, Role role, std::vector<std::string> expected_ids = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Ciphertext in from the transport; end of the transport's input.
  void put_transport(const uint8_t* p, size_t n) { rx_.append(p, n); }
  void put_transport_eof() { rx_eof_ = true; }
  // Ciphertext to send; the caller consumes what the transport took.
  ByteQueue& transport_out() { return tx_; }
  const ByteQueue& transport_out() const { return tx_; }

  // Runs the handshake as far as the buffered input allows. Idempotent once established.
  State advance();
  // Plaintext the peer sent: up to `cap` bytes; 0 when none is buffered (then check state():
  // kClosed after the peer's close_notify or transport end, kFailed on a TLS error).
  size_t read(uint8_t* out, size_t cap);
  // Encrypts all of `p` into transport_out(); false when the session is not established.
  bool write(const uint8_t* p, size_t n);
  // Queues close_notify.
  void shutdown();

  State state() const { return state_; }
  Failure failure() const { return failure_; }
  const std::string& failure_detail() const { return failure_detail_; }
  // The verified peer id (full "spiffe://..." string); empty before the handshake.
  const std::string& peer_id() const { return peer_id_; }
  Role role() const { return role_; }
  // Ciphertext bytes held in the two queues.
  size_t buffered_bytes() const { return rx_.size() + tx_.size(); }

  // OpenSSL callbacks (internal).
  int bio_read(char* out, int len);
  int bio_write(const char* in, int len);
  long bio_ctrl(int cmd);
  int verify_peer(int preverify_ok, void* store_ctx);

 private:
  void fail(Failure f, std::string detail);
  bool check_peer_leaf(const void* x509);

  SSL* ssl_ = nullptr;
  Role role_;
  State state_ = State::kHandshaking;
  Failure failure_ = Failure::kNone;
  std::string failure_detail_;
  std::string trust_domain_;
  std::vector<std::string> expected_ids_;
  std::string peer_id_;
  ByteQueue rx_, tx_;
  bool rx_eof_ = false;
};

// Every URI SAN of an X509 certificate, in certificate order.
std::vector<std::string> uri_sans_of(const void* x509);
// The well-formed SPIFFE URI SANs of an X509 certificate (other URI SANs are ignored).
std::vector<std::string> spiffe_ids_of(const void* x509);

}  // namespace meshgate::dp::tls
