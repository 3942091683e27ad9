// Frame builders and expectations shared by the dataplane unit tests (demo topology).
#pragma once

#include <arpa/inet.h>

#include <map>
#include <string>
#include <vector>

#include "control/config/config.h"
#include "control/snapshot/maglev.h"
#include "dataplane/lb/lb.h"
#include "tools/pktlib/build.h"

namespace meshgate::test {

inline IpAddr A(const char* s) { return *IpAddr::parse(s); }
inline MacAddr M(const char* s) { return *MacAddr::parse(s); }

// The demo topology's gateway port and upstream router.
inline const MacAddr kGw = M("02:00:00:00:00:01");
inline const MacAddr kRouter = M("02:00:00:00:00:fe");
inline const pkt::EthHdr kToGw{kGw, kRouter};
constexpr uint64_t kT0 = 1'700'000'000'000'000'000ull;  // ns
constexpr uint64_t kSec = 1'000'000'000ull;

inline pkt::Bytes tcp_frame(const char* src, uint16_t sport, const char* dst, uint16_t dport, uint8_t flags,
                uint8_t ttl = 64, const pkt::EthHdr& eth = kToGw, size_t payload = 0) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  ip.ttl = ttl;
  pkt::TcpHdr t;
  t.sport = sport;
  t.dport = dport;
  t.flags = flags;
  t.seq = 1000;
  return pkt::build_tcp(eth, ip, t, pkt::Bytes(payload, 0xab));
}

inline pkt::Bytes udp_frame(const char* src, uint16_t sport, const char* dst, uint16_t dport,
                const pkt::EthHdr& eth = kToGw, pkt::Csum csum = pkt::Csum::kValid) {
  pkt::IpHdr ip;
  ip.src = A(src);
  ip.dst = A(dst);
  pkt::UdpHdr u;
  u.sport = sport;
  u.dport = dport;
  u.csum = csum;
  return pkt::build_udp(eth, ip, u, pkt::Bytes{1, 2, 3, 4, 5});
}

// An Ethernet/IPv4 ARP message (op 1 request, 2 reply).
inline pkt::ArpHdr arp_msg(uint16_t op, const MacAddr& sha, const char* spa, const MacAddr& tha,
                           const char* tpa) {
  pkt::ArpHdr a;
  a.op = op;
  a.sha = sha;
  a.spa = A(spa);
  a.tha = tha;
  a.tpa = A(tpa);
  return a;
}

// The backend the dataplane must pick for a client tuple, from the config alone. Tables are
// built once per backend set (keyed by content, not by config address).
inline std::string expected_backend(const ctl::Config& cfg, const char* service, const char* client,
                             uint16_t cport) {
  static std::map<std::string, std::vector<uint32_t>> tables;
  for (const auto& s : cfg.services) {
    if (s.name != service) continue;
    const uint32_t size = s.table_size ? s.table_size : ctl::lb_auto_table_size(s.backends.size());
    std::string key = std::to_string(size);
    for (const auto& b : s.backends) {
      key += " " + b.address.str() + ":" + std::to_string(b.port) + "/" + std::to_string(b.weight);
    }
    auto& table = tables[key];
    if (table.empty()) {
      std::vector<ctl::LbBackend> bs;
      for (const auto& b : s.backends) bs.push_back({b.address, b.port, b.weight});
      table = ctl::lb_build_table(bs, size);
    }
    // Session affinity hashes the client's address alone (dp::affinity_hash).
    const bool sticky = s.session_affinity == ctl::SessionAffinity::kClientIp;
    const uint32_t h = dp::lb_flow_hash(A(client), s.vip, sticky ? 0 : htons(cport),
                                        htons(s.port), uint8_t(s.protocol));
    const auto& b = s.backends[dp::lb_lookup(table.data(), size, h)];
    return b.address.str() + ":" + std::to_string(b.port);
  }
  return "";
}


}  // namespace meshgate::test
