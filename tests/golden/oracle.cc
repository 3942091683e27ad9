#include "tests/golden/oracle.h"

#include <arpa/inet.h>

#include <cstring>

#include "control/snapshot/maglev.h"
#include "dataplane/lb/lb.h"
#include "tools/pktlib/checksum.h"
#include "tools/pktlib/decode.h"

namespace meshgate::golden {
namespace {

// TTL / hop limit of packets the gateway originates (echo replies): worker_test.cc and the
// Linux default (net.ipv4.ip_default_ttl).
constexpr uint8_t kOwnTtl = 64;
constexpr uint16_t kArpOpRequest = 1;
constexpr uint16_t kArpOpReply = 2;
// RFC 4861 4.1-4.5: router solicitation (133) .. redirect (137).
constexpr uint8_t kNdpFirst = 133;
constexpr uint8_t kNdpLast = 137;

std::string flags_str(uint8_t f) {
  std::string s;
  const char* names = "FSRPAUEC";
  for (int i = 0; i < 8; ++i) {
    if (f & (1 << i)) s += names[i];
  }
  return s.empty() ? "-" : s;
}

std::string proto_str(uint8_t p) {
  switch (p) {
    case pkt::kProtoTcp: return "tcp";
    case pkt::kProtoUdp: return "udp";
    case pkt::kProtoIcmp: return "icmp";
    case pkt::kProtoIcmp6: return "icmp6";
    default: return "proto " + std::to_string(p);
  }
}

// "tcp 192.0.2.7:40001 -> 203.0.113.10:80 [S] ttl 64, 74 bytes"
std::string describe(const pkt::Decoded& d) {
  std::string s;
  if (d.l3 == pkt::L3Kind::kArp) {
    s = std::string("arp ") + (d.arp_op == kArpOpRequest ? "who-has " : "reply ") +
        d.arp_tpa.str() + " tell " + d.arp_spa.str();
  } else if (d.is_ip()) {
    s = proto_str(d.l4_proto) + " " + d.src.str();
    if (d.l4_proto == pkt::kProtoTcp || d.l4_proto == pkt::kProtoUdp) {
      s += ":" + std::to_string(d.sport) + " -> " + d.dst.str() + ":" + std::to_string(d.dport);
    } else {
      s += " -> " + d.dst.str();
    }
    if (d.l4_proto == pkt::kProtoTcp && d.has_l4) s += " [" + flags_str(d.tcp_flags) + "]";
    if ((d.l4_proto == pkt::kProtoIcmp || d.l4_proto == pkt::kProtoIcmp6) && d.has_l4) {
      s += " type " + std::to_string(d.icmp_type) + " id " + std::to_string(d.icmp_id) +
           " seq " + std::to_string(d.icmp_seq);
    }
    s += " ttl " + std::to_string(d.ttl);
    if (d.fragment) s += " fragment";
  } else {
    s = "ethertype " + std::to_string(d.ethertype);
  }
  if (d.vlan_tags) s += " vlan " + std::to_string(d.vlan_tci & 0xfff);
  return s + ", " + std::to_string(d.frame_len) + " bytes";
}

// Recomputes, from scratch, the IPv4 header checksum and the TCP / UDP / ICMP / ICMPv6 checksum
// of an edited frame. A zero UDP checksum over IPv4 ("none", RFC 768) stays zero; a computed
// zero UDP checksum is sent as 0xffff (RFC 768).
void recompute_checksums(pkt::Bytes& f) {
  const pkt::Decoded d = pkt::decode(f);
  if (d.l3 == pkt::L3Kind::kIpv4) pkt::ipv4_update_checksum(f, d.l3_off);
  if (!d.has_l4) return;
  uint8_t* l4 = f.data() + d.l4_off;
  const std::span<const uint8_t> seg{l4, d.l4_len};
  const bool v4 = d.l3 == pkt::L3Kind::kIpv4;
  switch (d.l4_proto) {
    case pkt::kProtoTcp:
      pkt::put16(l4 + 16, 0);
      pkt::put16(l4 + 16, pkt::l4_checksum(d.src, d.dst, pkt::kProtoTcp, seg));
      break;
    case pkt::kProtoUdp: {
      if (v4 && pkt::get16(l4 + 6) == 0) break;
      pkt::put16(l4 + 6, 0);
      const uint16_t c = pkt::l4_checksum(d.src, d.dst, pkt::kProtoUdp, seg);
      pkt::put16(l4 + 6, c == 0 ? 0xffff : c);
      break;
    }
    case pkt::kProtoIcmp:
      if (!v4) break;
      pkt::put16(l4 + 2, 0);
      pkt::put16(l4 + 2, pkt::inet_checksum(seg));
      break;
    case pkt::kProtoIcmp6:
      if (v4) break;
      pkt::put16(l4 + 2, 0);
      pkt::put16(l4 + 2, pkt::l4_checksum(d.src, d.dst, pkt::kProtoIcmp6, seg));
      break;
    default:
      break;
  }
}

void set_eth(pkt::Bytes& f, const MacAddr& dst, const MacAddr& src) {
  std::memcpy(f.data(), dst.b.data(), 6);
  std::memcpy(f.data() + 6, src.b.data(), 6);
}

// Overwrites the source (or destination) address of the IP header at `l3_off`.
void set_addr(pkt::Bytes& f, const pkt::Decoded& d, bool dst, const IpAddr& a) {
  uint8_t* ip = f.data() + d.l3_off;
  if (d.l3 == pkt::L3Kind::kIpv4) std::memcpy(ip + (dst ? 16 : 12), a.v4_ptr(), 4);
  else std::memcpy(ip + (dst ? 24 : 8), a.b, 16);
}

void set_ttl(pkt::Bytes& f, const pkt::Decoded& d, uint8_t ttl) {
  f[d.l3_off + (d.l3 == pkt::L3Kind::kIpv4 ? 8 : 7)] = ttl;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kForward: return "forward";
    case Verdict::kReverse: return "reverse";
    case Verdict::kEchoReply: return "echo_reply";
    case Verdict::kArpReply: return "arp_reply";
    case Verdict::kConsumed: return "consumed";
    case Verdict::kDrop: return "drop";
    case Verdict::kIcmpError: return "icmp_error";
    case Verdict::kUnmodelled: return "unmodelled";
  }
  return "?";
}

Oracle::Oracle(const ctl::Config& cfg) : cfg_(cfg) {
  if (!cfg.ports.empty() && cfg.ports[0].mac) {
    port_mac_ = *cfg.ports[0].mac;
    have_port_mac_ = true;
    mtu_ = cfg.ports[0].mtu;
  }
  for (const auto& s : cfg.services) {
    std::vector<ctl::LbBackend> lb;
    for (const auto& b : s.backends) {
      lb.push_back(ctl::LbBackend{b.address, b.port, b.weight});
      totals_.backends[s.name][endpoint(b.address, b.port)] = BackendTotals{};
    }
    const uint32_t size = s.table_size ? s.table_size : ctl::lb_auto_table_size(lb.size());
    services_.push_back(Service{&s, ctl::lb_build_table(lb, size)});
  }
}

std::string Oracle::endpoint(const IpAddr& a, uint16_t port) const {
  return a.is_v4() ? a.str() + ":" + std::to_string(port)
                   : "[" + a.str() + "]:" + std::to_string(port);
}

bool Oracle::is_local(const IpAddr& a) const {
  for (const auto& p : cfg_.ports[0].addresses) {
    if (p.addr == a) return true;
  }
  return false;
}

bool Oracle::is_vip(const IpAddr& a) const {
  for (const auto& s : cfg_.services) {
    if (s.vip == a) return true;
  }
  return false;
}

void Oracle::drop(Expectation& e, const char* reason) {
  e.verdict = Verdict::kDrop;
  e.drop_reason = reason;
  e.description += ": drop " + e.drop_reason;
  ++totals_.drops[e.drop_reason];
}

void Oracle::unmodelled(Expectation& e, const std::string& why) {
  e.verdict = Verdict::kUnmodelled;
  e.description += ": NOT MODELLED: " + why;
}

bool Oracle::route(Expectation& e, const IpAddr& dst, uint32_t ip_len, MacAddr* mac) {
  // Longest prefix match over the port's connected prefixes and the configured routes.
  int best = -1;
  IpAddr next_hop;
  for (const auto& p : cfg_.ports[0].addresses) {
    if (p.contains(dst) && int(p.len) > best) {
      best = p.len;
      next_hop = dst;  // on link
    }
  }
  for (const auto& r : cfg_.routes) {
    if (r.prefix.contains(dst) && int(r.prefix.len) > best) {
      best = r.prefix.len;
      next_hop = r.via;
    }
  }
  if (best < 0) {
    drop(e, "no_route");
    return false;
  }
  if (ip_len > mtu_) {
    drop(e, "mtu_exceeded");
    return false;
  }
  for (const auto& n : cfg_.neighbors) {
    if (n.address == next_hop) {
      *mac = n.mac;
      return true;
    }
  }
  unmodelled(e, "next hop " + next_hop.str() + " has no static neighbor (ARP/NDP resolution)");
  return false;
}

void Oracle::time_exceeded(Expectation& e, const pkt::Bytes& frame, const pkt::Decoded& d) {
  drop(e, "ttl_exceeded");
  icmp_error(e, frame, d, d.l3 == pkt::L3Kind::kIpv4 ? pkt::kIcmpTimeExceeded
                                                      : pkt::kIcmp6TimeExceeded, 0, 0);
}

void Oracle::icmp_error(Expectation& e, const pkt::Bytes& frame, const pkt::Decoded& d,
                        uint8_t type, uint8_t code, uint32_t mtu) {
  // The error is rate-limited (1000/s after a burst of 50); captures stay below the burst.
  if (totals_.generated >= 50) {
    unmodelled(e, "more ICMP errors than the rate limiter's burst");
    return;
  }
  const bool v4 = d.l3 == pkt::L3Kind::kIpv4;
  // From the port address facing the sender: one in its prefix, else the first of its family.
  const IpAddr* from = nullptr;
  for (const auto& p : cfg_.ports[0].addresses) {
    if (p.addr.is_v4() != v4) continue;
    if (p.contains(d.src)) {
      from = &p.addr;
      break;
    }
    if (!from) from = &p.addr;
  }
  MacAddr mac;
  if (!from || !route(e, d.src, 0, &mac)) return;
  // RFC 1812 §4.3.2.3 / RFC 4443 §2.4(c): quote as much as fits in 576 / 1280 bytes.
  const size_t quote = std::min<size_t>(d.ip_len, v4 ? 576 - 28 : 1280 - 48);
  const std::span<const uint8_t> offending(frame.data() + d.l3_off, quote);
  pkt::IpHdr ip;
  ip.src = *from;
  ip.dst = d.src;
  ip.ttl = 64;
  ip.tos = v4 ? 0xc0 : 0;
  pkt::IcmpHdr ic;
  ic.type = type;
  ic.code = code;
  ic.rest = mtu;  // next-hop MTU (RFC 1191: low 16 bits) / packet too big MTU (RFC 4443)
  e.output = pkt::build_icmp({mac, port_mac_}, ip, ic, offending);
  e.verdict = Verdict::kIcmpError;
  e.description += " + ICMP " + std::to_string(type) + "/" + std::to_string(code) + " from " +
                   from->str();
  ++totals_.generated;
}

Expectation Oracle::next(const pkt::Bytes& frame) {
  Expectation e;
  e.index = index_++;
  e.input = frame;
  auto finish = [&](Expectation& x) -> Expectation {
    if (x.sends()) ++totals_.sent;
    if (x.verdict == Verdict::kConsumed) ++totals_.consumed;
    return std::move(x);
  };

  if (!have_port_mac_) {
    unmodelled(e, "port[0] has no mac in the config");
    return finish(e);
  }
  // L2 first: a unicast frame for another MAC is not looked at any further.
  if (frame.size() >= pkt::kEthHeaderLen && !(frame[0] & 1) &&
      std::memcmp(frame.data(), port_mac_.b.data(), 6) != 0) {
    e.description = "frame to " + MacAddr{{frame[0], frame[1], frame[2], frame[3], frame[4],
                                           frame[5]}}.str();
    drop(e, "l2_not_for_us");
    return finish(e);
  }
  const pkt::Decoded d = pkt::decode(frame);
  e.description = describe(d);
  if (!d.ok()) {
    drop(e, d.error);
    return finish(e);
  }

  // ---- ARP (RFC 826) ----
  if (d.l3 == pkt::L3Kind::kArp) {
    if (d.arp_op == kArpOpReply) {
      e.verdict = Verdict::kConsumed;
      e.description += ": consumed";
      return finish(e);
    }
    if (!is_local(d.arp_tpa) && !is_vip(d.arp_tpa)) {
      drop(e, "arp_not_for_us");
      return finish(e);
    }
    pkt::Bytes out = frame;
    uint8_t* a = out.data() + d.l3_off;
    pkt::put16(a + 6, kArpOpReply);
    std::memcpy(a + 8, port_mac_.b.data(), 6);      // sender hardware: us
    std::memcpy(a + 14, d.arp_tpa.v4_ptr(), 4);     // sender protocol: the address asked for
    std::memcpy(a + 18, d.arp_sha.b.data(), 6);     // target: the requester
    std::memcpy(a + 24, d.arp_spa.v4_ptr(), 4);
    set_eth(out, d.arp_sha, port_mac_);
    e.output = std::move(out);
    e.verdict = Verdict::kArpReply;
    e.description += ": ARP reply";
    ++totals_.arp_replies;
    return finish(e);
  }

  // ---- IP ----
  if (d.l3 == pkt::L3Kind::kIpv6 && d.l4_proto == pkt::kProtoIcmp6 && d.has_l4 &&
      d.icmp_type >= kNdpFirst && d.icmp_type <= kNdpLast) {
    unmodelled(e, "neighbor discovery");
    return finish(e);
  }
  const bool tcp_udp =
      d.has_l4 && (d.l4_proto == pkt::kProtoTcp || d.l4_proto == pkt::kProtoUdp);
  if (tcp_udp) {
    const Service* svc = nullptr;
    size_t si = 0;
    for (; si < services_.size(); ++si) {
      const auto& s = *services_[si].cfg;
      if (s.vip == d.dst && s.port == d.dport && uint8_t(s.protocol) == d.l4_proto) {
        svc = &services_[si];
        break;
      }
    }
    const Key key{d.src, d.sport, d.dst, d.dport, d.l4_proto};
    const Flow* flow = nullptr;
    bool reverse = false;
    if (svc) {
      if (d.fragment) {
        unmodelled(e, "a first fragment toward a service");
        return finish(e);
      }
      if (d.ttl <= 1) {
        time_exceeded(e, frame, d);
        return finish(e);
      }
      auto it = original_.find(key);
      if (it == original_.end()) {
        // A new flow: Maglev over the service's backends, keyed by the client's 5-tuple.
        const uint32_t h = dp::lb_flow_hash(d.src, d.dst, htons(d.sport), htons(d.dport),
                                            d.l4_proto);
        const uint32_t bi = svc->table.empty() || svc->table[0] == dp::kNoBackend
                                ? dp::kNoBackend
                                : dp::lb_lookup(svc->table.data(), uint32_t(svc->table.size()), h);
        if (bi == dp::kNoBackend) {
          drop(e, "no_backend");
          return finish(e);
        }
        const auto& b = svc->cfg->backends[bi];
        it = original_.emplace(key, Flow{si, bi}).first;
        reply_.emplace(Key{b.address, b.port, d.src, d.sport, d.l4_proto}, Flow{si, bi});
        ++totals_.flows;
        ++totals_.backends[svc->cfg->name][endpoint(b.address, b.port)].flows;
      }
      flow = &it->second;
    } else if (auto it = reply_.find(key); it != reply_.end()) {
      if (d.ttl <= 1) {
        time_exceeded(e, frame, d);
        return finish(e);
      }
      flow = &it->second;
      reverse = true;
    }
    if (flow) {
      const auto& sc = *services_[flow->service].cfg;
      const auto& b = sc.backends[flow->backend];
      e.service = sc.name;
      e.backend = endpoint(b.address, b.port);
      // The gateway counts a packet for its backend when it translates it.
      auto& bt = totals_.backends[sc.name][e.backend];
      ++bt.packets;
      (reverse ? bt.reply_bytes : bt.bytes) += frame.size();
      const auto in_csum = pkt::verify_checksums(frame);
      if (!in_csum.ok()) {
        unmodelled(e, "translating a packet whose checksum is already wrong");
        return finish(e);
      }
      const IpAddr& new_dst = reverse ? d.dst : b.address;
      MacAddr mac;
      if (!route(e, new_dst, d.ip_len, &mac)) {
        // Too big to forward with DF set (always, for IPv6): the sender learns the MTU. The
        // error quotes the packet as the sender sent it (the gateway translates its quote back).
        const bool df = d.l3 == pkt::L3Kind::kIpv6 || d.df;
        if (e.drop_reason == "mtu_exceeded" && df) {
          icmp_error(e, frame, d, d.l3 == pkt::L3Kind::kIpv4 ? 3 : pkt::kIcmp6PacketTooBig,
                     d.l3 == pkt::L3Kind::kIpv4 ? 4 : 0, mtu_);
        }
        return finish(e);
      }
      pkt::Bytes out = frame;
      if (reverse) {
        set_addr(out, d, false, sc.vip);
        pkt::put16(out.data() + d.l4_off, sc.port);
      } else {
        set_addr(out, d, true, b.address);
        pkt::put16(out.data() + d.l4_off + 2, b.port);
      }
      set_ttl(out, d, uint8_t(d.ttl - 1));
      recompute_checksums(out);
      set_eth(out, mac, port_mac_);
      e.output = std::move(out);
      e.verdict = reverse ? Verdict::kReverse : Verdict::kForward;
      e.description += reverse ? ": reverse from " + e.backend + " of " + sc.name
                               : ": forward to " + sc.name + " backend " + e.backend;
      return finish(e);
    }
  }

  if (d.fragment && !d.has_l4) {
    // A later fragment: its first never came in these captures. Fragments to the gateway's own
    // address are not reassembled.
    drop(e, is_local(d.dst) ? "fragment_unsupported" : "fragment_no_first");
    return finish(e);
  }
  if (is_local(d.dst) || is_vip(d.dst)) {
    if (d.fragment) {
      unmodelled(e, "a first fragment to the gateway");
      return finish(e);
    }
    const bool v4 = d.l3 == pkt::L3Kind::kIpv4;
    const bool echo = d.has_l4 && d.icmp_code == 0 &&
                      (v4 ? d.l4_proto == pkt::kProtoIcmp && d.icmp_type == pkt::kIcmpEchoRequest
                          : d.l4_proto == pkt::kProtoIcmp6 &&
                                d.icmp_type == pkt::kIcmp6EchoRequest);
    if (!echo) {
      if (!is_vip(d.dst)) drop(e, "local_unhandled");
      else if (d.l4_proto == pkt::kProtoTcp || d.l4_proto == pkt::kProtoUdp) drop(e, "no_service");
      else drop(e, "l4_unsupported");
      return finish(e);
    }
    if (pkt::verify_checksums(frame).l4 != pkt::CsumState::kValid) {
      drop(e, "icmp_bad_checksum");
      return finish(e);
    }
    MacAddr mac;
    if (!route(e, d.src, d.ip_len, &mac)) return finish(e);
    pkt::Bytes out = frame;
    set_addr(out, d, false, d.dst);
    set_addr(out, d, true, d.src);
    set_ttl(out, d, kOwnTtl);
    out[d.l4_off] = v4 ? pkt::kIcmpEchoReply : pkt::kIcmp6EchoReply;
    recompute_checksums(out);
    set_eth(out, mac, port_mac_);
    e.output = std::move(out);
    e.verdict = Verdict::kEchoReply;
    e.description += ": echo reply";
    ++totals_.echo_replies;
    return finish(e);
  }
  // Transit with no service and no flow; from a backend's address:port it is an untracked reply.
  bool from_backend = false;
  if (d.has_l4 && (d.l4_proto == pkt::kProtoTcp || d.l4_proto == pkt::kProtoUdp)) {
    for (const auto& s : cfg_.services) {
      if (uint8_t(s.protocol) != d.l4_proto) continue;
      for (const auto& b : s.backends) from_backend |= b.address == d.src && b.port == d.sport;
    }
  }
  drop(e, from_backend ? "reply_no_flow" : "no_service");
  return finish(e);
}

}  // namespace meshgate::golden
