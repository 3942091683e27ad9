#include "tests/support/dp_harness.h"

#include "control/runtime/runtime.h"

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "control/runtime/eal_cleanup.h"
#include "control/runtime/ports.h"
#include "control/snapshot/builder.h"

namespace meshgate::test {
namespace {

int g_ts_offset = -1;
uint64_t g_ts_flag = 0;
rte_mempool* g_pool = nullptr;
uint32_t g_instance = 0;

}  // namespace

const char* const kDemoTopology = R"(
[gateway]
workers = 1

[[port]]
name = "net0"
device = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]

[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"

[[route]]
prefix = "::/0"
via = "2001:db8:1::fe"

[[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:00:fe"
[[neighbor]]
address = "2001:db8:1::fe"
mac = "02:00:00:00:00:fe"
[[neighbor]]
address = "198.51.100.11"
mac = "02:00:00:00:01:11"
[[neighbor]]
address = "198.51.100.12"
mac = "02:00:00:00:01:12"
[[neighbor]]
address = "198.51.100.13"
mac = "02:00:00:00:01:13"
[[neighbor]]
address = "2001:db8:1::11"
mac = "02:00:00:00:01:61"
[[neighbor]]
address = "2001:db8:1::12"
mac = "02:00:00:00:01:62"

[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
protocol = "tcp"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
  [[service.backend]]
  address = "198.51.100.12"
  port = 8080
  [[service.backend]]
  address = "198.51.100.13"
  port = 8080
  weight = 2

[[service]]
name = "dns"
vip = "203.0.113.10"
port = 53
protocol = "udp"
  [[service.backend]]
  address = "198.51.100.11"
  port = 5353
  [[service.backend]]
  address = "198.51.100.12"
  port = 5353

[[service]]
name = "web6"
vip = "2001:db8:100::10"
port = 80
protocol = "tcp"
  [[service.backend]]
  address = "2001:db8:1::11"
  port = 8080
  [[service.backend]]
  address = "2001:db8:1::12"
  port = 8080
)";

void expect_same_flows(const dp::FlowTable& a, const dp::FlowTable& b) {
  ASSERT_EQ(a.active(), b.active());
  EXPECT_EQ(a.established(), b.established());
  for (uint32_t i = 0; i < a.capacity(); ++i) {
    ASSERT_EQ(a.at(i) == nullptr, b.at(i) == nullptr) << i;
    if (a.at(i)) {
      EXPECT_EQ(std::memcmp(a.at(i), b.at(i), sizeof(dp::Flow)), 0) << i;
    }
  }
}

void init_eal_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string prefix = "--file-prefix=mgtest-" + std::to_string(getpid());
    std::vector<std::string> args = {"test",        "--no-huge",    "-m",          "512",
                                     "--no-pci",    "--no-shconf",  "--no-telemetry",
                                     "-l",          "0",            prefix,
                                     "--log-level=error"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (rte_eal_init(int(argv.size()), argv.data()) < 0) {
      throw std::runtime_error(std::string("EAL init failed: ") + rte_strerror(rte_errno));
    }
    ctl::eal_cleanup_at_exit();
    if (rte_mbuf_dyn_rx_timestamp_register(&g_ts_offset, &g_ts_flag) != 0) {
      throw std::runtime_error("cannot register the RX timestamp dynfield");
    }
    g_pool = rte_pktmbuf_pool_create("mgtest_pool", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    if (!g_pool) throw std::runtime_error("cannot create the test mbuf pool");
  });
}

rte_mempool* test_pool() {
  init_eal_once();
  return g_pool;
}

DataplaneHarness::DataplaneHarness(const std::string& config_toml, HarnessOptions opt)
    : opt_(opt) {
  init_eal_once();
  auto cfg = ctl::parse_config(config_toml, "test.toml");
  if (!cfg) throw std::runtime_error("test config: " + cfg.error().str());
  cfg_ = std::move(cfg.value());
  reg_ = std::make_unique<ctl::Registries>();
  const uint32_t inst = g_instance++;
  const uint16_t nq = opt_.workers;
  if (opt_.rss) {
    std::vector<uint16_t> reta(128);
    for (size_t e = 0; e < reta.size(); ++e) reta[e] = uint16_t(e % nq);
    rss_ = std::make_unique<dp::RssPredictor>(ctl::default_rss_key(), reta);
  }
  for (size_t i = 0; i < cfg_.ports.size(); ++i) {
    std::vector<rte_ring*> rx(nq), tx(nq);
    for (uint16_t q = 0; q < nq; ++q) {
      const std::string n = std::to_string(inst) + "_" + std::to_string(i) + "_" + std::to_string(q);
      rx[q] = rte_ring_create(("hrx" + n).c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
      tx[q] = rte_ring_create(("htx" + n).c_str(), opt_.tx_ring_size, 0,
                              RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (!rx[q] || !tx[q]) throw std::runtime_error("cannot create harness rings");
    }
    rx_rings_.push_back(rx);
    tx_rings_.push_back(tx);
    const std::string pn = "net_ring_h" + std::to_string(inst) + "_" + std::to_string(i);
    const int port_id = rte_eth_from_rings(pn.c_str(), rx.data(), nq, tx.data(), nq, 0);
    if (port_id < 0) throw std::runtime_error("rte_eth_from_rings failed");
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(uint16_t(port_id), nq, nq, &conf) != 0) {
      throw std::runtime_error("cannot configure the net_ring port");
    }
    for (uint16_t q = 0; q < nq; ++q) {
      if (rte_eth_rx_queue_setup(uint16_t(port_id), q, 1024, 0, nullptr, g_pool) != 0 ||
          rte_eth_tx_queue_setup(uint16_t(port_id), q, 1024, 0, nullptr) != 0) {
        throw std::runtime_error("cannot set up the net_ring queues");
      }
    }
    if (rte_eth_dev_start(uint16_t(port_id)) != 0) throw std::runtime_error("cannot start net_ring");
    dp::PortRuntime rt;
    rt.name = cfg_.ports[i].name;
    rt.port_id = uint16_t(port_id);
    rt.index = uint16_t(i);
    rt.mac = cfg_.ports[i].mac ? *cfg_.ports[i].mac
                               : MacAddr{{0x02, 0, 0, 0, 0, uint8_t(i + 1)}};
    rt.mtu = cfg_.ports[i].mtu;
    rt.addresses = cfg_.ports[i].addresses;
    ports_.push_back(rt);
  }
  last_by_port_.resize(ports_.size());
  publish(config_toml);

  handoff_.assign(nq, std::vector<rte_ring*>(nq, nullptr));
  for (uint16_t a = 0; a < nq && nq > 1; ++a) {
    for (uint16_t b = 0; b < nq; ++b) {
      if (a == b) continue;
      const std::string n = "hho" + std::to_string(inst) + "_" + std::to_string(a) + "_" +
                            std::to_string(b);
      handoff_[a][b] = rte_ring_create(n.c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (!handoff_[a][b]) throw std::runtime_error("cannot create handoff rings");
    }
  }
  host_in_.assign(ports_.size(), nullptr);
  if (opt_.host_ring_size) {
    const std::string n = std::to_string(inst);
    host_out_ = rte_ring_create(("hho_out" + n).c_str(), opt_.host_ring_size, 0, RING_F_SC_DEQ);
    if (!host_out_) throw std::runtime_error("cannot create the host ring");
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (cfg_.ports[i].host_interface.empty()) continue;
      host_in_[i] = rte_ring_create(("hho_in" + n + "_" + std::to_string(i)).c_str(),
                                    opt_.host_ring_size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (!host_in_[i]) throw std::runtime_error("cannot create the host ring");
    }
  }
  proxy_ = ctl::uses_proxy(cfg_);
  if (proxy_) proxy_params_ = ctl::proxy_params(cfg_);
  if (opt_.affinity_entries) affinity_ = std::make_unique<dp::AffinityTable>(opt_.affinity_entries);
  for (uint16_t w = 0; w < nq; ++w) {
    dp::WorkerParams wp;
    wp.index = w;
    wp.n_workers = nq;
    wp.socket = 0;
    wp.ports = ports_;
    wp.snapshot = &slot_;
    wp.addrs = reg_->addrs.table();
    wp.affinity = affinity_.get();
    wp.pool = g_pool;
    wp.max_flows = opt_.max_flows;
    wp.timeouts = ctl::worker_settings(cfg_).conntrack;
    for (uint16_t o = 0; o < nq; ++o) {
      wp.handoff_to[o] = handoff_[w][o];
      wp.handoff_from[o] = handoff_[o][w];
    }
    for (size_t pi = 0; pi < ports_.size(); ++pi) wp.rss[pi] = rss_.get();
    wp.host_out = host_out_;
    for (size_t pi = 0; pi < ports_.size(); ++pi) {
      wp.host_twin[pi] = host_in_[pi] != nullptr;
      if (w == 0) wp.host_in[pi] = host_in_[pi];
    }
    wp.proxy = proxy_ ? &proxy_params_ : nullptr;
    wp.access_log = w == 0 ? opt_.access_log : nullptr;
    wp.access_log_flows = opt_.access_log_flows;
    wp.replay = true;
    wp.replay_packets = ~0ull;
    wp.pipeline = opt_.pipeline;
    wp.timestamp_offset = g_ts_offset;
    wp.timestamp_flag = g_ts_flag;
    workers_.push_back(std::make_unique<dp::Worker>());
    if (!workers_.back()->init(wp)) throw std::runtime_error("worker init failed");
  }
}

DataplaneHarness::~DataplaneHarness() {
  for (auto& w : workers_) w->finish();
  finish_stopped();
  collect();
  take_host();
  for (rte_ring* r : host_in_) {
    void* m;
    while (r && rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  }
  rte_ring_free(host_out_);
  workers_.clear();
  for (const auto& p : ports_) {
    rte_eth_dev_stop(p.port_id);
    rte_eth_dev_close(p.port_id);
  }
  for (auto& v : {&rx_rings_, &tx_rings_, &handoff_}) {
    for (auto& row : *v) {
      for (rte_ring* r : row) rte_ring_free(r);
    }
  }
  const dp::Snapshot* s = slot_.current.exchange(nullptr);
  dp::snapshot_free(const_cast<dp::Snapshot*>(s));
}

void DataplaneHarness::publish(const std::string& config_toml) {
  auto cfg = ctl::parse_config(config_toml, "test.toml");
  if (!cfg) throw std::runtime_error("test config: " + cfg.error().str());
  std::vector<ctl::ServiceSpec> specs = ctl::services_from_config(*cfg);
  if (opt_.edit_specs) opt_.edit_specs(specs);
  auto snap = ctl::build_snapshot(*cfg, specs, ports_, *reg_, ++version_);
  if (!snap) throw std::runtime_error("snapshot: " + snap.error().message);
  // The worker is not running concurrently (tests drive it), so the old snapshot can go now.
  const dp::Snapshot* old = slot_.current.exchange(*snap);
  dp::snapshot_free(const_cast<dp::Snapshot*>(old));
}

uint16_t DataplaneHarness::rss_queue(const pkt::Bytes& f) const {
  if (!rss_) return 0;
  dp::PacketMeta m;
  if (dp::parse_packet(f.data(), uint32_t(f.size()), &m, false) != dp::Drop::kNone || !m.is_ip()) {
    return 0;
  }
  // NICs hash fragments and other protocols by addresses only; TCP/UDP by the 4-tuple.
  if (m.has_l4() && !m.is_fragment() && (m.l4_proto == 6 || m.l4_proto == 17)) {
    return rss_->queue(m.src, m.dst, m.sport, m.dport);
  }
  return rss_->queue_of(rss_->fixed_hash(m.src, m.dst, 0));  // zero ports add nothing
}

void DataplaneHarness::inject(const std::vector<pkt::Bytes>& frames, uint64_t ts_ns, uint16_t port) {
  std::vector<std::vector<pkt::Bytes>> by_queue(workers_.size());
  for (const auto& f : frames) by_queue[rss_queue(f)].push_back(f);
  for (uint16_t q = 0; q < by_queue.size(); ++q) {
    for (const auto& frame : by_queue[q]) {
      pkt::Bytes stripped;
      uint16_t tci = 0;
      const bool strip = opt_.strip_vlan && frame.size() >= 18 && pkt::get16(&frame[12]) == pkt::kEtherVlan;
      if (strip) {
        tci = pkt::get16(&frame[14]);
        stripped.assign(frame.begin(), frame.begin() + 12);
        stripped.insert(stripped.end(), frame.begin() + 16, frame.end());
      }
      const pkt::Bytes& f = strip ? stripped : frame;
      rte_mbuf* m = nullptr;
      // A frame larger than one mbuf (a jumbo) is chained, as a scattering driver delivers it.
      for (size_t off = 0; off < f.size() || !m;) {
        rte_mbuf* seg = rte_pktmbuf_alloc(g_pool);
        if (!seg) throw std::runtime_error("test pool exhausted");
        const size_t n = std::min<size_t>(f.size() - off, rte_pktmbuf_tailroom(seg));
        std::memcpy(rte_pktmbuf_append(seg, uint16_t(n)), f.data() + off, n);
        off += n;
        if (!m) m = seg;
        else if (rte_pktmbuf_chain(m, seg) != 0) throw std::runtime_error("cannot chain mbufs");
      }
      if (strip) {
        m->vlan_tci = tci;
        m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
      }
      *RTE_MBUF_DYNFIELD(m, g_ts_offset, rte_mbuf_timestamp_t*) = ts_ns / 1000;  // as net_pcap
      m->ol_flags |= g_ts_flag;
      if (rte_ring_enqueue(rx_rings_[port][q], m) != 0) throw std::runtime_error("RX ring full");
    }
  }
}

std::vector<pkt::Bytes> DataplaneHarness::send(const std::vector<pkt::Bytes>& frames,
                                               uint64_t ts_ns, uint16_t port) {
  inject(frames, ts_ns, port);
  poll_all(ts_ns);
  return collect();
}

std::vector<pkt::Bytes> DataplaneHarness::poll_each_once(uint64_t ts_ns) {
  poll_round(ts_ns);
  return collect();
}

void DataplaneHarness::poll_round(uint64_t ts_ns) {
  for (auto& w : workers_) {
    w->advance_clock(ts_ns);
    w->poll_once();
  }
}

std::vector<pkt::Bytes> DataplaneHarness::send_to_queue(const std::vector<pkt::Bytes>& frames,
                                                        uint64_t ts_ns, uint16_t port,
                                                        uint16_t queue) {
  enqueue_to_queue(frames, ts_ns, port, queue);
  poll_all(ts_ns);
  return collect();
}

void DataplaneHarness::enqueue_to_queue(const std::vector<pkt::Bytes>& frames, uint64_t ts_ns,
                                        uint16_t port, uint16_t queue) {
  for (const auto& f : frames) {
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    if (!m) throw std::runtime_error("test pool exhausted");
    char* d = rte_pktmbuf_append(m, uint16_t(f.size()));
    if (!d) throw std::runtime_error("frame too large for one mbuf");
    std::memcpy(d, f.data(), f.size());
    *RTE_MBUF_DYNFIELD(m, g_ts_offset, rte_mbuf_timestamp_t*) = ts_ns / 1000;
    m->ol_flags |= g_ts_flag;
    if (rte_ring_enqueue(rx_rings_[port][queue], m) != 0) throw std::runtime_error("RX ring full");
  }
}

void DataplaneHarness::poll_all(uint64_t ts_ns) {
  // Enough rounds for a packet to visit every worker through the handoff rings.
  for (size_t round = 0; round <= workers_.size(); ++round) poll_round(ts_ns);
}

std::vector<pkt::Bytes> DataplaneHarness::tick(uint64_t ts_ns) {
  poll_all(ts_ns);
  return collect();
}

std::vector<pkt::Bytes> DataplaneHarness::finish() {
  for (auto& w : workers_) w->finish();
  finish_stopped();
  return collect();
}

void DataplaneHarness::finish_stopped() {
  for (auto& w : workers_) w->drop_late_handoffs();
}

std::vector<std::pair<uint16_t, pkt::Bytes>> DataplaneHarness::take_host() {
  std::vector<std::pair<uint16_t, pkt::Bytes>> out;
  void* objs[64];
  unsigned n;
  while (host_out_ && (n = rte_ring_dequeue_burst(host_out_, objs, 64, nullptr)) > 0) {
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      pkt::Bytes b(m->pkt_len);
      const void* src = rte_pktmbuf_read(m, 0, m->pkt_len, b.data());
      if (src != b.data()) std::memcpy(b.data(), src, m->pkt_len);
      out.emplace_back(m->port, std::move(b));
      rte_pktmbuf_free(m);
    }
  }
  return out;
}

void DataplaneHarness::from_host(uint16_t port, const std::vector<pkt::Bytes>& frames) {
  for (const auto& f : frames) {
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    if (!m) throw std::runtime_error("test pool exhausted");
    std::memcpy(rte_pktmbuf_append(m, uint16_t(f.size())), f.data(), f.size());
    if (rte_ring_enqueue(host_in_.at(port), m) != 0) throw std::runtime_error("host ring full");
  }
}

std::vector<pkt::Bytes> DataplaneHarness::collect() {
  std::vector<pkt::Bytes> all;
  for (size_t p = 0; p < tx_rings_.size(); ++p) {
    last_by_port_[p].clear();
    for (rte_ring* r : tx_rings_[p]) {
      void* objs[64];
      unsigned n;
      while ((n = rte_ring_dequeue_burst(r, objs, 64, nullptr)) > 0) {
        for (unsigned i = 0; i < n; ++i) {
          auto* m = static_cast<rte_mbuf*>(objs[i]);
          pkt::Bytes b(m->pkt_len);
          const void* src = rte_pktmbuf_read(m, 0, m->pkt_len, b.data());
          if (src != b.data()) std::memcpy(b.data(), src, m->pkt_len);
          rte_pktmbuf_free(m);
          last_by_port_[p].push_back(b);
          all.push_back(std::move(b));
        }
      }
    }
  }
  return all;
}

const dp::WorkerCounters& DataplaneHarness::counters() const {
  // Every field is a uint64_t counter or gauge: sum them as an array.
  constexpr size_t kN = sizeof(dp::WorkerCounters) / sizeof(uint64_t);
  auto* out = reinterpret_cast<uint64_t*>(&total_);
  for (size_t k = 0; k < kN; ++k) out[k] = 0;
  for (const auto& w : workers_) {
    const auto* in = reinterpret_cast<const uint64_t*>(&w->counters());
    for (size_t k = 0; k < kN; ++k) out[k] += in[k];
  }
  return total_;
}

uint64_t DataplaneHarness::drops_total() const {
  uint64_t n = 0;
  for (uint32_t r = 1; r < dp::kNumDrops; ++r) n += counters().drops[r];
  return n;
}

bool DataplaneHarness::balanced() const {
  const auto& c = counters();
  return c.rx_packets + c.generated + c.handoff_in + c.host_in ==
         c.tx_packets + c.consumed + drops_total() + c.pending_now + c.handoff_out + c.host_out;
}

dp::BackendCounters DataplaneHarness::backend(const std::string& service,
                                              const std::string& ep) const {
  const auto& names = reg_->stats.names();
  for (uint32_t i = 0; i < names.size(); ++i) {
    if (names[i].service != service || names[i].backend != ep) continue;
    dp::BackendCounters sum;
    for (const auto& w : workers_) {
      sum.packets += w->backend_counters()[i].packets;
      sum.bytes += w->backend_counters()[i].bytes;
      sum.flows += w->backend_counters()[i].flows;
      sum.reply_bytes += w->backend_counters()[i].reply_bytes;
    }
    return sum;
  }
  throw std::runtime_error("no backend " + service + "/" + ep);
}

}  // namespace meshgate::test
