#include "dataplane/packet/parse.h"

#include "dataplane/common/compiler.h"
#include "dataplane/packet/checksum.h"
#include "dataplane/packet/wire.h"

namespace meshgate::dp {
namespace {

// Reads must stay inside the first `contig` bytes (the first mbuf segment); lengths are checked
// against the whole frame. A header that exists but straddles segments is kHeadersSplit.
struct Bounds {
  uint32_t contig;
  uint32_t frame;
  // kNone when [off, off+n) is readable, else kHeadersSplit or `truncated`.
  Drop need(uint32_t off, uint32_t n, Drop truncated) const {
    if (MG_LIKELY(off + n <= contig)) return Drop::kNone;
    return off + n <= frame ? Drop::kHeadersSplit : truncated;
  }
};

// The option format IPv4 (RFC 791 §3.1) and TCP (RFC 9293 §3.1) share: EOL (0) ends the list,
// NOP (1) is one byte, every other option has a length of at least 2 that stays inside the
// header (else `bad`). `each(kind, option, length)` checks one such option.
template <typename F>
MG_ALWAYS_INLINE Drop walk_options(const uint8_t* opt, uint32_t len, Drop bad, F each) {
  uint32_t i = 0;
  while (i < len) {
    const uint8_t kind = opt[i];
    if (kind == 0) break;
    if (kind == 1) {
      ++i;
      continue;
    }
    if (i + 1 >= len) return bad;
    const uint8_t olen = opt[i + 1];
    if (olen < 2 || i + olen > len) return bad;
    if (const Drop d = each(kind, opt + i, olen); d != Drop::kNone) return d;
    i += olen;
  }
  return Drop::kNone;
}

// TCP option kinds with a fixed length we check (RFC 7323, RFC 2018).
Drop walk_tcp_options(const uint8_t* opt, uint32_t len, PacketMeta* m) {
  return walk_options(opt, len, Drop::kTcpBadOption, [m](uint8_t kind, const uint8_t* o,
                                                         uint8_t olen) {
    switch (kind) {
      case 2:  // MSS
        if (olen != 4) return Drop::kTcpBadOption;
        m->tcp_mss = rd16(o + 2);
        break;
      case 3:  // window scale
        if (olen != 3) return Drop::kTcpBadOption;
        m->tcp_wscale = o[2];
        break;
      case 4:  // SACK permitted
        if (olen != 2) return Drop::kTcpBadOption;
        break;
      case 5:  // SACK blocks: 2 + 8n
        if ((olen - 2) % 8 != 0) return Drop::kTcpBadOption;
        break;
      case 8:  // timestamps
        if (olen != 10) return Drop::kTcpBadOption;
        break;
      default:
        break;
    }
    return Drop::kNone;
  });
}

}  // namespace

bool tcp_options_valid(const uint8_t* opt, uint32_t len) {
  PacketMeta m;
  return walk_tcp_options(opt, len, &m) == Drop::kNone;
}

namespace {

// Source routes (RFC 791 LSRR 0x83 / SSRR 0x89) are not honoured (RFC 7126 §4.3, §4.4: dropped
// by default, as Linux's accept_source_route = 0 does).
Drop walk_ipv4_options(const uint8_t* opt, uint32_t len) {
  return walk_options(opt, len, Drop::kIpv4BadOption, [](uint8_t kind, const uint8_t*, uint8_t) {
    return kind == 0x83 || kind == 0x89 ? Drop::kIpv4SourceRoute : Drop::kNone;
  });
}

Drop parse_l4(const uint8_t* data, const Bounds& bd, PacketMeta* m) {
  const uint8_t* l4 = data + m->l4_off;
  const uint32_t len = m->l4_len;
  Drop d;
  switch (m->l4_proto) {
    case kProtoTcp: {
      if (len < kTcpHdrLen) return Drop::kTcpTruncated;
      if ((d = bd.need(m->l4_off, kTcpHdrLen, Drop::kTcpTruncated)) != Drop::kNone) return d;
      const uint32_t doff = uint32_t(l4[12] >> 4) * 4;
      if (doff < kTcpHdrLen || doff > len) return Drop::kTcpBadDataOffset;
      if ((d = bd.need(m->l4_off, doff, Drop::kTcpBadDataOffset)) != Drop::kNone) return d;
      const uint8_t flags = l4[13];
      // RFC 9293 never produces these; they are scans or attacks.
      if ((flags & (kTcpSyn | kTcpFin)) == (kTcpSyn | kTcpFin) ||
          (flags & (kTcpSyn | kTcpRst)) == (kTcpSyn | kTcpRst) || (flags & 0x3f) == 0) {
        return Drop::kTcpBadFlags;
      }
      if (doff > kTcpHdrLen) {
        d = walk_tcp_options(l4 + kTcpHdrLen, doff - kTcpHdrLen, m);
        if (d != Drop::kNone) return d;
      }
      std::memcpy(&m->sport, l4, 2);
      std::memcpy(&m->dport, l4 + 2, 2);
      m->tcp_flags = flags;
      m->l4_hdr_len = uint16_t(doff);
      return Drop::kNone;
    }
    case kProtoUdp: {
      if (len < kUdpHdrLen) return Drop::kUdpTruncated;
      if ((d = bd.need(m->l4_off, kUdpHdrLen, Drop::kUdpTruncated)) != Drop::kNone) return d;
      const uint16_t ulen = rd16(l4 + 4);
      // In a first fragment the length covers the whole datagram, beyond this fragment.
      const bool first_fragment = m->flags & kPktFirstFragment;
      if (ulen < kUdpHdrLen || (ulen > len && !first_fragment)) return Drop::kUdpBadLength;
      std::memcpy(&m->sport, l4, 2);
      std::memcpy(&m->dport, l4 + 2, 2);
      m->l4_hdr_len = kUdpHdrLen;
      return Drop::kNone;
    }
    case kProtoIcmp:
    case kProtoIcmp6: {
      const Drop truncated =
          m->l4_proto == kProtoIcmp ? Drop::kIcmpTruncated : Drop::kIcmp6Truncated;
      if (len < kIcmpHdrLen) return truncated;
      if ((d = bd.need(m->l4_off, kIcmpHdrLen, truncated)) != Drop::kNone) return d;
      m->icmp_type = l4[0];
      m->icmp_code = l4[1];
      const bool echo = m->l4_proto == kProtoIcmp
                            ? (l4[0] == kIcmpEchoRequest || l4[0] == kIcmpEchoReply)
                            : (l4[0] == kIcmp6EchoRequest || l4[0] == kIcmp6EchoReply);
      if (echo) {
        // The identifier is the echo "port", in both directions: request and reply tuples are
        // each other's reverse, as a conntrack pseudo-flow needs.
        std::memcpy(&m->sport, l4 + 4, 2);
        m->dport = m->sport;
      }
      m->l4_hdr_len = kIcmpHdrLen;
      return Drop::kNone;
    }
    default:
      return Drop::kNone;  // carried as an opaque payload; policy decides later
  }
}

Drop parse_ipv4(const uint8_t* data, const Bounds& bd, PacketMeta* m, bool verify_csum) {
  const uint32_t off = m->l3_off;
  const uint32_t avail = bd.frame - off;
  const uint8_t* ip = data + off;
  if (avail < kIpv4HdrLen) return Drop::kIpv4Truncated;
  Drop d;
  if ((d = bd.need(off, kIpv4HdrLen, Drop::kIpv4Truncated)) != Drop::kNone) return d;
  if ((ip[0] >> 4) != 4) return Drop::kIpv4BadVersion;
  const uint32_t ihl = uint32_t(ip[0] & 0xf) * 4;
  if (ihl < kIpv4HdrLen || ihl > avail) return Drop::kIpv4BadIhl;
  if ((d = bd.need(off, ihl, Drop::kIpv4BadIhl)) != Drop::kNone) return d;
  const uint32_t total = rd16(ip + 2);
  // Frames may carry Ethernet padding after the datagram; the datagram itself must fit.
  if (total < ihl || total > avail) return Drop::kIpv4BadTotalLength;
  if (verify_csum && csum_fold(csum_partial(ip, ihl, 0)) != 0xffff) {
    return Drop::kIpv4BadChecksum;
  }
  // RFC 1812 §5.3.7: never forward from martian sources.
  const uint8_t s0 = ip[12];
  if (s0 >= 224 || s0 == 127 || s0 == 0) return Drop::kIpv4BadSource;
  if (ihl > kIpv4HdrLen) {
    if ((d = walk_ipv4_options(ip + kIpv4HdrLen, ihl - kIpv4HdrLen)) != Drop::kNone) return d;
  }

  m->l3 = L3::kIpv4;
  m->ttl = ip[8];
  m->l4_proto = ip[9];
  m->ip_len = uint16_t(total);
  m->ip_id = rd16(ip + 4);
  m->src = IpAddr::v4_bytes(ip + 12);
  m->dst = IpAddr::v4_bytes(ip + 16);
  if (ihl > kIpv4HdrLen) m->flags |= kPktIpOptions;
  m->l4_off = uint16_t(off + ihl);
  m->l4_len = uint16_t(total - ihl);

  const uint16_t frag = rd16(ip + 6);
  const uint16_t frag_offset = frag & 0x1fff;
  const bool more_fragments = frag & 0x2000;
  if (frag_offset != 0 || more_fragments) {
    m->flags |= kPktFragment;
    if (frag_offset != 0) {
      // No L4 header in later fragments; but one 8 bytes in overwrites the TCP flags its first
      // fragment showed (RFC 1858 §3.2, the tiny-overlapping-fragment attack).
      return frag_offset == 1 && m->l4_proto == kProtoTcp ? Drop::kFragmentOverlap : Drop::kNone;
    }
    m->flags |= kPktFirstFragment;
  }
  return parse_l4(data, bd, m);
}

Drop parse_ipv6(const uint8_t* data, const Bounds& bd, PacketMeta* m) {
  const uint32_t off = m->l3_off;
  const uint32_t avail = bd.frame - off;
  const uint8_t* ip = data + off;
  if (avail < kIpv6HdrLen) return Drop::kIpv6Truncated;
  Drop d = bd.need(off, kIpv6HdrLen, Drop::kIpv6Truncated);
  if (d != Drop::kNone) return d;
  if ((ip[0] >> 4) != 6) return Drop::kIpv6BadVersion;
  const uint32_t payload = rd16(ip + 4);
  // Payload length 0 announces a jumbogram (RFC 2675), which no Ethernet port carries.
  if (payload == 0 || kIpv6HdrLen + payload > avail) return Drop::kIpv6BadPayloadLength;

  m->l3 = L3::kIpv6;
  m->ttl = ip[7];
  m->ip_len = uint16_t(kIpv6HdrLen + payload);
  m->src = IpAddr::v6_bytes(ip + 8);
  m->dst = IpAddr::v6_bytes(ip + 24);
  // RFC 4291 §2.7: a multicast address must not be a source; ::1 never leaves a node.
  static constexpr uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (ip[8] == 0xff || std::memcmp(ip + 8, kLoopback, 16) == 0) return Drop::kIpv6BadSource;
  // RFC 4291 §2.5.5.2: IPv4-mapped addresses never appear on the wire; and an IpAddr holds an
  // IPv4 address in that form, so the packet would pass for IPv4 traffic (an IPv4 service, an
  // IPv4 flow's tuple).
  if (m->src.is_v4() || m->dst.is_v4()) return Drop::kIpv6MappedAddress;

  uint8_t nh = ip[6];
  uint32_t pos = off + kIpv6HdrLen;
  const uint32_t end = off + kIpv6HdrLen + payload;
  for (int n = 0;; ++n) {
    if (nh != kIp6HopByHop && nh != kIp6Routing && nh != kIp6Fragment && nh != kIp6DestOpts &&
        nh != kIp6Ah && nh != kIp6Mobility) {
      break;
    }
    if (n == kMaxIpv6ExtHeaders) return Drop::kIpv6ExtChainTooLong;
    if (pos + 8 > end) return Drop::kIpv6ExtTruncated;
    if ((d = bd.need(pos, 8, Drop::kIpv6ExtTruncated)) != Drop::kNone) return d;
    const uint8_t* eh = data + pos;
    uint32_t eh_len;
    if (nh == kIp6Fragment) {
      eh_len = 8;
      const uint16_t offlg = rd16(eh + 2);
      const uint16_t frag_offset = offlg >> 3;
      const bool more_fragments = offlg & 1;
      // RFC 6946: an "atomic fragment" (offset 0, M clear) is a whole packet.
      if (frag_offset != 0 || more_fragments) {
        m->flags |= kPktFragment;
        m->frag_off_hdr = uint16_t(pos);
        m->ip_id = rd32(eh + 4);
        if (frag_offset != 0) {
          m->l4_proto = eh[0];
          m->l4_off = uint16_t(pos + eh_len);
          m->l4_len = uint16_t(end - m->l4_off);
          // As for IPv4 (RFC 1858 §3.2); RFC 5722 forbids overlaps outright.
          return frag_offset == 1 && eh[0] == kProtoTcp ? Drop::kFragmentOverlap : Drop::kNone;
        }
        m->flags |= kPktFirstFragment;
      }
    } else if (nh == kIp6Ah) {
      eh_len = (uint32_t(eh[1]) + 2) * 4;  // RFC 4302 §2.2: in 4-octet units, minus 2
    } else {
      eh_len = (uint32_t(eh[1]) + 1) * 8;  // RFC 8200 §4.3: in 8-octet units, minus 1
    }
    if (pos + eh_len > end) return Drop::kIpv6ExtTruncated;
    nh = eh[0];
    pos += eh_len;
  }
  m->l4_proto = nh;
  m->l4_off = uint16_t(pos);
  m->l4_len = uint16_t(end - pos);
  if ((d = parse_l4(data, bd, m)) != Drop::kNone) return d;
  // The unspecified source is legal only for duplicate address detection (RFC 4861 §7.1.1).
  if (m->src.is_zero() && !(nh == kProtoIcmp6 && m->icmp_type == kNdpNeighborSolicit)) {
    return Drop::kIpv6BadSource;
  }
  return Drop::kNone;
}

enum class FastParse : uint8_t {
  kDone,     // parsed
  kOptions,  // parsed, but the TCP options are still to be walked (fast_tcp_options)
  kGeneral,  // needs the general parser
};

// The common case in one pass: untagged Ethernet, IPv4 without options, not a fragment, TCP
// or UDP, all in the first segment. Fills every field but the ARP ones (which only kArp frames
// read) without clearing the whole struct first. kGeneral for every frame the general parser
// would drop: it alone names the reason (and clears what this one wrote).
MG_ALWAYS_INLINE FastParse parse_fast_ipv4(const uint8_t* data, uint32_t contig_len,
                                           uint32_t frame_len, PacketMeta* m, bool verify_csum) {
  constexpr uint32_t kL3 = kEthHdrLen;
  constexpr uint32_t kL4 = kEthHdrLen + kIpv4HdrLen;
  if (MG_UNLIKELY(contig_len != frame_len || frame_len < kL4 + kUdpHdrLen)) {
    return FastParse::kGeneral;
  }
  const uint8_t* ip = data + kL3;
  if (rd16(data + 12) != kEtherTypeIpv4 || ip[0] != 0x45) return FastParse::kGeneral;
  const uint32_t total = rd16(ip + 2);
  if (total < kIpv4HdrLen || total > frame_len - kL3) return FastParse::kGeneral;
  if (rd16(ip + 6) & 0x3fff) return FastParse::kGeneral;  // MF or a fragment offset
  const uint8_t s0 = ip[12];
  if (s0 >= 224 || s0 == 127 || s0 == 0) return FastParse::kGeneral;
  if (verify_csum) {
    uint32_t x[5];
    std::memcpy(x, ip, 20);
    uint64_t sum = uint64_t(x[0]) + x[1] + x[2] + x[3] + x[4];
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    if (sum != 0xffff) return FastParse::kGeneral;
  }
  const uint8_t proto = ip[9];
  const uint8_t* l4 = data + kL4;
  const uint32_t l4_len = total - kIpv4HdrLen;
  uint16_t hdr;
  uint8_t tcp_flags = 0;
  if (proto == kProtoTcp) {
    if (l4_len < kTcpHdrLen || frame_len < kL4 + kTcpHdrLen) return FastParse::kGeneral;
    const uint32_t doff = uint32_t(l4[12] >> 4) * 4;
    if (doff < kTcpHdrLen || doff > l4_len) return FastParse::kGeneral;
    tcp_flags = l4[13];
    if ((tcp_flags & (kTcpSyn | kTcpFin)) == (kTcpSyn | kTcpFin) ||
        (tcp_flags & (kTcpSyn | kTcpRst)) == (kTcpSyn | kTcpRst) || (tcp_flags & 0x3f) == 0) {
      return FastParse::kGeneral;
    }
    hdr = uint16_t(doff);
  } else if (proto == kProtoUdp) {
    if (l4_len < kUdpHdrLen) return FastParse::kGeneral;
    const uint16_t ulen = rd16(l4 + 4);
    if (ulen < kUdpHdrLen || ulen > l4_len) return FastParse::kGeneral;
    hdr = kUdpHdrLen;
  } else {
    return FastParse::kGeneral;
  }
  m->l3 = L3::kIpv4;
  m->l4_proto = proto;
  m->flags = (data[0] & 1) ? kPktL2Multicast : 0;
  m->ttl = ip[8];
  m->vlan_tci = 0;
  m->l3_off = kL3;
  m->l4_off = kL4;
  m->l4_len = uint16_t(l4_len);
  m->l4_hdr_len = hdr;
  m->ip_len = uint16_t(total);
  m->frag_off_hdr = 0;
  std::memcpy(&m->sport, l4, 2);
  std::memcpy(&m->dport, l4 + 2, 2);
  m->tcp_flags = tcp_flags;
  m->icmp_type = 0;
  m->icmp_code = 0;
  m->tcp_wscale = 0xff;  // absent unless the options say otherwise
  m->tcp_mss = 0;
  m->ip_id = rd16(ip + 4);
  m->src = IpAddr::v4_bytes(ip + 12);
  m->dst = IpAddr::v4_bytes(ip + 16);
  return hdr > kTcpHdrLen && proto == kProtoTcp ? FastParse::kOptions : FastParse::kDone;
}

}  // namespace

Drop parse_frame_general(const uint8_t* data, uint32_t contig_len, uint32_t frame_len,
                         PacketMeta* m, bool verify_ipv4_csum);

Drop parse_packet(const uint8_t* data, uint32_t len, PacketMeta* m, bool verify_ipv4_csum) {
  return parse_frame(data, len, len, m, verify_ipv4_csum);
}

namespace {

// The fast path's TCP options (SYNs, timestamps): walked out of line so that parse_frame stays
// a leaf with tail calls. A malformed option: the general parser names the drop.
MG_NOINLINE Drop fast_tcp_options(const uint8_t* data, uint32_t contig_len, uint32_t frame_len,
                                  PacketMeta* m, bool verify_ipv4_csum) {
  const uint8_t* l4 = data + m->l4_off;
  const uint8_t* opt = l4 + kTcpHdrLen;
  const uint32_t len = m->l4_hdr_len - kTcpHdrLen;
  if (match_common_tcp_options(opt, len, &m->tcp_mss, &m->tcp_wscale)) return Drop::kNone;
  if (walk_tcp_options(opt, len, m) == Drop::kNone) {
    return Drop::kNone;
  }
  return parse_frame_general(data, contig_len, frame_len, m, verify_ipv4_csum);
}

}  // namespace

Drop parse_frame(const uint8_t* data, uint32_t contig_len, uint32_t frame_len, PacketMeta* m,
                 bool verify_ipv4_csum) {
  const FastParse r = parse_fast_ipv4(data, contig_len, frame_len, m, verify_ipv4_csum);
  if (MG_LIKELY(r == FastParse::kDone)) return Drop::kNone;
  if (r == FastParse::kOptions) {
    return fast_tcp_options(data, contig_len, frame_len, m, verify_ipv4_csum);
  }
  return parse_frame_general(data, contig_len, frame_len, m, verify_ipv4_csum);
}

Drop parse_frame_general(const uint8_t* data, uint32_t contig_len, uint32_t frame_len,
                         PacketMeta* m, bool verify_ipv4_csum) {
  *m = PacketMeta{};
  const Bounds bd{contig_len < frame_len ? contig_len : frame_len, frame_len};
  const uint32_t len = frame_len;
  Drop d;
  if (MG_UNLIKELY(len < kEthHdrLen)) return Drop::kEthTruncated;
  if ((d = bd.need(0, kEthHdrLen, Drop::kEthTruncated)) != Drop::kNone) return d;
  if (data[0] & 1) m->flags |= kPktL2Multicast;
  uint16_t type = rd16(data + 12);
  uint32_t off = kEthHdrLen;
  if (type == kEtherTypeVlan) {
    if (len < kEthHdrLen + kVlanHdrLen) return Drop::kVlanTruncated;
    if ((d = bd.need(0, kEthHdrLen + kVlanHdrLen, Drop::kVlanTruncated)) != Drop::kNone) return d;
    m->flags |= kPktVlan;
    m->vlan_tci = rd16(data + 14);
    type = rd16(data + 16);
    off += kVlanHdrLen;
    if (type == kEtherTypeVlan || type == kEtherTypeQinQ) return Drop::kVlanStacked;
  } else if (type == kEtherTypeQinQ) {
    return Drop::kVlanStacked;
  }
  m->l3_off = uint16_t(off);

  switch (type) {
    case kEtherTypeIpv4:
      return parse_ipv4(data, bd, m, verify_ipv4_csum);
    case kEtherTypeIpv6:
      return parse_ipv6(data, bd, m);
    case kEtherTypeArp: {
      if (len - off < kArpLen) return Drop::kArpTruncated;
      if ((d = bd.need(off, kArpLen, Drop::kArpTruncated)) != Drop::kNone) return d;
      const uint8_t* a = data + off;
      if (rd16(a) != 1 || rd16(a + 2) != kEtherTypeIpv4 || a[4] != 6 || a[5] != 4) {
        return Drop::kArpUnsupported;
      }
      const uint16_t op = rd16(a + 6);
      if (op != kArpOpRequest && op != kArpOpReply) return Drop::kArpUnsupported;
      m->l3 = L3::kArp;
      m->arp_op = op;
      std::memcpy(m->arp_sha.b.data(), a + 8, 6);
      m->arp_spa = IpAddr::v4_bytes(a + 14);
      m->arp_tpa = IpAddr::v4_bytes(a + 24);
      return Drop::kNone;
    }
    default:
      return Drop::kEthertypeUnsupported;
  }
}

}  // namespace meshgate::dp
