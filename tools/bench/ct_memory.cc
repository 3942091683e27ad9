// ct_memory: what a worker's flow table costs per flow, measured, for tools/bench/run.
//
//   ct_memory MAX_FLOWS...      (as root: it initializes a small no-hugepage EAL)
//
// For each capacity it allocates a FlowTable the way a worker does (FlowTable::init: without
// hugepages its own anonymous mapping, advised for transparent huge pages; with them the DPDK
// heap), measures what the allocation really took (the DPDK heap before and after plus the
// mapping's length: allocator overhead and rounding included) and how much of it the kernel
// backs with transparent huge pages, then fills it with distinct IPv4 dnat flows until an
// insert fails and with IPv6 flows in a fresh table, to show that the capacity is reachable:
// MAX_FLOWS IPv4 flows, half as many IPv6 ones (an IPv6 flow takes two 32-byte slots). Prints
// one JSON object on stdout, with the TSC rate.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "control/runtime/eal_cleanup.h"
#include "dataplane/conntrack/conntrack.h"
#include "dataplane/snapshot/addr_table.h"

namespace {

using meshgate::IpAddr;
using meshgate::dp::AddrTable;
using meshgate::dp::Flow;
using meshgate::dp::FlowTable;
using meshgate::dp::FlowTarget;
using meshgate::dp::Mode;
using meshgate::dp::Tuple;

size_t heap_allocated() {
  rte_malloc_socket_stats s{};
  rte_malloc_get_socket_stats(int(rte_socket_id()), &s);
  return s.heap_allocsz_bytes;
}

// Flow i: client 10.x.y.z (or 2001:db8:2::x:y) port 1024 + i % 60000 -> VIP 203.0.113.10:80.
Tuple flow_tuple(uint32_t i, bool v6) {
  Tuple t;
  const uint32_t host = i / 60000 + 1;
  if (v6) {
    uint8_t b[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0};
    b[12] = uint8_t(host >> 24);
    b[13] = uint8_t(host >> 16);
    b[14] = uint8_t(host >> 8);
    b[15] = uint8_t(host);
    t.src = IpAddr::v6_bytes(b);
    const uint8_t vip[16] = {0x20, 0x01, 0x0d, 0xb8, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
    t.dst = IpAddr::v6_bytes(vip);
  } else {
    t.src = IpAddr::v4((10u << 24) | host);
    t.dst = IpAddr::v4((203u << 24) | (0u << 16) | (113u << 8) | 10u);
  }
  t.sport = uint16_t(__builtin_bswap16(uint16_t(1024 + i % 60000)));
  t.dport = __builtin_bswap16(80);
  t.proto = 6;
  return t;
}

// Inserts distinct flows until one fails (or twice the capacity were tried); returns how many
// the table holds.
uint32_t fill(FlowTable& ft, uint32_t max_flows, bool v6) {
  FlowTarget to;
  to.backend = v6 ? *IpAddr::parse("2001:db8:1::11") : *IpAddr::parse("198.51.100.11");
  to.backend_port = __builtin_bswap16(8080);
  to.vip_id = 1;
  to.stat_id = 1;
  to.mode = Mode::kDnat;
  for (uint32_t i = 0; i < 2 * max_flows; ++i) {
    if (!ft.insert(flow_tuple(i, v6), to, 1000)) break;
  }
  return ft.active();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> caps;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(argv[i], &end, 10);
    if (!end || *end || v < 1024 || v > (1ul << 26)) {
      std::fprintf(stderr, "usage: ct_memory MAX_FLOWS... (each 1024..67108864)\n");
      return 2;
    }
    caps.push_back(uint32_t(v));
  }
  if (caps.empty()) {
    std::fprintf(stderr, "usage: ct_memory MAX_FLOWS... (each 1024..67108864)\n");
    return 2;
  }
  size_t largest = 0;
  for (uint32_t c : caps) largest = std::max(largest, FlowTable::memory_bytes(c));
  const std::string mem = std::to_string(64 + 2 * (largest >> 20));
  const std::string prefix = "--file-prefix=mg-ctmem-" + std::to_string(getpid());
  std::vector<std::string> args = {"ct_memory", "--no-huge", "-m", mem, "--no-pci", "--no-shconf",
                                   "--no-telemetry", "-l", "0", prefix,
                                   "--log-level=error"};
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  if (rte_eal_init(int(av.size() - 1), av.data()) < 0) {
    std::fprintf(stderr, "ct_memory: EAL init failed: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  // Flows refer to their VIP by id; the table the worker would read (only reply tuples of
  // fullnat flows use it, but give the table a real one).
  AddrTable addrs;
  addrs.addrs = static_cast<IpAddr*>(
      rte_zmalloc("ct_addrs", sizeof(IpAddr) * meshgate::dp::kAddrTableCapacity, 64));
  if (!addrs.addrs) {
    std::fprintf(stderr, "ct_memory: out of DPDK memory\n");
    return 1;
  }
  addrs.addrs[1] = *IpAddr::parse("203.0.113.10");

  // The TSC rate too: the harness turns meshgate's busy cycles into a share of the core.
  std::printf("{\n  \"tsc_hz\": %lu,\n  \"entry_bytes\": %zu,\n  \"ipv6_entry_bytes\": %zu,\n"
              "  \"bucket_bytes\": %zu,\n  \"bucket_entries\": %u,\n  \"tables\": [",
              (unsigned long)rte_get_tsc_hz(), sizeof(Flow),
              sizeof(Flow) + sizeof(meshgate::dp::FlowAddrs6), sizeof(FlowTable::Bucket),
              FlowTable::kBucketEntries);
  int rc = 0;
  for (size_t i = 0; i < caps.size(); ++i) {
    const uint32_t cap = caps[i];
    uint32_t held[2] = {0, 0};
    size_t measured = 0, thp = 0;
    for (int v6 = 0; v6 < 2; ++v6) {
      FlowTable ft;
      const size_t before = heap_allocated();
      if (!ft.init(cap, int(rte_socket_id()), meshgate::dp::ConntrackTimeouts{}, &addrs)) {
        std::fprintf(stderr, "ct_memory: FlowTable::init(%u) failed: out of DPDK memory\n", cap);
        rc = 1;
        break;
      }
      measured = heap_allocated() - before + ft.memory().mapped;
      thp = meshgate::dp::table_thp_bytes(ft.memory());
      held[v6] = fill(ft, cap, v6 != 0);
      ft.destroy();
    }
    if (rc) break;
    const size_t formula = FlowTable::memory_bytes(cap);
    std::printf("%s\n    {\"max_flows\": %u, \"memory_bytes\": %zu, \"heap_bytes\": %zu, "
                "\"bytes_per_flow\": %.1f, \"heap_bytes_per_flow\": %.1f, "
                "\"thp_bytes\": %zu, \"ipv4_flows_held\": %u, \"ipv6_flows_held\": %u}",
                i ? "," : "", cap, formula, measured, double(formula) / cap,
                double(measured) / cap, thp, held[0], held[1]);
  }
  std::printf("\n  ]\n}\n");
  rte_free(addrs.addrs);
  meshgate::ctl::eal_cleanup();
  return rc;
}
