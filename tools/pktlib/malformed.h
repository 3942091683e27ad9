// Malformed frames, one kind per dataplane drop reason (dataplane/drop_reasons.def) that a
// single packet can trigger. Each frame carries exactly one fault and is well formed in every
// other respect (destination MAC = the gateway, valid checksums except a corrupted one, a
// source from the client range), so the gateway must count it under exactly that reason and
// under nothing earlier. Used by pcapgen and by tests that iterate the table. Any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "dataplane/common/net_types.h"
#include "tools/pktlib/build.h"

namespace meshgate::pkt {

struct Endpoint {
  IpAddr addr;
  uint16_t port = 0;  // host order
};

// Where malformed frames come from and go to, taken from the gateway's config.
struct MalformedContext {
  MacAddr gateway_mac;  // the gateway port: destination of every frame
  MacAddr peer_mac;     // the upstream router: source of every frame
  // Unicast destination that is not the gateway (l2_not_for_us). RFC 7042 documentation MAC.
  MacAddr other_mac{{0x00, 0x00, 0x5e, 0x00, 0x53, 0x01}};
  std::optional<IpAddr> peer4;  // the router's IPv4 address (ARP sender); client4 when absent
  IpAddr client4;
  IpAddr client6;
  uint16_t client_port = 40000;
  uint32_t seq = 1;     // TCP sequence number / ICMP id+seq / IP id seed
  std::optional<Endpoint> service4;  // an IPv4 service VIP:port (TCP preferred)
  std::optional<Endpoint> service6;  // an IPv6 service VIP:port (TCP preferred)
  std::optional<Endpoint> udp_service4;  // an IPv4 UDP service (else service4) for UDP faults
  std::optional<IpAddr> local4;      // a gateway IPv4 address
  std::optional<IpAddr> local6;      // a gateway IPv6 address
  Endpoint transit4;                 // neither a VIP nor local (no_service)
};

// What a kind needs from the context (bit set).
enum MalformedNeed : uint8_t {
  kNeedDst4 = 1 << 0,      // service4, or local4 when the fault is found before routing
  kNeedDst6 = 1 << 1,      // service6, or local6 likewise
  kNeedService4 = 1 << 2,  // service4 strictly (the fault is a forwarding decision)
  kNeedLocal4 = 1 << 3,
  kNeedLocal6 = 1 << 4,
};

struct MalformedKind {
  const char* name;   // == the drop reason's metric name
  const char* fault;  // what is wrong with the frame
  uint8_t needs;      // MalformedNeed bits
  Bytes (*build)(const MalformedContext&);
};

// Every kind, in drop_reasons.def order.
std::span<const MalformedKind> malformed_kinds();
const MalformedKind* find_malformed(std::string_view name);
// True when `ctx` has what `kind` needs.
bool malformed_possible(const MalformedKind& kind, const MalformedContext& ctx);

}  // namespace meshgate::pkt
