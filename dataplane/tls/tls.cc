#include "dataplane/tls/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace meshgate::dp::tls {
namespace {

constexpr unsigned char kAlpnWire[] = {2, 'h', '2'};
int session_index() {
  static const int idx = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return idx;
}

Session* session_of(BIO* b) { return static_cast<Session*>(BIO_get_data(b)); }

// The custom BIO: reads come from the session's receive queue, writes go to its send queue.
BIO_METHOD* bytequeue_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "meshgate-bytequeue");
    BIO_meth_set_write(m, [](BIO* b, const char* in, int len) {
      BIO_clear_retry_flags(b);
      return session_of(b)->bio_write(in, len);
    });
    BIO_meth_set_read(m, [](BIO* b, char* out, int len) {
      BIO_clear_retry_flags(b);
      const int n = session_of(b)->bio_read(out, len);
      if (n < 0) BIO_set_retry_read(b);
      return n;
    });
    BIO_meth_set_ctrl(m, [](BIO* b, int cmd, long, void*) { return session_of(b)->bio_ctrl(cmd); });
    BIO_meth_set_create(m, [](BIO* b) {
      BIO_set_init(b, 1);
      return 1;
    });
    return m;
  }();
  return method;
}

int verify_callback(int preverify_ok, X509_STORE_CTX* store) {
  SSL* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* s = static_cast<Session*>(SSL_get_ex_data(ssl, session_index()));
  return s->verify_peer(preverify_ok, store);
}

}  // namespace

std::vector<std::string> uri_sans_of(const void* x509) {
  std::vector<std::string> uris;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(static_cast<const X509*>(x509), NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return uris;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type != GEN_URI) continue;
    const ASN1_IA5STRING* u = g->d.uniformResourceIdentifier;
    uris.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(u)),
                      size_t(ASN1_STRING_length(u)));
  }
  GENERAL_NAMES_free(names);
  return uris;
}

std::vector<std::string> spiffe_ids_of(const void* x509) {
  std::vector<std::string> ids = uri_sans_of(x509);
  std::erase_if(ids, [](const std::string& u) {
    SpiffeId id;
    return !parse_spiffe_id(u, id);
  });
  return ids;
}

int alpn_select_h2(SSL*, const unsigned char** out, unsigned char* outlen,
                   const unsigned char* in, unsigned int inlen, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kAlpnWire, sizeof kAlpnWire, in, inlen) ==
          OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

Context::~Context() { SSL_CTX_free(ctx_); }

Session::Session(const Context& ctx, Role role, std::vector<std::string> expected_ids)
    : role_(role), trust_domain_(ctx.trust_domain()), expected_ids_(std::move(expected_ids)) {
  ssl_ = SSL_new(ctx.ssl_ctx());
  if (ssl_ == nullptr) {
    fail(Failure::kProtocol, "SSL_new: " + openssl_errors());
    return;
  }
  SSL_set_ex_data(ssl_, session_index(), this);
  BIO* bio = BIO_new(bytequeue_bio_method());
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);
  if (role == Role::kServer) {
    SSL_set_accept_state(ssl_);
    SSL_set_verify(ssl_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_callback);
  } else {
    SSL_set_connect_state(ssl_);
    SSL_set_verify(ssl_, SSL_VERIFY_PEER, verify_callback);
    SSL_set_alpn_protos(ssl_, kAlpnWire, sizeof kAlpnWire);  // and no SNI: the peer is an IP
  }
}

Session::~Session() { SSL_free(ssl_); }

void Session::fail(Failure f, std::string detail) {
  state_ = State::kFailed;
  if (failure_ == Failure::kNone) {
    failure_ = f;
    failure_detail_ = std::move(detail);
  }
}

int Session::bio_read(char* out, int len) {
  if (rx_.empty()) return rx_eof_ ? 0 : -1;
  return int(rx_.read(out, size_t(len)));
}

int Session::bio_write(const char* in, int len) {
  tx_.append(in, size_t(len));
  return len;
}

long Session::bio_ctrl(int cmd) {
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return long(std::min<size_t>(rx_.size(), LONG_MAX));
    case BIO_CTRL_EOF: return rx_eof_ && rx_.empty();
    default: return 0;
  }
}

bool Session::check_peer_leaf(const void* x509) {
  const std::vector<std::string> ids = spiffe_ids_of(x509);
  if (ids.empty()) {
    failure_ = Failure::kNoSpiffeId;
    failure_detail_ = "peer certificate has no SPIFFE URI SAN";
    return false;
  }
  for (const std::string& id : ids) {
    SpiffeId parsed;
    parse_spiffe_id(id, parsed);
    const bool ok = role_ == Role::kServer
                        ? parsed.trust_domain == trust_domain_
                        : std::find(expected_ids_.begin(), expected_ids_.end(), id) != expected_ids_.end();
    if (ok) {
      peer_id_ = id;
      return true;
    }
  }
  failure_ = role_ == Role::kServer ? Failure::kWrongTrustDomain : Failure::kUnexpectedIdentity;
  failure_detail_ = "peer identity " + ids.front() +
                    (role_ == Role::kServer ? " is not in trust domain " + trust_domain_
                                            : std::string(" is not an expected identity"));
  return false;
}

int Session::verify_peer(int preverify_ok, void* store_ctx) {
  auto* store = static_cast<X509_STORE_CTX*>(store_ctx);
  if (!preverify_ok) {
    if (failure_ == Failure::kNone) {
      failure_ = Failure::kChainUntrusted;
      failure_detail_ = X509_verify_cert_error_string(X509_STORE_CTX_get_error(store));
    }
    return 0;
  }
  if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
  if (check_peer_leaf(X509_STORE_CTX_get_current_cert(store))) return 1;
  X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
  return 0;
}

Session::State Session::advance() {
  if (state_ != State::kHandshaking) return state_;
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
    if (alpn_len != kAlpnH2.size() || std::memcmp(alpn, kAlpnH2.data(), alpn_len) != 0) {
      fail(Failure::kNoAlpnH2, "peer did not negotiate ALPN h2");
      return state_;
    }
    if (peer_id_.empty()) {  // cannot happen with VERIFY_PEER; never run unauthenticated
      fail(Failure::kNoPeerCertificate, "no verified peer identity");
      return state_;
    }
    state_ = State::kEstablished;
    return state_;
  }
  const int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ && !(rx_eof_ && rx_.empty())) return state_;
  const unsigned long err = ERR_peek_error();
  std::string detail = openssl_errors();
  if (failure_ != Failure::kNone) {
    state_ = State::kFailed;  // the verify callback named the reason
  } else if (ERR_GET_REASON(err) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
    fail(Failure::kNoPeerCertificate, std::move(detail));
  } else if (ERR_GET_REASON(err) == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL ||
             ERR_GET_REASON(err) == SSL_R_NO_APPLICATION_PROTOCOL) {
    fail(Failure::kNoAlpnH2, std::move(detail));
  } else if (rx_eof_ && rx_.empty()) {
    fail(Failure::kPeerClosed, "transport closed during the handshake");
  } else {
    fail(Failure::kProtocol, std::move(detail));
  }
  return state_;
}

size_t Session::read(uint8_t* out, size_t cap) {
  if (state_ != State::kEstablished || cap == 0) return 0;
  ERR_clear_error();
  const int r = SSL_read(ssl_, out, int(std::min<size_t>(cap, INT_MAX)));
  if (r > 0) return size_t(r);
  const int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ) return 0;
  if (e == SSL_ERROR_ZERO_RETURN) {
    state_ = State::kClosed;
    return 0;
  }
  fail(Failure::kProtocol, openssl_errors());
  return 0;
}

bool Session::write(const uint8_t* p, size_t n) {
  if (state_ != State::kEstablished) return false;
  while (n > 0) {
    ERR_clear_error();
    const int chunk = int(std::min<size_t>(n, INT_MAX / 2));
    const int r = SSL_write(ssl_, p, chunk);
    if (r <= 0) {
      fail(Failure::kProtocol, openssl_errors());
      return false;
    }
    p += r;
    n -= size_t(r);
  }
  return true;
}

void Session::shutdown() {
  if (state_ == State::kEstablished) {
    ERR_clear_error();
    SSL_shutdown(ssl_);
  }
}

}  // namespace meshgate::dp::tls
