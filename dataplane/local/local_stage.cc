// Packets to the gateway itself that no service or application takes: echo requests are
// answered, a port address's packets go to the port's kernel twin when it has one, the rest
// are dropped with their reason (dataplane/local/local_stage.h).
#include "dataplane/local/local_stage.h"

#include <rte_ip.h>
#include <rte_mbuf.h>

#include <utility>

#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {
namespace {

constexpr uint8_t kLocalTtl = 64;  // TTL of packets we originate (RFC 1700 default)

// One's-complement sum over [off, off+len) of a possibly segmented mbuf.
uint32_t mbuf_sum(const rte_mbuf* m, uint32_t off, uint32_t len) {
  if (MG_LIKELY(off + len <= m->data_len)) {
    return csum_partial(rte_pktmbuf_mtod_offset(m, const uint8_t*, off), len, 0);
  }
  uint16_t s = 0;
  rte_raw_cksum_mbuf(m, off, len, &s);
  return s;
}

}  // namespace

bool to_host_twin(const WorkerCtx& c, Burst& b, uint16_t i) {
  if (!c.p.host_out) return false;  // no twin at all: spares the address lookup
  const PacketMeta& m = b.meta[i];
  // The gateway answers echo requests itself; fragments go to the kernel, which reassembles.
  if (!m.is_fragment() && is_echo_request(m)) return false;
  const int32_t port = c.snap->local_port(m.dst);
  return port >= 0 && give_to_twin(c, b, i, uint16_t(port));
}

void stage_local(WorkerCtx& c, Burst& b, rte_mbuf** pkts, uint16_t n) {
  if (!b.next_mask(n, kNextLocal, kNextLocal)) return;  // the common burst has none
  for (uint16_t i = 0; i < n; ++i) {
    if (b.next[i] != kNextLocal) continue;
    PacketMeta& m = b.meta[i];
    rte_mbuf* mb = pkts[i];
    b.next[i] = kNextDrop;
    if (to_host_twin(c, b, i)) continue;
    if (m.is_fragment()) {
      b.drop[i] = Drop::kFragmentUnsupported;
      continue;
    }
    const bool v4 = m.l3 == L3::kIpv4;
    const bool echo = m.has_l4() && m.icmp_code == 0 &&
                      (v4 ? (m.l4_proto == kProtoIcmp && m.icmp_type == kIcmpEchoRequest)
                          : (m.l4_proto == kProtoIcmp6 && m.icmp_type == kIcmp6EchoRequest));
    if (!echo) {
      const bool vip = c.snap->is_vip(m.dst) || c.snap->is_fullnat_address(m.dst);
      if (!vip) b.drop[i] = Drop::kLocalUnhandled;
      else if (m.l4_proto == kProtoTcp || m.l4_proto == kProtoUdp) b.drop[i] = Drop::kNoService;
      else b.drop[i] = Drop::kL4Unsupported;
      continue;
    }
    uint8_t* data = rte_pktmbuf_mtod(mb, uint8_t*);
    uint8_t* ip = data + m.l3_off;
    uint8_t* icmp = data + m.l4_off;
    uint32_t sum = mbuf_sum(mb, m.l4_off, m.l4_len);
    if (!v4) sum = csum_add(sum, csum_pseudo_v6(ip + 8, ip + 24, kProtoIcmp6, m.l4_len));
    if (csum_fold(sum) != 0xffff) {
      b.drop[i] = Drop::kIcmpBadChecksum;
      continue;
    }
    const uint16_t old_word = ld16(icmp);
    icmp[0] = v4 ? kIcmpEchoReply : kIcmp6EchoReply;
    // The pseudo-header sum is symmetric in source and destination, so swapping them keeps the
    // ICMPv6 checksum valid; only the type change needs an update.
    csum_replace2(icmp + 2, old_word, ld16(icmp));
    if (v4) {
      uint8_t tmp[4];
      std::memcpy(tmp, ip + 12, 4);
      std::memcpy(ip + 12, ip + 16, 4);
      std::memcpy(ip + 16, tmp, 4);
      ip[8] = kLocalTtl;
      csum_store(ip + 10, ipv4_header_csum(ip, uint32_t(ip[0] & 0xf) * 4));
    } else {
      uint8_t tmp[16];
      std::memcpy(tmp, ip + 8, 16);
      std::memcpy(ip + 8, ip + 24, 16);
      std::memcpy(ip + 24, tmp, 16);
      ip[7] = kLocalTtl;
    }
    std::swap(m.src, m.dst);
    m.ttl = kLocalTtl;
    counter_add(c.counters.echo_replies, 1);
    b.next[i] = kNextRoute;
  }
}


}  // namespace meshgate::dp
