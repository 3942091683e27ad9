// SipHash-2-4 (Aumasson & Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed PRF
// for short inputs, here the SYN cookie MAC. Written from the paper's specification (§2) and
// checked against its Appendix A test vector. Pure C++, any thread, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace meshgate::dp::tcp {

struct SipKey {
  uint64_t k0 = 0;  // key bytes 0..7, little-endian
  uint64_t k1 = 0;  // key bytes 8..15, little-endian
};

namespace siphash_detail {

constexpr uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

// SipHash paper §2, "SipRound".
inline void sip_round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = rotl(v1, 13);
  v1 ^= v0;
  v0 = rotl(v0, 32);
  v2 += v3;
  v3 = rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = rotl(v1, 17);
  v1 ^= v2;
  v2 = rotl(v2, 32);
}

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = (w << 8) | p[i];
  return w;
}

}  // namespace siphash_detail

// SipHash-2-4 of `len` bytes: 2 compression rounds per 8-byte word, 4 finalization rounds.
inline uint64_t siphash24(const SipKey& key, const void* data, size_t len) {
  using namespace siphash_detail;
  const auto* p = static_cast<const uint8_t*>(data);
  // §2 Initialization: the key XORed with "somepseudorandomlygeneratedbytes".
  uint64_t v0 = key.k0 ^ 0x736f6d6570736575ULL;
  uint64_t v1 = key.k1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = key.k0 ^ 0x6c7967656e657261ULL;
  uint64_t v3 = key.k1 ^ 0x7465646279746573ULL;
  const size_t words = len / 8;
  for (size_t i = 0; i < words; ++i) {
    const uint64_t m = load_le64(p + 8 * i);
    v3 ^= m;
    sip_round(v0, v1, v2, v3);
    sip_round(v0, v1, v2, v3);
    v0 ^= m;
  }
  // §2 Compression: the last word holds the remaining bytes and len mod 256 in its top byte.
  uint64_t b = uint64_t(len & 0xff) << 56;
  const size_t rest = len % 8;
  for (size_t i = 0; i < rest; ++i) b |= uint64_t(p[8 * words + i]) << (8 * i);
  v3 ^= b;
  sip_round(v0, v1, v2, v3);
  sip_round(v0, v1, v2, v3);
  v0 ^= b;
  // §2 Finalization.
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) sip_round(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace meshgate::dp::tcp
