// A FIFO of bytes in one contiguous allocation: append at the tail, consume from the head.
// The stand-in for the TCP stack's mbuf chains in the HBONE engine (the TLS BIO reads from
// one and writes into another); the API is what the mbuf-chain version will keep. Single owner,
// no locking; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace meshgate::dp {

class ByteQueue {
 public:
  size_t size() const { return buf_.size() - head_; }
  bool empty() const { return size() == 0; }
  const uint8_t* data() const { return buf_.data() + head_; }

  void append(const void* p, size_t n) {
    if (n == 0) return;
    // Reclaim the consumed head before growing: keeps the allocation at the high-water mark.
    if (head_ > 0 && (head_ == buf_.size() || buf_.size() + n > buf_.capacity())) compact();
    const size_t old = buf_.size();
    buf_.resize(old + n);
    std::memcpy(buf_.data() + old, p, n);
  }
  // Copies up to `cap` bytes out and consumes them; returns how many.
  size_t read(void* out, size_t cap) {
    const size_t n = cap < size() ? cap : size();
    // An empty queue may have no allocation: memcpy from a null pointer is undefined even for
    // zero bytes (the HBONE engine reads empty stream queues when nghttp2 polls for DATA).
    if (n == 0) return 0;
    std::memcpy(out, data(), n);
    consume(n);
    return n;
  }
  void consume(size_t n) {
    head_ += n < size() ? n : size();
    if (head_ == buf_.size()) {
      buf_.clear();
      head_ = 0;
      // A queue that grew large under back-pressure gives its memory back once drained (the
      // common small queue keeps its allocation: no allocation per chunk).
      if (buf_.capacity() > kKeepBytes) std::vector<uint8_t>().swap(buf_);
    }
  }
  void clear() {
    buf_.clear();
    head_ = 0;
    if (buf_.capacity() > kKeepBytes) std::vector<uint8_t>().swap(buf_);
  }
  // Bytes held by the allocation (for memory budgets).
  size_t capacity() const { return buf_.capacity(); }

 private:
  static constexpr size_t kKeepBytes = 256 * 1024;
  void compact() {
    const size_t n = size();
    std::memmove(buf_.data(), buf_.data() + head_, n);
    buf_.resize(n);
    head_ = 0;
  }
  std::vector<uint8_t> buf_;
  size_t head_ = 0;
};

}  // namespace meshgate::dp
