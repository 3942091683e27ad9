// An independent model of what meshgate does with each frame of a one-armed pcap replay, for
// the golden replay test. Written from the contract (README.md, config/README.md, tests/unit/worker/worker_test.cc),
// not from the dataplane code: frames are parsed with pktlib's own decoder, backends are chosen
// with dp::lb from the config (the function under contract, not the gateway's tables), and
// expected output frames are built by editing the input bytes and recomputing every checksum
// from scratch with pktlib (the dataplane updates them incrementally).
//
// What is modelled (config/demo.toml-like topologies: one port, dnat services, static
// neighbors for every next hop, a capture shorter than every conntrack timeout):
// - L2: unicast frames to another MAC are dropped (l2_not_for_us);
// - frames pktlib's decoder rejects are dropped with the reason it names (its fault names are
//   the dataplane's drop reason names);
// - TTL / hop limit <= 1 toward a service or on a flow: dropped (ttl_exceeded) and answered
//   with an ICMP time exceeded from the port's address, quoting the packet (576 / 1280 bytes);
// - packets over the MTU with DF set (every IPv6 packet): dropped (mtu_exceeded) and answered
//   with fragmentation needed / packet too big carrying the MTU;
// - later fragments (no transport header): to the port's address fragment_unsupported, else
//   fragment_no_first (the captures hold no first fragments; one is reported unmodelled);
// - ARP requests for a local address or a VIP are answered; other ARP requests are dropped
//   (arp_not_for_us); ARP replies are consumed;
// - TCP/UDP to a service's VIP:port: fragments and TTL <= 1 dropped, otherwise DNAT to the
//   flow's backend (Maglev for the first packet), TTL - 1, routed to the backend's neighbor MAC;
// - TCP/UDP from a backend to a client of a known flow: source back to VIP:port, TTL - 1,
//   routed (the router's MAC for clients behind the default route);
// - ICMP / ICMPv6 echo requests to a local address or a VIP: answered in place (addresses
//   swapped, TTL 64, identifier, sequence and payload kept), a bad ICMP checksum is dropped;
// - the rest toward local addresses / VIPs (local_unhandled, no_service, l4_unsupported) and
//   transit traffic without a flow (no_service).
// Anything else (NDP, next hops without a static neighbor, forwarding a packet whose L4
// checksum is already wrong, ...) is reported as kUnmodelled so the test fails loudly instead of
// guessing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "control/config/config.h"
#include "tools/pktlib/build.h"
#include "tools/pktlib/decode.h"

namespace meshgate::golden {

enum class Verdict : uint8_t {
  kForward,     // client -> VIP, translated to a backend
  kReverse,     // backend -> client, translated back to the VIP
  kEchoReply,   // ICMP / ICMPv6 echo answered
  kArpReply,    // ARP request answered
  kConsumed,    // taken by the gateway without output (ARP reply)
  kDrop,        // dropped with `drop_reason`
  kIcmpError,   // dropped with `drop_reason`, and `output` is the ICMP error sent back
  kUnmodelled,  // the oracle cannot say; `description` says why
};
const char* verdict_name(Verdict v);

// One row of the golden table: an input frame, its verdict and the frame the gateway must send.
struct Expectation {
  size_t index = 0;         // record number in the input pcap (0-based)
  std::string description;  // what the frame is and what must happen, for failure messages
  pkt::Bytes input;
  Verdict verdict = Verdict::kUnmodelled;
  std::string drop_reason;  // kDrop: the dataplane drop reason name
  pkt::Bytes output;        // kForward, kReverse, kEchoReply, kArpReply
  std::string service;      // kForward / kReverse: service name
  std::string backend;      // kForward / kReverse: "ip:port" / "[ip]:port"
  bool sends() const {
    return verdict == Verdict::kForward || verdict == Verdict::kReverse ||
           verdict == Verdict::kEchoReply || verdict == Verdict::kArpReply ||
           verdict == Verdict::kIcmpError;
  }
};

struct BackendTotals {
  uint64_t packets = 0;  // both directions, like the gateway's per-backend counters
  uint64_t bytes = 0;        // frame bytes as received, client to backend
  uint64_t reply_bytes = 0;  // frame bytes as received, backend to client
  uint64_t flows = 0;
};

struct OracleTotals {
  std::map<std::string, uint64_t> drops;  // reason -> packets
  uint64_t sent = 0;
  uint64_t generated = 0;  // ICMP errors the gateway originates
  uint64_t consumed = 0;
  uint64_t flows = 0;
  uint64_t echo_replies = 0;
  uint64_t arp_replies = 0;
  // service -> backend "ip:port" -> totals (every backend of the config listed)
  std::map<std::string, std::map<std::string, BackendTotals>> backends;
};

class Oracle {
 public:
  explicit Oracle(const ctl::Config& cfg);

  // The expectation for the next input frame, in capture order (flows carry state).
  Expectation next(const pkt::Bytes& frame);
  const OracleTotals& totals() const { return totals_; }

 private:
  struct Service {
    const ctl::ServiceConfig* cfg;
    std::vector<uint32_t> table;  // Maglev slots -> backend index
  };
  struct Flow {
    size_t service;
    size_t backend;
  };
  // (address, port, address, port, proto) as on the wire of one direction.
  using Key = std::tuple<IpAddr, uint16_t, IpAddr, uint16_t, uint8_t>;

  void drop(Expectation& e, const char* reason);
  void unmodelled(Expectation& e, const std::string& why);
  // Route lookup + neighbor for a packet to `dst`: the next hop's MAC, or false (e filled in).
  bool route(Expectation& e, const IpAddr& dst, uint32_t ip_len, MacAddr* mac);
  // Drops `e` as ttl_exceeded and expects the ICMP time exceeded the gateway sends back.
  void time_exceeded(Expectation& e, const pkt::Bytes& frame, const pkt::Decoded& d);
  // Expects the ICMP error the gateway sends back about `frame` (e is already a drop).
  void icmp_error(Expectation& e, const pkt::Bytes& frame, const pkt::Decoded& d, uint8_t type,
                  uint8_t code, uint32_t mtu);
  bool is_local(const IpAddr& a) const;
  bool is_vip(const IpAddr& a) const;
  std::string endpoint(const IpAddr& a, uint16_t port) const;

  const ctl::Config& cfg_;
  MacAddr port_mac_;
  bool have_port_mac_ = false;
  uint16_t mtu_ = 1500;
  std::vector<Service> services_;
  std::map<Key, Flow> original_;  // client -> VIP tuple
  std::map<Key, Flow> reply_;     // backend -> client tuple
  OracleTotals totals_;
  size_t index_ = 0;
};

}  // namespace meshgate::golden
