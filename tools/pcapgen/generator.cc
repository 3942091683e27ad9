#include "tools/pcapgen/generator.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "control/snapshot/maglev.h"
#include "dataplane/common/hash.h"
#include "dataplane/lb/lb.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/malformed.h"
#include "tools/pktlib/pcap.h"

namespace meshgate::pcapgen {
namespace {

using pkt::Bytes;
using Json = nlohmann::ordered_json;

// splitmix64 (Steele, Lea, Flood, OOPSLA 2014): the same sequence on every platform and
// standard library, which std:: distributions do not promise.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n): Lemire's multiply-shift, bias below n / 2^64.
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); }
  uint32_t u32() { return uint32_t(next() >> 32); }

 private:
  uint64_t s_;
};

uint64_t flow_seed(uint64_t seed, uint64_t flow_id) {
  return fmix64(seed ^ fmix64(flow_id + 0x632be59bd9b4e019ULL));
}

// Simple IMIX (frame sizes with FCS, 7:4:1), as TRex and most generators define it.
constexpr std::array<uint16_t, 3> kImixFrames = {64, 594, 1518};
constexpr std::array<uint32_t, 3> kImixWeights = {7, 4, 1};
constexpr uint32_t kImixTotal = 12;
constexpr size_t kFcsLen = 4;

// TCP parameters shaped like a Linux 6.x client and server.
constexpr uint16_t kMss4 = 1460;
constexpr uint16_t kMss6 = 1440;
constexpr uint8_t kWscale = 7;
constexpr uint16_t kSynWindow = 64240;
constexpr uint16_t kSynAckWindow = 65160;
constexpr uint16_t kClientWindow = 502;  // 64256 >> kWscale
constexpr uint16_t kServerWindow = 509;
constexpr uint8_t kBackendTtl = 64;

// Bytes of the pseudo-random pattern that payloads are cut from.
constexpr size_t kPatternLen = 4096;

struct Service {
  const ctl::ServiceConfig* cfg = nullptr;
  uint8_t proto = 0;
  std::vector<ctl::LbBackend> lb;
  std::vector<MacAddr> macs;
  std::vector<uint32_t> table;
  uint32_t table_size = 0;
  bool has_backend = false;  // a backend with weight > 0
  bool replies = false;      // dnat: the backend answers the client, through the gateway

  // The dataplane's choice for a new flow (dataplane/lb/lb.h): ports in network order.
  uint32_t pick(const IpAddr& client, uint16_t client_port) const {
    if (!has_backend) return dp::kNoBackend;
    const uint32_t h = dp::lb_flow_hash(client, cfg->vip, htons(client_port), htons(cfg->port),
                                        proto);
    return dp::lb_lookup(table.data(), table_size, h);
  }
};

struct Target {
  IpAddr addr;
  uint16_t port = 0;
  int service = -1;  // index into services, -1 for ICMP to a plain address
};

struct ClassPlan {
  const TrafficClass* cls = nullptr;
  std::vector<Target> targets;
  std::optional<MacAddr> router_mac4, router_mac6;  // source MAC of client frames
  std::optional<IpAddr> router4;
  uint64_t flows = 0;                            // after --packets scaling
  std::vector<const pkt::MalformedKind*> kinds;  // malformed classes
  uint64_t count = 0;                            // malformed: per kind, after scaling
};

struct FlowSpec {
  uint32_t cls = 0;
  uint32_t target = 0;  // plan.targets index, or plan.kinds index for malformed
  uint64_t id = 0;
  IpAddr client;
  uint16_t client_port = 0;  // ICMP: the echo identifier
  uint32_t backend = dp::kNoBackend;
};

enum Dir : uint8_t { kFromClient, kFromBackend };

struct Step {
  Dir dir = kFromClient;
  uint8_t tcp_flags = 0;
  uint16_t payload = 0;
  uint32_t seq = 0;  // TCP sequence / ICMP echo sequence
  uint32_t ack = 0;
};

struct ActiveFlow {
  uint32_t spec = 0;
  std::vector<Step> steps;
  uint32_t pos = 0;
  uint16_t ip_id_client = 0;
  uint16_t ip_id_backend = 0;
  uint32_t pattern_off = 0;
};

struct BackendCount {
  uint64_t flows = 0, packets = 0, reply_packets = 0;
};
struct ServiceCount {
  uint64_t flows = 0, packets = 0, reply_packets = 0, no_backend_flows = 0;
  std::vector<BackendCount> backends;
};
struct ClassCount {
  uint64_t flows = 0, packets = 0;
};

std::string endpoint_str(const IpAddr& a, uint16_t port) {
  return a.is_v4() ? a.str() + ":" + std::to_string(port)
                   : "[" + a.str() + "]:" + std::to_string(port);
}

std::string needs_text(uint8_t needs) {
  if (needs & pkt::kNeedService4) return "an IPv4 service";
  if (needs & pkt::kNeedLocal4) return "a local IPv4 address";
  if (needs & pkt::kNeedLocal6) return "a local IPv6 address";
  if (needs & pkt::kNeedDst6) return "an IPv6 service or local IPv6 address";
  return "an IPv4 service or local IPv4 address";
}

size_t headers_len(bool v4, uint8_t proto, bool vlan) {
  const size_t l4 = proto == pkt::kProtoTcp ? 20 : 8;
  return pkt::kEthHeaderLen + (vlan ? pkt::kVlanTagLen : 0) + (v4 ? 20 : 40) + l4;
}

class Generator {
 public:
  Generator(const ctl::Config& config, const Profile& profile, const Options& options)
      : config_(config), profile_(profile), options_(options) {
    seed_ = options.seed.value_or(profile.seed);
    rate_pps_ = options.rate_pps.value_or(profile.rate_pps);
  }

  ctl::Result<Generated> run();

 private:
  ctl::Result<bool> resolve_world();
  ctl::Result<bool> plan_classes();
  ctl::Result<bool> choose_kinds(ClassPlan& p);
  ctl::Result<bool> scale(uint64_t want);
  ctl::Result<bool> expand_flows();
  ctl::Result<bool> check_transit() const;
  std::optional<MacAddr> router_mac_for(const IpPrefix& clients, std::optional<IpAddr>* via);
  MacAddr backend_mac(const IpAddr& a);
  bool replies_for(const ClassPlan& p, const FlowSpec& f) const;
  uint64_t flow_packets(const ClassPlan& p, const Target& t) const;
  uint64_t class_packets(const ClassPlan& p) const;
  ctl::Result<IpAddr> unique_client(const IpPrefix& prefix, uint8_t ns, uint16_t lo, uint16_t hi,
                                    uint16_t* port, const std::string& cls);
  void make_steps(const ClassPlan& p, const FlowSpec& f, Rng& rng, std::vector<Step>* out) const;
  uint16_t data_payload(const ClassPlan& p, bool v4, Rng& rng) const;
  Bytes build(const ClassPlan& p, const FlowSpec& f, ActiveFlow& a, const Step& s) const;
  Bytes build_malformed(const ClassPlan& p, const FlowSpec& f) const;
  void count(const ClassPlan& p, const FlowSpec& f, const ActiveFlow& a, const Step& s);
  std::string sidecar(uint64_t packets, uint64_t bytes, uint64_t first_ts, uint64_t last_ts);

  const ctl::Config& config_;
  const Profile& profile_;
  const Options& options_;
  uint64_t seed_ = 0;
  uint64_t rate_pps_ = 0;
  Rng rng_{0};

  MacAddr gateway_mac_;
  std::vector<IpAddr> local4_, local6_;
  std::vector<Service> services_;
  std::vector<ClassPlan> plans_;
  std::vector<FlowSpec> specs_;
  std::vector<std::string> warnings_;
  std::unordered_set<uint64_t> used_clients_;
  std::vector<uint8_t> pattern_;

  std::vector<ClassCount> class_counts_;
  std::vector<ServiceCount> service_counts_;
  std::vector<std::pair<std::string, uint64_t>> malformed_counts_;  // in table order
  std::vector<std::pair<IpAddr, uint64_t>> echo_counts_;
  uint64_t client_packets_ = 0, reply_packets_ = 0, malformed_packets_ = 0;
};

std::optional<MacAddr> Generator::router_mac_for(const IpPrefix& clients,
                                                 std::optional<IpAddr>* via) {
  // The route the gateway would use back to these clients: longest prefix holding them.
  const ctl::RouteConfig* best = nullptr;
  for (const auto& r : config_.routes) {
    if (r.prefix.addr.is_v4() != clients.addr.is_v4()) continue;
    if (!r.prefix.contains(clients.addr) || r.prefix.len > clients.len) continue;
    if (!best || r.prefix.len > best->prefix.len) best = &r;
  }
  if (!best) return std::nullopt;
  if (via) *via = best->via;
  for (const auto& n : config_.neighbors) {
    if (n.address == best->via) return n.mac;
  }
  return std::nullopt;
}

MacAddr Generator::backend_mac(const IpAddr& a) {
  for (const auto& n : config_.neighbors) {
    if (n.address == a) return n.mac;
  }
  // No static neighbor: the gateway learns it by ARP/NDP at run time. Use a stable locally
  // administered MAC derived from the address so the capture stays deterministic.
  const uint64_t h = hash64(a.b, 16, 0x6d6163);
  warnings_.push_back("backend " + a.str() +
                      " has no [[neighbor]] entry; its replies use a made-up source MAC");
  return MacAddr{{0x02, 0xbb, uint8_t(h >> 24), uint8_t(h >> 16), uint8_t(h >> 8), uint8_t(h)}};
}

ctl::Result<bool> Generator::resolve_world() {
  if (config_.ports.empty()) return ctl::Error{"config has no [[port]]"};
  if (!config_.ports[0].mac) {
    return ctl::Error{"port[0] (" + config_.ports[0].name +
                      ") has no mac: pcapgen needs it as the destination MAC of every frame"};
  }
  gateway_mac_ = *config_.ports[0].mac;
  for (const auto& port : config_.ports) {
    for (const auto& a : port.addresses) (a.addr.is_v4() ? local4_ : local6_).push_back(a.addr);
  }
  for (const auto& sc : config_.services) {
    Service s;
    s.cfg = &sc;
    s.proto = sc.protocol == L4Proto::kTcp ? pkt::kProtoTcp : pkt::kProtoUdp;
    for (const auto& b : sc.backends) {
      s.lb.push_back(ctl::LbBackend{b.address, b.port, b.weight});
      s.macs.push_back(backend_mac(b.address));
      s.has_backend |= b.weight > 0;
    }
    // Exactly the dataplane's table: same size rule, same build.
    s.table_size = sc.table_size ? sc.table_size : ctl::lb_auto_table_size(s.lb.size());
    s.table = ctl::lb_build_table(s.lb, s.table_size);
    s.replies = sc.mode == ctl::ForwardMode::kDnat;
    services_.push_back(std::move(s));
  }
  service_counts_.resize(services_.size());
  for (size_t i = 0; i < services_.size(); ++i) {
    service_counts_[i].backends.resize(services_[i].lb.size());
  }
  return true;
}

ctl::Result<bool> Generator::plan_classes() {
  for (const auto& c : profile_.classes) {
    ClassPlan p;
    p.cls = &c;
    p.flows = c.flows;
    p.count = c.count;
    const std::string where = "class \"" + c.name + "\": ";
    if (c.type != ClassType::kMalformed) {
      const uint8_t proto = c.type == ClassType::kTcp   ? pkt::kProtoTcp
                            : c.type == ClassType::kUdp ? pkt::kProtoUdp
                                                        : 0;
      for (const auto& t : c.targets) {
        bool found = false;
        for (size_t i = 0; i < services_.size(); ++i) {
          const Service& s = services_[i];
          const bool named = t == s.cfg->name;
          if (!named && t != "all") continue;
          if (proto && s.proto != proto) {
            if (named) {
              return ctl::Error{where + "service \"" + t + "\" is " +
                                (s.proto == pkt::kProtoTcp ? "tcp" : "udp") + ", not " +
                                class_type_name(c.type)};
            }
            continue;
          }
          found = true;
          if (proto) {
            p.targets.push_back(Target{s.cfg->vip, s.cfg->port, int(i)});
          } else if (std::none_of(p.targets.begin(), p.targets.end(),
                                  [&](const Target& x) { return x.addr == s.cfg->vip; })) {
            p.targets.push_back(Target{s.cfg->vip, 0, -1});  // ICMP: each VIP once
          }
        }
        if (c.type == ClassType::kIcmp && !found) {
          if (t == "local") {
            for (const auto* v : {&local4_, &local6_}) {
              for (const auto& a : *v) p.targets.push_back(Target{a, 0, -1});
            }
            found = true;
          } else if (auto a = IpAddr::parse(t)) {
            p.targets.push_back(Target{*a, 0, -1});
            found = true;
          }
        }
        if (!found && t != "all") {
          return ctl::Error{where + (proto ? "no " + std::string(class_type_name(c.type)) +
                                                 " service named \"" + t + "\""
                                           : "target \"" + t +
                                                 "\" is no service, \"local\" or address")};
        }
      }
      if (p.targets.empty() && c.flows > 0) {
        return ctl::Error{where + "no target matches (the config has no " +
                          std::string(class_type_name(c.type)) + " service)"};
      }
    }
    // Client frames arrive from the router that the gateway routes the clients through.
    p.router_mac4 = router_mac_for(c.clients4, &p.router4);
    p.router_mac6 = router_mac_for(c.clients6, nullptr);
    if (c.type == ClassType::kMalformed) {
      if (auto r = choose_kinds(p); !r) return r.error();
      plans_.push_back(std::move(p));
      continue;
    }
    bool need4 = false, need6 = false;
    for (const auto& t : p.targets) (t.addr.is_v4() ? need4 : need6) = true;
    if (need4 && !p.router_mac4) {
      return ctl::Error{where + "no route with a [[neighbor]] next hop covers client_prefix " +
                        c.clients4.str() + ", so the clients' router MAC is unknown"};
    }
    if (need6 && !p.router_mac6) {
      return ctl::Error{where + "no route with a [[neighbor]] next hop covers client_prefix6 " +
                        c.clients6.str() + ", so the clients' router MAC is unknown"};
    }
    plans_.push_back(std::move(p));
  }
  return true;
}

// The malformation kinds of a class: the named ones, or with "all" every kind this config can
// express (the others are left out with a warning; naming one is an error).
ctl::Result<bool> Generator::choose_kinds(ClassPlan& p) {
  const TrafficClass& c = *p.cls;
  pkt::MalformedContext probe;
  for (const auto& s : services_) {
    (s.cfg->vip.is_v4() ? probe.service4 : probe.service6) =
        pkt::Endpoint{s.cfg->vip, s.cfg->port};
  }
  if (!local4_.empty()) probe.local4 = local4_.front();
  if (!local6_.empty()) probe.local6 = local6_.front();
  const bool all = std::find(c.reasons.begin(), c.reasons.end(), "all") != c.reasons.end();
  std::vector<const pkt::MalformedKind*> wanted;
  for (const auto& r : c.reasons) {
    if (r == "all") {
      for (const auto& k : pkt::malformed_kinds()) wanted.push_back(&k);
    } else {
      wanted.push_back(pkt::find_malformed(r));
    }
  }
  for (const auto* k : wanted) {
    if (std::find(p.kinds.begin(), p.kinds.end(), k) != p.kinds.end()) continue;
    const bool v6 = k->needs & (pkt::kNeedDst6 | pkt::kNeedLocal6);
    std::string missing;
    if (!pkt::malformed_possible(*k, probe)) {
      missing = needs_text(k->needs);
    } else if (!(v6 ? p.router_mac6 : p.router_mac4)) {
      missing = std::string("a route with a [[neighbor]] next hop covering ") +
                (v6 ? c.clients6.str() : c.clients4.str());
    }
    if (missing.empty()) {
      p.kinds.push_back(k);
    } else if (all) {
      warnings_.push_back("class \"" + c.name + "\": left out " + k->name + ": it needs " +
                          missing);
    } else {
      return ctl::Error{"class \"" + c.name + "\": " + k->name + " needs " + missing +
                        " in the config"};
    }
  }
  return true;
}

bool Generator::replies_for(const ClassPlan& p, const FlowSpec& f) const {
  if (p.cls->type == ClassType::kMalformed) return false;
  const Target& t = p.targets[f.target];
  return p.cls->backend_replies && t.service >= 0 && services_[t.service].replies &&
         f.backend != dp::kNoBackend;
}

uint64_t Generator::flow_packets(const ClassPlan& p, const Target& t) const {
  const TrafficClass& c = *p.cls;
  const bool replies = c.backend_replies && t.service >= 0 && services_[t.service].replies &&
                       services_[t.service].has_backend;
  const uint64_t r = replies ? 1 : 0;
  switch (c.type) {
    case ClassType::kTcp: {
      if (c.shape == TcpShape::kSynOnly) return 1;
      uint64_t n = c.shape == TcpShape::kHandshake ? 2 + r : 0;
      n += c.data_packets * (1 + r);
      if (c.close == TcpClose::kFin) n += 2 + 2 * r;
      if (c.close == TcpClose::kRst) n += 1;
      return n;
    }
    case ClassType::kUdp: return c.requests * (1 + r);
    case ClassType::kIcmp: return c.requests;
    case ClassType::kMalformed: return 1;
  }
  return 0;
}

uint64_t Generator::class_packets(const ClassPlan& p) const {
  if (p.cls->type == ClassType::kMalformed) return p.count * p.kinds.size();
  uint64_t n = 0;
  const uint64_t k = p.targets.size();
  for (uint64_t j = 0; j < k; ++j) {
    n += (p.flows / k + (j < p.flows % k ? 1 : 0)) * flow_packets(p, p.targets[j]);
  }
  return n;
}

ctl::Result<bool> Generator::scale(uint64_t want) {
  uint64_t have = 0;
  for (const auto& p : plans_) have += class_packets(p);
  if (have == 0) return ctl::Error{"the profile describes no packets to scale"};
  // Same mix, more (or fewer) flows: every class grows by want/have, rounded up so that the
  // capture reaches `want` and is then cut there.
  for (auto& p : plans_) {
    auto grow = [&](uint64_t n) {
      return n ? uint64_t(((unsigned __int128)n * want + have - 1) / have) : 0;
    };
    if (p.cls->type == ClassType::kMalformed) p.count = grow(p.count);
    else p.flows = grow(p.flows);
  }
  uint64_t now = 0;
  for (const auto& p : plans_) now += class_packets(p);
  for (auto& p : plans_) {
    if (now >= want) break;
    if (p.cls->type == ClassType::kMalformed || p.flows == 0) continue;
    const uint64_t per_flow = std::max<uint64_t>(1, class_packets(p) / p.flows);
    p.flows += (want - now) / per_flow + 1;
    now = 0;
    for (const auto& q : plans_) now += class_packets(q);
  }
  return true;
}

ctl::Result<IpAddr> Generator::unique_client(const IpPrefix& prefix, uint8_t ns, uint16_t lo,
                                             uint16_t hi, uint16_t* port,
                                             const std::string& cls) {
  const bool v4 = prefix.addr.is_v4();
  const int fixed = v4 ? 96 + prefix.len : prefix.len;
  const int host_bits = 128 - fixed;
  // Enough attempts that a space less than ~90% full still finds a free tuple.
  constexpr int kAttempts = 64;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    IpAddr a = prefix.addr;
    const uint64_t r[2] = {rng_.next(), rng_.next()};
    for (int i = 0; i < 16; ++i) {
      const int keep = fixed - i * 8;
      if (keep >= 8) continue;
      const uint8_t mask = keep <= 0 ? 0 : uint8_t(0xff << (8 - keep));
      a.b[i] = uint8_t((a.b[i] & mask) | (uint8_t(r[i / 8] >> (i % 8 * 8)) & ~mask));
    }
    // Skip the subnet's network and broadcast (IPv4) or subnet-router anycast (IPv6) address.
    if (host_bits >= 2) {
      bool all0 = true, all1 = true;
      for (int bit = fixed; bit < 128; ++bit) {
        const bool set = a.b[bit / 8] & (0x80 >> (bit % 8));
        all0 &= !set;
        all1 &= set;
      }
      if (all0 || (v4 && all1)) continue;
    }
    *port = uint16_t(lo + rng_.below(uint64_t(hi) - lo + 1));
    uint8_t key[19];
    std::memcpy(key, a.b, 16);
    key[16] = uint8_t(*port >> 8);
    key[17] = uint8_t(*port);
    key[18] = ns;
    if (used_clients_.insert(hash64(key, sizeof key, 0x7475706c65)).second) return a;
  }
  return ctl::Error{"class \"" + cls + "\": cannot find an unused client address and port in " +
                    prefix.str() + " x [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "]; widen client_prefix or client_ports"};
}

ctl::Result<bool> Generator::expand_flows() {
  uint64_t id = 0;
  for (uint32_t ci = 0; ci < plans_.size(); ++ci) {
    const ClassPlan& p = plans_[ci];
    const TrafficClass& c = *p.cls;
    if (c.type == ClassType::kMalformed) {
      for (uint64_t n = 0; n < p.count; ++n) {
        for (uint32_t k = 0; k < p.kinds.size(); ++k) {
          FlowSpec f;
          f.cls = ci;
          f.target = k;
          f.id = id++;
          const bool v6 = p.kinds[k]->needs & (pkt::kNeedDst6 | pkt::kNeedLocal6);
          auto a = unique_client(v6 ? c.clients6 : c.clients4, pkt::kProtoTcp, c.port_min,
                                 c.port_max, &f.client_port, c.name);
          if (!a) return a.error();
          f.client = *a;
          specs_.push_back(f);
        }
      }
      continue;
    }
    const uint8_t ns = c.type == ClassType::kTcp   ? pkt::kProtoTcp
                       : c.type == ClassType::kUdp ? pkt::kProtoUdp
                                                   : pkt::kProtoIcmp;
    for (uint64_t n = 0; n < p.flows; ++n) {
      FlowSpec f;
      f.cls = ci;
      f.target = uint32_t(n % p.targets.size());
      f.id = id++;
      const Target& t = p.targets[f.target];
      auto a = unique_client(t.addr.is_v4() ? c.clients4 : c.clients6, ns, c.port_min,
                             c.port_max, &f.client_port, c.name);
      if (!a) return a.error();
      f.client = *a;
      if (t.service >= 0) f.backend = services_[t.service].pick(f.client, f.client_port);
      specs_.push_back(f);
    }
  }
  return true;
}

uint16_t Generator::data_payload(const ClassPlan& p, bool v4, Rng& rng) const {
  const TrafficClass& c = *p.cls;
  uint16_t frame = c.size.frame_bytes;
  if (c.size.imix) {
    uint64_t r = rng.below(kImixTotal);
    size_t i = 0;
    while (r >= kImixWeights[i]) r -= kImixWeights[i++];
    frame = kImixFrames[i];
  }
  const uint8_t proto = c.type == ClassType::kTcp ? pkt::kProtoTcp : pkt::kProtoUdp;
  const size_t hdrs = headers_len(v4, proto, c.vlan.has_value()) + kFcsLen;
  // At least one byte: a data segment without data would be a pure ACK.
  return uint16_t(frame > hdrs + 1 ? frame - hdrs : 1);
}

void Generator::make_steps(const ClassPlan& p, const FlowSpec& f, Rng& rng,
                           std::vector<Step>* out) const {
  const TrafficClass& c = *p.cls;
  const bool r = replies_for(p, f);
  const bool v4 = f.client.is_v4();
  auto add = [&](Dir d, uint8_t flags, uint16_t payload, uint32_t seq, uint32_t ack) {
    if (d == kFromBackend && !r) return;  // the backend's packets exist only as seq numbers
    out->push_back(Step{d, flags, payload, seq, ack});
  };
  switch (c.type) {
    case ClassType::kTcp: {
      uint32_t cseq = rng.u32(), sseq = rng.u32();
      if (c.shape == TcpShape::kSynOnly) {
        add(kFromClient, pkt::kTcpSyn, 0, cseq, 0);
        return;
      }
      if (c.shape == TcpShape::kHandshake) {  // RFC 9293 3.5
        add(kFromClient, pkt::kTcpSyn, 0, cseq, 0);
        add(kFromBackend, pkt::kTcpSyn | pkt::kTcpAck, 0, sseq, cseq + 1);
        add(kFromClient, pkt::kTcpAck, 0, cseq + 1, sseq + 1);
      }
      ++cseq;
      ++sseq;
      for (uint32_t i = 0; i < c.data_packets; ++i) {
        const uint16_t lc = data_payload(p, v4, rng), ls = data_payload(p, v4, rng);
        add(kFromClient, pkt::kTcpPsh | pkt::kTcpAck, lc, cseq, sseq);
        cseq += lc;
        add(kFromBackend, pkt::kTcpPsh | pkt::kTcpAck, ls, sseq, cseq);
        sseq += ls;
      }
      if (c.close == TcpClose::kFin) {  // RFC 9293 3.6: both sides close
        add(kFromClient, pkt::kTcpFin | pkt::kTcpAck, 0, cseq, sseq);
        ++cseq;
        add(kFromBackend, pkt::kTcpAck, 0, sseq, cseq);
        add(kFromBackend, pkt::kTcpFin | pkt::kTcpAck, 0, sseq, cseq);
        ++sseq;
        add(kFromClient, pkt::kTcpAck, 0, cseq, sseq);
      } else if (c.close == TcpClose::kRst) {
        add(kFromClient, pkt::kTcpRst | pkt::kTcpAck, 0, cseq, sseq);
      }
      return;
    }
    case ClassType::kUdp:
      for (uint32_t i = 0; i < c.requests; ++i) {
        add(kFromClient, 0, data_payload(p, v4, rng), 0, 0);
        add(kFromBackend, 0, data_payload(p, v4, rng), 0, 0);
      }
      return;
    case ClassType::kIcmp:
      for (uint32_t i = 0; i < c.requests; ++i) {
        add(kFromClient, 0, data_payload(p, v4, rng), i + 1, 0);
      }
      return;
    case ClassType::kMalformed:
      add(kFromClient, 0, 0, 0, 0);
      return;
  }
}

Bytes Generator::build_malformed(const ClassPlan& p, const FlowSpec& f) const {
  const pkt::MalformedKind& k = *p.kinds[f.target];
  Rng rng(flow_seed(seed_, f.id));
  pkt::MalformedContext ctx;
  ctx.gateway_mac = gateway_mac_;
  const bool v6 = k.needs & (pkt::kNeedDst6 | pkt::kNeedLocal6);
  ctx.peer_mac = v6 ? *p.router_mac6 : *p.router_mac4;
  ctx.peer4 = p.router4;
  // Each kind uses the client of its own family only.
  (f.client.is_v4() ? ctx.client4 : ctx.client6) = f.client;
  ctx.client_port = f.client_port;
  ctx.seq = rng.u32();
  // The first service of each kind, in config order; TCP preferred as most faults ride a SYN.
  auto first = [&](bool want_v4, std::optional<uint8_t> proto) -> std::optional<pkt::Endpoint> {
    for (const auto& s : services_) {
      if (s.cfg->vip.is_v4() == want_v4 && (!proto || s.proto == *proto)) {
        return pkt::Endpoint{s.cfg->vip, s.cfg->port};
      }
    }
    return std::nullopt;
  };
  ctx.service4 = first(true, pkt::kProtoTcp);
  if (!ctx.service4) ctx.service4 = first(true, std::nullopt);
  ctx.service6 = first(false, pkt::kProtoTcp);
  if (!ctx.service6) ctx.service6 = first(false, std::nullopt);
  ctx.udp_service4 = first(true, pkt::kProtoUdp);
  if (!local4_.empty()) ctx.local4 = local4_.front();
  if (!local6_.empty()) ctx.local6 = local6_.front();
  ctx.transit4 = pkt::Endpoint{profile_.transit_addr, profile_.transit_port};
  return k.build(ctx);
}

Bytes Generator::build(const ClassPlan& p, const FlowSpec& f, ActiveFlow& a, const Step& s) const {
  const TrafficClass& c = *p.cls;
  if (c.type == ClassType::kMalformed) return build_malformed(p, f);
  const Target& t = p.targets[f.target];
  const bool v4 = f.client.is_v4();
  const bool from_backend = s.dir == kFromBackend;
  pkt::EthHdr eth;
  eth.dst = gateway_mac_;
  eth.vlan_tci = c.vlan;
  pkt::IpHdr ip;
  uint16_t sport, dport;
  if (from_backend) {
    const Service& svc = services_[t.service];
    eth.src = svc.macs[f.backend];
    ip.src = svc.lb[f.backend].address;
    ip.dst = f.client;
    ip.ttl = kBackendTtl;
    ip.id = a.ip_id_backend++;
    sport = svc.lb[f.backend].port;
    dport = f.client_port;
  } else {
    eth.src = v4 ? *p.router_mac4 : *p.router_mac6;
    ip.src = f.client;
    ip.dst = t.addr;
    ip.ttl = c.ttl;
    ip.id = a.ip_id_client++;
    sport = f.client_port;
    dport = t.port;
  }
  if (v4) ip.flow_label = 0;
  else ip.flow_label = uint32_t(f.id * 0x9e3779b1u + (from_backend ? 1 : 0)) & 0xfffff;
  const std::span<const uint8_t> payload(pattern_.data() + (a.pattern_off + a.pos * 61) % 2048,
                                         s.payload);
  switch (c.type) {
    case ClassType::kTcp: {
      ip.df = true;  // Linux sets DF on TCP (path MTU discovery)
      pkt::TcpHdr tcp;
      tcp.sport = sport;
      tcp.dport = dport;
      tcp.seq = s.seq;
      tcp.ack = s.ack;
      tcp.flags = s.tcp_flags;
      if (s.tcp_flags & pkt::kTcpSyn) {
        tcp.window = from_backend ? kSynAckWindow : kSynWindow;
        tcp.options = pkt::tcp_options(
            {.mss = v4 ? kMss4 : kMss6, .wscale = kWscale, .sack_permitted = true});
      } else {
        tcp.window = from_backend ? kServerWindow : kClientWindow;
      }
      return pkt::build_tcp(eth, ip, tcp, payload);
    }
    case ClassType::kUdp: {
      pkt::UdpHdr udp;
      udp.sport = sport;
      udp.dport = dport;
      return pkt::build_udp(eth, ip, udp, payload);
    }
    case ClassType::kIcmp:
      return pkt::build_icmp_echo(eth, ip, false, f.client_port, uint16_t(s.seq), payload);
    case ClassType::kMalformed:
      break;
  }
  return {};
}

void Generator::count(const ClassPlan& p, const FlowSpec& f, const ActiveFlow& a,
                      const Step& s) {
  const TrafficClass& c = *p.cls;
  ClassCount& cc = class_counts_[f.cls];
  ++cc.packets;
  if (a.pos == 0) ++cc.flows;
  if (c.type == ClassType::kMalformed) {
    ++malformed_packets_;
    ++malformed_counts_[p.kinds[f.target] - pkt::malformed_kinds().data()].second;
    return;
  }
  const Target& t = p.targets[f.target];
  if (s.dir == kFromBackend) ++reply_packets_;
  else ++client_packets_;
  if (c.type == ClassType::kIcmp) {
    for (auto& [addr, n] : echo_counts_) {
      if (addr == t.addr) {
        ++n;
        return;
      }
    }
    echo_counts_.emplace_back(t.addr, 1);
    return;
  }
  ServiceCount& sc = service_counts_[t.service];
  BackendCount* bc = f.backend == dp::kNoBackend ? nullptr : &sc.backends[f.backend];
  if (a.pos == 0) {
    ++sc.flows;
    if (bc) ++bc->flows;
    else ++sc.no_backend_flows;
  }
  if (s.dir == kFromBackend) {
    ++sc.reply_packets;
    if (bc) ++bc->reply_packets;
  } else {
    ++sc.packets;
    if (bc) ++bc->packets;
  }
}

std::string Generator::sidecar(uint64_t packets, uint64_t bytes, uint64_t first_ts,
                               uint64_t last_ts) {
  Json j;
  j["generator"] = "pcapgen";
  j["config"] = config_.path;
  j["profile"] = profile_.path;
  j["pcap"] = options_.out_path;
  j["seed"] = seed_;
  j["rate_pps"] = rate_pps_;
  j["first_ts_ns"] = first_ts;
  j["last_ts_ns"] = last_ts;
  j["packets"] = packets;
  j["bytes"] = bytes;
  j["client_packets"] = client_packets_;
  j["backend_reply_packets"] = reply_packets_;
  j["malformed_packets"] = malformed_packets_;
  Json classes = Json::object();
  for (size_t i = 0; i < plans_.size(); ++i) {
    const TrafficClass& c = *plans_[i].cls;
    classes[c.name] = {{"type", class_type_name(c.type)},
                       {"flows", class_counts_[i].flows},
                       {"packets", class_counts_[i].packets}};
  }
  j["classes"] = classes;
  Json malformed = Json::object();
  for (const auto& [name, n] : malformed_counts_) {
    if (n || std::any_of(plans_.begin(), plans_.end(), [&](const ClassPlan& p) {
          return std::any_of(p.kinds.begin(), p.kinds.end(),
                             [&](const pkt::MalformedKind* k) { return name == k->name; });
        })) {
      malformed[name] = n;
    }
  }
  j["malformed"] = malformed;
  Json services = Json::object();
  for (size_t i = 0; i < services_.size(); ++i) {
    const Service& s = services_[i];
    const ServiceCount& sc = service_counts_[i];
    Json backends = Json::object();
    for (size_t b = 0; b < s.lb.size(); ++b) {
      backends[endpoint_str(s.lb[b].address, s.lb[b].port)] = {
          {"weight", s.lb[b].weight},
          {"flows", sc.backends[b].flows},
          {"packets", sc.backends[b].packets},
          {"reply_packets", sc.backends[b].reply_packets}};
    }
    services[s.cfg->name] = {{"vip", s.cfg->vip.str()},
                             {"port", s.cfg->port},
                             {"protocol", s.proto == pkt::kProtoTcp ? "tcp" : "udp"},
                             {"mode", dp::mode_name(s.cfg->mode)},
                             {"flows", sc.flows},
                             {"packets", sc.packets},
                             {"reply_packets", sc.reply_packets},
                             {"no_backend_flows", sc.no_backend_flows},
                             {"backends", backends}};
  }
  j["services"] = services;
  Json echo = Json::object();
  for (const auto& [addr, n] : echo_counts_) echo[addr.str()] = n;
  j["icmp_echo"] = echo;
  return j.dump(2) + "\n";
}

// no_service must reach a transit address: one that is neither a VIP nor the gateway's.
ctl::Result<bool> Generator::check_transit() const {
  const pkt::MalformedKind* k = pkt::find_malformed("no_service");
  const bool used = std::any_of(plans_.begin(), plans_.end(), [&](const ClassPlan& p) {
    return std::find(p.kinds.begin(), p.kinds.end(), k) != p.kinds.end();
  });
  if (!used) return true;
  const IpAddr& t = profile_.transit_addr;
  for (const auto& s : services_) {
    if (s.cfg->vip == t) {
      return ctl::Error{"transit " + t.str() + " is the VIP of service " + s.cfg->name +
                        "; no_service needs an address that is no VIP (profile key transit)"};
    }
  }
  if (std::find(local4_.begin(), local4_.end(), t) != local4_.end()) {
    return ctl::Error{"transit " + t.str() + " is a local address of the gateway"};
  }
  return true;
}

ctl::Result<Generated> Generator::run() {
  rng_ = Rng(flow_seed(seed_, ~0ull));
  if (auto r = resolve_world(); !r) return r.error();
  if (auto r = plan_classes(); !r) return r.error();
  for (const auto& k : pkt::malformed_kinds()) malformed_counts_.emplace_back(k.name, 0);
  const uint64_t want = options_.packets.value_or(profile_.packets);
  if (want) {
    if (auto r = scale(want); !r) return r.error();
  }
  uint64_t total = 0;
  for (const auto& p : plans_) total += class_packets(p);
  const uint64_t limit = want ? std::min(want, total) : total;
  class_counts_.resize(plans_.size());
  if (auto r = expand_flows(); !r) return r.error();
  if (auto r = check_transit(); !r) return r.error();

  Rng pattern_rng(flow_seed(seed_, ~1ull));
  pattern_.resize(kPatternLen);
  for (auto& b : pattern_) b = uint8_t(pattern_rng.next());

  // Flows start in a shuffled order so classes mix in time; `concurrency` of them are in
  // progress at once and each packet comes from a random one of those, so flows overlap
  // while each flow's own packets stay in order.
  std::vector<uint32_t> order(specs_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng_.below(i)]);

  auto writer = pkt::PcapWriter::open(options_.out_path);
  if (!writer) return writer.error();
  std::vector<ActiveFlow> active;
  active.reserve(profile_.concurrency);
  size_t next = 0;
  uint64_t emitted = 0, bytes = 0, first_ts = 0, last_ts = 0;
  const uint64_t start = profile_.start_ns;
  while (emitted < limit) {
    while (active.size() < profile_.concurrency && next < order.size()) {
      ActiveFlow a;
      a.spec = order[next++];
      const FlowSpec& f = specs_[a.spec];
      Rng frng(flow_seed(seed_, f.id));
      a.ip_id_client = uint16_t(frng.next());
      a.ip_id_backend = uint16_t(frng.next());
      a.pattern_off = uint32_t(frng.below(kPatternLen / 2));
      make_steps(plans_[f.cls], f, frng, &a.steps);
      if (!a.steps.empty()) active.push_back(std::move(a));
    }
    if (active.empty()) break;
    const size_t slot = rng_.below(active.size());
    ActiveFlow& a = active[slot];
    const FlowSpec& f = specs_[a.spec];
    const ClassPlan& p = plans_[f.cls];
    const Step& s = a.steps[a.pos];
    const Bytes frame = build(p, f, a, s);
    // Timestamps at the packet rate; computed from the index so they never drift.
    const uint64_t ts = start + uint64_t((unsigned __int128)emitted * 1000000000u / rate_pps_);
    if (!writer->write(ts, frame)) break;
    count(p, f, a, s);
    if (emitted == 0) first_ts = ts;
    last_ts = ts;
    ++emitted;
    bytes += frame.size();
    if (++a.pos == a.steps.size()) {
      active[slot] = std::move(active.back());
      active.pop_back();
    }
  }
  if (auto r = writer->close(); !r) return r.error();

  Generated g;
  g.packets = emitted;
  g.sidecar_json = sidecar(emitted, bytes, first_ts, last_ts);
  g.warnings = warnings_;
  const std::string side = options_.out_path + ".json";
  std::ofstream out(side, std::ios::binary | std::ios::trunc);
  out << g.sidecar_json;
  if (!out.flush()) return ctl::Error{"cannot write " + side};
  return g;
}

}  // namespace

ctl::Result<Generated> generate(const ctl::Config& config, const Profile& profile,
                                const Options& options) {
  Generator g(config, profile, options);
  return g.run();
}

}  // namespace meshgate::pcapgen
