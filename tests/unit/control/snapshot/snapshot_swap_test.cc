// Zero-loss snapshot swaps under a running worker. Unlike the harness tests, which poll the
// worker from the test thread, the worker here runs Worker::run() on its own thread with the
// real rte_rcu_qsbr of a SnapshotPublisher, while the test thread keeps injecting traffic into
// its net_ring port and publishes thousands of snapshots built by build_snapshot (backends
// added, removed, reweighted; at least one always eligible). Every packet is checked:
//   - every injected packet comes out, and the worker's counters add up (no drop of any reason);
//   - every packet of a flow keeps the backend its first packet got, across every swap;
//   - a new flow's backend is the Maglev choice of a snapshot that was current while its first
//     packet was in flight: between the version the worker had loaded just before the packet
//     was queued and the newest version published when its output was read;
//   - a retired snapshot is freed only once the worker's own QSBR counter shows a quiescent
//     report at or after the snapshot's retire token, and a freed snapshot is poisoned (no
//     table, no backends) so that a worker still reading it would drop or misroute packets;
//   - at the end every retired snapshot has been freed while the worker was still running, and
//     no lookup table of an old snapshot is still alive.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "control/snapshot/builder.h"
#include "control/snapshot/publisher.h"
#include "dataplane/lb/lb.h"
#include "dataplane/worker/worker.h"
#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"
#include "tools/pktlib/decode.h"

namespace meshgate {
namespace {

using Clock = std::chrono::steady_clock;
using test::A;
using test::M;

constexpr int kPool = 16;              // backends that come and go
constexpr int kEstablished = 600;      // flows set up (three-way handshake) before the swaps
constexpr int kSwaps = 3000;           // snapshots published while traffic flows
constexpr int kDataPerSwap = 6;        // packets of existing flows sent per swap
constexpr uint32_t kTableSize = 1009;  // Maglev slots (prime, > 100 x kPool / 2)
constexpr uint32_t kMaxInFlight = 256;  // injected and not yet read back (rings hold 1024)
const char* kVip = "203.0.113.10";
const MacAddr kGw = M("02:00:00:00:00:01");
const MacAddr kRouter = M("02:00:00:00:00:fe");

std::string backend_ip(int i) { return "198.51.100." + std::to_string(11 + i); }
MacAddr backend_mac(int i) {
  MacAddr m = M("02:00:00:00:01:00");
  m.b[5] = uint8_t(0x10 + i);
  return m;
}

std::string config_toml() {
  std::string t = R"(
[gateway]
workers = 1
[conntrack]
tcp_syn = 600
[[port]]
name = "net0"
device = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24"]
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
[[neighbor]]
address = "198.51.100.254"
mac = "02:00:00:00:00:fe"
)";
  for (int i = 0; i < kPool; ++i) {
    t += "[[neighbor]]\naddress = \"" + backend_ip(i) + "\"\nmac = \"" + backend_mac(i).str() + "\"\n";
  }
  return t;
}

struct Flow {
  IpAddr client;
  uint16_t port = 0;
  uint32_t hash = 0;
  int backend = -1;         // pool index its first packet went to
  uint64_t v_lo = 0;        // worker's snapshot version just before the first packet was queued
  uint64_t sent = 0, received = 0;
  uint32_t seq = 1000;
};

// What each published version chose: backend pool indices by Maglev slot (-1: no table).
struct Version {
  std::vector<int> members;  // pool index of each endpoint of the spec, in order
  std::vector<uint32_t> table;
};

class SwapTest : public testing::Test {
 protected:
  void SetUp() override {
    test::init_eal_once();
    pool_ = test::test_pool();
    auto c = ctl::parse_config(config_toml(), "swap.toml");
    ASSERT_TRUE(c) << c.error().str();
    cfg_ = std::move(c.value());
    static int instance = 0;
    const std::string n = std::to_string(instance++);
    rx_ = rte_ring_create(("swp_rx" + n).c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    tx_ = rte_ring_create(("swp_tx" + n).c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_TRUE(rx_ && tx_);
    const int port_id = rte_eth_from_rings(("net_ring_swp" + n).c_str(), &rx_, 1, &tx_, 1, 0);
    ASSERT_GE(port_id, 0);
    port_id_ = uint16_t(port_id);
    rte_eth_conf conf{};
    ASSERT_EQ(rte_eth_dev_configure(port_id_, 1, 1, &conf), 0);
    ASSERT_EQ(rte_eth_rx_queue_setup(port_id_, 0, 1024, 0, nullptr, pool_), 0);
    ASSERT_EQ(rte_eth_tx_queue_setup(port_id_, 0, 1024, 0, nullptr), 0);
    ASSERT_EQ(rte_eth_dev_start(port_id_), 0);
    dp::PortRuntime p;
    p.name = "net0";
    p.port_id = port_id_;
    p.index = 0;
    p.mac = kGw;
    p.addresses = cfg_.ports[0].addresses;
    ports_ = {p};
    reg_ = std::make_unique<ctl::Registries>();
    ASSERT_TRUE(pub_.init(1));
    weights_.assign(kPool, -1);
    for (int i = 0; i < 4; ++i) weights_[i] = 1;
  }

  void TearDown() override {
    if (thread_.joinable()) {
      worker_->request_stop();
      thread_.join();
    }
    pub_.shutdown();
    worker_.reset();
    reg_.reset();
    rte_eth_dev_stop(port_id_);
    rte_eth_dev_close(port_id_);
    drain_ring(rx_);
    drain_ring(tx_);
    rte_ring_free(rx_);
    rte_ring_free(tx_);
  }

  static void drain_ring(rte_ring* r) {
    void* o;
    while (rte_ring_dequeue(r, &o) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(o));
  }

  // Builds and publishes a snapshot of the current membership; remembers what it chooses.
  void publish() {
    ctl::ServiceSpec s;
    s.name = "web";
    s.vip = A(kVip);
    s.port = 80;
    s.table_size = kTableSize;
    Version ver;
    for (int i = 0; i < kPool; ++i) {
      if (weights_[i] < 0) continue;
      ctl::EndpointSpec e;
      e.address = A(backend_ip(i).c_str());
      e.port = 8080;
      e.weight = uint32_t(weights_[i]);
      s.endpoints.push_back(e);
      ver.members.push_back(i);
    }
    auto snap = ctl::build_snapshot(cfg_, {s}, ports_, *reg_, published_ + 1);
    ASSERT_TRUE(snap) << snap.error().message;
    const dp::SnapService& svc = (*snap)->services[0];
    ASSERT_NE(svc.table, nullptr) << "every snapshot keeps an eligible backend";
    ver.table.assign(svc.table, svc.table + svc.table_size);
    tables_.push_back((*snap)->lb_tables[0]);
    versions_[published_ + 1] = std::move(ver);
    ++published_;
    pub_.publish(*snap);
  }

  // One change of membership or weight; at least one backend stays eligible.
  void mutate() {
    std::vector<int> in, out;
    for (int i = 0; i < kPool; ++i) (weights_[i] >= 0 ? in : out).push_back(i);
    const int op = int(rng_() % 3);
    if (op == 0 && !out.empty()) {
      weights_[out[rng_() % out.size()]] = int(rng_() % 4);  // added (weight 0: drained)
    } else if (op == 1 && in.size() > 1) {
      weights_[in[rng_() % in.size()]] = -1;  // removed: its flows stay ("keep")
    } else {
      weights_[in[rng_() % in.size()]] = int(rng_() % 4);
    }
    bool eligible = false;
    for (int w : weights_) eligible |= w > 0;
    if (!eligible) {
      for (int& w : weights_) {
        if (w == 0) {
          w = 1;
          break;
        }
      }
    }
  }

  void start_worker() {
    dp::WorkerParams wp;
    wp.index = 0;
    wp.n_workers = 1;
    wp.ports = ports_;
    wp.snapshot = pub_.slot();
    wp.addrs = reg_->addrs.table();
    wp.qsbr = pub_.qsbr();
    wp.pool = pool_;
    wp.max_flows = 16384;
    wp.timeouts.tcp_syn_ms = cfg_.conntrack.tcp_syn * 1000;
    wp.timeouts.tcp_established_ms = cfg_.conntrack.tcp_established * 1000;
    wp.timeouts.tcp_fin_ms = cfg_.conntrack.tcp_fin * 1000;
    wp.timeouts.tcp_time_wait_ms = cfg_.conntrack.tcp_time_wait * 1000;
    wp.timeouts.udp_ms = cfg_.conntrack.udp * 1000;
    wp.timeouts.other_ms = cfg_.conntrack.icmp * 1000;
    worker_ = std::make_unique<dp::Worker>();
    ASSERT_TRUE(worker_->init(wp));
    thread_ = std::thread([w = worker_.get()] { w->run(); });
    // Online and polling before anything is retired (an offline worker holds nothing).
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (dp::counter_read(worker_->counters().loops) < 2) {
      ASSERT_LT(Clock::now(), deadline) << "worker did not start polling";
      std::this_thread::yield();
    }
  }

  uint64_t worker_version() const { return dp::counter_read(worker_->counters().snapshot_version); }

  void inject(const pkt::Bytes& f) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    ASSERT_NE(m, nullptr) << "test pool exhausted";
    char* d = rte_pktmbuf_append(m, uint16_t(f.size()));
    std::memcpy(d, f.data(), f.size());
    while (rte_ring_enqueue(rx_, m) != 0) collect();  // the worker is behind: read its output
    ++injected_;
  }

  // A client packet of flow `fi` (SYN starts it).
  void send_client(size_t fi, uint8_t flags) {
    Flow& f = flows_[fi];
    if (f.sent == 0) f.v_lo = worker_version();
    pkt::IpHdr ip;
    ip.src = f.client;
    ip.dst = A(kVip);
    pkt::TcpHdr t;
    t.sport = f.port;
    t.dport = 80;
    t.flags = flags;
    t.seq = f.seq++;
    ++f.sent;
    inject(pkt::build_tcp(pkt::EthHdr{kGw, kRouter}, ip, t, pkt::Bytes(flags & 0x08 ? 64 : 0, 0xab)));
  }

  // The backend's SYN-ACK, from the backend the flow's first packet went to.
  void send_synack(size_t fi) {
    Flow& f = flows_[fi];
    pkt::IpHdr ip;
    ip.src = A(backend_ip(f.backend).c_str());
    ip.dst = f.client;
    pkt::TcpHdr t;
    t.sport = 8080;
    t.dport = f.port;
    t.flags = 0x12;
    t.seq = 5000;
    t.ack = 1001;
    ++f.sent;
    inject(pkt::build_tcp(pkt::EthHdr{kGw, backend_mac(f.backend)}, ip, t, {}));
  }

  size_t new_flow() {
    Flow f;
    const uint32_t n = uint32_t(flows_.size());
    f.client = A(("192.0.2." + std::to_string(2 + n % 250)).c_str());
    f.port = uint16_t(10000 + n / 250);
    f.hash = dp::lb_flow_hash(f.client, A(kVip), htons(f.port), htons(80), 6);
    flows_.push_back(f);
    by_tuple_[key(f.client, f.port)] = flows_.size() - 1;
    return flows_.size() - 1;
  }

  static uint64_t key(const IpAddr& client, uint16_t port) {
    return uint64_t(client.b[15]) << 16 | port;
  }

  void fail(const std::string& what) {
    if (failures_.size() < 20) failures_.push_back(what);
    ++failure_count_;
  }

  // Reads and checks everything the worker transmitted so far.
  void collect() {
    void* objs[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(tx_, objs, 64, nullptr)) > 0) {
      for (unsigned i = 0; i < n; ++i) {
        auto* m = static_cast<rte_mbuf*>(objs[i]);
        pkt::Bytes b(m->pkt_len);
        std::memcpy(b.data(), rte_pktmbuf_read(m, 0, m->pkt_len, b.data()), m->pkt_len);
        rte_pktmbuf_free(m);
        ++received_;
        check(b);
      }
    }
  }

  void check(const pkt::Bytes& frame) {
    const pkt::Decoded d = pkt::decode(frame);
    if (!d.ok() || d.l4_proto != 6) return fail(std::string("undecodable output: ") + (d.error ? d.error : "not TCP"));
    if (d.src == A(kVip)) {  // a reply, reverse-translated toward the client
      auto it = by_tuple_.find(key(d.dst, d.dport));
      if (it == by_tuple_.end() || d.sport != 80 || d.eth_dst != kRouter) return fail("bad reply output");
      ++flows_[it->second].received;
      return;
    }
    auto it = by_tuple_.find(key(d.src, d.sport));
    if (it == by_tuple_.end()) return fail("output of no flow: " + d.src.str());
    Flow& f = flows_[it->second];
    ++f.received;
    int b = -1;
    for (int i = 0; i < kPool; ++i) {
      if (d.dst == A(backend_ip(i).c_str())) b = i;
    }
    if (b < 0 || d.dport != 8080 || d.eth_dst != backend_mac(b)) {
      return fail("flow " + f.client.str() + ":" + std::to_string(f.port) + " sent to " + d.dst.str());
    }
    if (f.backend >= 0) {
      if (b != f.backend) {
        fail("flow " + f.client.str() + ":" + std::to_string(f.port) + " moved from " +
             backend_ip(f.backend) + " to " + backend_ip(b));
      }
      return;
    }
    // First packet: the choice of a snapshot current while it was in flight.
    bool ok = false;
    for (uint64_t v = f.v_lo; v <= published_ && !ok; ++v) {
      const Version& ver = versions_.at(v);
      ok = ver.members[ver.table[f.hash % kTableSize]] == b;
    }
    if (!ok) {
      fail("new flow " + f.client.str() + ":" + std::to_string(f.port) + " went to " + backend_ip(b) +
           ", not the choice of versions " + std::to_string(f.v_lo) + ".." + std::to_string(published_));
    }
    ++new_flows_checked_;
    f.backend = b;
  }

  // Reads output until at most `limit` packets are in flight; false when they never come out.
  [[nodiscard]] bool settle(uint64_t limit) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    collect();
    while (injected_ - received_ > limit) {
      if (Clock::now() > deadline) {
        const dp::WorkerCounters& c = worker_->counters();
        std::string drops;
        for (uint32_t r = 1; r < dp::kNumDrops; ++r) {
          if (c.drops[r]) drops += std::string(" ") + dp::drop_name(dp::Drop(r)) + "=" + std::to_string(c.drops[r]);
        }
        ADD_FAILURE() << injected_ - received_ << " packets never came out; worker rx "
                      << dp::counter_read(c.rx_packets) << " tx " << dp::counter_read(c.tx_packets)
                      << " pending " << dp::counter_read(c.pending_now) << " drops:" << drops;
        return false;
      }
      std::this_thread::yield();
      collect();
    }
    return true;
  }

  ctl::Config cfg_;
  rte_mempool* pool_ = nullptr;
  rte_ring* rx_ = nullptr;
  rte_ring* tx_ = nullptr;
  uint16_t port_id_ = 0;
  std::vector<dp::PortRuntime> ports_;
  std::unique_ptr<ctl::Registries> reg_;  // after EAL init: the address table is DPDK memory
  ctl::SnapshotPublisher pub_;
  std::unique_ptr<dp::Worker> worker_;
  std::thread thread_;
  std::mt19937 rng_{20261122};
  std::vector<int> weights_;  // per pool backend: -1 absent, else its weight
  uint64_t published_ = 0;
  std::map<uint64_t, Version> versions_;
  std::vector<std::weak_ptr<const dp::LbTable>> tables_;
  std::vector<Flow> flows_;
  std::map<uint64_t, size_t> by_tuple_;
  uint64_t injected_ = 0, received_ = 0, new_flows_checked_ = 0;
  std::vector<std::string> failures_;
  uint64_t failure_count_ = 0;
};

TEST_F(SwapTest, ThousandsOfSwapsUnderTrafficLoseNoPacketAndMoveNoFlow) {
  const auto t0 = Clock::now();
  // Retire tokens, and every free checked against the worker's own QSBR report.
  std::map<const dp::Snapshot*, uint64_t> token_of;
  uint64_t frees = 0, early_frees = 0;
  pub_.set_hooks(
      [&](const dp::Snapshot* s, uint64_t token) { token_of[s] = token; },
      [&](const dp::Snapshot* s) {
        ++frees;
        const uint64_t acked = __atomic_load_n(&pub_.qsbr()->qsbr_cnt[0].cnt, __ATOMIC_ACQUIRE);
        if (acked < token_of.at(s)) ++early_frees;
        token_of.erase(s);
        // Poison: a worker still reading this snapshot would find no table and no backends.
        auto* p = const_cast<dp::Snapshot*>(s);
        for (auto& sv : p->services) {
          sv.table = nullptr;
          sv.table_size = 0;
          sv.n_backends = 0;
        }
        for (auto& b : p->backends) b.address = IpAddr{};
      });
  publish();
  ASSERT_FALSE(HasFatalFailure());
  start_worker();
  ASSERT_FALSE(HasFatalFailure());

  // Established flows: SYN, the backend's SYN-ACK, the client's ACK.
  for (int done = 0; done < kEstablished; done += 64) {
    std::vector<size_t> batch;
    for (int i = 0; i < 64 && done + i < kEstablished; ++i) batch.push_back(new_flow());
    for (size_t fi : batch) send_client(fi, 0x02);
    ASSERT_TRUE(settle(0));
    // Each ACK right behind its SYN-ACK, often in the same RX burst: state follows the wire.
    for (size_t fi : batch) {
      send_synack(fi);
      send_client(fi, 0x10);
    }
    ASSERT_TRUE(settle(0));
  }
  ASSERT_EQ(failure_count_, 0u) << failures_[0];
  // The gauge is synced at the end of the worker's iteration, just after it transmits.
  for (auto until = Clock::now() + std::chrono::seconds(5);
       dp::counter_read(worker_->counters().flows_established) != uint64_t(kEstablished) &&
       Clock::now() < until;) {
    std::this_thread::yield();
  }
  ASSERT_EQ(dp::counter_read(worker_->counters().flows_established), uint64_t(kEstablished));

  // Swaps under traffic: each a new snapshot, a new flow and packets of random existing flows.
  for (int i = 0; i < kSwaps; ++i) {
    mutate();
    publish();
    ASSERT_FALSE(HasFatalFailure());
    send_client(new_flow(), 0x02);
    for (int k = 0; k < kDataPerSwap; ++k) send_client(rng_() % flows_.size(), 0x18);
    collect();
    if (injected_ - received_ > kMaxInFlight) {
      ASSERT_TRUE(settle(kMaxInFlight / 4));
    }
  }
  ASSERT_TRUE(settle(0));

  // Retired snapshots are reclaimed while the worker runs.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (pub_.reclaim() != 0) {
    ASSERT_LT(Clock::now(), deadline) << pub_.retired_count() << " snapshots never reclaimed";
    std::this_thread::yield();
  }
  worker_->request_stop();
  thread_.join();
  const dp::WorkerCounters c = worker_->counters();

  EXPECT_EQ(failure_count_, 0u) << failures_.size() << " failures shown, first: " << failures_[0];
  for (const auto& f : failures_) ADD_FAILURE() << f;
  // Every packet came out, and the counters say the same.
  EXPECT_EQ(received_, injected_);
  for (const Flow& f : flows_) ASSERT_EQ(f.received, f.sent) << f.client.str() << ":" << f.port;
  EXPECT_EQ(c.rx_packets, injected_);
  EXPECT_EQ(c.tx_packets, received_);
  uint64_t drops = 0;
  for (uint32_t r = 1; r < dp::kNumDrops; ++r) drops += c.drops[r];
  EXPECT_EQ(drops, 0u);
  EXPECT_EQ(c.flows_created, flows_.size());
  EXPECT_EQ(c.flows_active, flows_.size());
  EXPECT_EQ(new_flows_checked_, flows_.size());
  uint64_t backend_packets = 0;
  for (uint32_t id = 1; id < reg_->stats.names().size(); ++id) {
    backend_packets += worker_->backend_counters()[id].packets;
  }
  EXPECT_EQ(backend_packets, injected_) << "per-backend counters cover every packet";
  EXPECT_GT(c.snapshot_version, uint64_t(kSwaps)) << "the worker used the swapped snapshots";

  // QSBR: nothing freed before the worker's report; everything retired freed while it ran.
  EXPECT_EQ(published_, uint64_t(kSwaps) + 1);
  EXPECT_EQ(early_frees, 0u);
  EXPECT_EQ(frees, published_ - 1);
  EXPECT_EQ(pub_.retired_count(), 0u);
  EXPECT_TRUE(token_of.empty());
  // Only the live snapshot's lookup table is still allocated (it and the builder cache hold it).
  std::set<const dp::LbTable*> alive;
  for (const auto& t : tables_) {
    if (auto p = t.lock()) alive.insert(p.get());
  }
  EXPECT_EQ(alive.size(), 1u);

  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%d swaps, %zu flows, %lu packets in %.1f s (worker loops %lu)\n", kSwaps,
              flows_.size(), (unsigned long)injected_, s, (unsigned long)c.loops);
}

}  // namespace
}  // namespace meshgate
