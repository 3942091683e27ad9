// SPIFFE workload identities as Istio uses them: spiffe://<trust domain>/ns/<ns>/sa/<sa>.
// Pure parsing, no allocation; any thread.
#pragma once

#include <string_view>

namespace meshgate::dp::tls {

inline constexpr std::string_view kSpiffeScheme = "spiffe://";
// SPIFFE-ID §2.3: a SPIFFE ID is at most 2048 bytes.
inline constexpr size_t kMaxSpiffeIdBytes = 2048;
// SPIFFE-ID §2.1: trust domain names are at most 255 bytes.
inline constexpr size_t kMaxTrustDomainBytes = 255;

// The parts of a parsed id; views into the parsed string.
struct SpiffeId {
  std::string_view trust_domain;
  std::string_view ns;
  std::string_view service_account;
  // "td/ns/x/sa/y": the id without the scheme, the form Istio's principals use.
  std::string_view principal;
};

// Strict: the scheme in lower case; a trust domain of [a-z0-9.-_]; a path of exactly the four
// segments ns/<ns>/sa/<sa> (literal "ns" and "sa"), each segment non-empty, of
// [A-Za-z0-9.-_], not "." or ".."; no query, fragment, port, user info or percent escapes.
// Returns false (and leaves `out` unspecified) for anything else.
bool parse_spiffe_id(std::string_view s, SpiffeId& out);

}  // namespace meshgate::dp::tls
