// The name a client asks for in the first bytes of a connection, for the SNI and Host listeners:
// the server_name of a TLS ClientHello (RFC 6066 §3) or the Host of an HTTP/1.x request
// (RFC 9112 §3.2). Pure functions: no allocation, no exceptions, no state; any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace meshgate::dp::names {

// The longest name taken: RFC 6066 §3's HostName<1..2^16-1> (an HTTP Host fits the peek
// bound, kMaxPeekBytes, too). A DNS name is at most 253 bytes in text form (RFC 1035 §2.3.4);
// a longer one is still extracted, for regex routes to match (the matcher's exact and wildcard
// maps hold DNS names only and never match it).
inline constexpr uint32_t kMaxNameBytes = 65535;
// RFC 1035 §2.3.4: a label is at most 63 octets.
inline constexpr uint32_t kMaxLabelBytes = 63;
// The longest ClientHello accepted (the handshake length field allows 16 MiB). Real ones are
// below 2 KiB, a few KiB with session tickets or post-quantum key shares; the caller's peek limit
// is usually smaller still.
inline constexpr uint32_t kMaxClientHelloBytes = 64 * 1024;

// 64 KiB: a caller on a worker keeps one per thread rather than on its stack.
struct Name {
  char bytes[kMaxNameBytes + 1];  // NUL-terminated
  uint32_t len = 0;
  std::string_view view() const { return {bytes, len}; }
};

enum class Extract : uint8_t {
  kNeedMore,   // a prefix of a valid message: call again with more bytes
  kFound,      // *out holds the name: lowercase ASCII, no trailing dot
  kNoName,     // the message is complete and carries no name (ClientHello without server_name
               // host_name entry; HTTP/1.x request whose header section ended without Host)
  kMalformed,  // not a TLS handshake / not an HTTP/1.x request, lengths lying, bad name bytes,
               // duplicate Host, ...
};

struct ExtractResult {
  Extract status = Extract::kNeedMore;
  // kNeedMore: the total stream length before another call can make progress (0: unknown,
  // call again on any new byte). Lets the caller avoid re-parsing a 16 KiB ClientHello on every
  // 1-byte segment. For TLS, once the handshake length is known, it is the end of the
  // ClientHello if the current record holds it, else that plus one more record header: a
  // ClientHello sent in 1-byte records is tried some 20 to 40 times, not once per record. A call with fewer bytes than `need` returns kNeedMore or, when the bytes
  // already there are bad, kMalformed; never kFound or kNoName.
  uint32_t need = 0;
};

// `stream`/`len`: the client's first bytes of the connection, contiguous, from byte 0.
// Neither reads past `len` nor writes past *out. No allocation, no exceptions.
// out->len is written only when kFound is returned (out->bytes may be used as scratch). Once a call returns anything but kNeedMore,
// every call with more bytes of the same stream returns the same (bytes after the ClientHello or
// after the header section are not looked at).
//
// A name is 1..kMaxNameBytes bytes of letters, digits, '-', '_' and '.', labels of 1..63 bytes; upper case
// is folded to lower case and one trailing dot is dropped. Anything else is kMalformed.

// TLS: records of type 22 (any 0x03xx version, 1..2^14 bytes) carrying a ClientHello of at most
// kMaxClientHelloBytes, split across records and segments in any way. The first host_name entry
// of the outer ClientHello's server_name extension is the name (with ECH that is the public
// name). Malformed: any other record type or handshake message first, any length that does not
// fit its container, a second server_name extension or a second host_name entry, an empty
// server_name list.
ExtractResult extract_sni(const uint8_t* stream, uint32_t len, Name* out);

// HTTP/1.x: `METHOD SP request-target SP HTTP/1.x` and header fields up to the empty line, CRLF
// or bare LF line ends. The host of an absolute-form request-target wins over Host; a Host of
// `name[:port]` or `[IPv6]:port` gives the name or the address (lower case, without brackets:
// the only names that hold ':'). No Host or an empty one is kNoName. Malformed: not a request
// line of HTTP/1.x, two Host fields, obs-fold, a bare CR, control bytes in a field, an invalid
// host.
ExtractResult extract_host(const uint8_t* stream, uint32_t len, Name* out);

}  // namespace meshgate::dp::names
