// RFC 1624 incremental updates must equal a full RFC 1071 recomputation.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dataplane/packet/checksum.h"

namespace meshgate::dp {
namespace {

uint16_t full(const std::vector<uint8_t>& d) { return csum_finish(csum_partial(d.data(), uint32_t(d.size()), 0)); }

TEST(Checksum, rfc1071_example_sums_correctly) {
  // RFC 1071 §3 example: 00 01 f2 03 f4 f5 f6 f7 -> one's-complement sum ddf2 (big-endian view).
  const std::vector<uint8_t> d = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  const uint16_t s = csum_fold(csum_partial(d.data(), uint32_t(d.size()), 0));
  uint8_t be[2];
  std::memcpy(be, &s, 2);
  EXPECT_EQ(be[0], 0xdd);
  EXPECT_EQ(be[1], 0xf2);
}

TEST(Checksum, incremental_replace_of_any_field_equals_full_recompute) {
  std::mt19937 rng(1);
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> d(2 * (4 + rng() % 40));
    for (auto& b : d) b = uint8_t(rng());
    d[0] = d[1] = 0;  // checksum field
    const uint16_t c = full(d);
    std::memcpy(d.data(), &c, 2);
    // Change a 2-byte-aligned field of 2, 4 or 16 bytes.
    const uint32_t len = std::array<uint32_t, 3>{2, 4, 16}[rng() % 3];
    if (d.size() < 2 + len) continue;
    const uint32_t off = 2 + 2 * (rng() % ((d.size() - 2 - len) / 2 + 1));
    std::vector<uint8_t> old(d.begin() + off, d.begin() + off + len), neu(len);
    for (auto& b : neu) b = uint8_t(rng());
    uint8_t field[2];
    std::memcpy(field, d.data(), 2);
    if (len == 2) {
      uint16_t o, n;
      std::memcpy(&o, old.data(), 2);
      std::memcpy(&n, neu.data(), 2);
      csum_replace2(field, o, n);
    } else {
      csum_replace_bytes(field, old.data(), neu.data(), len);
    }
    std::copy(neu.begin(), neu.end(), d.begin() + off);
    // Verify: the data with the updated checksum sums to 0xffff (one's-complement zero).
    std::memcpy(d.data(), field, 2);
    ASSERT_EQ(csum_fold(csum_partial(d.data(), uint32_t(d.size()), 0)), 0xffff) << iter;
  }
}

TEST(Checksum, odd_length_pads_with_zero) {
  const std::vector<uint8_t> odd = {0x12, 0x34, 0x56};
  const std::vector<uint8_t> even = {0x12, 0x34, 0x56, 0x00};
  EXPECT_EQ(full(odd), full(even));
}

}  // namespace
}  // namespace meshgate::dp
