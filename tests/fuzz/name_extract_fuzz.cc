// libFuzzer target for the SNI and Host extractors. Both run on the input and on a few of its
// prefixes (every prefix would make each input quadratic). Invariants:
// - a name is 1..253 bytes of [a-z0-9._-] (plus ':' from an HTTP IPv6 literal), NUL-terminated;
// - a decision is final: once a prefix gives anything but kNeedMore, every longer prefix and the
//   whole input give the same status and name (so a prefix of a kFound input is never
//   kMalformed);
// - kNeedMore's `need` lies beyond the prefix, and no prefix shorter than it decides kFound or
//   kNoName.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "dataplane/names/name_extract.h"

using meshgate::dp::names::Extract;
using meshgate::dp::names::ExtractResult;
using meshgate::dp::names::kMaxNameBytes;
using meshgate::dp::names::Name;

namespace {

using ExtractFn = ExtractResult (*)(const uint8_t*, uint32_t, Name*);

void check_name(const Name& n, bool colon_ok) {
  if (n.len < 1 || n.len > kMaxNameBytes || n.bytes[n.len] != '\0') __builtin_trap();
  if (n.bytes[n.len - 1] == '.') __builtin_trap();
  for (uint32_t i = 0; i < n.len; ++i) {
    const char c = n.bytes[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                    c == '.' || (colon_ok && c == ':');
    if (!ok) __builtin_trap();
  }
}

// `out` is filled with a marker first so a name is seen to be written only on kFound.
ExtractResult run(ExtractFn fn, const uint8_t* data, uint32_t len, Name& out, bool colon_ok) {
  std::memset(out.bytes, 0x7e, sizeof out.bytes);
  out.len = 9999;
  const ExtractResult r = fn(data, len, &out);
  if (r.status == Extract::kFound) {
    check_name(out, colon_ok);
  } else if (out.len != 9999) {
    __builtin_trap();
  }
  if (r.status == Extract::kNeedMore && r.need != 0 && r.need <= len) __builtin_trap();
  if (r.status != Extract::kNeedMore && r.need != 0) __builtin_trap();
  return r;
}

void check(ExtractFn fn, const uint8_t* data, uint32_t size, bool colon_ok) {
  Name whole;
  const ExtractResult all = run(fn, data, size, whole, colon_ok);

  // Prefix lengths: the first bytes (record and handshake headers, a method), a few spread over
  // the input, and the input less its last bytes; sorted so each decision can be compared with
  // the longer prefixes'.
  uint32_t lens[16];
  uint32_t n = 0;
  for (uint32_t l : {0u, 1u, 2u, 5u, 6u, 9u}) lens[n++] = l < size ? l : size;
  for (uint32_t k = 1; k <= 4; ++k) lens[n++] = uint32_t(uint64_t(size) * k / 5);
  for (uint32_t back : {3u, 2u, 1u}) lens[n++] = size > back ? size - back : 0;
  std::sort(lens, lens + n);

  bool decided = false;
  Name first;
  ExtractResult first_r;
  uint32_t no_decision_before = 0;  // from `need`: a prefix shorter cannot be kFound / kNoName
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t len = lens[i];
    Name p;
    const ExtractResult r = run(fn, data, len, p, colon_ok);
    if ((r.status == Extract::kFound || r.status == Extract::kNoName) && len < no_decision_before)
      __builtin_trap();
    if (r.status == Extract::kNeedMore) {
      if (decided) __builtin_trap();
      if (r.need > no_decision_before) no_decision_before = r.need;
      continue;
    }
    if (!decided) {
      decided = true;
      first = p;
      first_r = r;
    } else if (r.status != first_r.status ||
               (r.status == Extract::kFound && p.view() != first.view())) {
      __builtin_trap();
    }
  }
  if (all.status == Extract::kNeedMore && decided) __builtin_trap();
  if ((all.status == Extract::kFound || all.status == Extract::kNoName) &&
      size < no_decision_before)
    __builtin_trap();
  if (decided && (all.status != first_r.status ||
                  (all.status == Extract::kFound && whole.view() != first.view())))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint32_t len = size > UINT32_MAX ? UINT32_MAX : uint32_t(size);
  check(meshgate::dp::names::extract_sni, data, len, false);
  check(meshgate::dp::names::extract_host, data, len, true);
  return 0;
}
