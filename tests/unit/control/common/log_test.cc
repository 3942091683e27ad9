// The control-plane logger: the text and JSON lines (timestamp, level, event, fields with
// quoted values, numbers, booleans and stray words), level filtering, and whole lines from
// several threads at once, written to stderr (captured).
#include "control/common/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace meshgate::ctl {
namespace {

// 2026-11-27T05:50:00.123Z
constexpr int64_t kT = 1795758600123;
const std::regex kTimestamp(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// Restores the logger's level and format after each test.
class LogTest : public testing::Test {
 protected:
  void TearDown() override {
    set_log_level(LogLevel::kInfo);
    set_log_format(LogFormat::kText);
  }
};

TEST_F(LogTest, TimestampIsRfc3339UtcWithMilliseconds) {
  EXPECT_EQ(rfc3339_utc_ms(kT), "2026-11-27T05:50:00.123Z");
  EXPECT_EQ(rfc3339_utc_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339_utc_ms(951782400007), "2000-02-29T00:00:00.007Z");
}

TEST_F(LogTest, TextLineIsTimestampLevelEventThenTheFieldsUnchanged) {
  EXPECT_EQ(format_log_line(LogFormat::kText, kT, LogLevel::kInfo, "port_started",
                            "port=net0 link=\"up 10 Gbps\""),
            "ts=2026-11-27T05:50:00.123Z level=info event=port_started port=net0 "
            "link=\"up 10 Gbps\"");
  EXPECT_EQ(format_log_line(LogFormat::kText, kT, LogLevel::kError, "qsbr_init_failed", ""),
            "ts=2026-11-27T05:50:00.123Z level=error event=qsbr_init_failed");
}

TEST_F(LogTest, JsonLineHasTsLevelEventFirstAndTypedFields) {
  const std::string line = format_log_line(
      LogFormat::kJson, kT, LogLevel::kWarn, "snapshot_published",
      "version=12 reason=mesh build_ms=3.5 delta=-4 synced=true path=\"/tmp/a b.toml\" "
      "mac=02:00:00:00:00:01 offloads=0x1f zip=007 big=18446744073709551615 empty=");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind(R"({"ts":"2026-11-27T05:50:00.123Z","level":"warn","event":"snapshot_published",)", 0),
            0u)
      << line;
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["version"], 12);
  EXPECT_TRUE(j["version"].is_number_integer());
  EXPECT_EQ(j["reason"], "mesh");
  EXPECT_DOUBLE_EQ(j["build_ms"].get<double>(), 3.5);
  EXPECT_EQ(j["delta"], -4);
  EXPECT_EQ(j["synced"], true);
  EXPECT_EQ(j["path"], "/tmp/a b.toml");
  EXPECT_EQ(j["mac"], "02:00:00:00:00:01");
  EXPECT_EQ(j["offloads"], "0x1f") << "hex stays text";
  EXPECT_EQ(j["zip"], "007") << "a leading zero is not a JSON number";
  EXPECT_EQ(j["big"].get<uint64_t>(), 18446744073709551615u);
  EXPECT_EQ(j["empty"], "");
  EXPECT_EQ(j.size(), 14u) << line;
}

TEST_F(LogTest, JsonQuotedValuesKeepUnescapedInnerQuotesAndUndoEscapes) {
  // Callers print error texts in quotes without escaping them.
  const auto j = nlohmann::json::parse(format_log_line(
      LogFormat::kJson, kT, LogLevel::kError, "config_reload_error",
      R"(result=invalid error="a.toml:3:9: mode: expected "nat" or "dsr", got "x"" n=2 )"
      R"(msg="say \"hi\" \\o/" last="ends with a quote"")"));
  EXPECT_EQ(j["result"], "invalid");
  EXPECT_EQ(j["error"], R"(a.toml:3:9: mode: expected "nat" or "dsr", got "x")");
  EXPECT_EQ(j["n"], 2);
  EXPECT_EQ(j["msg"], R"(say "hi" \o/)");
  EXPECT_EQ(j["last"], R"(ends with a quote")");
}

TEST_F(LogTest, JsonCollectsStrayWordsInMsgAndKeepsTheLinesOwnFields) {
  const auto j = nlohmann::json::parse(format_log_line(
      LogFormat::kJson, kT, LogLevel::kDebug, "xds_response",
      "type=address resources=2 ack event=spoof level=error ts=0 unterminated=\"abc"));
  EXPECT_EQ(j["event"], "xds_response");
  EXPECT_EQ(j["level"], "debug");
  EXPECT_EQ(j["ts"], "2026-11-27T05:50:00.123Z");
  EXPECT_EQ(j["_event"], "spoof");
  EXPECT_EQ(j["_level"], "error");
  EXPECT_EQ(j["_ts"], 0);
  EXPECT_EQ(j["msg"], "ack");
  EXPECT_EQ(j["resources"], 2);
  EXPECT_EQ(j["unterminated"], "abc");
}

TEST_F(LogTest, JsonReplacesInvalidUtf8InsteadOfThrowing) {
  const auto j = nlohmann::json::parse(format_log_line(LogFormat::kJson, kT, LogLevel::kInfo,
                                                       "x", "path=\"/tmp/\xff.toml\""));
  EXPECT_EQ(j["path"], "/tmp/\xef\xbf\xbd.toml");
}

TEST_F(LogTest, LogWritesOneTextLinePerEventAtOrAboveTheLevel) {
  set_log_level(LogLevel::kInfo);
  testing::internal::CaptureStderr();
  log(LogLevel::kInfo, "port_started", "port=%s queues=%u", "net0", 2u);
  log(LogLevel::kDebug, "hidden", "n=1");
  log(LogLevel::kWarn, "shown_warn");
  log(LogLevel::kError, "shown_error", "error=\"%s\"", "boom");
  const auto v = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(v.size(), 3u);
  const std::regex text(R"(ts=(\S+) level=info event=port_started port=net0 queues=2)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(v[0], m, text)) << v[0];
  EXPECT_TRUE(std::regex_match(m[1].str(), kTimestamp)) << m[1];
  EXPECT_NE(v[1].find(" level=warn event=shown_warn"), std::string::npos) << v[1];
  EXPECT_NE(v[2].find(" level=error event=shown_error error=\"boom\""), std::string::npos) << v[2];
}

TEST_F(LogTest, LevelFiltersEveryLevelAndCanChangeAtAnyTime) {
  const LogLevel levels[] = {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug};
  for (LogLevel set : levels) {
    set_log_level(set);
    EXPECT_EQ(log_level(), set);
    testing::internal::CaptureStderr();
    for (LogLevel l : levels) log(l, "e", "at=%s", log_level_name(l));
    const auto v = lines_of(testing::internal::GetCapturedStderr());
    ASSERT_EQ(v.size(), size_t(set) + 1) << log_level_name(set);
    for (LogLevel l : levels) EXPECT_EQ(log_enabled(l), int(l) <= int(set));
  }
}

TEST_F(LogTest, JsonFormatWritesOneObjectPerLine) {
  set_log_format(LogFormat::kJson);
  testing::internal::CaptureStderr();
  log(LogLevel::kInfo, "config_loaded", "path=\"%s\" ports=%zu services=%zu", "/etc/m g.toml",
      size_t(2), size_t(0));
  log_message(LogLevel::kWarn, "dpdk", "EAL: a \"quoted\" \\ text");
  const auto v = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(v.size(), 2u);
  const auto a = nlohmann::json::parse(v[0]);
  EXPECT_TRUE(std::regex_match(a["ts"].get<std::string>(), kTimestamp));
  EXPECT_EQ(a["level"], "info");
  EXPECT_EQ(a["event"], "config_loaded");
  EXPECT_EQ(a["path"], "/etc/m g.toml");
  EXPECT_EQ(a["ports"], 2);
  EXPECT_EQ(a["services"], 0);
  const auto b = nlohmann::json::parse(v[1]);
  EXPECT_EQ(b["event"], "dpdk");
  EXPECT_EQ(b["msg"], "EAL: a \"quoted\" \\ text");
}

TEST_F(LogTest, LogMessageEscapesQuotesInText) {
  testing::internal::CaptureStderr();
  log_message(LogLevel::kWarn, "dpdk", "EAL: a \"quoted\" \\ text");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find(" level=warn event=dpdk msg=\"EAL: a \\\"quoted\\\" \\\\ text\"\n"),
            std::string::npos)
      << out;
}

TEST_F(LogTest, LongFieldsAreNotTruncated) {
  const std::string big(5000, 'x');
  testing::internal::CaptureStderr();
  log(LogLevel::kInfo, "big", "v=%s end=1", big.c_str());
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("v=" + big + " end=1\n"), std::string::npos);
}

TEST_F(LogTest, LinesFromManyThreadsStayWhole) {
  set_log_format(LogFormat::kJson);
  constexpr int kThreads = 8, kLines = 200;
  const std::string pad(300, 'p');
  testing::internal::CaptureStderr();
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([t, &pad] {
      for (int i = 0; i < kLines; ++i) log(LogLevel::kInfo, "t", "thread=%d i=%d pad=%s", t, i, pad.c_str());
    });
  }
  for (auto& t : ts) t.join();
  const auto v = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(v.size(), size_t(kThreads * kLines));
  std::vector<int> next(kThreads, 0);
  for (const auto& l : v) {
    const auto j = nlohmann::json::parse(l);  // throws on an interleaved line
    const int t = j["thread"];
    EXPECT_EQ(j["i"], next[t]++) << "lines of one thread keep their order";
    EXPECT_EQ(j["pad"], pad);
  }
}

TEST_F(LogTest, ParsesLevelAndFormatNames) {
  LogLevel l;
  EXPECT_TRUE(parse_log_level("debug", &l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_FALSE(parse_log_level("warning", &l));
  EXPECT_FALSE(parse_log_level("", &l));
  LogFormat f;
  EXPECT_TRUE(parse_log_format("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_STREQ(log_format_name(f), "json");
  EXPECT_FALSE(parse_log_format("JSON", &f));
}

}  // namespace
}  // namespace meshgate::ctl
