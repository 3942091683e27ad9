// The established-flow fast path and the two-poll pipeline that feeds it: a burst of packets
// of established flows whose next hops are cached is forwarded in a few fused passes
// (stage_fast); anything else goes to the stages (worker.cc).
#include <arpa/inet.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <algorithm>
#include <bit>

#include "dataplane/lb/lb.h"
#include "dataplane/nat/encap.h"
#include "dataplane/nat/nat.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"
#include "dataplane/route/route.h"
#include "dataplane/worker/worker.h"

namespace meshgate::dp {
namespace {

// The parser's checks of a TCP or UDP header of `l4_len` bytes (the IP payload) in a frame
// that holds them: TCP with flags and options it accepts, UDP with a length that fits.
// Without `syn`, a SYN without ACK is turned away (Worker::fast_syn_skip_).
MG_ALWAYS_INLINE bool fast_l4_ok(const uint8_t* l4, uint32_t l4_len, uint8_t proto, bool syn) {
  if (proto == kProtoTcp) {
    if (l4_len < kTcpHdrLen) return false;
    const uint8_t flags = l4[13];
    if (!syn && (flags & (kTcpSyn | kTcpAck)) == kTcpSyn) return false;
    // The parser's kTcpBadFlags: SYN with FIN or RST, or none of the six flags.
    if ((flags & (kTcpSyn | kTcpFin)) == (kTcpSyn | kTcpFin) ||
        (flags & (kTcpSyn | kTcpRst)) == (kTcpSyn | kTcpRst) || !(flags & 0x3f)) {
      return false;
    }
    const uint32_t doff = uint32_t(l4[12] >> 4) * 4;
    if (doff == kTcpHdrLen) return true;
    if (doff < kTcpHdrLen || doff > l4_len) return false;
    const uint8_t* o = l4 + kTcpHdrLen;
    const uint32_t olen = doff - kTcpHdrLen;
    uint16_t mss;
    uint8_t wscale;
    if (match_common_tcp_options(o, olen, &mss, &wscale)) return true;
    return tcp_options_valid(o, olen);
  }
  if (proto == kProtoUdp) {
    const uint16_t ulen = rd16(l4 + 4);
    return l4_len >= kUdpHdrLen && ulen >= kUdpHdrLen && ulen <= l4_len;
  }
  return false;
}

// stage_fast's first test: a frame the parser would take, whose flow stage_flow would look up:
// unicast to us, untagged IPv4 without options (its header checksum valid), not a fragment,
// from a legal source, with a TTL to decrement; UDP, or TCP with flags and options the parser
// accepts. Any flags: a SYN, FIN or RST of a live flow changes only that flow's state, which
// stage_fast's last pass updates through the same FlowTable::touch as stage_flow. Reads the
// frame's first 58 bytes, and a TCP header's options when they are not just NOP NOP
// timestamps.
MG_ALWAYS_INLINE bool fast_candidate(const rte_mbuf* m, const uint8_t* d, uint64_t our_mac,
                                     bool syn) {
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
  return fast_l4_ok(ip + kIpv4HdrLen, total - kIpv4HdrLen, ip[9], syn);
}

// fast_candidate for IPv6: untagged, the transport header right after the fixed header (no
// extension header), from a legal source (parse_ipv6: not multicast, ::1 or ::, neither
// address IPv4-mapped), a hop limit to decrement. Reads the frame's first 74 bytes, and TCP
// options as fast_candidate.
MG_ALWAYS_INLINE bool fast_candidate_v6(const rte_mbuf* m, const uint8_t* d, uint64_t our_mac,
                                        bool syn) {
  constexpr uint32_t kL4 = kEthHdrLen + kIpv6HdrLen;
  const uint32_t len = m->pkt_len;
  if (MG_UNLIKELY(m->data_len != len || len < kL4 + kUdpHdrLen)) return false;
  uint64_t eth;
  std::memcpy(&eth, d, 8);
  if ((eth ^ our_mac) << 16) return false;
  const uint8_t* ip = d + kEthHdrLen;
  if (rd16(d + 12) != kEtherTypeIpv6 || (ip[0] >> 4) != 6) return false;
  const uint32_t payload = rd16(ip + 4);
  if (payload == 0 || payload > len - kL4) return false;
  if (ip[7] <= 1) return false;  // hop limit
  uint64_t s_hi, s_lo, d_hi, d_lo;  // as they lie in memory
  std::memcpy(&s_hi, ip + 8, 8);
  std::memcpy(&s_lo, ip + 16, 8);
  std::memcpy(&d_hi, ip + 24, 8);
  std::memcpy(&d_lo, ip + 32, 8);
  constexpr uint64_t kLoopbackLo = std::endian::native == std::endian::little ? 1ull << 56 : 1;
  if (ip[8] == 0xff || (s_hi == 0 && (s_lo == 0 || s_lo == kLoopbackLo))) return false;
  // IPv4-mapped (IpAddr::is_v4): 10 zero bytes, then ff ff.
  constexpr uint64_t kMappedMask = std::endian::native == std::endian::little ? 0xffffffffull
                                                                              : 0xffffffffull << 32;
  constexpr uint64_t kMapped = std::endian::native == std::endian::little ? 0xffff0000ull
                                                                          : 0x0000ffffull << 32;
  if ((s_hi == 0 && (s_lo & kMappedMask) == kMapped) ||
      (d_hi == 0 && (d_lo & kMappedMask) == kMapped)) {
    return false;
  }
  if (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) return false;
  return fast_l4_ok(ip + kIpv6HdrLen, payload, ip[6], syn);
}

}  // namespace

// Receives a burst from port `pi` and processes it, pipelined over two polls when the traffic
// is heavy: a full burst of fast-path candidates is only hashed (its first buckets prefetched)
// and held; the next poll prefetches its flows, runs the first pass over the burst it
// receives then (whose work covers the flows' latency), and forwards the held burst, whose
// buckets and flows are in cache by then. A burst that is not full, or not all candidates, is
// processed at once (after the held one: the port's order stays), so a packet waits at most
// one poll, and only while bursts come full. A full burst with a SYN is held only while SYNs
// have been of live flows (fast_syn_live_). Without WorkerParams::pipeline (replays) every
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
  // (A SYN may start a flow, and its burst then goes to the stages: not worth holding unless
  // the last SYNs were of live flows.)
  if (n == kBurst && next->hashed == n && (!next->wire.syn || fast_syn_live_)) {
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
// IPv4 packets of live flows (any mode, either direction, any TCP flags) whose next hops are
// cached, fused into passes that each do one kind of work over the whole burst, so that memory
// loads of later packets overlap the work on earlier ones: 1) check the frame and hash its
// tuple, prefetch its first bucket; 2) prefetch the flows whose signatures match; 3) find the
// flow and check that the stages would forward the packet straight through (no ICMP error, a
// cached next hop, within the MTU with any encapsulation, room for it); 4) touch, translate or
// encapsulate, count, L2 and TX (fast_send, specialized for the burst's mode when it has one).
// Passes 1-3 only read: the first packet that would do anything else (start a flow, be
// dropped, wait for a neighbor, an ARP...) returns the whole burst to the stages as it came.
// Given that, the result is the stages' to the byte: the packets of a fast burst can only
// affect each other through their flows' state and expiry, which pass 4 updates in burst
// order with stage_flow's FlowTable::touch. (A touch never expires a flow pass 3 found alive:
// every timeout is at least a second.)
uint16_t Worker::fast_hash(uint16_t in_port, rte_mbuf** pkts, uint16_t n, uint32_t* hash,
                           uint32_t* b0, FastWire* wire, uint64_t* bytes) const {
  // A burst is taken in one family, the first packet's: the other's go to the stages.
  if (n && rd16(rte_pktmbuf_mtod(pkts[0], const uint8_t*) + 12) == kEtherTypeIpv6) {
    return fast_hash_family<true>(in_port, pkts, n, hash, b0, wire, bytes);
  }
  return fast_hash_family<false>(in_port, pkts, n, hash, b0, wire, bytes);
}

template <bool kV6>
uint16_t Worker::fast_hash_family(uint16_t in_port, rte_mbuf** pkts, uint16_t n, uint32_t* hash,
                                  uint32_t* b0, FastWire* wire, uint64_t* bytes) const {
  uint64_t sum = 0;
  uint64_t our_mac = 0;  // in the low 6 bytes, as fast_candidate loads a frame's first 8
  std::memcpy(&our_mac, c_.p.ports[in_port].mac.b.data(), 6);
  constexpr uint32_t kAhead = 4;
  constexpr uint32_t kL3Len = kV6 ? kIpv6HdrLen : kIpv4HdrLen;
  const bool syn = fast_syn_skip_ == 0;
  wire->v6 = kV6;
  uint8_t syns = 0;
  for (uint16_t i = 0; i < n && i < kAhead; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
  for (uint16_t i = 0; i < n; ++i) {
    if (i + kAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kAhead], void*));
    const uint8_t* d = rte_pktmbuf_mtod(pkts[i], const uint8_t*);
    const bool ok = kV6 ? fast_candidate_v6(pkts[i], d, our_mac, syn)
                        : fast_candidate(pkts[i], d, our_mac, syn);
    if (!ok) {
      if (bytes) *bytes += sum;
      wire->syn = syns;
      return i;
    }
    const uint32_t len = pkts[i]->pkt_len;
    sum += len;
    uint8_t* ip = const_cast<uint8_t*>(d) + kEthHdrLen;
    uint32_t ports;
    std::memcpy(&ports, ip + kL3Len, 4);
    const uint8_t proto = kV6 ? ip[6] : ip[9];
    wire->l3[i] = ip;
    wire->ports[i] = ports;
    wire->len[i] = len;
    wire->proto[i] = proto;
    const uint8_t tcp_flags = proto == kProtoTcp ? ip[kL3Len + 13] : 0;
    wire->tcp_flags[i] = tcp_flags;
    syns |= (tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn;
    if constexpr (kV6) {
      wire->total[i] = uint16_t(kIpv6HdrLen + rd16(ip + 4));
      hash[i] = lb_flow_hash_v6(ip + 8, ports, proto);
    } else {
      uint64_t addrs;
      std::memcpy(&addrs, ip + 12, 8);  // source, destination
      wire->addrs[i] = addrs;
      wire->total[i] = rd16(ip + 2);
      hash[i] = lb_flow_hash_v4(uint32_t(addrs), uint32_t(addrs >> 32), ports, proto);
    }
    b0[i] = c_.flows.first_bucket(hash[i]);
    c_.flows.prefetch_first_bucket(b0[i]);
  }
  if (bytes) *bytes += sum;
  wire->syn = syns;
  return n;
}

uint16_t Worker::stage_fast(uint16_t in_port, rte_mbuf** pkts, uint16_t n, bool hashed) {
  fast_flow_miss_ = false;
  if (fast_syn_skip_) --fast_syn_skip_;
  if (!hashed) b_.hashed = fast_hash(in_port, pkts, n, b_.hash, b0_, &wire_own_);
  if (b_.hashed != n) return 0;
  if (!b_.flows_prefetched) {
    fast_prefetch_flows(b_.hash, b0_, hint_, n);
    b_.flows_prefetched = true;
  }
  return wire_->v6 ? fast_check<true>(pkts, n) : fast_check<false>(pkts, n);
}

template <bool kV6>
uint16_t Worker::fast_check(rte_mbuf** pkts, uint16_t n) {
  const uint32_t now_ms = c_.now_ms();
  const uint64_t epoch_hi = uint64_t(c_.nh.epoch) << 32;
  const bool resets = !c_.snap->reset_stat_ids.empty();
  const bool stale = !c_.snap->stale_stat_ids.empty();
  // A blocked source's packets go to the stages, whose classify drops them (source_blocked):
  // flows established before the source was blocked included.
  const bool blocking = !c_.snap->blocked_sources.empty();
  uint32_t reply = 0;  // bit i: packet i is a reply
  uint32_t modes = 0;  // bit m: a flow of Mode m
  // GUE: the service's port (forward_flow's service_of), for the last VIP, port and protocol.
  const SnapService* gue_svc = nullptr;
  IpAddr gue_vip;
  uint32_t gue_ports = 0;
  uint8_t gue_proto = 0;
  const FastWire& w = *wire_;
  for (uint16_t i = 0; i < n; ++i) {
    const uint8_t proto = w.proto[i];
    const uint8_t* ip = w.l3[i];
    FlowDir dir;
    Flow* f;
    if constexpr (kV6) {
      const Tuple t{IpAddr::v6_bytes(ip + 8), IpAddr::v6_bytes(ip + 24), uint16_t(w.ports[i]),
                    uint16_t(w.ports[i] >> 16), proto};
      f = c_.flows.peek(t, b_.hash[i], c_.flows.buckets_of(b_.hash[i]), now_ms, &dir);
    } else {
      f = c_.flows.peek_v4(w.addrs[i], w.ports[i], proto, b_.hash[i], b0_[i], hint_[i], now_ms,
                         &dir);
    }
    if (!f) {
      if ((w.tcp_flags[i] & (kTcpSyn | kTcpAck)) == kTcpSyn) {
        // A new flow's SYN: the next bursts' SYNs go to the stages.
        fast_syn_live_ = false;
        fast_syn_skip_ = fast_syn_backoff_;
        fast_syn_backoff_ =
            uint8_t(std::clamp<uint32_t>(2u * fast_syn_backoff_, 1, kFastBackoffMax));
      } else {
        fast_flow_miss_ = true;
      }
      return 0;
    }
    if (resets && c_.snap->reset_flows_of(f->stat_id)) return 0;
    // A UDP flow of a stale backend moves on its next client packet (stage_flow).
    if (MG_UNLIKELY(stale) && proto == kProtoUdp && dir == FlowDir::kOriginal &&
        c_.snap->stale_backend(f->stat_id)) {
      return 0;
    }
    if (MG_UNLIKELY(blocking)) {
      const IpAddr src = kV6 ? IpAddr::v6_bytes(ip + 8) : IpAddr::v4_bytes(ip + 12);
      if (c_.snap->blocked_sources.contains(src)) return 0;
    }
    const Mode mode = f->mode;
    modes |= 1u << uint32_t(mode);
    // The next hop: route_one's cache entry, valid in this epoch, for the backend (client
    // packets, and DSR's tunnel) or the client (replies).
    const NhCacheEntry* ce;
    if constexpr (kV6) {
      const IpAddr& to = dir == FlowDir::kOriginal ? f->addrs6().backend : f->addrs6().client;
      ce = &c_.nh.entries[NhCache::slot(to)];
      if (ce->epoch != c_.nh.epoch || !(ce->dst == to)) return 0;
    } else {
      const uint32_t to = dir == FlowDir::kOriginal ? f->backend4 : f->client4;
      ce = &c_.nh.entries[NhCache::slot_v4(to)];
      if (ce->tag4 != (epoch_hi | to)) return 0;
    }
    uint32_t overhead = 0;
    if (is_dsr(mode)) {
      // route_one's encapsulation (a DSR flow is only ever seen from the client): the
      // headroom to prepend, the outer source, the GUE port.
      const bool gue = mode == Mode::kDsrGue;
      overhead = encap_overhead(!kV6, gue);
      if (rte_pktmbuf_headroom(pkts[i]) < overhead) return 0;
      fast_src_[i] = ce->src;
      if (!fast_src_[i]) return 0;
      if (gue) {
        const IpAddr vip = kV6 ? IpAddr::v6_bytes(ip + 24) : IpAddr::v4_bytes(ip + 16);
        if (!gue_proto || gue_ports >> 16 != w.ports[i] >> 16 || gue_proto != proto ||
            !(gue_vip == vip)) {
          gue_svc = c_.snap->find_service(vip, uint16_t(w.ports[i] >> 16), proto);
          gue_vip = vip;
          gue_ports = w.ports[i];
          gue_proto = proto;
        }
        // A service gone from the snapshot keeps the default, as in forward_flow.
        fast_gue_port_[i] = gue_svc ? gue_svc->gue_port_be : uint16_t(htons(6080));
      }
    }
    if (w.total[i] + overhead > ce->mtu) return 0;
    b_.flow[i] = f;
    fast_nh_[i] = ce;
    reply |= uint32_t(dir) << i;
  }

  constexpr auto bit = [](Mode m) { return 1u << uint32_t(m); };
  if (modes == bit(Mode::kDnat)) {
    fast_send<kV6, Mode::kDnat, false>(pkts, n, now_ms, reply);
  } else if (modes == bit(Mode::kFullnat)) {
    fast_send<kV6, Mode::kFullnat, false>(pkts, n, now_ms, reply);
  } else if (modes == bit(Mode::kDsrIpip)) {
    fast_send<kV6, Mode::kDsrIpip, false>(pkts, n, now_ms, reply);
  } else if (modes == bit(Mode::kDsrGue)) {
    fast_send<kV6, Mode::kDsrGue, false>(pkts, n, now_ms, reply);
  } else {
    fast_send<kV6, Mode::kDnat, true>(pkts, n, now_ms, reply);
  }
  counter_add(c_.counters.fast_path_packets, n);
  fast_syn_backoff_ = 0;
  if (w.syn) fast_syn_live_ = true;
  return n;
}

template <bool kV6, Mode kMode, bool kMixed>
void Worker::fast_send(rte_mbuf** pkts, uint16_t n, uint32_t now_ms, uint32_t reply) {
  const FastWire& w = *wire_;
  constexpr uint32_t kL3Len = kV6 ? kIpv6HdrLen : kIpv4HdrLen;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    uint8_t* ip = w.l3[i];
    uint8_t* d = ip - kEthHdrLen;
    uint8_t* l4 = ip + kL3Len;
    const uint8_t proto = w.proto[i];
    Flow* f = b_.flow[i];
    const FlowDir dir = FlowDir(reply >> i & 1);
    // Loaded before the frame's bytes are written (char stores may alias anything: the
    // compiler would load them again after each).
    BackendCounters& bc = c_.backend_counters[f->stat_id];
    const uint32_t len = w.len[i];
    uint32_t tx_len = len;
    const NhCacheEntry& ce = *fast_nh_[i];
    const Mode mode = kMixed ? f->mode : kMode;
    c_.flows.touch(f, dir, w.tcp_flags[i], now_ms);
    if (mode == Mode::kDnat || mode == Mode::kFullnat) {
      if constexpr (kV6) {
        // reverse(): from the VIP (fullnat: to the client); forward(): fullnat from our
        // source, to the backend. Then decrement_ttl.
        const FlowAddrs6& a = f->addrs6();
        if (dir == FlowDir::kReply) {
          nat_rewrite_ipv6<false>(ip, l4, proto, c_.flows.vip(*f).b, f->vip_port);
          if (mode == Mode::kFullnat) {
            nat_rewrite_ipv6<true>(ip, l4, proto, a.client.b, f->client_port);
          }
        } else {
          if (mode == Mode::kFullnat) {
            nat_rewrite_ipv6<false>(ip, l4, proto, c_.flows.local(*f).b, f->local_port);
          }
          nat_rewrite_ipv6<true>(ip, l4, proto, a.backend.b, f->backend_port);
        }
        ip[7] = uint8_t(ip[7] - 1);
      } else if (mode == Mode::kDnat) {
        if (dir == FlowDir::kReply) {
          nat_rewrite_ipv4_ttl<false>(ip, l4, proto, reinterpret_cast<const uint8_t*>(&f->vip4),
                                      f->vip_port);
        } else {
          nat_rewrite_ipv4_ttl<true>(ip, l4, proto,
                                     reinterpret_cast<const uint8_t*>(&f->backend4),
                                     f->backend_port);
        }
      } else if (dir == FlowDir::kReply) {
        nat_rewrite_ipv4_both_ttl(ip, l4, proto, reinterpret_cast<const uint8_t*>(&f->vip4),
                                  f->vip_port, reinterpret_cast<const uint8_t*>(&f->client4),
                                  f->client_port);
      } else {
        nat_rewrite_ipv4_both_ttl(ip, l4, proto, c_.flows.local(*f).v4_ptr(), f->local_port,
                                  reinterpret_cast<const uint8_t*>(&f->backend4),
                                  f->backend_port);
      }
    } else {
      // DSR: the packet unchanged but for its TTL (decrement_ttl), inside an outer header
      // toward the backend (route_one), whose flow hash is this packet's: a DSR flow's
      // original tuple is the client's.
      if constexpr (kV6) {
        ip[7] = uint8_t(ip[7] - 1);
      } else {
        const uint16_t old_word = ld16(ip + 8);
        const uint8_t ttl_proto[2] = {uint8_t(ip[8] - 1), ip[9]};
        ip[8] = ttl_proto[0];
        csum_replace2(ip + 10, old_word, ld16(ttl_proto));
      }
      const bool gue = mode == Mode::kDsrGue;
      const uint32_t overhead = encap_overhead(!kV6, gue);
      d = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, uint16_t(overhead)));
      // The frame's MACs are written below; its type stays the inner packet's family.
      wr16(d + 12, kV6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
      write_encap(d + kEthHdrLen, d + kEthHdrLen + overhead, w.total[i], !kV6, gue,
                  fast_src_[i]->addr, f->backend(), gue ? fast_gue_port_[i] : 0, b_.hash[i]);
      tx_len = len + overhead;
    }
    counter_add(bc.packets, 1);
    counter_add(dir == FlowDir::kReply ? bc.reply_bytes : bc.bytes, len);
    std::memcpy(d, ce.macs, 12);
    c_.tx(ce.port, m, tx_len);
  }
}

}  // namespace meshgate::dp
