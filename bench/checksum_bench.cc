// Checksums: the RFC 1624 incremental updates the NAT uses against full RFC 1071 recomputes
// (a 20-byte IPv4 header, a 1500-byte segment), and nat_rewrite of a whole packet.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "dataplane/nat/nat.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/parse.h"
#include "tools/pktlib/build.h"

namespace meshgate::bench {
namespace {

// A 20-byte IPv4 header: 192.0.2.7 -> 203.0.113.10, TCP.
std::vector<uint8_t> ipv4_header() {
  std::vector<uint8_t> h = {0x45, 0, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0,
                            192,  0, 2, 7,  203,  0,    113,  10};
  const uint16_t c = dp::ipv4_header_csum(h.data(), 20);
  std::memcpy(&h[10], &c, 2);
  return h;
}

// DNAT's IPv4 destination change: 4 address bytes, alternating so every call changes them.
void csum_replace_bytes_4(benchmark::State& state) {
  auto h = ipv4_header();
  const uint8_t addrs[2][4] = {{203, 0, 113, 10}, {198, 51, 100, 11}};
  uint32_t i = 0;
  for (auto _ : state) {
    const uint8_t* to = addrs[++i & 1];
    dp::csum_replace_bytes(&h[10], &h[16], to, 4);
    std::memcpy(&h[16], to, 4);
    benchmark::DoNotOptimize(h.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(csum_replace_bytes_4);

// IPv6 DNAT: 16 address bytes into the transport checksum.
void csum_replace_bytes_16(benchmark::State& state) {
  uint8_t csum[2] = {0x12, 0x34};
  IpAddr a[2] = {*IpAddr::parse("2001:db8:100::10"), *IpAddr::parse("2001:db8:1::11")};
  uint8_t field[16];
  std::memcpy(field, a[0].b, 16);
  uint32_t i = 0;
  for (auto _ : state) {
    const uint8_t* to = a[++i & 1].b;
    dp::csum_replace_bytes(csum, field, to, 16);
    std::memcpy(field, to, 16);
    benchmark::DoNotOptimize(csum);
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(csum_replace_bytes_16);

// A port change (or the TTL/protocol word).
void csum_replace2(benchmark::State& state) {
  uint8_t csum[2] = {0x12, 0x34};
  const uint16_t ports[2] = {htons(80), htons(8080)};
  uint32_t i = 0;
  for (auto _ : state) {
    ++i;
    dp::csum_replace2(csum, ports[i & 1], ports[(i + 1) & 1]);
    benchmark::DoNotOptimize(csum);
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(csum_replace2);

void csum_full_ipv4_header(benchmark::State& state) {
  auto h = ipv4_header();
  for (auto _ : state) {
    const uint16_t c = dp::ipv4_header_csum(h.data(), 20);
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.SetBytesProcessed(int64_t(state.iterations()) * 20);
}
BENCHMARK(csum_full_ipv4_header);

// A full TCP checksum over a 1500-byte segment with its IPv4 pseudo-header: what a rewrite
// without RFC 1624 (or a checksum check) would pay per MTU-sized packet.
void csum_full_1500B(benchmark::State& state) {
  std::vector<uint8_t> seg(1500);
  for (size_t i = 0; i < seg.size(); ++i) seg[i] = uint8_t(i * 7);
  const uint8_t src[4] = {192, 0, 2, 7}, dst[4] = {203, 0, 113, 10};
  for (auto _ : state) {
    const uint32_t pseudo = dp::csum_pseudo_v4(src, dst, 6, uint32_t(seg.size()));
    const uint16_t c = dp::csum_finish(dp::csum_partial(seg.data(), uint32_t(seg.size()), pseudo));
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(seg.size()));
}
BENCHMARK(csum_full_1500B);

// DNAT of a parsed TCP packet: destination address and port, IP and TCP checksums. The
// destination alternates between the VIP and a backend so each call rewrites.
void nat_rewrite_tcp(benchmark::State& state, bool v6) {
  pkt::IpHdr ip;
  ip.src = *IpAddr::parse(v6 ? "2001:db8:2::7" : "192.0.2.7");
  ip.dst = *IpAddr::parse(v6 ? "2001:db8:100::10" : "203.0.113.10");
  pkt::TcpHdr t;
  t.sport = 40000;
  t.dport = 80;
  t.flags = pkt::kTcpAck;
  const pkt::EthHdr eth{*MacAddr::parse("02:00:00:00:00:01"), *MacAddr::parse("02:00:00:00:00:fe")};
  pkt::Bytes f = pkt::build_tcp(eth, ip, t);
  dp::PacketMeta m;
  if (dp::parse_packet(f.data(), uint32_t(f.size()), &m, true) != dp::Drop::kNone) {
    state.SkipWithError("frame does not parse");
    return;
  }
  const IpAddr to[2] = {ip.dst, *IpAddr::parse(v6 ? "2001:db8:1::11" : "198.51.100.11")};
  const uint16_t port[2] = {htons(80), htons(8080)};
  uint32_t i = 0;
  for (auto _ : state) {
    ++i;
    dp::nat_rewrite<true>(f.data(), &m, to[i & 1], port[i & 1]);
    benchmark::DoNotOptimize(f.data());
    benchmark::DoNotOptimize(m);
  }
  // The incremental updates must have kept the IPv4 header checksum right.
  if (dp::parse_packet(f.data(), uint32_t(f.size()), &m, true) != dp::Drop::kNone) {
    state.SkipWithError("rewritten frame does not parse");
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK_CAPTURE(nat_rewrite_tcp, ipv4_dnat, false);
BENCHMARK_CAPTURE(nat_rewrite_tcp, ipv6_dnat, true);

}  // namespace
}  // namespace meshgate::bench
