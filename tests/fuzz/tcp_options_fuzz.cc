// libFuzzer target for the TCP option parser (RFC 9293 §3.2, RFC 7323, RFC 2018). The input is
// the option bytes of one header, in a buffer of exactly that size so ASan sees any read past
// it. What parses must survive the writer: our options for those values, written into the 40
// bytes a header has, parse again to the same values (SACK blocks cut to what fits).
#include <cstdint>
#include <cstring>
#include <memory>

#include "dataplane/tcp/tcp_options.h"

using namespace meshgate::dp::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A header holds at most 40 option bytes; longer inputs test nothing new.
  if (size > 60) return 0;
  std::unique_ptr<uint8_t[]> in(new uint8_t[size]);
  if (size > 0) std::memcpy(in.get(), data, size);
  TcpOptions o;
  if (!parse_tcp_options(in.get(), uint32_t(size), &o)) return 0;
  if (o.nsack > kMaxSackBlocksIn) __builtin_trap();

  TcpOptionsOut w;
  w.mss = o.mss;
  w.wscale = o.wscale;
  w.sack_permitted = o.sack_permitted;
  w.ts = o.has_ts;
  w.tsval = o.tsval;
  w.tsecr = o.tsecr;
  w.nsack = o.nsack;
  w.sack = o.sack;
  std::unique_ptr<uint8_t[]> out(new uint8_t[40]);
  const uint32_t n = write_tcp_options(out.get(), w);
  if (n > 40 || n % 4 != 0) __builtin_trap();
  TcpOptions back;
  if (!parse_tcp_options(out.get(), n, &back)) __builtin_trap();
  if (back.mss != o.mss || back.wscale != o.wscale || back.sack_permitted != o.sack_permitted ||
      back.has_ts != o.has_ts || (o.has_ts && (back.tsval != o.tsval || back.tsecr != o.tsecr)))
    __builtin_trap();
  if (back.nsack > o.nsack) __builtin_trap();
  for (uint32_t i = 0; i < back.nsack; ++i) {
    if (back.sack[i].start != o.sack[i].start || back.sack[i].end != o.sack[i].end)
      __builtin_trap();
  }
  return 0;
}
