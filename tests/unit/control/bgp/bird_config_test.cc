// The BGP daemon's generated config (control/bgp/bird_config.h): the sessions a [bgp] table
// asks for and the VIPs to announce; and that BIRD 2 itself accepts the text (bird -p parses a
// config and exits).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "control/bgp/bird_config.h"
#include "control/config/config.h"

namespace meshgate::ctl {
namespace {

IpAddr A(const char* s) { return *IpAddr::parse(s); }

Config fleet_config(const char* extra_peer = "") {
  const std::string toml = std::string(R"([[port]]
name = "lan"
device = "net_null0"
addresses = ["192.0.2.1/24", "2001:db8:2::1/64"]
host_interface = "mgh"
[bgp]
local_as = 65001
hold_time_s = 6
  [[bgp.peer]]
  address = "192.0.2.254"
  remote_as = 65000
  password = "s3cret"
  [[bgp.peer]]
  address = "2001:db8:2::fe"
  remote_as = 65000
)") + extra_peer;
  auto c = parse_config(toml, "config.toml");
  if (!c) throw std::runtime_error(c.error().str());
  return c.value();
}

TEST(BgpPlan, sessions_take_the_port_address_and_twin_of_their_prefix) {
  auto plan = bgp_plan(fleet_config());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->router_id, A("192.0.2.1"));  // the first IPv4 port address
  ASSERT_EQ(plan->sessions.size(), 2u);
  EXPECT_EQ(plan->sessions[0].name, "peer0");
  EXPECT_EQ(plan->sessions[0].local, A("192.0.2.1"));
  EXPECT_EQ(plan->sessions[0].interface, "mgh");
  EXPECT_EQ(plan->sessions[1].local, A("2001:db8:2::1"));
  EXPECT_EQ(plan->hold_time_s, 6u);
}

TEST(BirdConfig, announces_each_vip_of_its_family_to_the_peers_of_that_family) {
  auto plan = bgp_plan(fleet_config());
  ASSERT_TRUE(plan);
  const std::string c = bird_config(
      *plan, {A("203.0.113.20"), A("203.0.113.10"), A("2001:db8:100::10"), A("203.0.113.10")});
  EXPECT_NE(c.find("router id 192.0.2.1;"), std::string::npos);
  // Sorted, each once, /32 and /128.
  const size_t a = c.find("route 203.0.113.10/32 blackhole;");
  const size_t b = c.find("route 203.0.113.20/32 blackhole;");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_LT(a, b);
  EXPECT_EQ(c.find("route 203.0.113.10/32", a + 1), std::string::npos);
  EXPECT_NE(c.find("route 2001:db8:100::10/128 blackhole;"), std::string::npos);
  EXPECT_NE(c.find("protocol bgp peer0 {\n  local 192.0.2.1 as 65001;\n  neighbor 192.0.2.254 as "
                   "65000;\n  interface \"mgh\";\n  direct;\n  hold time 6;\n  keepalive time 2;"),
            std::string::npos)
      << c;
  EXPECT_NE(c.find("password \"s3cret\";"), std::string::npos);
  EXPECT_NE(c.find("ipv4 { import none; export where proto = \"vips4\"; next hop self; };"),
            std::string::npos);
  EXPECT_NE(c.find("ipv6 { import none; export where proto = \"vips6\"; next hop self; };"),
            std::string::npos);
}

TEST(BirdConfig, nothing_to_announce_leaves_the_static_protocols_empty) {
  auto plan = bgp_plan(fleet_config());
  ASSERT_TRUE(plan);
  const std::string c = bird_config(*plan, {});
  EXPECT_EQ(c.find("route "), std::string::npos);
  EXPECT_NE(c.find("protocol static vips4 {\n  ipv4;\n}"), std::string::npos) << c;
}

TEST(BirdConfig, bird_accepts_what_it_is_given) {
  ASSERT_EQ(access("/usr/sbin/bird", X_OK), 0) << "bird2 is not installed (tools/setup.sh)";
  auto plan = bgp_plan(fleet_config());
  ASSERT_TRUE(plan);
  char dir[] = "/tmp/mg-bird-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/bird.conf";
  for (const auto& vips : {std::vector<IpAddr>{}, std::vector<IpAddr>{A("203.0.113.10"),
                                                                      A("2001:db8:100::10")}}) {
    std::ofstream(path) << bird_config(*plan, vips);
    const std::string cmd = "/usr/sbin/bird -p -c " + path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    std::string out;
    while (fgets(buf, sizeof buf, p)) out += buf;
    EXPECT_EQ(pclose(p), 0) << out;
  }
  unlink(path.c_str());
  rmdir(dir);
}

// [bgp.peer] password's limit (config.h) is the kernel's: BIRD hands the key to TCP_MD5SIG and
// leaves the session down when it is refused.
TEST(BirdConfig, the_kernel_takes_an_md5_key_of_the_longest_password_and_no_longer) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  auto set_key = [&](size_t len) {
    tcp_md5sig md5{};
    auto* peer = reinterpret_cast<sockaddr_in*>(&md5.tcpm_addr);
    peer->sin_family = AF_INET;
    inet_pton(AF_INET, "192.0.2.254", &peer->sin_addr);
    md5.tcpm_keylen = uint16_t(len);
    std::memset(md5.tcpm_key, 'k', std::min<size_t>(len, sizeof md5.tcpm_key));
    return setsockopt(fd, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof md5) == 0 ? 0 : errno;
  };
  EXPECT_EQ(set_key(kMaxBgpPasswordBytes), 0) << std::strerror(set_key(kMaxBgpPasswordBytes));
  EXPECT_EQ(set_key(kMaxBgpPasswordBytes + 1), EINVAL);
  close(fd);
}

}  // namespace
}  // namespace meshgate::ctl
