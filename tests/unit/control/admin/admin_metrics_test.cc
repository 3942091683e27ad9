// GET /metrics formatting: label and HELP escaping, every drop reason present, per-worker
// counters summed, and a page where every line is a HELP, a TYPE or a sample of the family
// declared just before (what Prometheus' text parser requires).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "control/admin/prometheus.h"
#include "dataplane/drop_reasons.h"

namespace meshgate::ctl {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// "name{labels} value" -> value, for the sample written exactly as `series`.
std::map<std::string, std::string> samples(const std::string& text) {
  std::map<std::string, std::string> m;
  for (const std::string& l : lines_of(text)) {
    if (l.empty() || l[0] == '#') continue;
    const auto sp = l.rfind(' ');
    m[l.substr(0, sp)] = l.substr(sp + 1);
  }
  return m;
}

struct TwoWorkers {
  dp::WorkerCounters a, b;
  MetricsInput in;
  TwoWorkers() {
    a.rx_packets = 10;
    b.rx_packets = 32;
    a.tx_packets = 7;
    b.tx_packets = 1;
    a.rx_bytes = 1000;
    b.rx_bytes = 24;
    a.drops[uint32_t(dp::Drop::kNoService)] = 3;
    b.drops[uint32_t(dp::Drop::kNoService)] = 4;
    b.drops[uint32_t(dp::Drop::kTxFull)] = 9;
    a.flows_active = 5;
    b.flows_active = 6;
    a.flows_established = 2;
    b.flows_established = 1;
    a.flows_created = 100;
    b.flows_created = 11;
    a.loops = 1000;
    b.loops = 2000;
    a.busy_cycles = 123;
    in.workers = {&a, &b};
    in.backends = {{"web", "198.51.100.11:8080", 40, 4000, 4, 9000},
                   {"web6", "[2001:db8:1::11]:8080", 2, 200, 1}};
    in.snapshot_version = 7;
    in.ready = true;
  }
  std::string text() const {
    PromWriter w;
    write_core_metrics(in, w);
    return w.text();
  }
};

TEST(PromEscape, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(prom_escape_label_value(R"(a\b"c)" "\n" "d"), R"(a\\b\"c\nd)");
  EXPECT_EQ(prom_escape_label_value("[2001:db8::1]:80"), "[2001:db8::1]:80");
  EXPECT_EQ(prom_escape_label_value(""), "");
}

TEST(PromEscape, HelpTextEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(prom_escape_help("a \"b\" \\ c\nd"), "a \"b\" \\\\ c\\nd");
}

TEST(PromEscape, NamesFollowTheDataModel) {
  EXPECT_TRUE(prom_valid_metric_name("meshgate_packets_total"));
  EXPECT_TRUE(prom_valid_metric_name("a:b_c9"));
  EXPECT_FALSE(prom_valid_metric_name("9lives"));
  EXPECT_FALSE(prom_valid_metric_name("meshgate-packets"));
  EXPECT_FALSE(prom_valid_metric_name(""));
  EXPECT_TRUE(prom_valid_label_name("reason"));
  EXPECT_FALSE(prom_valid_label_name("a:b"));
  EXPECT_FALSE(prom_valid_label_name("__name__"));
}

TEST(PromWriter, LabelValuesAreEscapedInSamples) {
  PromWriter w;
  w.family("meshgate_backend_packets_total", MetricType::kCounter, "help");
  w.sample({{"service", "we\"b\\\n"}, {"backend", "198.51.100.11:8080"}}, 5);
  EXPECT_EQ(w.text(),
            "# HELP meshgate_backend_packets_total help\n"
            "# TYPE meshgate_backend_packets_total counter\n"
            "meshgate_backend_packets_total{service=\"we\\\"b\\\\\\n\",backend=\"198.51.100.11:8080\"} 5\n");
}

TEST(PromWriter, IntegersAreExact) {
  PromWriter w;
  w.family("x_total", MetricType::kCounter, "h");
  w.sample(18446744073709551615ull);
  const auto s = samples(w.text());
  EXPECT_EQ(s.at("x_total"), "18446744073709551615");
}

TEST(PromWriterDeathTest, AFamilyIsDeclaredOnceAndCountersEndInTotal) {
  EXPECT_DEATH(
      {
        PromWriter w;
        w.family("meshgate_a_total", MetricType::kCounter, "h");
        w.family("meshgate_a_total", MetricType::kCounter, "h");
      },
      "");
  EXPECT_DEATH(
      {
        PromWriter w;
        w.family("meshgate_packets", MetricType::kCounter, "h");
      },
      "");
}

TEST(CoreMetrics, CountersAreSummedOverWorkers) {
  TwoWorkers t;
  const auto s = samples(t.text());
  EXPECT_EQ(s.at("meshgate_packets_total{direction=\"in\"}"), "42");
  EXPECT_EQ(s.at("meshgate_packets_total{direction=\"out\"}"), "8");
  EXPECT_EQ(s.at("meshgate_bytes_total{direction=\"in\"}"), "1024");
  EXPECT_EQ(s.at("meshgate_drops_total{reason=\"no_service\"}"), "7");
  EXPECT_EQ(s.at("meshgate_drops_total{reason=\"tx_full\"}"), "9");
  EXPECT_EQ(s.at("meshgate_flows_active"), "11");
  EXPECT_EQ(s.at("meshgate_flows_established"), "3");
  EXPECT_EQ(s.at("meshgate_flows_created_total"), "111");
  EXPECT_EQ(s.at("meshgate_flows_expired_total"), "0");
  EXPECT_EQ(s.at("meshgate_snapshot_version"), "7");
  EXPECT_EQ(s.at("meshgate_ready"), "1");
  EXPECT_EQ(s.at("meshgate_draining"), "0");
  // Per-worker series keep their worker label instead of being summed.
  EXPECT_EQ(s.at("meshgate_worker_loops_total{worker=\"0\"}"), "1000");
  EXPECT_EQ(s.at("meshgate_worker_loops_total{worker=\"1\"}"), "2000");
  EXPECT_EQ(s.at("meshgate_worker_busy_cycles_total{worker=\"0\"}"), "123");
  EXPECT_EQ(s.at("meshgate_worker_busy_cycles_total{worker=\"1\"}"), "0");
  EXPECT_EQ(s.at("meshgate_worker_packets_total{worker=\"1\"}"), "32");
  EXPECT_EQ(s.at("meshgate_backend_packets_total{service=\"web\",backend=\"198.51.100.11:8080\"}"),
            "40");
  EXPECT_EQ(s.at("meshgate_backend_flows_total{service=\"web6\",backend=\"[2001:db8:1::11]:8080\"}"),
            "1");
  // Bytes each way: to the backend as before, its replies in a family of their own.
  EXPECT_EQ(s.at("meshgate_backend_bytes_total{service=\"web\",backend=\"198.51.100.11:8080\"}"),
            "4000");
  EXPECT_EQ(
      s.at("meshgate_backend_reply_bytes_total{service=\"web\",backend=\"198.51.100.11:8080\"}"),
      "9000");
}

TEST(CoreMetrics, EachPortsOwnCountersAreAFamilyPerCounterWithAPortLabel) {
  TwoWorkers t;
  PortCounters up;
  up.name = "uplink";
  up.ipackets = 41302;  // 42 reached the workers: the port lost the rest before them
  up.opackets = 8;
  up.ibytes = 2478120;
  up.obytes = 480;
  up.imissed = 41260;
  up.ierrors = 1;
  up.oerrors = 2;
  up.rx_nombuf = 3;
  PortCounters down;
  down.name = "down\"link";
  t.in.ports = {up, down};
  const auto s = samples(t.text());
  EXPECT_EQ(s.at("meshgate_port_ipackets_total{port=\"uplink\"}"), "41302");
  EXPECT_EQ(s.at("meshgate_port_opackets_total{port=\"uplink\"}"), "8");
  EXPECT_EQ(s.at("meshgate_port_ibytes_total{port=\"uplink\"}"), "2478120");
  EXPECT_EQ(s.at("meshgate_port_obytes_total{port=\"uplink\"}"), "480");
  EXPECT_EQ(s.at("meshgate_port_imissed_total{port=\"uplink\"}"), "41260");
  EXPECT_EQ(s.at("meshgate_port_ierrors_total{port=\"uplink\"}"), "1");
  EXPECT_EQ(s.at("meshgate_port_oerrors_total{port=\"uplink\"}"), "2");
  EXPECT_EQ(s.at("meshgate_port_rx_nombuf_total{port=\"uplink\"}"), "3");
  EXPECT_EQ(s.at("meshgate_port_imissed_total{port=\"down\\\"link\"}"), "0");
  // The workers' own figure stays what they received.
  EXPECT_EQ(s.at("meshgate_packets_total{direction=\"in\"}"), "42");
}

TEST(CoreMetrics, EveryDropReasonHasASampleEvenWhenZero) {
  TwoWorkers t;
  const auto s = samples(t.text());
  size_t n = 0;
  for (const auto& [series, value] : s) n += series.starts_with("meshgate_drops_total{");
  EXPECT_EQ(n, dp::kNumDrops - 1) << "one sample per reason of drop_reasons.def, none for 'none'";
  for (uint32_t r = 1; r < dp::kNumDrops; ++r) {
    const std::string series = std::string("meshgate_drops_total{reason=\"") + dp::kDropNames[r] + "\"}";
    EXPECT_TRUE(s.count(series)) << series;
  }
  EXPECT_EQ(s.at("meshgate_drops_total{reason=\"eth_truncated\"}"), "0");
}

TEST(CoreMetrics, EveryLineIsHelpTypeOrASampleOfTheFamilyDeclaredLast) {
  TwoWorkers t;
  const std::string text = t.text();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::regex help(R"(# HELP (meshgate_[a-zA-Z0-9_:]*) \S.*)");
  const std::regex type(R"(# TYPE (meshgate_[a-zA-Z0-9_:]*) (counter|gauge))");
  const std::regex sample(
      R"((meshgate_[a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? [0-9]+)");
  std::string family, declared_help;
  std::set<std::string> families, series;
  for (const std::string& l : lines_of(text)) {
    std::smatch m;
    if (std::regex_match(l, m, help)) {
      declared_help = m[1];
      EXPECT_TRUE(families.insert(declared_help).second) << "family twice: " << l;
    } else if (std::regex_match(l, m, type)) {
      EXPECT_EQ(m[1], declared_help) << "TYPE must follow its HELP: " << l;
      family = m[1];
      if (m[2] == "counter") {
        EXPECT_TRUE(family.ends_with("_total")) << l;
      }
      EXPECT_FALSE(family.starts_with("meshgate_xds_")) << "reserved for the xDS provider";
    } else if (std::regex_match(l, m, sample)) {
      EXPECT_EQ(m[1], family) << "sample outside its family: " << l;
      EXPECT_TRUE(series.insert(l.substr(0, l.rfind(' '))).second) << "duplicate series: " << l;
    } else {
      ADD_FAILURE() << "not HELP, TYPE or a sample: '" << l << "'";
    }
  }
  for (const char* f :
       {"meshgate_packets_total", "meshgate_bytes_total", "meshgate_drops_total",
        "meshgate_flows_active", "meshgate_flows_established", "meshgate_flows_created_total",
        "meshgate_flows_expired_total", "meshgate_flows_moved_total",
        "meshgate_fast_path_packets_total",
        "meshgate_backend_packets_total", "meshgate_backend_reply_bytes_total",
        "meshgate_backend_flows_total", "meshgate_snapshot_version", "meshgate_ready",
        "meshgate_worker_loops_total", "meshgate_worker_busy_cycles_total"}) {
    EXPECT_TRUE(families.count(f)) << f;
  }
}

TEST(CoreMetrics, ExtraSourcesAppendTheirOwnFamilies) {
  TwoWorkers t;
  PromWriter w;
  write_core_metrics(t.in, w);
  const MetricsSource xds = [](PromWriter& pw) {
    pw.family("meshgate_xds_connected", MetricType::kGauge, "1 while the xDS stream is up.");
    pw.sample({{"address", "istiod:15012"}}, 1);
  };
  xds(w);
  const auto s = samples(w.text());
  EXPECT_EQ(s.at("meshgate_xds_connected{address=\"istiod:15012\"}"), "1");
  EXPECT_EQ(s.at("meshgate_flows_active"), "11");
}

}  // namespace
}  // namespace meshgate::ctl
