// DPDK's log through meshgate's logger (route_dpdk_logs): rte_log lines become event=dpdk lines
// at the mapped level, filtered by meshgate's level, in both formats; a line logged in pieces
// comes out once. DPDK's logging works without rte_eal_init.
#include <gtest/gtest.h>
#include <rte_log.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>

#include "control/common/log.h"
#include "control/runtime/eal.h"

namespace meshgate::ctl {
namespace {

class DpdkLogTest : public testing::Test {
 protected:
  void SetUp() override {
    route_dpdk_logs();
    rte_log_set_global_level(RTE_LOG_DEBUG);
    type_ = rte_log_register_type_and_pick_level("meshgate.test", RTE_LOG_DEBUG);
    ASSERT_GE(type_, 0);
    ASSERT_EQ(rte_log_set_level(uint32_t(type_), RTE_LOG_DEBUG), 0);
  }
  void TearDown() override {
    set_log_level(LogLevel::kInfo);
    set_log_format(LogFormat::kText);
  }
  // What stderr receives while DPDK logs each {level, text} with rte_log.
  std::string logged(std::initializer_list<std::pair<uint32_t, const char*>> messages) {
    testing::internal::CaptureStderr();
    for (const auto& [level, text] : messages) rte_log(level, uint32_t(type_), "%s", text);
    return testing::internal::GetCapturedStderr();
  }
  int type_ = -1;
};

TEST_F(DpdkLogTest, LevelsMapFromDpdkToMeshgate) {
  EXPECT_EQ(log_level_of_dpdk(RTE_LOG_EMERG), LogLevel::kError);
  EXPECT_EQ(log_level_of_dpdk(RTE_LOG_CRIT), LogLevel::kError);
  EXPECT_EQ(log_level_of_dpdk(RTE_LOG_ERR), LogLevel::kError);
  EXPECT_EQ(log_level_of_dpdk(RTE_LOG_WARNING), LogLevel::kWarn);
  EXPECT_EQ(log_level_of_dpdk(RTE_LOG_NOTICE), LogLevel::kInfo);
  EXPECT_EQ(log_level_of_dpdk(RTE_LOG_INFO), LogLevel::kDebug);
  EXPECT_EQ(log_level_of_dpdk(RTE_LOG_DEBUG), LogLevel::kDebug);
  EXPECT_STREQ(dpdk_log_threshold(LogLevel::kError), "error");
  EXPECT_STREQ(dpdk_log_threshold(LogLevel::kWarn), "warning");
  EXPECT_STREQ(dpdk_log_threshold(LogLevel::kInfo), "notice");
  EXPECT_STREQ(dpdk_log_threshold(LogLevel::kDebug), "info");
}

TEST_F(DpdkLogTest, RteLogLineBecomesADpdkEventAtTheMappedLevel) {
  set_log_level(LogLevel::kInfo);
  const std::string out = logged({{RTE_LOG_WARNING, "TEST: port 3: \"odd\" link\n"},
                                  {RTE_LOG_INFO, "TEST: below info, not shown\n"},
                                  {RTE_LOG_NOTICE, "TEST: notice\n"},
                                  {RTE_LOG_ERR, "TEST: failed\n"}});
  const std::regex want(
      R"(ts=\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z level=warn event=dpdk msg="TEST: port 3: \\"odd\\" link"
ts=\S+ level=info event=dpdk msg="TEST: notice"
ts=\S+ level=error event=dpdk msg="TEST: failed"
)");
  EXPECT_TRUE(std::regex_match(out, want)) << out;
}

TEST_F(DpdkLogTest, ALineLoggedInPiecesComesOutOnceComplete) {
  set_log_level(LogLevel::kDebug);
  const std::string out = logged({{RTE_LOG_INFO, "TEST: lcores:"},
                                  {RTE_LOG_INFO, " 0"},
                                  {RTE_LOG_INFO, " 1\nTEST: second\n"}});
  const std::regex want(R"(ts=\S+ level=debug event=dpdk msg="TEST: lcores: 0 1"
ts=\S+ level=debug event=dpdk msg="TEST: second"
)");
  EXPECT_TRUE(std::regex_match(out, want)) << out;
}

TEST_F(DpdkLogTest, JsonFormatGivesTheTextAsMsg) {
  set_log_format(LogFormat::kJson);
  const std::string out = logged({{RTE_LOG_ERR, "EAL: Cannot open \"x\": key=value ok\n"}});
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out.back(), '\n');
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["event"], "dpdk");
  EXPECT_EQ(j["msg"], "EAL: Cannot open \"x\": key=value ok");
  EXPECT_EQ(j.size(), 4u) << out;
}

TEST_F(DpdkLogTest, LoweringMeshgatesLevelHidesDpdkLinesToo) {
  set_log_level(LogLevel::kError);
  const std::string out =
      logged({{RTE_LOG_WARNING, "TEST: hidden\n"}, {RTE_LOG_CRIT, "TEST: shown\n"}});
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("level=error event=dpdk msg=\"TEST: shown\""), std::string::npos) << out;
}

}  // namespace
}  // namespace meshgate::ctl
