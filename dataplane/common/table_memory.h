// Memory for a worker's large private tables (the flow table's entries, index and links).
//
// With hugepages the tables come from the DPDK heap like everything else. Without them
// (`--no-huge`) the EAL's heap is a memfd of 4 KiB pages, and a table read at random (a 32 MiB
// conntrack index) costs a TLB miss and a page walk per lookup. These tables are never given to
// a device, so they need neither DMA-able nor IOVA-contiguous memory: without hugepages they are
// anonymous mappings, 2 MiB aligned, with MADV_HUGEPAGE, so that the kernel backs them with
// transparent huge pages where `transparent_hugepage/enabled` is `always` or `madvise` (the
// Debian default). Where THP is off they are plain 4 KiB pages, as before.
#pragma once

#include <cstddef>
#include <string>

namespace meshgate::dp {

struct TableMemory {
  void* p = nullptr;
  size_t bytes = 0;     // as asked
  size_t mapped = 0;    // the mapping's length; 0 when the memory is from the DPDK heap
};

// Zeroed memory of `bytes` for a table on NUMA `socket` (SOCKET_ID_ANY: any). `name` names
// DPDK heap allocations. p == nullptr when out of memory.
TableMemory table_alloc(const char* name, size_t bytes, int socket);
void table_free(TableMemory* m);
// Bytes of the mapping backed by transparent huge pages (from /proc/self/smaps; 0 for heap
// memory or when unknown).
size_t table_thp_bytes(const TableMemory& m);
// The /proc/self/smaps block (header line and fields) of the mapping that holds `p`; "" when
// none does. (The kernel may merge a table's mapping with a neighbour of the same flags.)
std::string smaps_block(const void* p);

}  // namespace meshgate::dp
