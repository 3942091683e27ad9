// The proxy's unit-test network: the real worker (net_ring ports, DataplaneHarness) against a
// peer TCP stack that plays the client (192.0.2.2, routed via the router) and every backend
// (198.51.100.x, on-link, listening on 8080 and 8081), with a recording application and a
// wire that moves frames until nothing is in flight. Used by the proxy and listener tests.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "dataplane/packet/wire.h"
#include "dataplane/proxy/proxy.h"
#include "tests/support/dp_harness.h"
#include "tests/support/tcp_test_util.h"

namespace meshgate::test {

using dp::tcp::TcpConnId;
using dp::tcp::TcpEvent;
using dp::tcp::TcpStack;
using dp::tcp::TcpTuple;
using tcp::Endpoint;

const IpAddr kClient = *IpAddr::parse("192.0.2.2");
const IpAddr kVip = *IpAddr::parse("203.0.113.20");
const IpAddr kLocal = *IpAddr::parse("198.51.100.2");

// The peer side: one stack for the client and every backend, an application that records.
struct Peer {
  struct Conn {
    TcpTuple tuple;
    std::string rx;
    bool connected = false, fin = false, reset = false, closed = false;
    // What to send, and whether to shut down writing once it is all queued.
    std::string tx;
    size_t tx_off = 0;
    bool shut_after = false, shut = false;
  };
  Endpoint ep;
  bool auto_read = true;
  std::map<TcpConnId, Conn> conns;
  std::vector<TcpConnId> accepted;

  explicit Peer(uint64_t now) : ep(dp::tcp::TcpConfig{}, now) {
    EXPECT_EQ(ep.stack->listen(IpAddr{}, 8080, &Peer::accept, this), dp::tcp::TcpError::kOk);
    EXPECT_EQ(ep.stack->listen(IpAddr{}, 8081, &Peer::accept, this), dp::tcp::TcpError::kOk);
  }
  TcpStack& st() { return *ep.stack; }

  static bool accept(void* ctx, const TcpTuple&, dp::tcp::TcpEventFn* fn, void** user) {
    *fn = &Peer::on_event;
    *user = ctx;
    return true;
  }
  static void on_event(void* user, TcpConnId c, TcpEvent ev) {
    Peer* p = static_cast<Peer*>(user);
    Conn& k = p->conns[c];
    switch (ev) {
      case TcpEvent::kConnected: {
        k.connected = true;
        dp::tcp::TcpConnInfo ci;
        p->st().info(c, &ci);
        k.tuple = ci.tuple;
        if (ci.tuple.local_port != 0 && ci.tuple.local != kClient) p->accepted.push_back(c);
        break;
      }
      case TcpEvent::kReadable: break;
      case TcpEvent::kPeerFin: k.fin = true; break;
      case TcpEvent::kWritable: break;
      case TcpEvent::kReset: k.reset = true; break;
      case TcpEvent::kClosed: k.closed = true; break;
    }
    if (p->auto_read) p->read(c);
  }
  void read(TcpConnId c) {
    char buf[16384];
    for (uint32_t n; (n = st().recv(c, buf, sizeof buf)) > 0;) conns[c].rx.append(buf, n);
  }
  void write_all() {
    for (auto& [id, k] : conns) {
      if (k.reset || k.closed) continue;
      if (k.tx_off < k.tx.size()) {
        k.tx_off += st().send(id, k.tx.data() + k.tx_off, uint32_t(k.tx.size() - k.tx_off));
      }
      if (k.tx_off == k.tx.size() && k.shut_after && !k.shut) {
        st().shutdown_write(id);
        k.shut = true;
      }
    }
  }
};

// The wire between the peer stack and the gateway's port net0.
struct Net {
  DataplaneHarness h;
  uint64_t now = 1'000'000'000;
  Peer peer{now};
  bool check_rss = false;
  uint64_t handoff_free_replies = 0;
  // Frames the gateway sends to this address are kept here instead of delivered (a path that
  // loses them); zero: deliver everything.
  IpAddr blackhole;
  std::vector<pkt::Bytes> captured;

  void deliver(const std::vector<pkt::Bytes>& frames) {
    for (const pkt::Bytes& f : frames) {
      if (!blackhole.is_zero() && f.size() > 34 && dp::rd16(&f[12]) == dp::kEtherTypeIpv4 &&
          IpAddr::v4_bytes(&f[30]) == blackhole) {
        captured.push_back(f);
        continue;
      }
      peer.ep.inject(f, now);
    }
  }

  Net(const std::string& cfg, HarnessOptions opt) : h(cfg, opt) {}

  static pkt::Bytes frame_of(rte_mbuf* m) {
    const uint32_t n = rte_pktmbuf_pkt_len(m);
    pkt::Bytes f(14 + n);
    const uint8_t gw[6] = {2, 0, 0, 0, 0, 1}, router[6] = {2, 0, 0, 0, 0, 0xfe};
    std::memcpy(f.data(), gw, 6);
    std::memcpy(f.data() + 6, router, 6);
    const uint8_t* ip = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, n, f.data() + 14));
    if (ip != f.data() + 14) std::memcpy(f.data() + 14, ip, n);
    dp::wr16(f.data() + 12, (f[14] >> 4) == 6 ? dp::kEtherTypeIpv6 : dp::kEtherTypeIpv4);
    return f;
  }

  // Moves frames both ways until nothing is in flight (no time passes).
  void settle() {
    for (int round = 0; round < 10000; ++round) {
      peer.write_all();
      std::vector<pkt::Bytes> frames;
      for (rte_mbuf* m : peer.ep.out) {
        frames.push_back(frame_of(m));
        rte_pktmbuf_free(m);
      }
      peer.ep.out.clear();
      if (check_rss) {
        for (const pkt::Bytes& f : frames) {
          // Replies of the backend connections: their RSS queue is the port's worker.
          if (IpAddr::v4_bytes(&f[30]) == kLocal) {
            const uint16_t dport = dp::rd16(&f[14 + 20 + 2]);
            EXPECT_EQ(h.rss_queue(f), dport % h.workers()) << "port " << dport;
            ++handoff_free_replies;
          }
        }
      }
      const std::vector<pkt::Bytes> back = frames.empty() ? h.tick(now) : h.send(frames, now);
      deliver(back);
      if (frames.empty() && back.empty() && peer.ep.out.empty()) return;
    }
    ADD_FAILURE() << "the network never settled";
  }
  // Lets `ms` milliseconds pass in 5 ms steps (timers on both sides), settling each step.
  void pass_ms(uint64_t ms) {
    for (uint64_t t = 0; t < ms; t += 5) {
      now += 5'000'000;
      peer.st().advance(now);
      deliver(h.tick(now));
      settle();
    }
  }
  TcpConnId connect(uint16_t port, const IpAddr& vip = kVip) {
    TcpConnId c = dp::tcp::kNoConn;
    EXPECT_EQ(peer.st().connect(kClient, vip, port, nullptr, nullptr, &Peer::on_event, &peer, &c),
              dp::tcp::TcpError::kOk);
    peer.conns[c];
    settle();
    return c;
  }
  const dp::ProxyStats& stats(uint16_t w = 0) {
    // Counters are published once per millisecond of the worker's clock.
    now += 1'000'000;
    deliver(h.tick(now));
    return h.worker(w).proxy()->stats();
  }
};

// Deterministic bytes for transfers.
inline std::string pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = char(x >> 16);
  }
  return s;
}

}  // namespace meshgate::test
