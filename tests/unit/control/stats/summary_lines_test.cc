// The summary's lines that need no workers: the replay's tcpreplay-style rate lines, the hint for
// a capture made elsewhere and the generated packets by kind (control/stats/stats.h).
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

// A run whose one generated packet was an ICMP error says so; every kind is named, even at 0.
TEST(GeneratedText, NamesEveryKindTheGatewayOriginates) {
  StatsTotals t;
  t.generated = 1;
  t.icmp_errors_sent = 1;
  EXPECT_EQ(generated_text(t),
            "  generated                    1  (ARP requests 0, neighbor solicitations 0, ICMP "
            "errors 1, drain TCP RSTs 0, TCP stack frames 0)\n");
  t.generated = 2 + 3 + 1 + 4 + 5;
  t.arp_requests = 2;
  t.nd_solicits = 3;
  t.resets_sent = 4;
  t.stack_frames_out = 5;
  EXPECT_EQ(generated_text(t),
            "  generated                   15  (ARP requests 2, neighbor solicitations 3, ICMP "
            "errors 1, drain TCP RSTs 4, TCP stack frames 5)\n");
}

// Counted as generated, then no mbuf: none of the kinds, and said so rather than left unsummed.
TEST(GeneratedText, PacketsThatCouldNotBeBuiltAreTheRemainder) {
  StatsTotals t;
  t.generated = 7;
  t.arp_requests = 4;
  EXPECT_EQ(generated_text(t),
            "  generated                    7  (ARP requests 4, neighbor solicitations 0, ICMP "
            "errors 0, drain TCP RSTs 0, TCP stack frames 0, not built for want of an mbuf 3)\n");
}

// The figure the summary printed without a word: 139,317,358 cycles per packet.
TEST(CyclesHint, AnAbsurdCyclesPerPacketSaysTheCoreWasProbablyShared) {
  EXPECT_EQ(cycles_hint(0), "");
  EXPECT_EQ(cycles_hint(850.5), "");
  EXPECT_EQ(cycles_hint(kSharedCoreCyclesPerPacket), "");
  const std::string h = cycles_hint(139317358.0);
  EXPECT_NE(h.find("its core is probably shared with another busy process"), std::string::npos)
      << h;
  EXPECT_EQ(h.rfind("  hint ", 0), 0u);
  EXPECT_EQ(h.back(), '\n');
}

}  // namespace
}  // namespace meshgate::ctl
