// Parser cost per frame: parse_frame over frames the worker sees most (TCP/IPv4 64 B, TCP/IPv6,
// UDP), an IPv6 extension chain, and a malformed frame (dropped deep in the TCP option walk).
// Frames come from tools/pktlib and sit in L1: this is the parser's own cost, not memory's.
#include <benchmark/benchmark.h>

#include <vector>

#include "dataplane/packet/parse.h"
#include "tools/pktlib/build.h"

namespace meshgate::bench {
namespace {

using pkt::Bytes;

// Frames per benchmark; different client ports so no two iterations read the same bytes.
constexpr uint16_t kFrames = 64;

const pkt::EthHdr kEth{*MacAddr::parse("02:00:00:00:00:01"), *MacAddr::parse("02:00:00:00:00:fe")};

pkt::IpHdr ip_hdr(bool v6) {
  pkt::IpHdr ip;
  ip.src = *IpAddr::parse(v6 ? "2001:db8:2::7" : "192.0.2.7");
  ip.dst = *IpAddr::parse(v6 ? "2001:db8:100::10" : "203.0.113.10");
  return ip;
}

pkt::TcpHdr tcp_hdr(uint16_t sport, uint8_t flags) {
  pkt::TcpHdr t;
  t.sport = sport;
  t.dport = 80;
  t.seq = 1000;
  t.ack = 2000;
  t.flags = flags;
  return t;
}

enum class Kind { kTcp4, kTcp6, kUdp4, kIpv6Ext, kMalformed };

Bytes frame(Kind k, uint16_t i) {
  const uint16_t sport = uint16_t(32768 + i);
  switch (k) {
    case Kind::kTcp4:  // an ACK without payload: 54 bytes, padded to 60
      return pkt::build_tcp(kEth, ip_hdr(false), tcp_hdr(sport, pkt::kTcpAck));
    case Kind::kTcp6:
      return pkt::build_tcp(kEth, ip_hdr(true), tcp_hdr(sport, pkt::kTcpAck), Bytes(10, 0xab));
    case Kind::kUdp4: {
      pkt::UdpHdr u;
      u.sport = sport;
      u.dport = 53;
      return pkt::build_udp(kEth, ip_hdr(false), u, Bytes(54, 0xab));  // pcapgen's dns: 100 B
    }
    case Kind::kIpv6Ext: {
      pkt::IpHdr ip = ip_hdr(true);
      ip.ext = {pkt::ipv6_hop_by_hop(), pkt::ipv6_dest_opts()};
      return pkt::build_tcp(kEth, ip, tcp_hdr(sport, pkt::kTcpAck), Bytes(10, 0xab));
    }
    case Kind::kMalformed: {
      // tcp_bad_option: an MSS option claiming 12 bytes in a 4-byte option area.
      pkt::TcpHdr t = tcp_hdr(sport, pkt::kTcpSyn);
      t.options = {2, 12, 0x05, 0xb4};
      return pkt::build_tcp(kEth, ip_hdr(false), t);
    }
  }
  return {};
}

void parse(benchmark::State& state, Kind k, bool verify_ipv4_csum, dp::Drop want) {
  std::vector<Bytes> frames;
  for (uint16_t i = 0; i < kFrames; ++i) frames.push_back(frame(k, i));
  dp::PacketMeta meta;
  for (const Bytes& f : frames) {
    const dp::Drop got = dp::parse_frame(f.data(), uint32_t(f.size()), uint32_t(f.size()), &meta,
                                         verify_ipv4_csum);
    if (got != want) {
      state.SkipWithError(dp::kDropNames[uint32_t(got)]);
      return;
    }
  }
  uint32_t i = 0;
  for (auto _ : state) {
    const Bytes& f = frames[i++ % kFrames];
    benchmark::DoNotOptimize(dp::parse_frame(f.data(), uint32_t(f.size()), uint32_t(f.size()),
                                             &meta, verify_ipv4_csum));
    benchmark::DoNotOptimize(meta);
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  // With the 4-byte FCS, as pcapgen and traffic generators count frame sizes.
  state.counters["frame_bytes"] = double(frames[0].size() + 4);
}

// The worker verifies the IPv4 header checksum unless the NIC says it is good.
BENCHMARK_CAPTURE(parse, tcp4_64B, Kind::kTcp4, true, dp::Drop::kNone);
BENCHMARK_CAPTURE(parse, tcp4_64B_nic_csum_ok, Kind::kTcp4, false, dp::Drop::kNone);
BENCHMARK_CAPTURE(parse, tcp6, Kind::kTcp6, true, dp::Drop::kNone);
BENCHMARK_CAPTURE(parse, udp4, Kind::kUdp4, true, dp::Drop::kNone);
BENCHMARK_CAPTURE(parse, ipv6_hbh_dstopts_tcp, Kind::kIpv6Ext, true, dp::Drop::kNone);
BENCHMARK_CAPTURE(parse, malformed_tcp_bad_option, Kind::kMalformed, true,
                  dp::Drop::kTcpBadOption);

}  // namespace
}  // namespace meshgate::bench
