#include "dataplane/tcp/tcp_options.h"

#include "dataplane/packet/wire.h"

namespace meshgate::dp::tcp {

bool parse_tcp_options(const uint8_t* p, uint32_t len, TcpOptions* out) {
  uint32_t i = 0;
  while (i < len) {
    const uint8_t kind = p[i];
    if (kind == kOptEnd) break;
    if (kind == kOptNop) {
      ++i;
      continue;
    }
    if (i + 1 >= len) return false;
    const uint8_t olen = p[i + 1];
    if (olen < 2 || i + olen > len) return false;
    const uint8_t* v = p + i + 2;
    switch (kind) {
      case kOptMss:
        if (olen == 4) out->mss = rd16(v);
        break;
      case kOptWscale:
        if (olen == 3) out->wscale = v[0];
        break;
      case kOptSackPermitted:
        if (olen == 2) out->sack_permitted = true;
        break;
      case kOptTimestamp:
        if (olen == 10) {
          out->has_ts = true;
          out->tsval = rd32(v);
          out->tsecr = rd32(v + 4);
        }
        break;
      case kOptSack: {
        // RFC 2018 §3: 8 bytes per block.
        const uint32_t n = (olen - 2u) / 8;
        if ((olen - 2u) % 8 != 0) break;
        for (uint32_t k = 0; k < n && out->nsack < kMaxSackBlocksIn; ++k) {
          out->sack[out->nsack++] = SackBlock{rd32(v + 8 * k), rd32(v + 8 * k + 4)};
        }
        break;
      }
      default: break;
    }
    i += olen;
  }
  return true;
}

uint32_t write_tcp_options(uint8_t* p, const TcpOptionsOut& o) {
  uint32_t n = 0;
  if (o.mss != 0) {
    p[n++] = kOptMss;
    p[n++] = 4;
    wr16(p + n, o.mss);
    n += 2;
  }
  if (o.wscale != 0xff) {
    p[n++] = kOptNop;
    p[n++] = kOptWscale;
    p[n++] = 3;
    p[n++] = o.wscale;
  }
  if (o.sack_permitted && !o.ts) {
    p[n++] = kOptNop;
    p[n++] = kOptNop;
    p[n++] = kOptSackPermitted;
    p[n++] = 2;
  }
  if (o.ts) {
    // RFC 7323 Appendix A layout: SACK-permitted (when sent) shares the timestamp's padding.
    if (o.sack_permitted) {
      p[n++] = kOptSackPermitted;
      p[n++] = 2;
    } else {
      p[n++] = kOptNop;
      p[n++] = kOptNop;
    }
    p[n++] = kOptTimestamp;
    p[n++] = 10;
    wr32(p + n, o.tsval);
    wr32(p + n + 4, o.tsecr);
    n += 8;
  }
  if (o.nsack > 0) {
    const uint32_t room = (40 - n - 4) / 8;
    const uint32_t k = o.nsack < room ? o.nsack : room;
    if (k > 0) {
      p[n++] = kOptNop;
      p[n++] = kOptNop;
      p[n++] = kOptSack;
      p[n++] = uint8_t(2 + 8 * k);
      for (uint32_t b = 0; b < k; ++b) {
        wr32(p + n, o.sack[b].start);
        wr32(p + n + 4, o.sack[b].end);
        n += 8;
      }
    }
  }
  return n;
}

}  // namespace meshgate::dp::tcp
