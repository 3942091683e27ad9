#include "dataplane/names/name_extract.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace meshgate::dp::names {
namespace {

ExtractResult need_more(uint64_t need) {
  return {Extract::kNeedMore, uint32_t(std::min<uint64_t>(need, UINT32_MAX))};
}
constexpr ExtractResult kBad{Extract::kMalformed, 0};
constexpr ExtractResult kNone{Extract::kNoName, 0};
constexpr ExtractResult kFoundIt{Extract::kFound, 0};

bool digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool alpha(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool hexdig(uint8_t c) { return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
char lower(uint8_t c) { return char(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c); }

// Checks a DNS name in text form and, when `out` is given, stores it in lower case. Beyond LDH,
// '_' is accepted: SRV-style and some internal names carry it, and it is harmless to a matcher.
// `p` may be out->bytes itself.
bool put_name(const uint8_t* p, uint32_t n, Name* out) {
  if (n > 0 && p[n - 1] == '.') --n;  // the root label: "a.example." is "a.example"
  if (n == 0 || n > kMaxNameBytes) return false;
  uint32_t label = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t c = p[i];
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (!(alpha(c) || digit(c) || c == '-' || c == '_') || ++label > kMaxLabelBytes) {
      return false;
    }
  }
  if (label == 0) return false;
  if (out != nullptr) {
    for (uint32_t i = 0; i < n; ++i) out->bytes[i] = lower(p[i]);
    out->bytes[n] = 0;
    out->len = n;
  }
  return true;
}

// ---- TLS ----------------------------------------------------------------------------------

constexpr uint8_t kContentHandshake = 22;   // RFC 8446 §5.1 ContentType.handshake
constexpr uint8_t kClientHello = 1;         // RFC 8446 §4 HandshakeType.client_hello
constexpr uint32_t kMaxFragment = 1 << 14;  // RFC 8446 §5.1: length MUST NOT exceed 2^14
constexpr uint32_t kExtServerName = 0;      // RFC 6066 §3
constexpr uint8_t kNameTypeHostName = 0;    // RFC 6066 §3

// Reads the handshake byte stream in place across record boundaries (RFC 8446 §5.1: a message
// may be fragmented across several records, a record may cut it anywhere), skipping the record
// headers. A failed read leaves in failure() whether bytes are missing or the records are bad.
class HandshakeCursor {
 public:
  HandshakeCursor(const uint8_t* s, uint32_t len) : s_(s), len_(len) {}

  // Copies (dst given) or skips n handshake bytes.
  bool read(uint8_t* dst, uint32_t n) {
    // The message's own length bounds every field in it: a field reaching past the end is a
    // length lying, whatever bytes follow in the stream.
    if (n > limit_ - consumed_) return fail(kBad);
    while (n > 0) {
      if (rec_left_ == 0 && !next_record()) return false;
      const uint32_t avail = len_ - pos_;
      if (avail == 0) return fail(need_more(uint64_t(pos_) + rest()));
      const uint32_t take = std::min({n, rec_left_, avail});
      if (dst != nullptr) {
        std::memcpy(dst, s_ + pos_, take);
        dst += take;
      }
      pos_ += take;
      rec_left_ -= take;
      consumed_ += take;
      n -= take;
    }
    return true;
  }
  bool skip(uint32_t n) { return read(nullptr, n); }
  // Big-endian unsigned of `bytes` bytes (1..3).
  bool uint(uint32_t bytes, uint32_t& v) {
    uint8_t b[3];
    if (!read(b, bytes)) return false;
    v = 0;
    for (uint32_t i = 0; i < bytes; ++i) v = v << 8 | b[i];
    return true;
  }

  uint32_t consumed() const { return consumed_; }
  // The handshake bytes the message declares, header included.
  void set_limit(uint32_t total) { limit_ = total; }
  ExtractResult failure() const { return failure_; }

 private:
  // The fewest stream bytes from pos_ that can carry the rest of the message (inside the
  // current record, a record boundary is past it): a decision needs every byte of it.
  uint32_t rest() const {
    const uint32_t r = limit_ - consumed_;
    return rec_left_ >= r ? r : r + 5;
  }
  bool fail(ExtractResult r) {
    failure_ = r;
    return false;
  }

  // RFC 8446 §5.1: struct { ContentType type; ProtocolVersion legacy_record_version;
  // uint16 length; opaque fragment[length]; } TLSPlaintext. The header bytes already here are
  // judged at once, so an SSLv2 hello, plain HTTP or an alert fails on its first byte.
  bool next_record() {
    const uint32_t avail = len_ - pos_;
    const uint8_t* h = s_ + pos_;
    // Until the ClientHello is complete only handshake records may come.
    if (avail >= 1 && h[0] != kContentHandshake) return fail(kBad);
    // legacy_record_version: 0x0301 in a first ClientHello, 0x0303 otherwise; any 0x03xx.
    if (avail >= 2 && h[1] != 3) return fail(kBad);
    if (avail < 5) return fail(need_more(uint64_t(pos_) + 5 + (limit_ - consumed_)));
    const uint32_t length = uint32_t(h[3]) << 8 | h[4];
    // "Implementations MUST NOT send zero-length fragments of Handshake types."
    if (length == 0 || length > kMaxFragment) return fail(kBad);
    pos_ += 5;
    rec_left_ = length;
    return true;
  }

  const uint8_t* s_;
  uint32_t len_;
  uint32_t pos_ = 0;       // stream offset of the next byte
  uint32_t rec_left_ = 0;  // bytes of the current record's fragment not read yet
  uint32_t consumed_ = 0;  // handshake bytes read
  // The handshake header's 4 bytes until the message's length is known: a short read there must
  // not ask for the rest of a record that may hold more than this message.
  uint32_t limit_ = 4;
  ExtractResult failure_;
};

// RFC 6066 §3: struct { ServerName server_name_list<1..2^16-1> } ServerNameList;
// struct { NameType name_type; select (name_type) { case host_name: HostName; } name; }
// ServerName; opaque HostName<1..2^16-1>. "The ServerNameList MUST NOT contain more than one
// name of the same name_type": a second host_name is malformed. Entries of other types (none is
// defined) are skipped: "all future data structures associated with new NameTypes MUST begin
// with a 16-bit length field". On false, `err` says why: bytes missing (the cursor's failure) or
// malformed.
bool read_server_name(HandshakeCursor& c, uint32_t ext_len, uint8_t* raw, uint32_t& raw_len,
                      bool& have_host, ExtractResult& err) {
  err = kBad;
  auto cursor_failed = [&] {
    err = c.failure();
    return false;
  };
  const uint32_t end = c.consumed() + ext_len;
  uint32_t list_len;
  if (ext_len < 2) return false;
  if (!c.uint(2, list_len)) return cursor_failed();
  if (list_len == 0 || list_len != end - c.consumed()) return false;
  while (c.consumed() < end) {
    uint32_t type, name_len;
    if (end - c.consumed() < 3) return false;
    if (!c.uint(1, type) || !c.uint(2, name_len)) return cursor_failed();
    if (name_len == 0 || name_len > end - c.consumed()) return false;
    if (type != kNameTypeHostName) {
      if (!c.skip(name_len)) return cursor_failed();
      continue;
    }
    // name_len < 2^16 fits `raw` (kMaxNameBytes + 1 bytes), a trailing dot included.
    if (have_host) return false;
    if (!c.read(raw, name_len)) return cursor_failed();
    if (!put_name(raw, name_len, nullptr)) return false;
    raw_len = name_len;
    have_host = true;
  }
  return true;
}

// ---- HTTP/1.x -------------------------------------------------------------------------------

// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" /
// "_" / "`" / "|" / "~" / DIGIT / ALPHA
bool tchar(uint8_t c) {
  if (alpha(c) || digit(c)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}
// A request-target is URI syntax (RFC 9112 §3.2): visible ASCII. Bytes above 0x7f are let
// through as some clients send raw UTF-8 paths; the path is not this parser's business.
bool target_char(uint8_t c) { return (c > 0x20 && c < 0x7f) || c >= 0x80; }
// RFC 9110 §5.5: field-value = *field-content of VCHAR / obs-text with SP / HTAB inside; CR, LF
// and NUL MUST be rejected (or replaced), other controls are not in the grammar either.
bool field_char(uint8_t c) { return target_char(c) || c == ' ' || c == '\t'; }
bool ows(uint8_t c) { return c == ' ' || c == '\t'; }

enum class Eol : uint8_t { kOk, kShort, kBad };
// RFC 9112 §2.2: lines end in CRLF; "a recipient MAY recognize a single LF as a line terminator
// and ignore any preceding CR" (accepted: a few scripted clients send bare LF); a bare CR MUST
// be treated as invalid.
Eol end_of_line(const uint8_t* s, uint32_t len, uint32_t& i) {
  if (s[i] == '\n') {
    ++i;
    return Eol::kOk;
  }
  if (s[i] != '\r') return Eol::kBad;
  if (i + 1 == len) return Eol::kShort;
  if (s[i + 1] != '\n') return Eol::kBad;
  i += 2;
  return Eol::kOk;
}

// RFC 9110 §7.2: Host = uri-host [ ":" port ]; RFC 3986 §3.2.2: IP-literal = "[" IPv6address
// "]", reg-name and IPv4address (both fit put_name's rules), port = *DIGIT. A literal in
// brackets gives the address without them (IPvFuture and zone ids are refused). n > 0.
bool parse_host(const uint8_t* p, uint32_t n, Name* out) {
  uint32_t host_end, rest;
  bool literal = false;
  if (p[0] == '[') {
    const void* close = std::memchr(p, ']', n);
    if (close == nullptr) return false;
    host_end = uint32_t(static_cast<const uint8_t*>(close) - p);
    rest = host_end + 1;
    literal = true;
  } else {
    const void* colon = std::memchr(p, ':', n);
    host_end = colon == nullptr ? n : uint32_t(static_cast<const uint8_t*>(colon) - p);
    rest = host_end;
  }
  if (rest < n) {
    if (p[rest] != ':' || n - rest - 1 > 5) return false;
    uint32_t port = 0;
    for (uint32_t i = rest + 1; i < n; ++i) {
      if (!digit(p[i])) return false;
      port = port * 10 + uint32_t(p[i] - '0');
    }
    if (port > 65535) return false;
  }
  if (!literal) return put_name(p, host_end, out);

  const uint8_t* a = p + 1;
  const uint32_t a_len = host_end - 1;
  char text[INET6_ADDRSTRLEN];
  if (a_len == 0 || a_len >= sizeof text) return false;
  for (uint32_t i = 0; i < a_len; ++i) {
    if (!(hexdig(a[i]) || a[i] == ':' || a[i] == '.')) return false;
    text[i] = lower(a[i]);
  }
  text[a_len] = 0;
  uint8_t raw[16];
  if (inet_pton(AF_INET6, text, raw) != 1) return false;
  if (out != nullptr) {
    std::memcpy(out->bytes, text, a_len + 1);
    out->len = a_len;
  }
  return true;
}

enum class Form : uint8_t { kNoAuthority, kAuthority, kBad };
// RFC 9112 §3.2.2 absolute-form: absolute-URI = scheme ":" hier-part, and its authority (after
// "//", RFC 3986 §3.2) names the host. Origin-form, asterisk-form and authority-form (CONNECT)
// leave the name to Host.
Form absolute_authority(const uint8_t* t, uint32_t n, uint32_t& off, uint32_t& len) {
  if (n == 0 || !alpha(t[0])) return Form::kNoAuthority;
  uint32_t k = 1;
  while (k < n && (alpha(t[k]) || digit(t[k]) || t[k] == '+' || t[k] == '-' || t[k] == '.')) ++k;
  if (n - k < 3 || t[k] != ':' || t[k + 1] != '/' || t[k + 2] != '/') return Form::kNoAuthority;
  uint32_t e = k + 3;
  while (e < n && t[e] != '/' && t[e] != '?' && t[e] != '#') ++e;
  off = k + 3;
  len = e - off;
  // RFC 9110 §4.2.1: an http URI with an empty host is invalid and MUST be rejected;
  // §4.2.4: userinfo in one is deprecated and is treated as an error here.
  if (len == 0 || std::memchr(t + off, '@', len) != nullptr || !parse_host(t + off, len, nullptr))
    return Form::kBad;
  return Form::kAuthority;
}

bool is_host(const uint8_t* s, uint32_t n) {
  static constexpr char kHost[] = "host";
  if (n != 4) return false;
  for (uint32_t i = 0; i < 4; ++i)
    if (lower(s[i]) != kHost[i]) return false;
  return true;
}

}  // namespace

ExtractResult extract_sni(const uint8_t* stream, uint32_t len, Name* out) {
  HandshakeCursor c(stream, len);
  uint32_t v;
  // RFC 8446 §4: struct { HandshakeType msg_type; uint24 length; ... } Handshake.
  if (!c.uint(1, v)) return c.failure();
  if (v != kClientHello) return kBad;
  if (!c.uint(3, v)) return c.failure();
  if (v > kMaxClientHelloBytes) return kBad;
  const uint32_t end = 4 + v;
  c.set_limit(end);

  // RFC 8446 §4.1.2: legacy_version, random[32], legacy_session_id<0..32>,
  // cipher_suites<2..2^16-2>, legacy_compression_methods<1..2^8-1>, extensions. GREASE values
  // (RFC 8701 §3) in the suites and extensions are ignored like every value not read here.
  if (!c.uint(2, v)) return c.failure();
  if ((v >> 8) != 3) return kBad;
  if (!c.skip(32) || !c.uint(1, v)) return c.failure();
  if (v > 32) return kBad;
  if (!c.skip(v) || !c.uint(2, v)) return c.failure();
  if (v < 2 || v % 2 != 0) return kBad;
  if (!c.skip(v) || !c.uint(1, v)) return c.failure();
  if (v < 1) return kBad;
  if (!c.skip(v)) return c.failure();
  // RFC 5246 §7.4.1.2: a ClientHello without extensions ends after the compression methods.
  if (c.consumed() == end) return kNone;
  if (!c.uint(2, v)) return c.failure();
  if (v != end - c.consumed()) return kBad;

  // The name's bytes go to out->bytes as read (a record may cut them anywhere); out->len only
  // once the whole ClientHello is known good.
  uint8_t* raw = reinterpret_cast<uint8_t*>(out->bytes);
  uint32_t raw_len = 0;
  bool have_host = false, have_sni = false;
  while (c.consumed() < end) {
    uint32_t type, ext_len;
    if (end - c.consumed() < 4) return kBad;
    if (!c.uint(2, type) || !c.uint(2, ext_len)) return c.failure();
    if (ext_len > end - c.consumed()) return kBad;
    if (type != kExtServerName) {
      // Everything else, ECH's encrypted_client_hello (0xfe0d) included: with ECH the outer
      // server_name is the public name, the one to route on.
      if (!c.skip(ext_len)) return c.failure();
      continue;
    }
    // RFC 8446 §4.2: "There MUST NOT be more than one extension of the same type".
    if (have_sni) return kBad;
    have_sni = true;
    ExtractResult err;
    if (!read_server_name(c, ext_len, raw, raw_len, have_host, err)) return err;
  }
  if (!have_host) return kNone;
  put_name(raw, raw_len, out);
  return kFoundIt;
}

ExtractResult extract_host(const uint8_t* s, uint32_t len, Name* out) {
  const ExtractResult more = need_more(0);
  uint32_t i = 0;
  // RFC 9112 §3: request-line = method SP request-target SP HTTP-version CRLF; method = token.
  // A first byte outside token (TLS, SSH, binary) fails at once. Empty lines before the request
  // line (§2.2) are not skipped: they follow an earlier message, and this is the first.
  while (i < len && tchar(s[i])) ++i;
  if (i == len) return more;
  if (i == 0 || s[i] != ' ') return kBad;
  const uint32_t target = ++i;
  while (i < len && target_char(s[i])) ++i;
  if (i == len) return more;
  if (i == target || s[i] != ' ') return kBad;
  uint32_t abs_off = 0, abs_len = 0;
  const Form form = absolute_authority(s + target, i - target, abs_off, abs_len);
  if (form == Form::kBad) return kBad;
  abs_off += target;
  ++i;
  // RFC 9112 §2.3: HTTP-version = "HTTP" "/" DIGIT "." DIGIT, case-sensitive; major 1 only.
  static constexpr char kVersion[] = "HTTP/1.";
  for (uint32_t k = 0; k < sizeof kVersion - 1; ++k, ++i) {
    if (i == len) return more;
    if (s[i] != uint8_t(kVersion[k])) return kBad;
  }
  if (i == len) return more;
  if (!digit(s[i++])) return kBad;
  if (i == len) return more;
  switch (end_of_line(s, len, i)) {
    case Eol::kOk: break;
    case Eol::kShort: return more;
    case Eol::kBad: return kBad;
  }

  // RFC 9112 §5: field-line = field-name ":" OWS field-value OWS, up to the empty line.
  uint32_t hosts = 0, host_off = 0, host_len = 0;
  while (true) {
    if (i == len) return more;
    if (s[i] == '\r' || s[i] == '\n') {
      switch (end_of_line(s, len, i)) {
        case Eol::kOk: break;
        case Eol::kShort: return more;
        case Eol::kBad: return kBad;
      }
      break;
    }
    // RFC 9112 §5.2: obs-fold outside message/http MUST be rejected (or replaced); §2.2:
    // whitespace between the start-line and the first field MUST be rejected or consumed.
    if (ows(s[i])) return kBad;
    const uint32_t name = i;
    while (i < len && tchar(s[i])) ++i;
    if (i == len) return more;
    // RFC 9112 §5.1: no whitespace between the field name and the colon (400).
    if (i == name || s[i] != ':') return kBad;
    const uint32_t name_len = i - name;
    ++i;
    while (i < len && ows(s[i])) ++i;
    const uint32_t value = i;
    uint32_t value_end = i;
    for (; i < len && s[i] != '\r' && s[i] != '\n'; ++i) {
      if (!field_char(s[i])) return kBad;
      if (!ows(s[i])) value_end = i + 1;
    }
    if (i == len) return more;
    switch (end_of_line(s, len, i)) {
      case Eol::kOk: break;
      case Eol::kShort: return more;
      case Eol::kBad: return kBad;
    }
    if (!is_host(s + name, name_len)) continue;
    // RFC 9112 §3.2: more than one Host field line, or an invalid value: 400.
    if (++hosts > 1) return kBad;
    host_off = value;
    host_len = value_end - value;
    if (host_len > 0 && !parse_host(s + host_off, host_len, nullptr)) return kBad;
  }

  // RFC 9112 §3.2.2: with an absolute-form target the Host field is ignored.
  if (form == Form::kAuthority) {
    parse_host(s + abs_off, abs_len, out);
    return kFoundIt;
  }
  // RFC 9110 §7.2: an empty Host is what a client sends when the target has no authority.
  if (host_len == 0) return kNone;
  parse_host(s + host_off, host_len, out);
  return kFoundIt;
}

}  // namespace meshgate::dp::names
