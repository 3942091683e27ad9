# Writes OUT (a header defining MESHGATE_GIT_COMMIT) from `git describe --always --dirty` of
# SOURCE_DIR, run at every build so the commit follows the checkout without a reconfigure.
# Outside a git checkout of SOURCE_DIR itself (a source tarball, even one unpacked inside some
# other repository) the commit is "unknown". configure_file leaves OUT untouched when nothing
# changed, so nothing recompiles.
set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} rev-parse --show-toplevel
    OUTPUT_VARIABLE top RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0)
    file(REAL_PATH "${top}" top)
    file(REAL_PATH "${SOURCE_DIR}" src)
  endif()
  if(rc EQUAL 0 AND top STREQUAL src)
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} describe --always --dirty
      OUTPUT_VARIABLE described RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND described MATCHES "^[0-9A-Za-z._+-]+$")
      set(commit "${described}")
    endif()
  endif()
endif()
file(CONFIGURE OUTPUT ${OUT}
  CONTENT "#pragma once\n#define MESHGATE_GIT_COMMIT \"${commit}\"\n")
