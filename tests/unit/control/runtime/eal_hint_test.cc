// What a failed EAL start tells the user to do (control/runtime/eal.h eal_failure_hint).
#include <gtest/gtest.h>

#include "control/runtime/eal.h"

namespace meshgate::ctl {
namespace {

// A plan as plan_eal_on leaves it; user_memory: the user chose the memory (--no-huge, -m,
// --socket-mem).
EalPlan plan_of(std::vector<std::string> args, bool hugepages, uint32_t mb, bool user_memory) {
  EalPlan p;
  p.args = std::move(args);
  p.hugepages = hugepages;
  p.memory_mb = mb;
  p.user_args = user_memory;
  p.user_memory = user_memory;
  return p;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(EalFailureHint, UserHugepageMemoryWithoutHugepagesSuggestsNoHugeWithTheEstimate) {
  const std::string h = eal_failure_hint(plan_of({"--socket-mem", "4096"}, false, 731, true), 0);
  EXPECT_TRUE(has(h, "no hugepages for the 731 MiB meshgate estimated (0 MiB free)")) << h;
  EXPECT_TRUE(has(h, "'-- --no-huge -m 731'")) << h;
}

TEST(EalFailureHint, TooFewFreeHugepagesCountAsNone) {
  const std::string h = eal_failure_hint(plan_of({"--socket-mem", "4096"}, false, 731, true), 512);
  EXPECT_TRUE(has(h, "(512 MiB free)")) << h;
  EXPECT_TRUE(has(h, "'-- --no-huge -m 731'")) << h;
}

TEST(EalFailureHint, UserNoHugeGetsTheMemoryFigureOnly) {
  const std::string h = eal_failure_hint(plan_of({"--no-huge", "-m", "64"}, false, 731, true), 0);
  EXPECT_TRUE(has(h, "at least -m 731")) << h;
  EXPECT_FALSE(has(h, "no hugepages")) << h;
  EXPECT_FALSE(has(h, "--no-huge")) << h << ": they gave it already";
}

TEST(EalFailureHint, UserMemoryWithEnoughHugepagesGetsTheMemoryFigure) {
  const std::string h = eal_failure_hint(plan_of({"-m", "731"}, true, 731, true), 2048);
  EXPECT_TRUE(has(h, "at least -m 731")) << h;
  EXPECT_FALSE(has(h, "no hugepages")) << h;
}

TEST(EalFailureHint, MemoryDefaultsNameThePrivilegesTheEalNeeds) {
  const std::string h =
      eal_failure_hint(plan_of({"-l", "0-1", "--no-huge", "-m", "731"}, false, 731, false), 0);
  EXPECT_TRUE(has(h, "--no-huge -m 731")) << h;
  EXPECT_TRUE(has(h, "run as root")) << h;
}

}  // namespace
}  // namespace meshgate::ctl
