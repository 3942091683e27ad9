// pcapgen traffic profiles: TOML describing traffic classes (README.md documents every key).
// Parsed and validated in one function; tool main thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/common/result.h"
#include "dataplane/common/net_types.h"

namespace meshgate::pcapgen {

// RFC 5737 / RFC 3849 documentation prefixes: never real clients.
inline constexpr std::string_view kDefaultClients4 = "192.0.2.0/24";
inline constexpr std::string_view kDefaultClients6 = "2001:db8:2::/64";
// Linux's default ephemeral range (net.ipv4.ip_local_port_range).
inline constexpr uint16_t kDefaultPortMin = 32768;
inline constexpr uint16_t kDefaultPortMax = 60999;
inline constexpr uint64_t kDefaultSeed = 1;
inline constexpr uint64_t kDefaultRatePps = 100000;
// 2024-01-01T00:00:00Z: a fixed start so that captures are reproducible.
inline constexpr uint64_t kDefaultStartNs = 1704067200ull * 1000000000ull;
// Flows in progress at once: enough to interleave, few enough that each flow's packets stay
// close together in time (well inside the conntrack SYN timeout at any sane rate).
inline constexpr uint32_t kDefaultConcurrency = 64;
inline constexpr std::string_view kDefaultTransit = "203.0.113.99:80";
inline constexpr uint16_t kDefaultFrameBytes = 128;
// Frame sizes include the 4-byte FCS, as traffic generators and RFC 2544 count them; pcap
// records hold the frame without it.
inline constexpr uint16_t kMinFrameBytes = 64;
inline constexpr uint16_t kMaxFrameBytes = 1518;

enum class ClassType : uint8_t { kTcp, kUdp, kIcmp, kMalformed };
enum class TcpShape : uint8_t { kHandshake, kSynOnly, kEstablished };
enum class TcpClose : uint8_t { kFin, kRst, kNone };

const char* class_type_name(ClassType t);

// Sizes of data-carrying frames: fixed, or IMIX (64/594/1518 bytes in 7:4:1).
struct SizeMix {
  bool imix = false;
  uint16_t frame_bytes = kDefaultFrameBytes;  // with FCS, when !imix
};

struct TrafficClass {
  std::string name;
  ClassType type = ClassType::kTcp;
  uint64_t flows = 1;                 // tcp/udp/icmp
  std::vector<std::string> targets;   // service names, "all"; icmp also "local" and addresses
  IpPrefix clients4;
  IpPrefix clients6;
  uint16_t port_min = kDefaultPortMin;
  uint16_t port_max = kDefaultPortMax;
  TcpShape shape = TcpShape::kHandshake;
  TcpClose close = TcpClose::kFin;
  uint32_t data_packets = 1;  // tcp: data segments each way
  uint32_t requests = 1;      // udp: request/response pairs; icmp: echo requests
  SizeMix size;
  bool backend_replies = true;
  std::optional<uint16_t> vlan;  // 802.1Q TCI on every frame of the class
  uint8_t ttl = 64;
  // malformed
  std::vector<std::string> reasons;  // malformation names or "all"
  uint64_t count = 1;                // packets per reason
};

struct Profile {
  std::string path;
  uint64_t seed = kDefaultSeed;
  uint64_t packets = 0;  // 0 = what the classes describe
  uint64_t rate_pps = kDefaultRatePps;
  uint64_t start_ns = kDefaultStartNs;
  uint32_t concurrency = kDefaultConcurrency;
  IpAddr transit_addr;   // no_service target
  uint16_t transit_port = 0;
  std::vector<TrafficClass> classes;
};

ctl::Result<Profile> parse_profile(std::string_view toml_text, const std::string& name);
ctl::Result<Profile> load_profile(const std::string& path);

}  // namespace meshgate::pcapgen
