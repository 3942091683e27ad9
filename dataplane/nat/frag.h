// Fragments of translated flows. RSS spreads fragments by addresses only, so every fragment of
// a datagram reaches one worker; the first (which carries the ports) finds or creates the flow,
// and later fragments follow it here, keyed by (source, destination, protocol, IP id) as they
// arrived. A later fragment that comes before its first is dropped (fragment_no_first); a
// second first fragment of the datagram with other ports is dropped (fragment_duplicate_first)
// rather than sending its later fragments after another flow: the receiver's reassembly takes
// one first fragment, and which one the gateway cannot know.
// Per worker; direct-mapped, 2 ways; entries live kFragTimeoutMs (RFC 791 reassembly-timer
// scale).
#pragma once

#include <cstdint>

#include "dataplane/common/hash.h"
#include "dataplane/common/net_types.h"

namespace meshgate::dp {

class FragTable {
 public:
  static constexpr uint32_t kSets = 2048;
  static constexpr uint32_t kWays = 2;
  static constexpr uint32_t kFragTimeoutMs = 30000;

  struct Entry {
    IpAddr src;
    IpAddr dst;
    uint32_t id = 0;
    uint32_t flow_idx = 0;     // conntrack pool index
    uint32_t flow_created = 0; // the flow's created_ms: a reused slot is a different flow
    uint32_t expire_ms = 0;
    uint16_t sport = 0;        // the first fragment's ports, network order, as it arrived
    uint16_t dport = 0;
    uint8_t proto = 0;         // 0 = empty
    uint8_t dir = 0;           // FlowDir of the datagram
  };

  // Records the first fragment's flow. Overwrites the oldest way of the set.
  void remember(const IpAddr& src, const IpAddr& dst, uint16_t sport, uint16_t dport,
                uint8_t proto, uint32_t id, uint32_t flow_idx, uint32_t flow_created,
                uint8_t dir, uint32_t now_ms) {
    Entry* set = &entries_[index(src, dst, proto, id) * kWays];
    Entry* victim = &set[0];
    for (uint32_t w = 0; w < kWays; ++w) {
      if (same(set[w], src, dst, proto, id) || set[w].proto == 0) {
        victim = &set[w];
        break;
      }
      if (int32_t(set[w].expire_ms - victim->expire_ms) < 0) victim = &set[w];
    }
    *victim = Entry{src,   dst,   id,    flow_idx, flow_created, now_ms + kFragTimeoutMs,
                    sport, dport, proto, dir};
  }

  const Entry* find(const IpAddr& src, const IpAddr& dst, uint8_t proto, uint32_t id,
                    uint32_t now_ms) const {
    const Entry* set = &entries_[index(src, dst, proto, id) * kWays];
    for (uint32_t w = 0; w < kWays; ++w) {
      if (same(set[w], src, dst, proto, id) && int32_t(set[w].expire_ms - now_ms) > 0) {
        return &set[w];
      }
    }
    return nullptr;
  }

 private:
  static uint32_t index(const IpAddr& s, const IpAddr& d, uint8_t proto, uint32_t id) {
    uint32_t h = crc32c(s.b, 16, id);
    h = crc32c(d.b, 16, h ^ proto);
    return h & (kSets - 1);
  }
  static bool same(const Entry& e, const IpAddr& s, const IpAddr& d, uint8_t proto, uint32_t id) {
    return e.proto == proto && e.id == id && e.src == s && e.dst == d;
  }
  Entry entries_[kSets * kWays];
};

}  // namespace meshgate::dp
