#include "tools/pktlib/pcap.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace meshgate::pkt {
namespace {

// Large stdio buffer: one write(2) per MiB instead of one per record.
constexpr size_t kWriteBuffer = 1 << 20;
constexpr size_t kReadBuffer = 1 << 20;

struct FileHeader {
  uint32_t magic;
  uint16_t version_major;
  uint16_t version_minor;
  int32_t thiszone;
  uint32_t sigfigs;
  uint32_t snaplen;
  uint32_t linktype;
};
static_assert(sizeof(FileHeader) == 24);

struct RecordHeader {
  uint32_t ts_sec;
  uint32_t ts_frac;  // microseconds or nanoseconds, by the magic
  uint32_t incl_len;
  uint32_t orig_len;
};
static_assert(sizeof(RecordHeader) == 16);

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

ctl::Result<PcapWriter> PcapWriter::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return ctl::Error{errno_text("cannot create", path)};
  std::setvbuf(f, nullptr, _IOFBF, kWriteBuffer);
  const FileHeader h{kPcapMagicNanos, 2, 4, 0, 0, kPcapSnapLen, kLinktypeEthernet};
  PcapWriter w(f, path);
  if (std::fwrite(&h, sizeof h, 1, f) != 1) w.failed_ = true;
  return w;
}

PcapWriter::PcapWriter(PcapWriter&& o) noexcept
    : file_(std::exchange(o.file_, nullptr)),
      path_(std::move(o.path_)),
      records_(o.records_),
      failed_(o.failed_) {}

PcapWriter& PcapWriter::operator=(PcapWriter&& o) noexcept {
  if (this != &o) {
    if (file_) std::fclose(file_);
    file_ = std::exchange(o.file_, nullptr);
    path_ = std::move(o.path_);
    records_ = o.records_;
    failed_ = o.failed_;
  }
  return *this;
}

PcapWriter::~PcapWriter() {
  if (file_) std::fclose(file_);
}

bool PcapWriter::write(uint64_t ts_ns, std::span<const uint8_t> frame) {
  if (!file_ || failed_) return false;
  const uint32_t len = uint32_t(frame.size());
  const RecordHeader r{uint32_t(ts_ns / 1000000000u), uint32_t(ts_ns % 1000000000u), len, len};
  if (std::fwrite(&r, sizeof r, 1, file_) != 1 ||
      (len && std::fwrite(frame.data(), len, 1, file_) != 1)) {
    failed_ = true;
    return false;
  }
  ++records_;
  return true;
}

ctl::Result<bool> PcapWriter::close() {
  if (!file_) return ctl::Error{"pcap writer for " + path_ + " is not open"};
  const bool flushed = std::fclose(std::exchange(file_, nullptr)) == 0;
  if (failed_ || !flushed) return ctl::Error{errno_text("cannot write", path_)};
  return true;
}

ctl::Result<PcapReader> PcapReader::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return ctl::Error{errno_text("cannot open", path)};
  std::setvbuf(f, nullptr, _IOFBF, kReadBuffer);
  PcapReader r(f, path);
  uint8_t h[24];
  if (std::fread(h, sizeof h, 1, f) != 1) return ctl::Error{path + ": not a pcap file (short)"};
  uint32_t magic;
  std::memcpy(&magic, h, 4);
  const uint32_t swapped = __builtin_bswap32(magic);
  if (magic == kPcapMagicMicros || magic == kPcapMagicNanos) {
    r.nanos_ = magic == kPcapMagicNanos;
  } else if (swapped == kPcapMagicMicros || swapped == kPcapMagicNanos) {
    r.swapped_ = true;
    r.nanos_ = swapped == kPcapMagicNanos;
  } else {
    return ctl::Error{path + ": not a classic pcap file (pcapng is not supported)"};
  }
  r.linktype_ = r.field(h + 20) & 0x0fffffff;  // upper bits carry FCS info (pcap-savefile(5))
  return r;
}

PcapReader::PcapReader(PcapReader&& o) noexcept
    : file_(std::exchange(o.file_, nullptr)),
      path_(std::move(o.path_)),
      error_(std::move(o.error_)),
      swapped_(o.swapped_),
      nanos_(o.nanos_),
      linktype_(o.linktype_) {}

PcapReader& PcapReader::operator=(PcapReader&& o) noexcept {
  if (this != &o) {
    if (file_) std::fclose(file_);
    file_ = std::exchange(o.file_, nullptr);
    path_ = std::move(o.path_);
    error_ = std::move(o.error_);
    swapped_ = o.swapped_;
    nanos_ = o.nanos_;
    linktype_ = o.linktype_;
  }
  return *this;
}

PcapReader::~PcapReader() {
  if (file_) std::fclose(file_);
}

uint32_t PcapReader::field(const uint8_t* p) const {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return swapped_ ? __builtin_bswap32(v) : v;
}

bool PcapReader::next(uint64_t* ts_ns, std::vector<uint8_t>* frame) {
  if (!file_ || !error_.empty()) return false;
  uint8_t h[16];
  const size_t got = std::fread(h, 1, sizeof h, file_);
  if (got == 0) return false;
  if (got != sizeof h) {
    error_ = path_ + ": truncated record header";
    return false;
  }
  const uint32_t sec = field(h), frac = field(h + 4), incl = field(h + 8);
  if (incl > kPcapSnapLen) {
    error_ = path_ + ": record of " + std::to_string(incl) + " bytes exceeds the snap length";
    return false;
  }
  frame->resize(incl);
  if (incl && std::fread(frame->data(), incl, 1, file_) != 1) {
    error_ = path_ + ": truncated record";
    return false;
  }
  *ts_ns = uint64_t(sec) * 1000000000u + (nanos_ ? frac : uint64_t(frac) * 1000u);
  return true;
}

}  // namespace meshgate::pkt
