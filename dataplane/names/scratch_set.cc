#include "dataplane/names/scratch_set.h"

namespace meshgate::dp::names {

ScratchSet::~ScratchSet() {
  for (hs_scratch_t* s : scratches_) hs_free_scratch(s);
}

size_t ScratchSet::scratch_bytes() const {
  size_t bytes = 0;
  if (scratches_.empty() || hs_scratch_size(scratches_[0], &bytes) != HS_SUCCESS) return 0;
  return bytes;
}

}  // namespace meshgate::dp::names
