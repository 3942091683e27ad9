// One Hyperscan scratch per worker, valid for every database it was created for
// (control/names/name_compile.h, make_scratch_set). Owned by the snapshot and freed with it,
// after the workers' grace period; a snapshot whose databases need a larger scratch gets a new
// set on the control thread before it is published, so no worker ever allocates one.
#pragma once

#include <hs/hs.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace meshgate::dp::names {

class ScratchSet {
 public:
  // Control thread; takes ownership of each scratch (none: created with no database).
  explicit ScratchSet(std::vector<hs_scratch_t*> scratches) : scratches_(std::move(scratches)) {}
  ~ScratchSet();  // hs_free_scratch each
  ScratchSet(const ScratchSet&) = delete;
  ScratchSet& operator=(const ScratchSet&) = delete;

  // Worker `worker`'s scratch, used by that worker only; nullptr when created with no database.
  hs_scratch_t* for_worker(uint32_t worker) const {
    return worker < scratches_.size() ? scratches_[worker] : nullptr;
  }
  size_t workers() const { return scratches_.size(); }
  size_t scratch_bytes() const;  // hs_scratch_size of one, 0 without any

 private:
  std::vector<hs_scratch_t*> scratches_;
};

}  // namespace meshgate::dp::names
