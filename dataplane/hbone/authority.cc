#include "dataplane/hbone/authority.h"

#include <arpa/inet.h>

#include <cstring>

namespace meshgate::dp::hbone {
namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }
bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool parse_port(std::string_view s, uint16_t& port) {
  if (s.empty() || s.size() > 5 || s[0] == '0') return false;
  uint32_t v = 0;
  for (char c : s) {
    if (!digit(c)) return false;
    v = v * 10 + uint32_t(c - '0');
  }
  if (v > 65535) return false;
  port = uint16_t(v);
  return true;
}

bool parse_ipv4(std::string_view s, IpAddr& out) {
  uint8_t b[4];
  int octet = 0;
  size_t i = 0;
  while (true) {
    const size_t start = i;
    uint32_t v = 0;
    while (i < s.size() && digit(s[i]) && i - start < 4) v = v * 10 + uint32_t(s[i++] - '0');
    const size_t len = i - start;
    if (len == 0 || len > 3 || v > 255 || (len > 1 && s[start] == '0')) return false;
    b[octet++] = uint8_t(v);
    if (octet == 4) break;
    if (i >= s.size() || s[i] != '.') return false;
    ++i;
  }
  if (i != s.size()) return false;
  out = IpAddr::v4_bytes(b);
  return true;
}

bool parse_ipv6(std::string_view s, IpAddr& out) {
  char buf[INET6_ADDRSTRLEN];
  if (s.empty() || s.size() >= sizeof buf) return false;
  for (char c : s)
    if (!(digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
      return false;
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = 0;
  uint8_t raw[16];
  if (inet_pton(AF_INET6, buf, raw) != 1) return false;
  out = IpAddr::v6_bytes(raw);
  return true;
}

bool parse_name(std::string_view s, Authority& out) {
  if (s.empty() || s.size() > kMaxHostnameBytes) return false;
  size_t label_len = 0;
  bool label_all_digits = true;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.') {
      if (label_len == 0 || s[i - 1] == '-') return false;
      label_len = 0;
      label_all_digits = true;
      out.name[i] = '.';
      continue;
    }
    if (!(alpha(c) || digit(c) || c == '-')) return false;
    if (c == '-' && label_len == 0) return false;
    if (++label_len > kMaxLabelBytes) return false;
    label_all_digits = label_all_digits && digit(c);
    out.name[i] = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
  }
  if (label_len == 0 || s.back() == '-' || label_all_digits) return false;
  out.name[s.size()] = 0;
  out.name_len = uint8_t(s.size());
  return true;
}

}  // namespace

bool parse_authority(std::string_view s, Authority& out) {
  out.name_len = 0;
  out.name[0] = 0;
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return false;
    out.kind = Authority::Kind::kIp;
    return parse_ipv6(s.substr(1, close - 1), out.ip) && parse_port(s.substr(close + 2), out.port);
  }
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view host = s.substr(0, colon);
  if (!parse_port(s.substr(colon + 1), out.port)) return false;
  // Only one colon outside brackets: an unbracketed IPv6 address is ambiguous with the port.
  if (host.find(':') != std::string_view::npos) return false;
  // A last label of digits only means an IPv4 address (RFC 3696 2: no all-numeric TLD).
  const std::string_view last = host.substr(host.rfind('.') + 1);
  bool numeric = !last.empty();
  for (char c : last) numeric = numeric && digit(c);
  if (numeric) {
    out.kind = Authority::Kind::kIp;
    return parse_ipv4(host, out.ip);
  }
  out.kind = Authority::Kind::kName;
  return parse_name(host, out);
}

}  // namespace meshgate::dp::hbone
