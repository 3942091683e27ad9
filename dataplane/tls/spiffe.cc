#include "dataplane/tls/spiffe.h"

namespace meshgate::dp::tls {
namespace {

bool trust_domain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}
bool path_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '-' || c == '_';
}

// Takes the next "/segment" off `rest`; false when it is missing or not a valid segment
// (SPIFFE-ID §2.2).
bool take_segment(std::string_view& rest, std::string_view& seg) {
  if (rest.empty() || rest[0] != '/') return false;
  rest.remove_prefix(1);
  size_t n = 0;
  while (n < rest.size() && rest[n] != '/') {
    if (!path_char(rest[n])) return false;
    ++n;
  }
  seg = rest.substr(0, n);
  rest.remove_prefix(n);
  return !seg.empty() && seg != "." && seg != "..";
}

}  // namespace

bool parse_spiffe_id(std::string_view s, SpiffeId& out) {
  if (s.size() > kMaxSpiffeIdBytes || !s.starts_with(kSpiffeScheme)) return false;
  std::string_view rest = s.substr(kSpiffeScheme.size());
  out.principal = rest;
  size_t n = 0;
  while (n < rest.size() && rest[n] != '/') {
    if (!trust_domain_char(rest[n])) return false;
    ++n;
  }
  if (n == 0 || n > kMaxTrustDomainBytes) return false;
  out.trust_domain = rest.substr(0, n);
  rest.remove_prefix(n);
  std::string_view ns_lit, sa_lit;
  if (!take_segment(rest, ns_lit) || ns_lit != "ns") return false;
  if (!take_segment(rest, out.ns)) return false;
  if (!take_segment(rest, sa_lit) || sa_lit != "sa") return false;
  if (!take_segment(rest, out.service_account)) return false;
  return rest.empty();
}

}  // namespace meshgate::dp::tls
