// Checks of what a valid config points at outside itself, made before anything starts (by
// --check and by a start alike): the files it names. Every error carries the position of the
// key that names the file. Main thread.
#pragma once

#include "control/config/config.h"

namespace meshgate::ctl {

// The mesh file (read and parsed: its own errors keep their file:line:column), the PEM files
// and token files of [mesh] and [hbone]: each must be a regular file within its size limit
// (control/common/file_read.h). Appends to `errs`.
void check_referenced_files(const Config& cfg, ConfigErrors* errs);

}  // namespace meshgate::ctl
