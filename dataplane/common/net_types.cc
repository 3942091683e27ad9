#include "dataplane/common/net_types.h"

#include <arpa/inet.h>

#include <cstdio>

namespace meshgate {

std::optional<IpAddr> IpAddr::parse(std::string_view s) {
  if (s.empty() || s.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char buf[INET6_ADDRSTRLEN];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = 0;
  uint8_t raw[16];
  if (s.find(':') == std::string_view::npos) {
    if (inet_pton(AF_INET, buf, raw) != 1) return std::nullopt;
    return v4_bytes(raw);
  }
  if (inet_pton(AF_INET6, buf, raw) != 1) return std::nullopt;
  return v6_bytes(raw);
}

namespace {

char* format_v4(const uint8_t* p, char* out) {
  for (int i = 0; i < 4; ++i) {
    if (i) *out++ = '.';
    const unsigned v = p[i];
    if (v >= 100) *out++ = char('0' + v / 100);
    if (v >= 10) *out++ = char('0' + v / 10 % 10);
    *out++ = char('0' + v % 10);
  }
  return out;
}

}  // namespace

// As glibc's inet_ntop6: the first longest run of two or more zero groups becomes "::", groups
// in lowercase hex without leading zeros (RFC 5952 §4), and ::a.b.c.d (the deprecated
// IPv4-compatible form) keeps its dotted quad. IPv4-mapped addresses are printed as IPv4.
char* IpAddr::format(char* out) const {
  if (is_v4()) return format_v4(v4_ptr(), out);
  uint32_t w[8];
  for (int i = 0; i < 8; ++i) w[i] = uint32_t(b[2 * i]) << 8 | b[2 * i + 1];
  int best = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (w[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && w[j] == 0) ++j;
    if (j - i > best_len) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  if (best_len < 2) best = -1;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    if (best >= 0 && i >= best && i < best + best_len) {
      if (i == best) *out++ = ':';
      continue;
    }
    if (i != 0) *out++ = ':';
    if (i == 6 && best == 0 && best_len == 6) return format_v4(&b[12], out);
    bool lead = true;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const uint32_t d = w[i] >> shift & 0xf;
      if (lead && d == 0 && shift != 0) continue;
      lead = false;
      *out++ = kHex[d];
    }
  }
  if (best >= 0 && best + best_len == 8) *out++ = ':';
  return out;
}

std::string IpAddr::str() const {
  char buf[kMaxStrLen];
  return std::string(buf, format(buf));
}

std::optional<IpPrefix> IpPrefix::parse(std::string_view s) {
  auto slash = s.find('/');
  auto addr = IpAddr::parse(s.substr(0, slash));
  if (!addr) return std::nullopt;
  const int max_len = addr->is_v4() ? 32 : 128;
  int len = max_len;
  if (slash != std::string_view::npos) {
    auto digits = s.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    len = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      len = len * 10 + (c - '0');
    }
    if (len > max_len) return std::nullopt;
  }
  return IpPrefix{*addr, uint8_t(len)};
}

std::string IpPrefix::str() const { return addr.str() + "/" + std::to_string(len); }

IpPrefix IpPrefix::network() const {
  IpPrefix p = *this;
  const int bits = addr.is_v4() ? 96 + len : len;  // IPv4 lives in the low 32 bits
  for (int i = 0; i < 16; ++i) {
    const int keep = bits - i * 8;
    if (keep >= 8) continue;
    p.addr.b[i] &= keep <= 0 ? 0 : uint8_t(0xff << (8 - keep));
  }
  return p;
}

bool IpPrefix::contains(const IpAddr& a) const {
  if (a.is_v4() != addr.is_v4()) return false;
  IpPrefix other{a, len};
  return other.network().addr == network().addr;
}

std::optional<MacAddr> MacAddr::parse(std::string_view s) {
  if (s.size() != 17) return std::nullopt;
  MacAddr m;
  for (int i = 0; i < 6; ++i) {
    if (i > 0 && s[i * 3 - 1] != ':' && s[i * 3 - 1] != '-') return std::nullopt;
    uint8_t v = 0;
    for (int j = 0; j < 2; ++j) {
      const char c = s[i * 3 + j];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint8_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint8_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint8_t(c - 'A' + 10);
      else return std::nullopt;
    }
    m.b[i] = v;
  }
  return m;
}

std::string MacAddr::str() const {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4],
                b[5]);
  return buf;
}

}  // namespace meshgate
