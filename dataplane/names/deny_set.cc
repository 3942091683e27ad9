// DenySet (dataplane/names/deny.h) apart from the worker's streams and arenas: what the
// config validator needs to compile patterns, without the DPDK memory the arenas use.
#include <atomic>
#include <utility>

#include "dataplane/names/deny.h"

namespace meshgate::dp::names {
namespace {

std::atomic<uint64_t> g_next_set_id{1};

}  // namespace

DenySet::DenySet(hs_database_t* db, std::vector<std::string> patterns, size_t stream_bytes)
    : db_(db),
      patterns_(std::move(patterns)),
      stream_bytes_(stream_bytes),
      id_(g_next_set_id.fetch_add(1, std::memory_order_relaxed)) {}

DenySet::~DenySet() { hs_free_database(db_); }

}  // namespace meshgate::dp::names
