// libFuzzer target for the packet parser and the header rewrites that trust its output.
// Built with clang (-fsanitize=fuzzer,address,undefined) by tests/fuzz/CMakeLists.txt.
//
// The first input byte chooses how much of the frame is "contiguous" (as in a multi-segment
// mbuf); the rest is the frame. Every successful parse is followed by the rewrites the worker
// applies (DNAT, reverse NAT, TTL), on a copy sized exactly to the frame so ASan sees any
// out-of-bounds write, and the parse of the result must succeed again.
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/nat/nat.h"
#include "dataplane/packet/parse.h"

using namespace meshgate;
using namespace meshgate::dp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t split = data[0];
  std::vector<uint8_t> frame(data + 1, data + size);
  const uint32_t len = uint32_t(frame.size());
  const uint32_t contig = split == 0xff ? len : std::min<uint32_t>(len, split);

  PacketMeta m;
  const Drop d = parse_frame(frame.data(), contig, len, &m, true);
  // The fast path for plain IPv4 TCP/UDP and the general parser agree on the verdict and on
  // every field but the ARP ones.
  PacketMeta g;
  if (parse_frame_general(frame.data(), contig, len, &g, true) != d) __builtin_trap();
  if (d == Drop::kNone &&
      (g.l3 != m.l3 || g.l4_proto != m.l4_proto || g.flags != m.flags || g.ttl != m.ttl ||
       g.vlan_tci != m.vlan_tci || g.l3_off != m.l3_off || g.l4_off != m.l4_off ||
       g.l4_len != m.l4_len || g.l4_hdr_len != m.l4_hdr_len || g.ip_len != m.ip_len ||
       g.frag_off_hdr != m.frag_off_hdr || g.sport != m.sport || g.dport != m.dport ||
       g.tcp_flags != m.tcp_flags || g.icmp_type != m.icmp_type || g.icmp_code != m.icmp_code ||
       g.tcp_wscale != m.tcp_wscale || g.tcp_mss != m.tcp_mss || g.ip_id != m.ip_id ||
       !(g.src == m.src) || !(g.dst == m.dst))) {
    __builtin_trap();
  }
  if (d != Drop::kNone) return 0;
  if (contig < len) return 0;  // rewrites run on contiguous headers only

  // Invariants the worker relies on.
  if (m.is_ip()) {
    if (m.l4_off > len || uint32_t(m.l4_off) + m.l4_len > len) __builtin_trap();
    if (m.has_l4() && m.l4_hdr_len > m.l4_len) __builtin_trap();
  }
  if (!m.is_ip() || !m.has_l4() || (m.l4_proto != 6 && m.l4_proto != 17)) return 0;

  const IpAddr a = m.l3 == L3::kIpv4 ? IpAddr::v4(0xc6336401) : *IpAddr::parse("2001:db8::1");
  nat_rewrite<true>(frame.data(), &m, a, 0x901f);
  nat_rewrite<false>(frame.data(), &m, a, 0x5000);
  if (m.ttl > 1) decrement_ttl(frame.data(), &m);
  PacketMeta again;
  // The IPv4 header checksum was updated incrementally: a valid packet stays valid.
  if (parse_frame(frame.data(), len, len, &again, true) != Drop::kNone) __builtin_trap();
  return 0;
}
