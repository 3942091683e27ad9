// Plain network value types (addresses, prefixes, MACs) shared by control and dataplane.
// Pure C++: no DPDK, any thread.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace meshgate {

// An IPv4 or IPv6 address. IPv4 is stored IPv4-mapped (::ffff:a.b.c.d) so that one 16-byte
// key covers both families and an IPv4 address never equals an IPv6 one.
struct IpAddr {
  alignas(8) uint8_t b[16] = {};

  static IpAddr v4(uint32_t host_order) {
    IpAddr a;
    a.b[10] = 0xff;
    a.b[11] = 0xff;
    a.b[12] = uint8_t(host_order >> 24);
    a.b[13] = uint8_t(host_order >> 16);
    a.b[14] = uint8_t(host_order >> 8);
    a.b[15] = uint8_t(host_order);
    return a;
  }
  // From 4 bytes in network order (as on the wire).
  static IpAddr v4_bytes(const uint8_t* p) {
    IpAddr a;
    a.b[10] = 0xff;
    a.b[11] = 0xff;
    std::memcpy(&a.b[12], p, 4);
    return a;
  }
  static IpAddr v6_bytes(const uint8_t* p) {
    IpAddr a;
    std::memcpy(a.b, p, 16);
    return a;
  }

  bool is_v4() const {
    static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(b, kPrefix, 12) == 0;
  }
  uint32_t v4_host() const {
    return uint32_t(b[12]) << 24 | uint32_t(b[13]) << 16 | uint32_t(b[14]) << 8 | b[15];
  }
  const uint8_t* v4_ptr() const { return &b[12]; }
  // The mapped form's second 8 bytes, loaded as they lie in memory, for an IPv4 address given
  // as 4 wire bytes loaded the same way (the first 8 bytes are zero).
  static uint64_t mapped_high_word(uint32_t wire) { return uint64_t(wire) << 32 | 0xffff0000u; }
  // This is the IPv4 address `wire` (4 bytes as on the wire, loaded as they lie in memory).
  bool is_v4_wire(uint32_t wire) const {
    uint64_t w[2];
    std::memcpy(w, b, 16);
    return w[0] == 0 && w[1] == mapped_high_word(wire);
  }
  bool is_zero() const {
    uint64_t w[2];
    std::memcpy(w, b, 16);
    return (w[0] | w[1]) == 0 || (is_v4() && v4_host() == 0);
  }

  friend bool operator==(const IpAddr& x, const IpAddr& y) {
    return std::memcmp(x.b, y.b, 16) == 0;
  }
  friend auto operator<=>(const IpAddr& x, const IpAddr& y) {
    return std::memcmp(x.b, y.b, 16) <=> 0;
  }

  // "192.0.2.1" or "2001:db8::1"; nullopt when not an address.
  static std::optional<IpAddr> parse(std::string_view s);
  // The text inet_ntop() gives (RFC 5952 form; IPv4-mapped addresses as dotted quads).
  std::string str() const;
  // Longest str(): "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" (INET6_ADDRSTRLEN - 1).
  static constexpr size_t kMaxStrLen = 45;
  // Writes str() to `out` (room for kMaxStrLen characters; no terminator) and returns the end:
  // for names built by the thousand (counter names), without inet_ntop's sprintf per group.
  char* format(char* out) const;
};

struct IpPrefix {
  IpAddr addr;
  uint8_t len = 0;  // in bits of the address family (0..32 for IPv4, 0..128 for IPv6)

  // "192.0.2.0/24", "2001:db8::/32"; a bare address means a host prefix.
  static std::optional<IpPrefix> parse(std::string_view s);
  std::string str() const;
  bool contains(const IpAddr& a) const;
  // The prefix with host bits cleared.
  IpPrefix network() const;
  friend bool operator==(const IpPrefix&, const IpPrefix&) = default;
};

struct MacAddr {
  std::array<uint8_t, 6> b{};
  static std::optional<MacAddr> parse(std::string_view s);  // "02:00:00:00:00:01"
  std::string str() const;
  bool is_multicast() const { return b[0] & 1; }
  bool is_zero() const { return (b[0] | b[1] | b[2] | b[3] | b[4] | b[5]) == 0; }
  friend bool operator==(const MacAddr&, const MacAddr&) = default;
};

enum class L4Proto : uint8_t { kTcp = 6, kUdp = 17 };

}  // namespace meshgate
