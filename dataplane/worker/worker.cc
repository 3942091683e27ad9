#include "dataplane/worker/worker.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <arpa/inet.h>

#include <new>

#include "dataplane/lb/lb.h"
#include "dataplane/nat/nat.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {
namespace {

constexpr uint8_t kLocalTtl = 64;  // TTL of packets we originate (RFC 1700 default)
constexpr uint8_t kNdpHopLimit = 255;  // RFC 4861 §7.1: NDP must arrive with hop limit 255
constexpr uint32_t kNdpMinLen = 24;    // NS / NA without options
// Replay safety net: stop when the pcap device stops delivering (short records it skipped).
constexpr uint64_t kReplayIdleNs = 2'000'000'000ull;

uint32_t now_ms_of(uint64_t ns) { return uint32_t(ns / 1'000'000); }

// One's-complement sum over [off, off+len) of a possibly segmented mbuf.
uint32_t mbuf_sum(const rte_mbuf* m, uint32_t off, uint32_t len) {
  if (MG_LIKELY(off + len <= m->data_len)) {
    return csum_partial(rte_pktmbuf_mtod_offset(m, const uint8_t*, off), len, 0);
  }
  uint16_t s = 0;
  rte_raw_cksum_mbuf(m, off, len, &s);
  return s;
}

}  // namespace

Worker::~Worker() {
  flows_.destroy();
  rte_free(backend_counters_);
  rte_free(neighbors_);
  rte_free(pending_);
}

bool Worker::init(const WorkerParams& p) {
  p_ = p;
  MG_CHECK(p_.ports.size() <= kMaxPorts);
  for (auto& v : port_index_by_id_) v = -1;
  for (const auto& port : p_.ports) port_index_by_id_[port.port_id & 0xff] = int8_t(port.index);
  backend_counters_ = static_cast<BackendCounters*>(rte_zmalloc_socket(
      "mg_backend_ctr", sizeof(BackendCounters) * kMaxBackendStats, 64, p_.socket));
  void* nmem = rte_zmalloc_socket("mg_neigh", sizeof(NeighborCache), 64, p_.socket);
  void* pmem = rte_zmalloc_socket("mg_pending", sizeof(PendingQueue), 64, p_.socket);
  if (!backend_counters_ || !nmem || !pmem) {
    rte_free(nmem);
    rte_free(pmem);
    return false;
  }
  neighbors_ = new (nmem) NeighborCache();
  pending_ = new (pmem) PendingQueue();
  if (!flows_.init(p_.max_flows, p_.socket, p_.timeouts)) return false;
  tsc_hz_ = rte_get_tsc_hz();
  tsc_start_ = rte_rdtsc();
  return true;
}

int Worker::run() {
  if (p_.qsbr) {
    rte_rcu_qsbr_thread_register(p_.qsbr, p_.index);
    rte_rcu_qsbr_thread_online(p_.qsbr, p_.index);
  }
  uint64_t last_rx_tsc = rte_rdtsc();
  run_start_tsc_.store(last_rx_tsc, std::memory_order_relaxed);
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint32_t got = poll_once();
    if (!p_.replay) continue;
    if (counters_.rx_packets >= p_.replay_packets) break;
    const uint64_t t = rte_rdtsc();
    if (got) {
      last_rx_tsc = t;
    } else if ((t - last_rx_tsc) * 1'000'000'000ull / tsc_hz_ > kReplayIdleNs) {
      break;
    }
  }
  run_end_tsc_.store(rte_rdtsc(), std::memory_order_relaxed);
  finish();
  if (p_.qsbr) {
    rte_rcu_qsbr_thread_offline(p_.qsbr, p_.index);
    rte_rcu_qsbr_thread_unregister(p_.qsbr, p_.index);
  }
  done_.store(true, std::memory_order_release);
  return 0;
}

double Worker::run_seconds() const {
  const uint64_t start = run_start_tsc_.load(std::memory_order_relaxed);
  if (!start) return 0;
  uint64_t end = run_end_tsc_.load(std::memory_order_relaxed);
  if (!end) end = rte_rdtsc();
  return double(end - start) / double(tsc_hz_);
}

uint32_t Worker::poll_once() {
  const uint64_t t0 = rte_rdtsc();
  if (!p_.replay) now_ns_ = (t0 - tsc_start_) * 1'000'000'000ull / tsc_hz_;
  snap_ = p_.snapshot->load();
  uint32_t total = 0;
  if (MG_LIKELY(snap_ != nullptr)) {
    counter_add(counters_.snapshot_version, snap_->version - counters_.snapshot_version);
    for (const auto& port : p_.ports) {
      rte_mbuf* pkts[kBurst];
      const uint16_t n = rte_eth_rx_burst(port.port_id, p_.index, pkts, kBurst);
      if (n == 0) continue;
      total += n;
      uint64_t bytes = 0;
      for (uint16_t i = 0; i < n; ++i) bytes += pkts[i]->pkt_len;
      counter_add(counters_.rx_packets, n);
      counter_add(counters_.rx_bytes, bytes);
      if (p_.replay) update_clock(pkts, n);
      process_burst(port.index, pkts, n);
    }
    if (pending_->size()) service_pending();
    if (p_.neighbor_in) drain_neighbor_ring();
    if (dump_req_.load(std::memory_order_relaxed)) serve_flow_dump();
    const uint32_t expired = flows_.expire_some(now_ms_of(now_ns_));
    if (expired) counter_add(counters_.flows_expired, expired);
    flush_tx();
  }
  counter_add(counters_.flows_active, int64_t(flows_.active()) - int64_t(counters_.flows_active));
  counter_add(counters_.flows_established,
              int64_t(flows_.established()) - int64_t(counters_.flows_established));
  counter_add(counters_.pending_now, int64_t(pending_->size()) - int64_t(counters_.pending_now));
  counter_add(counters_.loops, 1);
  if (total) {
    counter_add(counters_.busy_loops, 1);
    counter_add(counters_.busy_cycles, rte_rdtsc() - t0);
  }
  snap_ = nullptr;
  if (p_.qsbr) rte_rcu_qsbr_quiescent(p_.qsbr, p_.index);
  return total;
}

void Worker::finish() {
  flush_tx();
  while (pending_->size()) {
    drop(pending_->at(0).m, Drop::kNeighborUnresolved);
    pending_->erase(0);
  }
  counters_.pending_now = 0;
}

bool Worker::post_flow_dump(FlowDumpRequest* r) {
  r->count = 0;
  r->cursor = 0;
  r->done.store(false, std::memory_order_relaxed);
  FlowDumpRequest* expected = nullptr;
  return dump_req_.compare_exchange_strong(expected, r, std::memory_order_release);
}

void Worker::serve_flow_dump() {
  FlowDumpRequest* r = dump_req_.load(std::memory_order_acquire);
  if (!copy_flows(r, kFlowDumpPerIteration)) return;
  dump_req_.store(nullptr, std::memory_order_relaxed);
  r->done.store(true, std::memory_order_release);
}

void Worker::dump_flows_stopped(FlowDumpRequest* r) const {
  r->count = 0;
  r->cursor = 0;
  copy_flows(r, ~0u);
  r->done.store(true, std::memory_order_release);
}

bool Worker::copy_flows(FlowDumpRequest* r, uint32_t budget) const {
  const uint32_t now_ms = now_ms_of(now_ns_);
  const uint32_t cap = flows_.capacity();
  for (; r->cursor < cap && budget && r->count < r->max; ++r->cursor, --budget) {
    const Flow* f = flows_.at(r->cursor);
    if (!f) continue;
    FlowRecord& o = r->records[r->count++];
    o.client = f->client;
    o.vip = f->vip;
    o.backend = f->backend;
    o.client_port = ntohs(f->client_port);
    o.vip_port = ntohs(f->vip_port);
    o.backend_port = ntohs(f->backend_port);
    o.proto = f->proto;
    o.state = f->state;
    o.stat_id = f->stat_id;
    o.expires_in_ms = int32_t(f->expire_ms - now_ms);
    o.worker = p_.index;
  }
  return r->cursor >= cap || r->count >= r->max;
}

void Worker::update_clock(rte_mbuf** pkts, uint16_t n) {
  if (p_.timestamp_offset < 0) return;
  for (uint16_t i = 0; i < n; ++i) {
    if (!(pkts[i]->ol_flags & p_.timestamp_flag)) continue;
    // net_pcap stores the capture time in microseconds.
    const uint64_t ts_ns =
        *RTE_MBUF_DYNFIELD(pkts[i], p_.timestamp_offset, rte_mbuf_timestamp_t*) * 1000;
    if (ts_ns > now_ns_) now_ns_ = ts_ns;
  }
}

void Worker::process_burst(uint16_t in_port, rte_mbuf** pkts, uint16_t n) {
  stage_parse(in_port, pkts, n);
  stage_classify(pkts, n);
  stage_l2(in_port, pkts, n);
  // Services before the flow lookup of everything else: a reply in the same burst as the
  // packet that creates its flow (a replayed capture) must find that flow.
  stage_service(pkts, n);
  stage_lookup(pkts, n);
  stage_local(pkts, n);
  stage_reply(pkts, n);
  stage_route(pkts, n);
  stage_dispatch(pkts, n);
}

// ---- parse -------------------------------------------------------------------------------

void Worker::stage_parse(uint16_t in_port, rte_mbuf** pkts, uint16_t n) {
  const MacAddr& our_mac = p_.ports[in_port].mac;
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 2 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 2], void*));
    rte_mbuf* m = pkts[i];
    const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
    flow_[i] = nullptr;
    forward_[i] = false;
    if (m->data_len >= kEthHdrLen && !(data[0] & 1) &&
        std::memcmp(data, our_mac.b.data(), 6) != 0) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kL2NotForUs;
      continue;
    }
    const uint64_t ip_ck = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
    Drop d = parse_frame(data, m->data_len, m->pkt_len, &meta_[i],
                         ip_ck != RTE_MBUF_F_RX_IP_CKSUM_GOOD);
    if (d == Drop::kNone && ip_ck == RTE_MBUF_F_RX_IP_CKSUM_BAD && meta_[i].l3 == L3::kIpv4) {
      d = Drop::kIpv4BadChecksum;
    }
    if (d != Drop::kNone) {
      next_[i] = kNextDrop;
      drop_[i] = d;
      continue;
    }
    next_[i] = meta_[i].l3 == L3::kArp ? kNextArp : kNextIp;
  }
}

// ---- classify ----------------------------------------------------------------------------

void Worker::stage_classify(rte_mbuf** pkts, uint16_t n) {
  (void)pkts;
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextIp) continue;
    const PacketMeta& m = meta_[i];
    if (m.l3 == L3::kIpv6 && m.l4_proto == kProtoIcmp6 && m.has_l4() &&
        m.icmp_type >= kNdpRouterSolicit && m.icmp_type <= kNdpRedirect) {
      next_[i] = kNextNdp;
    } else if (m.has_l4() && (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp) &&
               snap_->find_service(m.dst, m.dport, m.l4_proto)) {
      next_[i] = kNextService;
    } else {
      next_[i] = kNextLookup;
    }
  }
}

void Worker::stage_lookup(rte_mbuf** pkts, uint16_t n) {
  const uint32_t now_ms = now_ms_of(now_ns_);
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextLookup) continue;
    const PacketMeta& m = meta_[i];
    if (m.has_l4() && (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp)) {
      const Tuple t{m.src, m.dst, m.sport, m.dport, m.l4_proto};
      FlowDir dir;
      uint64_t expired = 0;
      Flow* f = flows_.lookup(t, FlowTable::hash(t), now_ms, &dir, &expired);
      if (expired) counter_add(counters_.flows_expired, expired);
      if (f) {
        if (m.ttl <= 1) {
          next_[i] = kNextDrop;
          drop_[i] = Drop::kTtlExceeded;
        } else if (dir == FlowDir::kReply) {
          flow_[i] = f;
          next_[i] = kNextReply;
        } else {
          // A tracked flow keeps going after its service left the snapshot.
          forward(pkts[i], i, f, f->backend, f->backend_port, f->stat_id);
        }
        continue;
      }
    }
    if (snap_->local_port(m.dst) >= 0 || snap_->is_vip(m.dst)) {
      next_[i] = kNextLocal;
    } else {
      next_[i] = kNextDrop;
      drop_[i] = m.has_l4() && snap_->is_backend(m.src, m.sport, m.l4_proto) ? Drop::kReplyNoFlow
                                                                               : Drop::kNoService;
    }
  }
}

// ---- ARP / NDP ---------------------------------------------------------------------------

void Worker::stage_l2(uint16_t in_port, rte_mbuf** pkts, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] == kNextArp) handle_arp(in_port, pkts[i], i);
    else if (next_[i] == kNextNdp) handle_ndp(in_port, pkts[i], i);
  }
}

void Worker::handle_arp(uint16_t in_port, rte_mbuf* mb, uint16_t i) {
  const PacketMeta& m = meta_[i];
  const PortRuntime& port = p_.ports[in_port];
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  uint8_t* a = data + m.l3_off;
  const bool sender_ok = !m.arp_spa.is_zero() && on_link(in_port, m.arp_spa) &&
                         !m.arp_sha.is_multicast() && !m.arp_sha.is_zero();
  if (m.arp_op == kArpOpReply) {
    if (sender_ok) learn(m.arp_spa, m.arp_sha, in_port, true);
    next_[i] = kNextConsumed;
    return;
  }
  const bool ours = snap_->local_port(m.arp_tpa) == int32_t(in_port) || snap_->is_vip(m.arp_tpa);
  // RFC 826 merge: refresh a sender we already know; learn it when it asks for us.
  if (sender_ok && (ours || neighbors_->find(m.arp_spa))) learn(m.arp_spa, m.arp_sha, in_port, true);
  if (!ours) {
    next_[i] = kNextDrop;
    drop_[i] = Drop::kArpNotForUs;
    return;
  }
  wr16(a + 6, kArpOpReply);
  std::memcpy(a + 18, a + 8, 6);             // target hardware = requester
  std::memcpy(a + 24, a + 14, 4);            // target protocol = requester
  std::memcpy(a + 8, port.mac.b.data(), 6);  // sender hardware = us
  std::memcpy(a + 14, m.arp_tpa.v4_ptr(), 4);
  std::memcpy(data, m.arp_sha.b.data(), 6);
  std::memcpy(data + 6, port.mac.b.data(), 6);
  counter_add(counters_.arp_replies, 1);
  out_[i] = in_port;
  next_[i] = kNextTx;
}

void Worker::handle_ndp(uint16_t in_port, rte_mbuf* mb, uint16_t i) {
  PacketMeta& m = meta_[i];
  const PortRuntime& port = p_.ports[in_port];
  const uint8_t type = m.icmp_type;
  if (type != kNdpNeighborSolicit && type != kNdpNeighborAdvert) {
    next_[i] = kNextDrop;
    drop_[i] = Drop::kNdpIgnored;
    return;
  }
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  uint8_t* ip = data + m.l3_off;
  uint8_t* icmp = data + m.l4_off;
  const uint32_t len = m.l4_len;
  // RFC 4861 §7.1.1 / §7.1.2 validity checks.
  if (m.ttl != kNdpHopLimit || m.icmp_code != 0 || len < kNdpMinLen || m.is_fragment() ||
      m.l4_off + len > mb->data_len || icmp[8] == 0xff /* multicast target */) {
    next_[i] = kNextDrop;
    drop_[i] = Drop::kNdpInvalid;
    return;
  }
  if (csum_fold(csum_partial(icmp, len, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, len))) !=
      0xffff) {
    next_[i] = kNextDrop;
    drop_[i] = Drop::kIcmpBadChecksum;
    return;
  }
  // Link-layer address option: source (1) in NS, target (2) in NA.
  const uint8_t want_opt = type == kNdpNeighborSolicit ? 1 : 2;
  const uint8_t* lla = nullptr;
  for (uint32_t off = kNdpMinLen; off + 2 <= len;) {
    const uint32_t olen = uint32_t(icmp[off + 1]) * 8;
    if (olen == 0 || off + olen > len) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kNdpInvalid;
      return;
    }
    if (icmp[off] == want_opt && olen >= 8) lla = icmp + off + 2;
    off += olen;
  }
  const IpAddr target = IpAddr::v6_bytes(icmp + 8);
  const bool src_unspecified = m.src.is_zero();

  if (type == kNdpNeighborAdvert) {
    if (lla && on_link(in_port, target)) {
      MacAddr mac;
      std::memcpy(mac.b.data(), lla, 6);
      learn(target, mac, in_port, true);
    }
    next_[i] = kNextConsumed;
    return;
  }

  if (lla && !src_unspecified && on_link(in_port, m.src)) {
    MacAddr mac;
    std::memcpy(mac.b.data(), lla, 6);
    learn(m.src, mac, in_port, true);
  }
  const bool ours = snap_->local_port(target) == int32_t(in_port) || snap_->is_vip(target);
  if (!ours) {
    next_[i] = kNextDrop;
    drop_[i] = Drop::kNdpIgnored;
    return;
  }
  // Answer in place: NA (32 bytes with the target link-layer address option).
  constexpr uint32_t kNaLen = kNdpMinLen + 8;
  const uint32_t want = m.l4_off + kNaLen;
  if (mb->pkt_len < want) {
    if (!rte_pktmbuf_append(mb, uint16_t(want - mb->pkt_len))) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kMbufExhausted;
      return;
    }
  } else if (mb->pkt_len > want) {
    rte_pktmbuf_trim(mb, uint16_t(mb->pkt_len - want));
  }
  static constexpr uint8_t kAllNodes[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  uint8_t eth_dst[6];
  if (src_unspecified) {
    // RFC 4861 §7.2.4: answer a DAD probe to all-nodes.
    std::memcpy(ip + 24, kAllNodes, 16);
    static constexpr uint8_t kAllNodesMac[6] = {0x33, 0x33, 0, 0, 0, 1};
    std::memcpy(eth_dst, kAllNodesMac, 6);
  } else {
    std::memcpy(ip + 24, ip + 8, 16);
    std::memcpy(eth_dst, data + 6, 6);
  }
  std::memcpy(ip + 8, target.b, 16);
  wr32(ip, 0x60000000);
  wr16(ip + 4, kNaLen);
  ip[7] = kNdpHopLimit;
  icmp[0] = kNdpNeighborAdvert;
  icmp[1] = 0;
  icmp[2] = icmp[3] = 0;
  icmp[4] = uint8_t((src_unspecified ? 0 : 0x40) | 0x20);  // Solicited, Override
  icmp[5] = icmp[6] = icmp[7] = 0;
  icmp[24] = 2;  // target link-layer address
  icmp[25] = 1;
  std::memcpy(icmp + 26, port.mac.b.data(), 6);
  csum_store(icmp + 2, csum_finish(csum_partial(
                           icmp, kNaLen, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, kNaLen))));
  std::memcpy(data, eth_dst, 6);
  std::memcpy(data + 6, port.mac.b.data(), 6);
  counter_add(counters_.nd_adverts, 1);
  out_[i] = in_port;
  next_[i] = kNextTx;
}

// ---- local (echo) ------------------------------------------------------------------------

void Worker::stage_local(rte_mbuf** pkts, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextLocal) continue;
    PacketMeta& m = meta_[i];
    rte_mbuf* mb = pkts[i];
    next_[i] = kNextDrop;
    if (m.is_fragment()) {
      drop_[i] = Drop::kFragmentUnsupported;
      continue;
    }
    const bool v4 = m.l3 == L3::kIpv4;
    const bool echo = m.has_l4() && m.icmp_code == 0 &&
                      (v4 ? (m.l4_proto == kProtoIcmp && m.icmp_type == kIcmpEchoRequest)
                          : (m.l4_proto == kProtoIcmp6 && m.icmp_type == kIcmp6EchoRequest));
    if (!echo) {
      if (!snap_->is_vip(m.dst)) drop_[i] = Drop::kLocalUnhandled;
      else if (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp) drop_[i] = Drop::kNoService;
      else drop_[i] = Drop::kL4Unsupported;
      continue;
    }
    uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
    uint8_t* ip = data + m.l3_off;
    uint8_t* icmp = data + m.l4_off;
    uint32_t sum = mbuf_sum(mb, m.l4_off, m.l4_len);
    if (!v4) sum = csum_add(sum, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, m.l4_len));
    if (csum_fold(sum) != 0xffff) {
      drop_[i] = Drop::kIcmpBadChecksum;
      continue;
    }
    const uint16_t old_word = ld16(icmp);
    icmp[0] = v4 ? kIcmpEchoReply : kIcmp6EchoReply;
    // The pseudo-header sum is symmetric in source and destination, so swapping them keeps the
    // ICMPv6 checksum valid; only the type change needs an update.
    csum_replace2(icmp + 2, old_word, ld16(icmp));
    if (v4) {
      uint8_t tmp[4];
      std::memcpy(tmp, ip + 12, 4);
      std::memcpy(ip + 12, ip + 16, 4);
      std::memcpy(ip + 16, tmp, 4);
      ip[8] = kLocalTtl;
      csum_store(ip + 10, ipv4_header_csum(ip, uint32_t(ip[0] & 0xf) * 4));
    } else {
      uint8_t tmp[16];
      std::memcpy(tmp, ip + 8, 16);
      std::memcpy(ip + 8, ip + 24, 16);
      std::memcpy(ip + 24, tmp, 16);
      ip[7] = kLocalTtl;
    }
    std::swap(m.src, m.dst);
    m.ttl = kLocalTtl;
    counter_add(counters_.echo_replies, 1);
    next_[i] = kNextRoute;
  }
}

// ---- services (dnat) ---------------------------------------------------------------------

void Worker::stage_service(rte_mbuf** pkts, uint16_t n) {
  const uint32_t now_ms = now_ms_of(now_ns_);
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextService) continue;
    const PacketMeta& m = meta_[i];
    if (m.is_fragment()) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kFragmentUnsupported;
      continue;
    }
    if (m.ttl <= 1) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kTtlExceeded;
      continue;
    }
    const Tuple t{m.src, m.dst, m.sport, m.dport, m.l4_proto};
    const uint32_t h = FlowTable::hash(t);
    FlowDir dir;
    uint64_t expired = 0;
    Flow* f = flows_.lookup(t, h, now_ms, &dir, &expired);
    if (expired) counter_add(counters_.flows_expired, expired);
    if (f) {
      forward(pkts[i], i, f, f->backend, f->backend_port, f->stat_id);
      continue;
    }
    if (draining_.load(std::memory_order_relaxed)) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kDraining;
      continue;
    }
    const SnapService* svc = snap_->find_service(m.dst, m.dport, m.l4_proto);
    const uint32_t bi = svc->table_size
                            ? lb_lookup(&snap_->lb_slots[svc->table_offset], svc->table_size, h)
                            : kNoBackend;
    if (bi == kNoBackend) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kNoBackend;
      continue;
    }
    const SnapBackend& be = snap_->backends[svc->first_backend + bi];
    const uint32_t stat_id = be.stat_id < kMaxBackendStats ? be.stat_id : 0;
    // Table full: the packet still goes to the backend Maglev picks, the one it would have had
    // (stateless forwarding, like Katran).
    f = flows_.insert(t, be.address, be.port_be, stat_id, now_ms);
    if (f) {
      counter_add(backend_counters_[stat_id].flows, 1);
      counter_add(counters_.flows_created, 1);
    } else {
      counter_add(counters_.stateless_packets, 1);
    }
    forward(pkts[i], i, f, be.address, be.port_be, stat_id);
  }
}

void Worker::forward(rte_mbuf* mb, uint16_t i, Flow* f, const IpAddr& backend,
                     uint16_t backend_port, uint32_t stat_id) {
  PacketMeta& m = meta_[i];
  if (f) flows_.touch(f, FlowDir::kOriginal, m.tcp_flags, now_ms_of(now_ns_));
  counter_add(backend_counters_[stat_id].packets, 1);
  counter_add(backend_counters_[stat_id].bytes, mb->pkt_len);
  nat_rewrite<true>(rte_pktmbuf_mtod(mb, uint8_t*), &m, backend, backend_port);
  forward_[i] = true;
  next_[i] = kNextRoute;
}

void Worker::stage_reply(rte_mbuf** pkts, uint16_t n) {
  const uint32_t now_ms = now_ms_of(now_ns_);
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextReply) continue;
    PacketMeta& m = meta_[i];
    Flow* f = flow_[i];
    flows_.touch(f, FlowDir::kReply, m.tcp_flags, now_ms);
    counter_add(backend_counters_[f->stat_id].packets, 1);
    counter_add(backend_counters_[f->stat_id].bytes, pkts[i]->pkt_len);
    nat_rewrite<false>(rte_pktmbuf_mtod(pkts[i], uint8_t*), &m, f->vip, f->vip_port);
    forward_[i] = true;
    next_[i] = kNextRoute;
  }
}

// ---- route + neighbor --------------------------------------------------------------------

void Worker::stage_route(rte_mbuf** pkts, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextRoute) continue;
    PacketMeta& m = meta_[i];
    uint32_t nh_idx = 0;
    const int rc = m.l3 == L3::kIpv4 ? rte_lpm_lookup(snap_->lpm4, m.dst.v4_host(), &nh_idx)
                                     : rte_lpm6_lookup(snap_->lpm6, m.dst.b, &nh_idx);
    if (rc != 0 || nh_idx >= snap_->next_hops.size()) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kNoRoute;
      continue;
    }
    const NextHop& nh = snap_->next_hops[nh_idx];
    if (m.ip_len > p_.ports[nh.port_index].mtu) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kMtuExceeded;
      continue;
    }
    uint8_t* data = rte_pktmbuf_mtod(pkts[i], uint8_t*);
    if (forward_[i]) decrement_ttl(data, &m);
    const IpAddr& nh_ip = nh.on_link ? m.dst : nh.gateway;
    MacAddr mac;
    out_[i] = nh.port_index;
    if (resolve(nh_ip, nh.port_index, &mac)) {
      write_l2(pkts[i], m, nh.port_index, mac);
      next_[i] = kNextTx;
    } else {
      nh_[i] = nh_ip;
      next_[i] = kNextPending;
    }
  }
}

bool Worker::resolve(const IpAddr& nh, uint16_t port_index, MacAddr* mac) {
  if (const StaticNeighbor* s = snap_ ? snap_->find_neighbor(nh) : nullptr) {
    *mac = s->mac;
    return true;
  }
  NeighborCache::Entry* e = neighbors_->find_or_add(nh);
  if (e && e->resolved) {
    *mac = e->mac;
    return true;
  }
  if (e && (e->last_request_ns == 0 ||
            now_ns_ - e->last_request_ns >= PendingQueue::kRequestIntervalNs)) {
    solicit(e, port_index);
  }
  return false;
}

void Worker::solicit(NeighborCache::Entry* e, uint16_t port_index) {
  e->last_request_ns = now_ns_ ? now_ns_ : 1;
  const PortRuntime& port = p_.ports[port_index];
  const IpPrefix* src = source_for(port_index, e->address);
  if (!src) return;  // no address of that family on the port: the packet times out
  counter_add(counters_.generated, 1);
  rte_mbuf* mb = rte_pktmbuf_alloc(p_.pool);
  if (!mb) {
    counter_add(counters_.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  const IpAddr& t = e->address;
  if (t.is_v4()) {
    constexpr uint16_t kLen = 60;  // minimum Ethernet frame without FCS
    uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(mb, kLen));
    if (!d) {
      rte_pktmbuf_free(mb);
      counter_add(counters_.drops[uint32_t(Drop::kMbufExhausted)], 1);
      return;
    }
    std::memset(d, 0, kLen);
    std::memset(d, 0xff, 6);
    std::memcpy(d + 6, port.mac.b.data(), 6);
    wr16(d + 12, kEtherTypeArp);
    uint8_t* a = d + kEthHdrLen;
    wr16(a, 1);
    wr16(a + 2, kEtherTypeIpv4);
    a[4] = 6;
    a[5] = 4;
    wr16(a + 6, kArpOpRequest);
    std::memcpy(a + 8, port.mac.b.data(), 6);
    std::memcpy(a + 14, src->addr.v4_ptr(), 4);
    std::memcpy(a + 24, t.v4_ptr(), 4);
    counter_add(counters_.arp_requests, 1);
  } else {
    constexpr uint32_t kNsLen = kNdpMinLen + 8;
    constexpr uint16_t kLen = kEthHdrLen + kIpv6HdrLen + kNsLen;
    uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(mb, kLen));
    if (!d) {
      rte_pktmbuf_free(mb);
      counter_add(counters_.drops[uint32_t(Drop::kMbufExhausted)], 1);
      return;
    }
    std::memset(d, 0, kLen);
    // RFC 4291 §2.7.1 solicited-node multicast ff02::1:ffXX:XXXX and its MAC 33:33:ff:XX:XX:XX.
    d[0] = 0x33;
    d[1] = 0x33;
    d[2] = 0xff;
    std::memcpy(d + 3, t.b + 13, 3);
    std::memcpy(d + 6, port.mac.b.data(), 6);
    wr16(d + 12, kEtherTypeIpv6);
    uint8_t* ip = d + kEthHdrLen;
    wr32(ip, 0x60000000);
    wr16(ip + 4, kNsLen);
    ip[6] = kProtoIcmp6;
    ip[7] = kNdpHopLimit;
    std::memcpy(ip + 8, src->addr.b, 16);
    ip[24] = 0xff;
    ip[25] = 0x02;
    ip[35] = 0x01;
    ip[36] = 0xff;
    std::memcpy(ip + 37, t.b + 13, 3);
    uint8_t* icmp = ip + kIpv6HdrLen;
    icmp[0] = kNdpNeighborSolicit;
    std::memcpy(icmp + 8, t.b, 16);
    icmp[24] = 1;  // source link-layer address
    icmp[25] = 1;
    std::memcpy(icmp + 26, port.mac.b.data(), 6);
    csum_store(icmp + 2, csum_finish(csum_partial(
                             icmp, kNsLen, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, kNsLen))));
    counter_add(counters_.nd_solicits, 1);
  }
  tx(port_index, mb);
}

void Worker::learn(const IpAddr& a, const MacAddr& mac, uint16_t port_index, bool from_wire) {
  if (!neighbors_->learn(a, mac, port_index)) return;
  counter_add(counters_.neighbors_learned, 1);
  if (from_wire && p_.neighbor_out) {
    NeighborUpdate u{a, mac, port_index};
    // Best effort: other workers learn on their own if the control ring is full.
    rte_ring_enqueue_elem(p_.neighbor_out, &u, sizeof u);
  }
}

void Worker::drain_neighbor_ring() {
  NeighborUpdate u;
  while (rte_ring_dequeue_elem(p_.neighbor_in, &u, sizeof u) == 0) {
    learn(u.address, u.mac, u.port_index, false);
  }
}

void Worker::service_pending() {
  for (uint32_t i = 0; i < pending_->size();) {
    PendingQueue::Item& it = pending_->at(i);
    MacAddr mac;
    if (resolve(it.next_hop, it.port_index, &mac)) {
      uint8_t* d = rte_pktmbuf_mtod(it.m, uint8_t*);
      std::memcpy(d, mac.b.data(), 6);
      std::memcpy(d + 6, p_.ports[it.port_index].mac.b.data(), 6);
      tx(it.port_index, it.m);
      pending_->erase(i);
    } else if (now_ns_ >= it.deadline_ns) {
      drop(it.m, Drop::kNeighborUnresolved);
      pending_->erase(i);
    } else {
      ++i;
    }
  }
}

void Worker::write_l2(rte_mbuf* mb, const PacketMeta& m, uint16_t port_index,
                      const MacAddr& dst) {
  (void)m;
  uint8_t* d = rte_pktmbuf_mtod(mb, uint8_t*);
  std::memcpy(d, dst.b.data(), 6);
  std::memcpy(d + 6, p_.ports[port_index].mac.b.data(), 6);
}

// ---- dispatch ----------------------------------------------------------------------------

void Worker::stage_dispatch(rte_mbuf** pkts, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    switch (next_[i]) {
      case kNextTx:
        tx(out_[i], pkts[i]);
        break;
      case kNextPending:
        if (!pending_->push(pkts[i], nh_[i], out_[i], now_ns_)) {
          drop(pkts[i], Drop::kNeighborQueueFull);
        }
        break;
      case kNextConsumed:
        counter_add(counters_.consumed, 1);
        rte_pktmbuf_free(pkts[i]);
        break;
      case kNextDrop:
        drop(pkts[i], drop_[i]);
        break;
      default:
        MG_CHECK(false && "packet left the pipeline without a verdict");
    }
  }
}

void Worker::tx(uint16_t port_index, rte_mbuf* m) {
  TxBuffer& b = tx_[port_index];
  b.pkts[b.n++] = m;
  if (b.n == sizeof(b.pkts) / sizeof(b.pkts[0])) flush_tx();
}

void Worker::flush_tx() {
  for (uint16_t pi = 0; pi < p_.ports.size(); ++pi) {
    TxBuffer& b = tx_[pi];
    if (b.n == 0) continue;
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < b.n; ++i) bytes += b.pkts[i]->pkt_len;
    const uint16_t sent = rte_eth_tx_burst(p_.ports[pi].port_id, p_.index, b.pkts, b.n);
    for (uint16_t i = sent; i < b.n; ++i) {
      bytes -= b.pkts[i]->pkt_len;
      drop(b.pkts[i], Drop::kTxFull);
    }
    counter_add(counters_.tx_packets, sent);
    counter_add(counters_.tx_bytes, bytes);
    b.n = 0;
  }
}

void Worker::drop(rte_mbuf* m, Drop reason) {
  counter_add(counters_.drops[uint32_t(reason)], 1);
  rte_pktmbuf_free(m);
}

// ---- helpers -----------------------------------------------------------------------------

const IpPrefix* Worker::source_for(uint16_t port_index, const IpAddr& peer) const {
  const IpPrefix* first = nullptr;
  for (const IpPrefix& a : p_.ports[port_index].addresses) {
    if (a.addr.is_v4() != peer.is_v4()) continue;
    if (a.contains(peer)) return &a;
    if (!first) first = &a;
  }
  return first;
}

bool Worker::on_link(uint16_t port_index, const IpAddr& a) const {
  for (const IpPrefix& p : p_.ports[port_index].addresses) {
    if (p.contains(a)) return true;
  }
  return false;
}

int Worker::port_index_of(uint16_t port_id) const { return port_index_by_id_[port_id & 0xff]; }

}  // namespace meshgate::dp
