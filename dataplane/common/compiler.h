// Compiler helpers shared by every module. Any thread.
#pragma once

#include <cstdio>
#include <cstdlib>

#define MG_LIKELY(x) __builtin_expect(!!(x), 1)
#define MG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MG_ALWAYS_INLINE inline __attribute__((always_inline))
#define MG_NOINLINE __attribute__((noinline))
#define MG_CACHE_LINE 64
#define MG_CACHE_ALIGNED alignas(MG_CACHE_LINE)

// MG_CHECK: always on, for programmer errors only (never for network or config input).
#define MG_CHECK(cond)                                                                    \
  do {                                                                                    \
    if (MG_UNLIKELY(!(cond))) {                                                           \
      std::fprintf(stderr, "meshgate: check failed: %s at %s:%d\n", #cond, __FILE__,      \
                   __LINE__);                                                             \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

#ifdef NDEBUG
#define MG_ASSERT(cond) ((void)0)
#else
#define MG_ASSERT(cond) MG_CHECK(cond)
#endif
