#include "dataplane/worker/worker.h"

#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
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

#include <algorithm>
#include <new>

#include "dataplane/lb/lb.h"
#include "dataplane/nat/encap.h"
#include "dataplane/nat/icmp_error.h"
#include "dataplane/nat/nat.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"
#include "dataplane/hbone/gateway.h"
#include "dataplane/proxy/proxy.h"

namespace meshgate::dp {
namespace {

constexpr uint8_t kLocalTtl = 64;  // TTL of packets we originate (RFC 1700 default)
constexpr uint8_t kNdpHopLimit = 255;  // RFC 4861 §7.1: NDP must arrive with hop limit 255
constexpr uint32_t kNdpMinLen = 24;    // NS / NA without options
// Replay safety net: stop when the pcap device stops delivering (short records it skipped).
constexpr uint64_t kReplayIdleNs = 2'000'000'000ull;

bool is_echo_request(const PacketMeta& m) {
  return m.has_l4() && m.icmp_code == 0 &&
         ((m.l4_proto == kProtoIcmp && m.icmp_type == kIcmpEchoRequest) ||
          (m.l4_proto == kProtoIcmp6 && m.icmp_type == kIcmp6EchoRequest));
}
bool is_echo_reply(const PacketMeta& m) {
  return m.has_l4() && m.icmp_code == 0 &&
         ((m.l4_proto == kProtoIcmp && m.icmp_type == kIcmpEchoReply) ||
          (m.l4_proto == kProtoIcmp6 && m.icmp_type == kIcmp6EchoReply));
}
// Packets conntrack follows: TCP, UDP and ICMP echo (its identifier as the port).
bool trackable(const PacketMeta& m) {
  return (m.has_l4() && (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp)) ||
         is_echo_request(m) || is_echo_reply(m);
}

// The service a packet addresses: by VIP:port:protocol, or for an echo request the VIP's echo
// service.
const SnapService* service_of(const Snapshot* snap, const PacketMeta& m) {
  if (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp) {
    return snap->find_service(m.dst, m.dport, m.l4_proto);
  }
  return is_echo_request(m) ? snap->echo_service(m.dst) : nullptr;
}

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
  delete hbone_;  // first: its connections live on the proxy's stack
  delete proxy_;  // then: its connections hold mbufs and backend counter slots
  flows_.destroy();
  rte_free(backend_counters_);
  rte_free(neighbors_);
  rte_free(pending_);
  rte_free(frags_);
  rte_free(nh_cache_);
}

// A flow keeps its backend counter slot and fullnat source address id in 18 bits each.
static_assert(kMaxBackendStats <= (1u << 18) && kAddrTableCapacity <= (1u << 18));

bool Worker::init(const WorkerParams& p) {
  p_ = p;
  MG_CHECK(p_.ports.size() <= kMaxPorts);
  MG_CHECK(p_.n_workers >= 1 && p_.n_workers <= kMaxWorkers && p_.index < p_.n_workers);
  backend_counters_ = static_cast<BackendCounters*>(rte_zmalloc_socket(
      "mg_backend_ctr", sizeof(BackendCounters) * kMaxBackendStats, 64, p_.socket));
  void* nmem = rte_zmalloc_socket("mg_neigh", sizeof(NeighborCache), 64, p_.socket);
  void* pmem = rte_zmalloc_socket("mg_pending", sizeof(PendingQueue), 64, p_.socket);
  void* fmem = rte_zmalloc_socket("mg_frags", sizeof(FragTable), 64, p_.socket);
  nh_cache_ = static_cast<NhCacheEntry*>(
      rte_zmalloc_socket("mg_nh_cache", sizeof(NhCacheEntry) * kNhCacheSize, 64, p_.socket));
  if (!backend_counters_ || !nmem || !pmem || !fmem || !nh_cache_) {
    rte_free(nmem);
    rte_free(pmem);
    rte_free(fmem);
    return false;
  }
  neighbors_ = new (nmem) NeighborCache();
  pending_ = new (pmem) PendingQueue();
  frags_ = new (fmem) FragTable();
  if (!flows_.init(p_.max_flows, p_.socket, p_.timeouts, p_.addrs)) return false;
  if (p_.proxy) {
    ProxyDeps d;
    d.index = p_.index;
    d.n_workers = p_.n_workers;
    d.pool = p_.pool;
    d.flows = &flows_;
    d.backend_counters = backend_counters_;
    d.rss = p_.rss;
    d.flow_steered = p_.flow_steered;
    proxy_ = new (std::nothrow) Proxy(*p_.proxy, d, now_ns_);
    if (!proxy_) return false;
    p_.proxy = nullptr;  // the control thread's copy is not needed (nor valid) later
    // A worker that terminates TCP does not pipeline: it gained nothing measurable there (and
    // holds every ACK a poll). The stall once seen with it on was the stack's, not the
    // pipeline's (docs/DATAPLANE.md, "The two-poll pipeline").
    p_.pipeline = false;
    if (p_.hbone) {
      hbone_ = new (std::nothrow) hbone::Gateway(*p_.hbone, *proxy_, p_.index, now_ns_);
      if (!hbone_) return false;
      hbone_port_be_ = htons(hbone_->port());
      proxy_->set_hbone(hbone_);  // VIP connections whose choice is an HBONE endpoint
    }
  }
  p_.hbone = nullptr;
  tsc_hz_ = rte_get_tsc_hz();
  tsc_start_ = rte_rdtsc();
  ns_per_tsc_q32_ = ns_per_tsc_q32(tsc_hz_);
  // Spread the workers' fullnat port searches.
  fullnat_cursor_ = p_.index * 7919u;
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
  if (!p_.replay) now_ns_ = tsc_to_ns(t0 - tsc_start_, ns_per_tsc_q32_);
  load_snapshot();
  uint32_t total = 0;
  if (MG_LIKELY(snap_ != nullptr)) {
    counter_add(counters_.snapshot_version, snap_->version - counters_.snapshot_version);
    if (proxy_) proxy_->begin(snap_, now_ns_, draining_.load(std::memory_order_relaxed));
    if (hbone_) hbone_->begin(snap_, now_ns_, draining_.load(std::memory_order_relaxed));
    for (const auto& port : p_.ports) total += rx_port(port.index);
    if (p_.n_workers > 1) drain_handoff();
    if (pending_->size()) service_pending();
    if (p_.neighbor_in) drain_neighbor_ring();
    if (dump_req_.load(std::memory_order_relaxed)) serve_flow_dump();
    flows_.advance(now_ms_of(now_ns_));
    if (proxy_) {
      proxy_->advance();
      if (hbone_) {
        hbone_->advance();
        hbone_->publish(false);
      }
      send_generated();
      proxy_->publish(false);
    }
    flush_tx();
  }
  sync_table_counters();
  counter_add(counters_.pending_now,
              int64_t(pending_->size() + held_packets_) - int64_t(counters_.pending_now));
  counter_add(counters_.loops, 1);
  if (total) {
    counter_add(counters_.busy_loops, 1);
    counter_add(counters_.busy_cycles, rte_rdtsc() - t0);
  }
  snap_ = nullptr;
  if (p_.qsbr) rte_rcu_qsbr_quiescent(p_.qsbr, p_.index);
  return total;
}

void Worker::load_snapshot() {
  snap_ = p_.snapshot->load();
  if (snap_ && snap_->version != nh_epoch_version_) {
    nh_epoch_version_ = snap_->version;
    next_nh_epoch();
  }
}

void Worker::next_nh_epoch() {
  if (++nh_epoch_ != 0) return;
  // Wrapped (after 2^32 epochs): forget every entry rather than risk an old one matching.
  std::memset(static_cast<void*>(nh_cache_), 0, sizeof(NhCacheEntry) * kNhCacheSize);
  nh_epoch_ = 1;
}

void Worker::sync_table_counters() {
  const FlowTableStats& ts = flows_.stats();
  counter_add(counters_.flows_active, int64_t(flows_.active()) - int64_t(counters_.flows_active));
  counter_add(counters_.flows_established,
              int64_t(flows_.established()) - int64_t(counters_.flows_established));
  counter_add(counters_.flows_expired, ts.expired - counters_.flows_expired);
  counter_add(counters_.flows_evicted, ts.evicted - counters_.flows_evicted);
}

void Worker::finish() {
  release_held();
  flush_tx();
  while (pending_->size()) {
    drop(pending_->at(0).m, Drop::kNeighborUnresolved);
    pending_->erase(0);
  }
  counters_.pending_now = 0;
  if (proxy_) proxy_->publish(true);
  if (hbone_) hbone_->publish(true);
  // Packets other workers handed over after we stopped polling: they were counted out there.
  for (uint32_t w = 0; w < p_.n_workers; ++w) {
    if (!p_.handoff_from[w]) continue;
    void* objs[kBurst];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(p_.handoff_from[w], objs, kBurst, nullptr)) > 0) {
      counter_add(counters_.handoff_in, n);
      for (unsigned i = 0; i < n; ++i) drop(static_cast<rte_mbuf*>(objs[i]), Drop::kHandoffFull);
    }
  }
  sync_table_counters();
}

void Worker::drain_handoff() {
  for (uint32_t w = 0; w < p_.n_workers; ++w) {
    rte_ring* r = p_.handoff_from[w];
    if (!r) continue;
    rte_mbuf* pkts[kBurst];
    const unsigned n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(pkts), kBurst, nullptr);
    if (n == 0) continue;
    counter_add(counters_.handoff_in, n);
    process_burst(kFromHandoff, pkts, uint16_t(n));
  }
}

void Worker::handoff(uint16_t i, int target, rte_mbuf* m) {
  m->hash.usr = visited_[i] | 1u << p_.index;
  out_[i] = uint16_t(target);
  next_[i] = kNextHandoff;
}

// ---- flow dumps --------------------------------------------------------------------------

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
    o.client = f->client();
    o.vip = flows_.vip(*f);
    o.backend = f->backend();
    o.local = f->local_id ? flows_.local(*f) : IpAddr{};
    o.client_port = ntohs(f->client_port);
    o.vip_port = ntohs(f->vip_port);
    o.backend_port = ntohs(f->backend_port);
    o.local_port = ntohs(f->local_port);
    o.proto = f->proto;
    o.state = f->state;
    o.mode = f->mode;
    o.stat_id = f->stat_id;
    o.expires_in_ms = int32_t(f->expire_ms - now_ms);
    o.age_ms = now_ms - flows_.created_ms(*f);
    o.worker = p_.index;
  }
  // Proxy sessions follow the flows: cursor cap + i is session slot i.
  const uint32_t end = cap + (proxy_ ? proxy_->session_slots() : 0);
  for (; r->cursor >= cap && r->cursor < end && budget && r->count < r->max;
       ++r->cursor, --budget) {
    if (proxy_->session_record(r->cursor - cap, &r->records[r->count])) {
      r->records[r->count++].worker = p_.index;
    }
  }
  return r->cursor >= end || r->count >= r->max;
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

void Worker::process_burst(uint16_t in_port, rte_mbuf** pkts, uint16_t n, bool hashed) {
  if (!hashed) {
    fast_hashed_ = 0;
    fast_flows_prefetched_ = false;
    wire_ = &wire_own_;
  }
  if (in_port != kFromHandoff) {
    if (fast_skip_ && !hashed) {
      --fast_skip_;
    } else if (stage_fast(in_port, pkts, n, hashed) == n) {
      fast_backoff_ = 0;
      return;
    } else if (fast_flow_miss_) {
      // Past the first pass: a packet of the burst had no flow.
      fast_skip_ = fast_backoff_;
      fast_backoff_ = uint8_t(std::clamp<uint32_t>(2u * fast_backoff_, 1, kFastBackoffMax));
    }
  }
  stage_parse(in_port, pkts, n);
  stage_classify(pkts, n);
  if (in_port != kFromHandoff) stage_l2(in_port, pkts, n);
  // Flows are looked up and created in burst order: a reply in the same burst as the packet
  // that creates its flow (a replayed capture) finds that flow.
  stage_flow(pkts, n);
  stage_lookup(pkts, n);
  if (proxy_) stage_stack(pkts, n);
  stage_icmp_error(pkts, n);
  stage_local(pkts, n);
  stage_route(pkts, n);
  stage_dispatch(pkts, n);
  if (proxy_) send_generated();
}

// ---- parse -------------------------------------------------------------------------------

void Worker::stage_parse(uint16_t in_port, rte_mbuf** pkts, uint16_t n) {
  const bool handed = in_port == kFromHandoff;
  const MacAddr* our_mac = handed ? nullptr : &p_.ports[in_port].mac;
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 2 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 2], void*));
    rte_mbuf* m = pkts[i];
    flow_[i] = nullptr;
    egress_[i] = Egress{};
    extra_[i].m = nullptr;
    visited_[i] = handed ? m->hash.usr : 0;
    // A NIC that strips 802.1Q tags keeps the tag in the mbuf: put it back in the frame, so
    // that answers written over the request, and forwarded frames, keep their VLAN.
    if (MG_UNLIKELY(m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) && rte_vlan_insert(&pkts[i]) != 0) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kNoHeadroom;
      continue;
    }
    const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
    if (our_mac && m->data_len >= kEthHdrLen && !(data[0] & 1) &&
        std::memcmp(data, our_mac->b.data(), 6) != 0) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kL2NotForUs;
      continue;
    }
    const uint64_t ip_ck = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
    Drop d = parse_frame(data, m->data_len, m->pkt_len, &meta_[i],
                         !handed && ip_ck != RTE_MBUF_F_RX_IP_CKSUM_GOOD);
    if (d == Drop::kNone && !handed && ip_ck == RTE_MBUF_F_RX_IP_CKSUM_BAD &&
        meta_[i].l3 == L3::kIpv4) {
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
    // RFC 1812 §5.3.4, RFC 1122 §3.3.6: unicast IP in a frame to a group MAC is neither
    // forwarded nor answered. (stage_fast takes only frames to the port's own MAC.)
    if (MG_UNLIKELY(m.flags & kPktL2Multicast) && !is_group_address(m.dst, m.l3 == L3::kIpv4)) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kUnicastInL2Broadcast;
      continue;
    }
    if (m.l3 == L3::kIpv6 && m.l4_proto == kProtoIcmp6 && m.has_l4() &&
        m.icmp_type >= kNdpRouterSolicit && m.icmp_type <= kNdpRedirect) {
      next_[i] = kNextNdp;
      continue;
    }
    const bool l4 = trackable(m);
    if (!l4) {
      // ICMP errors and untracked packets never hit the flow fast path: check them here.
      // Tracked ones are checked by stage_flow when they match no flow.
      if (const Drop d = martian(m); MG_UNLIKELY(d != Drop::kNone)) {
        next_[i] = kNextDrop;
        drop_[i] = d;
        continue;
      }
    }
    if ((m.l4_proto == kProtoIcmp || m.l4_proto == kProtoIcmp6) && is_icmp_error(m)) {
      next_[i] = kNextIcmpError;
      continue;
    }
    // Bulk lookup, first phase: hash every packet and prefetch its two buckets (stage_fast
    // hashed its first fast_hashed_ packets, all IPv4 TCP/UDP: the same values, and prefetched
    // their first buckets).
    if (l4 && i >= fast_hashed_) {
      hash_[i] = FlowTable::hash(Tuple{m.src, m.dst, m.sport, m.dport, m.l4_proto});
      bp_[i] = flows_.buckets_of(hash_[i]);
      flows_.prefetch_buckets(bp_[i]);
    } else if (l4) {
      bp_[i] = flows_.buckets_of(hash_[i]);
    }
    next_[i] = l4 ? kNextFlow : kNextLookup;
  }
  if (fast_flows_prefetched_) return;
  // Second phase: the buckets have had the rest of the burst to arrive; prefetch the flows
  // whose signatures match.
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] == kNextFlow) flows_.prefetch_flows(hash_[i], bp_[i]);
  }
}

// ---- ARP / NDP ---------------------------------------------------------------------------

void Worker::stage_l2(uint16_t in_port, rte_mbuf** pkts, uint16_t n) {
  if (!next_mask(n, kNextArp, kNextNdp)) return;  // the common burst has none
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
  // A sender claiming one of our addresses or a subnet broadcast is spoofing or in conflict:
  // neither learned nor answered (Linux validates the sender like an IP source, and is silent).
  if (const AddrClass c = snap_->addr_class(m.arp_spa); MG_UNLIKELY(c != AddrClass::kOther)) {
    next_[i] = kNextDrop;
    drop_[i] = c == AddrClass::kGateway ? Drop::kSourceIsLocal : Drop::kSourceIsBroadcast;
    return;
  }
  const bool sender_ok = !m.arp_spa.is_zero() && on_link(in_port, m.arp_spa) &&
                         !m.arp_sha.is_multicast() && !m.arp_sha.is_zero();
  if (m.arp_op == kArpOpReply) {
    if (sender_ok) learn(m.arp_spa, m.arp_sha, in_port, true);
    next_[i] = kNextConsumed;
    return;
  }
  const bool ours = snap_->local_port(m.arp_tpa) == int32_t(in_port) || snap_->is_vip(m.arp_tpa) ||
                    snap_->is_fullnat_address(m.arp_tpa);
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
  // As for ARP: a node using one of our addresses is spoofing or in conflict; its solicitation
  // is not answered and its advertisement of our address not learned.
  const bool claims_ours = snap_->addr_class(type == kNdpNeighborAdvert ? target : m.src) !=
                           AddrClass::kOther;

  if (type == kNdpNeighborAdvert) {
    if (lla && on_link(in_port, target) && !claims_ours) {
      MacAddr mac;
      std::memcpy(mac.b.data(), lla, 6);
      learn(target, mac, in_port, true);
    }
    next_[i] = kNextConsumed;
    return;
  }

  if (claims_ours) {
    next_[i] = kNextDrop;
    drop_[i] = Drop::kSourceIsLocal;
    return;
  }
  if (lla && !src_unspecified && on_link(in_port, m.src)) {
    MacAddr mac;
    std::memcpy(mac.b.data(), lla, 6);
    learn(m.src, mac, in_port, true);
  }
  const bool ours = snap_->local_port(target) == int32_t(in_port) || snap_->is_vip(target) ||
                    snap_->is_fullnat_address(target);
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

// ---- services ----------------------------------------------------------------------------

void Worker::stage_flow(rte_mbuf** pkts, uint16_t n) {
  const uint32_t now_ms = now_ms_of(now_ns_);
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextFlow) continue;
    const PacketMeta& m = meta_[i];
    rte_mbuf* mb = pkts[i];
    const Tuple t{m.src, m.dst, m.sport, m.dport, m.l4_proto};
    const uint32_t h = hash_[i];
    FlowDir dir;
    Flow* f = flows_.lookup(t, h, bp_[i], now_ms, &dir);
    if (f) {
      // Established traffic: the flow says everything; no service lookup.
      if (m.ttl <= 1) {
        drop_ttl_exceeded(mb, i);
      } else if (snap_->reset_flows_of(f->stat_id)) {
        flows_.remove(f);
        next_[i] = kNextDrop;
        drop_[i] = Drop::kBackendRemoved;
      } else if (dir == FlowDir::kReply) {
        // Translated now, in burst order with the client's packets: the state follows the
        // wire (an ACK right behind its SYN-ACK), and a later packet of this burst may evict
        // the flow to make room.
        reverse(mb, i, f);
        if (m.is_fragment()) {
          frags_->remember(t.src, t.dst, t.proto, m.ip_id, flows_.index_of(f),
                           flows_.created_ms(*f), uint8_t(FlowDir::kReply), now_ms);
        }
      } else {
        // (A tracked flow keeps going after its service left the snapshot.)
        forward_flow(mb, i, f);
        if (m.is_fragment()) {
          // Keyed by the addresses as they arrived (`m` now holds the translated ones).
          frags_->remember(t.src, t.dst, t.proto, m.ip_id, flows_.index_of(f),
                           flows_.created_ms(*f), uint8_t(FlowDir::kOriginal), now_ms);
        }
      }
      continue;
    }
    // No flow: the packet may start one. (Established flows passed this when created.)
    if (const Drop d = martian(m); MG_UNLIKELY(d != Drop::kNone)) {
      next_[i] = kNextDrop;
      drop_[i] = d;
      continue;
    }
    const SnapService* svc = service_of(snap_, m);
    if (!svc) {
      next_[i] = kNextMiss;
      continue;
    }
    if (svc->mode == Mode::kProxy) {
      // Terminated by the proxy's TCP stack: no conntrack entry.
      if (proxy_ && m.l4_proto == kProtoTcp && !m.is_fragment()) {
        next_[i] = kNextStack;
      } else {
        next_[i] = kNextDrop;
        drop_[i] = m.is_fragment() ? Drop::kFragmentUnsupported : Drop::kL4Unsupported;
      }
      continue;
    }
    if (m.ttl <= 1) {
      drop_ttl_exceeded(mb, i);
      continue;
    }
    if (draining_.load(std::memory_order_relaxed)) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kDraining;
      continue;
    }
    const uint32_t bi =
        svc->table_size ? lb_lookup(svc->table, svc->table_size, h) : kNoBackend;
    if (bi == kNoBackend) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kNoBackend;
      continue;
    }
    const SnapBackend& be = snap_->backends[svc->first_backend + bi];
    const bool echo = m.l4_proto == kProtoIcmp || m.l4_proto == kProtoIcmp6;
    FlowTarget to;
    to.backend = be.address;
    // An echo keeps its identifier toward the backend (fullnat picks a new one below).
    to.backend_port = echo ? m.sport : be.port_be;
    to.vip_id = svc->vip_id;
    to.stat_id = stat_slot(be);
    to.mode = svc->mode;
    if (to.mode == Mode::kFullnat) {
      Drop why;
      if (!pick_fullnat(be.address, to.backend_port, m.l4_proto, h, &to, &why)) {
        next_[i] = kNextDrop;
        drop_[i] = why;
        continue;
      }
    }
    f = flows_.insert(t, to, now_ms);
    if (f) {
      counter_add(backend_counters_[to.stat_id].flows, 1);
      counter_add(counters_.flows_created, 1);
      forward_flow(mb, i, f);
    } else if (to.mode == Mode::kFullnat) {
      // Without an entry a fullnat reply could not be translated back.
      next_[i] = kNextDrop;
      drop_[i] = Drop::kFlowTableFull;
      continue;
    } else {
      // Table full: the packet still goes to the backend Maglev picks, the one it would have
      // had (stateless forwarding, like Katran).
      counter_add(counters_.stateless_packets, 1);
      if (is_dsr(to.mode)) {
        egress_[i].gue = to.mode == Mode::kDsrGue;
        egress_[i].gue_port_be = svc->gue_port_be;
      }
      forward(mb, i, to, h);
    }
    if (f && m.is_fragment()) {
      frags_->remember(t.src, t.dst, t.proto, m.ip_id, flows_.index_of(f), flows_.created_ms(*f),
                       uint8_t(FlowDir::kOriginal), now_ms);
    }
  }
}

void Worker::to_route(const rte_mbuf* m, uint16_t i, uint32_t stat_id) {
  counter_add(backend_counters_[stat_id].packets, 1);
  counter_add(backend_counters_[stat_id].bytes, m->pkt_len);
  egress_[i].decrement_ttl = true;
  next_[i] = kNextRoute;
}

void Worker::forward_flow(rte_mbuf* mb, uint16_t i, Flow* f) {
  PacketMeta& m = meta_[i];
  flows_.touch(f, FlowDir::kOriginal, m.tcp_flags, now_ms_of(now_ns_));
  if (MG_LIKELY(f->mode == Mode::kDnat)) {
    // forward() for the commonest case, straight from the flow.
    nat_rewrite<true>(rte_pktmbuf_mtod(mb, uint8_t*), &m, f->backend(), f->backend_port);
    to_route(mb, i, f->stat_id);
    return;
  }
  FlowTarget to;
  to.backend = f->backend();
  to.backend_port = f->backend_port;
  to.stat_id = f->stat_id;
  to.mode = f->mode;
  to.local_id = f->local_id;
  to.local_port = f->local_port;
  uint32_t flow_hash = 0;
  if (is_dsr(f->mode)) {
    const SnapService* svc = service_of(snap_, m);
    egress_[i].gue = f->mode == Mode::kDsrGue;
    // The GUE port of the service as it is now; a service gone from the snapshot keeps the
    // default so its flows still reach their backend.
    egress_[i].gue_port_be = svc ? svc->gue_port_be : uint16_t(htons(6080));
    // Only the tunnel needs the flow hash (outer source port, flow label). A later fragment
    // has no ports to hash: the flow's own tuple gives the same value as its first packet.
    flow_hash = FlowTable::hash(flows_.original_tuple(*f));
  }
  forward(mb, i, to, flow_hash);
}

void Worker::forward(rte_mbuf* mb, uint16_t i, const FlowTarget& to, uint32_t flow_hash) {
  PacketMeta& m = meta_[i];
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  switch (to.mode) {
    case Mode::kFullnat:
      nat_rewrite<false>(data, &m, p_.addrs->at(to.local_id), to.local_port);
      nat_rewrite<true>(data, &m, to.backend, to.backend_port);
      break;
    case Mode::kDsrIpip:
    case Mode::kDsrGue:
      // The packet stays addressed to the VIP; the route stage wraps it toward the backend.
      egress_[i].encap = true;
      egress_[i].tunnel_dst = to.backend;
      egress_[i].flow_hash = flow_hash;
      break;
    default:
      nat_rewrite<true>(data, &m, to.backend, to.backend_port);
      break;
  }
  to_route(mb, i, to.stat_id);
}

void Worker::reverse(rte_mbuf* mb, uint16_t i, Flow* f) {
  PacketMeta& m = meta_[i];
  flows_.touch(f, FlowDir::kReply, m.tcp_flags, now_ms_of(now_ns_));
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  nat_rewrite<false>(data, &m, flows_.vip(*f), f->vip_port);
  if (f->mode == Mode::kFullnat) nat_rewrite<true>(data, &m, f->client(), f->client_port);
  to_route(mb, i, f->stat_id);
}

void Worker::drop_ttl_exceeded(const rte_mbuf* mb, uint16_t i) {
  const PacketMeta& m = meta_[i];
  send_icmp_error(mb, m, i, m.l3 == L3::kIpv4 ? kIcmpTimeExceeded : kIcmp6TimeExceeded, 0, 0);
  next_[i] = kNextDrop;
  drop_[i] = Drop::kTtlExceeded;
}

bool Worker::reverse_stateless(rte_mbuf* mb, uint16_t i) {
  PacketMeta& m = meta_[i];
  // A client is never one of the gateway's own addresses (a reply to a fullnat address
  // without a flow is just that).
  if (m.is_fragment() || (m.l4_proto != kProtoTcp && m.l4_proto != kProtoUdp) ||
      is_local_like(m.dst)) {
    return false;
  }
  uint32_t count = 0;
  const uint32_t* svcs = snap_->services_of_backend(m.src, m.sport, m.l4_proto, &count);
  for (uint32_t k = 0; k < count; ++k) {
    const SnapService& s = snap_->services[svcs[k]];
    if (s.mode != Mode::kDnat || !s.table_size || s.vip.is_v4() != m.dst.is_v4()) continue;
    // The client's packets hashed (client, VIP, ports) to pick their backend: the same pick
    // for the reversed reply says it is this service's connection (a backend serving several
    // VIPs is told apart by it, unless two of them pick it for the same client tuple).
    const uint32_t h = FlowTable::hash(Tuple{m.dst, s.vip, m.dport, s.port_be, m.l4_proto});
    const uint32_t bi = lb_lookup(s.table, s.table_size, h);
    if (bi == kNoBackend) continue;
    const SnapBackend& be = snap_->backends[s.first_backend + bi];
    if (be.port_be != m.sport || !(be.address == m.src)) continue;
    if (m.ttl <= 1) {
      drop_ttl_exceeded(mb, i);
      return true;
    }
    counter_add(counters_.stateless_packets, 1);
    nat_rewrite<false>(rte_pktmbuf_mtod(mb, uint8_t*), &m, s.vip, s.port_be);
    to_route(mb, i, stat_slot(be));
    return true;
  }
  return false;
}

bool Worker::pick_fullnat(const IpAddr& backend, uint16_t backend_port_be, uint8_t proto,
                          uint32_t flow_hash, FlowTarget* to, Drop* why) {
  const std::vector<LocalNat>& pool = backend.is_v4() ? snap_->fullnat_v4 : snap_->fullnat_v6;
  if (pool.empty()) {
    *why = Drop::kFullnatNoAddress;
    return false;
  }
  const LocalNat& local = pool[flow_hash % pool.size()];
  // The reply (backend -> local:port) arrives on the port toward the backend; its RSS decides
  // which queue, i.e. which worker, sees it.
  const int port = egress_port(backend);
  const RssPredictor* rss = port >= 0 && !p_.flow_steered[port] ? p_.rss[port] : nullptr;
  const uint32_t fixed = rss ? rss->fixed_hash(backend, local.address, backend_port_be) : 0;
  const bool v4 = backend.is_v4();
  // Only ports of this worker's residue (port % workers == index): any worker receiving a
  // reply knows its owner from the destination port alone.
  const uint32_t nw = p_.n_workers;
  const uint32_t first = kFullnatFirstPort + (p_.index + nw - kFullnatFirstPort % nw) % nw;
  const uint32_t count = (65535 - first) / nw + 1;
  for (uint32_t tries = 0; tries < kFullnatMaxTries; ++tries) {
    fullnat_cursor_ = (fullnat_cursor_ + 1) % count;
    const uint16_t port_host = uint16_t(first + fullnat_cursor_ * nw);
    if (rss && tries < kFullnatRssTries &&
        rss->queue_of(rss->with_dport(fixed, v4, port_host)) != p_.index) {
      continue;
    }
    const uint16_t port_be = htons(port_host);
    // An echo's identifier is its port in both directions: the backend answers to it.
    const bool echo = proto == kProtoIcmp || proto == kProtoIcmp6;
    const Tuple reply{backend, local.address, echo ? port_be : backend_port_be, port_be, proto};
    if (flows_.reply_in_use(reply, FlowTable::hash(reply))) continue;
    // The proxy's backend connections use the same local addresses.
    if (proxy_ && proto == kProtoTcp &&
        proxy_->tuple_in_use(local.address, port_be, backend, backend_port_be)) {
      continue;
    }
    to->local_id = local.id;
    to->local_port = port_be;
    if (echo) to->backend_port = port_be;
    return true;
  }
  *why = Drop::kFullnatNoPort;
  return false;
}

// ---- everything that is not a service ----------------------------------------------------

int Worker::handoff_target(const IpAddr& src, uint16_t sport_be, const IpAddr& dst,
                           uint16_t dport_be, uint8_t proto, uint32_t visited) const {
  if (p_.n_workers == 1) return -1;
  visited |= 1u << p_.index;
  if (snap_->is_fullnat_address(dst)) {
    // Fullnat source ports encode their owner.
    const uint32_t owner = ntohs(dport_be) % p_.n_workers;
    return visited >> owner & 1 ? -1 : int(owner);
  }
  uint32_t count = 0;
  const uint32_t* svcs = snap_->services_of_backend(src, sport_be, proto, &count);
  // Echo pseudo-flows have no backend port to look up: when some VIP forwards echoes, an
  // unknown echo reply goes round the workers.
  const bool echo = (proto == kProtoIcmp || proto == kProtoIcmp6) && !snap_->echo_services.empty();
  if (!svcs && !echo) return -1;
  // The client's packets reached the worker RSS picked for (client -> VIP): predict it.
  const int port = egress_port(dst);
  const RssPredictor* rss = port >= 0 ? p_.rss[port] : nullptr;
  for (uint32_t k = 0; rss && k < count && k < 4; ++k) {
    const SnapService& s = snap_->services[svcs[k]];
    const uint32_t q = rss->queue(dst, s.vip, dport_be, s.port_be);
    if (q < p_.n_workers && !(visited >> q & 1)) return int(q);
  }
  // Otherwise every worker in turn (bounded by the visited mask).
  for (uint32_t w = 0; w < p_.n_workers; ++w) {
    if (!(visited >> w & 1)) return int(w);
  }
  return -1;
}

Drop Worker::follow_fragment(rte_mbuf* mb, uint16_t i) {
  PacketMeta& m = meta_[i];
  const FragTable::Entry* e = frags_->find(m.src, m.dst, m.l4_proto, m.ip_id, now_ms_of(now_ns_));
  if (!e) return Drop::kFragmentNoFirst;
  Flow* f = flows_.mutable_at(e->flow_idx);
  if (!f || flows_.created_ms(*f) != e->flow_created) return Drop::kFragmentNoFirst;
  if (m.ttl <= 1) return Drop::kTtlExceeded;
  counter_add(counters_.fragments_followed, 1);
  if (FlowDir(e->dir) == FlowDir::kReply) {
    reverse(mb, i, f);
  } else {
    forward_flow(mb, i, f);
  }
  return Drop::kNone;
}

void Worker::stage_lookup(rte_mbuf** pkts, uint16_t n) {
  if (!next_mask(n, kNextLookup, kNextMiss)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextLookup && next_[i] != kNextMiss) continue;
    const PacketMeta& m = meta_[i];
    if (next_[i] == kNextLookup && m.is_fragment() && !m.has_l4()) {
      const Drop d = follow_fragment(pkts[i], i);
      if (d != Drop::kNone) {
        next_[i] = kNextDrop;
        // To the gateway itself fragments are not reassembled; elsewhere the datagram's first
        // fragment (with the ports) is missing.
        const bool own = snap_->local_port(m.dst) >= 0;
        drop_[i] = d == Drop::kFragmentNoFirst && own ? Drop::kFragmentUnsupported : d;
      }
      continue;
    }
    if (next_[i] == kNextMiss && hbone_ && m.l4_proto == kProtoTcp &&
        m.dport == hbone_port_be_ && snap_->local_port(m.dst) >= 0 && !m.is_fragment()) {
      // HBONE to a local address: the stack's listener. The client's packets all reach the
      // worker RSS picked for its connection.
      next_[i] = kNextStack;
      continue;
    }
    if (next_[i] == kNextMiss) {
      // No flow here: another worker's (replies hash independently of their flow's first
      // packet), or none. Echo requests never belong to another worker's flow: they start
      // flows or get answered.
      const int target = is_echo_request(m) ? -1
                                            : handoff_target(m.src, m.sport, m.dst, m.dport,
                                                             m.l4_proto, visited_[i]);
      if (target >= 0) {
        handoff(i, target, pkts[i]);
        continue;
      }
      if (proxy_ && m.l4_proto == kProtoTcp && snap_->is_fullnat_address(m.dst) &&
          !m.is_fragment()) {
        next_[i] = kNextStack;  // the backend side of a proxied connection (or a stray: RST)
        continue;
      }
      if (!is_echo_request(m) &&
          (snap_->is_fullnat_address(m.dst) || snap_->is_backend(m.src, m.sport, m.l4_proto))) {
        if (!reverse_stateless(pkts[i], i)) {
          next_[i] = kNextDrop;
          drop_[i] = Drop::kReplyNoFlow;
        }
        continue;
      }
    }
    if (is_local_like(m.dst)) {
      next_[i] = kNextLocal;
    } else {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kNoService;
    }
  }
}

// ---- ICMP errors -------------------------------------------------------------------------

bool Worker::translate_icmp_error(rte_mbuf* mb, PacketMeta& m, int* target, uint32_t visited) {
  *target = -1;
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  IcmpQuote q;
  if (mb->nb_segs != 1 || !parse_icmp_quote(data, mb->data_len, m, &q)) return false;
  // The quoted packet went the other way: its reverse is a flow tuple we hold.
  const Tuple key{q.dst, q.src, q.dport, q.sport, q.proto};
  FlowDir dir;
  Flow* f = flows_.lookup(key, FlowTable::hash(key), now_ms_of(now_ns_), &dir);
  if (!f || is_dsr(f->mode)) {
    if (!f) *target = handoff_target(key.src, key.sport, key.dst, key.dport, key.proto, visited);
    return false;
  }
  uint8_t* ip = data + m.l3_off;
  uint8_t* outer_src = ip + (m.l3 == L3::kIpv4 ? 12 : 8);
  uint8_t* outer_dst = ip + (m.l3 == L3::kIpv4 ? 16 : 24);
  const uint32_t alen = m.l3 == L3::kIpv4 ? 4 : 16;
  auto put = [&](uint8_t* field, const IpAddr& a) {
    std::memcpy(field, m.l3 == L3::kIpv4 ? a.v4_ptr() : a.b, alen);
  };
  const IpAddr vip = flows_.vip(*f);
  const IpAddr client = f->client();
  const IpAddr backend = f->backend();
  if (dir == FlowDir::kReply) {
    // About a packet we sent toward the backend; the error travels to the client.
    rewrite_quote(data, q, false, vip, f->vip_port);
    if (f->mode == Mode::kFullnat) {
      rewrite_quote(data, q, true, client, f->client_port);
      put(outer_dst, client);
      m.dst = client;
    }
    if (m.src == backend) {
      put(outer_src, vip);
      m.src = vip;
    }
  } else {
    // About a reply we sent toward the client; the error travels to the backend.
    rewrite_quote(data, q, true, backend, f->backend_port);
    put(outer_dst, backend);
    m.dst = backend;
    if (f->mode == Mode::kFullnat) {
      rewrite_quote(data, q, false, flows_.local(*f), f->local_port);
      put(outer_src, flows_.local(*f));
      m.src = flows_.local(*f);
    }
  }
  finish_icmp_error(data, m);
  counter_add(counters_.icmp_errors_translated, 1);
  return true;
}

void Worker::stage_icmp_error(rte_mbuf** pkts, uint16_t n) {
  if (!next_mask(n, kNextIcmpError, kNextIcmpError)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextIcmpError) continue;
    PacketMeta& m = meta_[i];
    int target;
    if (translate_icmp_error(pkts[i], m, &target, visited_[i])) {
      if (m.ttl <= 1) {
        next_[i] = kNextDrop;
        drop_[i] = Drop::kTtlExceeded;  // RFC 1812 §4.3.2.7: no error about an error
        continue;
      }
      egress_[i].decrement_ttl = true;
      next_[i] = kNextRoute;
    } else if (target >= 0) {
      handoff(i, target, pkts[i]);
    } else if (proxy_ && proxy_->icmp_error(rte_pktmbuf_mtod(pkts[i], const uint8_t*),
                                            pkts[i]->data_len, m)) {
      next_[i] = kNextConsumed;  // about a segment of the proxy's TCP stack
    } else if (is_local_like(m.dst) && !snap_->is_vip(m.dst) &&
               !snap_->is_fullnat_address(m.dst)) {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kLocalUnhandled;  // errors about the gateway's own packets
    } else {
      next_[i] = kNextDrop;
      drop_[i] = Drop::kIcmpErrorNoFlow;
    }
  }
}

void Worker::send_icmp_error(const rte_mbuf* orig, const PacketMeta& om, uint16_t i,
                             uint8_t type, uint8_t code, uint32_t mtu) {
  // RFC 1812 §4.3.2.7: never about an ICMP error, a non-first fragment, or a multicast source.
  if (om.l4_proto == (om.l3 == L3::kIpv4 ? kProtoIcmp : kProtoIcmp6) && is_icmp_error(om)) return;
  if (om.is_fragment() && !om.has_l4()) return;
  if (!icmp_token()) {
    counter_add(counters_.icmp_rate_limited, 1);
    return;
  }
  const int port = egress_port(om.src);
  const IpPrefix* from = port >= 0 ? source_for(uint16_t(port), om.src) : nullptr;
  if (!from) return;
  rte_mbuf* mb = rte_pktmbuf_alloc(p_.pool);
  counter_add(counters_.generated, 1);
  if (!mb) {
    counter_add(counters_.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  const bool v4 = om.l3 == L3::kIpv4;
  uint8_t* out = rte_pktmbuf_mtod(mb, uint8_t*);
  const uint8_t* ip = rte_pktmbuf_mtod_offset(orig, const uint8_t*, om.l3_off);
  const uint32_t ip_len = std::min<uint32_t>(om.ip_len, orig->data_len - om.l3_off);
  // An answer leaves on the VLAN it was asked on: the error carries the packet's tag.
  const bool tagged = om.flags & kPktVlan;
  const uint32_t l2_len = tagged ? kEthHdrLen + kVlanHdrLen : kEthHdrLen;
  const uint32_t len = build_icmp_error(out, rte_pktmbuf_tailroom(mb), l2_len, ip, ip_len, v4,
                                        from->addr, type, code, mtu);
  if (len == 0) {
    rte_pktmbuf_free(mb);
    counter_add(counters_.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  rte_pktmbuf_append(mb, uint16_t(len));
  if (tagged) {
    wr16(out + 12, kEtherTypeVlan);
    wr16(out + 14, om.vlan_tci);
  }
  wr16(out + l2_len - 2, v4 ? kEtherTypeIpv4 : kEtherTypeIpv6);
  PacketMeta m;
  if (parse_packet(out, len, &m, false) != Drop::kNone) {
    rte_pktmbuf_free(mb);
    counter_add(counters_.drops[uint32_t(Drop::kMbufExhausted)], 1);
    return;
  }
  // An error about a packet we translated quotes the translated packet: translate it back,
  // as if it came from the path beyond us. (Errors about untranslated packets match no flow.)
  int unused;
  translate_icmp_error(mb, m, &unused, ~0u);
  Drop why = Drop::kNone;
  counter_add(counters_.icmp_errors_sent, 1);
  Extra& x = extra_[i];
  x.next = route_one(mb, m, Egress{}, i, &x.port, &x.nh, &why);
  if (x.next == kNextDrop) {
    drop(mb, why);
    return;
  }
  x.m = mb;
}

bool Worker::icmp_token() {
  const uint64_t dt = now_ns_ - icmp_last_ns_;
  icmp_last_ns_ = now_ns_;
  icmp_tokens_ = std::min<double>(kIcmpErrorBurst,
                                  icmp_tokens_ + double(dt) * kIcmpErrorsPerSecond / 1e9);
  if (icmp_tokens_ < 1) return false;
  icmp_tokens_ -= 1;
  return true;
}

// ---- local (echo) ------------------------------------------------------------------------

void Worker::stage_local(rte_mbuf** pkts, uint16_t n) {
  if (!next_mask(n, kNextLocal, kNextLocal)) return;  // the common burst has none
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
      const bool vip = snap_->is_vip(m.dst) || snap_->is_fullnat_address(m.dst);
      if (!vip) drop_[i] = Drop::kLocalUnhandled;
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

// ---- route + neighbor --------------------------------------------------------------------

int Worker::egress_port(const IpAddr& a) const {
  uint32_t nh_idx = 0;
  const int rc = a.is_v4() ? rte_lpm_lookup(snap_->lpm4, a.v4_host(), &nh_idx)
                           : rte_lpm6_lookup(snap_->lpm6, a.b, &nh_idx);
  if (rc != 0 || nh_idx >= snap_->next_hops.size()) return -1;
  return snap_->next_hops[nh_idx].port_index;
}

Worker::Next Worker::route_one(rte_mbuf* mb, PacketMeta& m, const Egress& eg, uint16_t i,
                               uint16_t* out_port, IpAddr* nh_out, Drop* why) {
  const IpAddr& dst = eg.encap ? eg.tunnel_dst : m.dst;
  // Most packets go to a few backends and routers: a small cache of next hops saves the LPM
  // lookup and the neighbor hashing per packet.
  NhCacheEntry& ce = nh_cache_[nh_slot(dst)];
  const bool cached = ce.epoch == nh_epoch_ && ce.dst == dst;
  uint16_t port_index;
  const NextHop* nh = nullptr;
  if (cached) {
    port_index = ce.port;
  } else {
    uint32_t nh_idx = 0;
    const int rc = dst.is_v4() ? rte_lpm_lookup(snap_->lpm4, dst.v4_host(), &nh_idx)
                               : rte_lpm6_lookup(snap_->lpm6, dst.b, &nh_idx);
    if (rc != 0 || nh_idx >= snap_->next_hops.size()) {
      *why = Drop::kNoRoute;
      return kNextDrop;
    }
    nh = &snap_->next_hops[nh_idx];
    port_index = nh->port_index;
  }
  const bool v4 = m.l3 == L3::kIpv4;
  const uint32_t overhead = eg.encap ? encap_overhead(v4, eg.gue) : 0;
  const uint32_t mtu = p_.ports[port_index].mtu;
  if (m.ip_len + overhead > mtu) {
    // RFC 1191 / RFC 8201: tell the sender the size that fits, unless it allowed fragmenting
    // (IPv4 without DF), which the gateway does not do.
    uint8_t* ip = rte_pktmbuf_mtod_offset(mb, uint8_t*, m.l3_off);
    const bool df = !v4 || (rd16(ip + 6) & 0x4000);
    // Not for the errors we make ourselves (they fit any IP MTU: 576 / 1280 bytes).
    if (df && mtu > overhead && !extra_[i].m) {
      send_icmp_error(mb, m, i, v4 ? kIcmpDestUnreach : kIcmp6PacketTooBig, v4 ? 4 : 0,
                      mtu - overhead);
    }
    *why = Drop::kMtuExceeded;
    return kNextDrop;
  }
  uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
  if (eg.decrement_ttl) decrement_ttl(data, &m);
  if (eg.encap) {
    // The outer source is the gateway's address on the port toward the backend.
    const IpPrefix* from = source_for(port_index, eg.tunnel_dst);
    if (!from) {
      *why = Drop::kNoRoute;
      return kNextDrop;
    }
    const IpAddr src = from->addr;
    const uint32_t l2 = m.l3_off;
    uint8_t* front = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(mb, uint16_t(overhead)));
    if (!front) {
      *why = Drop::kNoHeadroom;
      return kNextDrop;
    }
    std::memmove(front, front + overhead, l2);
    write_encap(front + l2, front + l2 + overhead, m.ip_len, v4, eg.gue, src, eg.tunnel_dst,
                eg.gue_port_be, eg.flow_hash);
    m.ip_len = uint16_t(m.ip_len + overhead);
    m.dst = eg.tunnel_dst;
    m.src = src;
    data = front;
  }
  *out_port = port_index;
  if (cached) {
    std::memcpy(data, ce.macs, 12);
    return kNextTx;
  }
  const IpAddr& nh_ip = nh->on_link ? dst : nh->gateway;
  MacAddr mac;
  if (resolve(nh_ip, port_index, &mac)) {
    ce.dst = dst;
    ce.epoch = nh_epoch_;
    ce.tag4 = 0;
    if (dst.is_v4()) {
      uint32_t wire;
      std::memcpy(&wire, dst.v4_ptr(), 4);
      ce.tag4 = uint64_t(nh_epoch_) << 32 | wire;
    }
    ce.port = port_index;
    ce.mtu = p_.ports[port_index].mtu;
    std::memcpy(ce.macs, mac.b.data(), 6);
    std::memcpy(ce.macs + 6, p_.ports[port_index].mac.b.data(), 6);
    std::memcpy(data, ce.macs, 12);
    return kNextTx;
  }
  *nh_out = nh_ip;
  return kNextPending;
}

void Worker::stage_route(rte_mbuf** pkts, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] != kNextRoute) continue;
    Drop why = Drop::kNone;
    next_[i] = route_one(pkts[i], meta_[i], egress_[i], i, &out_[i], &nh_[i], &why);
    if (next_[i] == kNextDrop) drop_[i] = why;
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
  next_nh_epoch();  // cached next hops may name the old MAC
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

// ---- proxy -------------------------------------------------------------------------------

void Worker::stage_stack(rte_mbuf** pkts, uint16_t n) {
  if (!next_mask(n, kNextStack, kNextStack)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (next_[i] == kNextStack) proxy_->input(pkts[i], meta_[i]);
  }
}

void Worker::send_generated() {
  // Between bursts: the per-burst scratch is free for the stack's frames.
  rte_mbuf* pkts[kBurst];
  while (proxy_->has_output()) {
    const uint16_t n = proxy_->take_output(pkts, kBurst);
    counter_add(counters_.generated, n);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* mb = pkts[i];
      flow_[i] = nullptr;
      egress_[i] = Egress{};
      extra_[i].m = nullptr;
      visited_[i] = 0;
      const bool v6 = rte_pktmbuf_mtod(mb, const uint8_t*)[0] >> 4 == 6;
      auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(mb, kEthHdrLen));
      if (!eth) {
        next_[i] = kNextDrop;
        drop_[i] = Drop::kNoHeadroom;
        continue;
      }
      std::memset(eth, 0, 12);  // the route stage writes the addresses
      wr16(eth + 12, v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
      // Our own frame: parsed for the route stage's view of it (addresses, length, family).
      const Drop d = parse_frame(eth, mb->data_len, mb->pkt_len, &meta_[i], false);
      next_[i] = d == Drop::kNone ? kNextRoute : kNextDrop;
      drop_[i] = d;
    }
    stage_route(pkts, n);
    stage_dispatch(pkts, n);
  }
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
      case kNextHandoff:
        // SPSC: only this worker enqueues to this ring. Full: counted drop, never a wait.
        if (rte_ring_enqueue(p_.handoff_to[out_[i]], pkts[i]) == 0) {
          counter_add(counters_.handoff_out, 1);
        } else {
          drop(pkts[i], Drop::kHandoffFull);
        }
        break;
      case kNextConsumed:
        counter_add(counters_.consumed, 1);
        rte_pktmbuf_free(pkts[i]);
        break;
      case kNextStack:
        counter_add(counters_.consumed, 1);  // the stack took the mbuf in stage_stack()
        break;
      case kNextDrop:
        drop(pkts[i], drop_[i]);
        break;
      default:
        MG_CHECK(false && "packet left the pipeline without a verdict");
    }
    Extra& x = extra_[i];
    if (x.m) {
      if (x.next == kNextTx) tx(x.port, x.m);
      else if (!pending_->push(x.m, x.nh, x.port, now_ns_)) drop(x.m, Drop::kNeighborQueueFull);
      x.m = nullptr;
    }
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

void Worker::tx(uint16_t port_index, rte_mbuf* m) { tx(port_index, m, m->pkt_len); }

void Worker::tx(uint16_t port_index, rte_mbuf* m, uint32_t len) {
  TxBuffer& b = tx_[port_index];
  b.pkts[b.n++] = m;
  b.bytes += len;
  if (b.n == sizeof(b.pkts) / sizeof(b.pkts[0])) flush_tx();
}

void Worker::flush_tx() {
  for (uint16_t pi = 0; pi < p_.ports.size(); ++pi) {
    TxBuffer& b = tx_[pi];
    if (b.n == 0) continue;
    uint64_t bytes = b.bytes;
    const uint16_t sent = rte_eth_tx_burst(p_.ports[pi].port_id, p_.index, b.pkts, b.n);
    for (uint16_t i = sent; i < b.n; ++i) {
      bytes -= b.pkts[i]->pkt_len;
      drop(b.pkts[i], Drop::kTxFull);
    }
    counter_add(counters_.tx_packets, sent);
    counter_add(counters_.tx_bytes, bytes);
    b.n = 0;
    b.bytes = 0;
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

bool Worker::is_local_like(const IpAddr& a) const {
  return snap_->local_port(a) >= 0 || snap_->is_vip(a) || snap_->is_fullnat_address(a);
}

bool Worker::is_group_address(const IpAddr& a, bool v4) const {
  if (!v4) return a.b[0] == 0xff;  // RFC 4291 §2.7
  const uint8_t a0 = a.b[12];
  return (a0 >= 224 && a0 < 240) || a.v4_host() == 0xffffffffu ||
         snap_->addr_class(a) == AddrClass::kSubnetBroadcast;
}

Drop Worker::martian(const PacketMeta& m) const {
  if (m.l3 == L3::kIpv4) {
    // RFC 1812 §5.3.7: never forward to 0/8, 127/8 or class E; 255.255.255.255 and multicast
    // stay on their link (the gateway routes no multicast).
    const uint8_t d0 = m.dst.b[12];
    if ((d0 >= 224 && d0 < 240) || m.dst.v4_host() == 0xffffffffu) {
      return Drop::kDestinationNotUnicast;
    }
    if (d0 == 0 || d0 == 127 || d0 >= 240) return Drop::kMartianDestination;
  } else {
    static constexpr uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (m.dst.b[0] == 0xff) return Drop::kDestinationNotUnicast;
    if (m.dst.is_zero() || std::memcmp(m.dst.b, kLoopback, 16) == 0) {
      return Drop::kMartianDestination;
    }
  }
  // The source must be nobody the gateway is: a packet from a VIP (or a port or fullnat
  // address) to a VIP would be balanced to a backend whose answer leaves as VIP -> VIP.
  switch (snap_->addr_class(m.src)) {
    case AddrClass::kGateway:
      return Drop::kSourceIsLocal;
    case AddrClass::kSubnetBroadcast:
      return Drop::kSourceIsBroadcast;
    case AddrClass::kOther:
      break;
  }
  // RFC 2644: directed broadcasts are not forwarded.
  if (m.l3 == L3::kIpv4 && snap_->addr_class(m.dst) == AddrClass::kSubnetBroadcast) {
    return Drop::kDestinationNotUnicast;
  }
  return Drop::kNone;
}

}  // namespace meshgate::dp
