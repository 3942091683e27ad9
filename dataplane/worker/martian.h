// The martian checks, pure functions of the snapshot (tested as tables in
// tests/unit/worker/martian_test.cc and through the worker): addresses a packet that would
// start a flow or reach a local handler may not carry. Inline: the service stage runs them for
// every packet without a flow.
#pragma once

#include <cstring>

#include "dataplane/common/compiler.h"
#include "dataplane/drop_reasons.h"
#include "dataplane/packet/parse.h"
#include "dataplane/snapshot/snapshot.h"

namespace meshgate::dp {

// A port address, VIP or fullnat address of the gateway.
inline bool is_local_like(const Snapshot& s, const IpAddr& a) {
  return s.local_port(a) >= 0 || s.is_vip(a) || s.is_fullnat_address(a);
}

// A limited, port-subnet or multicast address: what a frame to a group MAC may carry.
inline bool is_group_address(const Snapshot& s, const IpAddr& a, bool v4) {
  if (!v4) return a.b[0] == 0xff;  // RFC 4291 §2.7
  const uint8_t a0 = a.b[12];
  return (a0 >= 224 && a0 < 240) || a.v4_host() == 0xffffffffu ||
         s.addr_class(a) == AddrClass::kSubnetBroadcast;
}

// The martian checks of a packet that would start a flow or reach a local handler: its
// destination (RFC 1812 §5.3.7, RFC 4291 §2.5, directed broadcasts) and its source against
// the gateway's own addresses and subnet broadcasts. Drop::kNone when it is neither.
// A packet of an established flow needs none: its flow passed them when it was created.
inline Drop martian(const Snapshot& s, const PacketMeta& m) {
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
  switch (s.addr_class(m.src)) {
    case AddrClass::kGateway:
      return Drop::kSourceIsLocal;
    case AddrClass::kSubnetBroadcast:
      return Drop::kSourceIsBroadcast;
    case AddrClass::kOther:
      break;
  }
  // RFC 2644: directed broadcasts are not forwarded.
  if (m.l3 == L3::kIpv4 && s.addr_class(m.dst) == AddrClass::kSubnetBroadcast) {
    return Drop::kDestinationNotUnicast;
  }
  return Drop::kNone;
}

// RFC 3927 §2.7 (169.254/16), RFC 4291 §2.5.6 (fe80::/10): link-local addresses are
// meaningful on their link only, and a router never forwards a packet carrying one.
inline bool is_link_local(const IpAddr& a, bool v4) {
  if (v4) return a.b[12] == 169 && a.b[13] == 254;
  return a.b[0] == 0xfe && (a.b[1] & 0xc0) == 0x80;
}

// The source checks of a packet that would start a flow through service `svc` (a VIP), after
// martian(): a link-local client is answered on its link at most, never balanced to a backend
// elsewhere (the proxy's listeners and services included).
inline Drop new_flow_source(const PacketMeta& m) {
  return MG_UNLIKELY(is_link_local(m.src, m.l3 == L3::kIpv4)) ? Drop::kSourceLinkLocal
                                                                : Drop::kNone;
}

// A backend of `svc` calling its own VIP (hairpin). dnat keeps the client's address, so the
// backend the flow lands on answers that address directly, itself or its neighbour, not through
// the gateway: the connection never forms (kube-proxy and IPVS masquerade hairpin traffic for
// this reason). DSR backends hold the VIP themselves and never send to it through the gateway.
// A packet from a backend's address to a dnat or DSR VIP is thus spoofed or looping; fullnat
// and proxy rewrite the source and carry it. Looked up by the backend Maglev picked (its
// address, and the backend index at its port: a service's backends share their target port
// in the usual case).
inline bool source_is_own_backend(const Snapshot& s, const SnapService& svc, const PacketMeta& m,
                                  const SnapBackend& be) {
  if (svc.mode == Mode::kFullnat || svc.mode == Mode::kProxy) return false;
  if (m.src == be.address) return true;
  uint32_t n = 0;
  const uint32_t* users = s.services_of_backend(m.src, be.port_be, svc.proto, &n);
  if (n == 0) return false;
  const uint32_t owner =
      svc.node_port_of != 0 ? svc.node_port_of - 1 : uint32_t(&svc - s.services.data());
  for (uint32_t i = 0; i < n; ++i) {
    if (users[i] == owner) return true;
  }
  return false;
}

}  // namespace meshgate::dp
