// The summary's closing lines that need no workers: the replay's tcpreplay-style rate lines and
// the hint for a capture made elsewhere (control/stats/stats.h).
#include <gtest/gtest.h>

#include "control/stats/stats.h"

namespace meshgate::ctl {
namespace {

TEST(ReplayRateText, ActualAndRatedLinesAsTcpreplayPrintsThem) {
  EXPECT_EQ(replay_rate_text(2000, 1'000'000, 0.5),
            "Actual: 2000 packets (1000000 bytes) processed in 0.500000 seconds\n"
            "Rated: 2000000.0 Bps, 16.00 Mbps, 4000.00 pps\n");
}

TEST(ReplayRateText, NoElapsedTimeGivesRatesOfZeroNotInfinity) {
  EXPECT_EQ(replay_rate_text(5, 300, 0),
            "Actual: 5 packets (300 bytes) processed in 0.000000 seconds\n"
            "Rated: 0.0 Bps, 0.00 Mbps, 0.00 pps\n");
}

TEST(L2Hint, ShownOnlyWhenMoreThanHalfTheInputWentToAnotherMac) {
  struct Case {
    uint64_t in, not_for_us;
    bool hint;
  };
  const Case cases[] = {
      {0, 0, false},      // nothing read
      {100, 0, false},    // ordinary run
      {100, 50, false},   // half: not "most"
      {100, 51, true},    // most
      {100, 100, true},   // all
      {1, 1, true},
  };
  for (const Case& k : cases) {
    const std::string h = l2_hint(k.in, k.not_for_us);
    EXPECT_EQ(!h.empty(), k.hint) << k.in << " in, " << k.not_for_us << " l2_not_for_us";
    if (k.hint) {
      EXPECT_NE(h.find("most frames were for another MAC (l2_not_for_us)"), std::string::npos);
      EXPECT_NE(h.find("set promiscuous = true on the port or pass --promiscuous"),
                std::string::npos);
    }
  }
}

}  // namespace
}  // namespace meshgate::ctl
