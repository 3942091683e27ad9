// Classic pcap files (the libpcap savefile format): a 24-byte file header and a 16-byte header
// per record. Written directly rather than through libpcap because the format is fixed and
// this is several times faster for millions of small records. Any thread; one object per thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "control/common/result.h"

namespace meshgate::pkt {

inline constexpr uint32_t kPcapMagicMicros = 0xa1b2c3d4;
inline constexpr uint32_t kPcapMagicNanos = 0xa1b23c4d;
inline constexpr uint32_t kLinktypeEthernet = 1;  // DLT_EN10MB
inline constexpr uint32_t kPcapSnapLen = 262144;  // libpcap's MAXIMUM_SNAPLEN

// Writes nanosecond-resolution pcap (magic 0xa1b23c4d, DLT_EN10MB) in host byte order.
class PcapWriter {
 public:
  static ctl::Result<PcapWriter> open(const std::string& path);
  PcapWriter(PcapWriter&& o) noexcept;
  PcapWriter& operator=(PcapWriter&& o) noexcept;
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  ~PcapWriter();

  // Appends one record; false after a write error (the file is then incomplete).
  bool write(uint64_t ts_ns, std::span<const uint8_t> frame);
  // Flushes and closes; reports the first error of any write.
  ctl::Result<bool> close();
  uint64_t records() const { return records_; }

 private:
  PcapWriter(std::FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  std::FILE* file_ = nullptr;
  std::string path_;
  uint64_t records_ = 0;
  bool failed_ = false;
};

// Reads classic pcap with microsecond or nanosecond magic, in either byte order.
class PcapReader {
 public:
  static ctl::Result<PcapReader> open(const std::string& path);
  PcapReader(PcapReader&& o) noexcept;
  PcapReader& operator=(PcapReader&& o) noexcept;
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;
  ~PcapReader();

  // The next record; false at end of file or on a damaged record (then error() is set).
  bool next(uint64_t* ts_ns, std::vector<uint8_t>* frame);
  const std::string& error() const { return error_; }
  uint32_t linktype() const { return linktype_; }
  bool nanosecond() const { return nanos_; }

 private:
  PcapReader(std::FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  uint32_t field(const uint8_t* p) const;
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string error_;
  bool swapped_ = false;
  bool nanos_ = false;
  uint32_t linktype_ = 0;
};

}  // namespace meshgate::pkt
