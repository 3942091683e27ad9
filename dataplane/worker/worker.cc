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

#include "dataplane/hbone/gateway.h"
#include "dataplane/l2/l2_stage.h"
#include "dataplane/lb/service_stage.h"
#include "dataplane/local/local_stage.h"
#include "dataplane/nat/icmp_stage.h"
#include "dataplane/packet/wire.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/route/route.h"
#include "dataplane/stack/stack_host.h"
#include "dataplane/worker/classify.h"

namespace meshgate::dp {
namespace {

// Replay safety net: stop when the pcap device stops delivering (short records it skipped).
constexpr uint64_t kReplayIdleNs = 2'000'000'000ull;

}  // namespace

Worker::~Worker() {
  delete c_.hbone;  // the applications first: their connections live on the stack
  delete c_.proxy;  // (the proxy's sessions hold mbufs and backend counter slots)
  delete c_.stack;  // then the stack: it frees its connections' buffers
  c_.flows.destroy();
  rte_free(c_.backend_counters);
  rte_free(c_.neighbors);
  rte_free(c_.pending);
  rte_free(c_.frags);
  rte_free(c_.nh.entries);
}

// A flow keeps its backend counter slot and fullnat source address id in 18 bits each.
static_assert(kMaxBackendStats <= (1u << 18) && kAddrTableCapacity <= (1u << 18));

bool Worker::init(const WorkerParams& p) {
  c_.p = p;
  MG_CHECK(c_.p.ports.size() <= kMaxPorts);
  MG_CHECK(c_.p.n_workers >= 1 && c_.p.n_workers <= kMaxWorkers && c_.p.index < c_.p.n_workers);
  c_.backend_counters = static_cast<BackendCounters*>(rte_zmalloc_socket(
      "mg_backend_ctr", sizeof(BackendCounters) * kMaxBackendStats, 64, c_.p.socket));
  void* nmem = rte_zmalloc_socket("mg_neigh", sizeof(NeighborCache), 64, c_.p.socket);
  void* pmem = rte_zmalloc_socket("mg_pending", sizeof(PendingQueue), 64, c_.p.socket);
  void* fmem = rte_zmalloc_socket("mg_frags", sizeof(FragTable), 64, c_.p.socket);
  c_.nh.entries = static_cast<NhCacheEntry*>(
      rte_zmalloc_socket("mg_nh_cache", sizeof(NhCacheEntry) * NhCache::kSize, 64, c_.p.socket));
  if (!c_.backend_counters || !nmem || !pmem || !fmem || !c_.nh.entries) {
    rte_free(nmem);
    rte_free(pmem);
    rte_free(fmem);
    return false;
  }
  c_.neighbors = new (nmem) NeighborCache();
  c_.pending = new (pmem) PendingQueue();
  c_.frags = new (fmem) FragTable();
  if (!c_.flows.init(c_.p.max_flows, c_.p.socket, c_.p.timeouts, c_.p.addrs)) return false;
  FullnatSourceDeps fd;
  fd.index = c_.p.index;
  fd.n_workers = c_.p.n_workers;
  fd.flows = &c_.flows;
  fd.rss = c_.p.rss;
  fd.flow_steered = c_.p.flow_steered;
  c_.fullnat.init(fd);
  c_.access_log.init(c_.p.access_log, c_.p.index, c_.p.access_log_flows);
  if (c_.access_log.flows()) c_.flows.set_end_hook(&Worker::on_flow_end, this);
  if (c_.p.proxy) {
    c_.stack = new (std::nothrow) StackHost(c_.p.proxy->tcp, c_.fullnat, c_.p.pool, c_.now_ns);
    if (!c_.stack) return false;
    ProxyDeps d;
    d.host = c_.stack;
    d.backend_counters = c_.backend_counters;
    d.worker = c_.p.index;
    d.access_log = &c_.access_log;
    c_.proxy = new (std::nothrow) Proxy(*c_.p.proxy, d, c_.now_ns);
    if (!c_.proxy || !c_.proxy->setup_ok()) return false;
    c_.p.proxy = nullptr;  // the control thread's copy is not needed (nor valid) later
    // A worker that terminates TCP does not pipeline: it gained nothing measurable there (and
    // holds every ACK a poll). The stall once seen with it on was the stack's, not the
    // pipeline's (docs/DATAPLANE.md, "The two-poll pipeline").
    c_.p.pipeline = false;
    if (c_.p.hbone) {
      c_.hbone = new (std::nothrow) hbone::Gateway(*c_.p.hbone, *c_.stack, c_.p.index, c_.now_ns);
      if (!c_.hbone) return false;
      c_.hbone->set_access_log(&c_.access_log);
      c_.hbone_port_be = htons(c_.hbone->port());
      // VIP connections whose choice is an HBONE endpoint go to the originator.
      c_.proxy->set_originator(&hbone::Gateway::originate_fn, c_.hbone);
    }
  }
  c_.p.hbone = nullptr;
  tsc_hz_ = rte_get_tsc_hz();
  tsc_start_ = rte_rdtsc();
  ns_per_tsc_q32_ = ns_per_tsc_q32(tsc_hz_);
  return true;
}

int Worker::run() {
  if (c_.p.qsbr) {
    rte_rcu_qsbr_thread_register(c_.p.qsbr, c_.p.index);
    rte_rcu_qsbr_thread_online(c_.p.qsbr, c_.p.index);
  }
  uint64_t last_rx_tsc = rte_rdtsc();
  run_start_tsc_.store(last_rx_tsc, std::memory_order_relaxed);
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint32_t got = poll_once();
    if (!c_.p.replay) continue;
    if (c_.counters.rx_packets >= c_.p.replay_packets) break;
    const uint64_t t = rte_rdtsc();
    if (got) {
      last_rx_tsc = t;
    } else if ((t - last_rx_tsc) * 1'000'000'000ull / tsc_hz_ > kReplayIdleNs) {
      break;
    }
  }
  run_end_tsc_.store(rte_rdtsc(), std::memory_order_relaxed);
  finish();
  if (c_.p.qsbr) {
    rte_rcu_qsbr_thread_offline(c_.p.qsbr, c_.p.index);
    rte_rcu_qsbr_thread_unregister(c_.p.qsbr, c_.p.index);
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
  if (!c_.p.replay) c_.now_ns = tsc_to_ns(t0 - tsc_start_, ns_per_tsc_q32_);
  load_snapshot();
  c_.draining = draining_.load(std::memory_order_relaxed);
  uint32_t total = 0;
  if (MG_LIKELY(c_.snap != nullptr)) {
    counter_add(c_.counters.snapshot_version, c_.snap->version - c_.counters.snapshot_version);
    if (c_.stack) c_.stack->begin(c_.snap, c_.now_ns);
    if (c_.proxy) c_.proxy->begin(c_.snap, c_.now_ns, draining_.load(std::memory_order_relaxed));
    if (c_.hbone) c_.hbone->begin(c_.snap, c_.now_ns, draining_.load(std::memory_order_relaxed));
    for (const auto& port : c_.p.ports) total += rx_port(port.index);
    if (c_.p.n_workers > 1) drain_handoff();
    if (c_.p.index == 0 && c_.p.host_out) drain_host();
    if (c_.pending->size()) service_pending(c_);
    if (c_.p.neighbor_in) drain_neighbor_ring(c_);
    if (dump_req_.load(std::memory_order_relaxed)) serve_flow_dump();
    c_.flows.advance(c_.now_ms());
    if (c_.proxy) {
      c_.stack->advance();
      c_.proxy->advance();
      if (c_.hbone) {
        c_.hbone->advance();
        c_.hbone->publish(false);
      }
      send_generated();
      c_.proxy->publish(false);
    }
    c_.flush_tx();
  }
  sync_table_counters();
  counter_add(c_.counters.pending_now,
              int64_t(c_.pending->size() + held_packets_) - int64_t(c_.counters.pending_now));
  counter_add(c_.counters.loops, 1);
  if (total) {
    counter_add(c_.counters.busy_loops, 1);
    counter_add(c_.counters.busy_cycles, rte_rdtsc() - t0);
  }
  c_.snap = nullptr;
  if (c_.p.qsbr) rte_rcu_qsbr_quiescent(c_.p.qsbr, c_.p.index);
  return total;
}

void Worker::load_snapshot() {
  c_.snap = c_.p.snapshot->load();
  if (c_.snap && c_.snap->version != c_.nh.epoch_version) {
    c_.nh.epoch_version = c_.snap->version;
    c_.nh.next_epoch();
    if (c_.snap->settings) apply_settings(*c_.snap->settings);
  }
}

void Worker::apply_settings(const WorkerSettings& s) {
  c_.flows.set_timeouts(s.conntrack);
  if (c_.proxy) c_.proxy->set_idle_timeout_ms(s.proxy_idle_timeout_ms);
  if (c_.stack) c_.stack->stack().set_time_wait_ms(s.tcp_time_wait_ms);
}

void Worker::sync_table_counters() {
  const FlowTableStats& ts = c_.flows.stats();
  counter_add(c_.counters.flows_active,
              int64_t(c_.flows.active()) - int64_t(c_.counters.flows_active));
  counter_add(c_.counters.flows_established,
              int64_t(c_.flows.established()) - int64_t(c_.counters.flows_established));
  counter_add(c_.counters.flows_closing,
              int64_t(c_.flows.closing()) - int64_t(c_.counters.flows_closing));
  counter_add(c_.counters.flows_expired, ts.expired - c_.counters.flows_expired);
  counter_add(c_.counters.flows_evicted, ts.evicted - c_.counters.flows_evicted);
}

void Worker::finish() {
  release_held();
  c_.flush_tx();
  while (c_.pending->size()) {
    c_.drop(c_.pending->at(0).m, Drop::kNeighborUnresolved);
    c_.pending->erase(0);
  }
  c_.counters.pending_now = 0;
  if (c_.proxy) c_.proxy->publish(true);
  if (c_.hbone) c_.hbone->publish(true);
  sync_table_counters();
}

void Worker::drop_late_handoffs() {
  // They were counted out by the worker that handed them over.
  for (uint32_t w = 0; w < c_.p.n_workers; ++w) {
    if (!c_.p.handoff_from[w]) continue;
    void* objs[kBurst];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(c_.p.handoff_from[w], objs, kBurst, nullptr)) > 0) {
      counter_add(c_.counters.handoff_in, n);
      for (unsigned i = 0; i < n; ++i) c_.drop(static_cast<rte_mbuf*>(objs[i]), Drop::kHandoffFull);
    }
  }
}

void Worker::drain_host() {
  for (const auto& port : c_.p.ports) {
    rte_ring* r = c_.p.host_in[port.index];
    if (!r) continue;
    rte_mbuf* pkts[kBurst];
    const unsigned n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(pkts), kBurst, nullptr);
    counter_add(c_.counters.host_in, n);
    for (unsigned i = 0; i < n; ++i) c_.tx(port.index, pkts[i]);
  }
}

void Worker::drain_handoff() {
  for (uint32_t w = 0; w < c_.p.n_workers; ++w) {
    rte_ring* r = c_.p.handoff_from[w];
    if (!r) continue;
    rte_mbuf* pkts[kBurst];
    const unsigned n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(pkts), kBurst, nullptr);
    if (n == 0) continue;
    counter_add(c_.counters.handoff_in, n);
    process_burst(kFromHandoff, pkts, uint16_t(n));
  }
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
  const uint32_t now_ms = c_.now_ms();
  const uint32_t cap = c_.flows.capacity();
  for (; r->cursor < cap && budget && r->count < r->max; ++r->cursor, --budget) {
    const Flow* f = c_.flows.at(r->cursor);
    if (!f) continue;
    FlowRecord& o = r->records[r->count++];
    o.client = f->client();
    o.vip = c_.flows.vip(*f);
    o.backend = f->backend();
    o.local = f->local_id ? c_.flows.local(*f) : IpAddr{};
    o.client_port = ntohs(f->client_port);
    o.vip_port = ntohs(f->vip_port);
    o.backend_port = ntohs(f->backend_port);
    o.local_port = ntohs(f->local_port);
    o.proto = f->proto;
    o.state = f->state;
    o.mode = f->mode;
    o.stat_id = f->stat_id;
    o.expires_in_ms = int32_t(f->expire_ms - now_ms);
    o.age_ms = now_ms - c_.flows.created_ms(*f);
    o.worker = c_.p.index;
  }
  // Proxy sessions follow the flows: cursor cap + i is session slot i.
  const uint32_t end = cap + (c_.proxy ? c_.proxy->session_slots() : 0);
  for (; r->cursor >= cap && r->cursor < end && budget && r->count < r->max;
       ++r->cursor, --budget) {
    if (c_.proxy->session_record(r->cursor - cap, &r->records[r->count])) {
      r->records[r->count++].worker = c_.p.index;
    }
  }
  return r->cursor >= end || r->count >= r->max;
}

void Worker::update_clock(rte_mbuf** pkts, uint16_t n) {
  if (c_.p.timestamp_offset < 0) return;
  for (uint16_t i = 0; i < n; ++i) {
    if (!(pkts[i]->ol_flags & c_.p.timestamp_flag)) continue;
    // net_pcap stores the capture time in microseconds.
    const uint64_t ts_ns =
        *RTE_MBUF_DYNFIELD(pkts[i], c_.p.timestamp_offset, rte_mbuf_timestamp_t*) * 1000;
    if (ts_ns > c_.now_ns) c_.now_ns = ts_ns;
  }
}

void Worker::process_burst(uint16_t in_port, rte_mbuf** pkts, uint16_t n, bool hashed) {
  if (!hashed) {
    b_.hashed = 0;
    b_.flows_prefetched = false;
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
  stage_parse(c_, b_, in_port, pkts, n);
  stage_classify(c_, b_, pkts, n);
  if (in_port != kFromHandoff) stage_l2(c_, b_, in_port, pkts, n);
  // Flows are looked up and created in burst order: a reply in the same burst as the packet
  // that creates its flow (a replayed capture) finds that flow.
  stage_flow(c_, b_, pkts, n);
  stage_lookup(c_, b_, pkts, n);
  if (c_.proxy) stage_stack(pkts, n);
  stage_icmp_error(c_, b_, pkts, n);
  stage_local(c_, b_, pkts, n);
  stage_route(c_, b_, pkts, n);
  stage_dispatch(pkts, n);
  if (c_.proxy) send_generated();
}

// ---- proxy -------------------------------------------------------------------------------

void Worker::stage_stack(rte_mbuf** pkts, uint16_t n) {
  if (!b_.next_mask(n, kNextStack, kNextStack)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (b_.next[i] == kNextStack) c_.stack->input(pkts[i], b_.meta[i]);
  }
}

void Worker::send_generated() {
  // Between bursts: the per-burst scratch is free for the stack's frames.
  rte_mbuf* pkts[kBurst];
  while (c_.stack->has_output()) {
    // Each frame comes with the route stage's view of it (family, addresses, length).
    const uint16_t n = c_.stack->take_output(pkts, b_.meta, kBurst);
    counter_add(c_.counters.generated, n);
    counter_add(c_.counters.stack_frames_out, n);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* mb = pkts[i];
      b_.flow[i] = nullptr;
      b_.egress[i] = Egress{};
      b_.extra[i].m = nullptr;
      b_.visited[i] = 0;
      auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(mb, kEthHdrLen));
      if (!eth) {
        b_.next[i] = kNextDrop;
        b_.drop[i] = Drop::kNoHeadroom;
        continue;
      }
      std::memset(eth, 0, 12);  // the route stage writes the addresses
      wr16(eth + 12, b_.meta[i].l3 == L3::kIpv6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
      b_.meta[i].l3_off = kEthHdrLen;
      b_.next[i] = kNextRoute;
      b_.drop[i] = Drop::kNone;
    }
    stage_route(c_, b_, pkts, n);
    stage_dispatch(pkts, n);
  }
}

// ---- dispatch ----------------------------------------------------------------------------

void Worker::stage_dispatch(rte_mbuf** pkts, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    switch (b_.next[i]) {
      case kNextTx:
        c_.tx(b_.out[i], pkts[i]);
        break;
      case kNextPending:
        if (!c_.pending->push(pkts[i], b_.nh[i], b_.out[i], c_.now_ns)) {
          c_.drop(pkts[i], Drop::kNeighborQueueFull);
        }
        break;
      case kNextHandoff:
        // SPSC: only this worker enqueues to this ring. Full: counted drop, never a wait.
        if (rte_ring_enqueue(c_.p.handoff_to[b_.out[i]], pkts[i]) == 0) {
          counter_add(c_.counters.handoff_out, 1);
        } else {
          c_.drop(pkts[i], Drop::kHandoffFull);
        }
        break;
      case kNextConsumed:
        counter_add(c_.counters.consumed, 1);
        rte_pktmbuf_free(pkts[i]);
        break;
      case kNextStack:
        counter_add(c_.counters.consumed, 1);  // the stack took the mbuf in stage_stack()
        break;
      case kNextHost:
        // Shared by the workers (multi-producer). Full: counted drop, never a wait.
        pkts[i]->port = b_.out[i];
        if (rte_ring_mp_enqueue(c_.p.host_out, pkts[i]) == 0) {
          counter_add(c_.counters.host_out, 1);
        } else {
          c_.drop(pkts[i], Drop::kHostQueueFull);
        }
        break;
      case kNextDrop:
        c_.drop(pkts[i], b_.drop[i]);
        break;
      default:
        MG_CHECK(false && "packet left the pipeline without a verdict");
    }
    Extra& x = b_.extra[i];
    if (x.m) {
      if (x.next == kNextTx) c_.tx(x.port, x.m);
      else if (!c_.pending->push(x.m, x.nh, x.port, c_.now_ns))
        c_.drop(x.m, Drop::kNeighborQueueFull);
      x.m = nullptr;
    }
  }
}


// ---- access log ----------------------------------------------------------------------------

void Worker::on_flow_end(void* ctx, const Flow& f, uint32_t created_ms, FlowEnd why) {
  WorkerCtx& c = static_cast<Worker*>(ctx)->c_;
  AccessEnd end = why == FlowEnd::kEvicted ? AccessEnd::kFlowEvicted : AccessEnd::kFlowRemoved;
  if (why == FlowEnd::kExpired) {
    // The state it expired in says how the connection ended.
    const bool fin_orig = f.flags & kFlowFinOrig;
    const bool fin_reply = f.flags & kFlowFinReply;
    if (f.state == TcpState::kClose) {
      end = AccessEnd::kFlowReset;
    } else if (fin_orig || fin_reply) {
      // Both FINs: the second came from the backend when the client's was first.
      const bool client_first = fin_orig && (!fin_reply || (f.flags & kFlowLastFinReply));
      end = client_first ? AccessEnd::kClientFin : AccessEnd::kBackendFin;
    } else {
      end = AccessEnd::kIdleTimeout;
    }
  }
  AccessRecord* r = c.access_log.begin(AccessKind::kFlow, end, created_ms, c.now_ms());
  if (r == nullptr) return;
  r->proto = f.proto;
  r->mode = uint8_t(f.mode);
  const IpAddr vip = f.v6() ? c.p.addrs->at(f.vip_id)
                            : IpAddr::v4_bytes(reinterpret_cast<const uint8_t*>(&f.vip4));
  r->tuple.set(f.client(), ntohs(f.client_port), vip, ntohs(f.vip_port), f.backend(),
               ntohs(f.backend_port));
  // The service as the current snapshot names it (flows keep no name of their own).
  const SnapService* svc = c.snap != nullptr ? c.snap->find_service(vip, f.vip_port, f.proto)
                                             : nullptr;
  if (svc != nullptr) access_copy(r->names.service, svc->name);
  c.access_log.commit();
}

}  // namespace meshgate::dp
