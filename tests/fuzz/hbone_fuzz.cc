// libFuzzer target for the HBONE engine's server side (dataplane/hbone/connection.cc): the
// input is what an HBONE client sends after the HTTP/2 connection preface (SETTINGS, HEADERS
// with a CONNECT and its :authority, DATA, RST_STREAM, ...), carried to a real server
// Connection over a real mTLS 1.3 session (the engine has no plaintext mode), so every byte
// goes through the same nghttp2 callbacks, header checks and CONNECT handling as on a worker.
//
// The first input byte sets how many bytes arrive per transport read (1..256), so frames
// split anywhere; between reads the caller does what a worker does with the events: completes
// upstream connects (odd streams succeed, even ones fail), reads and echoes stream bytes,
// shuts down after END_STREAM, releases closed streams, and advances the clock. The engine
// must never crash or leak, and must report a reason when it closes.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "control/certs/tls_context.h"
#include "dataplane/hbone/connection.h"

using namespace meshgate;
using namespace meshgate::dp::hbone;
namespace tls = meshgate::dp::tls;

namespace {

const std::string kServerId = "spiffe://cluster.local/ns/demo/sa/server";
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Serves 192.0.2.0/24 and "svc.example:<port>"; port 9 has no endpoint; port 7 is denied.
struct Hooks : ServerHooks {
  std::vector<int32_t> connects;
  Resolution resolve(const Authority& a) override {
    Resolution r;
    if (a.kind == Authority::Kind::kName) {
      if (a.hostname() != "svc.example") return r;
      r.ip = *IpAddr::parse("192.0.2.80");
    } else {
      if (!a.ip.is_v4() || (a.ip.v4_host() >> 8) != 0xc00002) return r;
      r.ip = a.ip;
    }
    r.port = a.port;
    r.kind = a.port == 9 ? Resolution::Kind::kNoEndpoint : Resolution::Kind::kServed;
    return r;
  }
  bool authorize(std::string_view, const Resolution& r) override { return r.port != 7; }
  void connect(int32_t stream, const Resolution&) override { connects.push_back(stream); }
};

std::unique_ptr<tls::Context> server_ctx, client_ctx;

std::unique_ptr<tls::Context> load(const std::string& dir, const std::string& ident) {
  ctl::TlsContextConfig c;
  c.cert_chain_file = dir + "/" + ident + ".pem";
  c.private_key_file = dir + "/" + ident + "-key.pem";
  c.trust_bundle_file = dir + "/root.pem";
  std::string err;
  auto ctx = ctl::create_tls_context(c, err);
  if (!ctx) {
    std::fprintf(stderr, "hbone_fuzz: %s: %s\n", ident.c_str(), err.c_str());
    std::abort();
  }
  return ctx;
}

// Moves the server's ciphertext to the client session (so its flow-control windows and
// acknowledgements stay a real peer's) and reads the client's plaintext away.
void to_client(Connection& server, tls::Session& client) {
  const dp::ByteQueue& q = server.transport_out();
  if (q.empty()) return;
  client.put_transport(q.data(), q.size());
  server.transport_out_consumed(q.size());
  uint8_t sink[16384];
  client.advance();
  while (client.read(sink, sizeof sink) > 0) {
  }
}

void send(tls::Session& client, Connection& server, uint64_t now) {
  const dp::ByteQueue& q = client.transport_out();
  if (q.empty()) return;
  const std::vector<uint8_t> bytes(q.data(), q.data() + q.size());
  client.transport_out().consume(bytes.size());
  server.recv_transport(bytes.data(), bytes.size(), now);
}

// What a worker does with the engine's events.
void serve_events(Connection& server, Hooks& hooks) {
  for (int32_t s : hooks.connects) server.upstream_connected(s, s % 4 == 1);
  hooks.connects.clear();
  Event ev;
  uint8_t buf[4096];
  for (int guard = 0; guard < 10000 && server.poll_event(ev); ++guard) {
    switch (ev.kind) {
      case EventKind::kStreamReadable:
        while (size_t n = server.stream_read(ev.stream, buf, sizeof buf)) {
          server.stream_write(ev.stream, buf, n);
        }
        break;
      case EventKind::kStreamRemoteEnd: server.stream_shutdown(ev.stream); break;
      case EventKind::kStreamClosed: server.stream_release(ev.stream); break;
      case EventKind::kClosed:
        if (!server.closed()) __builtin_trap();
        break;
      default: break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A scratch PKI, read into the contexts and removed at once: nothing stays on disk.
  char tmpl[] = "/tmp/mg-hbone-fuzz.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) std::abort();
  const std::string dir = tmpl;
  const std::string cmd =
      std::string(MG_SOURCE_DIR) + "/tools/mkpki " + dir + " demo/server demo/client >/dev/null";
  if (std::system(cmd.c_str()) != 0) std::abort();
  server_ctx = load(dir, "demo.server");
  client_ctx = load(dir, "demo.client");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * 1024) return 0;
  const size_t chunk = size_t(data[0]) + 1;
  ++data;
  --size;

  uint64_t now = 1000;
  Counters counters;
  Hooks hooks;
  auto server = Connection::server(*server_ctx, hooks, counters, now);
  tls::Session client(*client_ctx, tls::Role::kClient, {kServerId});
  for (int round = 0; round < 16 && !server->established(); ++round) {
    client.advance();
    send(client, *server, now);
    to_client(*server, client);
  }
  if (!server->established() || client.state() != tls::Session::State::kEstablished) {
    __builtin_trap();  // the PKI is ours: the handshake cannot fail
  }
  serve_events(*server, hooks);

  std::vector<uint8_t> plain(kPreface, kPreface + sizeof kPreface - 1);
  plain.insert(plain.end(), data, data + size);
  for (size_t off = 0; off < plain.size() && !server->closed(); off += chunk) {
    const size_t n = std::min(chunk, plain.size() - off);
    if (!client.write(plain.data() + off, n)) break;
    send(client, *server, now);
    serve_events(*server, hooks);
    to_client(*server, client);
    now += 7;
    server->on_timer(now);
  }
  serve_events(*server, hooks);
  server->recv_transport_eof(now);
  serve_events(*server, hooks);
  if (!server->closed()) __builtin_trap();
  return 0;
}
