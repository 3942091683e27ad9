// Ids for the addresses flows refer to (VIPs, fullnat source addresses): the control side of
// dp::AddrTable. Ids are handed out once and never reused. Control thread only.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "dataplane/common/hash.h"
#include "dataplane/snapshot/addr_table.h"

namespace meshgate::ctl {

class AddrRegistry {
 public:
  AddrRegistry();
  ~AddrRegistry();
  AddrRegistry(const AddrRegistry&) = delete;
  AddrRegistry& operator=(const AddrRegistry&) = delete;

  // The id of `a`, assigned on first use; 0 when the table is full (or DPDK memory is out).
  uint32_t id_for(const IpAddr& a);
  const dp::AddrTable* table() const { return &table_; }

 private:
  struct Hash {
    size_t operator()(const IpAddr& a) const { return crc32c(a.b, sizeof a.b, 0); }
  };
  dp::AddrTable table_;
  std::unordered_map<IpAddr, uint32_t, Hash> ids_;
  uint32_t next_ = 1;
};


}  // namespace meshgate::ctl
