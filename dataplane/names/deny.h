// Deny signatures: Hyperscan streaming mode over the first bytes a client sends on a proxied
// connection, across segment boundaries, with a bounded, preallocated stream state per
// connection.
//
// Threads. A DenySet is compiled on the control thread (control/names/deny_compile.h), owned by
// the snapshot and read by every worker (a Hyperscan database is immutable once compiled). A
// StreamArena is one worker's: built on the control thread before the worker starts, then used
// by that worker only. A DenyStream lives in one connection of that worker.
//
// Memory. hs_open_stream() takes its state from the process-wide stream allocator
// (hs_set_stream_allocator; the hook has no context argument). StreamArena::init installs a
// hook, once, that hands out the fixed-size blocks of the arena the calling thread is working
// in: DenyStream::open() and close() name their arena to the hook for the duration of the
// Hyperscan call (a thread-local pointer set and restored around it), so a worker never reaches
// the heap per connection and streams never cross arenas. With no arena named the hook refuses
// (hs_open_stream fails with HS_NOMEM): every Hyperscan stream in this process must come through
// DenyStream, and nothing else may call hs_set_stream_allocator() or hs_set_allocator().
// The state of a stream is exactly hs_stream_size() of its database (Hyperscan's runtime asks
// for that much); a set whose state is over kMaxDenyStreamBytes does not compile, so a set
// always fits an arena built with that block size.
//
// Matching. Patterns compile with HS_FLAG_SINGLEMATCH and HS_FLAG_DOTALL and no implicit
// anchoring: a signature may sit anywhere in the inspected bytes and span lines; `^` anchors
// at the first byte of the connection. Case sensitivity is as written: `(?i)` (or `(?i:...)`)
// makes a pattern or a group case-insensitive. Inspection stops at the first match. Matches
// Hyperscan could only report at the end of the stream are never reported (inspection ends
// with the limit or the connection, not with a known end of data): deny_compile rejects
// patterns that can only match there (`foo$`).
#pragma once

#include <hs/hs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/common/table_memory.h"

namespace meshgate::dp::names {

// Per-connection stream state limit, and the block size of a worker's StreamArena. Signature
// sets of literals, classes and short repeats need tens of bytes (a few dozen typical web
// signatures: under 100); what grows the state is long bounded repeats, about one byte per 4-8
// repeat positions (`[^\r]{4000}` alone: ~540 bytes). 2 KiB leaves room for several such
// patterns while a worker inspecting 16,384 connections at once reserves 32 MiB.
inline constexpr uint32_t kMaxDenyStreamBytes = 2048;

// Immutable set of deny patterns compiled in streaming mode; expression id i is pattern(i).
// Built by ctl::compile_deny, shared by snapshots; freed on the control thread.
class DenySet {
 public:
  // Control thread: takes ownership of `db` (a streaming-mode database compiled from
  // `patterns`, id = index) whose streams need `stream_bytes` (hs_stream_size).
  DenySet(hs_database_t* db, std::vector<std::string> patterns, size_t stream_bytes);
  ~DenySet();  // hs_free_database
  DenySet(const DenySet&) = delete;
  DenySet& operator=(const DenySet&) = delete;

  // Unique in this process for its lifetime (never reused, unlike an address): a stream
  // opened on one set recognizes a different set by it (DenyStream::scan).
  uint64_t id() const { return id_; }
  size_t patterns() const { return patterns_.size(); }
  const std::string& pattern(uint32_t i) const { return patterns_[i]; }
  const hs_database_t* database() const { return db_; }
  size_t stream_bytes() const { return stream_bytes_; }

 private:
  hs_database_t* db_;
  std::vector<std::string> patterns_;
  size_t stream_bytes_;
  uint64_t id_;
};

// A worker's fixed-size blocks for Hyperscan stream state: one table_alloc at setup, a stack
// of free block indices, no allocation afterwards. An open stream holds exactly one block.
class StreamArena {
 public:
  StreamArena() = default;
  ~StreamArena() { destroy(); }
  StreamArena(const StreamArena&) = delete;
  StreamArena& operator=(const StreamArena&) = delete;

  // Control thread, before the worker starts: `blocks` blocks of `block_bytes` (rounded up to
  // a cache line; normally kMaxDenyStreamBytes) on NUMA `socket` (table_memory.h). Installs the
  // stream allocator hook on first use. False when out of memory or `blocks` is 0.
  bool init(uint32_t block_bytes, uint32_t blocks, int socket);
  // Control thread, after the worker stopped, every stream closed.
  void destroy();

  uint32_t block_bytes() const { return block_bytes_; }
  uint32_t capacity_blocks() const { return blocks_; }
  size_t capacity_bytes() const { return size_t(blocks_) * block_bytes_; }
  uint32_t blocks_in_use() const { return blocks_ - free_top_; }
  // Bytes the open streams occupy (whole blocks): what the worker's memory budget counts.
  size_t bytes_in_use() const { return size_t(blocks_in_use()) * block_bytes_; }
  bool full() const { return free_top_ == 0; }
  const TableMemory& memory() const { return mem_; }

 private:
  friend struct StreamArenaHooks;  // deny.cc: Hyperscan's stream allocator
  void* take(size_t bytes);
  void give(void* block);
  bool owns(const void* p) const;

  TableMemory mem_;
  uint8_t* base_ = nullptr;
  std::unique_ptr<uint32_t[]> free_;  // free block indices; free_[0, free_top_) are free
  uint32_t block_bytes_ = 0;
  uint32_t blocks_ = 0;
  uint32_t free_top_ = 0;
};

enum class DenyOpen : uint8_t {
  kOpened,
  kNoBlock,        // every block of the arena is in use
  kStateTooLarge,  // the set's stream state is larger than a block
  kError,          // Hyperscan refused (not a streaming database)
};

enum class DenyStatus : uint8_t {
  kIdle,         // never opened
  kInspecting,   // open: scan() inspects the next bytes
  kMatched,      // a pattern matched; the stream is closed
  kLimit,        // `limit_bytes` inspected without a match; the stream is closed
  kSetReplaced,  // the set it was opened on is no longer the current one; closed
  kError,        // Hyperscan failed to scan (a scratch not made for the set); closed
  kClosed,       // closed by its owner before any of the above
};

// One connection's inspection. Worker thread; no allocation (the state is an arena block).
// Move-only: a stream has one owner; destroying an open stream closes it.
class DenyStream {
 public:
  static constexpr int32_t kNoMatch = -1;

  DenyStream() = default;
  ~DenyStream() { close(); }
  DenyStream(DenyStream&& o) noexcept;
  DenyStream& operator=(DenyStream&& o) noexcept;
  DenyStream(const DenyStream&) = delete;
  DenyStream& operator=(const DenyStream&) = delete;

  // Starts inspecting the first `limit_bytes` (> 0; inspect_bytes) of a connection against
  // `set`, with state from `arena` (which must outlive the stream). An open stream is closed
  // first. Anything but kOpened leaves the stream idle; the caller counts it.
  DenyOpen open(const DenySet& set, StreamArena& arena, uint32_t limit_bytes);

  // Feeds the next `len` bytes the client sent (any segmentation). `current` is the set the
  // connection's listener has in the snapshot the worker reads now (nullptr: none any more);
  // `scratch` must be the worker's scratch allocated for current->database() on the control
  // thread. Returns the index of the matching pattern, or kNoMatch. Only the bytes up to the
  // limit are inspected; on a match, the limit, a replaced set or an error the stream closes
  // (its block goes back) and status() says which.
  //
  // A stream opened on a set other than `current` is closed unscanned (kSetReplaced): the set
  // it was opened on may already be freed after a snapshot swap (its state is meaningless to
  // another database), and closing never touches the database.
  int32_t scan(const DenySet* current, const uint8_t* data, uint32_t len, hs_scratch_t* scratch);

  // Ends inspection (the connection closed), returning the block. Idempotent.
  void close();

  bool active() const { return stream_ != nullptr; }
  DenyStatus status() const { return status_; }
  // Bytes inspected: on a match, the offset just past the match's last byte.
  uint64_t scanned() const { return scanned_; }
  uint32_t limit_bytes() const { return limit_bytes_; }

 private:
  void finish(DenyStatus why);

  hs_stream_t* stream_ = nullptr;
  StreamArena* arena_ = nullptr;
  uint64_t set_id_ = 0;
  uint32_t scanned_ = 0;
  uint32_t limit_bytes_ = 0;
  DenyStatus status_ = DenyStatus::kIdle;
};

}  // namespace meshgate::dp::names
