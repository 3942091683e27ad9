// A fuzz target that crashes on every input: tests/fuzz/CMakeLists.txt runs it through
// run_fuzz.sh to prove that a crash fails the ctest run (and is not lost in a pipeline).
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { __builtin_trap(); }
