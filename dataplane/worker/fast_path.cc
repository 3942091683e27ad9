// The established-flow fast path and the two-poll pipeline that feeds it: a burst of packets
// of established flows whose next hops are cached is forwarded in a few fused passes
// (stage_fast); anything else goes to the stages (worker.cc).
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include "dataplane/lb/lb.h"
#include "dataplane/nat/nat.h"
#include "dataplane/packet/wire.h"
#include "dataplane/worker/worker.h"

namespace meshgate::dp {
namespace {

// TCP options the fast path accepts without a walk: none, or NOP NOP timestamps (what Linux
// and most stacks put on every segment once timestamps are negotiated, RFC 7323 appendix A).
constexpr uint32_t kNopNopTimestamps = 0x0101080a;  // as rd32 reads it

// stage_fast's first test: a frame the parser's fast path would take and fill in exactly, whose
// flow stage_flow would look up: unicast to us, untagged IPv4 without options (its header
// checksum valid), not a fragment, from a legal source, with a TTL to decrement; UDP, or TCP
// with no options or timestamps only and no SYN, FIN or RST (those change the connection's
// state: the stages take them). Reads only the frame's first 58 bytes.
MG_ALWAYS_INLINE bool fast_candidate(const rte_mbuf* m, const uint8_t* d, uint64_t our_mac) {
  constexpr uint32_t kL4 = kEthHdrLen + kIpv4HdrLen;
  const uint32_t len = m->pkt_len;
  if (MG_UNLIKELY(m->data_len != len || len < kL4 + kUdpHdrLen)) return false;
  // Words as they lie in memory (little-endian loads of wire bytes).
  uint64_t eth;
  uint32_t type_vhl, frag_ttl_proto;
  std::memcpy(&eth, d, 8);                   // destination MAC, 2 bytes of the source
  std::memcpy(&type_vhl, d + 12, 4);         // ethertype, version/IHL, TOS
  const uint8_t* ip = d + kEthHdrLen;
  std::memcpy(&frag_ttl_proto, ip + 6, 4);   // flags/fragment offset, TTL, protocol
  if ((eth ^ our_mac) << 16) return false;
  if ((type_vhl & 0xffffff) != 0x450008) return false;  // 08 00 45: IPv4, 20-byte header
  const uint32_t total = rd16(ip + 2);
  if (total < kIpv4HdrLen || total > len - kEthHdrLen) return false;
  if (frag_ttl_proto & 0xff3f) return false;  // MF or a fragment offset
  if (uint8_t(frag_ttl_proto >> 16) <= 1) return false;  // TTL
  const uint8_t s0 = ip[12];
  if (s0 >= 224 || s0 == 127 || s0 == 0) return false;
  const uint64_t ol_flags = m->ol_flags;
  if (ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) return false;  // stage_parse puts the tag back
  const uint64_t ip_ck = ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  if (ip_ck != RTE_MBUF_F_RX_IP_CKSUM_GOOD) {
    if (ip_ck == RTE_MBUF_F_RX_IP_CKSUM_BAD) return false;
    // The header is valid when its one's-complement sum is all ones, i.e. when the plain sum
    // of its 16-bit words is a non-zero multiple of 0xffff (2^16 = 1 mod 0xffff, so the five
    // 32-bit words may be summed instead; the version byte makes the sum non-zero).
    // (Five scalars: an array of them went through the stack.)
    uint32_t w0, w1, w2, w3, w4;
    std::memcpy(&w0, ip, 4);
    std::memcpy(&w1, ip + 4, 4);
    std::memcpy(&w2, ip + 8, 4);
    std::memcpy(&w3, ip + 12, 4);
    std::memcpy(&w4, ip + 16, 4);
    const uint64_t sum = uint64_t(w0) + w1 + w2 + w3 + w4;
    if (sum % 0xffff != 0) return false;
  }
  const uint8_t* l4 = ip + kIpv4HdrLen;
  const uint32_t l4_len = total - kIpv4HdrLen;
  if (ip[9] == kProtoTcp) {
    if (l4_len < kTcpHdrLen || len < kL4 + kTcpHdrLen) return false;
    const uint8_t flags = l4[13];
    if ((flags & (kTcpSyn | kTcpFin | kTcpRst)) || !(flags & 0x3f)) return false;
    const uint32_t doff = uint32_t(l4[12] >> 4) * 4;
    if (doff == kTcpHdrLen) return true;
    return doff == kTcpHdrLen + 12 && doff <= l4_len && rd32(l4 + kTcpHdrLen) == kNopNopTimestamps;
  }
  if (ip[9] == kProtoUdp) {
    const uint16_t ulen = rd16(l4 + 4);
    return l4_len >= kUdpHdrLen && ulen >= kUdpHdrLen && ulen <= l4_len;
  }
  return false;
}

}  // namespace

// Receives a burst from port `pi` and processes it, pipelined over two polls when the traffic
// is heavy: a full burst of fast-path candidates is only hashed (its first buckets prefetched)
// and held; the next poll prefetches its flows, runs the first pass over the burst it
// receives then (whose work covers the flows' latency), and forwards the held burst, whose
// buckets and flows are in cache by then. A burst that is not full, or not all candidates, is
// processed at once (after the held one: the port's order stays), so a packet waits at most
// one poll, and only while bursts come full. Without WorkerParams::pipeline (replays) every
// burst is processed as it comes.
uint32_t Worker::rx_port(uint16_t pi) {
  const PortRuntime& port = c_.p.ports[pi];
  Prepared* held = &held_[pi][held_cur_[pi]];
  Prepared* next = &held_[pi][held_cur_[pi] ^ 1];
  const uint16_t n = rte_eth_rx_burst(port.port_id, c_.p.index, next->pkts, kBurst);
  if (n && c_.p.replay) update_clock(next->pkts, n);
  if (held->n) fast_prefetch_flows(held->hash, held->b0, held->hint, held->n);
  next->n = n;
  next->hashed = 0;
  next->flows_prefetched = false;
  const bool tried = n && !fast_skip_ && c_.p.pipeline;
  if (n) {
    // The bytes of the packets fast_hash took come from its own loads of their lengths (a
    // pass of its own over the fresh mbufs costs a stall on each).
    uint64_t bytes = 0;
    if (tried) {
      next->hashed = fast_hash(pi, next->pkts, n, next->hash, next->b0, &next->wire, &bytes);
    }
    for (uint16_t i = next->hashed; i < n; ++i) bytes += next->pkts[i]->pkt_len;
    counter_add(c_.counters.rx_packets, n);
    counter_add(c_.counters.rx_bytes, bytes);
  }
  if (held->n) {
    held->flows_prefetched = true;
    held_packets_ -= held->n;
    process_prepared(pi, *held);
    held->n = 0;
  }
  if (n == kBurst && next->hashed == n) {
    held_cur_[pi] ^= 1;  // hold it for the next poll
    held_packets_ += n;
  } else if (n) {
    if (tried) process_prepared(pi, *next);
    else process_burst(pi, next->pkts, n);
    next->n = 0;
  }
  return n;
}

void Worker::process_prepared(uint16_t in_port, Prepared& b) {
  std::memcpy(b_.hash, b.hash, sizeof(uint32_t) * b.hashed);
  std::memcpy(b0_, b.b0, sizeof(uint32_t) * b.hashed);
  if (b.flows_prefetched) std::memcpy(hint_, b.hint, sizeof(uint32_t) * b.hashed);
  b_.hashed = b.hashed;
  b_.flows_prefetched = b.flows_prefetched;
  wire_ = &b.wire;
  process_burst(in_port, b.pkts, b.n, true);
}

void Worker::release_held() {
  // A burst is only held while a snapshot is published, and one is never withdrawn; and only
  // by workers without the TCP stack (init()), so no proxy state needs preparing here.
  load_snapshot();
  if (!c_.snap) return;
  for (uint16_t pi = 0; pi < c_.p.ports.size() && pi < kMaxPorts; ++pi) {
    Prepared& held = held_[pi][held_cur_[pi]];
    if (!held.n) continue;
    held_packets_ -= held.n;
    process_prepared(pi, held);
    held.n = 0;
  }
  c_.snap = nullptr;
}

// ---- established-flow fast path ----------------------------------------------------------

// What stage_parse, stage_classify, stage_flow, stage_route and stage_dispatch do to a burst of
// established dnat packets (either direction) whose next hops are cached, fused into passes
// that each do one kind of work over the whole burst, so that memory loads of later packets
// overlap the work on earlier ones: 1) check the frame and hash its tuple, prefetch its two
// buckets; 2) prefetch the flows whose signatures match; 3) find the flow and check that the
// stages would forward the packet straight through (no ICMP error, no state change outside the
// flow, a cached next hop, within the MTU); 4) touch, translate, count, L2 and TX.
// Passes 1-3 only read: the first packet that would do anything else (start a flow, be
// dropped, wait for a neighbor, an ARP...) returns the whole burst to the stages as it came.
// Given that, the result is the stages' to the byte: the packets of a fast burst can only
// affect each other through their flows' state and expiry, which pass 4 updates in burst
// order, as stage_flow does.
uint16_t Worker::fast_hash(uint16_t in_port, rte_mbuf** pkts, uint16_t n, uint32_t* hash,
                           uint32_t* b0, FastWire* wire, uint64_t* bytes) const {
  uint64_t sum = 0;
  uint64_t our_mac = 0;  // in the low 6 bytes, as fast_candidate loads a frame's first 8
  std::memcpy(&our_mac, c_.p.ports[in_port].mac.b.data(), 6);
  constexpr uint32_t kAhead = 4;
  for (uint16_t i = 0; i < n && i < kAhead; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
  for (uint16_t i = 0; i < n; ++i) {
    if (i + kAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kAhead], void*));
    const uint8_t* d = rte_pktmbuf_mtod(pkts[i], const uint8_t*);
    if (!fast_candidate(pkts[i], d, our_mac)) {
      if (bytes) *bytes += sum;
      return i;
    }
    const uint32_t len = pkts[i]->pkt_len;
    sum += len;
    uint8_t* ip = const_cast<uint8_t*>(d) + kEthHdrLen;
    uint64_t addrs;
    uint32_t ports;
    std::memcpy(&addrs, ip + 12, 8);  // source, destination
    std::memcpy(&ports, ip + kIpv4HdrLen, 4);
    const uint8_t proto = ip[9];
    wire->l3[i] = ip;
    wire->addrs[i] = addrs;
    wire->ports[i] = ports;
    wire->len[i] = len;
    wire->total[i] = rd16(ip + 2);
    wire->proto[i] = proto;
    hash[i] = lb_flow_hash_v4(uint32_t(addrs), uint32_t(addrs >> 32), ports, proto);
    b0[i] = c_.flows.first_bucket(hash[i]);
    c_.flows.prefetch_first_bucket(b0[i]);
  }
  if (bytes) *bytes += sum;
  return n;
}

uint16_t Worker::stage_fast(uint16_t in_port, rte_mbuf** pkts, uint16_t n, bool hashed) {
  if (!hashed) b_.hashed = fast_hash(in_port, pkts, n, b_.hash, b0_, &wire_own_);
  if (b_.hashed != n) return 0;
  if (!b_.flows_prefetched) {
    fast_prefetch_flows(b_.hash, b0_, hint_, n);
    b_.flows_prefetched = true;
  }

  const uint32_t now_ms = c_.now_ms();
  const uint64_t epoch_hi = uint64_t(c_.nh.epoch) << 32;
  const bool resets = !c_.snap->reset_stat_ids.empty();
  uint32_t reply = 0;  // bit i: packet i is a reply
  const FastWire& w = *wire_;
  for (uint16_t i = 0; i < n; ++i) {
    const uint8_t proto = w.proto[i];
    FlowDir dir;
    Flow* f = c_.flows.peek_v4(w.addrs[i], w.ports[i], proto, b_.hash[i], b0_[i], hint_[i], now_ms,
                             &dir);
    if (!f || f->mode != Mode::kDnat || (resets && c_.snap->reset_flows_of(f->stat_id))) return 0;
    // A TCP segment must leave its flow as it is but for the expiry (the inline case of
    // FlowTable::touch: ESTABLISHED, and not the first reply, which assures the flow). UDP
    // touches set the expiry and the seen-reply flag. Either way burst order, stage_flow's, is
    // kept.
    if (proto == kProtoTcp && (f->state != TcpState::kEstablished ||
                               (dir == FlowDir::kReply && !(f->flags & kFlowSeenReply)))) {
      return 0;
    }
    const uint32_t to = dir == FlowDir::kOriginal ? f->backend4 : f->client4;
    const NhCacheEntry& ce = c_.nh.entries[NhCache::slot_v4(to)];
    if (ce.tag4 != (epoch_hi | to) || w.total[i] > ce.mtu) {
      return 0;
    }
    b_.flow[i] = f;
    fast_nh_[i] = &ce;
    reply |= uint32_t(dir) << i;
  }

  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    uint8_t* ip = w.l3[i];
    uint8_t* d = ip - kEthHdrLen;
    uint8_t* l4 = ip + kIpv4HdrLen;
    const uint8_t proto = w.proto[i];
    Flow* f = b_.flow[i];
    const FlowDir dir = FlowDir(reply >> i & 1);
    // Loaded before the frame's bytes are written (char stores may alias anything: the
    // compiler would load them again after each).
    BackendCounters& bc = c_.backend_counters[f->stat_id];
    const uint32_t len = w.len[i];
    const NhCacheEntry& ce = *fast_nh_[i];
    // TCP: pass 3 checked what touch() checks for its inline case (pass 1 the flags).
    if (proto == kProtoTcp) c_.flows.touch_established(f, now_ms);
    else c_.flows.touch(f, dir, 0, now_ms);
    if (dir == FlowDir::kReply) {
      nat_rewrite_ipv4_ttl<false>(ip, l4, proto, reinterpret_cast<const uint8_t*>(&f->vip4),
                                  f->vip_port);
    } else {
      nat_rewrite_ipv4_ttl<true>(ip, l4, proto, reinterpret_cast<const uint8_t*>(&f->backend4),
                                 f->backend_port);
    }
    counter_add(bc.packets, 1);
    counter_add(bc.bytes, len);
    std::memcpy(d, ce.macs, 12);
    c_.tx(ce.port, m, len);
  }
  counter_add(c_.counters.fast_path_packets, n);
  return n;
}

}  // namespace meshgate::dp
