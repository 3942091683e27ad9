#include "dataplane/names/deny.h"

#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

#include "dataplane/common/compiler.h"

namespace meshgate::dp::names {

namespace {

// The arena whose blocks the stream allocator hook hands out on this thread: set only around a
// Hyperscan call that allocates or frees stream state (open and close).
thread_local StreamArena* t_arena = nullptr;

class ArenaScope {
 public:
  explicit ArenaScope(StreamArena* a) : prev_(t_arena) { t_arena = a; }
  ~ArenaScope() { t_arena = prev_; }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  StreamArena* prev_;
};

}  // namespace

struct StreamArenaHooks {
  static void* alloc(size_t bytes) {
    StreamArena* a = t_arena;
    return a ? a->take(bytes) : nullptr;
  }
  static void free(void* p) {
    if (p == nullptr) return;
    StreamArena* a = t_arena;
    // Only a DenyStream closing frees stream state, and it names the arena that holds it.
    MG_CHECK(a != nullptr && a->owns(p));
    a->give(p);
  }
};

namespace {

void install_stream_allocator() {
  // hs_set_stream_allocator writes two plain globals: set them once, on the control thread,
  // before any worker (started after its arena's init) can open a stream.
  static std::once_flag once;
  std::call_once(once, [] {
    MG_CHECK(hs_set_stream_allocator(&StreamArenaHooks::alloc, &StreamArenaHooks::free) ==
             HS_SUCCESS);
  });
}

}  // namespace


bool StreamArena::init(uint32_t block_bytes, uint32_t blocks, int socket) {
  destroy();
  if (blocks == 0 || block_bytes == 0) return false;
  install_stream_allocator();
  const uint32_t bb = (block_bytes + MG_CACHE_LINE - 1) & ~uint32_t(MG_CACHE_LINE - 1);
  mem_ = table_alloc("mg_deny_streams", size_t(bb) * blocks, socket);
  if (mem_.p == nullptr) return false;
  base_ = static_cast<uint8_t*>(mem_.p);
  free_ = std::make_unique<uint32_t[]>(blocks);
  // Block 0 on top: the first streams take the lowest blocks, and a freed block is reused
  // first while its lines are still cached.
  for (uint32_t i = 0; i < blocks; ++i) free_[i] = blocks - 1 - i;
  block_bytes_ = bb;
  blocks_ = blocks;
  free_top_ = blocks;
  // Under AddressSanitizer a free block, and the tail of a taken one past what Hyperscan asked
  // for, are poisoned: a stream used after close() or overrunning its state is reported.
  // (No-ops in other builds.)
  ASAN_POISON_MEMORY_REGION(base_, capacity_bytes());
  return true;
}

void StreamArena::destroy() {
  if (base_ == nullptr) return;
  MG_CHECK(blocks_in_use() == 0);
  ASAN_UNPOISON_MEMORY_REGION(base_, capacity_bytes());
  table_free(&mem_);
  free_.reset();
  base_ = nullptr;
  block_bytes_ = blocks_ = free_top_ = 0;
}

void* StreamArena::take(size_t bytes) {
  if (bytes > block_bytes_ || free_top_ == 0) return nullptr;
  uint8_t* block = base_ + size_t(free_[--free_top_]) * block_bytes_;
  ASAN_UNPOISON_MEMORY_REGION(block, bytes);
  return block;
}

void StreamArena::give(void* block) {
  const size_t off = static_cast<uint8_t*>(block) - base_;
  MG_ASSERT(off % block_bytes_ == 0 && free_top_ < blocks_);
  ASAN_POISON_MEMORY_REGION(block, block_bytes_);
  free_[free_top_++] = uint32_t(off / block_bytes_);
}

bool StreamArena::owns(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return base_ != nullptr && b >= base_ && b < base_ + capacity_bytes();
}

DenyStream::DenyStream(DenyStream&& o) noexcept
    : stream_(std::exchange(o.stream_, nullptr)),
      arena_(o.arena_),
      set_id_(o.set_id_),
      scanned_(o.scanned_),
      limit_bytes_(o.limit_bytes_),
      status_(std::exchange(o.status_, DenyStatus::kIdle)) {}

DenyStream& DenyStream::operator=(DenyStream&& o) noexcept {
  if (this != &o) {
    close();
    stream_ = std::exchange(o.stream_, nullptr);
    arena_ = o.arena_;
    set_id_ = o.set_id_;
    scanned_ = o.scanned_;
    limit_bytes_ = o.limit_bytes_;
    status_ = std::exchange(o.status_, DenyStatus::kIdle);
  }
  return *this;
}

DenyOpen DenyStream::open(const DenySet& set, StreamArena& arena, uint32_t limit_bytes) {
  MG_ASSERT(limit_bytes > 0);
  close();
  status_ = DenyStatus::kIdle;
  scanned_ = 0;
  // Checked here rather than learned from HS_NOMEM, so that the two are counted apart.
  if (set.stream_bytes() > arena.block_bytes()) return DenyOpen::kStateTooLarge;
  if (arena.full()) return DenyOpen::kNoBlock;
  hs_stream_t* s = nullptr;
  hs_error_t rc;
  {
    ArenaScope scope(&arena);
    rc = hs_open_stream(set.database(), 0, &s);
  }
  if (rc != HS_SUCCESS) return DenyOpen::kError;
  stream_ = s;
  arena_ = &arena;
  set_id_ = set.id();
  limit_bytes_ = limit_bytes;
  status_ = DenyStatus::kInspecting;
  return DenyOpen::kOpened;
}

namespace {

struct MatchCtx {
  uint32_t id;
  unsigned long long to;
};

int on_match(unsigned int id, unsigned long long /*from*/, unsigned long long to,
             unsigned int /*flags*/, void* ctx) {
  auto* m = static_cast<MatchCtx*>(ctx);
  m->id = id;
  m->to = to;
  return 1;  // one match is the verdict: stop scanning
}

}  // namespace

int32_t DenyStream::scan(const DenySet* current, const uint8_t* data, uint32_t len,
                         hs_scratch_t* scratch) {
  if (stream_ == nullptr) return kNoMatch;
  if (current == nullptr || current->id() != set_id_) {
    finish(DenyStatus::kSetReplaced);
    return kNoMatch;
  }
  const uint32_t n = std::min(len, limit_bytes_ - scanned_);
  if (n == 0) return kNoMatch;
  MatchCtx m{0, 0};
  const hs_error_t rc = hs_scan_stream(stream_, reinterpret_cast<const char*>(data), n, 0,
                                       scratch, on_match, &m);
  if (rc == HS_SCAN_TERMINATED) {
    scanned_ = uint32_t(m.to);
    finish(DenyStatus::kMatched);
    return int32_t(m.id);
  }
  if (rc != HS_SUCCESS) {
    finish(DenyStatus::kError);
    return kNoMatch;
  }
  scanned_ += n;
  if (scanned_ == limit_bytes_) finish(DenyStatus::kLimit);
  return kNoMatch;
}

void DenyStream::close() {
  if (stream_ != nullptr) finish(DenyStatus::kClosed);
}

void DenyStream::finish(DenyStatus why) {
  {
    ArenaScope scope(arena_);
    // No callback: end-of-stream matches are not a verdict (deny.h), and without one Hyperscan
    // neither needs a scratch nor reads the database, which may already be freed.
    (void)hs_close_stream(stream_, nullptr, nullptr, nullptr);
  }
  stream_ = nullptr;
  status_ = why;
}

}  // namespace meshgate::dp::names
