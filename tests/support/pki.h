// The test mesh PKI: tools/mkpki run once per test process into a scratch directory that is
// removed at exit. Keys never live in the repository.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "control/certs/tls_context.h"

namespace meshgate::test {

class TestPki {
 public:
  static const TestPki& get() {
    static TestPki pki;
    return pki;
  }
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Context config for identity "ns.sa" (files of tools/mkpki), trusting `bundle`.
  ctl::TlsContextConfig config(const std::string& ident, const std::string& bundle = "root.pem",
                              const std::string& trust_domain = "cluster.local") const {
    ctl::TlsContextConfig c;
    c.cert_chain_file = path(ident + ".pem");
    c.private_key_file = path(ident + "-key.pem");
    c.trust_bundle_file = path(bundle);
    c.trust_domain = trust_domain;
    return c;
  }

 private:
  TestPki() {
    char tmpl[] = "/tmp/mg-pki.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    dir_ = tmpl;
    const std::string cmd = std::string(MG_SOURCE_DIR) + "/tools/mkpki " + dir_ + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "tools/mkpki failed\n");
      std::abort();
    }
    // A bundle with both roots: the foreign chain verifies, so only the trust-domain check
    // can reject it.
    const std::string both = "cat " + dir_ + "/root.pem " + dir_ + "/foreign-root.pem > " + dir_ +
                             "/both-roots.pem";
    if (std::system(both.c_str()) != 0) std::abort();
  }
  ~TestPki() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

}  // namespace meshgate::test
