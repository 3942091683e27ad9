#include "tools/pktlib/checksum.h"

#include <array>

namespace meshgate::pkt {

uint64_t csum_add(std::span<const uint8_t> data, uint64_t sum) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  // 64-bit accumulator: 2^48 words before it could overflow, far beyond any frame.
  while (n >= 8) {
    sum += uint32_t(p[0]) << 8 | p[1];
    sum += uint32_t(p[2]) << 8 | p[3];
    sum += uint32_t(p[4]) << 8 | p[5];
    sum += uint32_t(p[6]) << 8 | p[7];
    p += 8;
    n -= 8;
  }
  while (n >= 2) {
    sum += uint32_t(p[0]) << 8 | p[1];
    p += 2;
    n -= 2;
  }
  if (n) sum += uint32_t(p[0]) << 8;
  return sum;
}

static uint16_t fold(uint64_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(sum);
}

uint16_t csum_finish(uint64_t sum) { return uint16_t(~fold(sum)); }

bool csum_valid(std::span<const uint8_t> data, uint64_t sum) {
  return fold(csum_add(data, sum)) == 0xffff;
}

uint64_t pseudo_header_sum(const IpAddr& src, const IpAddr& dst, uint8_t proto, uint32_t l4_len) {
  uint64_t sum = 0;
  if (src.is_v4() && dst.is_v4()) {
    sum = csum_add({src.v4_ptr(), 4});
    sum = csum_add({dst.v4_ptr(), 4}, sum);
  } else {
    sum = csum_add({src.b, 16});
    sum = csum_add({dst.b, 16}, sum);
  }
  return sum + proto + (l4_len >> 16) + (l4_len & 0xffff);
}

static constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;  // reflected poly
    t[i] = c;
  }
  return t;
}

uint32_t sctp_crc32c(std::span<const uint8_t> data) {
  static constexpr auto kTable = make_crc32c_table();
  uint32_t crc = 0xffffffffu;
  for (uint8_t b : data) crc = kTable[(crc ^ b) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace meshgate::pkt
