// meshgate-meshserver: serves a mesh file (the format of [mesh] source = "file") over the Istio
// workload API (gRPC delta ADS), and pushes every change of the file to connected clients. For
// tests and demos of [mesh] source = "xds".
#include <CLI/CLI.hpp>
#include <signal.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "control/common/log.h"
#include "control/mesh/file_watch.h"
#include "control/mesh/mesh_file.h"
#include "tools/meshserver/mesh_server.h"

using namespace meshgate;

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"meshgate-meshserver: Istio workload API (delta ADS) server for a mesh file"};
  std::string mesh_file, token_file;
  tools::MeshServerOptions opt;
  opt.listen = "127.0.0.1:15010";
  app.add_option("--mesh-file", mesh_file, "mesh file to serve (reloaded on change)")->required();
  app.add_option("--listen", opt.listen, "host:port to listen on (port 0 picks one)");
  app.add_option("--tls-cert", opt.cert_file, "PEM certificate chain: serve TLS");
  app.add_option("--tls-key", opt.key_file, "PEM private key of --tls-cert");
  app.add_option("--token-file", token_file, "require 'authorization: Bearer <this token>'");
  app.add_option("--cluster-id", opt.cluster_id, "require this 'clusterid' header");
  app.add_option("--ca-cert", opt.ca_cert_file,
                 "serve a test Istio CA (CreateCertificate) signing with this CA certificate");
  app.add_option("--ca-key", opt.ca_key_file, "the key of --ca-cert");
  app.add_option("--ca-roots", opt.ca_roots_file, "root(s) sent last in every chain");
  app.add_option("--ca-max-ttl", opt.ca_max_ttl_s, "longest certificate lifetime in seconds");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (opt.ca_cert_file.empty() != opt.ca_key_file.empty()) {
    std::fprintf(stderr, "meshgate-meshserver: --ca-cert and --ca-key go together\n");
    return 2;
  }
  if (opt.cert_file.empty() != opt.key_file.empty()) {
    std::fprintf(stderr, "meshgate-meshserver: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (!token_file.empty()) {
    if (!ctl::mesh::read_token_file(token_file, &opt.token)) {
      std::fprintf(stderr, "meshgate-meshserver: cannot read %s\n", token_file.c_str());
      return 2;
    }
  }
  // Served as written, including resources a client must reject (legacy Istio mTLS).
  const ctl::mesh::MeshFileOptions parse_opt{.allow_legacy_tunnel = true};
  auto model = ctl::mesh::load_mesh_file(mesh_file, parse_opt);
  if (!model) {
    std::fputs(model.error().str().c_str(), stderr);
    return 2;
  }
  ctl::mesh::FileWatch watch;
  if (!watch.open(mesh_file)) {
    std::fprintf(stderr, "meshgate-meshserver: cannot watch %s\n", mesh_file.c_str());
    return 1;
  }
  tools::MeshServer server(opt);
  server.on_event([](const tools::MeshServerEvent& e) {
    std::fprintf(stderr, "level=info %s\n", e.str().c_str());
  });
  auto port = server.start(*model);
  if (!port) {
    std::fprintf(stderr, "meshgate-meshserver: %s\n", port.error().message.c_str());
    return 1;
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::fprintf(stderr,
               "level=info event=meshserver_listening port=%d tls=%s services=%zu workloads=%zu "
               "policies=%zu\n",
               *port, opt.cert_file.empty() ? "false" : "true", model->services.size(),
               model->workloads.size(), model->policies.size());
  std::string last;
  ctl::mesh::read_file(mesh_file, ctl::kMaxMeshFileBytes, &last);
  while (!g_stop) {
    if (!watch.wait(200)) continue;
    std::string text;
    if (!ctl::mesh::read_file(mesh_file, ctl::kMaxMeshFileBytes, &text) || text == last) {
      continue;
    }
    auto m = ctl::mesh::parse_mesh_file(text, mesh_file, parse_opt);
    if (!m) {
      std::fprintf(stderr, "level=error event=meshserver_file_invalid action=keep_last\n%s",
                   m.error().str().c_str());
      continue;
    }
    last = text;
    server.set_model(*m);
    std::fprintf(stderr,
                 "level=info event=meshserver_reloaded services=%zu workloads=%zu policies=%zu\n",
                 m->services.size(), m->workloads.size(), m->policies.size());
  }
  server.stop();
  std::fprintf(stderr, "level=info event=meshserver_stopped\n");
  return 0;
}
