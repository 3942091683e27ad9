#include "dataplane/stack/stack_host.h"

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include <algorithm>

#include "dataplane/common/compiler.h"
#include "dataplane/nat/fullnat_source.h"
#include "dataplane/nat/icmp_error.h"
#include "dataplane/packet/parse.h"
#include "dataplane/packet/wire.h"
#include "dataplane/snapshot/snapshot.h"

namespace meshgate::dp {

using tcp::TcpTuple;

StackHost::StackHost(const tcp::TcpConfig& cfg, FullnatSource& fullnat, rte_mempool* pool,
                     uint64_t now_ns)
    : fullnat_(fullnat), now_ns_(now_ns) {
  MG_CHECK(pool != nullptr);
  wheel_.init(uint32_t(now_ns_ / 1'000'000));
  tcp::TcpStackDeps sd;
  sd.pool = pool;
  sd.wheel = &wheel_;
  sd.output = &StackHost::output;
  sd.output_ctx = this;
  stack_ = std::make_unique<tcp::TcpStack>(cfg, sd, now_ns);
  out_ = std::make_unique<Frame[]>(kStackOutQueue);
  listeners_.reserve(cfg.max_listeners);
  fullnat_.set_stack(stack_.get());
}

StackHost::~StackHost() {
  fullnat_.set_stack(nullptr);
  while (out_head_ != out_tail_) rte_pktmbuf_free(out_[out_head_++ % kStackOutQueue].m);
  stack_.reset();  // frees every connection's buffers while the mempool still exists
}

// ---- the worker -----------------------------------------------------------------------------

void StackHost::begin(const Snapshot* snap, uint64_t now_ns) {
  snap_ = snap;
  if (now_ns > now_ns_) now_ns_ = now_ns;
  stack_->set_now(now_ns_);
}

void StackHost::input(rte_mbuf* m, const PacketMeta& meta) { stack_->input(m, meta, now_ns_); }

void StackHost::advance() { stack_->advance(now_ns_); }

bool StackHost::icmp_error(const uint8_t* frame, uint32_t len, const PacketMeta& m) {
  IcmpQuote q;
  if (!parse_icmp_quote(frame, len, m, &q) || q.proto != kProtoTcp || q.quoted_l4 < 8) {
    return false;
  }
  const TcpTuple t{q.src, q.dst, ntohs(q.sport), ntohs(q.dport)};
  if (stack_->state_of(t) == tcp::TcpState::kClosed) return false;
  const bool v4 = m.l3 == L3::kIpv4;
  const uint8_t* icmp = frame + m.l4_off;
  if (v4 ? (m.icmp_type == kIcmpDestUnreach && m.icmp_code == 4)
         : m.icmp_type == kIcmp6PacketTooBig) {
    // RFC 1191 §4: the next-hop MTU in the low 16 bits of the second word; RFC 4443 §3.2: all
    // 32 bits. The quoted TCP header's sequence number sits 4 bytes in.
    const uint32_t mtu = v4 ? rd16(icmp + 6) : rd32(icmp + 4);
    stack_->icmp_too_big(t, rd32(frame + q.l4_off + 4), mtu);
  }
  // Other errors about our segments (unreachable, time exceeded) are soft errors for TCP
  // (RFC 1122 4.2.3.9, RFC 5461): the retransmission timer decides. Consumed either way.
  return true;
}

uint16_t StackHost::take_output(rte_mbuf** out, PacketMeta* meta, uint16_t max) {
  uint16_t n = 0;
  while (n < max && out_head_ != out_tail_) {
    const Frame& f = out_[out_head_++ % kStackOutQueue];
    out[n] = f.m;
    PacketMeta& m = meta[n];
    m = PacketMeta{};
    m.l3 = f.src.is_v4() ? L3::kIpv4 : L3::kIpv6;
    m.src = f.src;
    m.dst = f.dst;
    m.ip_len = uint16_t(rte_pktmbuf_pkt_len(f.m));
    ++n;
  }
  return n;
}

void StackHost::output(void* ctx, rte_mbuf* m, const TcpTuple& t) {
  StackHost* h = static_cast<StackHost*>(ctx);
  if (h->out_tail_ - h->out_head_ >= kStackOutQueue) {
    rte_pktmbuf_free(m);
    ++h->out_dropped_;
    return;
  }
  Frame& f = h->out_[h->out_tail_++ % kStackOutQueue];
  f.m = m;
  f.src = t.local;
  f.dst = t.remote;
}

bool StackHost::is_local_endpoint(const IpAddr& dst, uint16_t dport_be, const IpAddr& src,
                                  uint16_t sport_be) const {
  const uint16_t port = ntohs(dport_be);
  if (listening_on(port)) {
    for (const Listener& l : listeners_) {
      if (l.port == port && (l.local == dst || l.local.is_zero())) return true;
    }
  }
  return stack_->active_port(port) &&
         stack_->state_of(TcpTuple{dst, src, port, ntohs(sport_be)}) != tcp::TcpState::kClosed;
}

// ---- the applications -----------------------------------------------------------------------

tcp::TcpError StackHost::listen(const IpAddr& local, uint16_t port, tcp::TcpAcceptFn accept,
                                void* ctx) {
  const tcp::TcpError e = stack_->listen(local, port, accept, ctx);
  if (e != tcp::TcpError::kOk) return e;
  listeners_.push_back(Listener{local, port});  // within the reserve: the stack has the same cap
  listen_bits_[port >> 6] |= uint64_t(1) << (port & 63);
  return e;
}

void StackHost::unlisten(const IpAddr& local, uint16_t port) {
  stack_->unlisten(local, port);
  const auto it = std::find_if(listeners_.begin(), listeners_.end(), [&](const Listener& l) {
    return l.port == port && l.local == local;
  });
  if (it == listeners_.end()) return;
  *it = listeners_.back();
  listeners_.pop_back();
  const bool shared = std::any_of(listeners_.begin(), listeners_.end(),
                                  [&](const Listener& l) { return l.port == port; });
  if (!shared) listen_bits_[port >> 6] &= ~(uint64_t(1) << (port & 63));
}

tcp::TcpError StackHost::connect(const IpAddr& to, uint16_t port_be, uint32_t hash,
                                 tcp::TcpEventFn fn, void* user, tcp::TcpConnId* out) {
  FullnatChoice c;
  if (snap_ == nullptr || !fullnat_.begin(*snap_, to, port_be, kProtoTcp, hash, &c)) {
    return tcp::TcpError::kBadState;
  }
  choice_ = &c;
  const tcp::TcpError e =
      stack_->connect(c.local->address, to, ntohs(port_be), &StackHost::port_ok, this, fn, user,
                      out);
  choice_ = nullptr;
  return e;
}

bool StackHost::port_ok(void* ctx, const TcpTuple& t) {
  const StackHost* h = static_cast<const StackHost*>(ctx);
  return h->fullnat_.port_ok(*h->choice_, t.local_port);
}

}  // namespace meshgate::dp
