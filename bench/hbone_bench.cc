// HBONE engine cost on one core against the raw crypto of the same work (docs/HBONE.md "HBONE
// engine"): bulk transfer through an in-memory client/server pair of Connections (TLS 1.3
// AES-256-GCM + nghttp2 framing + flow control, both ends on this core) for 1 and 16 streams,
// against EVP AES-256-GCM seal + open of the same bytes in 16 KiB records; and full mutual
// handshakes (both ends) against the raw P-256 work of both ends: 2 ECDHE key pairs + 2
// derives + 2 ECDSA signatures (+ the 6 verifications, reported separately).
#include <benchmark/benchmark.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include <memory>
#include <string>
#include <vector>

#include "control/certs/tls_context.h"
#include "dataplane/hbone/connection.h"
#include "tests/support/pki.h"

namespace meshgate::bench {
namespace {

using namespace dp::hbone;
namespace tls = dp::tls;
constexpr size_t kRecord = 16 * 1024;

struct Hooks : ServerHooks {
  std::vector<int32_t> connects;
  Resolution resolve(const Authority& a) override {
    Resolution r;
    r.kind = Resolution::Kind::kServed;
    r.ip = a.ip;
    r.port = a.port;
    return r;
  }
  bool authorize(std::string_view, const Resolution&) override { return true; }
  void connect(int32_t s, const Resolution&) override { connects.push_back(s); }
};

std::shared_ptr<tls::Context> ctx(const char* ident) {
  std::string err;
  std::shared_ptr<tls::Context> c = ctl::create_tls_context(test::TestPki::get().config(ident), err);
  if (!c) std::abort();
  return c;
}

struct Pair {
  std::shared_ptr<tls::Context> sctx = ctx("demo.server"), cctx = ctx("demo.client");
  Hooks hooks;
  Counters sc, cc;
  std::unique_ptr<Connection> server = Connection::server(*sctx, hooks, sc, 0);
  std::unique_ptr<Connection> client =
      Connection::client(*cctx, {"spiffe://cluster.local/ns/demo/sa/server"}, cc, 0);
  std::vector<uint8_t> scratch;
  bool move(Connection& from, Connection& to) {
    const dp::ByteQueue& q = from.transport_out();
    if (q.empty()) return false;
    scratch.assign(q.data(), q.data() + q.size());
    from.transport_out_consumed(scratch.size());
    to.recv_transport(scratch.data(), scratch.size(), 0);
    return true;
  }
  void pump() {
    for (int i = 0; i < 1000; ++i) {
      const bool a = move(*client, *server);
      const bool b = move(*server, *client);
      if (!a && !b) return;
    }
  }
  void drain_events() {
    Event e;
    while (server->poll_event(e)) {}
    while (client->poll_event(e)) {}
  }
};

void hbone_bulk(benchmark::State& state) {
  const int streams = int(state.range(0));
  Pair p;
  p.pump();
  std::vector<std::pair<int32_t, int32_t>> ids;
  for (int i = 0; i < streams; ++i) {
    ConnectRequest req;
    req.authority = "10.0.0.1:80";
    const int32_t cs = p.client->open_stream(req);
    p.pump();
    p.server->upstream_connected(p.hooks.connects.back(), true);
    p.pump();
    ids.emplace_back(cs, p.hooks.connects.back());
  }
  p.drain_events();
  const size_t per_stream = 256 * 1024;
  std::vector<uint8_t> data(per_stream, 0x5a), sink(64 * 1024);
  for (auto _ : state) {
    std::vector<size_t> sent(streams, 0), got(streams, 0);
    size_t done = 0;
    while (done < size_t(streams)) {
      for (int i = 0; i < streams; ++i) {
        if (sent[i] < per_stream)
          sent[i] += p.client->stream_write(ids[i].first, data.data() + sent[i], per_stream - sent[i]);
      }
      p.pump();
      for (int i = 0; i < streams; ++i) {
        if (got[i] == per_stream) continue;
        while (size_t n = p.server->stream_read(ids[i].second, sink.data(), sink.size())) got[i] += n;
        if (got[i] == per_stream) ++done;
      }
      p.pump();  // WINDOW_UPDATEs back
      p.drain_events();
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(per_stream) * streams);
}
BENCHMARK(hbone_bulk)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);

// The AEAD work of the same bytes: seal on one end, open on the other, 16 KiB records.
void raw_aes256gcm_seal_open(benchmark::State& state) {
  EVP_CIPHER_CTX* enc = EVP_CIPHER_CTX_new();
  EVP_CIPHER_CTX* dec = EVP_CIPHER_CTX_new();
  const unsigned char key[32] = {1}, iv[12] = {2}, aad[5] = {0x17, 3, 3, 0x40, 0x11};
  EVP_EncryptInit_ex(enc, EVP_aes_256_gcm(), nullptr, key, iv);
  EVP_DecryptInit_ex(dec, EVP_aes_256_gcm(), nullptr, key, iv);
  std::vector<unsigned char> in(kRecord, 0x5a), ct(kRecord + 16), pt(kRecord + 16);
  unsigned char tag[16];
  const size_t total = 256 * 1024;
  for (auto _ : state) {
    for (size_t off = 0; off < total; off += kRecord) {
      int n = 0;
      EVP_EncryptInit_ex(enc, nullptr, nullptr, nullptr, iv);
      EVP_EncryptUpdate(enc, nullptr, &n, aad, sizeof aad);
      EVP_EncryptUpdate(enc, ct.data(), &n, in.data(), int(kRecord));
      EVP_EncryptFinal_ex(enc, ct.data() + n, &n);
      EVP_CIPHER_CTX_ctrl(enc, EVP_CTRL_GCM_GET_TAG, 16, tag);
      EVP_DecryptInit_ex(dec, nullptr, nullptr, nullptr, iv);
      EVP_DecryptUpdate(dec, nullptr, &n, aad, sizeof aad);
      EVP_DecryptUpdate(dec, pt.data(), &n, ct.data(), int(kRecord));
      EVP_CIPHER_CTX_ctrl(dec, EVP_CTRL_GCM_SET_TAG, 16, tag);
      if (EVP_DecryptFinal_ex(dec, pt.data() + n, &n) != 1) state.SkipWithError("tag mismatch");
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(total));
  EVP_CIPHER_CTX_free(enc);
  EVP_CIPHER_CTX_free(dec);
}
BENCHMARK(raw_aes256gcm_seal_open)->Unit(benchmark::kMicrosecond);

// A full mutual TLS 1.3 handshake plus HTTP/2 start, both ends on this core.
void hbone_handshake(benchmark::State& state) {
  auto sctx = ctx("demo.server"), cctx = ctx("demo.client");
  Hooks hooks;
  Counters sc, cc;
  for (auto _ : state) {
    Pair p{sctx, cctx};
    p.pump();
    if (!p.server->established() || !p.client->established()) state.SkipWithError("handshake failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(hbone_handshake)->Unit(benchmark::kMicrosecond);

EVP_PKEY* p256_key() {
  return EVP_EC_gen("P-256");
}

// The P-256 work of both ends of one mutual handshake: 2 ephemeral key pairs, 2 ECDH derives,
// 2 ECDSA signatures (CertificateVerify). range(0) = 1 adds the 6 verifications (leaf +
// intermediate signature and CertificateVerify, per end).
void raw_p256_handshake_crypto(benchmark::State& state) {
  EVP_PKEY* id_key = p256_key();
  const unsigned char msg[32] = {7};
  std::vector<unsigned char> sig(128);
  size_t sig_len = sig.size();
  {
    EVP_MD_CTX* m = EVP_MD_CTX_new();
    EVP_DigestSignInit(m, nullptr, EVP_sha256(), nullptr, id_key);
    EVP_DigestSign(m, sig.data(), &sig_len, msg, sizeof msg);
    EVP_MD_CTX_free(m);
  }
  for (auto _ : state) {
    for (int side = 0; side < 2; ++side) {
      EVP_PKEY* mine = p256_key();
      EVP_PKEY* peer = p256_key();  // stands for the peer's share (its keygen is the other side's)
      EVP_PKEY_CTX* d = EVP_PKEY_CTX_new(mine, nullptr);
      EVP_PKEY_derive_init(d);
      EVP_PKEY_derive_set_peer(d, peer);
      unsigned char secret[32];
      size_t slen = sizeof secret;
      EVP_PKEY_derive(d, secret, &slen);
      EVP_PKEY_CTX_free(d);
      EVP_PKEY_free(mine);
      EVP_PKEY_free(peer);
      EVP_MD_CTX* m = EVP_MD_CTX_new();
      unsigned char fresh[128];
      size_t len = sizeof fresh;
      EVP_DigestSignInit(m, nullptr, EVP_sha256(), nullptr, id_key);
      EVP_DigestSign(m, fresh, &len, msg, sizeof msg);
      EVP_MD_CTX_free(m);
      for (int v = 0; v < (state.range(0) ? 3 : 0); ++v) {
        EVP_MD_CTX* vm = EVP_MD_CTX_new();
        EVP_DigestVerifyInit(vm, nullptr, EVP_sha256(), nullptr, id_key);
        if (EVP_DigestVerify(vm, sig.data(), sig_len, msg, sizeof msg) != 1) state.SkipWithError("verify");
        EVP_MD_CTX_free(vm);
      }
    }
  }
  state.SetItemsProcessed(state.iterations());
  EVP_PKEY_free(id_key);
}
BENCHMARK(raw_p256_handshake_crypto)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace meshgate::bench
