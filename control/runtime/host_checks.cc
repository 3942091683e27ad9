#include "control/runtime/host_checks.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/net_namespace.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <pcap/pcap.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "control/common/log.h"

namespace meshgate::ctl {

std::string check_pcap_input(const std::string& path) {
  // O_NONBLOCK: a FIFO without a writer must not block the open.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::strerror(errno);
  struct stat st{};
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  close(fd);
  if (!regular) return S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file";
  char err[PCAP_ERRBUF_SIZE] = "";
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  if (!p) return std::string("not a pcap capture (libpcap: ") + err + ")";
  pcap_close(p);
  return "";
}

namespace {

// The interface net_af_packet opens ("net_af_packet0,iface=veth1,qpairs=1" -> "veth1"), or "".
std::string af_packet_iface(const std::string& device) {
  const std::string_view d(device);
  const std::string_view name = d.substr(0, d.find(','));
  if (name.rfind("net_af_packet", 0) != 0 && name.rfind("eth_af_packet", 0) != 0) return "";
  size_t at = d.find(',');
  while (at != std::string_view::npos) {
    const size_t start = at + 1;
    at = d.find(',', start);
    const std::string_view kv =
        d.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start);
    if (kv.rfind("iface=", 0) == 0) return std::string(kv.substr(6));
  }
  return "";
}

// The offloads of `ifname` (in the calling thread's network namespace) that are on, by the
// legacy ethtool get commands: each still answers for its group of feature bits.
std::vector<std::string> offloads_on(const std::string& ifname) {
  struct Feature {
    uint32_t cmd;
    const char* name;
  };
  static constexpr Feature kFeatures[] = {{ETHTOOL_GTXCSUM, "tx-checksumming"},
                                          {ETHTOOL_GTSO, "tcp-segmentation-offload"},
                                          {ETHTOOL_GGRO, "generic-receive-offload"}};
  std::vector<std::string> on;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ifname.size() >= IFNAMSIZ) {
    if (fd >= 0) close(fd);
    return on;
  }
  for (const Feature& f : kFeatures) {
    ethtool_value v{};
    v.cmd = f.cmd;
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
    ifr.ifr_data = reinterpret_cast<char*>(&v);
    if (ioctl(fd, SIOCETHTOOL, &ifr) == 0 && v.data) on.emplace_back(f.name);
  }
  close(fd);
  return on;
}

// One rtnetlink request and its single answer (a GET of one object): the answer's payload
// after `hdr_len` bytes of family header as (type, value) attributes, or nullopt.
struct NlAttrs {
  std::optional<uint32_t> link;   // IFLA_LINK: a veth's peer ifindex
  std::optional<int32_t> netnsid; // IFLA_LINK_NETNSID / NETNSA_NSID
  std::string kind;               // IFLA_LINKINFO / IFLA_INFO_KIND
};

std::optional<NlAttrs> netlink_get(uint16_t type, const void* body, size_t body_len,
                                   uint16_t attr_type, const void* attr, size_t attr_len) {
  alignas(nlmsghdr) char req[256] = {};
  auto* h = reinterpret_cast<nlmsghdr*>(req);
  h->nlmsg_type = type;
  h->nlmsg_flags = NLM_F_REQUEST;
  h->nlmsg_seq = 1;
  h->nlmsg_len = uint32_t(NLMSG_LENGTH(body_len));
  std::memcpy(NLMSG_DATA(h), body, body_len);
  if (attr) {
    auto* a = reinterpret_cast<rtattr*>(req + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = attr_type;
    a->rta_len = uint16_t(RTA_LENGTH(attr_len));
    std::memcpy(RTA_DATA(a), attr, attr_len);
    h->nlmsg_len = uint32_t(NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len));
  }
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return std::nullopt;
  // The kernel answers a GET at once; the timeout only bounds a kernel that never does.
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  alignas(nlmsghdr) char reply[16384];
  ssize_t n = -1;
  if (sendto(fd, req, h->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) >= 0) {
    n = recv(fd, reply, sizeof reply, 0);
  }
  close(fd);
  const auto* r = reinterpret_cast<const nlmsghdr*>(reply);
  if (n <= 0 || !NLMSG_OK(r, size_t(n)) || r->nlmsg_type == NLMSG_ERROR) return std::nullopt;
  NlAttrs out;
  const size_t hdr = type == RTM_GETLINK ? sizeof(ifinfomsg) : sizeof(rtgenmsg);
  if (r->nlmsg_len < NLMSG_LENGTH(hdr)) return std::nullopt;
  int len = int(r->nlmsg_len - NLMSG_LENGTH(hdr));
  const auto* a = reinterpret_cast<const rtattr*>(
      static_cast<const char*>(NLMSG_DATA(r)) + NLMSG_ALIGN(hdr));
  for (; RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    const size_t plen = RTA_PAYLOAD(a);
    if (type == RTM_GETLINK) {
      if (a->rta_type == IFLA_LINK && plen >= 4) out.link = *static_cast<const uint32_t*>(RTA_DATA(a));
      if (a->rta_type == IFLA_LINK_NETNSID && plen >= 4) {
        out.netnsid = *static_cast<const int32_t*>(RTA_DATA(a));
      }
      if (a->rta_type == IFLA_LINKINFO) {
        int ilen = int(plen);
        for (auto* i = static_cast<const rtattr*>(RTA_DATA(a)); RTA_OK(i, ilen);
             i = RTA_NEXT(i, ilen)) {
          if (i->rta_type == IFLA_INFO_KIND) {
            out.kind.assign(static_cast<const char*>(RTA_DATA(i)),
                            strnlen(static_cast<const char*>(RTA_DATA(i)), RTA_PAYLOAD(i)));
          }
        }
      }
    } else if (a->rta_type == NETNSA_NSID && plen >= 4) {
      out.netnsid = *static_cast<const int32_t*>(RTA_DATA(a));
    }
  }
  return out;
}

std::optional<NlAttrs> link_of(int ifindex) {
  ifinfomsg msg{};
  msg.ifi_family = AF_UNSPEC;
  msg.ifi_index = ifindex;
  return netlink_get(RTM_GETLINK, &msg, sizeof msg, 0, nullptr, 0);
}

// The named network namespace (ip netns, /var/run/netns/NAME) whose id in ours is `nsid`, with
// an open descriptor for it (the caller closes it); {"", -1} when none is.
std::pair<std::string, int> named_netns(int32_t nsid) {
  const std::string dir = "/var/run/netns";
  DIR* d = opendir(dir.c_str());
  if (!d) return {"", -1};
  std::pair<std::string, int> found{"", -1};
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = open((dir + "/" + e->d_name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    rtgenmsg msg{};
    msg.rtgen_family = AF_UNSPEC;
    const uint32_t nsfd = uint32_t(fd);
    auto id = netlink_get(RTM_GETNSID, &msg, sizeof msg, NETNSA_FD, &nsfd, sizeof nsfd);
    if (id && id->netnsid && *id->netnsid == nsid) {
      found = {e->d_name, fd};
      break;
    }
    close(fd);
  }
  closedir(d);
  return found;
}

std::string ethtool_hint(const std::string& iface, const std::string& netns) {
  return (netns.empty() ? "" : "ip netns exec " + netns + " ") + "ethtool -K " + iface +
         " tx off rx off tso off gso off gro off";
}

}  // namespace

std::vector<OffloadWarning> kernel_offload_warnings(const std::string& device) {
  std::vector<OffloadWarning> out;
  const std::string iface = af_packet_iface(device);
  if (iface.empty()) return out;
  const int ifindex = int(if_nametoindex(iface.c_str()));
  if (ifindex == 0) return out;  // a missing interface is the device check's error
  OffloadWarning local{iface, "", "port", offloads_on(iface), false, ethtool_hint(iface, "")};
  const auto link = link_of(ifindex);
  if (link && link->kind == "veth" && link->link && *link->link != 0) {
    const int peer = int(*link->link);
    if (!link->netnsid) {
      char name[IF_NAMESIZE] = "";
      if (if_indextoname(unsigned(peer), name)) {
        const std::vector<std::string> on = offloads_on(name);
        if (!on.empty()) out.push_back({name, "", "peer", on, false, ethtool_hint(name, "")});
      }
    } else {
      auto [ns, fd] = named_netns(*link->netnsid);
      bool known = false;
      if (fd >= 0) {
        // setns changes only the calling thread's namespace: a short-lived thread enters the
        // peer's, so the control thread never leaves the gateway's.
        OffloadWarning w{"", ns, "peer", {}, false, ""};
        std::thread t([&, fd = fd] {
          if (setns(fd, CLONE_NEWNET) != 0) return;
          char name[IF_NAMESIZE] = "";
          if (!if_indextoname(unsigned(peer), name)) return;
          w.iface = name;
          w.features = offloads_on(name);
          known = true;
        });
        t.join();
        close(fd);
        if (known && !w.features.empty()) {
          w.hint = ethtool_hint(w.iface, ns);
          out.push_back(std::move(w));
        }
      }
      // Offloads left on at this end suggest nobody turned them off at the other either.
      local.peer_unknown = !known && !local.features.empty();
    }
  }
  if (!local.features.empty()) out.insert(out.begin(), std::move(local));
  return out;
}

void warn_kernel_offloads(const std::string& port, const std::string& device) {
  for (const OffloadWarning& w : kernel_offload_warnings(device)) {
    std::string features;
    for (const std::string& f : w.features) features += (features.empty() ? "" : ",") + f;
    log(LogLevel::kWarn, "port_offload_warning",
        "port=%s iface=%s%s%s role=%s feature=%s hint=\"%s\" warning=\"kernel offloads on "
        "a net_af_packet port's link hand it frames unlike the wire's (TCP/UDP checksums left "
        "for a NIC, merged segments): turn them off%s\"",
        port.c_str(), w.iface.c_str(), w.netns.empty() ? "" : " netns=", w.netns.c_str(),
        w.role.c_str(), features.c_str(), w.hint.c_str(),
        w.peer_unknown ? ", and on the veth peer in its other network namespace too" : "");
  }
}

namespace {

bool all_digits(const char* s) {
  if (!*s) return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
  }
  return true;
}

std::vector<std::string> numeric_entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (all_digits(e->d_name)) out.emplace_back(e->d_name);
  }
  closedir(d);
  return out;
}

// proc(5) stat: "tid (comm) state ppid ...": comm may hold spaces and parentheses, so the
// fields are counted from the last ')'; utime and stime are fields 14 and 15, processor 39.
bool parse_stat(const std::string& line, ThreadSample* out) {
  const size_t open_paren = line.find('(');
  const size_t close_paren = line.rfind(')');
  if (open_paren == std::string::npos || close_paren == std::string::npos ||
      close_paren < open_paren) {
    return false;
  }
  out->comm = line.substr(open_paren + 1, close_paren - open_paren - 1);
  std::istringstream rest(line.substr(close_paren + 1));
  std::string field;
  uint64_t utime = 0, stime = 0;
  bool have_processor = false;
  for (int n = 3; rest >> field; ++n) {
    if (n == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (n == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
    if (n == 39) {
      out->processor = std::atoi(field.c_str());
      have_processor = true;
      break;
    }
  }
  out->ticks = utime + stime;
  return have_processor;
}

// "0-3,8,10-11" (Cpus_allowed_list) into a set; false when it does not parse.
bool parse_cpu_list(const std::string& s, cpu_set_t* out) {
  CPU_ZERO(out);
  std::istringstream in(s);
  std::string part;
  bool any = false;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    char* end = nullptr;
    const long lo = std::strtol(part.c_str(), &end, 10);
    long hi = lo;
    if (*end == '-') hi = std::strtol(end + 1, &end, 10);
    if (lo < 0 || hi < lo || hi >= CPU_SETSIZE) return false;
    for (long c = lo; c <= hi; ++c) CPU_SET(int(c), out);
    any = true;
  }
  return any;
}

// The CPUs a thread may run on, from its status file; nullopt when unreadable.
std::optional<cpu_set_t> allowed_cpus(const std::string& proc, pid_t pid, pid_t tid) {
  std::ifstream f(proc + "/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  std::string line;
  constexpr std::string_view kKey = "Cpus_allowed_list:";
  while (std::getline(f, line)) {
    if (line.rfind(kKey, 0) != 0) continue;
    const size_t at = line.find_first_not_of(" \t", kKey.size());
    cpu_set_t set;
    if (at != std::string::npos && parse_cpu_list(line.substr(at), &set)) return set;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::vector<ThreadSample> read_thread_samples(const std::string& proc) {
  std::vector<ThreadSample> out;
  for (const std::string& pid : numeric_entries(proc)) {
    const std::string task = proc + "/" + pid + "/task";
    for (const std::string& tid : numeric_entries(task)) {
      std::ifstream f(task + "/" + tid + "/stat");
      std::string line;
      ThreadSample t;
      if (!std::getline(f, line) || !parse_stat(line, &t)) continue;
      t.pid = pid_t(std::atoi(pid.c_str()));
      t.tid = pid_t(std::atoi(tid.c_str()));
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<BusyThread> busy_threads_on(const std::vector<ThreadSample>& before,
                                        const std::vector<ThreadSample>& after,
                                        uint64_t interval_ticks, const cpu_set_t& cpus,
                                        pid_t self, const std::string& proc) {
  std::vector<BusyThread> out;
  if (interval_ticks == 0) return out;
  std::map<pid_t, uint64_t> earlier;
  for (const ThreadSample& t : before) earlier[t.tid] = t.ticks;
  for (const ThreadSample& t : after) {
    if (t.pid == self || t.processor < 0 || t.processor >= CPU_SETSIZE ||
        !CPU_ISSET(t.processor, &cpus)) {
      continue;
    }
    const auto it = earlier.find(t.tid);
    if (it == earlier.end() || t.ticks < it->second) continue;
    const uint64_t ran = t.ticks - it->second;
    if (ran * 2 < interval_ticks) continue;
    const auto allowed = allowed_cpus(proc, t.pid, t.tid);
    if (!allowed) continue;
    cpu_set_t outside;
    CPU_XOR(&outside, &*allowed, &cpus);
    CPU_AND(&outside, &outside, &*allowed);
    if (CPU_COUNT(&outside) != 0) continue;
    out.push_back({t.pid, t.tid, t.comm, t.processor, double(ran) / double(interval_ticks)});
  }
  return out;
}

void warn_shared_worker_cpus(const cpu_set_t& worker_cpus) {
  const std::string proc = "/proc";
  const long hz = sysconf(_SC_CLK_TCK);
  const auto before = read_thread_samples(proc);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(kSharedCpuSampleMs));
  const auto after = read_thread_samples(proc);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto interval = uint64_t(seconds * double(hz > 0 ? hz : 100));
  for (const BusyThread& b : busy_threads_on(before, after, interval, worker_cpus, getpid(), proc)) {
    log(LogLevel::kWarn, "worker_cpu_shared",
        "cpu=%d pid=%d tid=%d comm=\"%s\" busy=%.2f warning=\"another process's thread pinned to "
        "this worker CPU keeps it busy: the worker gets a share of the core, and cycles per "
        "packet and latency grow by orders of magnitude; give each its own CPUs (EAL -l / "
        "--lcores after --, or [gateway] workers)\"",
        b.cpu, int(b.pid), int(b.tid), b.comm.c_str(), b.busy);
  }
}

}  // namespace meshgate::ctl
