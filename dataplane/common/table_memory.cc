#include "dataplane/common/table_memory.h"

#include <rte_eal.h>
#include <rte_malloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace meshgate::dp {

namespace {

constexpr size_t kHuge = 2u << 20;

// Prefer the worker's NUMA node for the mapping (first touch would put it on the control
// thread's). Best effort: a failure leaves the default policy.
void prefer_node(void* p, size_t len, int socket) {
  if (socket < 0 || socket >= 64) return;
  constexpr int kMpolPreferred = 1;  // MPOL_PREFERRED, <linux/mempolicy.h>
  unsigned long mask = 1ul << socket;
  (void)syscall(SYS_mbind, p, len, kMpolPreferred, &mask, 64ul, 0u);
}

}  // namespace

TableMemory table_alloc(const char* name, size_t bytes, int socket) {
  TableMemory m;
  m.bytes = bytes;
  if (bytes == 0) return m;
  if (rte_eal_has_hugepages()) {
    m.p = rte_zmalloc_socket(name, bytes, 64, socket);
    return m;
  }
  // Over-map by 2 MiB and trim, so that the table starts on a huge page boundary.
  const size_t len = (bytes + kHuge - 1) & ~(kHuge - 1);
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return m;
  const uintptr_t start = (uintptr_t(raw) + kHuge - 1) & ~uintptr_t(kHuge - 1);
  if (start > uintptr_t(raw)) munmap(raw, start - uintptr_t(raw));
  const uintptr_t end = start + len;
  const uintptr_t raw_end = uintptr_t(raw) + len + kHuge;
  if (raw_end > end) munmap(reinterpret_cast<void*>(end), raw_end - end);
  m.p = reinterpret_cast<void*>(start);
  m.mapped = len;
  (void)madvise(m.p, len, MADV_HUGEPAGE);
  prefer_node(m.p, len, socket);
  // Fault it in now, on the control thread, not on the worker's first packets.
  std::memset(m.p, 0, len);
  return m;
}

void table_free(TableMemory* m) {
  if (m->p == nullptr) return;
  if (m->mapped) munmap(m->p, m->mapped);
  else rte_free(m->p);
  *m = TableMemory{};
}

std::string smaps_block(const void* p) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return "";
  char line[512];
  std::string block;
  bool in = false;
  while (std::fgets(line, sizeof line, f)) {
    // A mapping's header starts "lo-hi perms"; its fields start with a name and a colon.
    unsigned long lo, hi;
    char c;
    if (std::sscanf(line, "%lx-%lx%c", &lo, &hi, &c) == 3 && c == ' ') {
      if (in) break;
      in = lo <= uintptr_t(p) && uintptr_t(p) < hi;
    }
    if (in) block += line;
  }
  std::fclose(f);
  return block;
}

size_t table_thp_bytes(const TableMemory& m) {
  if (!m.mapped) return 0;
  const std::string block = smaps_block(m.p);
  const size_t at = block.find("\nAnonHugePages:");
  return at == std::string::npos ? 0 : size_t(std::strtoull(block.c_str() + at + 15, nullptr, 10)) << 10;
}

}  // namespace meshgate::dp
