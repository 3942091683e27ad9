// Config warnings: valid configs that cannot work as written, each at its key's position.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "control/config/config.h"

namespace meshgate::ctl {
namespace {

constexpr const char* kFile = "config.toml";

Config parse_ok(std::string_view text) {
  auto r = parse_config(text, kFile);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? std::move(r).value() : Config{};
}

// One port on 198.51.100.0/24 and 2001:db8:1::/64, a service at line 6 whose backend follows
// (the first backend's address is on line 12).
std::string service_with(std::string_view routes, std::string_view backend_address,
                         std::string_view vip = "203.0.113.10") {
  std::string text = R"([[port]]
name = "net0"
device = "net_null0"
addresses = ["198.51.100.1/24", "2001:db8:1::1/64"]

[[service]]
name = "web"
)";
  text += "vip = \"" + std::string(vip) + "\"\nport = 80\n\n  [[service.backend]]\n";
  text += "  address = \"" + std::string(backend_address) + "\"\n  port = 8080\n";
  return text + std::string(routes);
}

TEST(ConfigWarnings, ABackendNoPortPrefixAndNoRouteReachesIsWarnedAtItsAddressKey) {
  const Config c = parse_ok(service_with("", "192.0.2.20"));
  const auto w = config_warnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].key, "service[0].backend[0].address");
  EXPECT_EQ(w[0].pos.file, kFile);
  EXPECT_EQ(w[0].pos.line, 12u);
  EXPECT_EQ(w[0].pos.column, 13u);
  EXPECT_EQ(w[0].str(),
            "config.toml:12:13: service[0].backend[0].address: backend 192.0.2.20 of service "
            "'web' is on no port's prefix and no [[route]] covers it: its packets would be "
            "dropped as no_route (add a [[route]] whose prefix holds it)");
}

TEST(ConfigWarnings, ABackendOnAPortPrefixOrCoveredByARouteIsNotWarned) {
  EXPECT_TRUE(config_warnings(parse_ok(service_with("", "198.51.100.20"))).empty());
  EXPECT_TRUE(config_warnings(parse_ok(service_with("", "2001:db8:1::20", "2001:db8:9::10"))).empty());
  const std::string route = R"(
[[route]]
prefix = "192.0.2.0/24"
via = "198.51.100.254"
)";
  EXPECT_TRUE(config_warnings(parse_ok(service_with(route, "192.0.2.20"))).empty());
  const std::string default_route = R"(
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
)";
  EXPECT_TRUE(config_warnings(parse_ok(service_with(default_route, "192.0.2.20"))).empty());
}

// An IPv4 default route does not carry IPv6: a v6 backend beyond the port's prefix is warned.
TEST(ConfigWarnings, ARouteOfTheOtherFamilyDoesNotCoverABackend) {
  const std::string default_route = R"(
[[route]]
prefix = "0.0.0.0/0"
via = "198.51.100.254"
)";
  const auto w = config_warnings(parse_ok(service_with(default_route, "2001:db8:2::20", "2001:db8:9::10")));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].key, "service[0].backend[0].address");
}

}  // namespace
}  // namespace meshgate::ctl
