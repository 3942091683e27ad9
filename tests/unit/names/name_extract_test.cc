// The SNI and Host extractors of the name listeners: ClientHellos built here (in one record,
// split across records, with GREASE and ECH, lengths lying), real ClientHellos of openssl
// s_client and curl, and HTTP/1.x requests, as tables.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/names/name_extract.h"

using meshgate::dp::names::Extract;
using meshgate::dp::names::extract_host;
using meshgate::dp::names::extract_sni;
using meshgate::dp::names::ExtractResult;
using meshgate::dp::names::kMaxClientHelloBytes;
using meshgate::dp::names::Name;

namespace {

using Bytes = std::vector<uint8_t>;

Bytes from_hex(std::string_view hex) {
  Bytes out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(uint8_t(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return out;
}
Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

void put16(Bytes& b, uint32_t v) {
  b.push_back(uint8_t(v >> 8));
  b.push_back(uint8_t(v));
}
void put24(Bytes& b, uint32_t v) {
  b.push_back(uint8_t(v >> 16));
  put16(b, v);
}
void append(Bytes& b, const Bytes& more) { b.insert(b.end(), more.begin(), more.end()); }

// One extension as it goes on the wire; `len` overrides the true length to make it lie.
Bytes ext(uint16_t type, const Bytes& data, std::optional<uint32_t> len = {}) {
  Bytes b;
  put16(b, type);
  put16(b, len.value_or(uint32_t(data.size())));
  append(b, data);
  return b;
}

struct SniEntry {
  uint8_t type = 0;  // host_name
  std::string name;
  std::optional<uint32_t> len;  // overrides the true length
};
// RFC 6066 §3 ServerNameList as extension_data.
Bytes sni_data(const std::vector<SniEntry>& entries, std::optional<uint32_t> list_len = {}) {
  Bytes list;
  for (const SniEntry& e : entries) {
    list.push_back(e.type);
    put16(list, e.len.value_or(uint32_t(e.name.size())));
    append(list, bytes_of(e.name));
  }
  Bytes b;
  put16(b, list_len.value_or(uint32_t(list.size())));
  append(b, list);
  return b;
}
Bytes sni_ext(const std::string& name) { return ext(0, sni_data({{0, name, {}}})); }

// A ClientHello handshake message (RFC 8446 §4.1.2) with overridable lengths.
struct Hello {
  uint8_t msg_type = 1;
  uint16_t version = 0x0303;
  uint32_t session_id_len = 32;
  std::vector<uint16_t> suites = {0x1301, 0x1302, 0x1303, 0xc02f};
  std::optional<uint32_t> suites_len;
  Bytes compression = {0};
  bool has_extensions = true;
  std::vector<Bytes> extensions;  // each from ext()
  std::optional<uint32_t> extensions_len;
  std::optional<uint32_t> hs_len;

  Bytes message() const {
    Bytes body;
    put16(body, version);
    for (int i = 0; i < 32; ++i) body.push_back(uint8_t(0xa0 + i));  // random
    body.push_back(uint8_t(session_id_len));
    for (uint32_t i = 0; i < std::min<uint32_t>(session_id_len, 64); ++i) body.push_back(0x5e);
    put16(body, suites_len.value_or(uint32_t(suites.size() * 2)));
    for (uint16_t s : suites) put16(body, s);
    body.push_back(uint8_t(compression.size()));
    append(body, compression);
    if (has_extensions) {
      Bytes block;
      for (const Bytes& e : extensions) append(block, e);
      put16(body, extensions_len.value_or(uint32_t(block.size())));
      append(body, block);
    }
    Bytes m{msg_type};
    put24(m, hs_len.value_or(uint32_t(body.size())));
    append(m, body);
    return m;
  }
};

// The usual extensions of a TLS 1.3 client around server_name, which comes last so that the
// tail of the message is the name's bytes.
Hello hello_with_name(const std::string& name) {
  Hello h;
  h.extensions = {ext(0x000b, {0x03, 0x00, 0x01, 0x02}),           // ec_point_formats
                  ext(0x000a, {0x00, 0x04, 0x00, 0x1d, 0x00, 0x17}),  // supported_groups
                  ext(0x002b, {0x04, 0x03, 0x04, 0x03, 0x03}),       // supported_versions
                  sni_ext(name)};
  return h;
}

// The handshake bytes in TLSPlaintext records (RFC 8446 §5.1), cut at the given offsets of the
// message.
Bytes in_records(const Bytes& hs, const std::vector<size_t>& cuts = {}, uint8_t type = 22,
                 uint16_t version = 0x0301) {
  Bytes out;
  size_t from = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(hs.size());
  for (size_t to : ends) {
    out.push_back(type);
    put16(out, version);
    put16(out, uint32_t(to - from));
    out.insert(out.end(), hs.begin() + long(from), hs.begin() + long(to));
    from = to;
  }
  return out;
}
// Every `n` bytes a new record, the way some clients fragment.
Bytes in_records_of(const Bytes& hs, size_t n) {
  std::vector<size_t> cuts;
  for (size_t at = n; at < hs.size(); at += n) cuts.push_back(at);
  return in_records(hs, cuts);
}

ExtractResult sni(const Bytes& b, Name* out) {
  return extract_sni(b.data(), uint32_t(b.size()), out);
}
ExtractResult sni(const Bytes& b) {
  Name n;
  return sni(b, &n);
}
ExtractResult host(std::string_view s, Name* out) {
  return extract_host(reinterpret_cast<const uint8_t*>(s.data()), uint32_t(s.size()), out);
}

const char* status_name(Extract e) {
  switch (e) {
    case Extract::kNeedMore: return "kNeedMore";
    case Extract::kFound: return "kFound";
    case Extract::kNoName: return "kNoName";
    case Extract::kMalformed: return "kMalformed";
  }
  return "?";
}

// Every proper prefix of a complete message needs more; `need`, when given, lies beyond the
// prefix and every prefix shorter than it needs more too; the whole gives `want`.
void expect_prefixes_need_more(const Bytes& b, Extract want, std::string_view name = {}) {
  for (uint32_t len = 0; len < b.size(); ++len) {
    Name n;
    const ExtractResult r = extract_sni(b.data(), len, &n);
    ASSERT_EQ(r.status, Extract::kNeedMore) << "prefix " << len << ": " << status_name(r.status);
    if (r.need != 0) {
      ASSERT_GT(r.need, len) << "prefix " << len;
      ASSERT_LE(r.need, b.size()) << "prefix " << len;
    }
  }
  Name n;
  const ExtractResult r = sni(b, &n);
  ASSERT_EQ(r.status, want) << status_name(r.status);
  if (want == Extract::kFound) {
    EXPECT_EQ(n.view(), name);
  }
}

// The `need` hints skip no decision: walking the stream by them reaches the same result as
// walking it byte by byte, with fewer calls.
uint32_t calls_following_need(const Bytes& b, Extract want) {
  uint32_t len = 0, calls = 0;
  while (true) {
    Name n;
    const ExtractResult r = extract_sni(b.data(), len, &n);
    ++calls;
    if (r.status != Extract::kNeedMore) {
      EXPECT_EQ(r.status, want);
      EXPECT_EQ(len, b.size()) << "decided before the end of the ClientHello";
      return calls;
    }
    EXPECT_LT(len, b.size());
    if (len >= b.size()) return calls;
    len = r.need != 0 ? r.need : len + 1;
  }
}

// openssl s_client -connect 127.0.0.1:PORT -servername x.example.com (OpenSSL 3.0.19),
// captured by a plain TCP listener.
const char* const kOpensslHello =
    "160301013a010001360303b35033676595b005a916d054fa5ea1dec2f9733f13af0217883d5d8ecce3a7c720e5"
    "0549d1c7bdf72bbdba6988ce6ecb119301ef253bb782640afcedd9a54d1b73003e130213031301c02cc030009f"
    "cca9cca8ccaac02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d003c00"
    "35002f00ff010000af00000012001000000d782e6578616d706c652e636f6d000b000403000102000a00160014"
    "001d0017001e0019001801000101010201030104002300000016000000170000000d002a002804030503060308"
    "0708080809080a080b080408050806040105010601030303010302040205020602002b00090803040303030203"
    "01002d00020101003300260024001d0020a81cb95612fab6186e8088385865881d663873b2077ca528247242e2"
    "9cc50a3f";

// curl --resolve shop.example.com:PORT:127.0.0.1 https://shop.example.com:PORT/ (curl 7.88.1,
// OpenSSL 3.0.19): ALPN h2 and http/1.1, padded to 512 bytes.
const char* const kCurlHello =
    "1603010200010001fc030380c6e686985ca91edd70967604947bf0ea3c828aa4e01da84c13ba0a52c279b020ee"
    "4dbc05bea34eacf50832eefa21f8cc06ac50ec745748b4a2092bc9a799fdf8003e130213031301c02cc030009f"
    "cca9cca8ccaac02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d003c00"
    "35002f00ff0100017500000015001300001073686f702e6578616d706c652e636f6d000b000403000102000a00"
    "160014001d0017001e00190018010001010102010301040010000e000c02683208687474702f312e3100160000"
    "0017000000310000000d002a0028040305030603080708080809080a080b080408050806040105010601030303"
    "010302040205020602002b0009080304030303020301002d00020101003300260024001d00205d2ba52f8cb062"
    "2894ba5ec60b9860093fa9210e42a9cf6a179939f10b80e047001500ad00000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00000000000000000000000000000000000000000000";

// The handshake message inside a captured single-record ClientHello.
Bytes handshake_of(const Bytes& record) { return Bytes(record.begin() + 5, record.end()); }

// ---- TLS ----------------------------------------------------------------------------------

TEST(NameExtractSni, real_openssl_and_curl_client_hellos) {
  const Bytes openssl = from_hex(kOpensslHello);
  const Bytes curl = from_hex(kCurlHello);
  ASSERT_EQ(openssl.size(), 319u);
  ASSERT_EQ(curl.size(), 517u);
  Name n;
  ASSERT_EQ(sni(openssl, &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), "x.example.com");
  EXPECT_EQ(n.bytes[n.len], '\0');
  ASSERT_EQ(sni(curl, &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), "shop.example.com");
}

TEST(NameExtractSni, real_client_hellos_every_prefix_needs_more) {
  expect_prefixes_need_more(from_hex(kOpensslHello), Extract::kFound, "x.example.com");
  expect_prefixes_need_more(from_hex(kCurlHello), Extract::kFound, "shop.example.com");
}

TEST(NameExtractSni, real_client_hellos_refragmented_into_small_records) {
  for (const auto& [hex, want] : {std::pair{kOpensslHello, "x.example.com"},
                                  std::pair{kCurlHello, "shop.example.com"}}) {
    const Bytes hs = handshake_of(from_hex(hex));
    for (size_t n : {1u, 2u, 3u, 7u, 100u, 255u}) {
      Name name;
      const Bytes b = in_records_of(hs, n);
      ASSERT_EQ(sni(b, &name).status, Extract::kFound) << want << " in records of " << n;
      EXPECT_EQ(name.view(), want);
    }
  }
  expect_prefixes_need_more(in_records_of(handshake_of(from_hex(kCurlHello)), 7), Extract::kFound,
                            "shop.example.com");
}

TEST(NameExtractSni, client_hello_in_one_record) {
  Name n;
  const ExtractResult r = sni(in_records(hello_with_name("x.example.com").message()), &n);
  EXPECT_EQ(r.status, Extract::kFound);
  EXPECT_EQ(r.need, 0u);
  EXPECT_EQ(n.view(), "x.example.com");
}

TEST(NameExtractSni, client_hello_split_across_records_anywhere) {
  const Bytes hs = hello_with_name("split.example.com").message();
  const size_t name_at = hs.size() - 10;  // inside the name's bytes
  const std::vector<std::vector<size_t>> cuts = {
      {1}, {2}, {3}, {4}, {hs.size() / 2}, {name_at}, {hs.size() - 1},  // two records
      {1, 2}, {4, 40}, {40, name_at}, {hs.size() / 3, 2 * hs.size() / 3},  // three records
  };
  for (const auto& c : cuts) {
    Name n;
    const Bytes b = in_records(hs, c);
    ASSERT_EQ(sni(b, &n).status, Extract::kFound) << "cut at " << c[0];
    EXPECT_EQ(n.view(), "split.example.com");
  }
}

TEST(NameExtractSni, every_prefix_needs_more_and_the_whole_is_found) {
  const Bytes hs = hello_with_name("prefix.example.com").message();
  expect_prefixes_need_more(in_records(hs), Extract::kFound, "prefix.example.com");
  expect_prefixes_need_more(in_records(hs, {3, hs.size() - 5}), Extract::kFound,
                            "prefix.example.com");
  Hello none = hello_with_name("unused");
  none.extensions.pop_back();
  expect_prefixes_need_more(in_records(none.message(), {50}), Extract::kNoName);
}

TEST(NameExtractSni, need_points_at_the_message_end_or_one_record_header_past_it) {
  const Bytes hs = hello_with_name("need.example.com").message();
  const Bytes one = in_records(hs);
  EXPECT_EQ(sni(Bytes{}).need, 9u);  // the record header and the handshake header
  EXPECT_EQ(sni(Bytes(one.begin(), one.begin() + 3)).need, 9u);
  EXPECT_EQ(sni(Bytes(one.begin(), one.begin() + 5)).need, 9u);
  EXPECT_EQ(sni(Bytes(one.begin(), one.begin() + 9)).need, one.size());
  EXPECT_EQ(sni(Bytes(one.begin(), one.end() - 1)).need, one.size());

  // Records end at 65, 130 and the end: inside the first two, the message's rest and one more
  // record header are the least that can come.
  const Bytes three = in_records(hs, {60, 120});
  EXPECT_EQ(sni(Bytes(three.begin(), three.begin() + 20)).need, three.size() - 5);
  EXPECT_EQ(sni(Bytes(three.begin(), three.begin() + 65)).need, three.size() - 5);
  EXPECT_EQ(sni(Bytes(three.begin(), three.begin() + 70)).need, three.size());
  EXPECT_EQ(sni(Bytes(three.begin(), three.begin() + 135)).need, three.size());

  // A record that holds more than the ClientHello: the message's end is what is needed.
  Bytes longer = hs;
  longer.insert(longer.end(), {0x0f, 0x00, 0x00, 0x00});  // another handshake message
  const Bytes extra = in_records(longer);
  EXPECT_EQ(sni(Bytes(extra.begin(), extra.begin() + 20)).need, 5 + hs.size());
  EXPECT_EQ(sni(Bytes(extra.begin(), extra.begin() + long(5 + hs.size()))).status,
            Extract::kFound);

  // Following the hints takes a handful of calls where byte by byte takes hundreds.
  EXPECT_LE(calls_following_need(one, Extract::kFound), 4u);
  EXPECT_LE(calls_following_need(in_records_of(hs, 16), Extract::kFound), 3 * hs.size() / 16);
  EXPECT_LE(calls_following_need(from_hex(kCurlHello), Extract::kFound), 4u);
}

// RFC 8446 §5.1 lets a client put each byte of its ClientHello in a record of its own: six
// stream bytes per handshake byte. Following `need`, the proxy tries a bounded number of times
// and copies a bounded multiple of the stream (the listener's budget is 48 × peek_bytes,
// dataplane/proxy/listener.cc), where one try per record would copy the stream 500 times.
TEST(NameExtractSni, client_hello_in_1_byte_records_is_found_in_few_calls) {
  for (const auto& [hex, want] : {std::pair{kOpensslHello, "x.example.com"},
                                  std::pair{kCurlHello, "shop.example.com"}}) {
    const Bytes b = in_records_of(handshake_of(from_hex(hex)), 1);
    Name n;
    ASSERT_EQ(sni(b, &n).status, Extract::kFound) << want;
    EXPECT_EQ(n.view(), want);
    uint32_t len = 0, calls = 0;
    uint64_t copied = 0;
    while (calls < 10000) {
      const ExtractResult r = extract_sni(b.data(), len, &n);
      ++calls;
      copied += len;
      if (r.status != Extract::kNeedMore) {
        EXPECT_EQ(r.status, Extract::kFound);
        break;
      }
      ASSERT_GT(r.need, len);
      ASSERT_LE(r.need, b.size());
      len = r.need;
    }
    EXPECT_EQ(len, b.size()) << want;
    EXPECT_LE(calls, 40u) << want;  // 32 for curl's 512-byte hello
    EXPECT_LE(copied, 32 * b.size()) << want;
  }
  expect_prefixes_need_more(in_records_of(handshake_of(from_hex(kCurlHello)), 1),
                            Extract::kFound, "shop.example.com");
}

TEST(NameExtractSni, grease_suites_and_extensions_are_ignored) {
  // RFC 8701 §2: 0x?a?a values, as Chrome sends them first and last.
  Hello h = hello_with_name("grease.example.com");
  h.suites.insert(h.suites.begin(), 0x2a2a);
  h.extensions.insert(h.extensions.begin(), ext(0x0a0a, {}));
  h.extensions.push_back(ext(0xfafa, {0x00}));
  h.extensions.insert(h.extensions.begin() + 2, ext(0x000a, {0x00, 0x04, 0x3a, 0x3a, 0x00, 0x1d}));
  Name n;
  ASSERT_EQ(sni(in_records(h.message()), &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), "grease.example.com");
}

TEST(NameExtractSni, ech_outer_hello_routes_on_the_public_name) {
  // draft-ietf-tls-esni §5: ECHClientHello { type outer(0); HpkeSymmetricCipherSuite; config_id;
  // enc<0..2^16-1>; payload<1..2^16-1> }; the outer server_name holds the public name.
  Bytes ech = {0x00, 0x00, 0x01, 0x00, 0x01, 0x2c};  // outer, HKDF-SHA256/AES-128-GCM, id 0x2c
  put16(ech, 32);
  ech.insert(ech.end(), 32, 0x11);  // enc
  put16(ech, 200);
  ech.insert(ech.end(), 200, 0x22);  // the encrypted inner ClientHello
  Hello h = hello_with_name("public.example.com");
  h.extensions.insert(h.extensions.begin() + 1, ext(0xfe0d, ech));
  Name n;
  ASSERT_EQ(sni(in_records(h.message()), &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), "public.example.com");
}

TEST(NameExtractSni, no_host_name_is_no_name) {
  Hello without = hello_with_name("x");
  without.extensions.pop_back();
  Hello tls12 = hello_with_name("x");
  tls12.has_extensions = false;  // RFC 5246 §7.4.1.2: extensions are optional
  Hello empty_block = hello_with_name("x");
  empty_block.extensions.clear();
  Hello other_type = hello_with_name("x");
  other_type.extensions.back() = ext(0, sni_data({{7, "opaque", {}}}));
  for (const Hello* h : {&without, &tls12, &empty_block, &other_type}) {
    const ExtractResult r = sni(in_records(h->message()));
    EXPECT_EQ(r.status, Extract::kNoName) << status_name(r.status);
  }
}

TEST(NameExtractSni, host_name_after_an_entry_of_another_type_is_found) {
  Hello h = hello_with_name("x");
  h.extensions.back() = ext(0, sni_data({{7, "opaque", {}}, {0, "after.example.com", {}}}));
  Name n;
  ASSERT_EQ(sni(in_records(h.message()), &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), "after.example.com");
}

TEST(NameExtractSni, uppercase_is_folded_and_a_trailing_dot_dropped) {
  const std::pair<const char*, const char*> cases[] = {
      {"Shop.EXAMPLE.Com", "shop.example.com"},
      {"shop.example.com.", "shop.example.com"},
      {"A-1_B.Example.", "a-1_b.example"},
      {"localhost", "localhost"},
      {"10.0.0.1", "10.0.0.1"},
  };
  for (const auto& [given, want] : cases) {
    Name n;
    ASSERT_EQ(sni(in_records(hello_with_name(given).message()), &n).status, Extract::kFound)
        << given;
    EXPECT_EQ(n.view(), want);
    EXPECT_EQ(n.bytes[n.len], '\0');
  }
}

TEST(NameExtractSni, invalid_name_bytes_are_malformed) {
  const std::string bad[] = {
      std::string("a\0b.example", 11), "a b.example", "h\xc3\xa9.example", "a/b.example",
      "*.example.com", "a..example", ".example", ".", "example..", "a:443", "a\tb", "a\x7f",
      std::string(64, 'a') + ".example",  // RFC 1035 §2.3.4: a label of 64 bytes
  };
  for (const std::string& name : bad) {
    Name n;
    n.len = 77;
    const ExtractResult r = sni(in_records(hello_with_name(name).message()), &n);
    EXPECT_EQ(r.status, Extract::kMalformed) << name << ": " << status_name(r.status);
    EXPECT_EQ(n.len, 77u) << "out written on a malformed hello";
  }
}

// RFC 6066 §3: HostName<1..2^16-1>. A name past DNS's 253 bytes is still a name for regex
// routes (docs/NAMES.md); its labels keep RFC 1035's 63 bytes at most.
TEST(NameExtractSni, names_longer_than_253_bytes_are_found) {
  const std::string label63(63, 'a');
  const std::string n253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(n253.size(), 253u);
  std::string n4000;
  while (n4000.size() + 64 <= 4000) n4000 += label63 + ".";
  n4000 += std::string(4000 - n4000.size(), 'c');
  ASSERT_EQ(n4000.size(), 4000u);
  const struct {
    std::string given;
    Extract want;
    std::string name;  // when found
  } rows[] = {
      {n253, Extract::kFound, n253},
      {n253 + ".", Extract::kFound, n253},
      {n253 + "b", Extract::kFound, n253 + "b"},
      {n253 + "b.", Extract::kFound, n253 + "b"},
      {n253 + ".b", Extract::kFound, n253 + ".b"},
      {n4000, Extract::kFound, n4000},
      {"A" + n4000.substr(1), Extract::kFound, n4000},  // folded like any other
      {n4000 + "..", Extract::kMalformed, ""},          // an empty label
      {std::string(1000, 'a'), Extract::kMalformed, ""},  // a label of 1000 bytes
      {n253 + "." + std::string(64, 'd'), Extract::kMalformed, ""},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.given.size());
    // In one record, and refragmented across records of 100 bytes.
    const Bytes hs = hello_with_name(row.given).message();
    for (const Bytes& b : {in_records(hs), in_records_of(hs, 100)}) {
      auto n = std::make_unique<Name>();
      const ExtractResult r = sni(b, n.get());
      ASSERT_EQ(r.status, row.want) << status_name(r.status);
      if (row.want != Extract::kFound) continue;
      EXPECT_EQ(n->view(), row.name);
      EXPECT_EQ(n->bytes[n->len], '\0');
    }
  }
}

struct BadHello {
  const char* what;
  Bytes stream;
};

std::vector<BadHello> bad_hellos() {
  const Hello good = hello_with_name("x.example.com");
  const Bytes hs = good.message();
  std::vector<BadHello> v;
  auto with = [&](const char* what, auto edit) {
    Hello h = good;
    edit(h);
    v.push_back({what, in_records(h.message())});
  };
  auto last_ext = [&](const char* what, Bytes e) {
    with(what, [&](Hello& h) { h.extensions.back() = e; });
  };
  auto stream_edit = [&](const char* what, auto edit) {
    Bytes b = in_records(hs);
    edit(b);
    v.push_back({what, b});
  };

  // Records (RFC 8446 §5.1).
  stream_edit("first byte application data", [](Bytes& b) { b[0] = 23; });
  stream_edit("first byte alert", [](Bytes& b) { b[0] = 21; });
  stream_edit("record version 2.x", [](Bytes& b) { b[1] = 2; });
  v.push_back({"record of length 0", in_records(hs, {0})});
  v.push_back({"record of 2^14 + 1 bytes", [] {
                 Bytes b = {22, 3, 1};
                 put16(b, (1 << 14) + 1);
                 return b;
               }()});
  stream_edit("record length short of the message: the next header is the name", [](Bytes& b) {
    const uint32_t len = (uint32_t(b[3]) << 8 | b[4]) - 10;
    b[3] = uint8_t(len >> 8);
    b[4] = uint8_t(len);
  });
  v.push_back({"application data record inside the ClientHello",
               [&] {
                 Bytes b = in_records(hs, {40});
                 b[5 + 40] = 23;
                 return b;
               }()});
  v.push_back({"change_cipher_spec record inside the ClientHello",
               [&] {
                 Bytes b = in_records(Bytes(hs.begin(), hs.begin() + 40));
                 append(b, in_records({1}, {}, 20, 0x0303));
                 return b;
               }()});
  v.push_back({"SSLv2 ClientHello", from_hex("802e0103010015000000100100800300800700c006004000"
                                             "0400800200800000040000000000000000000000")});
  v.push_back({"HTTP request", bytes_of("GET / HTTP/1.1\r\nHost: a\r\n\r\n")});
  v.push_back({"a lone non-handshake byte", {0x47}});

  // Handshake header (RFC 8446 §4).
  with("ServerHello", [](Hello& h) { h.msg_type = 2; });
  with("handshake length over the limit", [](Hello& h) { h.hs_len = kMaxClientHelloBytes + 1; });
  with("handshake length one short", [&](Hello& h) { h.hs_len = uint32_t(hs.size() - 5); });
  with("handshake length one long", [&](Hello& h) { h.hs_len = uint32_t(hs.size() - 3); });
  with("handshake length ends inside the random", [](Hello& h) { h.hs_len = 20; });

  // ClientHello body (RFC 8446 §4.1.2).
  with("legacy_version 2.0", [](Hello& h) { h.version = 0x0200; });
  with("session id of 33 bytes", [](Hello& h) { h.session_id_len = 33; });
  with("cipher suites of odd length", [](Hello& h) { h.suites_len = 7; });
  with("no cipher suites", [](Hello& h) {
    h.suites.clear();
    h.suites_len = 0;
  });
  with("no compression methods", [](Hello& h) { h.compression.clear(); });
  with("extensions block of length 0 with extensions in it", [](Hello& h) { h.extensions_len = 0; });
  with("extensions block lying long", [](Hello& h) {
    Bytes block;
    for (const Bytes& e : h.extensions) append(block, e);
    h.extensions_len = uint32_t(block.size() + 1);
  });
  with("extensions block lying short", [](Hello& h) {
    Bytes block;
    for (const Bytes& e : h.extensions) append(block, e);
    h.extensions_len = uint32_t(block.size() - 1);
  });
  with("extension longer than the block", [](Hello& h) {
    h.extensions.front() = ext(0x000b, {0x03, 0x00, 0x01, 0x02}, 200);
  });
  with("three bytes left in the block", [](Hello& h) { h.extensions.push_back({0x00, 0x15, 0x00}); });

  // server_name (RFC 6066 §3).
  with("duplicate server_name extension", [](Hello& h) {
    h.extensions.insert(h.extensions.begin(), sni_ext("first.example.com"));
  });
  with("duplicate server_name extension, the first without a host_name", [](Hello& h) {
    h.extensions.insert(h.extensions.begin(), ext(0, sni_data({{7, "opaque", {}}})));
  });
  with("duplicate server_name extension, the second without a host_name",
       [](Hello& h) { h.extensions.push_back(ext(0, sni_data({{7, "opaque", {}}}))); });
  last_ext("second host_name entry",
           ext(0, sni_data({{0, "a.example", {}}, {0, "b.example", {}}})));
  last_ext("empty server_name list", ext(0, sni_data({})));
  last_ext("empty server_name extension", ext(0, {}));
  last_ext("server_name extension of 1 byte", ext(0, {0x00}));
  last_ext("server_name list lying long", ext(0, sni_data({{0, "a.example", {}}}, 13)));
  last_ext("server_name list lying short", ext(0, sni_data({{0, "a.example", {}}}, 11)));
  last_ext("host_name longer than the list", ext(0, sni_data({{0, "a.example", 10}}, 12)));
  last_ext("host_name of length 0", ext(0, sni_data({{0, "", {}}})));
  last_ext("entry header cut by the list end", [] {
    Bytes d = sni_data({{0, "a.example", {}}});
    d.insert(d.end(), {0x00, 0x00});
    d[1] = uint8_t(d.size() - 2);
    return ext(0, d);
  }());
  return v;
}

TEST(NameExtractSni, lying_lengths_and_foreign_records_are_malformed) {
  for (const BadHello& b : bad_hellos()) {
    Name n;
    n.len = 77;
    const ExtractResult r = sni(b.stream, &n);
    EXPECT_EQ(r.status, Extract::kMalformed) << b.what << ": " << status_name(r.status);
    EXPECT_EQ(n.len, 77u) << b.what << ": out written";
  }
}

TEST(NameExtractSni, non_tls_fails_on_its_first_byte) {
  for (uint8_t first : {uint8_t('G'), uint8_t('P'), uint8_t(0x80), uint8_t(0x00), uint8_t(0x17)}) {
    const ExtractResult r = extract_sni(&first, 1, nullptr);
    EXPECT_EQ(r.status, Extract::kMalformed) << int(first);
  }
  const uint8_t two[] = {0x16, 0x02};
  EXPECT_EQ(extract_sni(two, 2, nullptr).status, Extract::kMalformed);
}

TEST(NameExtractSni, bytes_after_the_client_hello_are_not_read) {
  Bytes b = in_records(hello_with_name("x.example.com").message());
  const size_t hello_len = b.size();
  append(b, in_records({0x01}, {}, 23, 0x0303));  // early data
  b.insert(b.end(), {0xff, 0xff, 0xff});
  Name n;
  ASSERT_EQ(sni(b, &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), "x.example.com");
  ASSERT_EQ(extract_sni(b.data(), uint32_t(hello_len), &n).status, Extract::kFound);
}

// ---- HTTP/1.x ---------------------------------------------------------------------------------

struct HostCase {
  const char* what;
  std::string_view request;
  Extract want;
  std::string_view name = {};
};

const HostCase kHostCases[] = {
    {"simple GET", "GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n", Extract::kFound,
     "shop.example.com"},
    {"curl's request", "GET / HTTP/1.1\r\nHost: shop.example.com:47003\r\nUser-Agent: curl/7.88.1"
                       "\r\nAccept: */*\r\n\r\n",
     Extract::kFound, "shop.example.com"},
    {"Host with port", "GET /x?y HTTP/1.1\r\nHost: a.example:8080\r\n\r\n", Extract::kFound,
     "a.example"},
    {"Host with an empty port", "GET / HTTP/1.1\r\nHost: a.example:\r\n\r\n", Extract::kFound,
     "a.example"},
    {"Host among other fields, name in any case",
     "POST /f HTTP/1.1\r\nAccept: */*\r\nhOsT: Mixed.Example.\r\nContent-Length: 3\r\n\r\nabc",
     Extract::kFound, "mixed.example"},
    {"OWS around the value", "GET / HTTP/1.1\r\nHost: \t a.example \t\r\n\r\n", Extract::kFound,
     "a.example"},
    {"no OWS", "GET / HTTP/1.1\r\nHost:a.example\r\n\r\n", Extract::kFound, "a.example"},
    {"IPv6 literal with port", "GET / HTTP/1.1\r\nHost: [2001:DB8::1]:80\r\n\r\n",
     Extract::kFound, "2001:db8::1"},
    {"IPv6 literal without port", "GET / HTTP/1.1\r\nHost: [::ffff:10.0.0.1]\r\n\r\n",
     Extract::kFound, "::ffff:10.0.0.1"},
    {"IPv4 literal", "GET / HTTP/1.1\r\nHost: 10.1.2.3:80\r\n\r\n", Extract::kFound, "10.1.2.3"},
    {"absolute-form wins over Host",
     "GET http://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n", Extract::kFound, "a.example"},
    {"absolute-form with port and query, no Host",
     "GET https://A.example:8443?q=1 HTTP/1.1\r\n\r\n", Extract::kFound, "a.example"},
    {"absolute-form IPv6", "GET http://[::1]:80/ HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
     Extract::kFound, "::1"},
    {"absolute-form wins over an empty Host", "GET http://a.example HTTP/1.1\r\nHost:\r\n\r\n",
     Extract::kFound, "a.example"},
    {"CONNECT authority-form takes Host",
     "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", Extract::kFound,
     "a.example"},
    {"OPTIONS asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n", Extract::kFound,
     "a.example"},
    {"bare LF line ends", "GET / HTTP/1.1\nHost: a.example\n\n", Extract::kFound, "a.example"},
    {"mixed line ends", "GET / HTTP/1.0\r\nHost: a.example\n\r\n", Extract::kFound, "a.example"},
    {"obs-text in another field", "GET / HTTP/1.1\r\nX-Name: caf\xc3\xa9\r\nHost: a\r\n\r\n",
     Extract::kFound, "a"},
    {"body bytes after the header section are not read",
     "GET / HTTP/1.1\r\nHost: a\r\n\r\n\x16\x03\x01 Host: b\r\n", Extract::kFound, "a"},

    {"HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", Extract::kNoName},
    {"HTTP/1.1 without Host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", Extract::kNoName},
    {"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", Extract::kNoName},
    {"Host of whitespace only", "GET / HTTP/1.1\r\nHost:  \t \r\n\r\n", Extract::kNoName},
    {"absolute-form without authority", "GET urn:isbn:1 HTTP/1.1\r\n\r\n", Extract::kNoName},

    {"duplicate Host", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", Extract::kMalformed},
    {"duplicate Host in other case", "GET / HTTP/1.1\r\nHost: a\r\nHOST: b\r\n\r\n",
     Extract::kMalformed},
    {"an empty Host is still a Host", "GET / HTTP/1.1\r\nHost:\r\nHost: b\r\n\r\n",
     Extract::kMalformed},
    {"obs-fold of Host", "GET / HTTP/1.1\r\nHost: a\r\n .example\r\n\r\n", Extract::kMalformed},
    {"obs-fold of another field", "GET / HTTP/1.1\r\nX: a\r\n\tb\r\nHost: a\r\n\r\n",
     Extract::kMalformed},
    {"whitespace before the first field", "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
     Extract::kMalformed},
    {"whitespace before the colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", Extract::kMalformed},
    {"empty field name", "GET / HTTP/1.1\r\n: a\r\n\r\n", Extract::kMalformed},
    {"bare CR", "GET / HTTP/1.1\rHost: a\r\n\r\n", Extract::kMalformed},
    {"bare CR in a value", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", Extract::kMalformed},
    {"NUL in a value", std::string_view("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26),
     Extract::kMalformed},
    {"Host with a space inside", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", Extract::kMalformed},
    {"Host with userinfo", "GET / HTTP/1.1\r\nHost: u@a.example\r\n\r\n", Extract::kMalformed},
    {"Host with a path", "GET / HTTP/1.1\r\nHost: a.example/x\r\n\r\n", Extract::kMalformed},
    {"Host port not a number", "GET / HTTP/1.1\r\nHost: a.example:8o\r\n\r\n",
     Extract::kMalformed},
    {"Host port over 65535", "GET / HTTP/1.1\r\nHost: a.example:65536\r\n\r\n",
     Extract::kMalformed},
    {"Host of a port only", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", Extract::kMalformed},
    {"Host in UTF-8", "GET / HTTP/1.1\r\nHost: caf\xc3\xa9.example\r\n\r\n", Extract::kMalformed},
    {"Host wildcard", "GET / HTTP/1.1\r\nHost: *.example\r\n\r\n", Extract::kMalformed},
    {"Host unbracketed IPv6", "GET / HTTP/1.1\r\nHost: 2001:db8::1\r\n\r\n", Extract::kMalformed},
    {"Host IPv6 with zone", "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n",
     Extract::kMalformed},
    {"Host bad IPv6", "GET / HTTP/1.1\r\nHost: [2001:db8:::1]\r\n\r\n", Extract::kMalformed},
    {"Host IPv6 not closed", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", Extract::kMalformed},
    {"Host bracket then junk", "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", Extract::kMalformed},
    {"Host empty label", "GET / HTTP/1.1\r\nHost: a..example\r\n\r\n", Extract::kMalformed},
    {"bad Host ignored by absolute-form is still bad",
     "GET http://a.example/ HTTP/1.1\r\nHost: a b\r\n\r\n", Extract::kMalformed},
    {"absolute-form with userinfo", "GET http://u:p@a.example/ HTTP/1.1\r\n\r\n",
     Extract::kMalformed},
    {"absolute-form with empty host", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n",
     Extract::kMalformed},
    {"absolute-form with bad host", "GET http://a_b!.example/ HTTP/1.1\r\n\r\n",
     Extract::kMalformed},
    {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Extract::kMalformed},
    {"HTTP/0.9", "GET /\r\n", Extract::kMalformed},
    {"version in lower case", "GET / http/1.1\r\nHost: a\r\n\r\n", Extract::kMalformed},
    {"version with three parts", "GET / HTTP/1.1.1\r\nHost: a\r\n\r\n", Extract::kMalformed},
    {"two spaces after the method", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", Extract::kMalformed},
    {"empty line first", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", Extract::kMalformed},
    {"control byte in the target", "GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", Extract::kMalformed},
    {"SSH banner", "SSH-2.0-OpenSSH_9.2\r\n", Extract::kMalformed},
};

TEST(NameExtractHost, requests_table) {
  for (const HostCase& c : kHostCases) {
    Name n;
    n.len = 77;
    const ExtractResult r = host(c.request, &n);
    EXPECT_EQ(r.status, c.want) << c.what << ": " << status_name(r.status);
    if (c.want == Extract::kFound && r.status == Extract::kFound) {
      EXPECT_EQ(n.view(), c.name) << c.what;
      EXPECT_EQ(n.bytes[n.len], '\0') << c.what;
    } else {
      EXPECT_EQ(n.len, 77u) << c.what << ": out written without a name";
    }
  }
}

TEST(NameExtractHost, every_prefix_of_a_complete_request_needs_more) {
  for (const HostCase& c : kHostCases) {
    if (c.want == Extract::kMalformed) continue;
    // The body bytes after the empty line are not part of the request's head.
    const size_t head = c.request.find("\n\r\n") != std::string_view::npos
                            ? c.request.find("\n\r\n") + 3
                            : c.request.find("\n\n") + 2;
    const size_t whole = std::min(head, c.request.size());
    for (size_t len = 0; len < whole; ++len) {
      Name n;
      const ExtractResult r = host(c.request.substr(0, len), &n);
      ASSERT_EQ(r.status, Extract::kNeedMore)
          << c.what << ", prefix " << len << ": " << status_name(r.status);
      EXPECT_EQ(r.need, 0u);
    }
    Name n;
    EXPECT_EQ(host(c.request.substr(0, whole), &n).status, c.want) << c.what;
  }
}

TEST(NameExtractHost, non_http_fails_on_its_first_byte) {
  for (const char* first : {"\x16", "\x80", " ", "\r", "\n", "(", "\x00"}) {
    EXPECT_EQ(host(std::string_view(first, 1), nullptr).status, Extract::kMalformed)
        << int(uint8_t(first[0]));
  }
}

TEST(NameExtractHost, tls_client_hello_is_malformed) {
  const Bytes hello = from_hex(kCurlHello);
  Name n;
  const ExtractResult r = extract_host(hello.data(), uint32_t(hello.size()), &n);
  EXPECT_EQ(r.status, Extract::kMalformed);
}

TEST(NameExtractHost, http_given_to_sni_and_tls_given_to_host_are_malformed) {
  const std::string_view get = "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n";
  EXPECT_EQ(sni(bytes_of(get)).status, Extract::kMalformed);
  const Bytes hello = in_records(hello_with_name("a.example").message());
  EXPECT_EQ(host(std::string_view(reinterpret_cast<const char*>(hello.data()), hello.size()),
                 nullptr)
                .status,
            Extract::kMalformed);
}

TEST(NameExtractHost, long_host_names) {
  const std::string label63(63, 'a');
  const std::string n253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  Name n;
  const std::string ok = "GET / HTTP/1.1\r\nHost: " + n253 + ".:443\r\n\r\n";
  ASSERT_EQ(host(ok, &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), n253);
  // Past DNS's 253 bytes, a name for regex routes as an SNI would be (docs/NAMES.md).
  const std::string longer = "GET / HTTP/1.1\r\nHost: " + n253 + ".b:443\r\n\r\n";
  ASSERT_EQ(host(longer, &n).status, Extract::kFound);
  EXPECT_EQ(n.view(), n253 + ".b");
  const std::string long_label = "GET / HTTP/1.1\r\nHost: " + n253 + "bbb\r\n\r\n";
  EXPECT_EQ(host(long_label, &n).status, Extract::kMalformed);
}

}  // namespace
