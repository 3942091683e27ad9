// Wire constants and unaligned big-endian accessors. Pure inline, any thread.
#pragma once

#include <cstdint>
#include <cstring>

namespace meshgate::dp {

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint16_t kEtherTypeQinQ = 0x88a8;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
inline constexpr uint32_t kEthHdrLen = 14;
inline constexpr uint32_t kVlanHdrLen = 4;
inline constexpr uint32_t kArpLen = 28;  // Ethernet/IPv4 ARP body
inline constexpr uint32_t kIpv4HdrLen = 20;
inline constexpr uint32_t kIpv6HdrLen = 40;
inline constexpr uint32_t kTcpHdrLen = 20;
inline constexpr uint32_t kUdpHdrLen = 8;
inline constexpr uint32_t kIcmpHdrLen = 8;

inline constexpr uint8_t kProtoIcmp = 1;
inline constexpr uint8_t kProtoIpip = 4;
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;
inline constexpr uint8_t kProtoIpv6 = 41;
inline constexpr uint8_t kProtoIcmp6 = 58;
// IPv6 extension headers (RFC 8200 §4, RFC 4302 for AH).
inline constexpr uint8_t kIp6HopByHop = 0;
inline constexpr uint8_t kIp6Routing = 43;
inline constexpr uint8_t kIp6Fragment = 44;
inline constexpr uint8_t kIp6Ah = 51;
inline constexpr uint8_t kIp6DestOpts = 60;
inline constexpr uint8_t kIp6Mobility = 135;

inline constexpr uint8_t kTcpFin = 0x01;
inline constexpr uint8_t kTcpSyn = 0x02;
inline constexpr uint8_t kTcpRst = 0x04;
inline constexpr uint8_t kTcpPsh = 0x08;
inline constexpr uint8_t kTcpAck = 0x10;

inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpDestUnreach = 3;
inline constexpr uint8_t kIcmpEchoRequest = 8;
inline constexpr uint8_t kIcmpTimeExceeded = 11;
inline constexpr uint8_t kIcmp6DestUnreach = 1;
inline constexpr uint8_t kIcmp6PacketTooBig = 2;
inline constexpr uint8_t kIcmp6TimeExceeded = 3;
inline constexpr uint8_t kIcmp6EchoRequest = 128;
inline constexpr uint8_t kIcmp6EchoReply = 129;
inline constexpr uint8_t kNdpRouterSolicit = 133;
inline constexpr uint8_t kNdpRouterAdvert = 134;
inline constexpr uint8_t kNdpNeighborSolicit = 135;
inline constexpr uint8_t kNdpNeighborAdvert = 136;
inline constexpr uint8_t kNdpRedirect = 137;

inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;

inline uint16_t rd16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t rd32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
inline void wr16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
inline void wr32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}
// Raw 16-bit load/store in memory order (for checksum arithmetic on wire values).
inline uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void st16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace meshgate::dp
