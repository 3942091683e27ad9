// GET /flows filters: parsing the query parameters (each bad value a message naming the
// parameter and what it expects) and matching copied flows by service, backend (with or
// without port, IPv6 bracketed), state (TCP states and the other protocols, any case) and
// client prefix.
#include "control/admin/flow_filter.h"

#include <gtest/gtest.h>

namespace meshgate::ctl {
namespace {

using Params = std::multimap<std::string, std::string>;

dp::FlowRecord flow(const char* client, const char* backend, uint16_t backend_port, uint8_t proto,
                    dp::TcpState state) {
  dp::FlowRecord r;
  r.client = *IpAddr::parse(client);
  r.client_port = 40000;
  r.backend = *IpAddr::parse(backend);
  r.backend_port = backend_port;
  r.proto = proto;
  r.state = state;
  return r;
}

FlowFilter parse(const Params& p) {
  auto f = parse_flow_filter(p);
  EXPECT_TRUE(f.ok()) << f.error().message;
  return f.ok() ? f.value() : FlowFilter{};
}

TEST(FlowFilter, NoParametersMatchEveryFlow) {
  const FlowFilter f = parse({{"limit", "5"}});
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(flow_matches(f, flow("192.0.2.2", "198.51.100.11", 8080, 17, dp::TcpState::kNone), ""));
  EXPECT_EQ(flow_filter_json(f), nlohmann::json::object());
}

TEST(FlowFilter, ServiceMatchesTheFlowsServiceName) {
  const FlowFilter f = parse({{"service", "web"}});
  const auto r = flow("192.0.2.2", "198.51.100.11", 8080, 6, dp::TcpState::kEstablished);
  EXPECT_TRUE(flow_matches(f, r, "web"));
  EXPECT_FALSE(flow_matches(f, r, "web6"));
  EXPECT_FALSE(flow_matches(f, r, ""));
}

TEST(FlowFilter, BackendMatchesTheAddressAndThePortWhenGiven) {
  const auto r = flow("192.0.2.2", "198.51.100.11", 8080, 6, dp::TcpState::kEstablished);
  EXPECT_TRUE(flow_matches(parse({{"backend", "198.51.100.11"}}), r, ""));
  EXPECT_TRUE(flow_matches(parse({{"backend", "198.51.100.11:8080"}}), r, ""));
  EXPECT_FALSE(flow_matches(parse({{"backend", "198.51.100.11:8081"}}), r, ""));
  EXPECT_FALSE(flow_matches(parse({{"backend", "198.51.100.12"}}), r, ""));
  const auto r6 = flow("2001:db8:2::2", "2001:db8:1::11", 8080, 6, dp::TcpState::kSynSent);
  EXPECT_TRUE(flow_matches(parse({{"backend", "2001:db8:1::11"}}), r6, ""));
  EXPECT_TRUE(flow_matches(parse({{"backend", "[2001:db8:1::11]:8080"}}), r6, ""));
  EXPECT_FALSE(flow_matches(parse({{"backend", "[2001:db8:1::11]:80"}}), r6, ""));
  EXPECT_EQ(flow_filter_json(parse({{"backend", "[2001:db8:1::11]:8080"}})),
            nlohmann::json({{"backend", "[2001:db8:1::11]:8080"}}));
}

TEST(FlowFilter, StateIsATcpStateOrTheProtocolInAnyCase) {
  const auto est = flow("192.0.2.2", "198.51.100.11", 8080, 6, dp::TcpState::kEstablished);
  const auto tw = flow("192.0.2.2", "198.51.100.11", 8080, 6, dp::TcpState::kTimeWait);
  const auto udp = flow("192.0.2.2", "198.51.100.11", 53, 17, dp::TcpState::kNone);
  const FlowFilter e = parse({{"state", "established"}});
  EXPECT_EQ(e.state, "ESTABLISHED");
  EXPECT_TRUE(flow_matches(e, est, ""));
  EXPECT_FALSE(flow_matches(e, tw, ""));
  EXPECT_FALSE(flow_matches(e, udp, ""));
  EXPECT_TRUE(flow_matches(parse({{"state", "TIME_WAIT"}}), tw, ""));
  EXPECT_TRUE(flow_matches(parse({{"state", "Udp"}}), udp, ""));
  EXPECT_FALSE(flow_matches(parse({{"state", "UDP"}}), est, ""));
}

TEST(FlowFilter, ClientMatchesAPrefixOrOneAddress) {
  const auto r = flow("192.0.2.130", "198.51.100.11", 8080, 6, dp::TcpState::kEstablished);
  EXPECT_TRUE(flow_matches(parse({{"client", "192.0.2.128/25"}}), r, ""));
  EXPECT_TRUE(flow_matches(parse({{"client", "192.0.2.130"}}), r, ""));
  EXPECT_FALSE(flow_matches(parse({{"client", "192.0.2.0/25"}}), r, ""));
  EXPECT_FALSE(flow_matches(parse({{"client", "2001:db8::/32"}}), r, ""));
  // Host bits are ignored: 192.0.2.1/24 is 192.0.2.0/24.
  const FlowFilter h = parse({{"client", "192.0.2.1/24"}});
  EXPECT_TRUE(flow_matches(h, r, ""));
  EXPECT_EQ(flow_filter_json(h), nlohmann::json({{"client", "192.0.2.0/24"}}));
}

TEST(FlowFilter, AllFiltersMustMatch) {
  const FlowFilter f = parse({{"service", "web"}, {"backend", "198.51.100.11"},
                              {"state", "ESTABLISHED"}, {"client", "192.0.2.0/24"}});
  const auto r = flow("192.0.2.2", "198.51.100.11", 8080, 6, dp::TcpState::kEstablished);
  EXPECT_TRUE(flow_matches(f, r, "web"));
  EXPECT_FALSE(flow_matches(f, r, "dns"));
  EXPECT_FALSE(flow_matches(f, flow("192.0.3.2", "198.51.100.11", 8080, 6, dp::TcpState::kEstablished), "web"));
}

TEST(FlowFilter, BadValuesNameTheParameterAndWhatItExpects) {
  const std::vector<std::pair<Params, std::string>> cases = {
      {{{"service", ""}}, "service: expected a service name, got \"\""},
      {{{"backend", "web"}}, "backend: expected IP, IP:PORT or [IPv6]:PORT, got \"web\""},
      {{{"backend", "198.51.100.11:0"}}, "backend: expected IP, IP:PORT or [IPv6]:PORT"},
      {{{"backend", "198.51.100.11:"}}, "backend: expected"},
      {{{"backend", "[2001:db8::1]:99999"}}, "backend: expected"},
      {{{"state", "open"}}, "state: expected one of SYN_SENT, SYN_RECV, ESTABLISHED, FIN_WAIT, "
                            "CLOSE_WAIT, LAST_ACK, TIME_WAIT, CLOSE, UDP, ICMP, ICMPV6, OTHER, got \"open\""},
      {{{"client", "192.0.2.0/33"}}, "client: expected IP or IP/PREFIX, got \"192.0.2.0/33\""},
      {{{"client", "10/8"}}, "client: expected IP or IP/PREFIX"},
      {{{"service", "a"}, {"service", "b"}}, "service: given more than once"},
  };
  for (const auto& [params, message] : cases) {
    const auto f = parse_flow_filter(params);
    ASSERT_FALSE(f.ok()) << message;
    EXPECT_EQ(f.error().message.rfind(message, 0), 0u) << f.error().message;
  }
}

}  // namespace
}  // namespace meshgate::ctl
