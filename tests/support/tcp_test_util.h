// Test support for the TCP stack (header only): an mbuf pool large enough for multi-megabyte
// transfers, a stack endpoint with its own timer wheel and output queue, decoding of the
// frames a stack emits, and feeding frames in through the real parser (as the worker will).
#pragma once

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"
#include "dataplane/tcp/tcp_options.h"
#include "dataplane/tcp/tcp_stack.h"
#include "dataplane/tcp/timer_wheel.h"
#include "tests/support/dp_harness.h"
#include "tools/pktlib/build.h"

namespace meshgate::test::tcp {

using namespace meshgate::dp::tcp;
using pkt::Bytes;

inline rte_mempool* tcp_pool() {
  static rte_mempool* pool = [] {
    init_eal_once();
    rte_mempool* p = rte_pktmbuf_pool_create("tcp_test_pool", 32767, 256, 0,
                                             RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (p == nullptr) throw std::runtime_error("cannot create the TCP test pool");
    return p;
  }();
  return pool;
}

inline uint32_t pool_in_use() {
  rte_mempool* p = tcp_pool();
  return p->size - rte_mempool_avail_count(p);
}

// A frame the stack sent, decoded.
struct Out {
  IpAddr src, dst;
  uint16_t sport = 0, dport = 0;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
  uint16_t win = 0;
  dp::tcp::TcpOptions opt;
  Bytes payload;
  bool v6 = false;
  bool has(uint8_t f) const { return (flags & f) != 0; }
};

inline Out decode(rte_mbuf* m) {
  Out o;
  Bytes b(rte_pktmbuf_pkt_len(m));
  const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, uint32_t(b.size()), b.data()));
  if (p != b.data()) std::memcpy(b.data(), p, b.size());
  uint32_t ip_hl;
  if ((b[0] >> 4) == 6) {
    o.v6 = true;
    o.src = IpAddr::v6_bytes(&b[8]);
    o.dst = IpAddr::v6_bytes(&b[24]);
    ip_hl = 40;
  } else {
    o.src = IpAddr::v4_bytes(&b[12]);
    o.dst = IpAddr::v4_bytes(&b[16]);
    ip_hl = (b[0] & 15) * 4u;
    EXPECT_EQ(dp::rd16(&b[2]), b.size());
  }
  const uint8_t* th = &b[ip_hl];
  o.sport = dp::rd16(th);
  o.dport = dp::rd16(th + 2);
  o.seq = dp::rd32(th + 4);
  o.ack = dp::rd32(th + 8);
  o.flags = th[13];
  o.win = dp::rd16(th + 14);
  const uint32_t thl = (th[12] >> 4) * 4u;
  EXPECT_TRUE(dp::tcp::parse_tcp_options(th + 20, thl - 20, &o.opt));
  o.payload.assign(b.begin() + ip_hl + thl, b.end());
  return o;
}

// Puts an L3 frame (what a stack emits) behind an Ethernet header and parses it like the
// worker does. False when the parser rejects it.
inline bool to_input(rte_mbuf* m, dp::PacketMeta* meta) {
  char* eth = rte_pktmbuf_prepend(m, 14);
  if (eth == nullptr) return false;
  std::memset(eth, 0, 12);
  const uint8_t ver = uint8_t(rte_pktmbuf_mtod_offset(m, uint8_t*, 14)[0] >> 4);
  dp::wr16(reinterpret_cast<uint8_t*>(eth) + 12, ver == 6 ? dp::kEtherTypeIpv6 : dp::kEtherTypeIpv4);
  m->ol_flags = 0;
  return dp::parse_frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, m->pkt_len, meta,
                         true) == dp::Drop::kNone;
}

inline rte_mbuf* mbuf_of(const Bytes& frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(tcp_pool());
  EXPECT_NE(m, nullptr);
  char* d = rte_pktmbuf_append(m, uint16_t(frame.size()));
  std::memcpy(d, frame.data(), frame.size());
  return m;
}

// One TCP stack with its own wheel and an output queue.
struct Endpoint {
  std::unique_ptr<TimerWheel> wheel = std::make_unique<TimerWheel>();
  std::unique_ptr<TcpStack> stack;
  std::deque<rte_mbuf*> out;

  static void on_output(void* ctx, rte_mbuf* m, const TcpTuple&) {
    static_cast<Endpoint*>(ctx)->out.push_back(m);
  }

  Endpoint(const TcpConfig& cfg, uint64_t now_ns, TcpIsnFn isn = nullptr, void* isn_ctx = nullptr) {
    wheel->init(uint32_t(now_ns / 1'000'000));
    TcpStackDeps d;
    d.pool = tcp_pool();
    d.wheel = wheel.get();
    d.output = on_output;
    d.output_ctx = this;
    d.isn = isn;
    d.isn_ctx = isn_ctx;
    stack = std::make_unique<TcpStack>(cfg, d, now_ns);
  }
  ~Endpoint() {
    drop_output();
    stack.reset();
  }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Decodes and frees everything emitted so far.
  std::vector<Out> take() {
    std::vector<Out> v;
    for (rte_mbuf* m : out) {
      v.push_back(decode(m));
      rte_pktmbuf_free(m);
    }
    out.clear();
    return v;
  }
  void drop_output() {
    for (rte_mbuf* m : out) rte_pktmbuf_free(m);
    out.clear();
  }
  // A whole Ethernet frame in, through the parser. A frame the parser rejects (as the worker
  // would) is a test failure unless `may_be_malformed`; either way it never reaches the stack.
  void inject(const Bytes& frame, uint64_t now_ns, bool may_be_malformed = false) {
    rte_mbuf* m = mbuf_of(frame);
    dp::PacketMeta meta;
    const dp::Drop d = dp::parse_frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len,
                                       m->pkt_len, &meta, true);
    if (d != dp::Drop::kNone) {
      EXPECT_TRUE(may_be_malformed) << "parser drop " << dp::drop_name(d);
      rte_pktmbuf_free(m);
      return;
    }
    stack->input(m, meta, now_ns);
  }
  // An L3 frame another stack emitted.
  void deliver(rte_mbuf* m, uint64_t now_ns) {
    dp::PacketMeta meta;
    if (!to_input(m, &meta)) {
      ADD_FAILURE() << "parser rejected a frame the stack emitted";
      rte_pktmbuf_free(m);
      return;
    }
    stack->input(m, meta, now_ns);
  }
};

}  // namespace meshgate::test::tcp
