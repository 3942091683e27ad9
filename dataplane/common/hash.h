// Hashes with fixed definitions, so two gateways (and pcapgen) compute the same values on any
// x86-64 machine. Pure C++, any thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <nmmintrin.h>

namespace meshgate {

// CRC32C (SSE4.2 crc32 instruction) over `len` bytes.
inline uint32_t crc32c(const void* data, size_t len, uint32_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t crc = seed;
  while (len >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    crc = _mm_crc32_u64(crc, w);
    p += 8;
    len -= 8;
  }
  uint32_t c = uint32_t(crc);
  while (len--) c = _mm_crc32_u8(c, *p++);
  return c;
}

// MurmurHash3's 64-bit finalizer: a bijective avalanche mix.
inline uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// 64-bit FNV-1a over bytes, finished with fmix64; `seed` selects independent functions.
inline uint64_t hash64(const void* data, size_t len, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ULL ^ fmix64(seed + 0x9e3779b97f4a7c15ULL);
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return fmix64(h);
}

}  // namespace meshgate
