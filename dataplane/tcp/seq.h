// TCP sequence-number arithmetic modulo 2^32 (RFC 9293 §3.4). Pure functions, no state: any
// thread, no allocation.
//
// Every comparison is the sign of the 32-bit difference, so it is correct across the wrap as
// long as the two numbers are less than 2^31 apart. TCP keeps them much closer: a window is at
// most 2^30 bytes (RFC 7323 §2.3), and RFC 9293 §3.4 already requires the sequence space to be
// large enough that the numbers being compared never drift that far apart. At exactly 2^31
// apart the order is undefined (both seq_lt(a, b) and seq_lt(b, a) hold); do not rely on it.
#pragma once

#include <cstdint>

namespace meshgate::dp::tcp {

// a - b as a signed distance: > 0 when a is after b.
constexpr int32_t seq_diff(uint32_t a, uint32_t b) { return int32_t(a - b); }

constexpr bool seq_lt(uint32_t a, uint32_t b) { return seq_diff(a, b) < 0; }
constexpr bool seq_le(uint32_t a, uint32_t b) { return seq_diff(a, b) <= 0; }
constexpr bool seq_gt(uint32_t a, uint32_t b) { return seq_diff(a, b) > 0; }
constexpr bool seq_ge(uint32_t a, uint32_t b) { return seq_diff(a, b) >= 0; }

constexpr uint32_t seq_max(uint32_t a, uint32_t b) { return seq_gt(a, b) ? a : b; }
constexpr uint32_t seq_min(uint32_t a, uint32_t b) { return seq_lt(a, b) ? a : b; }

// Bytes from `from` forward to `to` (to - from modulo 2^32). Meaningful when seq_le(from, to).
constexpr uint32_t seq_distance(uint32_t from, uint32_t to) { return to - from; }

// start <= seq < start + len, with the window's end possibly past the wrap. A zero-length
// window holds nothing (RFC 9293 §3.10.7.4 treats a zero receive window specially: the caller
// decides what is acceptable there).
constexpr bool in_window(uint32_t seq, uint32_t start, uint32_t len) {
  return seq - start < len;
}

// lo <= seq < hi for a half-open range [lo, hi) given by its ends.
constexpr bool seq_in_range(uint32_t seq, uint32_t lo, uint32_t hi) {
  return seq - lo < hi - lo;
}

}  // namespace meshgate::dp::tcp
