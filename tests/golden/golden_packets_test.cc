// Golden packet fixtures (tests/golden/fixtures/*.txt): each fixture is a description, an input
// frame, the expected verdict (the port it leaves on, or the drop reason) and the expected
// output frames, written out as annotated hex. The frames were built and checked without
// meshgate (see each file's header), so a reviewer reads the expected bytes, not an oracle.
// Each file runs in order through one harness (the real worker burst functions on net_ring
// ports, tests/support/dp_harness.h): a reply fixture follows the one that opened its flow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/dp_harness.h"
#include "tests/support/frames.h"

namespace meshgate {
namespace {

namespace fs = std::filesystem;
using pkt::Bytes;

const fs::path kFixtureDir = fs::path(MG_SOURCE_DIR) / "tests/golden/fixtures";

struct Frame {
  std::string port;
  Bytes bytes;
};

struct Fixture {
  std::string description;
  int line = 0;  // of its `=== fixture` line
  Frame in;
  std::string verdict;  // "tx <port>" or "drop <reason>"
  std::vector<Frame> out;
};

struct FixtureFile {
  std::string config_toml;
  std::vector<Fixture> fixtures;
};

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Parses the format the fixture files' headers describe; throws with file:line on anything else.
FixtureFile parse_fixture_file(const fs::path& path) {
  FixtureFile file;
  std::istringstream in(read_text(path));
  std::string line;
  int n = 0;
  Bytes* hex = nullptr;  // where indented hex lines go
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(path.string() + ":" + std::to_string(n) + ": " + what);
  };
  const auto starts = [&](const char* prefix) { return line.rfind(prefix, 0) == 0; };
  while (std::getline(in, line)) {
    ++n;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    while (!line.empty() && std::isspace(uint8_t(line.back()))) line.pop_back();
    if (line.empty()) continue;
    if (std::isspace(uint8_t(line[0]))) {
      if (!hex) fail("hex outside an `in` or `out` frame");
      std::istringstream words(line);
      std::string w;
      while (words >> w) {
        if (w.size() != 2 || !std::isxdigit(uint8_t(w[0])) || !std::isxdigit(uint8_t(w[1]))) {
          fail("not a hex byte: " + w);
        }
        hex->push_back(uint8_t(std::stoul(w, nullptr, 16)));
      }
      continue;
    }
    hex = nullptr;
    if (starts("=== config ")) {
      file.config_toml = read_text(kFixtureDir / line.substr(11));
    } else if (starts("=== fixture ")) {
      file.fixtures.push_back({line.substr(12), n, {}, {}, {}});
    } else if (file.fixtures.empty()) {
      fail("`" + line + "` before the first `=== fixture`");
    } else if (starts("in ")) {
      file.fixtures.back().in.port = line.substr(3);
      hex = &file.fixtures.back().in.bytes;
    } else if (starts("verdict ")) {
      file.fixtures.back().verdict = line.substr(8);
    } else if (starts("out ")) {
      file.fixtures.back().out.push_back({line.substr(4), {}});
      hex = &file.fixtures.back().out.back().bytes;
    } else {
      fail("unknown line `" + line + "`");
    }
  }
  if (file.config_toml.empty()) fail("no `=== config` line");
  for (const Fixture& f : file.fixtures) {
    if (f.in.bytes.empty() || f.verdict.empty()) {
      n = f.line;
      fail("fixture without an input frame or a verdict");
    }
  }
  return file;
}

std::string hex_dump(const Bytes& b) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < b.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%02x", b[i]);
    s += (i % 16 == 0 ? (i ? "\n  " : "  ") : " ") + std::string(buf);
  }
  return s;
}

// Empty when equal; else where they first differ and both frames.
std::string byte_diff(const Bytes& want, const Bytes& got) {
  if (want == got) return "";
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  return "first difference at byte " + std::to_string(i) + " (expected " +
         std::to_string(want.size()) + " bytes, got " + std::to_string(got.size()) +
         ")\nexpected:\n" + hex_dump(want) + "\ngot:\n" + hex_dump(got);
}

// What happened to the input: the drop reasons counted since `before`, else the ports that sent.
std::string actual_verdict(const test::DataplaneHarness& h, const dp::WorkerCounters& before) {
  std::string v;
  const dp::WorkerCounters& now = h.counters();
  for (uint32_t r = 1; r < dp::kNumDrops; ++r) {
    if (now.drops[r] != before.drops[r]) v += (v.empty() ? "drop " : ", ") + std::string(dp::kDropNames[r]);
  }
  if (!v.empty()) return v;
  for (uint16_t p = 0; p < h.ports().size(); ++p) {
    if (!h.sent_on(p).empty()) v += (v.empty() ? "tx " : ", ") + h.config().ports[p].name;
  }
  return v.empty() ? "nothing sent, nothing dropped" : v;
}

std::vector<std::string> fixture_files() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kFixtureDir)) {
    if (e.path().extension() == ".txt") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class GoldenPackets : public testing::TestWithParam<std::string> {};

TEST_P(GoldenPackets, every_fixture_gives_its_verdict_and_its_output_bytes) {
  const fs::path path = kFixtureDir / (GetParam() + ".txt");
  const FixtureFile file = parse_fixture_file(path);
  ASSERT_FALSE(file.fixtures.empty());
  test::DataplaneHarness h(file.config_toml);
  const auto port_index = [&](const std::string& name) -> int {
    for (size_t p = 0; p < h.config().ports.size(); ++p) {
      if (h.config().ports[p].name == name) return int(p);
    }
    ADD_FAILURE() << "no port " << name << " in the config";
    return -1;
  };
  uint64_t ts = test::kT0;
  for (const Fixture& f : file.fixtures) {
    SCOPED_TRACE(path.filename().string() + ":" + std::to_string(f.line) + ": " + f.description);
    const int in_port = port_index(f.in.port);
    ASSERT_GE(in_port, 0);
    const dp::WorkerCounters before = h.counters();
    h.send(f.in.bytes, ts += 1000, uint16_t(in_port));
    const std::string verdict = actual_verdict(h, before);
    EXPECT_EQ(verdict, f.verdict);
    for (uint16_t p = 0; p < h.ports().size(); ++p) {
      std::vector<Bytes> want;
      for (const Frame& o : f.out) {
        if (port_index(o.port) == p) want.push_back(o.bytes);
      }
      const std::vector<Bytes>& got = h.sent_on(p);
      ASSERT_EQ(got.size(), want.size()) << "frames sent on " << h.config().ports[p].name;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(byte_diff(want[i], got[i]), "") << "output frame " << i;
      }
    }
    EXPECT_TRUE(h.balanced());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenPackets, testing::ValuesIn(fixture_files()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace meshgate
