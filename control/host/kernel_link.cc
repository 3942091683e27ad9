#include "control/host/kernel_link.h"

#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace meshgate::ctl {
namespace {

// An rtnetlink request: header, family message, attributes, in one aligned buffer.
class NetlinkRequest {
 public:
  NetlinkRequest(uint16_t type, uint16_t flags, const void* body, size_t len) {
    auto* h = header();
    h->nlmsg_type = type;
    h->nlmsg_flags = uint16_t(NLM_F_REQUEST | NLM_F_ACK | flags);
    h->nlmsg_seq = 1;
    h->nlmsg_len = uint32_t(NLMSG_LENGTH(len));
    std::memcpy(NLMSG_DATA(h), body, len);
  }
  void attr(uint16_t type, const void* data, size_t len) {
    auto* h = header();
    auto* a = reinterpret_cast<rtattr*>(buf_ + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = type;
    a->rta_len = uint16_t(RTA_LENGTH(len));
    std::memcpy(RTA_DATA(a), data, len);
    h->nlmsg_len = uint32_t(NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len));
  }
  // Sends the request and waits for the kernel's acknowledgement: "" or its error.
  std::string send() {
    const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return std::string("netlink socket: ") + std::strerror(errno);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    std::string err;
    if (sendto(fd, buf_, header()->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) < 0) {
      err = std::string("netlink send: ") + std::strerror(errno);
    } else {
      alignas(nlmsghdr) char reply[4096];
      const ssize_t n = recv(fd, reply, sizeof reply, 0);
      const auto* r = reinterpret_cast<const nlmsghdr*>(reply);
      if (n < 0) {
        err = std::string("netlink receive: ") + std::strerror(errno);
      } else if (!NLMSG_OK(r, size_t(n)) || r->nlmsg_type != NLMSG_ERROR) {
        err = "netlink: unexpected answer";
      } else if (const int e = static_cast<const nlmsgerr*>(NLMSG_DATA(r))->error; e != 0) {
        err = std::strerror(-e);
      }
    }
    close(fd);
    return err;
  }

 private:
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_); }
  alignas(nlmsghdr) char buf_[256] = {};
};

}  // namespace

int interface_index(const std::string& name) { return int(if_nametoindex(name.c_str())); }

std::string add_interface_address(int ifindex, const IpPrefix& prefix) {
  const bool v4 = prefix.addr.is_v4();
  ifaddrmsg msg{};
  msg.ifa_family = uint8_t(v4 ? AF_INET : AF_INET6);
  msg.ifa_prefixlen = prefix.len;
  msg.ifa_scope = RT_SCOPE_UNIVERSE;
  msg.ifa_index = uint32_t(ifindex);
  NetlinkRequest req(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, &msg, sizeof msg);
  const uint8_t* a = v4 ? prefix.addr.v4_ptr() : prefix.addr.b;
  const size_t alen = v4 ? 4 : 16;
  req.attr(IFA_LOCAL, a, alen);
  req.attr(IFA_ADDRESS, a, alen);
  if (v4 && prefix.len < 31) {
    // The subnet's broadcast address, as `ip addr add ... brd +` sets it.
    uint8_t brd[4];
    std::memcpy(brd, a, 4);
    for (uint32_t bit = prefix.len; bit < 32; ++bit) brd[bit / 8] |= uint8_t(0x80 >> (bit % 8));
    req.attr(IFA_BROADCAST, brd, 4);
  }
  if (!v4) {
    const uint32_t flags = IFA_F_NODAD;
    req.attr(IFA_FLAGS, &flags, sizeof flags);
  }
  const std::string err = req.send();
  return err.empty() ? "" : "cannot add address " + prefix.str() + ": " + err;
}

std::string set_interface_sysctl(const std::string& family, const std::string& name,
                                 const std::string& key, const std::string& value) {
  const std::string path = "/proc/sys/net/" + family + "/conf/" + name + "/" + key;
  std::ofstream f(path);
  f << value << "\n";
  f.flush();
  if (!f) return "cannot write " + path;
  return "";
}

}  // namespace meshgate::ctl
