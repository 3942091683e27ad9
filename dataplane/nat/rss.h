// Software RSS: predicts which RX queue a NIC steers a packet to (Toeplitz with the port's key,
// then the RETA), so the gateway can choose source ports whose replies come back to the worker
// that owns the flow. Built by the control thread per port,
// read-only for workers.
//
// Toeplitz is linear over GF(2): hash(a ^ b) = hash(a) ^ hash(b). The hash of a tuple is the
// hash of its fixed part (addresses, source port) XOR the hash of the destination port alone,
// which is precomputed for all 65536 values and both address families.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/common/net_types.h"

namespace meshgate::dp {

class RssPredictor {
 public:
  // `key` as programmed (RSS_HF IP+TCP+UDP over the 4-tuple), `reta` queue per entry.
  RssPredictor(std::vector<uint8_t> key, std::vector<uint16_t> reta)
      : key_(std::move(key)), reta_(std::move(reta)) {
    reta_mask_ = uint32_t(reta_.size() - 1);
    dport_v4_.resize(65536);
    dport_v6_.resize(65536);
    for (uint32_t p = 0; p < 65536; ++p) {
      uint8_t in4[12] = {}, in6[36] = {};
      in4[10] = uint8_t(p >> 8);
      in4[11] = uint8_t(p);
      in6[34] = uint8_t(p >> 8);
      in6[35] = uint8_t(p);
      dport_v4_[p] = toeplitz(in4, sizeof in4);
      dport_v6_[p] = toeplitz(in6, sizeof in6);
    }
  }

  // The standard Toeplitz hash (Microsoft RSS specification) of `len` input bytes.
  uint32_t toeplitz(const uint8_t* in, uint32_t len) const {
    uint32_t h = 0;
    uint32_t window = uint32_t(key_[0]) << 24 | uint32_t(key_[1]) << 16 | uint32_t(key_[2]) << 8 | key_[3];
    for (uint32_t i = 0; i < len; ++i) {
      for (int b = 7; b >= 0; --b) {
        if (in[i] & (1u << b)) h ^= window;
        const uint32_t next_bit_index = i * 8 + (7 - uint32_t(b)) + 32;
        const uint32_t byte = next_bit_index / 8;
        const uint32_t bit = 7 - next_bit_index % 8;
        window = window << 1 | (byte < key_.size() ? (key_[byte] >> bit) & 1 : 0);
      }
    }
    return h;
  }

  // Hash of (src, dst, sport, dport = 0) in the NIC's input layout.
  uint32_t fixed_hash(const IpAddr& src, const IpAddr& dst, uint16_t sport_be) const {
    uint8_t in[36] = {};
    uint32_t n;
    if (src.is_v4()) {
      std::memcpy(in, src.v4_ptr(), 4);
      std::memcpy(in + 4, dst.v4_ptr(), 4);
      std::memcpy(in + 8, &sport_be, 2);
      n = 12;
    } else {
      std::memcpy(in, src.b, 16);
      std::memcpy(in + 16, dst.b, 16);
      std::memcpy(in + 32, &sport_be, 2);
      n = 36;
    }
    return toeplitz(in, n);
  }
  uint32_t with_dport(uint32_t fixed, bool v4, uint16_t dport_host) const {
    return fixed ^ (v4 ? dport_v4_[dport_host] : dport_v6_[dport_host]);
  }
  uint16_t queue_of(uint32_t hash) const { return reta_[hash & reta_mask_]; }
  uint16_t queue(const IpAddr& src, const IpAddr& dst, uint16_t sport_be, uint16_t dport_be) const {
    const uint16_t dport_host = uint16_t(dport_be >> 8 | dport_be << 8);
    return queue_of(with_dport(fixed_hash(src, dst, sport_be), src.is_v4(), dport_host));
  }

 private:
  std::vector<uint8_t> key_;
  std::vector<uint16_t> reta_;
  uint32_t reta_mask_ = 0;
  std::vector<uint32_t> dport_v4_, dport_v6_;
};

}  // namespace meshgate::dp
