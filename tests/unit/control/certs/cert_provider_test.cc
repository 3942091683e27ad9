// The gateway's certificate sources: the Istio CA client (CSR, CreateCertificate, the answer's
// checks, renewal at half-life, the old certificate kept through a CA outage) against the test
// CA of tools/meshserver over real gRPC, and the [hbone] files reloaded when they change.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "control/certs/ca_cert.h"
#include "control/certs/cert_provider.h"
#include "control/mesh/file_watch.h"
#include "tests/support/pki.h"
#include "tools/meshserver/mesh_server.h"
#include "tools/meshserver/test_ca.h"

namespace meshgate {
namespace {

const std::string kId = "spiffe://cluster.local/ns/istio-system/sa/meshgate";

std::string slurp(const std::string& path) {
  std::string s;
  EXPECT_TRUE(ctl::mesh::read_file(path, ctl::kMaxPemFileBytes, &s)) << path;
  return s;
}

void write(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  std::filesystem::rename(tmp, path);  // as editors and Kubernetes secret updates do
}

// Polls `p` for up to `ms` for a new certificate.
std::optional<ctl::CertBundle> wait_cert(ctl::CertProvider& p, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (auto b = p.poll()) return b;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

struct CaServer {
  tools::MeshServer server;
  std::string address;
  explicit CaServer(const std::string& token = "", int64_t max_ttl = 86400)
      : server([&] {
          const auto& pki = test::TestPki::get();
          tools::MeshServerOptions o;
          o.ca_cert_file = pki.path("intermediate.pem");
          o.ca_key_file = pki.path("intermediate-key.pem");
          o.ca_roots_file = pki.path("root.pem");
          o.token = token;
          o.ca_max_ttl_s = max_ttl;
          return o;
        }()) {
    auto port = server.start(ctl::mesh::MeshModel{});
    if (!port) throw std::runtime_error(port.error().message);
    address = "127.0.0.1:" + std::to_string(*port);
  }
  ctl::CaOptions options() const {
    ctl::CaOptions o;
    o.address = address;
    o.tls = false;
    o.identity = kId;
    o.ttl_s = 3600;
    return o;
  }
};

TEST(CertCsr, IsP256WithTheSpiffeIdAsItsOnlyUriSan) {
  auto kc = ctl::make_key_and_csr(kId);
  ASSERT_TRUE(kc) << kc.error().message;
  BIO* b = BIO_new_mem_buf(kc->csr_pem.data(), int(kc->csr_pem.size()));
  X509_REQ* req = PEM_read_bio_X509_REQ(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  ASSERT_NE(req, nullptr);
  EVP_PKEY* pub = X509_REQ_get0_pubkey(req);
  EXPECT_EQ(X509_REQ_verify(req, pub), 1);
  EXPECT_TRUE(EVP_PKEY_is_a(pub, "EC"));
  EXPECT_EQ(EVP_PKEY_get_bits(pub), 256);
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req);
  ASSERT_NE(exts, nullptr);
  GENERAL_NAMES* names = static_cast<GENERAL_NAMES*>(
      X509V3_get_d2i(exts, NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(names, nullptr);
  ASSERT_EQ(sk_GENERAL_NAME_num(names), 1);
  const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, 0);
  ASSERT_EQ(n->type, GEN_URI);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.uniformResourceIdentifier))), kId);
  GENERAL_NAMES_free(names);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  X509_REQ_free(req);
  EXPECT_NE(kc->key_pem.find("BEGIN PRIVATE KEY"), std::string::npos);
}

TEST(CertCa, CreateCertificateGivesAVerifiedChainForTheRequestedIdentity) {
  CaServer ca("s3cret");
  auto o = ca.options();
  const std::string token_file = test::TestPki::get().path("ca-token");
  std::ofstream(token_file) << "s3cret\n";
  o.token_file = token_file;
  auto r = ctl::request_certificate(o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->identity, kId);
  ASSERT_EQ(r->info.size(), 3u);
  EXPECT_EQ(r->info[0].role, "leaf");
  EXPECT_EQ(r->info[0].identity, kId);
  EXPECT_EQ(r->info[1].role, "intermediate");
  EXPECT_EQ(r->info[2].role, "trust_anchor");
  EXPECT_EQ(r->info[2].subject, r->info[1].issuer);
  EXPECT_EQ(r->not_after_unix - r->not_before_unix, 3600);
  EXPECT_EQ(ca.server.ca()->issued(), 1u);

  // Without the token, and with a wrong one: refused by the CA, reported by the client.
  o.token_file.clear();
  auto no_token = ctl::request_certificate(o);
  ASSERT_FALSE(no_token);
  EXPECT_NE(no_token.error().message.find("bearer token"), std::string::npos) << no_token.error().message;
  EXPECT_EQ(ca.server.ca()->refused(), 1u);
}

TEST(CertCa, AnswersThatDoNotFitTheRequestAreRejected) {
  CaServer ca;
  // The CA signs what the CSR asks; the client must notice a leaf for another identity.
  auto other = ca.options();
  other.identity = "spiffe://cluster.local/ns/demo/sa/client";
  auto kc = ctl::make_key_and_csr(other.identity);
  ASSERT_TRUE(kc);
  auto issued = ctl::request_certificate(other);
  ASSERT_TRUE(issued) << issued.error().message;
  std::vector<std::string> chain = {issued->chain_pem, issued->roots_pem};
  auto wrong_id = ctl::bundle_from_ca_response(chain, issued->key_pem, kId, "test");
  ASSERT_FALSE(wrong_id);
  EXPECT_NE(wrong_id.error().message.find("not " + kId), std::string::npos) << wrong_id.error().message;
  auto wrong_key = ctl::bundle_from_ca_response(chain, kc->key_pem, other.identity, "test");
  ASSERT_FALSE(wrong_key);
  EXPECT_NE(wrong_key.error().message.find("does not match the private key"), std::string::npos);
  auto no_root = ctl::bundle_from_ca_response({issued->chain_pem}, issued->key_pem,
                                              other.identity, "test");
  ASSERT_FALSE(no_root);
  const auto& pki = test::TestPki::get();
  auto foreign_root = ctl::bundle_from_ca_response({issued->chain_pem, slurp(pki.path("foreign-root.pem"))},
                                                   issued->key_pem, other.identity, "test");
  ASSERT_FALSE(foreign_root);
  EXPECT_NE(foreign_root.error().message.find("does not verify"), std::string::npos);
}

TEST(CertCa, RenewsAtHalfLifeAndKeepsTheOldCertificateThroughAnOutage) {
  CaServer ca("", /*max_ttl=*/2);  // 2 s certificates: renewal due after 1 s
  auto o = ca.options();
  o.backoff_min_ms = 50;
  o.backoff_max_ms = 200;
  auto p = ctl::CertProvider::for_ca(o);
  ASSERT_TRUE(p->start());
  auto first = wait_cert(*p, 5000);
  ASSERT_TRUE(first) << "no first certificate";
  EXPECT_EQ(first->not_after_unix - first->not_before_unix, 2);
  auto second = wait_cert(*p, 4000);
  ASSERT_TRUE(second) << "not renewed at half-life";
  EXPECT_NE(second->info[0].serial, first->info[0].serial);
  EXPECT_NE(second->key_pem, first->key_pem) << "a new key for every certificate";

  // Outage: requests fail and back off, nothing replaces the certificate in use.
  ca.server.ca()->set_available(false);
  const uint64_t failures0 = p->counters().failures.load();
  EXPECT_FALSE(wait_cert(*p, 2500));
  const uint64_t failed = p->counters().failures.load() - failures0;
  EXPECT_GE(failed, 3u) << "retried with backoff";
  EXPECT_LE(failed, 40u) << "backoff bounds the retry rate";
  EXPECT_EQ(p->counters().not_after_unix.load(), second->not_after_unix);
  // The CA is back: the next retry gets a certificate.
  ca.server.ca()->set_available(true);
  auto third = wait_cert(*p, 3000);
  ASSERT_TRUE(third) << "no certificate after the CA came back";
  EXPECT_EQ(third->identity, kId);
  p->stop();
}

TEST(CertFiles, ReloadOnChangeAndKeepTheCertificateWhenTheNewFilesAreInvalid) {
  const auto& pki = test::TestPki::get();
  const std::string dir = pki.path("reload");
  std::filesystem::create_directories(dir);
  write(dir + "/chain.pem", slurp(pki.path("demo.client.pem")));
  write(dir + "/key.pem", slurp(pki.path("demo.client-key.pem")));
  write(dir + "/root.pem", slurp(pki.path("root.pem")));
  auto p = ctl::CertProvider::for_files(dir + "/chain.pem", dir + "/key.pem", dir + "/root.pem");
  ASSERT_TRUE(p->start());
  auto first = p->poll();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->identity, "spiffe://cluster.local/ns/demo/sa/client");
  EXPECT_EQ(first->info.back().file, dir + "/root.pem");

  // A key that does not match the chain: reported, the certificate in use stays.
  write(dir + "/key.pem", slurp(pki.path("demo.server-key.pem")));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_FALSE(p->poll());
  EXPECT_GE(p->counters().failures.load(), 1u);
  // The matching chain arrives: the new certificate is taken.
  write(dir + "/chain.pem", slurp(pki.path("demo.server.pem")));
  auto second = wait_cert(*p, 3000);
  ASSERT_TRUE(second) << "not reloaded";
  EXPECT_EQ(second->identity, "spiffe://cluster.local/ns/demo/sa/server");
  EXPECT_EQ(p->counters().issued.load(), 2u);
  p->stop();
}

}  // namespace
}  // namespace meshgate
