// Mutual TLS sessions over in-memory byte queues, with the mkpki mesh PKI: what HBONE peers
// must accept and reject (docs/HBONE.md "TLS").
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <memory>
#include <string>

#include "control/certs/tls_context.h"
#include "dataplane/tls/tls.h"
#include "tests/support/pki.h"

using meshgate::ctl::create_tls_context;
using meshgate::dp::ByteQueue;
using meshgate::dp::tls::Context;
using meshgate::dp::tls::Failure;
using meshgate::dp::tls::Role;
using meshgate::dp::tls::Session;
using meshgate::test::TestPki;
using State = Session::State;

namespace {

std::unique_ptr<Context> ctx(const std::string& ident, const std::string& bundle = "root.pem") {
  std::string err;
  auto c = create_tls_context(TestPki::get().config(ident, bundle), err);
  EXPECT_NE(c, nullptr) << err;
  return c;
}

void move_bytes(ByteQueue& from, Session& to) {
  to.put_transport(from.data(), from.size());
  from.clear();
}

// Pumps both sessions until neither is handshaking (bounded).
void pump(Session& client, Session& server) {
  for (int i = 0; i < 20; ++i) {
    client.advance();
    move_bytes(client.transport_out(), server);
    server.advance();
    move_bytes(server.transport_out(), client);
    if (client.state() != State::kHandshaking && server.state() != State::kHandshaking) break;
  }
  // The client learns about a rejected certificate only when it reads the server's alert.
  uint8_t buf[64];
  client.read(buf, sizeof buf);
}

std::string read_all(Session& s) {
  std::string out;
  uint8_t buf[4096];
  while (size_t n = s.read(buf, sizeof buf)) out.append(reinterpret_cast<char*>(buf), n);
  return out;
}

// The demo.client / demo.server pair handshakes and each side verified the other's identity.
void expect_mutual(Session& client, Session& server) {
  pump(client, server);
  ASSERT_EQ(server.state(), State::kEstablished) << server.failure_detail();
  ASSERT_EQ(client.state(), State::kEstablished) << client.failure_detail();
  EXPECT_EQ(server.peer_id(), "spiffe://cluster.local/ns/demo/sa/client");
  EXPECT_EQ(client.peer_id(), "spiffe://cluster.local/ns/demo/sa/server");
}

}  // namespace

TEST(Tls, context_names_its_own_spiffe_id) {
  auto c = ctx("demo.server");
  EXPECT_EQ(c->own_id(), "spiffe://cluster.local/ns/demo/sa/server");
}

// A context from PEM text (a certificate from the Istio CA never touches a file) works like one
// from files: a session pair across the two kinds verifies both identities.
TEST(Tls, context_from_pem_in_memory_handshakes_with_one_from_files) {
  const auto& pki = TestPki::get();
  auto text = [](const std::string& path) {
    std::string s;
    FILE* f = std::fopen(path.c_str(), "rb");
    EXPECT_NE(f, nullptr) << path;
    char buf[4096];
    while (f && !std::feof(f)) s.append(buf, std::fread(buf, 1, sizeof buf, f));
    if (f) std::fclose(f);
    return s;
  };
  meshgate::ctl::TlsContextConfig mem;
  mem.cert_chain_pem = text(pki.path("demo.server.pem"));
  mem.private_key_pem = text(pki.path("demo.server-key.pem"));
  mem.trust_bundle_pem = text(pki.path("root.pem"));
  std::string err;
  auto sc = create_tls_context(mem, err);
  ASSERT_NE(sc, nullptr) << err;
  EXPECT_EQ(sc->own_id(), "spiffe://cluster.local/ns/demo/sa/server");
  auto cc = ctx("demo.client");
  Session server(*sc, Role::kServer);
  Session client(*cc, Role::kClient, {"spiffe://cluster.local/ns/demo/sa/server"});
  expect_mutual(client, server);

  // The same checks as for files: a key that does not match, a malformed bundle.
  auto wrong_key = mem;
  wrong_key.private_key_pem = text(pki.path("demo.client-key.pem"));
  EXPECT_EQ(create_tls_context(wrong_key, err), nullptr);
  EXPECT_NE(err.find("private_key (PEM)"), std::string::npos) << err;
  EXPECT_NE(err.find("mismatch"), std::string::npos) << err;
  auto no_bundle = mem;
  no_bundle.trust_bundle_pem = "not PEM";
  EXPECT_EQ(create_tls_context(no_bundle, err), nullptr);
  EXPECT_NE(err.find("trust_bundle (PEM)"), std::string::npos) << err;
}

TEST(Tls, mutual_handshake_verifies_both_identities_and_carries_bytes_both_ways) {
  auto sc = ctx("demo.server"), cc = ctx("demo.client");
  Session server(*sc, Role::kServer);
  Session client(*cc, Role::kClient, {"spiffe://cluster.local/ns/demo/sa/server"});
  expect_mutual(client, server);

  const std::string big(100000, 'x');
  ASSERT_TRUE(client.write(reinterpret_cast<const uint8_t*>(big.data()), big.size()));
  move_bytes(client.transport_out(), server);
  EXPECT_EQ(read_all(server), big);
  ASSERT_TRUE(server.write(reinterpret_cast<const uint8_t*>("pong"), 4));
  move_bytes(server.transport_out(), client);
  EXPECT_EQ(read_all(client), "pong");

  client.shutdown();
  move_bytes(client.transport_out(), server);
  EXPECT_EQ(read_all(server), "");
  EXPECT_EQ(server.state(), State::kClosed);
}

// A client of the foreign trust domain against a server trusting `server_bundle`; returns
// the server's failure.
Failure foreign_client_against(const std::string& server_bundle) {
  auto sc = ctx("demo.server", server_bundle);
  std::string err;
  auto fc = create_tls_context(
      TestPki::get().config("foreign.demo.client", "both-roots.pem", "foreign.example"), err);
  EXPECT_NE(fc, nullptr) << err;
  Session server(*sc, Role::kServer);
  Session client(*fc, Role::kClient, {"spiffe://cluster.local/ns/demo/sa/server"});
  pump(client, server);
  EXPECT_EQ(server.state(), State::kFailed);
  EXPECT_EQ(client.state(), State::kFailed);
  return server.failure();
}

TEST(Tls, server_rejects_a_client_from_a_foreign_trust_domain_even_when_its_root_is_trusted) {
  std::string err;
  EXPECT_EQ(create_tls_context(TestPki::get().config("foreign.demo.client", "both-roots.pem"), err),
            nullptr)
      << "the foreign cert is not in cluster.local: a context for that domain refuses it";
  EXPECT_EQ(foreign_client_against("both-roots.pem"), Failure::kWrongTrustDomain);
}

TEST(Tls, server_rejects_a_chain_that_does_not_reach_the_bundle) {
  EXPECT_EQ(foreign_client_against("root.pem"), Failure::kChainUntrusted);
}

TEST(Tls, client_rejects_a_server_that_is_not_an_expected_identity) {
  auto sc = ctx("demo.blocked"), cc = ctx("demo.client");
  Session server(*sc, Role::kServer);
  Session client(*cc, Role::kClient,
                 {"spiffe://cluster.local/ns/demo/sa/server", "spiffe://cluster.local/ns/x/sa/y"});
  pump(client, server);
  EXPECT_EQ(client.state(), State::kFailed);
  EXPECT_EQ(client.failure(), Failure::kUnexpectedIdentity) << client.failure_detail();
  EXPECT_NE(server.state(), State::kEstablished);
}

TEST(Tls, client_accepts_any_of_the_expected_identities) {
  auto sc = ctx("other.client"), cc = ctx("demo.client");
  Session server(*sc, Role::kServer);
  Session client(*cc, Role::kClient,
                 {"spiffe://cluster.local/ns/demo/sa/server", "spiffe://cluster.local/ns/other/sa/client"});
  pump(client, server);
  EXPECT_EQ(client.state(), State::kEstablished) << client.failure_detail();
  EXPECT_EQ(client.peer_id(), "spiffe://cluster.local/ns/other/sa/client");
}

// A raw OpenSSL client (not our Session) to send what our own client never sends.
struct RawClient {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = nullptr;
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  RawClient() { SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr); }
  void start() {
    ssl = SSL_new(ctx);
    SSL_set_bio(ssl, in, out);
    SSL_set_connect_state(ssl);
  }
  ~RawClient() {
    SSL_free(ssl);
    SSL_CTX_free(ctx);
  }
  // Runs the handshake against `server` (bounded); true when the raw client finished it.
  bool handshake(Session& server) {
    int r = 0;
    for (int i = 0; i < 10; ++i) {
      r = SSL_do_handshake(ssl);
      char buf[16384];
      int n;
      while ((n = BIO_read(out, buf, sizeof buf)) > 0) server.put_transport(reinterpret_cast<uint8_t*>(buf), size_t(n));
      server.advance();
      ByteQueue& q = server.transport_out();
      BIO_write(in, q.data(), int(q.size()));
      q.clear();
      if (server.state() != State::kHandshaking) break;
    }
    ERR_clear_error();
    return r == 1;
  }
};

TEST(Tls, server_requires_a_client_certificate) {
  auto sc = ctx("demo.server");
  Session server(*sc, Role::kServer);
  RawClient raw;
  SSL_CTX_set_alpn_protos(raw.ctx, reinterpret_cast<const unsigned char*>("\x02h2"), 3);
  raw.start();
  raw.handshake(server);
  EXPECT_EQ(server.state(), State::kFailed);
  EXPECT_EQ(server.failure(), Failure::kNoPeerCertificate) << server.failure_detail();
}

TEST(Tls, server_requires_alpn_h2) {
  auto sc = ctx("demo.server");
  const std::string& d = TestPki::get().dir();
  for (const char* alpn : {"", "\x08http/1.1"}) {
    Session server(*sc, Role::kServer);
    RawClient raw;
    SSL_CTX_use_certificate_chain_file(raw.ctx, (d + "/demo.client.pem").c_str());
    SSL_CTX_use_PrivateKey_file(raw.ctx, (d + "/demo.client-key.pem").c_str(), SSL_FILETYPE_PEM);
    if (*alpn) SSL_CTX_set_alpn_protos(raw.ctx, reinterpret_cast<const unsigned char*>(alpn), 9);
    raw.start();
    raw.handshake(server);
    EXPECT_EQ(server.state(), State::kFailed) << "alpn " << alpn;
    EXPECT_EQ(server.failure(), Failure::kNoAlpnH2) << server.failure_detail();
  }
}

TEST(Tls, server_refuses_tls12_and_chacha20) {
  auto sc = ctx("demo.server");
  {
    Session server(*sc, Role::kServer);
    RawClient raw;
    SSL_CTX_set_max_proto_version(raw.ctx, TLS1_2_VERSION);
    raw.start();
    EXPECT_FALSE(raw.handshake(server));
    EXPECT_EQ(server.failure(), Failure::kProtocol) << server.failure_detail();
  }
  {
    Session server(*sc, Role::kServer);
    RawClient raw;
    SSL_CTX_set_ciphersuites(raw.ctx, "TLS_CHACHA20_POLY1305_SHA256");
    raw.start();
    EXPECT_FALSE(raw.handshake(server));
    EXPECT_EQ(server.failure(), Failure::kProtocol) << server.failure_detail();
  }
}

TEST(Tls, context_refuses_a_key_that_is_not_p256) {
  const std::string& d = TestPki::get().dir();
  ASSERT_EQ(std::system(("openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=x -days 1 "
                         "-addext subjectAltName=URI:spiffe://cluster.local/ns/a/sa/b -keyout " +
                         d + "/rsa-key.pem -out " + d + "/rsa.pem 2>/dev/null")
                            .c_str()),
            0);
  std::string err;
  EXPECT_EQ(create_tls_context(TestPki::get().config("rsa"), err), nullptr);
  EXPECT_NE(err.find("P-256"), std::string::npos) << err;
  EXPECT_EQ(create_tls_context(TestPki::get().config("missing"), err), nullptr);
  EXPECT_NE(err.find("cert_chain"), std::string::npos) << err;
}

TEST(Tls, transport_end_during_handshake_is_a_named_failure) {
  auto sc = ctx("demo.server");
  Session server(*sc, Role::kServer);
  server.put_transport(reinterpret_cast<const uint8_t*>("\x16\x03\x01"), 3);
  EXPECT_EQ(server.advance(), State::kHandshaking);
  server.put_transport_eof();
  EXPECT_EQ(server.advance(), State::kFailed);
  EXPECT_EQ(server.failure(), Failure::kPeerClosed);
}
