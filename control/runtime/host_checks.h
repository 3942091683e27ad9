// What the host does to a start that the config cannot say, checked before and at the start:
// the replay's input file, the kernel offloads of the interfaces net_af_packet ports open, other
// processes' busy threads on the workers' CPUs. Main (control) thread; no DPDK state.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace meshgate::ctl {

// Why `path` cannot be a replay's --pcap-in ("" when it can): what open() said ("No such file
// or directory"), "not a regular file" (a FIFO would be read twice: counted, then replayed), or
// libpcap's reason it is not a capture.
std::string check_pcap_input(const std::string& path);

// The kernel offloads that break a net_af_packet port, on one interface. A veth's kernel side
// with tx-checksumming on hands the packet socket frames whose TCP/UDP checksum is left for a
// NIC that does not exist (CHECKSUM_PARTIAL): the gateway forwards them with a bad checksum.
// TSO on that side hands it 64 KiB segments; GRO on the port's own interface merges frames
// before the socket sees them. Either way the frames are not what was on the wire.
struct OffloadWarning {
  std::string iface;   // the interface with offloads on
  std::string netns;   // its network namespace (ip netns name) when not the gateway's, else ""
  std::string role;    // "port" (the interface the port opens) or "peer" (its veth peer)
  std::vector<std::string> features;  // ethtool's names: tx-checksumming, ...
  // The veth's peer is in another network namespace the gateway cannot enter or name: its
  // offloads are unknown and must be turned off there too.
  bool peer_unknown = false;
  std::string hint;    // the command that turns them off
};

// The warnings for a port's `device` string: none unless it is a net_af_packet vdev whose
// iface (or, for a veth, whose peer: in this network namespace or a named one under
// /var/run/netns) has any of tx-checksumming, tcp-segmentation-offload or
// generic-receive-offload on.
std::vector<OffloadWarning> kernel_offload_warnings(const std::string& device);

// Logs kernel_offload_warnings(device) as event=port_offload_warning lines for `port`.
void warn_kernel_offloads(const std::string& port, const std::string& device);

// One thread as /proc/<pid>/task/<tid>/stat shows it.
struct ThreadSample {
  pid_t pid = 0;
  pid_t tid = 0;
  std::string comm;
  int processor = -1;  // the CPU it last ran on (field 39)
  uint64_t ticks = 0;  // utime + stime, in clock ticks
};

// Every thread under `proc` ("/proc", or a fake tree for tests). Unreadable entries (a thread
// that just ended) are skipped.
std::vector<ThreadSample> read_thread_samples(const std::string& proc);

// A thread of another process that kept a worker's CPU busy.
struct BusyThread {
  pid_t pid = 0;
  pid_t tid = 0;
  std::string comm;  // the thread's name (a DPDK lcore: "lcore-worker-N")
  int cpu = -1;
  double busy = 0;   // fraction of the interval it ran
};

// The threads in `after` not of process `self` that ran at least half of `interval_ticks`
// since `before`, last ran on one of `cpus`, and may run only on CPUs of `cpus` (their
// Cpus_allowed_list under `proc`): pinned there, as DPDK pins its lcores, so the scheduler
// cannot move them off a worker's CPU and the two share it for as long as both run. An unpinned
// busy thread is left out: the scheduler moves it away from a pinned poller.
std::vector<BusyThread> busy_threads_on(const std::vector<ThreadSample>& before,
                                        const std::vector<ThreadSample>& after,
                                        uint64_t interval_ticks, const cpu_set_t& cpus,
                                        pid_t self, const std::string& proc);

// Samples /proc twice, kSharedCpuSampleMs apart, and logs event=worker_cpu_shared for each
// busy thread of another process on `worker_cpus`: a polling worker sharing its CPU gets a
// fraction of it, and cycles per packet grow by orders of magnitude.
inline constexpr uint32_t kSharedCpuSampleMs = 100;
void warn_shared_worker_cpus(const cpu_set_t& worker_cpus);

}  // namespace meshgate::ctl
