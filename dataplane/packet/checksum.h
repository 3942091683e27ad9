// Internet checksums: full computation (RFC 1071) and incremental update (RFC 1624).
// Pure inline helpers, any thread. Checksum fields are handled as stored on the wire (network
// order); the one's-complement sum is byte-order independent as long as both operands agree.
#pragma once

#include <cstdint>
#include <cstring>

namespace meshgate::dp {

// One's-complement sum of `len` bytes (not folded, not inverted), added to `sum`.
inline uint32_t csum_partial(const void* data, uint32_t len, uint32_t sum) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t s = sum;
  while (len >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    s += (w & 0xffffffffu) + (w >> 32);
    p += 8;
    len -= 8;
  }
  while (len >= 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    s += w;
    p += 2;
    len -= 2;
  }
  if (len) {
    uint16_t w = 0;
    std::memcpy(&w, p, 1);  // odd byte padded with zero (RFC 1071)
    s += w;
  }
  while (s >> 32) s = (s & 0xffffffffu) + (s >> 32);
  return uint32_t(s);
}

// One's-complement addition of two partial sums.
inline uint32_t csum_add(uint32_t a, uint32_t b) {
  const uint64_t s = uint64_t(a) + b;
  return uint32_t((s & 0xffffffffu) + (s >> 32));
}

inline uint16_t csum_fold(uint32_t sum) {
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(sum);
}

// The checksum field value for data whose sum is `sum`.
inline uint16_t csum_finish(uint32_t sum) { return uint16_t(~csum_fold(sum)); }

// Pseudo-header sums (RFC 793 / RFC 8200 §8.1), addresses as on the wire.
inline uint32_t csum_pseudo_v4(const uint8_t* src4, const uint8_t* dst4, uint8_t proto,
                               uint32_t l4_len) {
  uint32_t s = csum_partial(src4, 4, 0);
  s = csum_partial(dst4, 4, s);
  const uint16_t tail[2] = {uint16_t(__builtin_bswap16(proto)),
                            uint16_t(__builtin_bswap16(uint16_t(l4_len)))};
  return csum_partial(tail, 4, s);
}

inline uint32_t csum_pseudo_v6(const uint8_t* src16, const uint8_t* dst16, uint8_t proto,
                               uint32_t l4_len) {
  uint32_t s = csum_partial(src16, 16, 0);
  s = csum_partial(dst16, 16, s);
  const uint32_t tail[2] = {__builtin_bswap32(l4_len), __builtin_bswap32(proto)};
  return csum_partial(tail, 8, s);
}

// Checksum fields are accessed through byte pointers (no alignment or aliasing assumptions).
inline uint16_t csum_load(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void csum_store(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), for a 16-bit field change m -> m' (memory order).
inline void csum_replace2(uint8_t* csum, uint16_t old_v, uint16_t new_v) {
  uint32_t s = uint16_t(~csum_load(csum));
  s += uint16_t(~old_v);
  s += new_v;
  csum_store(csum, uint16_t(~csum_fold(s)));
}

// A change of `len` bytes (multiple of 2, 2-aligned in the checksummed data) from old to new.
inline void csum_replace_bytes(uint8_t* csum, const void* old_v, const void* new_v,
                               uint32_t len) {
  uint32_t s = uint16_t(~csum_load(csum));
  s += uint16_t(~csum_fold(csum_partial(old_v, len, 0)));
  s = csum_partial(new_v, len, s);
  csum_store(csum, uint16_t(~csum_fold(s)));
}

// RFC 1624 eqn. 3 with the change given as a partial sum: HC' = ~(~HC + delta), where delta is
// the sum of ~m and m' over the changed words. `delta` may hold up to 2^36 (a handful of 32-bit
// terms), so two 64 -> 32 folds always leave a 32-bit value for csum_fold.
inline void csum_apply_delta(uint8_t* csum, uint64_t delta) {
  uint64_t s = uint64_t(uint16_t(~csum_load(csum))) + delta;
  s = (s & 0xffffffffu) + (s >> 32);
  s = (s & 0xffffffffu) + (s >> 32);
  csum_store(csum, uint16_t(~csum_fold(uint32_t(s))));
}

// The delta term of a 32-bit field change (memory order), for csum_apply_delta: ~m + m'.
inline uint64_t csum_delta32(const uint8_t* old_v, const uint8_t* new_v) {
  uint32_t o, n;
  std::memcpy(&o, old_v, 4);
  std::memcpy(&n, new_v, 4);
  return uint64_t(uint32_t(~o)) + n;
}

// The same for a 16-bit field.
inline uint64_t csum_delta16(uint16_t old_v, uint16_t new_v) {
  return uint64_t(uint16_t(~old_v)) + new_v;
}

// UDP uses 0 for "no checksum" (RFC 768); a computed 0 is sent as 0xffff.
inline void udp_csum_fixup(uint8_t* csum) {
  if (csum_load(csum) == 0) csum_store(csum, 0xffff);
}

// Full IPv4 header checksum (hdr_len bytes, checksum field at offset 10 zeroed first).
inline uint16_t ipv4_header_csum(uint8_t* hdr, uint32_t hdr_len) {
  hdr[10] = hdr[11] = 0;
  return csum_finish(csum_partial(hdr, hdr_len, 0));
}

}  // namespace meshgate::dp
