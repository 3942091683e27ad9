// The TCP stack alone against the Linux kernel's TCP: the stack is a host behind a TUN device
// (frames in from read(), out with write(), through the real parser), the kernel's sockets are
// the peers. Used by e2e_tcp_kernel_interop.sh, which creates the namespace and the device.
//
//   tcp_tun_peer --dev TUN --mode echo  --port P                [impairments] [--seconds S]
//       listens on every address, port P, and splices each connection's bytes back (zero
//       copy: recv_chain / send_chain), FIN after the last byte.
//   tcp_tun_peer --dev TUN --mode fetch --connect ADDR --port P --out FILE [impairments]
//       connects from --local to ADDR:P, writes everything received to FILE, FIN after the
//       peer's; exits 0 when the connection closed cleanly.
//   impairments: --loss P --dup P --reorder P (each direction, seeded by --seed): frames
//       dropped, duplicated, or held back 1-5 ms.
//
// Prints "ready" once listening / connecting, the counters at exit. A test tool: it blocks in
// poll() and allocates freely; nothing here is a pattern for the worker.
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "control/runtime/eal_cleanup.h"
#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"
#include "dataplane/tcp/tcp_stack.h"

namespace {

using namespace meshgate;
using namespace meshgate::dp::tcp;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

struct Options {
  std::string dev, mode = "echo", out;
  IpAddr local4 = IpAddr::v4(0x0a090002), local6 = *IpAddr::parse("fd00:9::2"), connect;
  uint16_t port = 7;
  double loss = 0, dup = 0, reorder = 0;
  uint64_t seed = 1;
  uint32_t seconds = 60;
};

// The wire: a TUN fd with seeded impairments in both directions.
class Tun {
 public:
  Tun(int fd, const Options& o, rte_mempool* pool) : fd_(fd), o_(o), pool_(pool), rng_(o.seed) {}

  static void output(void* ctx, rte_mbuf* m, const TcpTuple&) { static_cast<Tun*>(ctx)->send(m); }

  // Reads what the kernel sent (and what was held back and is now due) into the stack.
  void poll_in(TcpStack& st) {
    uint8_t buf[2048];
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      if (impair(buf, uint32_t(n), false)) continue;
      deliver(st, buf, uint32_t(n));
    }
    for (size_t k = 0; k < held_.size();) {
      if (held_[k].at > mono_ns()) {
        ++k;
        continue;
      }
      Held h = std::move(held_[k]);
      held_.erase(held_.begin() + long(k));
      if (h.to_kernel) {
        write_out(h.bytes.data(), uint32_t(h.bytes.size()));
      } else {
        deliver(st, h.bytes.data(), uint32_t(h.bytes.size()));
      }
    }
  }

 private:
  struct Held {
    uint64_t at;
    std::vector<uint8_t> bytes;
    bool to_kernel;
  };

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // True when the frame was dropped or held back; duplicates go out at once.
  bool impair(const uint8_t* p, uint32_t n, bool to_kernel) {
    if (chance(o_.loss)) return true;
    if (chance(o_.reorder)) {
      held_.push_back({mono_ns() + 1'000'000 + rng_() % 4'000'000,
                       std::vector<uint8_t>(p, p + n), to_kernel});
      return true;
    }
    if (to_kernel && chance(o_.dup)) write_out(p, n);
    return false;
  }

  void write_out(const uint8_t* p, uint32_t n) {
    if (write(fd_, p, n) != ssize_t(n)) std::perror("tcp_tun_peer: write");
  }

  void send(rte_mbuf* m) {
    uint8_t buf[4096];
    const uint32_t n = rte_pktmbuf_pkt_len(m);
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, n, buf));
    if (!impair(p, n, true)) write_out(p, n);
    rte_pktmbuf_free(m);
  }

  // An IP packet behind a blank Ethernet header, through the parser, into the stack.
  void deliver(TcpStack& st, const uint8_t* ip, uint32_t n) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr) return;
    auto* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(n + dp::kEthHdrLen)));
    std::memset(f, 0, 12);
    dp::wr16(f + 12, (ip[0] >> 4) == 6 ? dp::kEtherTypeIpv6 : dp::kEtherTypeIpv4);
    std::memcpy(f + dp::kEthHdrLen, ip, n);
    dp::PacketMeta meta;
    if (dp::parse_frame(f, m->data_len, m->pkt_len, &meta, true) != dp::Drop::kNone ||
        meta.l4_proto != dp::kProtoTcp) {
      rte_pktmbuf_free(m);
      return;
    }
    st.input(m, meta, mono_ns());
  }

  int fd_;
  const Options& o_;
  rte_mempool* pool_;
  std::mt19937_64 rng_;
  std::vector<Held> held_;
};

// Echo: splice each connection back to itself, FIN after the last byte.
struct Echo {
  struct Conn {
    Echo* echo;
    rte_mbuf* pending = nullptr;
    bool peer_fin = false;
  };
  TcpStack* st = nullptr;
  std::deque<Conn> conns;  // a deque: growing it keeps the user pointers valid

  static bool accept(void* ctx, const TcpTuple&, TcpEventFn* fn, void** user) {
    auto* e = static_cast<Echo*>(ctx);
    e->conns.push_back(Conn{e});
    *fn = on_event;
    *user = &e->conns.back();
    return true;
  }
  static void on_event(void* user, TcpConnId c, TcpEvent ev) {
    Conn& k = *static_cast<Conn*>(user);
    TcpStack* st = k.echo->st;
    if (ev == TcpEvent::kPeerFin) k.peer_fin = true;
    if (ev == TcpEvent::kReset || ev == TcpEvent::kClosed) {
      if (k.pending != nullptr) rte_pktmbuf_free(k.pending);
      k.pending = nullptr;
      st->close(c);
      return;
    }
    for (;;) {
      if (k.pending == nullptr) {
        uint32_t len = 0;
        k.pending = st->recv_chain(c, &len, st->send_space(c));
        if (k.pending == nullptr) break;
      }
      if (!st->send_chain(c, k.pending)) break;
      k.pending = nullptr;
    }
    TcpConnInfo ci;
    if (!st->info(c, &ci)) return;
    if (k.pending != nullptr || ci.recv_queued > 0) {
      st->request_writable(c);
    } else if (k.peer_fin) {
      st->shutdown_write(c);
      k.peer_fin = false;
    }
  }
};

// Fetch: write what arrives to a file, FIN after the peer's.
struct Fetch {
  TcpStack* st = nullptr;
  FILE* out = nullptr;
  uint64_t bytes = 0;
  bool done = false, reset = false;
  static void on_event(void* user, TcpConnId c, TcpEvent ev) {
    auto* f = static_cast<Fetch*>(user);
    uint8_t buf[65536];
    for (uint32_t n; (n = f->st->recv(c, buf, sizeof buf)) > 0;) {
      f->bytes += n;
      if (std::fwrite(buf, 1, n, f->out) != n) std::perror("tcp_tun_peer: fwrite");
    }
    if (ev == TcpEvent::kPeerFin) f->st->shutdown_write(c);
    if (ev == TcpEvent::kReset) f->reset = f->done = true;
    if (ev == TcpEvent::kClosed) f->done = true;
  }
};

bool parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dev") o->dev = v;
    else if (k == "--mode") o->mode = v;
    else if (k == "--port") o->port = uint16_t(std::stoi(v));
    else if (k == "--out") o->out = v;
    else if (k == "--loss") o->loss = std::stod(v);
    else if (k == "--dup") o->dup = std::stod(v);
    else if (k == "--reorder") o->reorder = std::stod(v);
    else if (k == "--seed") o->seed = std::stoull(v);
    else if (k == "--seconds") o->seconds = uint32_t(std::stoul(v));
    else if (k == "--connect") {
      const auto a = IpAddr::parse(v);
      if (!a) return false;
      o->connect = *a;
    } else {
      return false;
    }
  }
  return !o->dev.empty() && (o->mode == "echo" || (o->mode == "fetch" && !o->out.empty()));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) {
    std::fprintf(stderr, "usage: see the header of tests/integration/tcp_tun_peer.cc\n");
    return 2;
  }
  const std::string prefix = "--file-prefix=mgtun" + std::to_string(getpid());
  const char* eal[] = {"tcp_tun_peer", "--no-huge", "-m", "256", "--no-pci", "--no-shconf",
                       "--no-telemetry", "-l", "0", prefix.c_str(), "--log-level=error"};
  if (rte_eal_init(int(sizeof eal / sizeof eal[0]), const_cast<char**>(eal)) < 0) {
    std::fprintf(stderr, "tcp_tun_peer: EAL init failed\n");
    return 1;
  }
  ctl::eal_cleanup_at_exit();
  rte_mempool* pool = rte_pktmbuf_pool_create("tun_pool", 32767, 256, 0,
                                              RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", o.dev.c_str());
  if (pool == nullptr || fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
    std::perror("tcp_tun_peer: pool or TUN device");
    return 1;
  }
  Tun tun(fd, o, pool);
  TimerWheel wheel;
  wheel.init(uint32_t(mono_ns() / 1'000'000));
  TcpConfig cfg;
  cfg.secret = SipKey{mono_ns(), uint64_t(getpid())};
  TcpStackDeps deps;
  deps.pool = pool;
  deps.wheel = &wheel;
  deps.output = Tun::output;
  deps.output_ctx = &tun;
  TcpStack st(cfg, deps, mono_ns());

  Echo echo;
  echo.st = &st;
  Fetch fetch;
  fetch.st = &st;
  TcpConnId fc = kNoConn;
  if (o.mode == "echo") {
    st.listen(IpAddr{}, o.port, Echo::accept, &echo);
  } else {
    fetch.out = std::fopen(o.out.c_str(), "wb");
    const IpAddr local = o.connect.is_v4() ? o.local4 : o.local6;
    if (fetch.out == nullptr ||
        st.connect(local, o.connect, o.port, nullptr, nullptr, Fetch::on_event, &fetch, &fc) !=
            TcpError::kOk) {
      std::fprintf(stderr, "tcp_tun_peer: cannot start the fetch\n");
      return 1;
    }
  }
  signal(SIGTERM, on_signal);  // the test stops an echo peer: print the counters first
  std::printf("ready\n");
  std::fflush(stdout);
  const uint64_t deadline = mono_ns() + uint64_t(o.seconds) * 1'000'000'000ull;
  while (mono_ns() < deadline && !fetch.done && g_stop == 0) {
    pollfd pfd{fd, POLLIN, 0};
    poll(&pfd, 1, 1);
    tun.poll_in(st);
    st.advance(mono_ns());
  }
  for (uint32_t k = 0; k < kTcpCounterCount; ++k) {
    if (st.counters().v[k] != 0) {
      std::printf("%s=%llu\n", kTcpCounterNames[k], (unsigned long long)st.counters().v[k]);
    }
  }
  if (o.mode == "fetch") {
    std::fclose(fetch.out);
    std::printf("fetched=%llu reset=%d done=%d\n", (unsigned long long)fetch.bytes, fetch.reset,
                fetch.done);
    return fetch.done && !fetch.reset ? 0 : 1;
  }
  return 0;
}
