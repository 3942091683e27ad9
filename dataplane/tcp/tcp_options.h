// TCP options (RFC 9293 §3.2, RFC 7323, RFC 2018): parsing the option list of a received
// header and writing ours. Pure functions over bytes, any thread, no allocation.
#pragma once

#include <cstdint>

#include "dataplane/tcp/sack.h"

namespace meshgate::dp::tcp {

inline constexpr uint8_t kOptEnd = 0;
inline constexpr uint8_t kOptNop = 1;
inline constexpr uint8_t kOptMss = 2;
inline constexpr uint8_t kOptWscale = 3;
inline constexpr uint8_t kOptSackPermitted = 4;
inline constexpr uint8_t kOptSack = 5;
inline constexpr uint8_t kOptTimestamp = 8;
// RFC 2018 §3: at most 4 blocks fit the 40 option bytes, 3 beside a timestamp.
inline constexpr uint32_t kMaxSackBlocksIn = 4;

struct TcpOptions {
  uint16_t mss = 0;          // 0 = absent
  uint8_t wscale = 0xff;     // 0xff = absent
  bool sack_permitted = false;
  bool has_ts = false;
  uint32_t tsval = 0;
  uint32_t tsecr = 0;
  uint8_t nsack = 0;
  SackBlock sack[kMaxSackBlocksIn];
};

// Parses `len` option bytes. False when an option's length is impossible (RFC 9293 §3.2: a
// length running past the header); unknown options are skipped (RFC 9293 §3.1 MUST-64).
bool parse_tcp_options(const uint8_t* p, uint32_t len, TcpOptions* out);

// What a segment we send carries.
struct TcpOptionsOut {
  uint16_t mss = 0;          // SYN only; 0 = none
  uint8_t wscale = 0xff;     // SYN only; 0xff = none
  bool sack_permitted = false;
  bool ts = false;
  uint32_t tsval = 0;
  uint32_t tsecr = 0;
  uint8_t nsack = 0;
  const SackBlock* sack = nullptr;
};

// Writes the options (NOP-padded to a multiple of 4, RFC 9293 §3.1) and returns their length
// (at most 40). SACK blocks that do not fit are left out.
uint32_t write_tcp_options(uint8_t* p, const TcpOptionsOut& o);

}  // namespace meshgate::dp::tcp
